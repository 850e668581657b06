r"""A submission's score broken down by relation and by subject entity type, and its error analysis.

**Breakdown.**  For the newest :class:`~.models.Score` of a submission at a level, the
per-group estimates of :func:`unpooled.core.estimators.breakdown.subset_scores` (of every submission at once:
:func:`~unpooled.core.estimators.breakdown.subset_scores_many`) on the
same design and crowd votes as the score (:func:`.scoring.score`'s, kept in memory: the corrected labels,
the score's weight rule and matching policy):

* *by relation*: the group of an instance is its predicate (canonical direction); the
  group of an exhaustively found true instance is its predicate;
* *by entity type*: the group of a system's instance is the type the system gave its
  subject entity (``SubmissionEntity.type``; ``(untyped)`` when it gave none); the group of
  a true instance is the type the exhaustive annotation gave its subject mention.

Precision within a group is the ratio (Hájek) estimator over the labelled draws in the group,
recall the inclusion-weighted share of the group's exhaustively found true instances the
submission matches (the score's matching policy, the variance by documents as the headline's),
F1 their harmonic mean; all with 90% Wilson intervals, and flagged (``p_few``, ``r_few``,
``f1_few``) below :data:`~unpooled.core.estimators.breakdown.MIN_EFFECTIVE` effective draws.  
The ``all`` row *is* the score: its P, R, F1 and intervals are copied from the :class:`~.models.Score`
the breakdown belongs to (the joint estimate of :func:`unpooled.core.estimators.estimate`), not
recomputed with the groups' estimator, whose recall uses the exhaustive documents alone
(the module documentation of :mod:`unpooled.core.estimators.breakdown`).

The breakdown is computed once per new score and stored once, in a :class:`~.models.Breakdown` row the score points
to (``Score.breakdown``), so that the page only reads it; the submission's *missed* true instances, which move with
the truth but not with the labels, in a :class:`~.models.MissedInstances` row its breakdowns share while the truth
is the same (a label batch stores no copy of them).
:func:`compute_breakdowns` fills it for every newest score of a corpus at a level in one
pass (one design for all submissions); call it after re-scoring, or let the page call
:func:`ensure_breakdowns` on a miss (one process at a time per corpus and level).  It reads no submission's
instances: their predicates and subjects' types are the scoring's inputs' (:class:`.inputs.Groups`, kept with the
pool); and a new score estimated from the same inputs as the submission's newest breakdown (``inputs``: the digest
of their fingerprint) points to that row: nothing is copied.  :func:`stored` reads a score's breakdown, the one
place every reader (the page, the downloads, the API) reads it from.

**Error analysis** (for the submitting team and organisers): the drawn instances whose
current label (the aggregation the scores use) says wrong, and the true instances of the
completed exhaustive documents that the submission does not match; each with its document
text around the spans, subject, object and provenance highlighted (:func:`highlight`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np
from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Max, OuterRef, Subquery
from django.utils import timezone

from unpooled.core.estimators import subset_scores_many
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Label, Task
from unpooled.service.corpora.models import Corpus, Document, Sentence
from unpooled.service.submissions.models import RelationInstance, Submission

from . import inputs, scoring
from .inputs import system_name
from .models import Breakdown, Draw, MissedInstances, Score
from .policy import CONFIDENCE

#: bump when the stored shape changes: older breakdowns are recomputed
VERSION = 3
UNTYPED = "(untyped)"
#: at most this many missed true instances are stored per score (the total is kept)
MISSED_CAP = 2000
#: longest context shown around an instance (characters) before it is cut to the spans
MAX_CONTEXT = 600


# ---------------------------------------------------------------------------- computing

def parse_estimator(name: str) -> tuple[str, str]:
    """``(weights, match)`` of a score's estimator name ``joint/<weights>/<match>``."""
    parts = (name or "").split("/")
    weights = parts[1] if len(parts) > 1 and parts[1] in ("balance", "heuristic", "minvar") else "balance"
    match = parts[2] if len(parts) > 2 and parts[2] in ("exact", "overlap") else "overlap"
    return weights, match


