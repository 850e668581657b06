"""The leaderboard of a corpus: the newest score of every submission, rank intervals and tie groups from paired
comparisons (:mod:`unpooled.core.ranking` on the covariances stored at scoring, :attr:`.models.Score.paired`), an SVG
chart.

A leaderboard is built once per corpus, level and visibility scope and kept in Django's cache
(per process unless ``CACHES`` says otherwise) under a *fingerprint* of what it is built from: the
newest score of the corpus at that level, and the number and last change of the corpus's
submissions (``updated``: visibility, description; ``status_changed``: publication).  A new score,
a publication or a visibility change therefore shows at the next request; the entry also expires
after :data:`CACHE_SECONDS`, for what the fingerprint does not see (a team renamed in the admin).
The page caches its rendered table and chart under the same key (``leaderboard.html``).

**After a re-scoring** the worker that re-scored builds the public board of every level (:func:`warm`), so that
no reader waits for it; the ranking's critical values (Gaussian draws over every pair: about 0.2 s a metric at 100
systems) are kept in the same cache under a digest of the covariances (:func:`unpooled.core.ranking.critical_value`'s
``memo``), so a board of another scope or period that shows the same systems does not draw them again.

**Periods.** ``period`` (a :class:`~unpooled.service.corpora.models.Period`) restricts the board to the
submissions made in that period; ``None`` is the overall board (every submission).  A submission whose period
closed shows its frozen score (:class:`~unpooled.service.evaluations.models.ScoreSnapshot`, ``frozen`` on its
row), on the period's board and the overall one.  The key counts the corpus's periods and snapshots, so a period
opened or closed shows at the next request.

**The human reference** (:mod:`.reference`) is a marked row (``reference``) on every board of its corpus: it
takes no rank and is placed by its F1 among the ranked systems.
"""

from __future__ import annotations

import hashlib
import logging
import math
from types import SimpleNamespace

import numpy as np
from django.core.cache import cache
from django.db.models import Max

from unpooled.core.names import PROTOCOL_LABELS
from unpooled.core.plots.svg import interval_chart, pr_chart, unit_range
from unpooled.core.ranking import pairwise, rank_intervals
from unpooled.service.corpora.models import Corpus

from .models import Score
from .periods import board_submissions, period_info
from .policy import CONFIDENCE
from .rates import recall_protocol

log = logging.getLogger(__name__)

CACHE_SECONDS = 600
#: how long a ranking's critical value is kept (it depends on its covariances alone: a new scoring is a new key)
CRITICAL_SECONDS = 86_400
SCORE_FIELDS = ("id", "level", "estimator", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "draws",
                "labels_new", "labels_reused", "exhaustive_documents", "created", "recall_protocol")


def scope(user) -> str:
    """Whose view: ``all`` (organisers), ``team<id>`` (public plus that team's private submissions), ``public``."""
    from unpooled.service.accounts.actions import is_organiser, team_of

    if is_organiser(user):
        return "all"
    team = team_of(user)
    return f"team{team.pk}" if team is not None else "public"


def fingerprint(corpus: Corpus, level: str) -> str:
    """Changes whenever the leaderboard of ``corpus`` at ``level`` may change (one query, no model instances):
    the newest score id, the number of submissions, published and private ones, their last changes, the
    corpus's periods (opened, closed) and frozen scores, the levels it evaluates (the page says when this one is
    not among them) and its recall protocol (a change shows at once, before the re-scoring's new scores do)."""
    return _fingerprint("id", corpus.pk, level)[1]


def named_fingerprint(name: str, level: str) -> tuple[int, str] | None:
    """(the corpus's id, :func:`fingerprint`) of the corpus called ``name``, in one query and without a model
    instance (a cached page's view reads nothing else); ``None`` when there is no such corpus."""
    got = _fingerprint("name", name, level)
    return None if got[0] is None else got


