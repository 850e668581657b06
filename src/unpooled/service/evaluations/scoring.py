r"""Incremental re-scoring: the joint estimates of a corpus from cached structures plus the newest labels.

:func:`unpooled.service.evaluations.inputs.offline_data` followed by
:func:`unpooled.core.offline.score` rebuilds everything from the database on every call:
every instance of every submission, the universe of instance keys, the sampling matrix
``P``, the overlap matching of the draws (:math:`g_i(x_s)`) and of the exhaustive truth
(``g0``), and :math:`p_0` (one over the number of pooled instances matching each).  With
100 submissions of a few thousand instances that is seconds of work, and almost none of it
depends on the labels.

This module keeps those parts in process memory (the task worker is a long-lived process),
in layers, each checked against a cheap fingerprint read from the database on every call, so
that a change made by another process is never missed:

``_Pool`` per (corpus, match)
    the systems (submissions with instances, by id), the universe, each system's members,
    the matching relation ``R`` (universe x universe; ``overlap`` only), the systems' matches
    ``G = member @ R`` and the multiplicities; per sampling level the rows of ``P``.
    Fingerprint: the ids and creation times of the corpus's submissions.  New submissions
    with ids above the cached ones extend the pool (new universe instances, their ``R``
    columns, new rows); any other change rebuilds it.  (Submissions are immutable once
    ingested: instances are written in the transaction that creates the submission.)
``_Truth`` per pool
    the exhaustive truth, ``g0`` and ``v0``; fingerprint: what
    :func:`~unpooled.service.evaluations.inputs.exhaustive_truth` reads (the sampled
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
the result per (corpus, level, match, weights)
    with every fingerprint above and the systems' names: re-scoring with nothing new returns it.

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

import math
import sys
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp
from django.db.models import Count, Max

from unpooled.core.errors import check_choice
from unpooled.core.estimators import LEVELS, estimate, make_design, sampling_distribution
from unpooled.core.estimators.joint import WEIGHTS, WeightDegeneracyWarning
from unpooled.core.matching import InstanceRef, _relation, match_matrix
from unpooled.core.offline import MATCHES, OfflineResult, system_rows
from unpooled.core.offline import score as offline_score
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Label, Task
from unpooled.service.corpora.models import Corpus, Document
from unpooled.service.submissions.models import RelationInstance, Submission

from . import rates
from .inputs import exhaustive_truth, offline_data, system_name
from .models import Draw
from .policy import CONFIDENCE, LABEL_METHOD

#: pools kept in memory (least recently used dropped first); one pool holds a corpus's universe
MAX_POOLS = 4

_lock = threading.RLock()
_pools: OrderedDict[tuple[tuple, str], _Pool] = OrderedDict()
_labels: dict[tuple[tuple, str], _Labels] = {}
_results: dict[tuple, tuple] = {}  # (corpus, level, match, weights, method) -> (inputs' fp, result)
_inputs: dict[tuple, tuple] = {}  # (corpus, level, match, method) -> (fp, Inputs)
#: seconds per part of the last :func:`score` (pool, truth, draws, labels, confusions, design, estimate)
last_timings: dict[str, float] = {}


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
    R: sp.csr_matrix | None = None           # R[u, v]: universe u matches universe v (overlap)
    G: sp.csc_matrix | None = None           # G[i, v]: system i has an instance matching v
    mult: np.ndarray | None = None           # pooled instances matching each universe instance
    P: dict = field(default_factory=dict)    # level -> csr (m, U)
    draws: dict = field(default_factory=dict)  # level -> _Draws
    truth: _Truth | None = None
    generation: int = 0

    @property
    def m(self) -> int:
        return len(self.sys_ids)


@dataclass
class _Labels:
    fp: tuple = (0, 0)                           # (rows read, max id read)
    values: dict = field(default_factory=dict)   # key -> (correct, probability, method)


# -- fingerprints ---------------------------------------------------------------------------------
# -- pool ------------------------------------------------------------------------------------------
def _intern(s):
    return sys.intern(s) if s is not None else None


def _read_systems(corpus: Corpus, sub_ids, universe: list, index: dict):
    """Append the instances of ``sub_ids`` (in id order) to the universe; per system members and codes."""
    docs = {pk: sys.intern(d) for pk, d in Document.objects.filter(corpus=corpus).values_list("id", "doc_id")}
    preds: dict[str, int] = {}
    out: dict[int, tuple] = {}
    cur, mem, pc, sc, fc, fills = None, [], [], [], [], {}

    def close():
        if cur is not None and mem:
            out[cur] = (np.asarray(mem, np.int64), (np.asarray(pc, np.int64), np.asarray(sc, np.int64),
                                                     np.asarray(fc, np.int64)))

    qs = (RelationInstance.objects.filter(submission_id__in=list(sub_ids)).order_by("submission_id", "pk")
          .values_list("submission_id", "document_id", "subject_start", "subject_end", "predicate", "object_start",
                       "object_end", "value", "key", "subject_id", "object_id"))
    for sid, doc, ss, se, pred, os_, oe, value, key, subj, obj in qs.iterator(chunk_size=20_000):
        if sid != cur:
            close()
            cur, mem, pc, sc, fc, fills = sid, [], [], [], [], {}
        u = index.get(key)
        if u is None:
            u = index[key] = len(universe)
            universe.append(InstanceRef(docs[doc], ss, se, _intern(pred), os_, oe, value))
        mem.append(u)
        p = preds.setdefault(pred, len(preds))
        pc.append(p)
        sc.append(subj)
        fk = (subj, p, obj) if obj is not None else (subj, p, "=" + (value or ""))
        fc.append(fills.setdefault(fk, len(fills)))
    close()
    return out


def _build_pool(corpus: Corpus, match: str, sub_fp: tuple[tuple, ...]) -> _Pool:
    universe: list[InstanceRef] = []
    index: dict[str, int] = {}
    sub_ids = [s for s, _ in sub_fp]
    got = _read_systems(corpus, sub_ids, universe, index)
    sys_ids = [s for s in sub_ids if s in got]
    pool = _Pool(_ckey(corpus), match, sub_fp, sys_ids, universe, index, [got[s][0] for s in sys_ids],
                 [got[s][1] for s in sys_ids])
    if match != "exact" and universe:
        U = len(universe)
        pool.R = _relation(universe, np.arange(U, dtype=np.int64), match, None, frozenset()).tocsr()
        _finish_matching(pool)
    return pool


def _extend_pool(pool: _Pool, corpus: Corpus, sub_fp: tuple[tuple, ...]) -> None:
    """Add the submissions of ``sub_fp`` not in the pool (all with larger ids) at the end."""
    old = set(pool.sub_fp)
    new = [s for s, c in sub_fp if (s, c) not in old]
    U0 = len(pool.universe)
    got = _read_systems(corpus, new, pool.universe, pool.index)
    added = [s for s in new if s in got]
    pool.sub_fp = sub_fp
    if not added:
        return
    pool.sys_ids += added
    pool.members += [got[s][0] for s in added]
    pool.codes += [got[s][1] for s in added]
    U = len(pool.universe)
    if pool.match != "exact":
        R = pool.R
        if U > U0:
            # the matching relation is symmetric: the new rows are the new columns transposed
            C = _relation(pool.universe, np.arange(U0, U, dtype=np.int64), pool.match, None, frozenset()).tocsr()
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


def _ckey(corpus: Corpus) -> tuple:
    return corpus.pk, corpus.created


def _pool(corpus: Corpus, match: str, sub_fp: tuple[tuple, ...]) -> _Pool:
    key = (_ckey(corpus), match)
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
        for k in [k for k in _results if k[0] == gone and k[2] == gone_match]:
            del _results[k]
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
def _truth_inputs(corpus: Corpus) -> tuple:
    """What :func:`~.inputs.exhaustive_truth` reads, cheaply: the sampled documents with their inclusion
    probabilities and the completed relation tasks (id, completion time) of those documents."""
    sampled = ExhaustiveDocument.objects.filter(corpus=corpus)
    return (tuple(sampled.order_by("document_id").values_list("document_id", "inclusion")),
            tuple(Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.COMPLETE,
                                      document_id__in=sampled.values("document_id"))
                  .order_by("id").values_list("id", "completed")))


def _truth(pool: _Pool, corpus: Corpus) -> _Truth:
    inputs = _truth_inputs(corpus)
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
    key = (_ckey(corpus), method)
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


# -- scoring -------------------------------------------------------------------------------------------
@dataclass
class Scored:
    """One scoring: the core's result, the submissions by system name, and the exhaustive documents.

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


