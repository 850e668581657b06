r"""True precision, recall and F1 of a submission, from a corpus's gold layer (demo and checks only).

A corpus with a near-exhaustive gold layer (Re-DocRED) lets the service compare every estimate
with the quantity it estimates.  The definitions here are *exactly* the estimands of
:func:`unpooled.service.evaluations.publish.score_corpus`, not a looser "gold F1":

**Precision** at level :math:`\ell` is :math:`\pi_i = \sum_{x \in X_i} p^{(\ell)}_i(x)\, f(x)`
(method.md §1.2-1.3), where

* :math:`p^{(\ell)}_i` is the sampling distribution :func:`~unpooled.service.evaluations.draws.draw`
  draws from (:func:`unpooled.core.estimators.sampling.sampling_distribution`, with the same
  predicate, subject-entity and fill codes), so ``instance`` gives the plain share of correct
  instances and ``relation`` / ``entity`` the macro averages over predicates / subject entities;
* :math:`f(x)` is what a perfect annotator answers on the verification page: the gold layer
  holds the predicate between *some* gold entity with a mention overlapping the subject span
  and *some* gold entity with a mention overlapping the object span
  (:meth:`unpooled.service.crowd.simulated.GoldOracle.verify`, which the simulated crowd also
  answers from).

**Recall** is :math:`r_i = \mathbb E_{y \sim p_0}[g_i(y)]` with :math:`p_0` uniform over the true
instances that the exhaustive-annotation protocol finds when the annotators make no error,
over *every* document of the corpus (the sampled documents are a random sample of these,
weighted by their inclusion probabilities):

1. the mentions of a document are the gold mentions without overlaps (the first, longest span
   of overlapping ones is kept: :meth:`GoldOracle.mentions`), aggregated as the entity task
   aggregates answers (:func:`unpooled.core.annotation.answers.aggregate_mentions`);
2. candidate pairs are the pairs of mentions of different clusters *within one sentence*, one
   per (sentence, cluster pair): the first mention of each cluster in that sentence, dropping
   pairs of types no relation of the schema allows when the schema's ``type_check`` is
   ``error`` (:func:`unpooled.core.annotation.answers.candidate_pairs`, as the relations task
   is built);
3. each pair gets every gold predicate, in either direction, between the entities its two
   mentions overlap (:meth:`GoldOracle.pair_labels`), and each becomes an instance in the
   schema's canonical direction (a symmetric relation's arguments in offset order), once per
   instance key (:func:`~unpooled.service.evaluations.inputs.exhaustive_truth`).

So recall is relative to *within-sentence* facts at the mentions the protocol picks;
cross-sentence facts never count.  Under the corpus's *document* recall protocol (the console's setting,
:mod:`unpooled.core.estimators.exhaustive` section 4), step 2 pairs every two clusters of the document, and
recall is the share of those facts the submission states through any mention of each cluster (the core's
``fact_level``, as the estimate matches them).  :math:`g_i(y)` is whether the submission has an instance
matching :math:`y` under the recall matching policy of ``score_corpus`` (``overlap``: same
document and predicate, intersecting subject spans and intersecting object spans;
:mod:`unpooled.core.matching`).

**F1** is :math:`2\pi_i r_i / (\pi_i + r_i)` of the two.

A submission made of the protocol's own instances therefore scores P = R = F1 = 1
(``tests/service/test_truth.py``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from unpooled.core.estimators.exhaustive import fact_level
from unpooled.core.estimators.intervals import f1_score
from unpooled.core.estimators.sampling import sampling_distribution
from unpooled.core.matching import InstanceRef, match_matrix

from .rates import entities, recall_protocol

#: the recall matching policy of ``score_corpus``
MATCH = "overlap"


@dataclass(frozen=True)
class TrueScores:
    """A submission's true scores at one level, with the counts behind them: figures computed from a gold layer over
    the whole submission, not estimates (no sample, so no standard error or interval), shown beside the estimates
    and used to check their intervals' coverage."""

    p: float
    r: float
    f1: float
    level: str
    instances: int      # the submission's instances
    correct: int        # of them, supported by the gold layer
    gold: int           # true instances of the exhaustive protocol over the whole corpus
    found: int          # of them, matched by the submission

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def _codes(values) -> np.ndarray:
    index: dict = {}
    return np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64)