def _fingerprint(column: str, value, level: str) -> tuple[int | None, str]:
    from django.db import connection

    from unpooled.service.annotation.models import AnnotationSettings
    from unpooled.service.corpora.models import Period
    from unpooled.service.submissions.models import Submission

    from .models import ScoreSnapshot

    score, sub, settings = Score._meta.db_table, Submission._meta.db_table, AnnotationSettings._meta.db_table
    period, snap, corpus = Period._meta.db_table, ScoreSnapshot._meta.db_table, Corpus._meta.db_table
    # the newest score as ORDER BY id DESC LIMIT 1 over IN (subquery): PostgreSQL walks the primary key
    # backwards and stops at the first match (0.1 ms; MAX() over a join reads every score: 7 ms at 6,000)
    sql = (f'WITH c AS (SELECT id FROM "{corpus}" WHERE {column} = %s) '
           f'SELECT c.id, (SELECT id FROM "{score}" WHERE level = %s AND submission_id IN '
           f'(SELECT id FROM "{sub}" WHERE corpus_id = c.id) ORDER BY id DESC LIMIT 1), COUNT(s.id), '
           f"SUM(CASE WHEN s.status = %s THEN 1 ELSE 0 END), SUM(CASE WHEN s.visibility = %s THEN 1 ELSE 0 END), "
           f'MAX(s.updated), MAX(s.status_changed), '
           f'(SELECT COUNT(id) FROM "{period}" WHERE corpus_id = c.id), '
           f'(SELECT COUNT(closed) FROM "{period}" WHERE corpus_id = c.id), '
           f'(SELECT COUNT(n.id) FROM "{snap}" n JOIN "{period}" p ON p.id = n.period_id WHERE p.corpus_id = c.id), '
           f'(SELECT MAX(n.id) FROM "{snap}" n JOIN "{period}" p ON p.id = n.period_id WHERE p.corpus_id = c.id), '
           f'(SELECT levels FROM "{settings}" WHERE corpus_id = c.id), '
           f'(SELECT recall_protocol FROM "{settings}" WHERE corpus_id = c.id) '
           f'FROM c LEFT JOIN "{sub}" s ON s.corpus_id = c.id GROUP BY c.id')
    with connection.cursor() as cur:
        cur.execute(sql, [value, level, Submission.Status.PUBLISHED, Submission.Visibility.PRIVATE])
        row = cur.fetchone()
    if row is None:
        return None, ""
    pk, row = row[0], row[1:]
    return pk, ("-".join(str(x or 0) for x in row[:4]) + "-" + hashlib.blake2b(
        f"{row[4]}|{row[5]}".encode(), digest_size=8).hexdigest() + "-" + ".".join(str(x or 0) for x in row[6:]))


def cache_key(corpus: Corpus, level: str, user=None, period=None) -> str:
    return (f"unpooled.leaderboard:{corpus.pk}:{corpus.name}:{level}:{scope(user)}:"
            f"p{period.pk if period is not None else 'all'}:{fingerprint(corpus, level)}")


def leaderboard(corpus: Corpus, *, level: str = "instance", user=None, key: str | None = None, period=None) -> dict:
    """Rows (newest score per published submission at ``level``) ranked by F1 with tie groups, and the charts.

    ``user``: whose view -- public submissions, plus the user's team's private ones
    (organisers see all); ``None`` is the public view.  Ranks are computed among the rows shown.
    Each row has ``rank`` (competition rank), ``group`` (tie group number), ``tied``, ``rank_lo``/``rank_hi``
    (the rank interval), ``better_than``/``worse_than`` (the names of the systems it is significantly better and
    worse than) and ``hover`` (that in words), ``name``, ``score`` (the
    :data:`SCORE_FIELDS` as attributes), ``submission`` (``pk``, ``run_id``, ``visibility``, ``team.name``,
    ``created``, ``description``, ``link``), ``truth`` (a gold layer's P, R, F1 and ``covered``: whether each lies
    in its interval; ``None`` without gold) and ``provenance`` (this level's ``drawn``, ``new``, ``reused``).  ``key`` is the cache key
    (``cache_seconds`` its lifetime), under which the page caches its rendered table; a caller that has
    computed it already passes it as ``key``.  ``period``: that period's submissions (and the human
    reference), ``None``: all; rows carry ``frozen`` (the time their score was frozen, or ``None``) and
    ``reference`` (the human reference: no rank).
    """
    key = key or cache_key(corpus, level, user, period)
    got = cache.get(key)
    if got is None:
        got = {**build(corpus, level=level, user=user, period=period), "key": key, "cache_seconds": CACHE_SECONDS}
        cache.set(key, got, CACHE_SECONDS)
    return got


