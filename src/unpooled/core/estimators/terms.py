r"""The joint estimator's kernel: the per-(target, draw) terms whose stratum sums give every estimate of
:mod:`.joint` (:class:`_Terms`), held sparse and built per unit (:mod:`.finite`: a system's draws of one instance
share their importance weight), a block of targets at a time.

A design ``d`` here is a :class:`.joint.Design`.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .rows import ByItem, Rows, indicator, pattern, row_sums, scale


def complete_targets(d) -> np.ndarray:
    r"""Per system, whether its own draws reached every instance it has (:mod:`.finite`).  Such a system's
    precision is taken from its own stratum alone (its weights :math:`w_{ij} = [j = i]`, :func:`_terms`): exact up
    to its labels, where the other systems' draws would add only their rare hits on its instances, whose variance a
    few draws cannot estimate (a 30-instance system drawn completely beside a 3,000-instance one sharing 15 of them:
    90% intervals held its precision 0.46 of the time with the balance heuristic's weights, 1.0 with its own).  The
    choice depends on which instances were drawn, never on labels; recall keeps every system's pool."""
    k = np.bincount(d.units.cell_src[d.units.cell[np.unique(d.units.unit, return_index=True)[1]]],
                    minlength=d.m) if len(d.xs) else np.zeros(d.m, np.int64)
    return (k == np.diff(d.P.indptr)) & (d.n > 0)


class _Terms:
    """Per-(target, draw) terms whose stratum sums give every estimate, held as :class:`.rows.Rows`: non-zero
    where the target holds the drawn instance, plus the parts every target shares (memory: the non-zeros).

    A system's draws of one instance (a unit of :mod:`.finite`) share their importance ratio and probability, so
    the terms are built per unit: ``V`` (targets x units, sparse) is the importance weight of one draw of each unit
    for each target, and :meth:`per_unit` gives the terms' unit totals, all the estimates and their variances need
    (:func:`linear_parts`; 500,000 draws of 1,000 systems: 40M non-zeros once, not four matrices of 44.6M).  The
    same terms per draw (``C``, ``W``, ``A``, ``B``, ``ratio``: :mod:`.ppi`, the entity estimators, ...) are built on
    first use, from the same unit values; the crowd votes' path reads one draw's value per unit instead, a block of
    targets at a time (:meth:`unit_values`).  ``C_items``/``W_items``/``A_items``: ``C``, ``W`` and ``A`` per draw as
    a :class:`.rows.ByItem` plus the rest (a sparse matrix), for the bootstrap (:mod:`.bootstrap`)."""

    def __init__(self, d, W: np.ndarray, *, own_complete: bool = True):
        u = d.units
        self.d, self.weights = d, W
        self.codes, self.item = np.unique(d.xs, return_inverse=True)
        self.PIc = d.P[:, self.codes].tocsc()
        self.PI = self.PIc.tocsr()  # p_i(x) of the instances drawn, (m, K)
        # canonical (sorted, no duplicates): the matrices below share these index arrays, so nothing may sort them
        self.PI.sum_duplicates()
        src, item = d.src[u.first], self.item[u.first]  # per unit
        self.pos_ratio_u = _ratio(d, W, self.PI, item, src, u.factor[u.first])  # recall: every system's draws
        done = np.flatnonzero(complete_targets(d)) if own_complete else []
        # precision of a system drawn completely: its own draws, w_ij = [j = i], so q_i = p_i (the votes' variance
        # then weighs its own items for recall's too)
        self.ratio_u = (_own_rows(d, self.pos_ratio_u, self.PI, item, done, src, u.factor[u.first]) if len(done)
                        else self.pos_ratio_u)
        # counted in floats: an int8 product wraps at 128 matching systems (joint recall 0 for everyone)
        self.S0 = ((W > 0).astype(float) @ d.g0.astype(float)) > 0  # (m, n0): exhaustive instance inside S_i

    def _unit_probabilities(self, order=None):
        """Per block of targets (about 4M non-zeros), its rows and :math:`p_i(x)` of each unit (targets x units,
        its columns cell by cell; ``order``: the units of each column instead): the 40M values are never held
        twice."""
        u = self.d.units
        item = self.item[u.first if order is None else u.first[order]]
        per_row = row_sums(self.PI, np.bincount(item, minlength=len(self.codes))[self.PI.indices])  # units' nnz
        for rows in _row_blocks(np.concatenate([[0], np.cumsum(per_row)])):
            Pu = self.PI[rows].tocsc()[:, item].tocsr()
            Pu.sum_duplicates()
            yield rows, Pu

    def _unit_weight_blocks(self, order=None):
        """Per block of targets: its rows, ``V`` (the importance weight of one draw of each unit for each of its
        targets, rows x units, sparse; ``order``: the units of each column instead) and the units' pattern where
        recall's numerator needs it apart from ``V``'s (complete targets, unequal weights; else None)."""
        pattern = self.d.gs is None and self.ratio_u.sparse.nnz > 0  # V's pattern may then differ from the units'
        ratio = self.ratio_u if order is None else _columns(self.ratio_u, order)
        for rows, Pu in self._unit_probabilities(order):
            yield rows, ratio.sub(rows) * Pu, (Pu if pattern else None)

    def _all_unit_weights(self, order=None) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        """:meth:`_unit_weight_blocks` for every target: ``V`` and the units' pattern (or None)."""
        shape = (self.d.m, self.d.units.n_units)
        V, held = [], []
        for _, Vb, hb in self._unit_weight_blocks(order):
            V.append(Vb)
            held.append(hb)
        V = _stack(V, shape)
        return V, (None if held[0] is None else _stack(held, shape))

    @cached_property
    def _unit_weights(self) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        """:meth:`_all_unit_weights` in the units' order."""
        return self._all_unit_weights()

    @cached_property
    def rest_u(self) -> sp.csr_matrix:
        """The importance weights beyond the shared ratio (rows of complete targets; all with unequal weights), per
        unit."""
        shape = (self.d.m, self.d.units.n_units)
        if not self.ratio_u.sparse.nnz:
            return sp.csr_matrix(shape)
        return _stack([Rows(self.ratio_u.sparse[rows]) * Pu for rows, Pu in self._unit_probabilities()], shape)

    @cached_property
    def ess(self) -> np.ndarray:
        r"""(m,) Kish effective sample size of the precision weights, :math:`(\sum_s w_s)^2 / \sum_s w_s^2`: from the
        per-draw weights when they were built (the votes' path), else from the units' (a unit's weight counted as
        often as it was drawn)."""
        if "W" in self.__dict__:
            w = self.W.sparse
            return _kish(row_sums(w, w.data), row_sums(w, w.data ** 2))
        return _kish(*_unit_sums(self._unit_weights[0], self._unit_columns[0], in_place=False))

    @cached_property
    def _unit_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per unit, its draws, the sum of their labels, and of their labels times :math:`p_0` (the columns that
        make the unit terms of the unit weights)."""
        d, u = self.d, self.d.units
        return (np.bincount(u.unit, minlength=u.n_units).astype(float),
                np.bincount(u.unit, weights=d.f, minlength=u.n_units),
                np.bincount(u.unit, weights=d.p0[d.xs] * d.f, minlength=u.n_units))

    def per_unit(self, recall: bool = True) -> list[Rows]:
        """The unit totals (targets x units) of precision's numerator ``C`` and denominator ``W`` and, with
        ``recall``, of recall's ``A`` and ``B``: a unit's value times its draws (``W``) or the sum of their labels
        (the others).  The unit weights ``V`` become ``W`` (built again if asked for again), so that the four
        hold the non-zeros three times, not four."""
        V, held = self._unit_weights
        del self.__dict__["_unit_weights"]
        out, sums = self._unit_terms(slice(0, self.d.m), V, held, recall)
        self.__dict__.setdefault("ess", _kish(*sums))
        return out

    def per_unit_blocks(self, recall: bool = True):
        """:meth:`per_unit` a block of targets (of about :data:`BLOCK_VALUES` non-zeros) at a time: per block, its
        rows and its terms (a list, which the consumer may empty to free them); memory is one block's non-zeros,
        not every target's.  The effective sizes are set once every block was read."""
        s1, s2 = np.zeros(self.d.m), np.zeros(self.d.m)
        for rows, V, held in self._unit_weight_blocks():
            out, (s1[rows], s2[rows]) = self._unit_terms(rows, V, held, recall)
            del V, held
            yield rows, out
        self.__dict__.setdefault("ess", _kish(s1, s2))

    def unit_values(self, whole: bool = False, order=None, ess: bool = False):
        """Per block of targets (of about :data:`BLOCK_VALUES` non-zeros; ``whole``: one block of all): its rows and
        one draw's value on each unit column (a unit's draws share it; ``order``: the units of each column instead)
        of precision's terms ``W`` (``C`` too: the crowd votes' path takes every label as 1), of recall's numerator
        ``A`` and denominator ``B``: the per-draw terms' values without a column per draw (:mod:`.from_votes` adds
        a unit's draws).  ``ess``: the effective sizes are set once every block was read (from the units' weights, as
        :meth:`per_unit_blocks` sets them)."""
        d, u = self.d, self.d.units
        s1, s2 = np.zeros(d.m), np.zeros(d.m)
        first = u.first if order is None else u.first[order]
        blocks = [(slice(0, d.m), *self._all_unit_weights(order))] if whole else self._unit_weight_blocks(order)
        pos = self.pos_ratio_u if order is None else _columns(self.pos_ratio_u, order)
        p0 = d.p0[d.xs[first]] * d.f[first]
        for rows, V, held in blocks:
            B = pos.sub(rows).scaled(cols=p0)
            if d.gs is not None:  # the draws' instances inside each target's S_i, a unit's draws alike
                A = Rows(B * pattern(d.gs[rows][:, first]))
            else:
                A = Rows(B.at(V if held is None else held))
            del held
            if ess:
                s1[rows], s2[rows] = _unit_sums(V, self._unit_columns[0], in_place=False)
            yield rows, Rows(V), A, B
        if ess:
            self.__dict__.setdefault("ess", _kish(s1, s2))

    @cached_property
    def unit_draws(self) -> np.ndarray:
        """Per unit, its draws (integers)."""
        return np.bincount(self.d.units.unit, minlength=self.d.units.n_units)

    @cached_property
    def units_in_draw_order(self) -> bool:
        """Whether every instance's draws come unit after unit, in the units' order (the draws of each system
        together, the systems in order): a sum over an instance's draws is then one over its units' draws."""
        order = np.argsort(self.item, kind="stable")
        it, un = self.item[order], self.d.units.unit[order]
        return bool(((it[1:] != it[:-1]) | (un[1:] >= un[:-1])).all())

    def _unit_terms(self, rows: slice, V: sp.csr_matrix, held, recall: bool):
        """:meth:`per_unit`'s terms of the targets ``rows`` from their unit weights ``V`` (turned into ``W`` in
        place) and units' pattern ``held``, with the sums of the weights and of their squares (:func:`_unit_sums`)."""
        d, u = self.d, self.d.units
        draws, labels, positives = self._unit_columns
        A = B = None
        if recall:
            B = self.pos_ratio_u.sub(rows).scaled(cols=positives)
            A = Rows(sp.csr_matrix(self.A.sparse[rows] @ indicator(u.unit, u.n_units)) if d.gs is not None else
                     B.at(V if held is None else held))
        del held
        C = Rows(scale(V, cols=labels))
        sums = _unit_sums(V, draws, in_place=True)  # W = V times the draws, in place (scale's values, without a copy)
        return [C, Rows(V)] + ([A, B] if recall else []), sums

    @cached_property
    def ratio(self) -> Rows:
        """(m, S) (w_ij / n_j) / q_i(x_s): the importance ratio of each draw."""
        return self.ratio_u.columns(self.d.units.unit)

    @cached_property
    def _pos(self) -> Rows:
        return self.pos_ratio_u.columns(self.d.units.unit).scaled(cols=self.d.p0[self.d.xs] * self.d.f)

    def _Pm(self) -> sp.csr_matrix:
        Pm = self.PIc[:, self.item].tocsr()  # p_i(x_s), (m, S): through columns, so sorted without a sort
        Pm.sum_duplicates()
        return Pm

    @cached_property
    def C(self) -> Rows:
        """Precision's numerator (m, S): the importance weights times the labels."""
        return Rows(scale(self.W.sparse, cols=self.d.f))

    @cached_property
    def W(self) -> Rows:
        """Precision's denominator (m, S): the importance weight of each draw for each target."""
        return Rows(self.ratio * self._Pm())

    @cached_property
    def A(self) -> Rows:
        """Recall's numerator (m, S)."""
        if self.d.gs is None and not self.ratio.sparse.nnz:  # the drawn instances held: W's non-zeros
            return Rows(self._pos.at(self.W.sparse))
        if self.d.gs is None:
            held = self._Pm()
            held = sp.csr_matrix(((held.data != 0).astype(float), held.indices, held.indptr), shape=held.shape)
        else:
            held = pattern(self.d.gs)
        return Rows(self._pos * held)

    @property
    def B(self) -> Rows:
        """Recall's denominator (m, S)."""
        return self._pos

    @cached_property
    def W_items(self) -> tuple[ByItem | None, sp.csr_matrix]:
        rest = Rows(self.rest_u).columns(self.d.units.unit).sparse
        r = self.ratio
        return (None if r.a is None else ByItem(self.PI, self.item, r.a, r.b), rest)

    @cached_property
    def C_items(self) -> tuple[ByItem | None, sp.csr_matrix]:
        items, rest = self.W_items
        f = self.d.f
        return (None if items is None else ByItem(items.M, items.item, items.a, items.c * f), scale(rest, cols=f))

    @cached_property
    def A_items(self) -> tuple[ByItem | None, sp.csr_matrix]:
        pos = self._pos
        if self.d.gs is None and pos.a is not None:
            PI = self.PI
            HI = sp.csr_matrix(((PI.data != 0).astype(float), PI.indices, PI.indptr), shape=PI.shape)
            return ByItem(HI, self.item, pos.a, pos.b), sp.csr_matrix(pos.shape)
        return None, self.A.sparse


def _columns(X: Rows, order: np.ndarray) -> Rows:
    """``X``'s columns ``order`` (a permutation), canonical."""
    sparse = X.sparse
    if sparse.nnz:
        sparse = sparse[:, order]
        sparse.sum_duplicates()
    return Rows(sparse, X.a, None if X.b is None else X.b[..., order])


def _unit_sums(V: sp.csr_matrix, m_u: np.ndarray, *, in_place: bool) -> tuple[np.ndarray, np.ndarray]:
    r"""Per row of the unit weights ``V``, :math:`\sum w` and :math:`\sum w^2/m` with :math:`w` a unit's weight
    times its draws :math:`m` (``m_u``, per unit): the sums of the draws' weights and of their squares
    (:func:`_kish`); ``in_place``: ``V``'s values become :math:`w`, a block of targets at a time."""
    s1, s2 = np.zeros(V.shape[0]), np.zeros(V.shape[0])
    for rows in _row_blocks(V.indptr):
        a, b = V.indptr[rows.start], V.indptr[rows.stop]
        ip = V.indptr[rows.start:rows.stop + 1] - a
        w = V.data[a:b] * m_u[V.indices[a:b]]  # a unit's weights, as many as its draws
        s1[rows], s2[rows] = row_sums(None, w, ip), row_sums(None, w * V.data[a:b], ip)
        if in_place:
            V.data[a:b] = w
    return s1, s2


def _kish(s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """Kish's effective sample size from the sums of the weights and of their squares (0 where undefined)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(s1 ** 2 / s2)


def _terms(d, W: np.ndarray, *, own_complete: bool = True) -> _Terms:
    """Per-(target, draw) terms under the weights ``W``; precision's from a system's own draws alone where they
    reached all its instances (:func:`complete_targets`) unless ``own_complete`` is False."""
    return _Terms(d, W, own_complete=own_complete)


#: the unit terms are built and scaled a block of targets of about this many non-zeros at a time (arrays of 16 MB,
#: below glibc's largest mmap threshold: freed blocks are reused, not fresh pages from the kernel each time)
BLOCK_VALUES = 1 << 21


def _row_blocks(indptr: np.ndarray) -> list[slice]:
    """Slices of the rows of a matrix (its ``indptr``) of about :data:`BLOCK_VALUES` stored values each (at least
    one row)."""
    nnz = BLOCK_VALUES
    cut = np.searchsorted(indptr, np.arange(nnz, indptr[-1], nnz))
    edges = np.unique(np.concatenate([[0], cut, [len(indptr) - 1]]))
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])] or [slice(0, 0)]


def _stack(blocks: list, shape: tuple[int, int]) -> sp.csr_matrix:
    """The blocks of rows (CSR) as one matrix, canonical when they are (one copy of their arrays)."""
    if len(blocks) == 1:
        return blocks[0]
    nnz = np.cumsum([0] + [b.nnz for b in blocks])
    indptr = np.concatenate([[0]] + [b.indptr[1:].astype(np.int64) + o for b, o in zip(blocks, nnz[:-1])])
    wide = np.int64 if nnz[-1] >= 2 ** 31 or shape[1] >= 2 ** 31 else np.int32
    out = sp.csr_matrix((np.concatenate([b.data for b in blocks]),
                         np.concatenate([b.indices for b in blocks]).astype(wide, copy=False),
                         indptr.astype(wide)), shape=shape)
    out.has_canonical_format = all(b.has_canonical_format for b in blocks)
    return out


def importance_ratio(w, factor, n, q):
    r"""The importance ratio of a draw for a target, :math:`w_{ij}\,(r_s / \max(n_j, 1)) / q_i(x_s)` (0 where
    :math:`q_i(x_s) = 0`): the weight ``w`` of the stratum :math:`j` that made the draw, the draw's
    :attr:`.finite.DrawUnits.factor` ``factor`` :math:`r_s` (over distinct instances), the stratum's draws ``n`` and
    the target's proposal ``q`` at the drawn instance (arrays that broadcast).  The one definition of the joint
    estimator's kernel (:func:`_ratio`, :func:`_own_rows`, :mod:`.breakdown`): a draw's importance weight is the
    ratio times :math:`p_i(x_s)`, and every term that weight times a label or :math:`p_0`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q > 0, w * (factor / np.maximum(n, 1)) / q, 0.0)


def _ratio(d, W: np.ndarray, PI: sp.csr_matrix, item: np.ndarray, src: np.ndarray,
           factor: np.ndarray) -> Rows:
    r""":func:`importance_ratio` of every (target, column), the columns (draws or units) made by systems ``src`` of
    the instances ``item`` (columns of ``PI``), with the :attr:`.finite.DrawUnits.factor` ``factor``, over distinct
    instances: one row shared by every target when ``W``'s rows are equal (the balance heuristic: one proposal
    :math:`q`), else dense."""
    n = d.n.astype(float)[src]
    if len(W) and np.all(W == W[:1]):
        return Rows.shared(np.ones(d.m), importance_ratio(W[0, src], factor, n, (PI.T @ W[0])[item]))
    Q = np.asarray((PI.T @ W.T).T)[:, item]  # q_i(x)
    return Rows.of(importance_ratio(W[:, src], factor[None, :], n[None, :], Q))


def _own_rows(d, ratio: Rows, PI: sp.csr_matrix, item: np.ndarray, done: np.ndarray, src: np.ndarray,
              factor: np.ndarray) -> Rows:
    """``ratio`` (columns as :func:`_ratio`'s) with the rows ``done`` replaced by their own draws' ratios
    :math:`1/(n_i p_i(x_s))` (:func:`importance_ratio` with :math:`w_{ii} = 1` and :math:`q_i = p_i`, over distinct
    instances), 0 on the other columns."""
    m = d.m
    own = np.flatnonzero(np.isin(src, done))
    p_own = np.asarray(PI[src[own], item[own]]).ravel()
    val = importance_ratio(1.0, factor[own], d.n.astype(float)[src[own]], p_own)
    keep = np.ones(m)
    keep[done] = 0.0
    mine = sp.csr_matrix((val, (src[own], own)), shape=ratio.shape)
    return Rows(sp.csr_matrix(scale(ratio.sparse, keep) + mine), None if ratio.a is None else ratio.a * keep, ratio.b)

