"""Entity scores of a corpus's submissions: the database read into core inputs, the core called, the result stored.

The formulas are in :mod:`unpooled.core.estimators.entities`; this module only gathers what they need:

* the exhaustive documents (:class:`~unpooled.service.annotation.models.ExhaustiveDocument`) whose entity task is
  complete, each with its inclusion probability, aggregated layer (mentions, types, clusters, links) and the
  counted answers it was aggregated from (the core corrects its labels with them) and the schema's entity types;
* every submission's mentions in those documents (its entity's type and first KB link), and which of them are
  arguments of its relation instances;
* the relation evaluation's design at one level (its draws, the rows of :math:`p_i`, the instances' spans), and
  the verification answers on the drawn instances' subject and object: "is it a valid mention" (``subject_ok``,
  ``object_ok``), pooled per span and corrected for the annotators' error rates
  (:func:`~unpooled.core.estimators.entities.validity_labels`).

What they read is kept in process memory by :mod:`.entity_inputs` under fingerprints read on every call, and so are
the core's document terms (:func:`~unpooled.core.estimators.entities.document_terms`, every figure but mention
precision and F1): after a label batch only the argument mentions' precision is computed again; after a new
submission, its own part of the document terms, then the crowd's rates and what they move (a few array operations a
submission, :func:`~unpooled.core.estimators.entities.system_part`).

Verification never shows a system's KB links (:func:`~unpooled.service.annotation.payloads.verify_payload`), so
linking is scored from the exhaustive layer only; a layer without any link (a corpus whose gold layer has none,
Re-DocRED) leaves linking unscored, with that reason on the page.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from django.db.models import Exists, OuterRef, Subquery

from unpooled.core.estimators.entities import (argument_precision, document_side, document_terms, entity_scores,
                                               system_part, validity_labels)
from unpooled.core.estimators.joint import weight_matrix
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import RelationInstance, Submission, SubmissionMention

from . import entity_inputs
from .models import ENTITY_SCORES, EntityScore, ScoreSnapshot
from .periods import frozen_writes
from .policy import CONFIDENCE

log = logging.getLogger(__name__)

#: the relation level whose draws give the verified argument mentions, in order of preference
LEVEL_ORDER = ("instance", "relation", "entity", "subj-rel", "fill")
#: how relation spans and mentions are matched (as relation instances are, by default)
MATCH = "overlap"


def _arguments(corpus: Corpus, scored, level: str, subs: list[Submission], answers: list) -> tuple[dict | None, dict]:
    """The argument-mention precision of every submission from the relation design (core) and the verification
    answers on the drawn instances' arguments (``answers``: :func:`.entity_inputs.argument_answers`' rows), and
    notes."""
    res = scored.result
    info: dict = {"level": level}
    m = len(subs)
    if res is None or scored.universe is None or not len(res.design.xs):
        return None, info
    d = res.design
    U = min(d.P.shape[1], len(scored.universe))
    span_id, rows, cols, K = entity_inputs.argument_spans(corpus, scored.universe, U)
    args = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(U, max(K, 1)))
    # the answers on the drawn instances' arguments: one item per (task, role)
    keys = set(scored.keys or ())
    items: dict = {}
    it, wk, yv = [], [], []
    item_span: list = []
    for task_id, key, doc, subj, obj, ann, s_ok, o_ok in answers:
        if key not in keys:
            continue
        for role, span, ok in (("subject", subj, s_ok), ("object", obj, o_ok)):
            if span is None or not isinstance(ok, bool):
                continue
            sid = span_id.get((doc, span[0], span[1]))
            if sid is None or sid >= K:
                continue
            k = items.setdefault((task_id, role), len(items))
            if k == len(item_span):
                item_span.append(sid)
            it.append(k)
            wk.append(ann)
            yv.append(int(ok))
    labels, rates = validity_labels(it, wk, yv, n_items=len(items))
    valid = np.full(max(K, 1), np.nan)
    if items:
        spans = np.asarray(item_span, dtype=np.int64)
        num = np.bincount(spans, weights=np.nan_to_num(labels), minlength=max(K, 1))
        cnt = np.bincount(spans, weights=~np.isnan(labels), minlength=max(K, 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            valid = np.where(cnt > 0, num / cnt, np.nan)
    # draws whose arguments were never judged (labels from elsewhere): left out, and counted
    drawn = args[d.xs]
    judged = np.ones(len(d.xs), dtype=bool)
    co = drawn.tocoo()
    np.logical_and.at(judged, co.row, ~np.isnan(valid[co.col]))
    info["draws_unjudged"] = int((~judged).sum())
    info["rates"] = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in rates.items()}
    if not judged.any():
        return None, info
    if not judged.all():
        d = replace(d, src=d.src[judged], xs=d.xs[judged], f=d.f[judged],
                    gs=None if d.gs is None else d.gs[:, judged])
    W = weight_matrix(d.P, d.n, "balance")
    ap = argument_precision(d, W, args, valid, rates=rates, confidence=CONFIDENCE)
    pos = {sub.pk: i for i, sub in enumerate(subs)}
    out = {"p": np.full(m, np.nan), "var": np.full(m, np.nan), "sizes": np.zeros(m, np.int64),
           "draws": np.zeros(m, np.int64)}
    n = d.n
    for j, name in enumerate(res.systems):
        sub = scored.by_name.get(name)
        if sub is None or sub.pk not in pos:
            continue
        i = pos[sub.pk]
        out["p"][i], out["var"][i], out["sizes"][i], out["draws"][i] = ap["p"][j], ap["var"][j], ap["sizes"][j], n[j]
    return out, info


@dataclass
class Computed:
    """What :func:`results` computed: per submission (``subs``) its core :class:`EntityScores` and ``counts``, and
    what they rest on."""

    subs: list
    scores: list
    counts: list
    docs: list
    level: str | None
    info: dict
    identity: dict


def results(corpus: Corpus, *, level: str | None = None) -> Computed | None:
    """The core's entity scores of every submission of ``corpus`` with mentions or instances (None: none has)."""
    from . import scoring
    from .models import Draw

    # (one index probe per submission, not a pass over every instance and mention of the corpus)
    subs = list(Submission.objects.filter(corpus=corpus).filter(
        Exists(SubmissionMention.objects.filter(submission_id=OuterRef("pk")))
        | Exists(RelationInstance.objects.filter(submission_id=OuterRef("pk")))).order_by("id"))
    if not subs:
        return None
    docs_fp, docs = entity_inputs.exhaustive_documents(corpus)
    if level is None:
        drawn = set(Draw.objects.filter(submission__corpus=corpus).values_list("level", flat=True).distinct())
        level = next((lv for lv in LEVEL_ORDER if lv in drawn), None)
    arguments, info = None, {"level": level}
    if level is not None:
        scored = scoring.score(corpus, level=level, match=MATCH)
        answers_fp, answers = entity_inputs.argument_answers(corpus)
        # the same relation inputs (None: nothing scored), answers and submissions: the same precision, kept
        args_key = (level, MATCH, scored.fp, answers_fp, tuple((s.pk, s.created) for s in subs))
        arguments, info = entity_inputs.arguments(corpus, args_key,
                                                  lambda: _arguments(corpus, scored, level, subs, answers))
    systems, arg_spans, counts = entity_inputs.system_inputs(subs, docs)
    identity_fp, identity = entity_inputs.nil_identity(corpus)
    types = sorted(corpus.schema.schema().entity_types) or None
    settings = {"argument_spans": arg_spans, "match": MATCH, "nil_identity": identity or None,
                "confidence": CONFIDENCE, "types": types}
    # the document side changes only with the documents, the submissions or the identity, not with a label batch;
    # a submission's part of it only with the documents or the identity (a new submission computes its own)
    side_key = (docs_fp, tuple(types or ()), MATCH, CONFIDENCE)
    key = (side_key, identity_fp, tuple((s.pk, s.created) for s in subs))

    def compute():
        side = entity_inputs.document_side(corpus, side_key, lambda: document_side(
            docs, match=MATCH, confidence=CONFIDENCE, types=types))
        parts = entity_inputs.system_parts(subs, key[:2], lambda i: system_part(
            side, systems[i], arg_spans[i], nil_identity=identity or None))
        return document_terms(docs, systems, side=side, parts=parts, **settings)

    terms = entity_inputs.document_terms(corpus, key, compute)
    scores = entity_scores(docs, systems, mention_counts=counts, arguments=arguments, terms=terms, **settings)
    return Computed(subs, scores, counts, docs, level, info, identity)