def warm(corpus: Corpus) -> None:
    """Build the public board of every level into the cache (after a re-scoring, in the worker: the first reader
    then finds it); a board that fails to build is logged, never raised (the scores stand, a reader builds it)."""
    from .policy import SERVICE_LEVELS

    for level in SERVICE_LEVELS:
        try:
            leaderboard(corpus, level=level)
        except Exception:  # noqa: BLE001 - warming is an optimisation: the page builds the board itself
            log.exception("leaderboard of %s at level %s not warmed", corpus.name, level)


class _Critical:
    """The ranking's critical values in the pages' cache (:func:`unpooled.core.ranking.critical_value`'s ``memo``:
    shared by the processes of a machine, and the worker that warms the boards)."""

    @staticmethod
    def get(key: str):
        return cache.get(key)

    @staticmethod
    def set(key: str, value) -> None:
        cache.set(key, value, CRITICAL_SECONDS)


def in_progress(corpus: Corpus, user=None, *, level: str | None = None) -> list[dict]:
    """How many submissions of the corpus the viewer may see are still being evaluated (not published, not
    failed), per stage: ``status``, ``label`` (the stage's words), ``n``.  ``user`` as for :func:`leaderboard`:
    another team's private submissions are not counted.  With ``level``, also the published submissions whose
    score at that level is still to come (:func:`unpooled.service.evaluations.status.level_states`)."""
    from unpooled.service.accounts.actions import visible_submissions
    from unpooled.service.submissions.models import Submission

    busy = (visible_submissions(user, Submission.objects.filter(corpus=corpus)).exclude(
        status__in=(Submission.Status.PUBLISHED, Submission.Status.FAILED)).order_by("id").values_list("status", flat=True))
    out: dict[str, int] = {}
    for st in busy:
        out[st] = out.get(st, 0) + 1
    rows = [{"status": st, "label": Submission.Status(st).label, "n": n} for st, n in out.items()]
    if level is not None:
        from .status import level_states

        published = visible_submissions(user, Submission.objects.filter(
            corpus=corpus, status=Submission.Status.PUBLISHED, is_reference=False)).only("pk", "status", "plan")
        n = sum(1 for states in level_states(published).values() for r in states
                if r["level"] == level and r["state"] in ("waiting", "todo"))
        if n:
            rows.append({"status": "published", "label": f"published, still waiting for labels at the {level} level",
                         "n": n})
    return rows


#: the columns of the CSV download (:func:`csv_rows`), in order
CSV_COLUMNS = ("rank", "tied", "team", "run", "submission", "visibility", "submitted", "level", "p", "p_lo", "p_hi",
               "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "labelled_draws", "drawn_instances", "labels_new",
               "labels_reused", "exhaustive_documents", "estimator", "scored", "description", "link",
               "p_true", "p_covered", "r_true", "r_covered", "f1_true", "f1_covered", "period", "reference", "frozen",
               "rank_lo", "rank_hi", "recall_protocol")


def csv_rows(board: dict) -> list[list]:
    """The board's rows for a CSV file (:data:`CSV_COLUMNS`), written by the web's one CSV writer
    (:mod:`unpooled.service.web.csv_download`, which keeps text cells from running as formulas)."""
    out = []
    for r in board["rows"]:
        s, sub, t = r["score"], r["submission"], r["truth"] or {}
        cov = t.get("covered") or {}
        out.append([r["rank"], int(r["tied"]), sub.team.name, sub.run_id, sub.pk, sub.visibility,
                    sub.created.isoformat() if sub.created else "", board["level"],
                    s.p, s.p_lo, s.p_hi, s.r, s.r_lo, s.r_hi, s.f1, s.f1_lo, s.f1_hi, s.draws,
                    r["provenance"].get("drawn", ""), s.labels_new, s.labels_reused, s.exhaustive_documents,
                    s.estimator, s.created.isoformat() if s.created else "", sub.description, sub.link,
                    t.get("p"), cov.get("p"), t.get("r"), cov.get("r"), t.get("f1"), cov.get("f1"),
                    getattr(sub, "period", None), int(bool(r.get("reference"))),
                    r["frozen"].isoformat() if r.get("frozen") else "", r.get("rank_lo"), r.get("rank_hi"),
                    s.recall_protocol])
    return [[("" if v is None else v) for v in row] for row in out]


