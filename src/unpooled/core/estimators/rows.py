r"""Targets x draws matrices held sparse: :class:`Rows` is ``sparse + outer(a, b)``.

The joint estimator's per-(target, draw) terms are non-zero only where the target holds the drawn instance,
but for the parts every target shares: under the balance heuristic the proposal :math:`q` is one for all
targets, so the importance ratio of a draw is one row ``b`` (scaled per target by ``a``), and recall's
denominator weighs every draw for every target.  Held so, memory is the non-zeros plus one row, never
targets x draws (1,000 systems x 500 draws each would be 4 GB per dense matrix), and every operation here
costs a pass over the non-zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Rows:
    """``sparse + a @ b``: a shared part of rank ``r`` with ``a`` (rows x r) and ``b`` (r x columns), or of rank 1
    with 1-d ``a`` (per row) and ``b`` (per column), ``outer(a, b)``; both None when there is no shared part."""

    sparse: sp.csr_matrix
    a: np.ndarray | None = None
    b: np.ndarray | None = None

    @staticmethod
    def of(U) -> Rows:
        """``U`` (an array, a sparse matrix or :class:`Rows`) as :class:`Rows`."""
        if isinstance(U, Rows):
            return U
        return Rows(sp.csr_matrix(U if sp.issparse(U) else np.atleast_2d(U), dtype=float))

    @staticmethod
    def shared(a: np.ndarray, b: np.ndarray) -> Rows:
        """``a @ b`` (or ``outer(a, b)`` for 1-d ones) alone."""
        a, b = np.asarray(a, float), np.asarray(b, float)
        return Rows(sp.csr_matrix((len(a), b.shape[-1])), a, b)

    @property
    def shape(self) -> tuple[int, int]:
        return self.sparse.shape

    def factors(self) -> tuple[np.ndarray, np.ndarray]:
        """The shared part as ``(rows x r, r x columns)`` arrays (rank 1 too); call only when there is one."""
        return (self.a[:, None], self.b[None, :]) if self.a.ndim == 1 else (self.a, self.b)

    def sum(self) -> np.ndarray:
        """Row sums, ``(m,)``."""
        s = row_sums(self.sparse, self.sparse.data)
        if self.a is None:
            return s
        return s + self.a * self.b.sum() if self.a.ndim == 1 else s + self.a @ self.b.sum(1)

    def abs_sum(self) -> np.ndarray:
        """Row sums of the absolute values (an upper bound where the shared part overlaps the sparse one)."""
        M = self.sparse
        s = np.array([np.abs(M.data[a:b]).sum() for a, b in zip(M.indptr[:-1].tolist(), M.indptr[1:].tolist())]
                     ) if M.nnz > 64 * M.shape[0] else row_sums(M, np.abs(M.data))  # (long rows: no copy of all)
        if self.a is None:
            return s
        A, B = self.factors()
        return s + np.abs(A) @ np.abs(B).sum(1)

    def row(self, i: int) -> np.ndarray:
        out = self.sparse[i].toarray().ravel()
        if self.a is None:
            return out
        A, B = self.factors()
        return out + A[i] @ B

    def block(self, rows: np.ndarray) -> np.ndarray:
        """The ``rows`` (indices) as a dense array."""
        out = self.sparse[rows].toarray()
        if self.a is None:
            return out
        A, B = self.factors()
        return out + A[rows] @ B

    def toarray(self) -> np.ndarray:
        out = self.sparse.toarray()
        if self.a is None:
            return out
        A, B = self.factors()
        return out + A @ B

    def sub(self, rows) -> Rows:
        """The rows ``rows`` (a slice or indices), the shared part's row kept."""
        return Rows(self.sparse[rows], None if self.a is None else self.a[rows], self.b)

    def scaled(self, rows=None, cols=None) -> Rows:
        """``diag(rows) @ self @ diag(cols)`` (either may be None)."""
        a, b = self.a, self.b
        if a is not None and rows is not None:
            a = a * (rows if a.ndim == 1 else np.asarray(rows, float)[:, None])
        if b is not None and cols is not None:
            b = b * cols
        return Rows(scale(self.sparse, rows, cols), a, b)

    def columns(self, idx: np.ndarray) -> Rows:
        """The columns ``idx`` (repeats allowed: a unit's values for each of its draws), canonical."""
        sparse = self.sparse.tocsc()[:, idx].tocsr() if self.sparse.nnz else sp.csr_matrix((self.shape[0], len(idx)))
        return Rows(sparse, self.a, None if self.b is None else self.b[..., idx])

    def at(self, M: sp.csr_matrix) -> sp.csr_matrix:
        """The values where ``M`` is non-zero, on ``M``'s pattern: ``self * (M != 0)``, with no array of ones
        when ``M`` stores no zero."""
        if self.sparse.nnz or self.a is None or self.a.ndim != 1 or not M.data.all():
            return self * sp.csr_matrix(((M.data != 0).astype(float), M.indices, M.indptr), shape=M.shape)
        data = self.b[M.indices]
        _scale_rows(data, M.indptr, np.asarray(self.a, float))
        return sp.csr_matrix((data, M.indices, M.indptr), shape=M.shape)

    def __add__(self, other: Rows) -> Rows:
        """The sum; shared parts on the same row (``b``, the same array) add, others stack into a higher rank."""
        a, b = self.a, self.b
        if other.a is not None:
            if a is None:
                a, b = other.a, other.b
            elif other.b is b:
                a = a + other.a
            else:
                (A1, B1), (A2, B2) = self.factors(), other.factors()
                a, b = np.hstack([A1, A2]), np.vstack([B1, B2])
        if not other.sparse.nnz:
            return Rows(self.sparse, a, b)
        if not self.sparse.nnz:
            return Rows(other.sparse, a, b)
        return Rows(add(self.sparse, other.sparse), a, b)

    def __mul__(self, M) -> sp.csr_matrix:
        """Element-wise product with the sparse matrix ``M`` (of the same shape): sparse, ``M``'s pattern."""
        M = sp.csr_matrix(M, dtype=float)
        shared = None
        if self.a is not None:
            A, B = self.factors()
            for k in range(A.shape[1]):
                part = scale(M, A[:, k], B[k])
                shared = part if shared is None else add(shared, part)
        if not self.sparse.nnz:
            return shared if shared is not None else sp.csr_matrix(M.shape)
        out = sp.csr_matrix(M.multiply(self.sparse))
        return out if shared is None else sp.csr_matrix(out + shared)

    def totals(self, codes: np.ndarray, K: int) -> np.ndarray:
        """``(m, K)`` dense: each row's totals over the columns of each code (``codes`` per column)."""
        Mk = indicator(codes, K)
        out = np.asarray((self.sparse @ Mk).todense())
        if self.a is None:
            return out
        A, B = self.factors()
        return out + A @ np.asarray(Mk.T @ B.T).T


