r"""What the estimation reads from the database: the one reader, and its caches (:func:`read`).

:func:`read` gives a corpus's :class:`Inputs` at a level: the core's design (every system's sampling distribution
over the pool, the labelled draws, the exhaustive truth), the crowd's votes, and what names them.  :mod:`.scoring`
estimates from them and reads nothing itself; the sampling planner and the breakdowns read them too.
:func:`offline_data` builds the same from scratch as :class:`unpooled.core.offline.OfflineData`: the oracle the
cached path is checked against to float round-off (:func:`.scoring.from_scratch`), and the coverage harness's
input.

Rebuilding everything from the database on every call would read every instance of every submission, the universe
of instance keys, the sampling matrix ``P``, the overlap matching of the draws (:math:`g_i(x_s)`) and of the
exhaustive truth (``g0``), and :math:`p_0` (one over the number of pooled instances matching each).  With 100
submissions of a few thousand instances that is seconds of work, and almost none of it depends on the labels.

This module keeps those parts in process memory (the task worker is a long-lived process), in layers, each
checked against a cheap fingerprint read from the database on every call, so that a change made by another process
is never missed:

``_Pool`` per (corpus, match)
    the systems (submissions with instances, by id), the universe, each system's members,
    the matching relation ``R`` (universe x universe; ``overlap`` only), the systems' matches
    ``G = member @ R`` and the multiplicities; per sampling level the rows of ``P``; what the
    breakdowns group by (:class:`Groups`: each instance's predicate and subject entity type).
    Fingerprint: the ids and creation times of the corpus's submissions.  New submissions
    with ids above the cached ones extend the pool (new universe instances, their ``R``
    columns, new rows); any other change rebuilds it.  (Submissions are immutable once
    ingested: instances are written in the transaction that creates the submission.)
``_Truth`` per pool
    the exhaustive truth, ``g0`` and ``v0``; fingerprint: what :func:`exhaustive_truth` reads (the sampled
    documents with their inclusion probabilities, the completed relation tasks of those
    documents by id and completion time); when it moves, the truth is re-read and ``g0``
    re-matched only if the truth itself changed.
``_Draws`` per (pool, level)
    every draw in the from-scratch order (system, seq) with its universe index and its
    column of :math:`g_i(x_s)`; fingerprint: (count, max id) of the draws.  Draws are
    append-only: new ids are read and appended; a count that does not add up (a draw
    committed late with a lower id, a deletion) re-reads them all.
labels (per corpus and aggregation method)
    the newest label of every key, read the same way (labels are append-only; newest wins).
the crowd's answers and confusions
    :func:`~unpooled.service.evaluations.rates.keyed_answers`, memoised on the answers'
    fingerprint (count, max id and weight sum of the counted verification answers): the levels
    of one re-scoring share one fit.  New answers (which is how new labels arrive) refit it.
the inputs per (corpus, level, match, labels)
    with every fingerprint above and the systems' names: a read with nothing new returns them.
What the entity scores read (the answers on the drawn instances' arguments, the exhaustive documents' layers, the
submissions' mentions in them, the cross-document identity, the core's document terms) is kept by
:mod:`.entity_inputs` the same way.

:func:`clear_cache` forgets them all (with the crowd's and the entity scores'); :func:`.scoring.clear_cache` calls
it.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp
from django.db.models import Count, Max

from unpooled.core.errors import check_choice
from unpooled.core.estimators import LEVELS, make_design, sampling_distribution
from unpooled.core.estimators.exhaustive import fact_level
from unpooled.core.matching import InstanceRef, match_matrix, relation_matrix
from unpooled.core.offline import MATCHES, LabelledDraw, OfflineData, TrueInstance
from unpooled.core.offline import Submission as CoreSubmission
from unpooled.service.annotation.actions import current_labels, relations_protocol
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Label, Task
from unpooled.service.corpora.models import Corpus, Document
from unpooled.service.submissions.models import RelationInstance, Submission

from . import entity_inputs, rates
from .rates import corpus_key  # noqa: F401 - re-exported: the key of every per-corpus cache
from .models import Draw
from .policy import LABEL_METHOD

#: pools kept in memory (least recently used dropped first); one pool holds a corpus's universe
MAX_POOLS = 4

#: held while reading or building the caches (and by :mod:`.scoring` around a read and its estimate)
lock = threading.RLock()
_pools: OrderedDict[tuple[tuple, str], _Pool] = OrderedDict()
_labels: dict[tuple[tuple, str], _Labels] = {}
_inputs: dict[tuple, tuple] = {}  # (corpus, level, match, method) -> (fp, Inputs)


def offline_inputs(corpus: Corpus, *, level: str = "instance"):
    """Everything the from-scratch path (:func:`.scoring.from_scratch`) estimates from, read anew:
    :func:`offline_data`'s ``(data, by_name, docs)`` (with the corpus's entity clusters under the document recall
    protocol), the corpus's sentence split and the crowd's keyed answers."""
    data, by_name, docs = offline_data(corpus, level=level)
    if not data.submissions:
        return data, by_name, docs, None, None
    if rates.recall_protocol(corpus) == "document":
        data = replace(data, entities=rates.entities(corpus))
    return data, by_name, docs, rates.sentences(corpus), rates.keyed_answers(corpus)


def system_name(sub: Submission) -> str:
    return f"{sub.team.name}/{sub.run_id}"


def exhaustive_truth(corpus: Corpus) -> tuple[list[TrueInstance], int]:
    """True instances of the completely annotated sampled documents, and how many documents that is: the relations
    layers asked under the corpus's recall protocol only (a layer of the other protocol is never mixed in; its
    document does not count until it is annotated under this one: ``do_set_recall_protocol``)."""
    schema = corpus.schema.schema()
    protocol = rates.recall_protocol(corpus)
    inclusion = dict(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("document_id", "inclusion"))
    out: list[TrueInstance] = []
    docs = 0
    for task in (Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.COMPLETE,
                                     document_id__in=list(inclusion)).select_related("document")
                 .order_by("document_id", "id")):
        if relations_protocol(task) != protocol:
            continue
        docs += 1
        ms = task.payload.get("mentions", [])
        seen = set()
        for a, pred, b in task.result.get("relations", []):
            canon, s, o = schema.canonical_arguments(pred, ms[a], ms[b])
            ref = InstanceRef(task.document.doc_id, s["start"], s["end"], canon, o["start"], o["end"])
            if ref.key in seen:
                continue
            seen.add(ref.key)
            out.append(TrueInstance(ref, ref.key, 1.0, inclusion[task.document_id]))
    return out, docs


def offline_data(corpus: Corpus, *, level: str = "instance", label_method: str = LABEL_METHOD
                 ) -> tuple[OfflineData, dict[str, Submission], int]:
    """The corpus's submissions, labelled draws and exhaustive truth as the core's input.

    Labels are the hard majority-vote labels by default (the paper's rule): Dawid–Skene posteriors use one class
    prior for the whole pool, which pulls a system whose precision differs from the pool's
    towards it (measured: +9 points on a system of true precision 0.50 scored beside one of
    1.00, tests/service/test_evaluate.py); ``label_method='dawid-skene'`` uses them anyway.
    """
    subs = list(Submission.objects.filter(corpus=corpus, is_reference=False).select_related("team").order_by("id"))
    core_subs, by_name = [], {}
    for sub in subs:
        rows = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list(
            "document__doc_id", "subject_start", "subject_end", "predicate", "object_start", "object_end", "value",
            "key", "subject_id", "object_id", "confidence"))
        if not rows:
            continue
        name = system_name(sub)
        by_name[name] = sub
        core_subs.append(CoreSubmission(
            name, "", tuple(InstanceRef(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows),
            tuple(r[7] for r in rows), tuple(str(r[8]) for r in rows),
            tuple(str(r[9]) if r[9] is not None else "=" + (r[6] or "") for r in rows), tuple(r[10] for r in rows)))
    labels = current_labels(corpus, method=label_method)
    draws = []
    for name, sub in by_name.items():
        for seq, key in Draw.objects.filter(submission=sub, level=level).order_by("seq").values_list("seq", "key"):
            lab = labels.get(key)
            if lab is not None:
                # majority: the hard label (the vote share is not a probability of being correct);
                # Dawid-Skene: the posterior probability
                value = float(lab.probability) if lab.method == "dawid-skene" else float(lab.correct)
                draws.append(LabelledDraw(name, key, value, seq))
    truth, docs = exhaustive_truth(corpus)
    return OfflineData(tuple(core_subs), tuple(draws), tuple(truth), ()), by_name, docs


# -- cached layers -------------------------------------------------------------------------------
@dataclass
class _Draws:
    fp: tuple = (0, 0)                       # (count, max id)
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # system row
    seq: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    u: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))     # universe index (-1: unknown key)
    kid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # index into ``keys``
    keys: list = field(default_factory=list)                                 # the distinct drawn keys
    kindex: dict = field(default_factory=dict)                               # key -> its index in ``keys``
    gs: np.ndarray | None = None             # (m, S) bool, g_i(x_s) (match != exact)


@dataclass
class _Truth:
    fp: tuple                                # the truth itself
    truth: list
    docs: int
    g0: np.ndarray | None                    # (m, n0): system i matches true instance t
    v0: np.ndarray
    inputs: tuple = ()                       # _truth_inputs() it was read under
    generation: int = -1                     # the pool generation g0 was matched against


@dataclass
class _Pool:
    corpus: tuple                            # (pk, created): a corpus re-created under the same pk is another
    match: str
    sub_fp: tuple[tuple, ...]                # (id, created) of every submission of the corpus: the fingerprint
    sys_ids: list[int]                       # submissions with instances: the systems, in id order
    universe: list[InstanceRef]
    index: dict[str, int]
    members: list[np.ndarray]                # universe indices of each system's instances (row order)
    codes: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per system: predicate, subject, fill codes
    confs: list[np.ndarray]                  # per system: the submitted confidence of each member
    R: sp.csr_matrix | None = None           # R[u, v]: universe u matches universe v (overlap)
    G: sp.csc_matrix | None = None           # G[i, v]: system i has an instance matching v
    mult: np.ndarray | None = None           # pooled instances matching each universe instance
    P: dict = field(default_factory=dict)    # level -> csr (m, U)
    draws: dict = field(default_factory=dict)  # level -> _Draws
    truth: _Truth | None = None
    generation: int = 0
    K: object = False                        # the confidences as an (m, U) csr matrix; None: all 1; False: not built
    stypes: list = field(default_factory=list)   # per system: the code in ``types`` of each member's subject type
    types: dict = field(default_factory=dict)    # subject entity type (None: untyped) -> code
    upred: list = field(default_factory=list)    # per universe instance: the code in ``preds`` of its predicate
    preds: dict = field(default_factory=dict)    # predicate -> code
    groups: Groups | None = None                 # :func:`groups`, built once per generation

    @property
    def m(self) -> int:
        return len(self.sys_ids)


@dataclass(frozen=True)
class Groups:
    """What the breakdowns group a pool's instances by, read with the pool (instances are immutable once
    ingested): per system (the design's rows) the universe indices of its instances in instance order
    (``members``) and the code in ``types`` of each one's subject entity type (``subject_type``; None: untyped);
    per universe instance the code in ``predicates`` of its predicate (``predicate``)."""

    members: tuple
    subject_type: tuple
    types: tuple
    predicate: np.ndarray
    predicates: tuple


def groups(pool: _Pool) -> Groups:
    if pool.groups is None:
        pool.groups = Groups(tuple(pool.members), tuple(pool.stypes), tuple(pool.types),
                             np.asarray(pool.upred, dtype=np.int64), tuple(pool.preds))
    return pool.groups


@dataclass
class _Labels:
    fp: tuple = (0, 0)                           # (rows read, max id read)
    values: dict = field(default_factory=dict)   # key -> (correct, probability, method)


# -- fingerprints ---------------------------------------------------------------------------------
# -- pool ------------------------------------------------------------------------------------------
def _intern(s):
    return sys.intern(s) if s is not None else None


def _read_systems(corpus: Corpus, sub_ids, pool: _Pool):
    """Append the instances of ``sub_ids`` (in id order) to the pool's universe (and its predicates); per system
    members, codes, confidences and subject types."""
    universe, index, upred, allpreds, types = pool.universe, pool.index, pool.upred, pool.preds, pool.types
    docs = {pk: sys.intern(d) for pk, d in Document.objects.filter(corpus=corpus).values_list("id", "doc_id")}
    preds: dict[str, int] = {}
    out: dict[int, tuple] = {}
    cur, mem, pc, sc, fc, fills, cf, st = None, [], [], [], [], {}, [], []

    def close():
        if cur is not None and mem:
            out[cur] = (np.asarray(mem, np.int64), (np.asarray(pc, np.int64), np.asarray(sc, np.int64),
                                                     np.asarray(fc, np.int64)), np.asarray(cf, float),
                        np.asarray(st, np.int64))

    qs = (RelationInstance.objects.filter(submission_id__in=list(sub_ids)).order_by("submission_id", "pk")
          .values_list("submission_id", "document_id", "subject_start", "subject_end", "predicate", "object_start",
                       "object_end", "value", "key", "subject_id", "object_id", "confidence", "subject__type"))
    for sid, doc, ss, se, pred, os_, oe, value, key, subj, obj, conf, stype in qs.iterator(chunk_size=20_000):
        if sid != cur:
            close()
            cur, mem, pc, sc, fc, fills, cf, st = sid, [], [], [], [], {}, [], []
        u = index.get(key)
        if u is None:
            u = index[key] = len(universe)
            universe.append(InstanceRef(docs[doc], ss, se, _intern(pred), os_, oe, value))
            upred.append(allpreds.setdefault(pred, len(allpreds)))
        mem.append(u)
        cf.append(conf)
        st.append(types.setdefault(stype, len(types)))
        p = preds.setdefault(pred, len(preds))
        pc.append(p)
        sc.append(subj)
        fk = (subj, p, obj) if obj is not None else (subj, p, "=" + (value or ""))
        fc.append(fills.setdefault(fk, len(fills)))
    close()
    return out


def _build_pool(corpus: Corpus, match: str, sub_fp: tuple[tuple, ...]) -> _Pool:
    pool = _Pool(corpus_key(corpus), match, sub_fp, [], [], {}, [], [], [])
    sub_ids = [s for s, _ in sub_fp]
    got = _read_systems(corpus, sub_ids, pool)
    pool.sys_ids = [s for s in sub_ids if s in got]
    for part, k in (("members", 0), ("codes", 1), ("confs", 2), ("stypes", 3)):
        setattr(pool, part, [got[s][k] for s in pool.sys_ids])
    if match != "exact" and pool.universe:
        pool.R = relation_matrix(pool.universe, None, match)
        _finish_matching(pool)
    return pool


def _extend_pool(pool: _Pool, corpus: Corpus, sub_fp: tuple[tuple, ...]) -> None:
    """Add the submissions of ``sub_fp`` not in the pool (all with larger ids) at the end."""
    old = set(pool.sub_fp)
    new = [s for s, c in sub_fp if (s, c) not in old]
    U0 = len(pool.universe)
    got = _read_systems(corpus, new, pool)
    added = [s for s in new if s in got]
    pool.sub_fp = sub_fp
    if not added:
        return
    pool.sys_ids += added
    pool.members += [got[s][0] for s in added]
    pool.codes += [got[s][1] for s in added]
    pool.confs += [got[s][2] for s in added]
    pool.stypes += [got[s][3] for s in added]
    pool.K = False
    pool.groups = None
    U = len(pool.universe)
    if pool.match != "exact":
        R = pool.R
        if U > U0:
            # the matching relation is symmetric: the new rows are the new columns transposed
            C = relation_matrix(pool.universe, np.arange(U0, U, dtype=np.int64), pool.match)
            if R is None or U0 == 0:
                R = C
            else:
                top = C[:U0]
                R = sp.bmat([[R, top], [top.T, C[U0:]]], format="csr", dtype=np.int32)
        pool.R = R
        _finish_matching(pool)
    pool.P.clear()
    for d in pool.draws.values():
        d.gs = None  # recomputed against the new G (and m)
    pool.generation += 1


def _finish_matching(pool: _Pool) -> None:
    U = len(pool.universe)
    rows = np.concatenate([np.full(len(x), i, np.int64) for i, x in enumerate(pool.members)])
    cols = np.concatenate(pool.members)
    member = sp.csr_matrix((np.ones(len(rows), np.int32), (rows, cols)), shape=(pool.m, U))
    G = (member @ pool.R).tocsc()
    G.data = G.data > 0
    G = G.astype(bool)
    G.eliminate_zeros()
    pool.G = G
    pool.mult = np.asarray(pool.R.getnnz(axis=0), dtype=np.int64)


def _pool(corpus: Corpus, match: str, sub_fp: tuple[tuple, ...]) -> _Pool:
    key = (corpus_key(corpus), match)
    pool = _pools.get(key)
    if pool is not None and pool.sub_fp != sub_fp:
        old, now = set(pool.sub_fp), set(sub_fp)
        if old <= now and min(s for s, _ in now - old) > max((s for s, _ in old), default=0):
            _extend_pool(pool, corpus, sub_fp)
        else:
            pool = None
    if pool is None:
        pool = _build_pool(corpus, match, sub_fp)
    _pools[key] = pool
    _pools.move_to_end(key)
    while len(_pools) > MAX_POOLS:
        (gone, gone_match), _ = _pools.popitem(last=False)
        for k in [k for k in _inputs if k[0] == gone and k[2] == gone_match]:
            del _inputs[k]
    return pool


def _P(pool: _Pool, level: str) -> sp.csr_matrix:
    P = pool.P.get(level)
    if P is None:
        rows, cols, vals = [], [], []
        for i, (xs, (pc, sc, fc)) in enumerate(zip(pool.members, pool.codes)):
            rows.append(np.full(len(xs), i))
            cols.append(xs)
            vals.append(sampling_distribution(len(xs), level=level, predicate=pc, subject=sc, fill=fc))
        P = pool.P[level] = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                          shape=(pool.m, len(pool.universe)))
    return P


# -- truth -------------------------------------------------------------------------------------------
def _truth_inputs(corpus: Corpus, protocol: str) -> tuple:
    """What :func:`~.inputs.exhaustive_truth` reads, cheaply: the recall ``protocol``, the sampled documents with
    their inclusion probabilities and the completed relation tasks (id, completion time) of those documents."""
    sampled = ExhaustiveDocument.objects.filter(corpus=corpus)
    return (protocol, tuple(sampled.order_by("document_id").values_list("document_id", "inclusion")),
            tuple(Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.COMPLETE,
                                      document_id__in=sampled.values("document_id"))
                  .order_by("id").values_list("id", "completed")))


def _truth(pool: _Pool, corpus: Corpus, protocol: str) -> _Truth:
    inputs = _truth_inputs(corpus, protocol)
    got = pool.truth
    if got is None or got.inputs != inputs:
        truth, docs = exhaustive_truth(corpus)
        fp = (docs, tuple((t.key, t.ref, t.weight, t.inclusion) for t in truth))
        if got is None or got.fp != fp:
            got = _Truth(fp, truth, docs, None, np.array([t.weight / t.inclusion for t in truth], dtype=float))
        got.inputs = inputs
    if got.g0 is None or got.generation != pool.generation or got.g0.shape[0] != pool.m:
        systems = [[pool.universe[u] for u in xs.tolist()] for xs in pool.members]
        got.g0 = match_matrix(systems, [t.ref for t in got.truth], policy=pool.match)
        got.generation = pool.generation
    pool.truth = got
    return got


# -- draws -------------------------------------------------------------------------------------------
def _draws(pool: _Pool, level: str) -> _Draws:
    d = pool.draws.get(level)
    if d is None:
        d = pool.draws[level] = _Draws()
    qs = Draw.objects.filter(submission_id__in=pool.sys_ids, level=level)
    agg = qs.aggregate(n=Count("id"), mx=Max("id"))
    fp = (agg["n"] or 0, agg["mx"] or 0)
    if fp != d.fp:
        pos = {s: i for i, s in enumerate(pool.sys_ids)}
        fresh = list(qs.filter(id__gt=d.fp[1]).values_list("id", "submission_id", "seq", "key"))
        if not fresh or d.fp[0] + len(fresh) != fp[0]:
            # not append-only since last time (a draw committed late under a lower id, a deletion, or one
            # committed between the two reads): read them all
            d = pool.draws[level] = _Draws()
            fresh = list(qs.values_list("id", "submission_id", "seq", "key"))
        if fresh:
            get = pool.index.get
            ids = np.concatenate([d.ids, np.array([r[0] for r in fresh], np.int64)])
            sy = np.concatenate([d.sys, np.array([pos[r[1]] for r in fresh], np.int64)])
            seq = np.concatenate([d.seq, np.array([r[2] for r in fresh], np.int64)])
            u = np.concatenate([d.u, np.array([get(r[3], -1) for r in fresh], np.int64)])
            kget = d.kindex.setdefault
            new_kid = np.array([kget(r[3], len(d.kindex)) for r in fresh], np.int64)
            d.keys.extend(list(d.kindex)[len(d.keys):])
            kid = np.concatenate([d.kid, new_kid])
            gs = None
            if pool.G is not None and d.gs is not None and d.gs.shape[0] == pool.m:
                gs = np.concatenate([d.gs, _gs(pool, u[len(d.u):])], axis=1)
            order = np.lexsort((seq, sy))  # the from-scratch order: by system, then seq
            d.ids, d.sys, d.seq, d.u, d.kid = ids[order], sy[order], seq[order], u[order], kid[order]
            d.gs = None if gs is None else gs[:, order]
        d.fp = (len(d.ids), int(d.ids.max()) if len(d.ids) else 0)  # what is held, not what was counted
    if pool.G is not None and (d.gs is None or d.gs.shape != (pool.m, len(d.u))):
        d.gs = _gs(pool, d.u)
    return d


def _gs(pool: _Pool, u: np.ndarray) -> np.ndarray:
    out = np.zeros((pool.m, len(u)), dtype=bool)
    ok = u >= 0
    if ok.any():
        out[:, ok] = pool.G[:, u[ok]].toarray()
    return out


# -- labels -------------------------------------------------------------------------------------------
def _current_labels(corpus: Corpus, method: str) -> dict:
    """key -> (correct, probability, method) of the newest label of each key (as ``current_labels``)."""
    key = (corpus_key(corpus), method)
    lab = _labels.get(key)
    if lab is None:
        lab = _labels[key] = _Labels()
    qs = Label.objects.filter(corpus=corpus, method=method)
    agg = qs.aggregate(n=Count("id"), mx=Max("id"))
    fp = (agg["n"] or 0, agg["mx"] or 0)
    if fp != lab.fp:
        cols = ("id", "key", "correct", "probability", "method")
        fresh = list(qs.filter(id__gt=lab.fp[1]).order_by("id").values_list(*cols))
        if not fresh or lab.fp[0] + len(fresh) != fp[0]:  # not append-only since last time: read them all
            lab = _labels[key] = _Labels()
            fresh = list(qs.order_by("id").values_list(*cols))
        for _, k, correct, prob, meth in fresh:
            lab.values[k] = (correct, prob, meth)
        if fresh:  # what is held, not what was counted
            lab.fp = (lab.fp[0] + len(fresh), fresh[-1][0])
    return lab.values


# -- the inputs ------------------------------------------------------------------------------------
@dataclass
class Inputs:
    """What one scoring of a corpus at a level estimates from, read through the caches: the core's design (every
    system's sampling distribution over the pool, the labelled draws, the exhaustive truth), the crowd's votes on
    the pool, and what names them (``names`` in the design's row order, ``keys`` of its labelled draws, ``truth``
    in its ``g0`` columns' order, the pool's ``universe`` in its columns' order).  ``fp`` fingerprints them."""

    design: object
    votes: object
    names: tuple[str, ...]
    by_name: dict
    docs: int
    keys: list
    truth: list
    universe: list
    fp: tuple
    #: the submitted confidences, (m, U) on the pool's instances (:func:`confidences`); None when all are 1
    confidences: object = None
    #: the recall protocol recall follows (:func:`recall_protocol`); under ``document`` ``truth`` holds one true
    #: instance per fact (:func:`unpooled.core.estimators.exhaustive.fact_level`)
    recall_protocol: str = "sentence"
    #: what the breakdowns group the pool by (:class:`Groups`)
    groups: Groups | None = None


def digest(fp: tuple) -> str:
    """A short stable digest of an :class:`Inputs` fingerprint (what a stored breakdown records it was computed
    from)."""
    return hashlib.blake2b(repr(fp).encode(), digest_size=16).hexdigest()


def confidences(pool: _Pool):
    """The pool's confidences as the ``(m, U)`` matrix of :func:`unpooled.core.estimators.ppi.confidence_matrix`
    (a repeated instance of a system: its first confidence), built once per pool; None when every one is 1."""
    if pool.K is False:
        from unpooled.core.estimators.ppi import confidence_matrix

        if all(bool(np.all(c >= 1.0)) for c in pool.confs):
            pool.K = None
        else:
            rows = np.concatenate([np.full(len(x), i, np.int64) for i, x in enumerate(pool.members)])
            cols, vals = np.concatenate(pool.members), np.concatenate(pool.confs)
            first = np.unique(rows * max(len(pool.universe), 1) + cols, return_index=True)[1]
            shape = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(pool.m, len(pool.universe)))
            pool.K = confidence_matrix(shape, rows[first], cols[first], vals[first])
    return pool.K


def read(corpus: Corpus, *, level: str = "instance", match: str = "overlap", label_method: str = LABEL_METHOD,
           timings: dict | None = None) -> Inputs | None:
    """The corpus's :class:`Inputs` at ``level`` (None when no submission has instances): what
    :func:`.scoring.score` estimates from, and what the sampling planner and the breakdowns read instead of reading
    the corpus again.  ``timings``: seconds per part are added to it (pool, truth, draws, labels, confusions,
    design)."""
    from time import perf_counter

    check_choice("level", level, LEVELS)
    check_choice("match", match, MATCHES)
    t = timings if timings is not None else {}
    t["start"] = perf_counter()

    def mark(name):
        now = perf_counter()
        t[name] = now - t["start"]
        t["start"] = now

    with lock:
        # the human reference is no system of the pool (evaluations/reference.py says why)
        subs = list(Submission.objects.filter(corpus=corpus, is_reference=False).select_related("team").order_by("id"))
        pool = _pool(corpus, match, tuple((s.pk, s.created) for s in subs))
        mark("pool")
        by_id = {s.pk: s for s in subs}
        names = tuple(system_name(by_id[s]) for s in pool.sys_ids)
        by_name = {n: by_id[s] for n, s in zip(names, pool.sys_ids)}
        if not pool.sys_ids:
            return None
        protocol = rates.recall_protocol(corpus)
        truth = _truth(pool, corpus, protocol)
        mark("truth")
        P = _P(pool, level)
        d = _draws(pool, level)
        mark("draws")
        labels = _current_labels(corpus, label_method)
        mark("labels")
        ans_fp = rates.answers_fp(corpus) if label_method == "majority" else None
        answers = rates.keyed_answers(corpus, ans_fp) if label_method == "majority" else None
        mark("confusions")
        fp = _inputs_fp(pool, d, truth, labels, ans_fp, label_method) + (names, protocol)
        ikey = (corpus_key(corpus), level, match, label_method)
        kept = _inputs.get(ikey)
        if kept is not None and kept[0] == fp:  # nothing changed: the design built last time
            return replace(kept[1], by_name=by_name)
        design, votes, keys, cols = _design(corpus, pool, P, d, truth, labels, match, answers, protocol)
        mark("design")
        got = Inputs(design, votes, names, by_name, truth.docs, keys, cols, list(pool.universe), fp,
                     confidences(pool), protocol, groups(pool))
        _inputs[ikey] = (fp, got)
        return got


def _design(corpus: Corpus, pool: _Pool, P, d: _Draws, truth: _Truth, labels: dict, match: str, answers,
            protocol: str = "sentence"):
    """The core's design of :func:`read` (the labelled draws, the exhaustive truth, :math:`p_0`), the crowd's votes
    on the pool, the instance key of each labelled draw, and the true instances of the design's exhaustive columns
    (under the document recall protocol one per fact, matched through the corpus's entity clusters)."""
    # each drawn key's label: the hard majority label (Dawid-Skene: the posterior); with the crowd's answers
    # the estimates come from the votes (core.estimators.noisy) and these labels give the raw figures only
    value = np.zeros(len(d.keys))
    has = np.zeros(len(d.keys), dtype=bool)
    for j, k in enumerate(d.keys):
        lab = labels.get(k)
        if lab is None:
            continue
        correct, prob, meth = lab
        value[j] = float(prob) if meth == "dawid-skene" else float(correct)
        has[j] = True
    keep = has[d.kid]
    if (d.u[keep] < 0).any():
        raise KeyError(d.keys[int(d.kid[np.flatnonzero(keep & (d.u < 0))[0]])])
    src, xs, f = d.sys[keep], d.u[keep], value[d.kid[keep]]
    keys = [d.keys[j] for j in d.kid[keep].tolist()]
    U = len(pool.universe)
    p0 = np.ones(U)
    for tr in truth.truth:
        u = pool.index.get(tr.key)
        if u is not None:
            p0[u] = tr.weight
    gs = None
    cols, g0, v0 = list(truth.truth), truth.g0, truth.v0
    if protocol == "document":
        # facts between the corpus's entity clusters, matched through any of their mentions (the one core path)
        fl = fact_level(pool.universe, pool.members, xs, [t.ref for t in truth.truth], rates.entities(corpus))
        cols, g0, v0, gs, p0 = [cols[k] for k in fl.first], fl.g0, v0[fl.first], fl.gs, fl.p0(p0)
    elif match != "exact":
        gs = d.gs[:, keep] if len(xs) else None
        p0 = p0 / pool.mult
    # recall's variance by documents: each exhaustive instance's document, over the corpus's complete
    # exhaustive documents (those where annotators found nothing count too), as from_scratch gives them;
    # p0 = 0 outside the exhaustive protocol's support (core.estimators.exhaustive.p0_support)
    found = {tr.key for tr in truth.truth}
    refs = [pool.universe[u] for u in xs.tolist()]
    inside = rates.inside(corpus, refs, found, protocol=protocol) if len(xs) else None
    design = make_design(P, src, xs, f, g0, v0, p0, gs=gs, corrected_labels=True,
                         y0_docs=[t.ref.doc for t in cols], documents=truth.docs or None, inside=inside)
    votes = answers.on(pool.index, U, [x.predicate for x in pool.universe]) if answers is not None else None
    return design, votes, keys, cols


def _inputs_fp(pool: _Pool, d: _Draws, truth: _Truth, labels, ans_fp, label_method) -> tuple:
    lab = _labels.get((pool.corpus, label_method))
    # the truth's inputs too: the exhaustive layer's subject types (the breakdowns') change with its tasks
    return (pool.sub_fp, pool.generation, d.fp, truth.fp, truth.inputs, lab.fp if lab else None, ans_fp)


def clear_cache() -> None:
    """Forget every cached input, the crowd's (:func:`.rates.clear_cache`) and the entity scores'
    (:func:`.entity_inputs.clear_cache`) too."""
    rates.clear_cache()
    entity_inputs.clear_cache()
    with lock:
        _pools.clear()
        _labels.clear()
        _inputs.clear()
