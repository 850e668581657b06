r"""Draws from a finite population: every estimator over the *distinct* instances drawn (Rao–Blackwell).

Each system :math:`j` is sampled by :math:`n_j` i.i.d. draws **with replacement** from :math:`p_j`, so a small
system is drawn again and again: 150 draws from a 20-instance system hit every instance about 7 times, and the
draws' mean weighs each instance by how often it happened to be drawn, a spread of about 4 points of precision
even with perfect labels.  Yet once every instance is labelled, precision is known.

Group system :math:`j`'s instances into **cells** :math:`c` of equal :math:`p_j(x)` (at the instance level one
cell, all of :math:`X_j`; at the relation level the relations with the same number of instances; …), of
:math:`N_c` instances.  Given the number :math:`n_c` of draws that fell in a cell, they are :math:`n_c` uniform
draws with replacement from it, and given the set :math:`D_c` of the :math:`k_c` distinct instances among them,
:math:`D_c` is a simple random sample without replacement.  The conditional expectation of the draws' mean of
any value :math:`y` given :math:`D_c` is therefore the mean over :math:`D_c`: replacing each draw's weight
:math:`1` by

.. math::

    r_s = \frac{n_c}{k_c\,m_s},

(:math:`m_s` the draws of the same instance in the stratum) -- every distinct instance then counts
:math:`n_c/k_c` times -- keeps every estimator built from the draws' sums unbiased (it is the Rao–Blackwell
improvement by the sufficient statistic, Basu 1958), never raises its variance, and makes a cell drawn
completely (:math:`k_c = N_c`) exact.  Without repeats (:math:`k_c = n_c`) nothing changes.

**Variance** of a stratum's sum of per-draw values :math:`u_s` (already multiplied by :math:`r_s`), with
:math:`a_x` the sum over the draws of instance :math:`x` and :math:`A_c` over the cell:

.. math::

    \widehat{\mathrm{Var}}_h = \underbrace{\frac{n_h}{n_h-1}\sum_{s\in h}\Bigl(\frac{A_{c(s)}}{n_{c(s)}} -
    \frac{1}{n_h}\sum_c A_c\Bigr)^2}_{\text{how many draws fall in each cell}}
    + \underbrace{\sum_c \Bigl(1 - \frac{k_c}{N_c}\Bigr)\frac{k_c}{k_c-1}\sum_{x\in D_c}(a_x - \bar a_c)^2}
    _{\text{which instances of a cell, without replacement}}

(:func:`strata_var`).  With one cell and no repeats it is the i.i.d. per-draw formula times the finite-population
correction :math:`1 - n/N`; a completely drawn cell adds nothing.  A cell with one distinct instance
(:math:`k_c = 1 < N_c`) has no spread of its own to estimate; its draws count in the first term as single draws,
as they did without this correction.

:func:`unseen_mass` gives the share :math:`u` of a target's distribution no draw has reached and
:func:`population_count` its number of instances :math:`N`: a Wilson interval whose estimated variance is 0 takes
the smaller of the effective sample size over :math:`u` and :math:`N(-\log u)`
(:func:`.intervals.population_size`), so an interval collapses only when the whole population was drawn, and a
false instance left undrawn is allowed for as the finite population allows.

References: D. Basu. On sampling with and without replacement. *Sankhyā* 20:287-294, 1958; C. R. Rao.
Some theorems on minimum variance estimation. *Sankhyā* 12:27-42, 1952 (the distinct units are sufficient).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from .rows import Rows, Segments, group_totals, grouped_cross, grouped_ss, indicator


@dataclass(frozen=True)
class DrawUnits:
    """How the draws group into distinct instances (units) and cells of equal sampling probability.

    ``factor`` (per draw) is :math:`r_s`; ``unit`` and ``cell`` are per-draw codes; ``cell_src``,
    ``cell_k`` (distinct instances drawn) and ``cell_N`` (instances in the cell) are per cell; ``first`` (a draw
    of each unit: a unit's draws share their system, instance and factor) and ``unit_cell`` are per unit."""

    factor: np.ndarray
    unit: np.ndarray
    cell: np.ndarray
    cell_src: np.ndarray
    cell_k: np.ndarray
    cell_N: np.ndarray
    n_units: int
    first: np.ndarray
    unit_cell: np.ndarray

    @cached_property
    def cell_draws(self) -> np.ndarray:
        """Per cell, its draws :math:`n_c` (floats)."""
        return np.bincount(self.cell, minlength=len(self.cell_k)).astype(float)

    @cached_property
    def within_scale(self) -> np.ndarray:
        r"""Per cell, the factor of its sum of squares within (:func:`strata_var`),
        :math:`(1 - k_c/N_c)\,k_c/(k_c-1)` (0 for a cell of one distinct instance or drawn completely)."""
        k = self.cell_k.astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            fpc = np.where(k > 1, (1 - k / self.cell_N) * k / np.maximum(k - 1, 1), 0.0)
        return np.maximum(fpc, 0.0)


def _value_bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64).view(np.int64)


