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

:func:`unseen_mass` gives the share of a target's distribution no draw has reached: the effective sample size
behind a Wilson interval whose estimated variance is 0 is divided by it, so an interval collapses only when the
whole population was drawn.

References: D. Basu. On sampling with and without replacement. *Sankhyā* 20:287-294, 1958; C. R. Rao.
Some theorems on minimum variance estimation. *Sankhyā* 12:27-42, 1952 (the distinct units are sufficient).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class DrawUnits:
    """How the draws group into distinct instances (units) and cells of equal sampling probability.

    ``factor`` (per draw) is :math:`r_s`; ``unit`` and ``cell`` are per-draw codes; ``cell_src``,
    ``cell_k`` (distinct instances drawn) and ``cell_N`` (instances in the cell) are per cell."""

    factor: np.ndarray
    unit: np.ndarray
    cell: np.ndarray
    cell_src: np.ndarray
    cell_k: np.ndarray
    cell_N: np.ndarray
    n_units: int


def _value_bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64).view(np.int64)


def draw_units(P: sp.csr_matrix, src: np.ndarray, xs: np.ndarray) -> DrawUnits:
    """The :class:`DrawUnits` of draws ``xs`` made by systems ``src`` from the rows of ``P``."""
    if not len(xs):
        z = np.zeros(0, np.int64)
        return DrawUnits(np.ones(0), z, z, z, z, z, 0)
    p = np.asarray(P[src, xs]).ravel()
    _, unit, m_s = np.unique(np.stack([src, xs]), axis=1, return_inverse=True, return_counts=True)
    unit = unit.ravel()
    cells, cell = np.unique(np.stack([src, _value_bits(p)]), axis=1, return_inverse=True)
    cell = cell.ravel()
    n_c = np.bincount(cell)
    first = np.unique(unit, return_index=True)[1]  # one draw per unit
    k_c = np.bincount(cell[first], minlength=len(n_c))
    # cell sizes: the instances of the cell's row that have the cell's probability
    rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
    have = np.isin(rows, cells[0])
    kv, kn = np.unique(np.stack([rows[have], _value_bits(P.data[have])]), axis=1, return_counts=True)
    _, inv = np.unique(np.concatenate([kv, cells], axis=1), axis=1, return_inverse=True)
    inv = inv.ravel()
    size = np.zeros(int(inv.max()) + 1, np.int64)
    size[inv[:kv.shape[1]]] = kn
    N_c = size[inv[kv.shape[1]:]]
    factor = n_c[cell] / (k_c[cell] * m_s[unit])
    return DrawUnits(factor, unit, cell, cells[0], k_c, N_c, int(unit.max()) + 1)


def strata_var(U: np.ndarray, src: np.ndarray, m: int, units: DrawUnits) -> np.ndarray:
    r"""Variance estimate of the row sums of ``U`` (targets x draws; values already multiplied by the draws'
    :attr:`DrawUnits.factor`) under stratified i.i.d. draws, strata ``h`` given by ``src``: the two terms of the
    module docs.  Without repeats and with cells much larger than their draws it is the per-draw formula :math:`\sum_h \frac{n_h}{n_h-1}\sum_{s\in h}(u_s - \bar u_h)^2`.
    """
    n = np.bincount(src, minlength=m).astype(float)
    if not len(src):
        return np.zeros(np.shape(U)[0])
    C = len(units.cell_k)
    n_c = np.bincount(units.cell, minlength=C).astype(float)
    A = _col_sums(U, units.cell, C)  # (T, C) cell totals
    between = _per_draw(A[:, units.cell] / n_c[units.cell][None, :], src, m, n)
    a = _col_sums(U, units.unit, units.n_units)  # (T, units) unit totals
    unit_cell = np.zeros(units.n_units, np.int64)
    unit_cell[units.unit] = units.cell
    k = units.cell_k.astype(float)
    a -= (A / np.maximum(k, 1)[None, :])[:, unit_cell]  # centred within the cell (no cancellation)
    ss = _col_sums(a * a, unit_cell, C)
    with np.errstate(divide="ignore", invalid="ignore"):
        fpc = np.where(k > 1, (1 - k / units.cell_N) * k / np.maximum(k - 1, 1), 0.0)
    within = np.maximum(ss, 0.0) @ np.maximum(fpc, 0.0)
    return between + within


def unseen_mass(P: sp.csr_matrix, xs: np.ndarray) -> np.ndarray:
    """Per row of ``P``, the probability mass of the instances no draw (of any system) reached."""
    seen = np.zeros(P.shape[1])
    seen[np.unique(xs)] = 1.0
    return np.clip(1.0 - np.asarray(P @ seen).ravel(), 0.0, 1.0)


def _col_sums(U: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    """``(T, n)``: the sums of ``U``'s columns by ``codes``."""
    M = sp.csr_matrix((np.ones(len(codes)), (np.arange(len(codes)), codes)), shape=(len(codes), n))
    return np.asarray(M.T @ np.asarray(U).T).T


def _per_draw(U: np.ndarray, src: np.ndarray, m: int, n: np.ndarray) -> np.ndarray:
    Uc = U - (_col_sums(U, src, m) / np.maximum(n, 1)[None, :])[:, src]  # centred within the stratum
    S2 = _col_sums(Uc * Uc, src, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(n > 1, n / np.maximum(n - 1, 1) * S2, 0.0)
    return per.sum(axis=1)