def compute(corpus: Corpus, *, level: str | None = None) -> list[EntityScore]:
    """Entity scores of every submission of ``corpus`` with mentions or instances (:func:`results`); stores one
    :class:`EntityScore` per submission whose figures changed, but none for a submission whose entity scores are
    frozen (its period closed: :func:`.periods.frozen_writes`, as the relation scores), and returns the new rows."""
    got = results(corpus, level=level)
    if got is None:
        return []
    subs, docs, level, info, identity = got.subs, got.docs, got.level, got.info, got.identity
    layer_links = any(mm.link for d in docs for mm in d.mentions)
    out = []
    with frozen_writes(corpus) as frozen:
        # each submission's newest entity score (one index probe each: their history is never read)
        last = (Submission.objects.filter(pk__in=[s.pk for s in subs])
                .annotate(e=Subquery(EntityScore.objects.filter(submission_id=OuterRef("pk")).order_by("-id")
                                     .values("id")[:1])).values("e"))
        newest = {e.submission_id: e for e in EntityScore.objects.filter(pk__in=Subquery(last))}
        for sub, res, (M, A) in zip(subs, got.scores, got.counts):
            if (sub.pk, ENTITY_SCORES) in frozen:
                continue
            details = res.to_dict()
            details.update({"mentions": M, "argument_mentions": A, "layer_has_links": layer_links,
                            "nil_across_documents": bool(identity),
                            "verification": info, "confidence": CONFIDENCE, "match": MATCH})
            old = newest.get(sub.pk)
            if old is not None and old.details == details and old.level == (level or ""):
                continue
            out.append(EntityScore.objects.create(submission=sub, level=level or "", documents=len(docs),
                                                  details=details))
    return out


