r"""Re-scoring: the joint estimates of a corpus from its :mod:`.inputs` (the cached reader) and the core.

:func:`score` reads the corpus's :class:`~.inputs.Inputs` at a level (:func:`.inputs.read`, which keeps the pool,
the truth, the draws, the labels and the crowd's confusions in memory and checks each against a fingerprint on
every call), calls :func:`unpooled.core.estimators.estimate` on them, and keeps the result per (corpus, level,
match, weights, labels) with the inputs' fingerprint: re-scoring with nothing new returns it.  It reads nothing
from the database itself.

A batch of new labels therefore costs: the fingerprint queries, the new label rows, the
confusions' refit if answers changed, and :func:`unpooled.core.estimators.estimate` on the
updated :class:`~unpooled.core.estimators.joint.Design`.  The result is the same as the
from-scratch path (:func:`from_scratch`) to float round-off: the same arrays in the same
order reach the same estimator (tests/service/test_scoring_incremental.py; ``unpooled bench
rescore`` checks it at 100 submissions).

**Which submissions a new label affects.**  With the joint estimator every system's
estimate uses every labelled draw of every system (the proposal :math:`q_i` mixes all
:math:`p_j`, and :math:`\hat\nu_i` averages over all draws), so a new label on a key drawn
at a level changes every submission's score at that level, and the confusions are refitted over all answers,
so new answers move every item's vote likelihood: a label batch re-scores every submission at every level with
draws (:func:`~.publish.rescore`); a level whose inputs did not change returns its kept result.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from unpooled.core.errors import check_choice
from unpooled.core.estimators import LEVELS, estimate
from unpooled.core.estimators.joint import WEIGHTS, WeightDegeneracyWarning
from unpooled.core.offline import OfflineResult, system_rows
from unpooled.core.offline import score as offline_score
from unpooled.service.corpora.models import Corpus

from . import inputs, rates
from .models import Draw
from .policy import CONFIDENCE, LABEL_METHOD

log = logging.getLogger(__name__)

#: results kept (least recently used dropped first): a few corpora's levels
MAX_RESULTS = 4 * inputs.MAX_POOLS * len(LEVELS)
_results: OrderedDict[tuple, tuple] = OrderedDict()  # (corpus, level, match, weights, method) -> (fp, result)
#: seconds per part of the last :func:`score` (pool, truth, draws, labels, confusions, design, estimate)
last_timings: dict[str, float] = {}


# -- scoring -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scored:
    """One scoring: the core's result, the submissions by system name, and the exhaustive documents.  Not a result
    type of its own: the estimates are the core's (``result``: :class:`~unpooled.core.offline.OfflineResult`, whose
    rows hold :class:`~unpooled.core.estimators.results.Estimate`); the rest is what the service read to make them.

    ``keys``: the instance key of each labelled draw in the design's order (``result.design.xs``);
    ``truth``: the exhaustive true instances in the order of ``result.design.g0``'s columns (both
    filled by :func:`score`, for post-processing that would otherwise re-read them).
    """

    result: OfflineResult | None
    by_name: dict
    docs: int
    timings: dict = field(default_factory=dict)
    keys: list | None = None
    truth: list | None = None
    #: the pool's instances (``result.design.P``'s columns), when scored from the cache
    universe: list | None = None
    #: the crowd's votes the estimate used (None: from labels alone)
    votes: object = None
    #: the submitted confidences on the pool (:func:`.inputs.confidences`; None: all 1)
    confidences: object = None
    #: the covariances of the estimates (:class:`unpooled.core.estimators.paired.Covariances`; None: not computed)
    covariances: object = None
    #: the inputs' fingerprint (:attr:`.inputs.Inputs.fp`) and what the breakdowns group by (:class:`.inputs.Groups`)
    fp: tuple | None = None
    groups: object = None



def score(corpus: Corpus, *, level: str = "instance", match: str = "overlap", weights: str = "balance",
          label_method: str = LABEL_METHOD) -> Scored:
    """Joint scores of every submission of ``corpus`` from :func:`.inputs.read`: the core's estimate, kept per
    (corpus, level, match, weights, labels) and returned again while the inputs are unchanged.

    The same result as :func:`from_scratch` (to float round-off); ``result`` is None when no
    submission has instances.
    """
    from time import perf_counter

    check_choice("weights", weights, WEIGHTS)
    t: dict = {}
    last_timings.clear()
    with inputs.lock:
        got = inputs.read(corpus, level=level, match=match, label_method=label_method, timings=t)
        if got is None:
            t.pop("start", None)
            return Scored(None, {}, 0, t)
        rkey = (inputs.corpus_key(corpus), level, match, weights, label_method)
        done = _results.get(rkey)
        if done is not None and done[0] == got.fp:  # nothing changed: the same result
            res, cov = done[1], done[2]
        else:
            t["start"] = perf_counter()
            res = _rows(got.design, got.names, got.truth, level=level, weights=weights, match=match, votes=got.votes,
                        recall_protocol=got.recall_protocol)
            t["estimate"] = perf_counter() - t["start"]
            cov = _covariances(res, got.votes)
            res = replace(res, scores=replace(res.scores, linear=None))  # the linear parts served the covariances
            t["covariances"] = perf_counter() - t["start"] - t["estimate"]
            _results[rkey] = (got.fp, res, cov)
        _results.move_to_end(rkey)
        while len(_results) > MAX_RESULTS:
            _results.popitem(last=False)
    t.pop("start", None)
    last_timings.clear()
    last_timings.update(t)
    return Scored(res, got.by_name, got.docs, t, got.keys, got.truth, got.universe, got.votes, got.confidences,
                  covariances=cov, fp=got.fp, groups=got.groups)


def _covariances(res: OfflineResult, votes):
    """The covariances of the joint estimates (:func:`unpooled.core.estimators.paired.covariances`), for the
    pairwise comparisons and rank intervals; None when they fail (the scores stand without them: the leaderboard
    then takes the systems as independent)."""
    from unpooled.core.estimators.paired import covariances

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeightDegeneracyWarning)
            return covariances(res.design, res.scores, votes=votes)
    except Exception:  # noqa: BLE001 - the scores stand without their covariances
        log.exception("covariances of %d systems failed", len(res.systems))
        return None



def _rows(design, names: tuple[str, ...], truth, *, level: str, weights: str, match: str, votes=None,
          recall_protocol: str = "sentence") -> OfflineResult:
    """:func:`unpooled.core.offline.score`'s rows for the joint estimator, from a ready design, as
    :func:`from_scratch` calls it (the document count and the sentence split given, the crowd's votes)."""
    glob: list[str] = []
    if design.n0 == 0:
        glob.append("the exhaustive file has no true instances: recall and F1 are undefined")
    if any(t.weight != 1.0 for t in truth):
        glob.append("p0 weights of the exhaustive file are known only for its instances; other pooled instances "
                    "get weight 1 in the joint recall estimate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightDegeneracyWarning)
        sc = estimate(design, estimator="joint", weights=weights, confidence=CONFIDENCE, bootstrap=0, rng=None,
                      votes=votes, linear=weights != "minvar")
    rows = system_rows(sc, design.n, names)
    opts = {"level": level, "estimator": "joint", "weights": weights, "match": match, "bootstrap": 0,
            "confidence": CONFIDENCE, "documents": design.n_groups, "documents_given": design.n_groups is not None,
            "sentences": recall_protocol == "sentence", "outside_p0": int((design.p0[design.xs] == 0).sum()),
            "recall_protocol": recall_protocol}
    if recall_protocol == "document":
        opts["match"] = "cluster"
    return OfflineResult(rows, sc, design, names, tuple(glob), (), opts)


def from_scratch(corpus: Corpus, *, level: str = "instance", match: str = "overlap", weights: str = "balance"
                 ) -> Scored:
    """The reference path: everything read and built anew (:func:`~.inputs.offline_inputs` + the core's
    ``score``)."""
    data, by_name, docs, sentences, answers = inputs.offline_inputs(corpus, level=level)
    if not data.submissions:
        return Scored(None, {}, 0)
    # the exhaustive documents as the service counts them, the corpus's sentence split, the crowd's answers; under
    # the document recall protocol facts between the corpus's entity clusters (the matching is by cluster)
    protocol = rates.recall_protocol(corpus)
    res = offline_score(data, level=level, estimator="joint", weights=weights,
                        match="exact" if protocol == "document" else match, corrected_labels=True,
                        documents=docs or None, sentences=sentences, votes=answers, recall_protocol=protocol)
    return Scored(res, by_name, docs, keys=[x.key for x in data.labels], truth=list(data.exhaustive))


# -- what to re-score -------------------------------------------------------------------------------------
def levels_with_draws(corpus: Corpus) -> list[str]:
    got = set(Draw.objects.filter(submission__corpus=corpus, submission__is_reference=False)
              .values_list("level", flat=True).distinct())
    return [lv for lv in LEVELS if lv in got]


def clear_cache() -> None:
    """Forget every cached structure of the estimation, the crowd's (:func:`.rates.clear_cache`) too: the one
    invalidation (tests, whose rolled-back rows reappear under the same ids; coverage trials; bulk maintenance)."""
    with inputs.lock:
        inputs.clear_cache()
        _results.clear()


def max_abs_difference(a: OfflineResult, b: OfflineResult) -> float:
    """Largest absolute difference of any estimate between two results of the same systems (NaN-aware)."""
    if a.systems != b.systems:
        return math.inf
    worst = 0.0
    for ra, rb in zip(a.rows, b.rows):
        pairs = [(getattr(ea, at), getattr(eb, at)) for ea, eb in zip((ra.precision, ra.recall, ra.f1),
                                                                       (rb.precision, rb.recall, rb.f1))
                 for at in ("value", "lo", "hi")]
        for x, y in pairs + [(ra.ess, rb.ess)]:
            if math.isnan(x) or math.isnan(y):
                if math.isnan(x) != math.isnan(y):
                    return math.inf
                continue
            worst = max(worst, abs(x - y))
        if ra.labels != rb.labels or ra.warnings != rb.warnings:
            return math.inf
    return worst