def newest_scores_of_corpus(corpus: Corpus, level: str) -> dict[int, Score]:
    """The newest score of every submission of the corpus at ``level`` (submission id -> Score), each with the
    version of its breakdown (``bd_version``; None without one)."""
    newest = Score.objects.select_related("submission__team").filter(
        submission__corpus=corpus, level=level,
        id=Subquery(Score.objects.filter(submission=OuterRef("submission"), level=level).order_by("-id")
                    .values("id")[:1])).defer("paired", "details").annotate(bd_version=F("breakdown__version"))
    return {s.submission_id: s for s in newest}  # (paired: m covariances per metric each; neither is needed here)


def stored(score: Score | None) -> dict | None:
    """The breakdown of ``score``, or None (none yet, or of an older shape): its row's tables and missed instances,
    what they were computed from, and the ``all`` row, the score's own figures (:func:`headline_row`)."""
    if score is None or score.breakdown_id is None:
        return None
    return stored_of([score])[score.pk]  # (the row and its missed instances in one query)


def _view(b: Breakdown, score: Score) -> dict | None:
    if b.version != VERSION or b.missed is None:
        return None
    data = dict(b.data)
    counts = data.pop("all_counts")
    data.update(missed=b.missed.entries, missed_total=b.missed.total, truth_total=b.missed.truth_total)
    return {**data, "version": b.version, "estimator": b.estimator, "level": b.level, "inputs": b.inputs,
            "computed": b.computed.isoformat(), "score": score.pk, "all": headline_row(score, **counts)}


def stored_of(scores: list[Score]) -> dict[int, dict | None]:
    """:func:`stored` of each of ``scores`` (score id -> breakdown or None), each breakdown row read once."""
    rows = Breakdown.objects.select_related("missed").in_bulk({s.breakdown_id for s in scores
                                                               if s.breakdown_id is not None})
    return {s.pk: _view(rows[s.breakdown_id], s) if s.breakdown_id in rows else None for s in scores}


def public(bd: dict | None) -> dict | None:
    """A breakdown as whoever may see the submission sees it: the error analysis (``missed``, the submission's
    team's and the organisers') left out."""
    return None if bd is None else {k: v for k, v in bd.items() if k != "missed"}


def truth_types(corpus: Corpus) -> dict[str, tuple[str, str]]:
    """Instance key -> (subject type, object type) of every exhaustively found true instance.

    Read as :func:`~.inputs.exhaustive_truth` reads the completed relation tasks (canonical
    direction, one per key).
    """
    from unpooled.core.matching import InstanceRef

    schema = corpus.schema.schema()
    docs = ExhaustiveDocument.objects.filter(corpus=corpus).values("document_id")
    out: dict[str, tuple[str, str]] = {}
    for doc_id, payload, result in (Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="",
                                                        status=Task.Status.COMPLETE, document_id__in=docs)
                                    .order_by("id").values_list("document__doc_id", "payload", "result")):
        ms = (payload or {}).get("mentions", [])
        for a, pred, b in (result or {}).get("relations", []):
            try:
                canon, s, o = schema.canonical_arguments(pred, ms[a], ms[b])
            except KeyError:
                continue
            key = InstanceRef(doc_id, s["start"], s["end"], canon, o["start"], o["end"]).key
            out.setdefault(key, (s.get("type") or UNTYPED, o.get("type") or UNTYPED))
    return out


def _codes(names: list[str]) -> dict[str, int]:
    return {n: k for k, n in enumerate(names)}


def _table(res, names: list[str], counts: np.ndarray, describe=None) -> list[dict]:
    shown = [g for g in range(len(names)) if not (counts[g] == 0 and res.n_true[g] == 0)]
    rows = [{"group": names[g], "description": describe(names[g]) if describe else "", "instances": int(counts[g]),
             **row} for g, row in zip(shown, res.rows(shown))]
    rows.sort(key=lambda r: (-r["instances"], -r["n_true"], r["group"]))
    return rows


