"""Publish: score every submission of a corpus jointly (:mod:`.scoring`, the core's estimate) and store the
results: one :class:`~.models.Score` per submission and level (none where it would repeat the newest), then the
breakdowns, the entity scores, the truth beside each score where the corpus has a gold layer, and the human
reference's own score.

The estimates are those of the core's ``score`` on :func:`~.inputs.offline_data` with the crowd's answers (the
from-scratch path), computed incrementally by :mod:`.scoring`; nothing here computes an estimate.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from time import perf_counter, process_time

import numpy as np

from django.db.models import Count, Exists, F, Max, OuterRef, Q

from unpooled.core.estimators.anytime import design_intervals
from unpooled.core.json_text import finite
from unpooled.service.annotation.models import Kind, Label, TaskRequest
from unpooled.service.corpora.models import Corpus
from unpooled.service.locks import exclusive
from unpooled.service.submissions.models import Submission

from . import inputs, reference, scoring
from .breakdown import VERSION, compute_breakdowns
from .confidences import ppi_details
from .entities import compute as compute_entities
from .models import Draw, Score
from .periods import frozen_writes
from .truth import attach_truth

log = logging.getLogger(__name__)

#: a score's figures, each from its system's row (:meth:`~unpooled.core.offline.SystemScore.to_dict`)
BOUNDS = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")


def flagged_draws(corpus: Corpus):
    """The draws of the corpus's submissions, each flagged by where its key's label comes from: ``paid`` (the
    draw's submission created its key's verification task, and pays for it), ``asked`` (the submission asked for
    that task: created it or joined it) and ``labelled`` (the key has a label)."""
    def requests():
        return TaskRequest.objects.filter(submission_id=OuterRef("submission_id"), task__kind=Kind.VERIFY,
                                          task__key_hash=OuterRef("key_hash"), task__key=OuterRef("key"))

    labelled = Label.objects.filter(corpus=corpus, key_hash=OuterRef("key_hash"), key=OuterRef("key"))
    return Draw.objects.filter(submission__corpus=corpus).annotate(
        paid=Exists(requests().filter(committed_cents__gt=0)), asked=Exists(requests()), labelled=Exists(labelled))


def label_provenance(corpus: Corpus, level: str) -> dict[int, dict[str, int]]:
    """Per submission, where the labels of its draws at ``level`` come from (one query).

    ``drawn``: distinct instance keys among its draws at the level; ``new``: those whose verification task this
    submission created (and paid for); ``reused``: the other drawn keys that have a label -- labelled before it
    asked, or by a task another submission created (it joined that task).  ``new + reused <= drawn``, and each
    level counts its own draws (a submission drawn at three levels has three sets of counts).
    """
    rows = (flagged_draws(corpus).filter(level=level).order_by()
            .values("submission_id")
            .annotate(drawn=Count("key", distinct=True), new=Count("key", distinct=True, filter=Q(paid=True)),
                      reused=Count("key", distinct=True, filter=Q(paid=False, labelled=True))))
    return {r["submission_id"]: {"drawn": r["drawn"], "new": r["new"], "reused": r["reused"]} for r in rows}


def score_corpus(corpus: Corpus, *, level: str = "instance", match: str = "overlap",
                 weights: str = "balance") -> list[Score]:
    """Score every submission of the corpus jointly with all labels so far; store one Score each, unless it would
    repeat the submission's newest one (:func:`_unchanged`: that one is returned instead).

    The estimates are :func:`offline_data` + the core's ``score`` with the crowd's answers (the from-scratch
    path), computed incrementally: :mod:`.scoring` keeps the label-free parts in memory and re-reads only what
    changed.  ``details`` keeps the labelled-sample figures (majority labels taken as certain) beside the
    published ones, the crowd's mean rates, and the variance by source.  ``labels_new`` and ``labels_reused``
    (and ``details['provenance']``) are this level's own: :func:`label_provenance`.
    """
    got = scoring.score(corpus, level=level, match=match, weights=weights)
    res, by_name, docs = got.result, got.by_name, got.docs
    if res is None:
        return []
    sc = res.scores
    cs = design_intervals(res.design, sc)  # the anytime-valid intervals beside the fixed-n ones
    out = []
    prov = label_provenance(corpus, level)
    pks = [by_name[row.system].pk for row in res.rows]
    batch = _batch(level, pks, sc)
    ppi = _ppi(got, corpus, level)
    for i, row in enumerate(res.rows):
        sub = by_name[row.system]
        pv = prov.get(sub.pk, {"drawn": 0, "new": 0, "reused": 0})
        new, reused = pv["new"], pv["reused"]

        def num(x):
            # labels corrected for the crowd's errors may leave [0, 1], and a point estimate with them by a
            # little; what is published is clipped (the raw value is kept in details)
            return None if x is None or math.isnan(x) else min(1.0, max(0.0, float(x)))

        out.append(Score(
            submission=sub, level=level, estimator=f"joint/{weights}/{res.options.get('match', match)}",
            recall_protocol=res.options.get("recall_protocol", "sentence"),
            **{k: num(v) for k, v in row.to_dict().items() if k in BOUNDS}, draws=row.labels, labels_new=new,
            labels_reused=reused, exhaustive_documents=docs,
            details=finite({"ess": row.ess, "warnings": list(row.warnings) + list(res.warnings), "provenance": pv,
                                 "raw": {"p": row.precision.value, "r": row.recall.value, "f1": row.f1.value},
                                 "anytime": anytime_details(cs, i),
                                 **_crowd_details(sc, i), **({"ppi": ppi[i]} if ppi[i] else {})}),
            paired=paired_details(got.covariances, i, pks, batch)))
    with frozen_writes(corpus) as frozen:
        # a submission of a closed period keeps the score it was frozen with (periods.py): its draws and labels
        # still take part in the others' joint estimates above, but no new score of its own is written
        out = [s for s in out if (s.submission.pk, level) not in frozen]
        kept = _unchanged(out, level, inputs.digest(got.fp))
        made = Score.objects.bulk_create([s for s in out if s.submission_id not in kept])
        # the leaderboard reads a submission's newest score's covariances only: the superseded ones drop theirs (the
        # history of scores would otherwise keep an m x m table for every scoring)
        Score.objects.filter(submission_id__in=[s.submission_id for s in made], level=level,
                             paired__has_key="batch").exclude(pk__in=[s.pk for s in made]).update(paired={})
    for s in out:
        if s.submission_id in kept:
            kept[s.submission_id].submission = s.submission
    return [kept.get(s.submission_id, s) for s in out]


#: what a score is beside its figures (``details`` but the truth, which :mod:`.truth` puts beside them afterwards)
RECORD = ("estimator", "recall_protocol", "draws", "labels_new", "labels_reused", "exhaustive_documents")


def _unchanged(scores: list[Score], level: str, fp: str) -> dict[int, Score]:
    """The newest score of each submission of ``scores`` (unsaved) that the new one would repeat (submission id ->
    Score): the same figures, counts, details and covariances, and a breakdown computed from the same inputs (``fp``:
    the digest of their fingerprint) with the same estimator, so the breakdown too would be the same.  A re-scoring
    with nothing new therefore writes no row: what a score's history shows (:func:`.status.score_change`: when the
    figures changed and what they were) reads the same, and the pages' cached renders stay valid."""
    newest = (Score.objects.filter(submission_id__in=[s.submission_id for s in scores], level=level).order_by()
              .values("submission_id").annotate(m=Max("id")).values("m"))
    old = {s.submission_id: s for s in Score.objects.filter(
        id__in=newest, breakdown__inputs=fp, breakdown__version=VERSION, breakdown__estimator=F("estimator"))}
    out = {}
    for s in scores:
        o = old.get(s.submission_id)
        if o is None or any(getattr(o, k) != getattr(s, k) for k in BOUNDS + RECORD) or o.paired != s.paired:
            continue
        details = {k: v for k, v in o.details.items() if k != "truth"}
        if details == json.loads(json.dumps(s.details)):
            out[s.submission_id] = o
    return out