def _charts(rows: list[dict], level: str) -> tuple[str, str]:
    """The F1 interval chart and the precision-recall chart (truth markers where a gold layer gives them)."""

    names = [r["name"] for r in rows]
    truth = [r["truth"] or {} for r in rows]
    has_truth = any(t.get("f1") is not None for t in truth)

    def col(attr):
        return [getattr(r["score"], attr) for r in rows]

    def fcol(attr):  # as numbers, a missing value NaN
        return np.array([math.nan if v is None else float(v) for v in col(attr)])

    def tcol(k):
        return [t.get(k) if t.get(k) is not None else math.nan for t in truth]

    def short(name: str, n: int = 30) -> str:  # the chart's label column is at most 40% of its width
        return name if len(name) <= n else name[:n - 1] + "…"

    labels = [short(r["name"]) if r.get("reference") else f"{'=' if r['tied'] else ''}{r['rank']} {short(r['name'])}"
              for r in rows]
    f1 = interval_chart(labels, col("f1"),
                        col("f1_lo"), col("f1_hi"), truth=tcol("f1") if has_truth else None,
                        title=f"F1, 90% intervals ({level} level)", value_label="F1", series_label="F1",
                        truth_label="truth (gold layer)", width=520,
                        value_range=unit_range([fcol("f1"), fcol("f1_lo"), fcol("f1_hi")]
                                               + ([np.array(tcol("f1"))] if has_truth else [])))
    pr = pr_chart(names, col("r"), col("r_lo"), col("r_hi"), col("p"), col("p_lo"), col("p_hi"),
                  truth_x=tcol("r") if has_truth else None, truth_y=tcol("p") if has_truth else None,
                  title=f"Precision and recall, 90% intervals ({level} level)", width=520, height=440)
    return f1, pr


def build(corpus: Corpus, *, level: str = "instance", user=None, period=None) -> dict:
    """:func:`leaderboard` without the cache.

    Returns ``rows`` (see :func:`leaderboard`), ``svg`` (F1 with intervals), ``pr_svg`` (precision against recall
    with both intervals), ``level``, ``has_truth`` (a gold layer gave some row its truth), ``in_progress``
    (:func:`in_progress`) and ``period`` (the period shown, or ``None``).  Ranks are competition ranks among the
    systems: the first row of a tie group gets the number of rows above it plus one, and every member shares it
    (1, =2, =2, 4); the human reference takes none and is placed by its F1.
    """
    from .models import ScoreSnapshot

    busy = in_progress(corpus, user, level=level)
    subs = board_submissions(corpus, user, period)
    newest = dict(Score.objects.filter(submission__in=subs.values("pk"), level=level).values("submission_id")
                  .annotate(m=Max("id")).values_list("submission_id", "m"))
    # a frozen submission shows its snapshot (the re-scoring writes none after it; this holds whatever happens)
    frozen = {}
    for sid, score_id, when in ScoreSnapshot.objects.filter(submission__in=subs.values("pk"), level=level).values_list(
            "submission_id", "score_id", "frozen"):
        newest[sid], frozen[sid] = score_id, when
    extra = ("submission_id", "submission__run_id", "submission__visibility", "submission__team__name",
             "details__truth", "details__provenance", "submission__created", "submission__description",
             "submission__link", "submission__is_reference", "submission__period__number", "details__anytime",
             "paired")
    rows_db = list(Score.objects.filter(id__in=list(newest.values())).order_by("submission_id").values_list(
        *SCORE_FIELDS, *extra))
    if not rows_db:
        return {"rows": [], "svg": "", "pr_svg": "", "level": level, "has_truth": False, "in_progress": busy,
                "period": period_info(period), "pairs": {"p": [], "r": [], "f1": []}, **_protocol_info(corpus, [])}
    n = len(SCORE_FIELDS)
    # details: only the truth (a gold layer's P/R/F1, for demos), the provenance and the anytime-valid intervals,
    # never the stored breakdowns
    scores = [SimpleNamespace(**dict(zip(SCORE_FIELDS, r[:n])), details={"truth": r[n + 4]} if r[n + 4] else {},
                              anytime=r[n + 11] or {}, recall_label=PROTOCOL_LABELS.get(r[n - 1], r[n - 1]))
              for r in rows_db]
    subs_of = [SimpleNamespace(pk=r[n], id=r[n], run_id=r[n + 1], visibility=r[n + 2],
                               team=SimpleNamespace(name=r[n + 3]), created=r[n + 6], description=r[n + 7] or "",
                               link=r[n + 8] or "", is_reference=bool(r[n + 9]), period=r[n + 10]) for r in rows_db]

    def arr(name):
        return np.array([getattr(s, name) if getattr(s, name) is not None else math.nan for s in scores], dtype=float)

    f1 = arr("f1")
    # the human reference takes no rank (it is no team's run): ranks and tie groups are the systems' alone
    ranked = [i for i in range(len(scores)) if not subs_of[i].is_reference]
    paired = [rows_db[i][n + 12] or {} for i in ranked]
    names = [f"{subs_of[i].team.name}/{subs_of[i].run_id}" for i in ranked]
    cov = {k: covariance_matrix(k, paired, [subs_of[i].pk for i in ranked], arr(f"{k}_lo")[ranked],
                                arr(f"{k}_hi")[ranked]) for k in ("p", "r", "f1")}
    rk = rank_intervals(f1[ranked], cov["f1"], CONFIDENCE, memo=_Critical)
    order = [ranked[k] for k in rk.order]
    rank = {ranked[k]: (int(rk.rank[k]), int(rk.group[k]), bool(rk.tied[k])) for k in range(len(ranked))}
    intervals = {ranked[k]: _rank_info(k, rk, names) for k in range(len(ranked))}
    tables = {"f1": rk.pairs, **{k: pairwise(arr(k)[ranked], cov[k], CONFIDENCE, memo=_Critical) for k in ("p", "r")}}
    for i in (i for i in range(len(scores)) if subs_of[i].is_reference):  # placed by its F1 among the ranked
        at = len(order) if math.isnan(f1[i]) else next((k for k, j in enumerate(order) if not f1[j] >= f1[i]),
                                                       len(order))
        order.insert(at, i)
    rows = []
    for i in order:
        s, sub = scores[i], subs_of[i]
        ref = sub.is_reference
        truth = s.details.get("truth") or None
        r_, g_, t_ = rank.get(i, (None, None, False))
        rows.append({"rank": r_, "group": g_, "tied": t_, "score": s, "submission": sub, **intervals.get(i, {}),
                     "name": "human reference (exhaustive annotation)" if ref else f"{sub.team.name}/{sub.run_id}",
                     "truth": truth, "provenance": rows_db[i][n + 5] or {}, "reference": ref,
                     "frozen": frozen.get(sub.pk), "period": sub.period})
    svg, pr_svg = _charts(rows, level)
    return {"rows": rows, "svg": svg, "pr_svg": pr_svg, "level": level, "has_truth": any(r["truth"] for r in rows),
            "in_progress": busy, "period": period_info(period),
            **_protocol_info(corpus, [scores[i].recall_protocol for i in ranked]),
            "pairs": {k: _pair_rows(tb, [subs_of[i] for i in ranked], names) for k, tb in tables.items()}}


