r"""The stratified bootstrap of the joint estimator (:func:`bootstrap_intervals`, ``estimate(..., bootstrap=B)``).

Each :math:`\hat X_j` and :math:`\hat Y_0` is resampled with replacement at its size (:math:`\hat Y_0` by whole
documents when they are known), the label-free weights held fixed; every estimate is recomputed from the
replicate's sums (precision and :math:`\hat\nu` as ratios of them, :func:`.joint.precision_linear`); the intervals
are the percentiles.  One stratum at a time, the resampled draws summed through per-instance totals
(:class:`.rows.ByItem`): memory is the stratum's draws times the replicates plus the replicates times the distinct
instances, never the replicates times all draws.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs  # Y += A @ X in place (what A @ X runs)

from .intervals import f1_score
from .joint import Design, _terms, _Terms, exhaustive_recall_targets
from .rows import _same

#: the per-instance totals of the bootstrap (replicates x distinct instances, floats) are kept below this size
ITEM_TOTALS_BYTES = 1 << 30
#: a sparse matrix times the item totals goes through dense blocks of this many bytes when at least this share of
#: its entries are non-zero (BLAS then beats the sparse product)
DENSE_PRODUCT, DENSE_BLOCK_BYTES = 0.03, 1 << 26


def _stratified_counts(sizes: np.ndarray, B: int, rng):
    r"""Per stratum (in order, those with draws), its index and ``(k, B)`` counts: its ``k`` draws resampled ``k``
    times with replacement, independently per replicate (the sampling design of every :math:`\hat X_j` and of
    :math:`\hat Y_0`).  One stratum at a time: memory ``k x B``, never all draws ``x B``."""
    replicate = np.arange(B, dtype=np.int64)[:, None]
    for h, k in enumerate(sizes):
        if k == 0:
            continue
        # keys in int64, bincount's own index type (the same stream as int32 draws: below 2**32 numpy draws 32
        # bits either way); each replicate's keys in a block of its own, counted where they lie close together
        keys = rng.integers(0, k, size=(B, k), dtype=np.int64)
        keys += replicate * k
        yield h, np.ascontiguousarray(np.bincount(keys.ravel(), minlength=B * k).reshape(B, k).T, dtype=float)


def _replicate_sums(parts, src: np.ndarray, m: int, B: int, rng) -> list[np.ndarray]:
    """Per part (targets x draws), its ``(B, m)`` row sums under each replicate of :func:`_stratified_counts`.

    A part is ``(items, rest, shared)``: a :class:`.rows.ByItem` (or None), summed through per-instance totals; a
    sparse rest, summed directly; and the shared part of a :class:`.rows.Rows` (or None), through ``b @ K``.
    Work: the replicates times (the draws + the items' non-zeros + the rests' non-zeros); parts whose per-instance
    totals are the same (:func:`_distinct_items`: precision's numerator and recall's under the instance level)
    share them.
    """
    order = np.argsort(src, kind="stable")  # each stratum's draws in their order (the resampling's indices)
    starts = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=m))])
    out = [np.zeros((m, B)) for _ in parts]
    shared = [None if X is None or X.a is None else np.zeros((X.factors()[1].shape[0], B)) for _, _, X in parts]
    distinct = _distinct_items(parts, B)
    summed = {j for d in distinct for j, _ in d[3]}
    rest = [sp.csr_matrix(r if j in summed or f is None else r + f.rows()).tocsc()
            for j, (f, r, _) in enumerate(parts)]
    Z = np.zeros((len(distinct), distinct[0][0].shape[1] if distinct else 0, B))  # per total: instances x replicates
    for h, K in _stratified_counts(starts[1:] - starts[:-1], B, rng):
        idx = order[starts[h]:starts[h + 1]]
        indptr = np.zeros(len(idx) + 1, np.int64)
        for g, (M, c, item, _) in enumerate(distinct):  # per-instance totals of c over the resampled draws
            # the draws as the columns of (instances x draws): each adds c times its counts to its instance's row,
            # draw after draw (a draw of value 0 adds nothing: precision's numerator, false draws)
            cs = c[idx]
            keep = cs != 0
            np.cumsum(keep, out=indptr[1:])
            _csc_matvecs(M.shape[1], len(idx), B, indptr, item[idx[keep]].astype(np.int64), cs[keep], K.ravel(),
                         Z[g].ravel())
        for (f, _, X), R, acc, bsum in zip(parts, rest, out, shared):
            if R.nnz:
                acc += R[:, idx] @ K
            if bsum is not None:  # the shared parts' sums over the resampled draws, per replicate
                bsum += X.factors()[1][:, idx] @ K
    done: set[int] = set()
    for g, (M, *_) in enumerate(distinct):  # totals of one matrix (a pattern) in one product
        same = [h for h in range(g, len(distinct)) if h not in done and _same_matrix(M, distinct[h][0])]
        if not same:  # (summed with an earlier one's)
            continue
        done.update(same)
        prods = _product(M, Z if len(same) == len(distinct) else Z[same])
        for h, prod in zip(same, prods):
            for j, a in distinct[h][3]:
                out[j] += prod * a[:, None]
    for X, acc, bsum in zip((X for _, _, X in parts), out, shared):
        if bsum is not None:
            acc += X.factors()[0] @ bsum
    return [acc.T for acc in out]


def _distinct_items(parts, B: int) -> list[list]:
    """The :class:`.rows.ByItem` parts summed through per-instance totals (those whose totals, replicates x
    instances, fit :data:`ITEM_TOTALS_BYTES`), as ``[M, c, item, [(part, a), ...]]``: parts of the same per-draw
    values ``c`` and ``item`` and of the same ``M`` share their totals and their product.  A matrix whose rows are
    constant on their support (the instance level, :math:`p_i = 1/|X_i|`) is its pattern times the row's value
    (moved into ``a``), so precision's numerator and recall's (the same ``c`` where :math:`p_0 = 1`) are one."""
    found: list[list] = []
    for j, (f, _, _) in enumerate(parts):
        if f is None or B * f.M.shape[1] * 8 > ITEM_TOTALS_BYTES:
            continue
        M, a = _pattern_of(f.M, f.a)
        for g in found:
            if g[2] is f.item and _same_matrix(g[0], M) and (g[1] is f.c or np.array_equal(g[1], f.c)):
                g[3].append((j, a))
                break
        else:
            found.append([M, f.c, f.item, [(j, a)]])
    return found


def _pattern_of(M: sp.csr_matrix, a: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(M, a)``, or ``(pattern of M, a * each row's value)`` when every row's stored values are equal."""
    full = np.diff(M.indptr) > 0
    if not M.nnz:
        return M, a
    lo = np.minimum.reduceat(M.data, M.indptr[:-1][full])
    hi = np.maximum.reduceat(M.data, M.indptr[:-1][full])
    if not np.array_equal(lo, hi):
        return M, a
    value = np.zeros(M.shape[0])
    value[full] = lo
    ones = M if (M.data == 1).all() else sp.csr_matrix((np.ones(M.nnz), M.indices, M.indptr), shape=M.shape)
    return ones, a * value