def _clip(row: dict) -> dict:
    """Published values stay in [0, 1] (corrected labels can move a ratio a little outside)."""
    for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi"):
        v = row.get(k)
        if v is not None:
            row[k] = min(1.0, max(0.0, v))
    return row


def headline_row(score: Score, instances: int, n_draws: int, n_true: int) -> dict:
    """The breakdown's ``all`` row: the score itself (its published P, R, F1 and intervals)."""
    return {"group": "all", "instances": instances, "n_draws": n_draws, "n_true": n_true,
            **{k: getattr(score, k) for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")},
            "p_few": False, "r_few": False, "f1_few": False}


def compute_breakdowns(corpus: Corpus, level: str, *, only_missing: bool = True) -> int:
    """Compute and store the breakdown of the newest score of every submission at ``level``.

    The design, the crowd's votes, the truth and each submission's instances (their predicates and subjects' types)
    are those the scores were estimated from (:func:`.scoring.score`, kept in memory: nothing is read again but the
    scores and the truth's types).  A score estimated from the same inputs (the same :attr:`.inputs.Inputs.fp`) and
    estimator as its submission's newest breakdown points to that row (nothing copied, nothing serialised again);
    ``only_missing=False`` recomputes every one (and deletes the rows no score points to any more).  Returns the
    number of scores given a breakdown.
    """
    newest = newest_scores_of_corpus(corpus, level)
    todo = {sid: s for sid, s in newest.items() if not only_missing or s.bd_version != VERSION}
    if not todo:
        return 0
    previous = _previous_breakdowns(todo, level) if only_missing else {}
    scored: dict[tuple[str, str], tuple[scoring.Scored, str]] = {}
    now = timezone.now()
    done, pending, new, missed = [], {}, {}, {}
    replaced = {s.breakdown_id for s in todo.values()} - {None}
    for sid, score in todo.items():
        weights, match = parse_estimator(score.estimator)
        if (weights, match) not in scored:
            got = scoring.score(corpus, level=level, match=match, weights=weights)
            scored[(weights, match)] = got, inputs.digest(got.fp) if got.result is not None else ""
        got, fp = scored[(weights, match)]
        if got.result is None or system_name(score.submission) not in got.by_name:
            continue
        prev = previous.get(sid)
        if prev is not None and prev.inputs == fp and prev.estimator == score.estimator:
            score.breakdown_id = prev.pk  # the same row
        else:
            pending.setdefault((weights, match), []).append(score)
        done.append(score)
    ttypes = truth_types(corpus) if pending else {}
    for (weights, match), scores in pending.items():
        got, fp = scored[(weights, match)]
        design = _scored_design(corpus, got, ttypes)
        for score, (data, miss) in zip(scores, _breakdowns(scores, design, corpus.schema.schema())):
            new[score.submission_id] = Breakdown(submission_id=score.submission_id, level=level,
                                                 estimator=score.estimator, inputs=fp, version=VERSION,
                                                 computed=now, data=data)
            missed[score.submission_id] = miss
    with transaction.atomic():
        rows = _missed_rows(level, missed)
        for sid, b in new.items():
            b.missed_id = rows[sid]
        Breakdown.objects.bulk_create(list(new.values()), batch_size=50)
        for sid, b in new.items():
            todo[sid].breakdown = b
        Score.objects.bulk_update(done, ["breakdown"], batch_size=500)
        Breakdown.objects.filter(pk__in=replaced, scores__isnull=True).delete()
    return len(done)


def _missed_rows(level: str, missed: dict[int, dict]) -> dict[int, int]:
    """The :class:`~.models.MissedInstances` row of each submission's missed instances (submission id -> row id):
    the stored one of the same digest, else a new one (two processes storing the same: one insert wins, both read
    it)."""
    def stored_rows():
        return {(r.submission_id, r.digest): r.pk for r in MissedInstances.objects.filter(
            submission_id__in=list(missed), level=level, digest__in={m["digest"] for m in missed.values()})
            .only("id", "submission_id", "digest")}

    have = stored_rows() if missed else {}
    todo = [MissedInstances(submission_id=sid, level=level, **m) for sid, m in missed.items()
            if (sid, m["digest"]) not in have]
    if todo:
        MissedInstances.objects.bulk_create(todo, batch_size=50, ignore_conflicts=True)
        have = stored_rows()
    return {sid: have[(sid, m["digest"])] for sid, m in missed.items()}


def _previous_breakdowns(todo: dict[int, Score], level: str) -> dict[int, Breakdown]:
    """The newest breakdown (of this version) of each submission of ``todo`` at ``level``: what it was computed from,
    not its data (submission id -> Breakdown; none: left out)."""
    newest = (Breakdown.objects.filter(submission_id__in=list(todo), level=level, version=VERSION).order_by()
              .values("submission_id").annotate(m=Max("id")).values("m"))
    return {b.submission_id: b for b in Breakdown.objects.filter(id__in=Subquery(newest))
            .only("id", "submission_id", "inputs", "estimator")}


#: the breakdowns of at most this many submissions are computed together (:func:`_breakdowns`): each one's type
#: codes span the pool, so memory grows with the batch, and the work per group hardly shrinks past a few dozen
BATCH = 64


def _breakdowns(scores: list[Score], got: dict, schema) -> list[tuple[dict, dict]]:
    """The breakdowns of ``scores`` on the shared design ``got`` (:func:`_scored_design`), each what
    :attr:`.models.Breakdown.data` holds (the ``all`` row's counts; its figures are the score's) and its missed
    instances (:func:`_missed`): every
    submission's groups by relation and by type scored together
    (:func:`~unpooled.core.estimators.breakdown.subset_scores_many`), :data:`BATCH` submissions at a time."""
    out = []
    for k in range(0, len(scores), BATCH):
        part = [(score, _groupings(got, got["index_of"][system_name(score.submission)]))
                for score in scores[k:k + BATCH]]
        jobs = [job for _, g in part for job in (g["relation"], g["entity_type"])]
        res = subset_scores_many(got["design"], jobs, weights=got["W"], confidence=CONFIDENCE, zero_division="nan",
                                 votes=got["votes"], shared=got["shared"])
        out += [(_breakdown_data(g, res[2 * n], res[2 * n + 1], got, schema), _missed(g["i"], got))
                for n, (_, g) in enumerate(part)]
    return out


def _groupings(got: dict, i: int) -> dict:
    """System ``i``'s two jobs of :func:`~unpooled.core.estimators.breakdown.subset_scores_many` (by relation; by
    the subject type it gave, its own typing), the types' names and the instances in each group."""
    groups, xs = got["groups"], got["groups"].members[i]
    own = np.unique(groups.subject_type[i])
    types = sorted({groups.types[c] or UNTYPED for c in own.tolist()} | set(got["truth_stype"]))
    tcode = _codes(types)
    recode = np.full(len(groups.types), -1, dtype=np.int64)
    recode[own] = [tcode[groups.types[c] or UNTYPED] for c in own.tolist()]
    gu_type = np.full(len(got["universe_pred"]), -1, dtype=np.int64)
    gu_type[xs] = recode[groups.subject_type[i]]
    gt_type = np.array([tcode[t] for t in got["truth_stype"]], dtype=np.int64)
    preds = got["preds"]
    return {"i": i, "xs": xs, "types": types,
            "relation": (i, got["universe_pred"], got["truth_pred"], len(preds)),
            "entity_type": (i, gu_type, gt_type, len(types)),
            "counts_rel": np.bincount(got["universe_pred"][xs], minlength=len(preds)),
            "counts_type": np.bincount(gu_type[xs], minlength=len(types))}


def _missed_entries(truth: list, ttypes: dict, doc_pk: dict) -> tuple[list, np.ndarray]:
    """Each true instance as a missed one is stored (its document, spans, relation, types and weight; one list the
    breakdowns that miss it share, never changed) and its rank in the order they are shown (document, subject,
    object, relation; ties in the truth's order)."""
    entries = []
    for t in truth:
        st, ot = ttypes.get(t.key, (UNTYPED, UNTYPED))
        entries.append([doc_pk.get(t.ref.doc), t.ref.doc, t.ref.s_start, t.ref.s_end, t.ref.predicate,
                        t.ref.o_start, t.ref.o_end, st, ot, round(1.0 / t.inclusion, 6)])
    order = sorted(range(len(entries)), key=lambda k: (entries[k][1], entries[k][2], entries[k][5], entries[k][4]))
    rank = np.empty(len(entries), np.int64)
    rank[order] = np.arange(len(entries))
    return entries, rank


def _missed(i: int, got: dict) -> dict:
    """System ``i``'s missed true instances as :class:`~.models.MissedInstances` stores them: the first
    :data:`MISSED_CAP` in the order they are shown, how many in all, and a digest of the entries and the truth."""
    truth = got["truth"]
    idx = np.flatnonzero(~got["design"].g0[i]) if len(truth) else np.zeros(0, np.int64)
    shown = idx[:MISSED_CAP]
    shown = shown[np.argsort(got["missed_rank"][shown], kind="stable")].astype(np.int64)
    digest = hashlib.blake2b(f"{got['truth_digest']}:{len(idx)}:".encode() + shown.tobytes(), digest_size=16)
    entries = got["missed_entries"]
    return {"digest": digest.hexdigest(), "entries": [entries[k] for k in shown.tolist()], "total": int(len(idx)),
            "truth_total": int(len(truth))}


def _breakdown_data(g: dict, rel, typ, got: dict, schema) -> dict:
    """One submission's breakdown (``g``: :func:`_groupings`; ``rel``, ``typ``: its two
    :class:`~unpooled.core.estimators.breakdown.SubsetScores`)."""
    design, truth, i = got["design"], got["truth"], g["i"]

    def describe(pred: str) -> str:
        r = schema.resolve(pred)
        return r.description if r is not None else ""

    return {
        "method": rel.method, "confidence": CONFIDENCE,
        "labelled_draws": int(len(design.xs)), "own_draws": int(design.n[i]),
        "exhaustive_instances": int(design.n0), "exhaustive_documents": got["docs"],
        "all_counts": {"instances": len(g["xs"]), "n_draws": int(rel.n_draws.sum()), "n_true": int(len(truth))},
        "relation": [_clip(r) for r in _table(rel, got["preds"], g["counts_rel"], describe)],
        "entity_type": [_clip(r) for r in _table(typ, g["types"], g["counts_type"])],
    }


def _scored_design(corpus: Corpus, got: scoring.Scored, ttypes: dict) -> dict:
    """What every breakdown of the scores of one :func:`.scoring.score` shares: the scores' design, weights, votes
    and truth, the pool's instances' groups (:class:`.inputs.Groups`), the pool's and the truth's relations and the
    truth's subject types."""
    design, truth, groups = got.result.design, got.truth, got.groups
    preds = sorted(set(groups.predicates) | {t.ref.predicate for t in truth})
    pcode = _codes(preds)
    pool_pred = np.array([pcode[p] for p in groups.predicates], dtype=np.int64)
    doc_pk = dict(Document.objects.filter(corpus=corpus, doc_id__in={t.ref.doc for t in truth})
                  .values_list("doc_id", "pk"))
    entries, rank = _missed_entries(truth, ttypes, doc_pk)
    # the weights the scores were estimated with, as their result records them (minvar's choice depends on the votes)
    return {"design": design, "W": got.result.scores.weights, "votes": got.votes, "truth": truth, "docs": got.docs,
            "preds": preds, "groups": groups, "shared": {}, "index_of": {name: i for i, name in enumerate(got.result.systems)},
            "universe_pred": pool_pred[groups.predicate] if len(groups.predicate) else groups.predicate,
            "truth_pred": np.array([pcode[t.ref.predicate] for t in truth], dtype=np.int64),
            "truth_stype": [ttypes.get(t.key, (UNTYPED, UNTYPED))[0] for t in truth],
            "missed_entries": entries, "missed_rank": rank,
            "truth_digest": hashlib.blake2b(json.dumps(entries).encode(), digest_size=16).hexdigest()}


def ensure_breakdowns(corpus: Corpus, level: str) -> bool:
    """Compute the missing breakdowns unless another request of this process is already at it.

    Returns False when it was busy elsewhere (the caller shows that the breakdown is on its way).
    """
    lock = f"unpooled:breakdown:{corpus.pk}:{level}"
    if not cache.add(lock, 1, timeout=600):
        return False
    try:
        compute_breakdowns(corpus, level)
    finally:
        cache.delete(lock)
    return True


# ---------------------------------------------------------------------------- highlighting

@dataclass(frozen=True)
class Segment:
    """A piece of context text: ``role`` is 'subj', 'obj', 'gap' (between windows) or ''; ``prov``: inside
    the provenance."""

    text: str
    role: str = ""
    prov: bool = False


def _sentences(doc_ids) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for d, s, e in Sentence.objects.filter(document_id__in=set(doc_ids)).order_by("document_id", "index") \
            .values_list("document_id", "start", "end"):
        out.setdefault(d, []).append((s, e))
    return out


def _cover(text: str, sentences: list[tuple[int, int]], lo: int, hi: int) -> tuple[int, int]:
    """The whole sentences covering ``[lo, hi)`` (150 characters either side without sentences)."""
    cover = [(s, e) for s, e in sentences if s < hi and lo < e]
    w0, w1 = (cover[0][0], cover[-1][1]) if cover else (lo - 150, hi + 150)
    return max(0, min(w0, lo)), min(len(text), max(w1, hi))


def context_windows(text: str, sentences: list[tuple[int, int]], spans: list[tuple[int, int]],
                    core: list[tuple[int, int]], *, limit: int = MAX_CONTEXT) -> list[tuple[int, int]]:
    """Where to show an instance: the sentences covering all ``spans`` (subject, object, provenance) when
    that is at most ``limit`` characters; else the sentences of each ``core`` span (subject, object), merged
    where they meet, each cut to its span +-150 characters if still too long."""
    one = _cover(text, sentences, min(s for s, _ in spans), max(e for _, e in spans))
    if one[1] - one[0] <= limit or not core:
        return [one]
    out: list[tuple[int, int]] = []
    for s, e in sorted(core):
        w0, w1 = _cover(text, sentences, s, e)
        if w1 - w0 > limit:
            w0, w1 = max(w0, s - 150), min(w1, e + 150)
        if out and w0 <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], w1))
        else:
            out.append((w0, w1))
    return out