def _batch(level: str, pks: list[int], sc) -> str:
    """The id that tells the scores of one scoring (:func:`paired_details`): a digest of the level, the systems and
    their estimates, so the same inputs give the same id (reproducible) and another scoring another."""
    text = repr((level, pks, [np.asarray(getattr(sc, k).value, float).round(12).tolist() for k in ("p", "r", "f1")]))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def paired_details(cv, i: int, pks: list[int], batch: str) -> dict:
    """What :attr:`.models.Score.paired` keeps of system ``i``'s covariances (``cv``: the scoring's
    :class:`~unpooled.core.estimators.paired.Covariances`, or None): the scoring (``batch``: the scores of one
    scoring know each other's), per metric its variance (``var``) and its non-zero covariances with the other
    submissions (``cov``, by submission id)."""
    if cv is None:
        return {}

    out = {"batch": batch, "var": {}, "cov": {}}
    for k, C in cv.cov.items():
        out["var"][k] = finite(float(C[i, i]))
        row = C[i]
        vals = row.tolist()  # (a score's m covariances per metric, for m scores: one pass each, not m calls)
        out["cov"][k] = {str(pks[j]): vals[j] for j in np.flatnonzero((row != 0) & np.isfinite(row)).tolist() if j != i}
    return out


def _ppi(got, corpus: Corpus, level: str) -> list:
    """The prediction-powered precision beside each score (:mod:`.confidences`); none when it fails."""
    try:
        return ppi_details(got)
    except Exception:  # noqa: BLE001 - the scores stand without the figure shown beside them
        log.exception("prediction-powered precision of %s at level %s failed", corpus.name, level)
        return [None] * len(got.result.rows)