def combine(X: Rows, x: np.ndarray | None, Y: Rows, y: np.ndarray) -> Rows:
    """``X.scaled(rows=x) + Y.scaled(rows=y)`` (``x`` None: ``X``), its sparse values built in one new array where
    both share their index arrays (the joint estimator's terms: no copy of each scaled operand)."""
    Xs, Ys = X.sparse, Y.sparse
    if not (Xs.nnz and Ys.nnz and Xs.shape == Ys.shape and _same(Xs.indices, Ys.indices)
            and _same(Xs.indptr, Ys.indptr)):
        return (X if x is None else X.scaled(rows=x)) + Y.scaled(rows=y)
    empty = sp.csr_matrix(Xs.shape)
    shared = Rows(empty, X.a, X.b).scaled(rows=x) + Rows(empty, Y.a, Y.b).scaled(rows=y)
    data = Xs.data.copy()
    if x is not None:
        _scale_rows(data, Xs.indptr, np.asarray(x, float))
    y = np.asarray(y, float)
    for i, (a, b) in enumerate(zip(Xs.indptr[:-1].tolist(), Xs.indptr[1:].tolist())):
        if b > a:
            data[a:b] += Ys.data[a:b] * y[i]
    return Rows(sp.csr_matrix((data, Xs.indices, Xs.indptr), shape=Xs.shape), shared.a, shared.b)