def _protocol_info(corpus: Corpus, protocols: list[str]) -> dict:
    """Which recall protocol the board's numbers follow: ``recall_protocol`` (``mixed`` when ranked rows differ, e.g.
    one frozen under the other), ``recall_label`` (its words, for the note beside the header) and
    ``corpus_protocol`` (the corpus's setting, which the next scores will follow)."""
    now = recall_protocol(corpus)
    got = set(protocols) or {now}
    one = got.pop() if len(got) == 1 else "mixed"
    label = PROTOCOL_LABELS.get(one, "mixed: each row names its own")
    return {"recall_protocol": one, "recall_label": label, "corpus_protocol": now,
            "corpus_label": PROTOCOL_LABELS[now]}


def covariance_matrix(metric: str, paired: list[dict], pks: list[int], lo: np.ndarray, hi: np.ndarray
                      ) -> np.ndarray:
    """The covariance matrix of the rows' estimates of ``metric`` from their stored covariances
    (:attr:`.models.Score.paired`: the scores of one scoring know each other's).  A pair of scores of different
    scorings (a frozen score beside newer ones) is taken as independent, which overstates the variance of the
    difference of positively correlated estimates (the comparison is then conservative); a variance not stored
    is the interval's, :math:`((h - l)/2z)^2` (:func:`unpooled.core.ranking.independent_cov`)."""
    from unpooled.core.ranking import independent_cov

    m = len(pks)
    C = independent_cov(lo, hi, CONFIDENCE)
    index = {str(pk): k for k, pk in enumerate(pks)}
    for a, info in enumerate(paired):
        v = (info.get("var") or {}).get(metric)
        if v is not None:
            C[a, a] = v
        for key, c in ((info.get("cov") or {}).get(metric) or {}).items():
            b = index.get(key)
            if b is not None and c is not None and paired[b].get("batch") == info.get("batch"):
                C[a, b] = C[b, a] = c
    d = np.diag(C).copy()
    C[np.diag_indices(m)] = np.where(np.isfinite(d), d, 1.0)  # no interval: never separated
    return np.nan_to_num(C)