def _crowd_details(sc, i: int) -> dict:
    """The labelled-sample figures, the crowd's rates and the variance by source of system ``i``, when the
    scores come from the crowd's votes."""
    if sc.raw is None:
        return {}

    def num(x):
        x = float(x)
        return None if math.isnan(x) else x

    return {"sample": {k: num(v[i]) for k, v in sc.raw.items()},
            "crowd_rates": {k: num(v) for k, v in sc.rates.items()},
            "variance": {src: {k: num(v[i]) for k, v in parts.items()} for src, parts in sc.var_parts.items()}}


def anytime_details(cs, i: int) -> dict:
    """System ``i``'s anytime-valid bounds (``p_cs_lo`` ... ``f1_cs_hi``; None where undefined) and how they were
    made, for ``Score.details['anytime']``."""
    row = {k: None if math.isnan(v) else min(1.0, max(0.0, v)) for k, v in cs.row(i).items()}
    return {**row, "method": cs.boundary, "tight_at": cs.tight_at}


def leaderboard_row(s: Score) -> dict:
    sub = s.submission
    cs = s.details.get("anytime") or {}
    return {"submission": sub.pk, "team": sub.team.name, "run": sub.run_id, "level": s.level,
            "p": s.p, "p_lo": s.p_lo, "p_hi": s.p_hi, "r": s.r, "r_lo": s.r_lo, "r_hi": s.r_hi,
            "f1": s.f1, "f1_lo": s.f1_lo, "f1_hi": s.f1_hi,
            **{f"{k}_cs_{b}": cs.get(f"{k}_cs_{b}") for k in ("p", "r", "f1") for b in ("lo", "hi")},
            "labels_new": s.labels_new,
            "labels_reused": s.labels_reused, "draws": s.draws, "exhaustive_documents": s.exhaustive_documents,
            "estimator": s.estimator, "warnings": s.details.get("warnings", [])}


def rescore(corpus: Corpus, *, timings: dict | None = None, cpu: dict | None = None) -> list[Score]:
    """Score every submission of the corpus at every level that has draws, then the breakdowns, the truth (with a
    gold layer) and the entity scores.  ``timings``: filled with the seconds of each part (``scoring.score``'s,
    summed over the levels, then ``store``, ``breakdowns``, ``entities``), ``cpu`` with the CPU seconds of this
    process in the ``breakdowns`` and the ``entities``, for ``unpooled bench rescore``."""
    t = timings if timings is not None else {}
    c = cpu if cpu is not None else {}
    out: list[Score] = []
    by_level = {}
    for level in scoring.levels_with_draws(corpus):
        t0 = perf_counter()
        by_level[level] = score_corpus(corpus, level=level)
        out += by_level[level]
        for k, v in scoring.last_timings.items():
            t[k] = t.get(k, 0.0) + v
        t["store"] = t.get("store", 0.0) + perf_counter() - t0 - sum(scoring.last_timings.values())
    t0, c0 = perf_counter(), process_time()
    for level, scores in by_level.items():
        breakdowns(corpus, level)
        if corpus.has_gold:
            truth(corpus, level, scores)
    t["breakdowns"], c["breakdowns"] = perf_counter() - t0, process_time() - c0
    t0, c0 = perf_counter(), process_time()
    entities(corpus)
    t["entities"], c["entities"] = perf_counter() - t0, process_time() - c0
    return out


def entities(corpus: Corpus) -> None:
    """The entity scores (mentions, types, links, NIL clusters) beside the relation scores."""
    try:
        compute_entities(corpus)
    except Exception:  # noqa: BLE001 - the relation scores stand without the entity scores
        log.exception("entity scores of %s failed", corpus.name)


def truth(corpus: Corpus, level: str, scores: list[Score]) -> None:
    """With a gold layer (a demo, a validation corpus): each new score keeps the true P, R, F1 beside it."""
    try:
        attach_truth(corpus, [leaderboard_row(s) for s in scores], level=level)
    except Exception:  # noqa: BLE001 - the scores stand without their truth
        log.exception("truth of %s at level %s failed", corpus.name, level)


def breakdowns(corpus: Corpus, level: str) -> None:
    """Per-relation and per-type breakdowns of the new scores, computed here so that pages never compute them."""
    try:
        compute_breakdowns(corpus, level)
    except Exception:  # noqa: BLE001 - the scores stand; the page computes the breakdown on demand instead
        log.exception("breakdown of %s at level %s failed", corpus.name, level)


def rescore_all(corpus: Corpus) -> int:
    """Re-score every submission of the corpus, and the human reference; one re-scoring at a time per corpus
    (a later one reads the labels the earlier one wrote its scores from, or newer: the newest score is never
    computed from older labels than the one before it).  Returns the number of scores (written, or kept where a new
    one would have repeated them)."""
    with exclusive("rescore", corpus.pk):
        scores = rescore(corpus) if Draw.objects.filter(submission__corpus=corpus,
                                                        submission__is_reference=False).exists() else []
        if Submission.objects.filter(corpus=corpus, is_reference=True).exists():
            reference.on_labels(corpus)  # the human reference, scored on its own (reference.py)
    return len(scores)