def highlight(text: str, windows: list[tuple[int, int]], subject: tuple[int, int], obj: tuple[int, int] | None,
              provenance=()) -> list[Segment]:
    """``text`` in each window cut at every span boundary, each piece marked subject / object / provenance;
    a ``gap`` segment (" … ") between windows."""
    spans = [subject] + ([obj] if obj else []) + list(provenance)
    out: list[Segment] = []
    for n, (w0, w1) in enumerate(windows):
        if n:
            out.append(Segment(" … ", "gap"))
        cuts = {w0, w1}
        for s, e in spans:
            for c in (s, e):
                if w0 < c < w1:
                    cuts.add(c)
        edges = sorted(cuts)
        for a, b in zip(edges, edges[1:]):
            role = "subj" if subject[0] <= a and b <= subject[1] else (
                "obj" if obj and obj[0] <= a and b <= obj[1] else "")
            prov = any(s <= a and b <= e for s, e in provenance)
            out.append(Segment(text[a:b], role, prov))
    return out


# ---------------------------------------------------------------------------- error analysis

@dataclass(frozen=True)
class SampleLabel:
    """The current label of a drawn key (a :class:`~unpooled.service.annotation.models.Label` row's fields)."""

    correct: bool
    probability: float
    method: str
    n_answers: int
    annotators: tuple = ()   # the ids of the annotators whose answers it aggregates