#: the hover text names at most this many systems on each side
HOVER_NAMES = 8


def _rank_info(k: int, rk, names: list[str]) -> dict:
    """Row ``k``'s rank interval and the systems it is significantly better and worse than (names), and the
    hover text that says so."""
    better = [names[j] for j in np.flatnonzero(rk.better[k])]
    worse = [names[j] for j in np.flatnonzero(rk.better[:, k])]
    level = round(100 * CONFIDENCE)

    def listed(xs):
        return ", ".join(xs[:HOVER_NAMES]) + (f" and {len(xs) - HOVER_NAMES} more" if len(xs) > HOVER_NAMES else "")

    parts = [f"rank {rk.rank_lo[k]}" + (f" to {rk.rank_hi[k]}" if rk.rank_hi[k] != rk.rank_lo[k] else "")
             + f" ({level}% for every rank at once)"]
    if better:
        parts.append(f"better than {listed(better)} with {level}% confidence")
    if worse:
        parts.append(f"{listed(worse)} better with {level}% confidence")
    if not better and not worse and len(names) > 1:
        parts.append("not separated from any other system")
    return {"rank_lo": int(rk.rank_lo[k]), "rank_hi": int(rk.rank_hi[k]), "better_than": better,
            "worse_than": worse, "hover": "; ".join(parts)}


def _pair_rows(tb, subs: list, names: list[str]) -> list[dict]:
    """The pairwise table (:class:`unpooled.core.ranking.Pairs`) as rows naming the two submissions."""
    out = []
    d = tb.diff
    for i, j, diff, se, lo, hi, sign in zip(tb.i.tolist(), tb.j.tolist(), d.value.tolist(), d.se.tolist(),
                                             d.lo.tolist(), d.hi.tolist(), tb.sign.tolist()):
        out.append({"a": subs[i].pk, "a_name": names[i], "b": subs[j].pk, "b_name": names[j], "diff": diff,
                    "se": se, "lo": lo, "hi": hi, "better": {1: "a", -1: "b"}.get(sign),
                    "critical": tb.critical, "method": d.method})
    return out


def comparisons(board: dict, sub_pk: int, previous: list[int]) -> list[dict]:
    """The submission ``sub_pk`` against the leader of ``board`` (:func:`leaderboard`, the viewer's; the runner-up
    when it leads) and against its team's previous run (the first of ``previous``, newest first, on the board),
    from the board's pairwise tables: per comparison ``role``, ``name``, ``submission`` and per metric (``p``,
    ``r``, ``f1``) the difference this run minus the other, its simultaneous interval (``lo``, ``hi``) and
    ``verdict``: ``better``, ``worse`` or ``None`` (the data cannot tell).  Empty when the run is not on the board."""
    ranked = [r for r in board["rows"] if not r.get("reference")]
    on = {r["submission"].pk: r for r in ranked}
    if sub_pk not in on:
        return []
    others = []
    top = next((r for r in ranked if r["submission"].pk != sub_pk), None)
    if top is not None:
        leads = ranked[0]["submission"].pk == sub_pk
        others.append(("runner-up" if leads else "leader", top))
    prev = next((on[pk] for pk in previous if pk in on and pk != sub_pk), None)
    if prev is not None:
        others.append(("previous run", prev))
    out = []
    for role, row in others:
        other = row["submission"].pk
        metrics = {}
        for k, table in board["pairs"].items():
            pair = next((p for p in table if {p["a"], p["b"]} == {sub_pk, other}), None)
            if pair is None:
                continue
            sign = 1 if pair["a"] == sub_pk else -1
            lo, hi = (pair["lo"], pair["hi"]) if sign == 1 else (-pair["hi"], -pair["lo"])
            mine = {"a": sign == 1, "b": sign == -1}.get(pair["better"])
            metrics[k] = {"diff": sign * pair["diff"], "lo": lo, "hi": hi,
                          "verdict": None if mine is None else ("better" if mine else "worse")}
        out.append({"role": role, "name": row["name"], "submission": other, "metrics": metrics})
    return out