def inputs(corpus: Corpus, *, level: str = "instance", match: str = "overlap", label_method: str = LABEL_METHOD,
           timings: dict | None = None) -> Inputs | None:
    """The corpus's :class:`Inputs` at ``level`` (None when no submission has instances): what :func:`score`
    estimates from, and what the sampling planner and the breakdowns read instead of reading the corpus again."""
    from time import perf_counter

    check_choice("level", level, LEVELS)
    check_choice("match", match, MATCHES)
    t = timings if timings is not None else {}
    t["start"] = perf_counter()

    def mark(name):
        now = perf_counter()
        t[name] = now - t["start"]
        t["start"] = now

    with _lock:
        # the human reference is no system of the pool (evaluations/reference.py says why)
        subs = list(Submission.objects.filter(corpus=corpus, is_reference=False).select_related("team").order_by("id"))
        pool = _pool(corpus, match, tuple((s.pk, s.created) for s in subs))
        mark("pool")
        by_id = {s.pk: s for s in subs}
        names = tuple(system_name(by_id[s]) for s in pool.sys_ids)
        by_name = {n: by_id[s] for n, s in zip(names, pool.sys_ids)}
        if not pool.sys_ids:
            return None
        truth = _truth(pool, corpus)
        mark("truth")
        P = _P(pool, level)
        d = _draws(pool, level)
        mark("draws")
        labels = _current_labels(corpus, label_method)
        mark("labels")
        ans_fp = rates.answers_fp(corpus) if label_method == "majority" else None
        answers = rates.keyed_answers(corpus, ans_fp) if label_method == "majority" else None
        mark("confusions")
        fp = _inputs_fp(pool, d, truth, labels, ans_fp, label_method) + (names,)
        ikey = (_ckey(corpus), level, match, label_method)
        kept = _inputs.get(ikey)
        if kept is not None and kept[0] == fp:  # nothing changed: the design built last time
            return replace(kept[1], by_name=by_name)
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
        if match != "exact":
            gs = d.gs[:, keep] if len(xs) else None
            p0 = p0 / pool.mult
        # recall's variance by documents: each exhaustive instance's document, over the corpus's complete
        # exhaustive documents (those where annotators found nothing count too), as from_scratch gives them;
        # p0 = 0 outside the exhaustive protocol's support (core.estimators.exhaustive.p0_support)
        found = {tr.key for tr in truth.truth}
        inside = rates.inside(corpus, [pool.universe[u] for u in xs.tolist()], found) if len(xs) else None
        design = make_design(P, src, xs, f, truth.g0, truth.v0, p0, gs=gs, corrected_labels=True,
                             y0_docs=[t.ref.doc for t in truth.truth], documents=truth.docs or None, inside=inside)
        votes = answers.on(pool.index, U, [x.predicate for x in pool.universe]) if answers is not None else None
        mark("design")
        got = Inputs(design, votes, names, by_name, truth.docs, keys, list(truth.truth), list(pool.universe), fp)
        _inputs[ikey] = (fp, got)
        return got