def newest(sub: Submission) -> EntityScore | None:
    """The submission's published entity score: its frozen one (its period closed), else its newest; ``frozen`` on
    it says when it was frozen (``None``: it was not)."""
    snap = ScoreSnapshot.objects.filter(submission=sub, level=ENTITY_SCORES).select_related("entity_score").first()
    es = snap.entity_score if snap is not None else EntityScore.objects.filter(submission=sub).order_by("-id").first()
    if es is not None:
        es.frozen = snap.frozen if snap is not None else None
    return es


def rows_for_display(es: EntityScore | None) -> list[dict]:
    """The metrics of an entity score in display order: label, value, interval, n, reason."""
    from unpooled.core.estimators.entities import LABELS, METRICS

    if es is None:
        return []
    got = (es.details or {}).get("metrics", {})
    out = []
    for k in METRICS:
        m = got.get(k) or {}
        out.append({"key": k, "label": LABELS[k], "value": m.get("value"), "lo": m.get("lo"), "hi": m.get("hi"),
                    "n": m.get("n", 0), "reason": m.get("reason", "")})
    return out


#: below this estimated accuracy of the crowd's mention judgements, the page warns: scores computed from the
#: aggregated layer alone are biased (``unpooled simulate entities``: at 0.75 with 3 answers, typing -2.9 and NIL
#: B-cubed precision -4.4 points; with 5 answers -0.4 and -1.9); scores from the answers are corrected, but rest on
#: the crowd's rates being alike across mentions, and NIL B-cubed recall only approximately (+0.5 to +1 point)
WARN_ACCURACY = 0.85