def _same_matrix(X: sp.csr_matrix, Y: sp.csr_matrix) -> bool:
    """The same matrix: one object, or 0/1 patterns on the same index arrays."""
    return X is Y or (X.shape == Y.shape and _same(X.indices, Y.indices) and _same(X.indptr, Y.indptr)
                      and (X.data == 1).all() and (Y.data == 1).all())


def _product(M: sp.csr_matrix, z: np.ndarray) -> np.ndarray:
    """``M @ z[g]`` for each ``g`` (``z``: totals x instances x replicates) for a sparse ``M``: in dense blocks of
    ``M``'s rows (BLAS; each block made dense once for every ``g``) when ``M`` is dense enough for that to be faster
    (at 9% non-zeros, 1,000 x 30,000 times 1,000 columns: 0.8 s against 2.4 s; blocks of columns of ``z`` for the
    sparse product, 1.9 s), else sparse."""
    if M.nnz < DENSE_PRODUCT * M.shape[0] * M.shape[1]:
        return np.stack([np.asarray(M @ x) for x in z]) if len(z) else np.zeros((0, M.shape[0], z.shape[2]))
    out = np.empty((len(z), M.shape[0], z.shape[2]))
    step = max(1, DENSE_BLOCK_BYTES // max(8 * M.shape[1], 1))
    for i in range(0, M.shape[0], step):
        out[:, i:i + step] = np.matmul(M[i:i + step].toarray(), z)
    return out


def bootstrap_intervals(d: Design, W: np.ndarray, B: int, *, confidence: float = 0.90, rng=None,
                        simple: bool = False, terms: _Terms | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    r"""Percentile intervals from ``B`` stratified bootstrap replicates (weights held fixed).

    :math:`\hat Y_0` is resampled by whole documents (all :math:`N` of them, those without a true
    instance too) when ``d.y0_groups`` is known, else by instances.  ``terms``: :func:`_terms` of ``d`` and ``W``
    when already at hand.
    """
    rng = np.random.default_rng(rng)
    m = d.m
    t = _terms(d, W) if terms is None else terms
    # precision's numerator and denominator, then recall's
    parts = [(*t.C_items, None), (*t.W_items, None)] + ([] if simple else [(*t.A_items, None), (None, t.B.sparse, t.B)])
    sums = _replicate_sums(parts, d.src, m, B, rng)
    n0 = d.n0
    if not n0:
        K0 = np.zeros((B, 0))
    elif d.y0_groups is not None:
        groups = np.asarray(d.y0_groups, dtype=np.int64)
        N = max(int(d.n_groups or 0), int(groups.max()) + 1)
        K0 = next(_stratified_counts(np.array([N]), B, rng))[1].T[:, groups]  # documents, then their instances
    else:
        K0 = next(_stratified_counts(np.array([n0]), B, rng))[1].T
    Kv = K0 * d.v0[None, :]
    Vb = Kv.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):  # the Hajek ratio of each replicate (joint.precision_linear)
        p_b = np.where(sums[1] > 0, sums[0] / sums[1], 0.0)
    p_b[:, ~(sums[1] > 0).any(0)] = np.nan  # no draw weighs the target: undefined (joint.precision_linear)
    if simple:
        r_b = (Kv @ d.g0.T) / np.maximum(Vb, 1e-30)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            nu_b = np.where(sums[3] > 0, sums[2] / sums[3], 0.0)
        # their recall is the exhaustive sample's share alone (joint._block_parts): no own draws, or no positive
        # draw in the pool
        bare = exhaustive_recall_targets(d) | ~(sums[3] > 0).any(0)
        nu_b[:, bare] = 1.0
        th_b = (Kv @ np.where(bare[:, None], d.g0, t.S0).T) / np.maximum(Vb, 1e-30)
        r_b = th_b * nu_b
    if d.v0.sum() <= 0:  # no exhaustively found true instance: recall undefined (joint.linear_parts)
        r_b = np.full_like(r_b, np.nan)
    f_b = np.where(np.isnan(p_b) | np.isnan(r_b), np.nan, f1_score(p_b, r_b))
    a = (1 - confidence) / 2
    out = {}
    for name, arr in (("p", p_b), ("r", r_b), ("f1", f_b)):
        lo, hi = np.quantile(arr, [a, 1 - a], axis=0)
        out[name] = (lo.astype(float), hi.astype(float))
    return out