def current_sample_labels(sub: Submission) -> dict[str, SampleLabel]:
    """The newest label (of the aggregation the scores use) of every key ``sub`` has drawn."""
    from .policy import LABEL_METHOD

    keys = Draw.objects.filter(submission=sub).values("key_hash")
    out: dict[str, SampleLabel] = {}
    for key, correct, prob, method, n, who in (
            Label.objects.filter(corpus_id=sub.corpus_id, method=LABEL_METHOD, key_hash__in=Subquery(keys))
            .order_by("id").values_list("key", "correct", "probability", "method", "n_answers", "annotators")):
        out[key] = SampleLabel(correct, prob, method, n, tuple(who or ()))
    return out


@dataclass
class SampleErrors:
    """The drawn instances labelled wrong, in the order they were first drawn."""

    instance_ids: list[int]
    draws: dict[int, dict[str, int]]   # instance id -> level -> times drawn
    labels: dict[str, SampleLabel]
    labelled: int                      # distinct drawn instances with a label
    drawn: int                         # distinct drawn instances


def sample_errors(sub: Submission) -> SampleErrors:
    labels = current_sample_labels(sub)
    order: list[int] = []
    seen: dict[int, dict[str, int]] = {}
    keys: dict[int, str] = {}
    for inst, key, level in (Draw.objects.filter(submission=sub).order_by("id")
                             .values_list("instance_id", "key", "level")):
        if inst not in seen:
            seen[inst] = {}
            order.append(inst)
            keys[inst] = key
        seen[inst][level] = seen[inst].get(level, 0) + 1
    wrong = [i for i in order if keys[i] in labels and not labels[keys[i]].correct]
    labelled = sum(1 for i in order if keys[i] in labels)
    return SampleErrors(wrong, {i: seen[i] for i in wrong}, labels, labelled, len(order))