def _f1(p: float, r: float) -> float:
    """F1 of the true P and R (:func:`~unpooled.core.estimators.intervals.f1_score`); NaN where either is."""
    return float("nan") if math.isnan(p) or math.isnan(r) else float(f1_score(p, r))


def instance_rows(submission) -> list[tuple]:
    """The submission's instances in ``draw``'s order (by pk)."""
    from unpooled.service.submissions.models import RelationInstance

    sid = getattr(submission, "pk", submission)
    return list(RelationInstance.objects.filter(submission_id=sid).order_by("pk").values_list(
        "document_id", "document__doc_id", "subject_start", "subject_end", "predicate", "object_start", "object_end",
        "value", "subject_id", "object_id"))


def level_weights(rows: list[tuple], level: str) -> np.ndarray:
    """:math:`p^{(\\ell)}_i` over ``rows``, computed as :func:`~unpooled.service.evaluations.draws.draw` does."""
    if not rows:
        return np.zeros(0)
    return sampling_distribution(
        len(rows), level=level, predicate=_codes(r[4] for r in rows), subject=_codes(r[8] for r in rows),
        fill=_codes((r[8], r[4], r[9] if r[9] is not None else "=" + (r[7] or "")) for r in rows))


def supported(corpus, rows: list[tuple], oracle=None) -> np.ndarray:
    """:math:`f(x)` of each row: the gold layer supports it (what a perfect annotator answers)."""
    from unpooled.service.annotation.models import Kind, Task
    from unpooled.service.crowd.simulated import GoldOracle

    oracle = oracle or GoldOracle(corpus)
    oracle.load({r[0] for r in rows})
    out = np.zeros(len(rows), dtype=bool)
    for k, r in enumerate(rows):
        t = Task(document_id=r[0], kind=Kind.VERIFY, payload={
            "subject": {"start": r[2], "end": r[3]}, "predicate": r[4], "object": {"start": r[5], "end": r[6]}})
        out[k] = oracle.verify(t)
    return out


def protocol_gold(corpus, *, documents=None, oracle=None, protocol: str | None = None) -> list[InstanceRef]:
    """The true instances the exhaustive protocol finds with error-free annotators (module docs).

    ``documents``: document pks (default every document of the corpus); ``protocol``: the recall protocol whose
    pairs are asked (default the corpus's: under ``document`` every pair of clusters of a document).
    """
    protocol = protocol or recall_protocol(corpus)
    from unpooled.core.annotation import answers as fmt
    from unpooled.service.corpora.models import Document
    from unpooled.service.crowd.simulated import GoldOracle

    oracle = oracle or GoldOracle(corpus)
    schema = corpus.schema.schema()
    rels = schema.canonical_relations

    def compatible(ta: str, tb: str) -> bool:  # as annotation.actions._create_relations_task
        if schema.type_check != "error":
            return True
        return any((ta in r.subject_types and tb in r.object_types) or (tb in r.subject_types and ta in r.object_types)
                   for r in rels)

    docs = Document.objects.filter(corpus=corpus).order_by("id")
    if documents is not None:
        docs = docs.filter(pk__in=list(documents))
    sentences: dict[int, list[tuple[int, int]]] = {}
    from unpooled.service.corpora.models import Sentence

    for d, s, e in (Sentence.objects.filter(document__in=docs).order_by("document_id", "index")
                    .values_list("document_id", "start", "end")):
        sentences.setdefault(d, []).append((s, e))
    out: list[InstanceRef] = []
    doc_rows = list(docs.values_list("pk", "doc_id"))
    oracle.load(pk for pk, _ in doc_rows)
    for pk, doc_id in doc_rows:
        mentions = fmt.aggregate_mentions([{"mentions": oracle.mentions(pk)}])
        rows = sentences.get(pk, [])
        pairs = fmt.candidate_pairs(mentions, [s for s, _ in rows], [e for _, e in rows], compatible=compatible,
                                    protocol=protocol)
        labels = {str(i): oracle.pair_labels(pk, mentions, pair) for i, pair in enumerate(pairs)}
        seen = set()
        for a, pred, b in fmt.relation_triples(mentions, pairs, labels):
            canon, s, o = schema.canonical_arguments(pred, mentions[a], mentions[b])
            ref = InstanceRef(doc_id, s["start"], s["end"], canon, o["start"], o["end"])
            if ref.key not in seen:
                seen.add(ref.key)
                out.append(ref)
    return out