def score(corpus: Corpus, *, level: str = "instance", match: str = "overlap", weights: str = "balance",
          label_method: str = LABEL_METHOD) -> Scored:
    """Joint scores of every submission of ``corpus`` from :func:`inputs`: the core's estimate, kept per
    (corpus, level, match, weights, labels) and returned again while the inputs are unchanged.

    The same result as :func:`from_scratch` (to float round-off); ``result`` is None when no
    submission has instances.
    """
    from time import perf_counter

    check_choice("weights", weights, WEIGHTS)
    t: dict = {}
    with _lock:
        got = inputs(corpus, level=level, match=match, label_method=label_method, timings=t)
        if got is None:
            t.pop("start", None)
            return Scored(None, {}, 0, t)
        rkey = (_ckey(corpus), level, match, weights, label_method)
        done = _results.get(rkey)
        if done is not None and done[0] == got.fp:  # nothing changed: the same result
            res = done[1]
        else:
            t["start"] = perf_counter()
            res = _rows(got.design, got.names, got.truth, level=level, weights=weights, match=match, votes=got.votes)
            t["estimate"] = perf_counter() - t["start"]
            _results[rkey] = (got.fp, res)
    t.pop("start", None)
    last_timings.clear()
    last_timings.update(t)
    return Scored(res, got.by_name, got.docs, t, got.keys, got.truth, got.universe, got.votes)


