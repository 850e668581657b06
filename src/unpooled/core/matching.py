r"""Recall matching policies: when does a system's prediction count as finding a true instance?

Recall is :math:`r_i = \mathbb E_{y\sim p_0}[g_i(y)]` (method.md §1.2): :math:`g_i(y)` says
whether system :math:`i` *found* the true instance :math:`y`.  What "found" means is a
policy, chosen once per evaluation:

``exact``
    Same :func:`~unpooled.core.kb.model.instance_key`: same document, subject span,
    predicate and object span -- or, for a string-valued slot, the same normalised
    filler (:func:`~unpooled.core.kb.model.normalise_value`; its span is ignored).
``overlap``
    Same document and predicate, the subject spans intersect, and the object spans
    intersect (entity objects) or the normalised fillers are equal (string values).
    Spans are end-exclusive: ``[a, b)`` and ``[c, d)`` intersect iff ``a < d and c < b``.
``cluster``
    Entity-cluster level, for corpora with gold coreference clusters (Re-DocRED): a
    gold item is a triple ``(doc, h, r, t)`` of clusters (:class:`GoldTriple`), found
    when the system has ``r`` between *any* mention of ``h`` and *any* mention of ``t``.
    A system argument belongs to a cluster when its span is exactly a gold mention of
    it (``clusters`` maps ``(doc, start, end)`` to the cluster id); other spans match
    nothing.

``symmetric`` (every policy) lists predicates whose argument order is ignored.
Instances must otherwise be in the schema's canonical direction
(:func:`~unpooled.core.kb.model.canonical_instance`), as stored submissions are.

Which policy is consistent with the estimators
-----------------------------------------------
:func:`match_matrix` gives ``g0`` of :func:`~unpooled.core.estimators.make_design`:
``g0[i, k]`` = system ``i`` found the ``k``-th exhaustively found true instance.

* The **simple** recall estimator (method.md §2.1) uses only ``g0``, so it is
  consistent with *every* policy: pass ``match_matrix(..., policy=...)`` as ``g0``.
* The **joint** recall estimator (§2.3) is :math:`\hat r_i=\hat\theta_i\hat\nu_i`.
  :math:`\hat\theta_i` uses ``g0`` (any policy), but :math:`\hat\nu_i` evaluates
  :math:`g_i(x)` on the *labelled positive draws* :math:`x` (universe instances), and
  :mod:`unpooled.core.estimators.joint` takes :math:`g_i(x) = [p_i(x) > 0]`, i.e.
  membership of :math:`x` in :math:`X_i` **by key identity**.  That is the ``exact``
  policy, and only ``exact`` is consistent with the joint estimator as it stands.

  Using another policy takes two changes, both needed:

  1. :math:`g_i(x)` of the draws through the same policy: :func:`match_universe`
     gives the sparse ``(m, U)`` matrix ``G`` (``G[i, x]``: system ``i`` matches
     universe instance ``x``; it contains key membership), to be used in place of
     ``p_i(xs) > 0`` in the numerator of :math:`\hat\nu_i`;
  2. one weight per true *fact*: a fact reaches the pool as several distinct
     instances (shifted spans, other mentions of its clusters), and
     :math:`\hat\nu_i` averages over pooled instances, so divide each universe
     instance's :math:`p_0` weight by :func:`match_multiplicity` (the number of
     universe instances matching it; 1 everywhere for ``exact``).

  In a simulation (5 systems, 2,000 facts, half of the found facts submitted with
  shifted spans, 300 draws per system and 300 exhaustive, 150 replicates) the mean
  joint recall of the system with true overlap recall 0.697 was 0.391 when ``g0``
  came from ``overlap`` but :math:`\hat\nu_i` used key identity, 0.736 with ``G``
  alone, and 0.698 with ``G`` and the divided :math:`p_0` (simple estimator: 0.696,
  with a 1.3-1.9 times larger standard deviation).  The divided weight is exact when
  every instance matching a true instance is itself true and expresses the same fact
  (``cluster``); ``overlap`` is not transitive, so there it is an approximation.

Speed
-----
One pass over the system instances with a dictionary look-up each (by full key for
``exact``, by ``(doc, predicate)`` otherwise); ``overlap`` then finds partners by
binary search in the targets sorted by ``(doc, predicate, subject start)`` and tests
the spans vectorised.  100 systems x 10^5 instances against 10^4 gold instances take
2.6 s (``exact``), 4.5 s (``overlap``) and 3.9 s (``cluster``) on one core; the time
is the Python pass over the 10^7 instances.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from types import MappingProxyType
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .errors import InvalidInputError, check_choice
from .kb.model import instance_key, normalise_value

POLICIES = ("exact", "overlap", "cluster")

#: pairs per vectorised block of the overlap test (memory bound: ~40 bytes each)
_BLOCK = 2_000_000
#: largest character offset the overlap index supports
_MAXOFF = (1 << 32) - 1


class InstanceRef(NamedTuple):
    """The identity of a relation instance: what matching looks at.

    Offsets are end-exclusive character offsets.  For a string-valued slot
    ``value`` is the filler (compared normalised) and ``o_start``/``o_end`` its span
    (``-1`` when unknown; ``exact`` and ``overlap`` ignore it).
    """

    doc: str
    s_start: int
    s_end: int
    predicate: str
    o_start: int
    o_end: int
    value: str | None = None

    @property
    def key(self) -> str:
        """:func:`~unpooled.core.kb.model.instance_key` of this instance."""
        return instance_key(*self)

    @classmethod
    def from_key(cls, key: str) -> InstanceRef:
        """Parse an :func:`~unpooled.core.kb.model.instance_key` string.

        A string filler comes back normalised, with span ``(-1, -1)``.

        Raises
        ------
        InvalidInputError
            If ``key`` is not ``doc<TAB>start-end<TAB>predicate<TAB>(start-end | =value)``.
        """
        parts = key.rsplit("\t", 3) if isinstance(key, str) else []
        try:
            doc, subj, pred, obj = parts
            value = obj[1:] if obj.startswith("=") else None
            (s0, s1), (o0, o1) = _key_span(subj), (-1, -1) if value is not None else _key_span(obj)
        except ValueError:
            raise InvalidInputError(
                "key: expected an instance key 'doc<TAB>start-end<TAB>predicate<TAB>start-end' "
                f"(or '=value' as the last part), got {key!r}") from None
        if not doc or not pred:
            raise InvalidInputError(f"key: document and predicate must be non-empty, got {key!r}")
        for a, b in ((s0, s1), (o0, o1)):
            if a >= 0 and b <= a:
                raise InvalidInputError(f"key: span {a}-{b} is empty or reversed (offsets are end-exclusive: end > "
                                        f"start >= 0), got {key!r}")
        if value is not None and not value.strip():
            raise InvalidInputError(f"key: the string filler after '=' is empty, got {key!r}")
        return cls(doc, s0, s1, pred, o0, o1, value)


def _key_span(text: str) -> tuple[int, int]:
    """``start-end`` of a key, in ASCII digits (``int`` would take ``+3``, ``3_0`` and other scripts' digits);
    ValueError otherwise."""
    start, end = text.split("-")
    if not (start.isascii() and start.isdigit() and end.isascii() and end.isdigit()):
        raise ValueError(text)
    return int(start), int(end)


class GoldTriple(NamedTuple):
    """A gold relation between entity clusters of one document (``cluster`` policy).

    ``subject`` and ``object`` are cluster ids, unique within ``doc`` (Re-DocRED: the
    ``vertexSet`` index).  A string-valued gold fact has ``object=None`` and ``value``.
    """

    doc: str
    subject: Hashable
    predicate: str
    object: Hashable | None
    value: str | None = None


@dataclass(frozen=True)
class ClusterGold:
    """Gold triples of a corpus and the map from mention spans to clusters.

    ``clusters[(doc, start, end)]`` is the cluster id of the gold mention at that span,
    or a ``frozenset`` of ids when several clusters claim the same span.
    """

    triples: tuple[GoldTriple, ...]
    clusters: Mapping[tuple[str, int, int], Hashable]


def cluster_gold(documents: Iterable) -> ClusterGold:
    """Gold triples and span -> cluster map from documents with a gold layer.

    Parameters
    ----------
    documents : iterable of :class:`~unpooled.core.corpus.model.Document`
        E.g. ``iter_documents(path, "docred")``.  Cluster ids are the entity
        indices; repeated ``(h, r, t)`` labels of a document give one triple.

    Returns
    -------
    ClusterGold
    """
    triples: list[GoldTriple] = []
    clusters: dict[tuple[str, int, int], Hashable] = {}
    for doc in documents:
        for ent in doc.entities:
            for m in ent.mentions:
                span = (doc.id, m.start, m.end)
                old = clusters.get(span)
                if old is None or old == ent.index:
                    clusters[span] = ent.index
                else:
                    ids = old if isinstance(old, frozenset) else frozenset((old,))
                    clusters[span] = ids | {ent.index}
        seen = set()
        for rel in doc.relations:
            t = (rel.subject, rel.predicate, rel.object)
            if t not in seen:
                seen.add(t)
                triples.append(GoldTriple(doc.id, rel.subject, rel.predicate, rel.object))
    return ClusterGold(tuple(triples), MappingProxyType(clusters))


# -- validation ---------------------------------------------------------------------
def _check_policy(policy: str, clusters) -> None:
    check_choice("policy", policy, POLICIES)
    if policy == "cluster" and clusters is None:
        raise InvalidInputError("clusters: required for policy 'cluster' (a map (doc, start, end) -> cluster id), "
                                "got None")


def _refs(items: Sequence, name: str) -> Sequence[InstanceRef]:
    """``items`` as InstanceRefs (converted only if they are plain tuples)."""
    if not len(items) or isinstance(items[0], InstanceRef):
        return items
    try:
        return [InstanceRef(*x) for x in items]
    except TypeError:
        raise InvalidInputError(f"{name}: expected InstanceRef (doc, s_start, s_end, predicate, o_start, o_end, "
                                f"value) items, got {type(items[0]).__name__}") from None


def _triples(items: Sequence, name: str) -> Sequence[GoldTriple]:
    if not len(items) or isinstance(items[0], GoldTriple):
        return items
    if isinstance(items[0], InstanceRef):
        raise InvalidInputError(f"{name}: policy 'cluster' expects GoldTriple items (doc, subject cluster, "
                                "predicate, object cluster), got InstanceRef")
    try:
        return [GoldTriple(*x) for x in items]
    except TypeError:
        raise InvalidInputError(f"{name}: expected GoldTriple items, got {type(items[0]).__name__}") from None


# -- public API ---------------------------------------------------------------------
def match_matrix(
    system_instances: Sequence[Sequence[InstanceRef]],
    gold: Sequence[InstanceRef] | Sequence[GoldTriple],
    *,
    policy: str = "exact",
    clusters: Mapping[tuple[str, int, int], Hashable] | None = None,
    symmetric: Iterable[str] = (),
) -> np.ndarray:
    """Which system found which gold item, under a matching policy.

    Parameters
    ----------
    system_instances : sequence of sequences of InstanceRef
        The instances of each of the ``m`` systems.
    gold : sequence of InstanceRef, or of GoldTriple for ``policy='cluster'``
        The ``n0`` true instances (e.g. found in exhaustively annotated documents).
    policy : {'exact', 'overlap', 'cluster'}
        See the module documentation.
    clusters : mapping, optional
        ``(doc, start, end) -> cluster id`` (or frozenset of ids); required for ``cluster``.
    symmetric : iterable of str
        Predicates whose argument order is ignored.

    Returns
    -------
    ndarray of bool, shape (m, n0)
        ``g0`` for :func:`~unpooled.core.estimators.make_design`.
    """
    _check_policy(policy, clusters)
    sym = frozenset(symmetric)
    m = len(system_instances)
    systems = [_refs(s, f"system_instances[{i}]") for i, s in enumerate(system_instances)]
    gold = _triples(gold, "gold") if policy == "cluster" else _refs(gold, "gold")
    M = np.zeros((m, len(gold)), dtype=bool)
    if not m or not len(gold):
        return M
    sizes = np.fromiter((len(s) for s in systems), dtype=np.int64, count=m)
    flat = list(chain.from_iterable(systems))
    ci, ti = _pairs(flat, gold, policy=policy, clusters=clusters, symmetric=sym)
    if len(ci):
        M[np.repeat(np.arange(m), sizes)[ci], ti] = True
    return M


def match_universe(
    universe: Sequence[InstanceRef],
    members: Sequence[Sequence[int]],
    *,
    targets: Sequence[int] | None = None,
    policy: str = "exact",
    clusters: Mapping[tuple[str, int, int], Hashable] | None = None,
    symmetric: Iterable[str] = (),
) -> sp.csr_matrix:
    r"""Which systems match universe instances under a policy: :math:`g_i(x)` for sampled draws.

    The joint recall estimator evaluates :math:`g_i(x)` on sampled true instances
    :math:`x` of the universe; with ``overlap`` or ``cluster`` it must use this matrix
    instead of key membership (module documentation).

    Parameters
    ----------
    universe : sequence of InstanceRef, length U
        Every submitted instance once (the universe of ``P``).
    members : sequence of int arrays
        Universe indices of each system's instances (the supports of the rows of ``P``).
    targets : int array, optional
        Universe indices to evaluate (e.g. the drawn ``xs``); default every instance.
        Only the draws are needed, and they are far fewer than ``U``.
    policy, clusters, symmetric
        As for :func:`match_matrix`.  With ``cluster``, an instance whose spans are not
        gold mentions matches only itself.

    Returns
    -------
    scipy.sparse.csr_matrix of bool, shape (m, len(targets))
        ``G[i, k]``: system ``i`` has an instance matching ``universe[targets[k]]``.
        ``G`` contains membership, so ``exact`` (without ``symmetric``) gives
        ``P[:, targets] > 0``.  Use it as :math:`g_i(x_s)` in :math:`\hat\nu_i`.
    """
    _check_policy(policy, clusters)
    universe = _refs(universe, "universe")
    U, m = len(universe), len(members)
    tg = _target_indices(targets, U)
    rows, cols = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for i, xs in enumerate(members):
        xs = np.asarray(xs, dtype=np.int64).ravel()
        if xs.size and (xs.min() < 0 or xs.max() >= U):
            raise InvalidInputError(f"members[{i}]: indices must be in [0, {U}), got [{xs.min()}, {xs.max()}]")
        rows.append(np.full(xs.size, i, dtype=np.int64))
        cols.append(xs)
    r_a, c_a = np.concatenate(rows), np.concatenate(cols)
    member = sp.csr_matrix((np.ones(len(r_a), dtype=np.int32), (r_a, c_a)), shape=(m, U))
    G = (member @ _relation(universe, tg, policy, clusters, frozenset(symmetric))).tocsr()
    G.data = G.data > 0
    G = G.astype(bool)
    G.eliminate_zeros()
    return G


def match_multiplicity(
    universe: Sequence[InstanceRef],
    *,
    targets: Sequence[int] | None = None,
    policy: str = "exact",
    clusters: Mapping[tuple[str, int, int], Hashable] | None = None,
    symmetric: Iterable[str] = (),
) -> np.ndarray:
    r"""How many universe instances match each target under a policy (itself included, so >= 1).

    Under ``overlap`` and ``cluster`` one true fact can enter the pool as several
    distinct instances (other spans, other mentions).  :math:`\hat\nu_i` averages over
    pooled true *instances*, :math:`\hat\theta_i` over true *facts*, so each pooled
    instance's :math:`p_0` weight must be divided by this count (module documentation).
    ``exact`` gives 1 everywhere (2 for the two orders of a symmetric instance).

    Returns
    -------
    ndarray of int, shape (len(targets),)
    """
    _check_policy(policy, clusters)
    universe = _refs(universe, "universe")
    R = _relation(universe, _target_indices(targets, len(universe)), policy, clusters, frozenset(symmetric))
    return np.asarray(R.getnnz(axis=0), dtype=np.int64)


def relation_matrix(universe, targets=None, policy: str = "overlap") -> sp.csr_matrix:
    """``R[u, k]``: universe instance ``u`` matches the ``k``-th target (universe indices ``targets``, default all)
    under ``policy`` without clusters or symmetric relations: the matching the service's pool keeps and extends."""
    _check_policy(policy, None)
    return _relation(universe, _target_indices(targets, len(universe)), policy, None, frozenset()).tocsr()


def _target_indices(targets, U: int) -> np.ndarray:
    tg = np.arange(U, dtype=np.int64) if targets is None else np.asarray(targets, dtype=np.int64).ravel()
    if tg.size and (tg.min() < 0 or tg.max() >= U):
        raise InvalidInputError(f"targets: indices must be in [0, {U}), got [{tg.min()}, {tg.max()}]")
    return tg


def _relation(universe, tg: np.ndarray, policy: str, clusters, sym: frozenset) -> sp.csr_matrix:
    """``R[u, k]``: universe instance ``u`` matches target ``universe[tg[k]]`` (always ``u == tg[k]``)."""
    U, K = len(universe), len(tg)
    ci, ti = [tg], [np.arange(K, dtype=np.int64)]
    if policy == "cluster":
        tri: dict[tuple, list[int]] = {}
        for k, j in enumerate(tg):
            for t in _resolve(universe[int(j)], clusters, sym):
                tri.setdefault(t, []).append(k)
        cu: list[int] = []
        ck: list[int] = []
        if tri:
            for u, x in enumerate(universe):
                if (x[0], x[1], x[2]) not in clusters:
                    continue
                for t in _resolve(x, clusters, sym):
                    for k in tri.get(t, ()):
                        cu.append(u)
                        ck.append(k)
        ci.append(np.asarray(cu, dtype=np.int64))
        ti.append(np.asarray(ck, dtype=np.int64))
    elif policy == "overlap" or sym:
        a, b = _pairs(universe, [universe[int(j)] for j in tg], policy=policy, clusters=None, symmetric=sym)
        ci.append(a)
        ti.append(b)
    ci_a, ti_a = np.concatenate(ci), np.concatenate(ti)
    R = sp.csr_matrix((np.ones(len(ci_a), np.int32), (ci_a, ti_a)), shape=(U, K))
    R.sum_duplicates()
    R.data[:] = 1
    return R


# -- kernels ------------------------------------------------------------------------
def _pairs(cands, targets, *, policy, clusters, symmetric) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(candidate, target)`` where the candidate matches the target."""
    if policy == "exact":
        return _exact_pairs(cands, targets, symmetric)
    if policy == "overlap":
        return _overlap_pairs(cands, targets, symmetric)
    return _cluster_pairs(cands, targets, clusters, symmetric)


def _vkey(x) -> tuple:
    return (x[0], x[1], x[2], x[3], None, None, normalise_value(x[6]))


def _sym_key(x) -> tuple:
    """Exact key with the smaller argument first (entity objects of symmetric predicates)."""
    if x[6] is None and (x[4], x[5]) < (x[1], x[2]):
        return (x[0], x[4], x[5], x[3], x[1], x[2], None)
    return tuple(x) if x[6] is None else _vkey(x)


def _targets_by(keys: list) -> tuple[dict, np.ndarray, np.ndarray]:
    """Distinct keys -> id, and the targets of each id as CSR (offsets, target indices)."""
    ids: dict = {}
    kid = np.fromiter((ids.setdefault(k, len(ids)) for k in keys), dtype=np.int64, count=len(keys))
    order = np.argsort(kid, kind="stable")
    counts = np.bincount(kid, minlength=len(ids))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return ids, offsets, order


def _expand(cand: np.ndarray, key: np.ndarray, offsets: np.ndarray, order: np.ndarray):
    """Every (candidate, target) pair with candidate ``cand[k]`` in target group ``key[k]``."""
    k = offsets[key + 1] - offsets[key]
    total = int(k.sum())
    ci = np.repeat(cand, k)
    first = np.repeat(offsets[key], k)
    within = np.arange(total) - np.repeat(np.cumsum(k) - k, k)
    return ci, order[first + within]


def _exact_pairs(cands, targets, sym) -> tuple[np.ndarray, np.ndarray]:
    if sym:
        def key(x):
            return _sym_key(x) if x[3] in sym else (tuple(x) if x[6] is None else _vkey(x))
        tkeys = [key(t) for t in targets]
    else:
        key = None
        tkeys = [tuple(t) if t[6] is None else _vkey(t) for t in targets]
    ids, offsets, order = _targets_by(tkeys)
    get = ids.get
    if key is None:
        hit = [get(x if x[6] is None else _vkey(x), -1) for x in cands]
    else:
        hit = [get(key(x), -1) for x in cands]
    hit = np.array(hit, dtype=np.int64)
    c = np.flatnonzero(hit >= 0)
    return _expand(c, hit[c], offsets, order)


def _span_arrays(items, value_code) -> np.ndarray:
    """(n, 5) int64: s_start, s_end, o_start, o_end, value code (-1: entity object)."""
    rows = [(x[1], x[2], x[4], x[5], -1) if x[6] is None else (x[1], x[2], -1, -1, value_code(x[6]))
            for x in items]
    return np.array(rows, dtype=np.int64).reshape(len(rows), 5)


def _ranges(cand: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Every ``(candidate, position)`` with ``lo[k] <= position < hi[k]`` for candidate ``cand[k]``."""
    k = np.maximum(hi - lo, 0)
    total = int(k.sum())
    ci = np.repeat(cand, k)
    pos = np.repeat(lo, k) + (np.arange(total) - np.repeat(np.cumsum(k) - k, k))
    return ci, pos


def _overlap_pairs(cands, targets, sym) -> tuple[np.ndarray, np.ndarray]:
    # target rows grouped by (doc, predicate); symmetric entity targets also enter swapped
    tg: list = []
    tidx: list[int] = []
    trows: list = []
    for j, t in enumerate(targets):
        tg.append((t[0], t[3]))
        tidx.append(j)
        trows.append(t)
        if sym and t[3] in sym and t[6] is None:
            tg.append((t[0], t[3]))
            tidx.append(j)
            trows.append(InstanceRef(t[0], t[4], t[5], t[3], t[1], t[2], None))
    groups: dict = {}
    tgid = np.fromiter((groups.setdefault(k, len(groups)) for k in tg), dtype=np.int64, count=len(tg))
    values: dict[str, int] = {}

    def tcode(v):
        return values.setdefault(normalise_value(v), len(values))

    T = _span_arrays(trows, tcode)
    # sort targets by (group, subject start): a candidate's possible partners form one run
    order = np.lexsort((T[:, 0], tgid))
    T, tgid, tidx_a = T[order], tgid[order], np.asarray(tidx, dtype=np.int64)[order]
    skey = (tgid << 32) | np.clip(T[:, 0], 0, _MAXOFF)
    longest = np.zeros(len(groups), dtype=np.int64)
    np.maximum.at(longest, tgid, T[:, 1] - T[:, 0])
    gget = groups.get
    gid = np.array([gget((x[0], x[3]), -1) for x in cands], dtype=np.int64)
    c = np.flatnonzero(gid >= 0)
    if not len(c):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    C = _span_arrays([cands[k] for k in c], lambda v: values.get(normalise_value(v), -2))
    g = gid[c]
    # partner subject spans [s, e) with s < C.end and e > C.start, where e <= s + longest[g]
    lo = np.searchsorted(skey, (g << 32) | np.clip(C[:, 0] - longest[g] + 1, 0, _MAXOFF), side="left")
    hi = np.searchsorted(skey, (g << 32) | np.clip(C[:, 1], 0, _MAXOFF), side="left")
    cum = np.cumsum(np.maximum(hi - lo, 0))
    out_c, out_t = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    start = 0
    while start < len(c):  # blocks of candidates with a bounded number of pairs
        stop = int(np.searchsorted(cum, (cum[start - 1] if start else 0) + _BLOCK, side="right"))
        stop = max(stop, start + 1)
        li, tj = _ranges(np.arange(start, stop), lo[start:stop], hi[start:stop])
        a, b = C[li], T[tj]
        ok = (a[:, 0] < b[:, 1]) & (b[:, 0] < a[:, 1])
        ent = (a[:, 4] == -1) & (b[:, 4] == -1)
        ok &= np.where(ent, (a[:, 2] < b[:, 3]) & (b[:, 2] < a[:, 3]), (a[:, 4] >= 0) & (a[:, 4] == b[:, 4]))
        out_c.append(c[li[ok]])
        out_t.append(tidx_a[tj[ok]])
        start = stop
    return np.concatenate(out_c), np.concatenate(out_t)


def _cluster_ids(clusters, doc, s, e) -> tuple:
    cid = clusters.get((doc, s, e))
    if cid is None:
        return ()
    return tuple(cid) if isinstance(cid, frozenset) else (cid,)


def _resolve(x, clusters, sym) -> list[tuple]:
    """The cluster-level keys ``(doc, h, predicate, t)`` of an instance (none if unresolvable)."""
    hs = _cluster_ids(clusters, x[0], x[1], x[2])
    if not hs:
        return []
    if x[6] is not None:
        obj = (("=", normalise_value(x[6])),)
    else:
        obj = _cluster_ids(clusters, x[0], x[4], x[5])
    out = [(x[0], h, x[3], t) for h in hs for t in obj]
    if x[3] in sym and x[6] is None:
        out = list({_sym_triple(k) for k in out})
    return out


def _sym_triple(k: tuple) -> tuple:
    a, b = k[1], k[3]
    try:
        swap = b < a
    except TypeError:  # mixed id types: order by representation
        swap = repr(b) < repr(a)
    return (k[0], b, k[2], a) if swap else k


def _cluster_pairs(cands, triples, clusters, sym) -> tuple[np.ndarray, np.ndarray]:
    keys = []
    for t in triples:
        k = (t[0], t[1], t[2], ("=", normalise_value(t[4])) if t[3] is None and t[4] is not None else t[3])
        keys.append(_sym_triple(k) if t[2] in sym and t[3] is not None else k)
    ids, offsets, order = _targets_by(keys)
    present = {(t[0], t[2]) for t in triples}
    ci, ki = [], []
    for n, x in enumerate(cands):
        if (x[0], x[3]) not in present:
            continue
        for k in _resolve(x, clusters, sym):
            j = ids.get(k)
            if j is not None:
                ci.append(n)
                ki.append(j)
    if not ci:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return _expand(np.asarray(ci, np.int64), np.asarray(ki, np.int64), offsets, order)