def error_rows(errors: SampleErrors, ids: list[int]) -> list[dict]:
    """Display rows of the wrong instances ``ids`` (one page): spans highlighted in their context."""
    from unpooled.service.submissions.actions import parse_provenance

    insts = {i.pk: i for i in RelationInstance.objects.filter(pk__in=ids)
             .select_related("document", "subject", "object")}
    sents = _sentences({i.document_id for i in insts.values()})
    rows = []
    for pk in ids:
        i = insts.get(pk)
        if i is None:
            continue
        text = i.document.text
        subj, obj = (i.subject_start, i.subject_end), (i.object_start, i.object_end)
        has_obj = obj[1] > obj[0]
        prov = [(s, e) for s, e in (parse_provenance(i.provenance) if i.provenance else ()) if e > s]
        core = [subj] + ([obj] if has_obj else [])
        windows = context_windows(text, sents.get(i.document_id, []), core + prov, core)
        lab = errors.labels.get(i.key)
        rows.append({"i": i, "segments": highlight(text, windows, subj, obj if has_obj else None, prov),
                     "subject": text[subj[0]:subj[1]],
                     "object": i.value if i.value is not None else text[obj[0]:obj[1]],
                     "cut_left": windows[0][0] > 0, "cut_right": windows[-1][1] < len(text),
                     "label": lab, "draws": errors.draws.get(pk, {})})
    return rows