def add(X: sp.csr_matrix, Y: sp.csr_matrix) -> sp.csr_matrix:
    """``X + Y``; on the index arrays both share (the terms of :func:`.terms._terms` are built on one pattern, the
    drawn instances' :math:`p_i(x_s)`) by adding the stored values, with no merge of the patterns."""
    if X.shape == Y.shape and _same(X.indices, Y.indices) and _same(X.indptr, Y.indptr):
        return sp.csr_matrix((X.data + Y.data, X.indices, X.indptr), shape=X.shape)
    return sp.csr_matrix(X + Y)


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether two arrays are views of the same memory (scipy's constructors wrap a shared index array in a new
    view): then equal without a comparison."""
    return (x.shape == y.shape and x.dtype == y.dtype and x.flags.c_contiguous and y.flags.c_contiguous
            and x.ctypes.data == y.ctypes.data)


def scale(M: sp.csr_matrix, rows=None, cols=None) -> sp.csr_matrix:
    """``diag(rows) @ M @ diag(cols)`` by scaling ``M``'s stored values (either may be None): new values on
    ``M``'s index arrays, shared (a canonical matrix's, which nothing sorts again)."""
    M = sp.csr_matrix(M, dtype=float)
    if not M.has_canonical_format:  # shared index arrays must never be sorted in place later
        M = M.copy()
        M.sum_duplicates()
    data = M.data.copy() if cols is None else M.data * np.asarray(cols, float)[M.indices]
    if rows is not None:
        _scale_rows(data, M.indptr, np.asarray(rows, float))
    return sp.csr_matrix((data, M.indices, M.indptr), shape=M.shape)


def _scale_rows(data: np.ndarray, indptr: np.ndarray, rows: np.ndarray) -> None:
    """Multiply each row's stored values (``data[indptr[i]:indptr[i+1]]``) by ``rows[i]``, in place: row by row
    when rows are long (no per-entry copy of the factors), else through the repeated factors."""
    if len(data) < 64 * len(rows):
        data *= np.repeat(rows, np.diff(indptr))
        return
    for i, (a, b) in enumerate(zip(indptr[:-1].tolist(), indptr[1:].tolist())):
        if b > a and rows[i] != 1.0:
            data[a:b] *= rows[i]


def row_sums(M: sp.csr_matrix, values: np.ndarray, indptr: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``M``, the sum of ``values`` (one per stored entry); ``indptr``: of the rows' values instead of
    ``M``'s (``M`` None: a block of rows, its ``indptr`` from 0)."""
    indptr = M.indptr if indptr is None else indptr
    out = np.zeros(len(indptr) - 1)
    full = np.diff(indptr) > 0
    if len(values):
        out[full] = np.add.reduceat(values, indptr[:-1][full])
    return out


def values_at(M: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``M[rows[k], cols[k]]`` for every ``k`` (0 where ``M`` stores nothing), by one sorted search of the
    positions, not a dense block of ``M``'s rows or columns."""
    M = sp.csr_matrix(M)
    if not M.has_canonical_format:
        M = M.copy()
        M.sum_duplicates()
    n = np.int64(M.shape[1])
    keys = np.repeat(np.arange(M.shape[0], dtype=np.int64), np.diff(M.indptr)) * n + M.indices
    want = np.asarray(rows, dtype=np.int64) * n + np.asarray(cols, dtype=np.int64)
    if not len(keys):
        return np.zeros(len(want))
    pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    return np.where(keys[pos] == want, M.data[pos], 0.0)


def pattern(X: np.ndarray) -> sp.csr_matrix:
    """1 at the non-zeros of the dense 2-d ``X`` (a mask), canonical CSR: ``csr_matrix(X)`` with its values set to
    1, from one pass of ``flatnonzero`` (no float copy of ``X``, no coordinate pairs)."""
    X = np.asarray(X)
    m, n = X.shape
    flat = np.flatnonzero(X)
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.count_nonzero(X, axis=1), out=indptr[1:])
    out = sp.csr_matrix((np.ones(len(flat)), flat - np.repeat(np.arange(m, dtype=np.int64) * n, np.diff(indptr)),
                         indptr), shape=(m, n))
    out.has_canonical_format = True
    return out