def page_context(sub: Submission) -> dict | None:
    """What the submission page's entity section shows (None: no entity score yet)."""
    es = newest(sub)
    if es is None:
        return None
    det = es.details or {}
    rows = rows_for_display(es)
    ver = det.get("verification") or {}
    rates = ver.get("rates") or {}
    acc = rates.get("accuracy")
    unscored = {}
    for r in rows:
        if r["value"] is None and r["reason"]:
            unscored.setdefault(r["reason"], []).append(r["label"])
    from unpooled.core.annotation.clustering import combine_agreement
    from unpooled.service.annotation.clustering import clustering_tasks

    cts = clustering_tasks(sub.corpus)
    clustering = None
    if cts:
        res = [ct.result or {} for ct in cts]
        clustering = {"items": sum(len((ct.payload or {}).get("items", [])) for ct in cts),
                      "clusters": sum(len(r.get("clusters", [])) for r in res),
                      "answers": min(r.get("answers") or 0 for r in res),
                      **combine_agreement([r.get("agreement") or {} for r in res])}
    return {
        "clustering": clustering,
        "score": es, "rows": rows, "documents": es.documents, "level": es.level,
        "mentions": det.get("mentions"), "argument_mentions": det.get("argument_mentions"),
        "argument_share": det.get("argument_share"), "argument_draws": det.get("argument_draws"),
        "parts": det.get("parts") or {}, "notes": det.get("notes") or [], "match": det.get("match"),
        # one definition of annotator quality on every page (web/_crowd_rates.html): the one-coin accuracy a of the
        # mention-validity judgements is sensitivity a and false-positive rate 1 - a
        "accuracy": acc, "rates": {"sens": acc, "fpr": 1 - acc} if acc is not None and math.isfinite(acc) else None,
        "corrected": rates.get("corrected"), "unjudged": ver.get("draws_unjudged") or 0,
        "weak_crowd": acc is not None and acc < WARN_ACCURACY,
        "crowd": det.get("crowd") or {},
        "layer_corrected": any(((det.get("crowd") or {}).get("corrected") or {}).values()),
        "unscored": [{"reason": k, "metrics": v} for k, v in unscored.items()],
        "layer_has_links": det.get("layer_has_links"), "nil_across": det.get("nil_across_documents"),
    }


def api_dict(es: EntityScore) -> dict:
    """An entity score as the API gives it (``frozen``: when it was frozen, as :func:`newest` and
    :func:`leaderboard` set it)."""
    det = es.details or {}
    return {"id": es.pk, "created": es.created.isoformat(), "frozen": getattr(es, "frozen", None), "level": es.level,
            "documents": es.documents,
            "confidence": det.get("confidence"), "match": det.get("match"),
            "metrics": det.get("metrics", {}), "mentions": det.get("mentions"),
            "argument_mentions": det.get("argument_mentions"), "argument_draws": det.get("argument_draws"),
            "notes": det.get("notes") or [],
            "crowd_accuracy": ((det.get("verification") or {}).get("rates") or {}).get("accuracy")}


def csv_columns() -> tuple[str, ...]:
    """The columns of the entity board's CSV download (:func:`csv_rows`), in order: who, then each metric's value,
    interval, count and the reason it is not scored."""
    from unpooled.core.estimators.entities import METRICS

    return (("rank", "tied", "team", "run", "submission", "visibility", "ranked_by", "documents", "scored", "frozen",
             "period", "reference")
            + tuple(f"{k}{x}" for k in METRICS for x in ("", "_lo", "_hi", "_n", "_not_scored")))


def csv_rows(board: dict) -> list[list]:
    """The entity board's rows (:func:`leaderboard`) for a CSV file (:func:`csv_columns`), written by the web's one
    CSV writer (:mod:`unpooled.service.web.csv_download`)."""
    out = []
    for r in board["rows"]:
        e, sub = r["entity"], r["entity"].submission
        row = [r["rank"], int(r["tied"]), sub.team.name, sub.run_id, sub.pk, sub.visibility, board["metric"],
               e.documents, e.created.isoformat() if e.created else "",
               r["frozen"].isoformat() if r.get("frozen") else "", sub.period.number if sub.period_id else "",
               int(sub.is_reference)]
        for x in rows_for_display(e):
            row += [x["value"], x["lo"], x["hi"], x["n"], x["reason"] if x["value"] is None else ""]
        out.append(["" if v is None else v for v in row])
    return out