def _refs(rows: list[tuple]) -> list[InstanceRef]:
    return [InstanceRef(r[1], r[2], r[3], r[4], r[5], r[6], r[7]) for r in rows]


def true_scores(corpus, submission, *, level: str = "instance", match: str = MATCH, gold=None,
                oracle=None) -> TrueScores:
    """True P, R and F1 of ``submission`` (a Submission or its pk) at ``level`` (module docs).

    ``gold``: :func:`protocol_gold` of the corpus, when already computed (it does not depend on
    the submission or the level).
    """
    from unpooled.service.crowd.simulated import GoldOracle

    oracle = oracle or GoldOracle(corpus)
    rows = instance_rows(submission)
    if gold is None:
        gold = protocol_gold(corpus, oracle=oracle)
    if not rows:
        return TrueScores(float("nan"), 0.0, float("nan"), level, 0, 0, len(gold), 0)
    ok = supported(corpus, rows, oracle)
    w = level_weights(rows, level)
    p = float(np.dot(w, ok))
    found, n = _found(corpus, _refs(rows), gold, match)
    r = found / n if n else float("nan")
    return TrueScores(p, r, _f1(p, r), level, len(rows), int(ok.sum()), n, found)


def _found(corpus, refs: list[InstanceRef], gold: list[InstanceRef], match: str) -> tuple[int, int]:
    """``(found, true)``: how many of the protocol's true items the instances match, of how many.  Under the
    document recall protocol the items are facts between the corpus's entity clusters, matched through any of
    their mentions (:func:`unpooled.core.estimators.exhaustive.fact_level`, as the estimate matches them)."""
    if not gold:
        return 0, 0
    if recall_protocol(corpus) == "document":
        fl = fact_level(refs, [np.arange(len(refs))], np.zeros(0, np.int64), gold, entities(corpus))
        return int(fl.g0[0].sum()), len(fl.facts)
    return int(match_matrix([refs], gold, policy=match)[0].sum()), len(gold)


#: per process, the truth that does not change between re-scorings: the protocol's true instances of the last corpus
#: asked (its gold layer, schema and sentences do not change after loading; its recall protocol may) and each of its
#: submissions' true scores (their instances do not change after ingest), so that a re-scoring computes the truth of
#: the new submissions only (every re-scoring read the whole gold layer again, two queries per document, and every
#: submission's instances: 26 s a re-scoring at 5,000 documents). The keys say what the truth was computed from (the
#: corpus's creation, counts, schema and recall protocol; the submission's creation and file), so that rows rolled
#: back and made again under the same ids (tests, coverage trials) are not mistaken for the memoised ones.
_gold_memo: dict = {}
_truth_memo: dict = {}


def clear_cache() -> None:
    """Forget the memoised truth."""
    _gold_memo.clear()
    _truth_memo.clear()


def _corpus_gold(corpus, oracle) -> tuple[tuple, list[InstanceRef]]:
    """The key of the corpus's truth and its :func:`protocol_gold`, computed once per process."""
    from .rates import corpus_key

    key = (corpus_key(corpus), corpus.n_gold_relations, corpus.schema_id, corpus.schema.version,
           recall_protocol(corpus))
    got = _gold_memo.get(key)
    if got is None:
        clear_cache()
        got = _gold_memo[key] = protocol_gold(corpus, oracle=oracle)
    return key, got


def true_scores_all(corpus, *, level: str = "instance", match: str = MATCH, submissions=None) -> dict[int, TrueScores]:
    """:func:`true_scores` of every submission of the corpus with instances (``submissions``: of those pks only), by
    submission pk (each computed once per process: :data:`_truth_memo`)."""
    from unpooled.service.crowd.simulated import GoldOracle
    from unpooled.service.submissions.models import Submission

    oracle = GoldOracle(corpus)
    key, gold = _corpus_gold(corpus, oracle)
    out = {}
    subs = Submission.objects.filter(corpus=corpus, is_reference=False)
    if submissions is not None:
        subs = subs.filter(pk__in=list(submissions))
    for sid, created, sha in subs.order_by("id").values_list("pk", "created", "file_sha256"):
        at = (key, sid, created, sha, level, match)
        ts = _truth_memo.get(at)
        if ts is None:
            ts = _truth_memo[at] = true_scores(corpus, sid, level=level, match=match, gold=gold, oracle=oracle)
        if ts.instances:
            out[sid] = ts
    return out