def unique_rows(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(A, axis=0, return_index=True, return_inverse=True)``'s ``(first, inv)`` for a 2-d float ``A``: the
    first row of each distinct one, in their sorted (lexicographic) order, and each row's distinct one.  One
    ``lexsort`` of the columns instead of a sort of the rows as records (5x faster at 13,000 x 100)."""
    A = np.ascontiguousarray(A)
    if A.ndim != 2 or not len(A) or np.isnan(A).any():  # (NaN: as numpy's, apart and last)
        _, first, inv = np.unique(A, axis=0, return_index=True, return_inverse=True)
        return first, inv.reshape(-1)
    order = np.lexsort(A.T[::-1])  # stable: the first of equal rows first
    new = np.ones(len(A), bool)
    np.any(A[order[1:]] != A[order[:-1]], axis=1, out=new[1:])
    inv = np.empty(len(A), np.intp)
    inv[order] = np.cumsum(new) - 1
    return order[new], inv


def indicator(codes: np.ndarray, K: int) -> sp.csr_matrix:
    """``(len(codes), K)``: 1 at each position's code."""
    return sp.csr_matrix((np.ones(len(codes)), (np.arange(len(codes)), codes)), shape=(len(codes), K))


#: :func:`group_totals` transposes blocks of rows of about this many values (8 MB: in cache), of at least this many
#: rows (the product's work per code falls with the rows at once: 10 rows of 456,000 codes 2x faster than 2 by 2)
GROUP_BLOCK_VALUES, GROUP_BLOCK_ROWS = 1 << 20, 16


def group_totals(X: np.ndarray, group: np.ndarray, G: int) -> np.ndarray:
    """Per row of the dense ``X`` (rows x codes, or 1-d), its totals over the codes of each ``group`` (``G`` of
    them), summed in the codes' order: ``(indicator(group, G).T @ X.T).T``, the same product a block of rows at a
    time, so that the C-ordered copy of ``X.T`` it needs is a block's, in cache (a 1,000 x 30,000 ``X``: 3x
    faster than at once)."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        return np.bincount(group, weights=X, minlength=G)
    K = X.shape[1]
    # indicator(group, G).T, built as it is: (G, codes) by columns, each code's value added in the codes' order
    It = sp.csc_matrix((np.ones(K), np.asarray(group, np.int64), np.arange(K + 1, dtype=np.int64)), shape=(G, K))
    out = np.empty((X.shape[0], G))
    step = max(GROUP_BLOCK_ROWS, GROUP_BLOCK_VALUES // max(K, 1))
    for r in range(0, X.shape[0], step):
        out[r:r + step] = (It @ np.ascontiguousarray(X[r:r + step].T)).T
    return out


def grouped_ss(Y, a, yb, group: np.ndarray, omega: np.ndarray, scale: np.ndarray, *,
               segments: Segments | None = None) -> np.ndarray:
    r"""Per row of ``Y + outer(a, yb)`` (rows x codes; ``a`` None: ``Y`` alone; ``a`` rows x r and ``yb`` r x codes:
    ``Y + a @ yb``), the weighted sum of squares
    :math:`\sum_g \mathrm{scale}_g \sum_{k\in g} \omega_k (y_k - \bar y_g)^2` with :math:`y_k = Y_k/\omega_k` and
    :math:`\bar y_g = \sum_{k\in g} Y_k / \sum_{k\in g}\omega_k`, ``group`` the group of each code.  ``Y``:
    sparse, or a dense array (then without a shared part).

    From ``Y``'s non-zeros (a group's other codes hold zeros), centred exactly within each (row, group); the shared
    part adds :math:`2a\,\langle Y, \tilde y_b\rangle + a^2 \lVert\tilde y_b\rVert^2` (``yb`` centred within its
    groups sums to 0 there, so the cross term needs ``Y``'s non-zeros only).  ``segments``: ``Y``'s
    :class:`Segments` by ``group`` when already at hand.
    """
    G = len(scale)
    Om = np.bincount(group, weights=omega, minlength=G)
    if isinstance(Y, np.ndarray):
        return _dense_ss(Y, group, omega, scale, Om)
    out = _sparse_ss(Y, group, omega, scale, Om, segments)
    if a is None:
        return out
    if a.ndim == 2:
        with np.errstate(divide="ignore", invalid="ignore"):
            dev = yb / omega - (group_totals(yb, group, G) / Om)[:, group]
        bb = (dev * (scale[group] * omega)) @ dev.T  # (r, r)
        cross = np.asarray(Y @ (dev * scale[group]).T)  # (rows, r)
        return np.maximum(out + 2 * (a * cross).sum(1) + ((a @ bb) * a).sum(1), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = yb / omega - (np.bincount(group, weights=yb, minlength=G) / Om)[group]
    bb = float((scale[group] * omega * dev * dev).sum())
    cross = Y @ (scale[group] * dev)
    return np.maximum(out + 2 * a * cross + a ** 2 * bb, 0.0)  # (>= 0 but for round-off)


#: :func:`grouped_cross` multiplies a sparse matrix as a dense one when at least one value in this many is non-zero
#: and it holds at most :data:`DENSE_GRAM_VALUES` values (300 systems' unit totals, 30% non-zero: 1.1 s -> 0.2 s)
DENSE_GRAM, DENSE_GRAM_VALUES = 8, 1 << 25


def grouped_cross(Y, a, yb, group: np.ndarray, omega: np.ndarray, scale: np.ndarray) -> np.ndarray:
    r""":func:`grouped_ss`'s cross products between rows: the ``(rows, rows)`` matrix
    :math:`\sum_g \mathrm{scale}_g \sum_{k\in g} \omega_k (y_{ak} - \bar y_{ag})(y_{bk} - \bar y_{bg})`, whose diagonal
    :func:`grouped_ss` computes (arguments as there).  Expanded as
    :math:`\sum_k \frac{\mathrm{scale}_{g(k)}}{\omega_k} Y_{ak} Y_{bk} - \sum_g \frac{\mathrm{scale}_g}{\Omega_g}
    \tilde Y_{ag} \tilde Y_{bg}` (:math:`\tilde Y` the group totals, :math:`\Omega_g = \sum_{k\in g}\omega_k`):
    two sparse products and the shared part's low-rank terms, so the matrix costs a pass over the non-zeros per
    column's pairs of rows, not a sum of squares per pair."""
    G = len(scale)
    Om = np.bincount(group, weights=omega, minlength=G)
    with np.errstate(divide="ignore", invalid="ignore"):
        dk = np.where(omega > 0, scale[group] / np.where(omega > 0, omega, 1.0), 0.0)
        eg = np.where(Om > 0, scale / np.where(Om > 0, Om, 1.0), 0.0)
    Ind = indicator(group, G)
    if a is None:
        A = B = None
    else:
        A, B = (a[:, None], np.asarray(yb)[None, :]) if np.ndim(a) == 1 else (a, yb)

    def gram(X, Bx, w):  # (X + A Bx) diag(w) (X + A Bx)^T
        if sp.issparse(X) and X.nnz * DENSE_GRAM >= np.prod(X.shape) and np.prod(X.shape) <= DENSE_GRAM_VALUES:
            X = X.toarray()  # a dense product is several times faster than a sparse one whose output is dense
            if (w >= 0).all():  # one factor's product with its transpose (half the work: a symmetric product)
                Xw = X * np.sqrt(w)
                XX = Xw @ Xw.T
            else:
                XX = (X * w) @ X.T
        else:
            XX = (X @ sp.diags(w) @ X.T).toarray() if sp.issparse(X) else (X * w) @ X.T
        if A is None:
            return np.asarray(XX)
        XB = np.asarray(X @ (Bx * w).T)  # (rows, r)
        return XX + XB @ A.T + A @ XB.T + A @ ((Bx * w) @ Bx.T) @ A.T

    Gt = sp.csr_matrix(Y @ Ind) if sp.issparse(Y) else Y @ Ind
    return gram(Y, B, dk) - gram(Gt, None if B is None else np.asarray(Ind.T @ B.T).T, eg)


def _dense_ss(Y: np.ndarray, group, omega, scale, Om) -> np.ndarray:
    """:func:`grouped_ss` of a dense ``Y``."""
    Ind = indicator(group, len(scale))
    with np.errstate(divide="ignore", invalid="ignore"):
        ybar = np.where(Om > 0, np.asarray((Ind.T @ Y.T).T) / np.where(Om > 0, Om, 1.0), 0.0)
    dev = Y / omega
    dev -= ybar[:, group]
    dev *= dev
    dev *= omega
    return np.asarray((Ind.T @ dev.T).T) @ scale


def _sparse_ss(Y: sp.csr_matrix, group, omega, scale, Om, segments: Segments | None = None) -> np.ndarray:
    """:func:`grouped_ss` of ``Y`` alone, through its :class:`Segments`: centred exactly within each (row, group)
    over its non-zeros, plus the group's zeros."""
    if not Y.nnz:
        return np.zeros(Y.shape[0])
    seg = Segments.of(Y, group) if segments is None else segments
    counts = np.diff(np.append(seg.start, Y.nnz))
    ones = bool((omega == 1).all())
    om = None if ones else omega[Y.indices]
    wsum = np.bincount(seg.pair, weights=counts if ones else np.add.reduceat(om, seg.start),
                       minlength=len(seg.total))
    with np.errstate(divide="ignore", invalid="ignore"):
        ybar = np.where(wsum > 0, seg.total / Om[seg.group], 0.0)
    run_ss = np.empty(len(seg.start))
    block = max(1, len(seg.start) * (1 << 22) // Y.nnz)  # runs of about 4M values at a time (Y's can be 40M)
    for r in range(0, len(seg.start), block):
        a, b = seg.start[r], (seg.start[r + block] if r + block < len(seg.start) else Y.nnz)
        dev = np.repeat(ybar[seg.pair[r:r + block]], counts[r:r + block])
        np.subtract(Y.data[a:b] if ones else Y.data[a:b] / om[a:b], dev, out=dev)
        dev *= dev
        if not ones:
            dev *= om[a:b]
        run_ss[r:r + block] = np.add.reduceat(dev, seg.start[r:r + block] - a)
    inner = np.bincount(seg.pair, weights=run_ss, minlength=len(seg.total))
    rest = np.where(wsum > 0, (Om[seg.group] - wsum) * ybar * ybar, 0.0)  # the zeros of each group
    return np.bincount(seg.row, weights=scale[seg.group] * (inner + rest), minlength=Y.shape[0])


@dataclass(frozen=True)
class Segments:
    """A sparse matrix's totals per (row, group of columns), through the runs of its stored values that share a
    row and a group: ``start`` (the first stored value of each run) and ``pair`` (its (row, group) pair, numbered in
    row then group order) per run; ``row``, ``group`` and ``total`` per pair.  Where every row's columns come group
    by group (the units of :mod:`.finite` are numbered cell by cell) there are as many runs as pairs, and a total
    is one pass over the values in order, with no key per value; any order is right, the runs only more.
    ``pattern``: the matrix's index arrays and the groups they were found for (:meth:`of` reuses the runs of a
    matrix of the same pattern)."""

    start: np.ndarray
    pair: np.ndarray
    row: np.ndarray
    group: np.ndarray
    total: np.ndarray
    pattern: tuple = ()

    @staticmethod
    def of(Y: sp.csr_matrix, group: np.ndarray, *, like: Segments | None = None) -> Segments:
        """The segments of ``Y`` (CSR, any order of the columns within a row) by ``group`` (per column); the runs of
        ``like`` when it was found on the same index arrays (the same memory) and the same ``group`` array."""
        if like is not None and like.pattern and like.pattern[2] is group and _same(like.pattern[0], Y.indices) \
                and _same(like.pattern[1], Y.indptr):
            return replace(like, total=like.totals(Y.data))
        pattern = (Y.indices, Y.indptr, group)
        if not Y.nnz:
            z = np.zeros(0, np.int64)
            return Segments(z, z, z, z, np.zeros(0), pattern)
        g = (group.astype(np.int32) if len(group) and group.max() < 2 ** 31 else group)[Y.indices]
        new = np.empty(Y.nnz, bool)
        new[0] = True
        np.not_equal(g[1:], g[:-1], out=new[1:])
        new[Y.indptr[:-1][np.diff(Y.indptr) > 0]] = True
        start = np.flatnonzero(new)
        del new
        row = np.searchsorted(Y.indptr, start, side="right") - 1
        G = np.int64(int(group.max()) + 1)
        key = row * G + g[start]
        del g
        run_total = np.add.reduceat(Y.data, start)
        if (key[1:] > key[:-1]).all():  # one run per pair, in order
            return Segments(start, np.arange(len(start)), row, (key - row * G), run_total, pattern)
        uniq, pair = np.unique(key, return_inverse=True)
        return Segments(start, pair, uniq // G, uniq % G, np.bincount(pair, weights=run_total, minlength=len(uniq)),
                        pattern)

    def totals(self, values: np.ndarray) -> np.ndarray:
        """Per pair, the total of ``values`` (one per stored value of a matrix of this pattern)."""
        if not len(self.start):
            return np.zeros(0)
        run_total = np.add.reduceat(values, self.start)
        if len(run_total) == len(self.total) and (len(run_total) < 2 or (np.diff(self.pair) == 1).all()):
            return run_total
        return np.bincount(self.pair, weights=run_total, minlength=len(self.total))

    def matrix(self, shape: tuple[int, int]) -> sp.csr_matrix:
        """The ``(rows, groups)`` totals as a canonical sparse matrix."""
        indptr = np.searchsorted(self.row, np.arange(shape[0] + 1), side="left")
        return sp.csr_matrix((self.total, self.group, indptr), shape=shape)


@dataclass(frozen=True)
class ByItem:
    r"""``diag(a) @ M[:, item] @ diag(c)``: a targets x draws matrix whose column at a draw is the column of its
    instance in ``M`` (targets x distinct instances), scaled per target by ``a`` and per draw by ``c``.

    Under the balance heuristic the joint estimator's precision and recall terms are of this form (``M`` the
    systems' distributions or memberships, ``c`` the draw's importance ratio times its label), so a sum over
    resampled draws needs only per-instance totals of ``c``: the bootstrap's work is then the replicates times
    the draws plus the replicates times ``M``'s non-zeros, not the replicates times the terms' non-zeros.
    """

    M: sp.csr_matrix
    item: np.ndarray
    a: np.ndarray
    c: np.ndarray

    def rows(self, Mx: sp.csr_matrix | None = None) -> sp.csr_matrix:
        """The matrix itself (``Mx``: ``M[:, item]`` when already at hand)."""
        return scale(self.M[:, self.item] if Mx is None else Mx, self.a, self.c)