def leaderboard(corpus: Corpus, *, metric: str = "mention_f1", user=None, period=None) -> dict:
    """The newest entity score of every published submission ``user`` may see (``period``: of that period, and the
    human reference, as the other boards: :func:`.periods.board_submissions`; a frozen submission's is its
    snapshot, with ``frozen`` on its row), ranked by ``metric`` with tie
    groups and competition ranks from simultaneous pairwise comparisons (:func:`unpooled.core.ranking.rank_intervals`;
    each system's entity scores come from its own fit, so they are taken as independent,
    :func:`unpooled.core.ranking.independent_cov`), and an SVG chart.

    Rows whose ``metric`` cannot be scored come last with the reason.  Not cached: one query per table and the
    rows' JSON, bounded by the number of visible submissions.
    """
    from django.db.models import Max

    from unpooled.core.estimators.entities import LABELS, METRICS
    from unpooled.core.plots.svg import interval_chart
    from unpooled.core.ranking import independent_cov, rank_intervals

    from .periods import board_submissions, period_info

    if metric not in METRICS:
        raise ValueError(f"metric: expected one of {', '.join(METRICS)}, got {metric!r}")
    subs = board_submissions(corpus, user, period).values("pk")
    ids = dict(EntityScore.objects.filter(submission__in=subs).values("submission_id")
               .annotate(m=Max("id")).values_list("submission_id", "m"))
    frozen = {}
    for sid, eid, when in ScoreSnapshot.objects.filter(submission__in=subs, level=ENTITY_SCORES).values_list(
            "submission_id", "entity_score_id", "frozen"):
        ids[sid], frozen[sid] = eid, when
    got = list(EntityScore.objects.filter(id__in=list(ids.values()))
               .select_related("submission__team", "submission__period")
               .order_by("submission_id"))
    for e in got:
        e.frozen = frozen.get(e.submission_id)
    if not got:
        return {"rows": [], "svg": "", "metric": metric, "label": LABELS[metric], "period": period_info(period)}

    def val(es, k):
        m = ((es.details or {}).get("metrics") or {}).get(metric) or {}
        v = m.get(k)
        return math.nan if v is None else float(v)

    est = np.array([val(e, "value") for e in got])
    lo = np.array([val(e, "lo") for e in got])
    hi = np.array([val(e, "hi") for e in got])
    scored = np.flatnonzero(~np.isnan(est))
    rows = []
    if len(scored):
        rk = rank_intervals(est[scored], independent_cov(lo[scored], hi[scored], CONFIDENCE), CONFIDENCE)
        for k in rk.order:
            e = got[scored[k]]
            rows.append({"rank": int(rk.rank[k]), "tied": bool(rk.tied[k]), "entity": e,
                         "name": f"{e.submission.team.name}/{e.submission.run_id}", "rows": rows_for_display(e),
                         "frozen": e.frozen})
    for i in range(len(got)):
        if np.isnan(est[i]):
            e = got[i]
            rows.append({"rank": None, "tied": False, "entity": e, "name": f"{e.submission.team.name}/"
                         f"{e.submission.run_id}", "rows": rows_for_display(e), "frozen": e.frozen})
    shown = [r for r in rows if r["rank"] is not None]
    svg = ""
    if shown:
        svg = interval_chart([r["name"] for r in shown],
                             [{x["key"]: x for x in r["rows"]}[metric]["value"] for r in shown],
                             [{x["key"]: x for x in r["rows"]}[metric]["lo"] for r in shown],
                             [{x["key"]: x for x in r["rows"]}[metric]["hi"] for r in shown],
                             title=f"{LABELS[metric]} with 90% intervals", value_label=LABELS[metric],
                             item_label="system", value_range=(0.0, 1.0))
    return {"rows": rows, "svg": svg, "metric": metric, "label": LABELS[metric], "period": period_info(period)}