def true_precision(corpus, submission_id: int, *, level: str = "instance") -> float:
    """The submission's true precision at ``level`` (instance: the share of its instances the gold layer supports)."""
    rows = instance_rows(submission_id)
    if not rows:
        return float("nan")
    return float(np.dot(level_weights(rows, level), supported(corpus, rows)))


def covered(truth: float | None, lo: float | None, hi: float | None) -> bool | None:
    """Whether the interval holds the truth (None when either is missing), up to float round-off: a true precision
    of 1 computed as a weighted sum can come out as 1.0000000000000002, which no interval inside [0, 1] holds."""
    if truth is None or lo is None or hi is None or any(math.isnan(v) for v in (truth, lo, hi)):
        return None
    return lo - 1e-9 <= truth <= hi + 1e-9


def attach_truth(corpus, rows: list[dict], *, level: str = "instance", store: bool = True) -> tuple[int, int]:
    """Add ``p_true``, ``r_true``, ``f1_true`` (and ``*_covered``) to leaderboard rows of a corpus with a gold layer.

    With ``store``, each row's published :class:`~.models.Score` at ``level`` keeps the truth in
    ``details['truth']`` (for pages, the API and the CSV, which all read it there): its newest score, or its frozen
    one (its period closed), which keeps the truth it was frozen with and is given one only if it has none (a
    score frozen in the re-scoring that made it, before its truth was added).  A frozen score is a published
    number that does not move, and its truth is judged against it (``covered``): a truth computed afterwards (the
    corpus's recall protocol changed, say) would measure the frozen interval against another estimand.  Returns
    ``(K, N)``: the truth is inside the interval for K of the N (system, metric) pairs that have both.
    """
    from .models import ScoreSnapshot

    truth = true_scores_all(corpus, level=level, submissions=[row["submission"] for row in rows])
    frozen = dict(((sid, lv), score_id) for sid, lv, score_id in ScoreSnapshot.objects.filter(
        submission_id__in=[row["submission"] for row in rows], score__isnull=False).values_list(
        "submission_id", "level", "score_id")) if store else {}
    inside = total = 0
    for row in rows:
        ts = truth.get(row["submission"])
        if ts is None:
            continue
        got = {}
        for k in ("p", "r", "f1"):
            v = getattr(ts, k)
            row[f"{k}_true"] = None if math.isnan(v) else v
            c = covered(row[f"{k}_true"], row.get(f"{k}_lo"), row.get(f"{k}_hi"))
            row[f"{k}_covered"] = c
            got[k] = c
            if c is not None:
                total += 1
                inside += c
        if store:
            _store_truth(corpus, row["submission"], row.get("level", level), ts, got, frozen)
    if store and rows:
        from django.utils import timezone

        from unpooled.service.submissions.models import Submission

        # the leaderboard's cache fingerprint sees submissions' last change: show the truth at once
        Submission.objects.filter(pk__in=[r["submission"] for r in rows]).update(updated=timezone.now())
    return inside, total


def _store_truth(corpus, submission_id: int, level: str, ts: TrueScores, got: dict, frozen: dict) -> None:
    """:func:`attach_truth`'s write: the truth into the submission's published score at ``level`` (``frozen``: the
    frozen scores' ids by (submission, level); a frozen score that has a truth keeps it)."""
    from .models import Score

    frozen_id = frozen.get((submission_id, level))
    scores = Score.objects.filter(pk=frozen_id) if frozen_id else Score.objects.filter(submission_id=submission_id,
                                                                                        level=level)
    score = scores.first()
    if score is None or (frozen_id and (score.details or {}).get("truth")):
        return
    details = dict(score.details or {})
    details["truth"] = {**ts.to_dict(), "covered": got,
                        "definition": "unpooled.service.evaluations.truth (gold layer; recall over "
                                  + ("every fact of every document, through any mention of its clusters)"
                                     if recall_protocol(corpus) == "document" else
                                     "within-sentence facts of every document, overlap matching)")}
    score.details = details
    score.save(update_fields=["details"])


__all__ = ["MATCH", "TrueScores", "attach_truth", "covered", "instance_rows", "level_weights", "protocol_gold",
           "supported", "true_precision", "true_scores", "true_scores_all"]