def missed_rows(entries: list[list]) -> list[dict]:
    """Display rows of stored missed true instances (one page), in their sentence."""
    pks = {e[0] for e in entries if e[0] is not None}
    docs = {d.pk: d for d in Document.objects.filter(pk__in=pks).only("pk", "doc_id", "text", "corpus_id")}
    sents = _sentences(pks)
    rows = []
    for doc_pk, doc_id, s0, s1, pred, o0, o1, st, ot, weight in entries:
        doc = docs.get(doc_pk)
        if doc is None:
            rows.append({"doc_id": doc_id, "doc": None, "predicate": pred, "segments": [], "subject": "",
                         "object": "", "stype": st, "otype": ot, "weight": weight})
            continue
        text = doc.text
        core = [(s0, s1), (o0, o1)]
        windows = context_windows(text, sents.get(doc_pk, []), core, core)
        rows.append({"doc_id": doc_id, "doc": doc, "predicate": pred,
                     "segments": highlight(text, windows, (s0, s1), (o0, o1)),
                     "subject": text[s0:s1], "object": text[o0:o1], "stype": st, "otype": ot, "weight": weight,
                     "cut_left": windows[0][0] > 0, "cut_right": windows[-1][1] < len(text)})
    return rows


# ---------------------------------------------------------------------------- downloads