def _inputs_fp(pool: _Pool, d: _Draws, truth: _Truth, labels, ans_fp, label_method) -> tuple:
    lab = _labels.get((pool.corpus, label_method))
    return (pool.sub_fp, pool.generation, d.fp, truth.fp, lab.fp if lab else None, ans_fp)


def _rows(design, names: tuple[str, ...], truth, *, level: str, weights: str, match: str, votes=None
          ) -> OfflineResult:
    """:func:`unpooled.core.offline.score`'s rows for the joint estimator, from a ready design, as
    :func:`from_scratch` calls it (the document count and the sentence split given, the crowd's votes)."""
    glob: list[str] = []
    if design.n0 == 0:
        glob.append("the exhaustive file has no true instances: recall is 0 by construction")
    if any(t.weight != 1.0 for t in truth):
        glob.append("p0 weights of the exhaustive file are known only for its instances; other pooled instances "
                    "get weight 1 in the joint recall estimate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightDegeneracyWarning)
        sc = estimate(design, estimator="joint", weights=weights, confidence=CONFIDENCE, bootstrap=0, rng=None,
                      votes=votes)
    rows = system_rows(sc, design.n, names, estimator="joint")
    opts = {"level": level, "estimator": "joint", "weights": weights, "match": match, "bootstrap": 0,
            "confidence": CONFIDENCE, "documents": design.n_groups, "documents_given": design.n_groups is not None,
            "sentences": True, "outside_p0": int((design.p0[design.xs] == 0).sum())}
    return OfflineResult(rows, sc, design, names, tuple(glob), (), opts)


def from_scratch(corpus: Corpus, *, level: str = "instance", match: str = "overlap", weights: str = "balance"
                 ) -> Scored:
    """The reference path: everything read and built anew (:func:`~.inputs.offline_data` + the core's ``score``)."""
    data, by_name, docs = offline_data(corpus, level=level)
    if not data.submissions:
        return Scored(None, {}, 0)
    # the exhaustive documents as the service counts them, the corpus's sentence split, the crowd's answers
    res = offline_score(data, level=level, estimator="joint", weights=weights, match=match, corrected_labels=True,
                        documents=docs or None, sentences=rates.sentences(corpus), votes=rates.keyed_answers(corpus))
    return Scored(res, by_name, docs, keys=[x.key for x in data.labels], truth=list(data.exhaustive))


# -- what to re-score -------------------------------------------------------------------------------------
def levels_with_draws(corpus: Corpus) -> list[str]:
    got = set(Draw.objects.filter(submission__corpus=corpus, submission__is_reference=False)
              .values_list("level", flat=True).distinct())
    return [lv for lv in LEVELS if lv in got]


def clear_cache() -> None:
    """Forget every cached structure of the estimation, the crowd's (:func:`.rates.clear_cache`) too: the one
    invalidation (tests, whose rolled-back rows reappear under the same ids; coverage trials; bulk maintenance)."""
    rates.clear_cache()
    with _lock:
        _pools.clear()
        _labels.clear()
        _results.clear()
        _inputs.clear()


def max_abs_difference(a: OfflineResult, b: OfflineResult) -> float:
    """Largest absolute difference of any estimate between two results of the same systems (NaN-aware)."""
    if a.systems != b.systems:
        return math.inf
    worst = 0.0
    for ra, rb in zip(a.rows, b.rows):
        for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "ess"):
            x, y = getattr(ra, k), getattr(rb, k)
            if math.isnan(x) or math.isnan(y):
                if math.isnan(x) != math.isnan(y):
                    return math.inf
                continue
            worst = max(worst, abs(x - y))
        if ra.labels != rb.labels or ra.warnings != rb.warnings:
            return math.inf
    return worst