def _group(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes of the distinct tuples of ``keys`` (equal-length integer arrays), numbered in lexicographic order
    (the first key most significant); one member's index per code; the counts."""
    order = np.lexsort(keys[::-1])
    new = np.zeros(len(order), bool)
    for k in keys:
        ks = k[order]
        new[1:] |= ks[1:] != ks[:-1]
    new[0] = True
    codes = np.empty(len(order), np.int64)
    codes[order] = np.cumsum(new) - 1
    start = np.flatnonzero(new)
    return codes, order[start], np.diff(np.append(start, len(order)))


def draw_units(P: sp.csr_matrix, src: np.ndarray, xs: np.ndarray) -> DrawUnits:
    """The :class:`DrawUnits` of draws ``xs`` made by systems ``src`` from the rows of ``P``."""
    if not len(xs):
        z = np.zeros(0, np.int64)
        return DrawUnits(np.ones(0), z, z, z, z, z, 0, z, z)
    p = _value_bits(np.asarray(P[src, xs]).ravel())
    cell, first_c, n_c = _group(src, p)
    cell_src, cell_p = src[first_c], p[first_c]
    unit, first_u, m_s = _group(cell, xs)
    k_c = np.bincount(cell[first_u], minlength=len(n_c))
    # cell sizes: the instances of the cell's row that have the cell's probability (all of a row of one value)
    nnz = np.diff(P.indptr)
    full = nnz > 0
    one = np.zeros(P.shape[0], bool)
    if P.nnz:
        starts = P.indptr[:-1][full]
        one[full] = np.minimum.reduceat(P.data, starts) == np.maximum.reduceat(P.data, starts)
    N_c = nnz[cell_src].astype(np.int64)
    rest = np.flatnonzero(~one[cell_src])
    if len(rest):
        rows = np.repeat(np.arange(P.shape[0]), nnz)
        have = (np.bincount(cell_src[rest], minlength=P.shape[0]) > 0)[rows]
        both = _group(np.concatenate([rows[have], cell_src[rest]]),
                      np.concatenate([_value_bits(P.data[have]), cell_p[rest]]))[0]
        nP = int(have.sum())
        N_c[rest] = np.bincount(both[:nP], minlength=int(both.max()) + 1)[both[nP:]]
    factor = n_c[cell] / (k_c[cell] * m_s[unit])
    return DrawUnits(factor, unit, cell, cell_src, k_c, N_c, len(m_s), first_u, cell[first_u])


def strata_var(U, src: np.ndarray, m: int, units: DrawUnits, *, cross: bool = False, per_unit: bool = False,
               segments: Segments | None = None) -> np.ndarray:
    r"""Variance estimate of the row sums of ``U`` (targets x draws, an array or :class:`Rows`; values already
    multiplied by the draws' :attr:`DrawUnits.factor`) under stratified i.i.d. draws, strata ``h`` given by ``src``:
    the two terms of the module docs.  Without repeats and with cells much larger than their draws it is the
    per-draw formula :math:`\sum_h \frac{n_h}{n_h-1}\sum_{s\in h}(u_s - \bar u_h)^2`.

    Work and memory are proportional to the non-zeros of ``U`` (a :class:`~.rows.Rows`' shared row adds one
    row): each term is a weighted sum of squares within groups of ``U``'s totals by cell (between the cells of a
    stratum) and by distinct instance (within a cell), centred exactly (:func:`.rows.grouped_ss`).

    ``per_unit``: ``U``'s columns are already the totals of the units (targets x :attr:`DrawUnits.n_units`, the
    joint estimator's terms, :meth:`.terms._Terms.per_unit`); the size below which a variance is round-off is then
    taken over the units' totals.  ``segments``: the :class:`~.rows.Segments` of a matrix of the same pattern by
    :attr:`DrawUnits.unit_cell` (reused when the unit totals share it, :meth:`~.rows.Segments.of`).

    ``cross``: the ``(rows, rows)`` covariance matrix of the row sums, whose diagonal is the variance: the same two
    terms with cross products of rows (:func:`.rows.grouped_cross`); the covariances of the systems' estimates
    (:mod:`.paired`).
    """
    dense = isinstance(U, np.ndarray)
    X = np.atleast_2d(U) if dense else Rows.of(U)
    if not len(src):
        return np.zeros((X.shape[0],) * (2 if cross else 1))
    n = np.bincount(src, minlength=m).astype(float)
    C = len(units.cell_k)
    n_c = units.cell_draws
    unit_cell = units.unit_cell
    Mu = None if per_unit else indicator(units.unit, units.n_units)
    if dense:  # (a few rows of influence values held dense: breakdowns, entity arguments)
        Yu = X if per_unit else np.asarray((Mu.T @ X.T).T)  # unit totals (m, units)
        Yc = np.asarray((indicator(unit_cell, C).T @ Yu.T).T)  # cell totals (m, C)
        a = bu = bc = None
    else:
        Yu = X.sparse if per_unit else sp.csr_matrix(X.sparse @ Mu)
        seg = Segments.of(Yu, unit_cell, like=segments)
        Yc = seg.matrix((Yu.shape[0], C))
        a, bu = X.a, None if X.a is None else (X.b if per_unit else np.asarray(Mu.T @ X.b.T).T)  # (units,), (r, units)
        bc = None if X.a is None else group_totals(bu, unit_cell, C)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_stratum = np.where(n > 1, n / np.maximum(n - 1, 1), 0.0)
    ss = grouped_cross if cross else grouped_ss
    between = ss(Yc, a, bc, units.cell_src, n_c, per_stratum)  # how many draws fall in each cell
    fpc = units.within_scale
    within = (grouped_cross(Yu, a, bu, unit_cell, np.ones(units.n_units), fpc) if cross else
              grouped_ss(Yu, a, bu, unit_cell, np.ones(units.n_units), fpc, segments=None if dense else seg))
    var = between + within
    if cross:
        return var
    # a sum of equal values (a complete or single-valued cell) leaves round-off of the order of (eps x the
    # values)^2; it is 0, which the intervals treat as exact (a variance of 1e-35 made F1's correlation noise)
    size = np.abs(X).sum(1) if dense else X.abs_sum()
    return np.where(var <= (64 * np.finfo(float).eps * size) ** 2, 0.0, var)


def population_count(P: sp.csr_matrix) -> np.ndarray:
    r"""Per row of ``P``, its population in instances, :math:`1/\sum_x p_i(x)^2` (the number of its instances when
    they are equally likely)."""
    return count_of(np.asarray(P.sum(axis=1)).ravel(), np.asarray(P.multiply(P).sum(axis=1)).ravel())


def count_of(mass, sq) -> np.ndarray:
    r"""The instances of a part of a distribution of total ``mass`` and sum of squares ``sq``,
    :math:`(\sum_x p(x))^2/\sum_x p(x)^2` (0 where it is empty): :func:`population_count` of a row, or of a group of
    its instances (:mod:`.breakdown`)."""
    mass, sq = np.asarray(mass, dtype=float), np.asarray(sq, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sq > 0, mass ** 2 / np.where(sq > 0, sq, 1.0), 0.0)


def unseen_mass(P: sp.csr_matrix, xs: np.ndarray) -> np.ndarray:
    """Per row of ``P``, the probability mass of the instances no draw (of any system) reached."""
    seen = np.zeros(P.shape[1])
    seen[np.unique(xs)] = 1.0
    return np.clip(1.0 - np.asarray(P @ seen).ravel(), 0.0, 1.0)