def sample_lines(sub: Submission):
    """The labelled sample as JSON-ready dicts, one per draw (level, then seq order)."""
    from unpooled.service.submissions.actions import parse_provenance

    labels = current_sample_labels(sub)
    rows = (Draw.objects.filter(submission=sub).order_by("level", "seq").values_list(
        "seq", "level", "key", "instance__document__doc_id", "instance__predicate",
        "instance__subject_start", "instance__subject_end", "instance__subject__name", "instance__subject__type",
        "instance__object_start", "instance__object_end", "instance__object__name", "instance__object__type",
        "instance__value", "instance__provenance", "instance__confidence"))
    for (seq, level, key, doc, pred, s0, s1, sname, stype, o0, o1, oname, otype, value, prov, conf) in rows.iterator(
            chunk_size=2000):
        obj: dict = {"start": o0, "end": o1}
        if value is not None:
            obj["value"] = value
        else:
            obj["entity"] = oname
            if otype:
                obj["type"] = otype
        subj: dict = {"start": s0, "end": s1, "entity": sname}
        if stype:
            subj["type"] = stype
        lab = labels.get(key)
        yield {"seq": seq, "level": level, "doc": doc, "subject": subj, "predicate": pred, "object": obj,
               "provenance": [{"start": s, "end": e} for s, e in (parse_provenance(prov) if prov else ())],
               "confidence": conf, "key": key,
               "label": None if lab is None else {"correct": lab.correct, "probability": lab.probability,
                                                  "method": lab.method, "n_answers": lab.n_answers}}


#: a score record's fields (:func:`score_records`): the score's, its breakdown in place of the breakdown's id
#: a score's fields as its exports give them; not ``paired``, whose covariances name the other submissions of its
#: scoring, private ones too (the leaderboard reads the visible pairs; the API leaves it out as well)
SCORE_FIELDS = tuple(f.name if f.name == "breakdown" else f.attname for f in Score._meta.concrete_fields
                     if f.name != "paired")


def score_records(sub: Submission) -> list[dict]:
    """Every score of the submission (oldest first) with all its fields and its breakdown (:func:`stored`).

    The stored error analysis (the breakdown's ``missed``) is left out (:func:`public`): the scores are for
    whoever may see the submission, the error analysis only for its team and the organisers.
    """
    out = []
    scores = list(Score.objects.filter(submission=sub).order_by("id"))
    bds = stored_of(scores)
    for s in scores:
        rec = {}
        for f in SCORE_FIELDS:
            v = public(bds[s.pk]) if f == "breakdown" else getattr(s, f)
            if hasattr(v, "isoformat"):
                v = v.isoformat()
            elif isinstance(v, float) and math.isnan(v):
                v = None
            rec[f] = v
        out.append(rec)
    return out


__all__ = ["CONFIDENCE", "MISSED_CAP", "SCORE_FIELDS", "SampleErrors", "SampleLabel", "Segment", "UNTYPED", "VERSION",
           "compute_breakdowns", "context_windows", "current_sample_labels", "ensure_breakdowns", "error_rows",
           "headline_row", "highlight", "missed_rows", "newest_scores_of_corpus", "parse_estimator", "public",
           "sample_errors", "sample_lines", "score_records", "stored", "stored_of", "truth_types"]
