r"""Estimates to first order: the per-draw and per-exhaustive-instance values whose variance is an estimate's.

Every estimate of :mod:`.joint` is a smooth function of stratum sums, and its variance is the design variance of
its *linear part*: per (target, draw) influence values, whose stratified variance is :func:`.finite.strata_var`
(through :func:`.joint.strata_var`), plus per (target, exhaustive instance) linearised values, whose variance is
:func:`.joint._var0` (documents as clusters, Student's factor), plus, for recall's product
:math:`\hat\theta\hat\nu`, the second-order term :math:`\sigma^2_\theta\sigma^2_\nu` (Lemma A).  A
:class:`Linear` holds those pieces for a vector of estimates (one row per target); both variances are quadratic
forms of the rows, so the variance of any **linear combination** of the targets' estimates -- a difference
:math:`\hat F_i - \hat F_j` -- is the same variance of the same combination of their rows
(:meth:`Linear.combine`): the covariance of two systems comes from the functions that give each one's variance,
not from a second copy of the formula.  The second-order term is kept per target and added for each target in
a combination (:math:`\sigma^2_{\theta_i}\sigma^2_{\nu_i} + \sigma^2_{\theta_j}\sigma^2_{\nu_j}` for a
difference; it is :math:`O(n^{-2})`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .rows import Rows, Segments


@dataclass(frozen=True)
class Linear:
    """The linear part of ``m`` estimates: ``draws`` (m x draws, :class:`.rows.Rows`, or None) scaled per row by
    ``draw_scale``, ``exhaustive`` (m x n0 linearised values, or None) scaled per row by ``ex_scale``, and a
    variance ``extra`` beyond them (per row, or None).  ``per_unit``: the columns of ``draws`` are the draws' units
    (their totals, :meth:`.terms._Terms.per_unit`); ``segments``: the runs of their pattern
    (:func:`.finite.strata_var`)."""

    draws: Rows | None
    exhaustive: np.ndarray | None = None
    draw_scale: np.ndarray | None = None
    ex_scale: np.ndarray | None = None
    extra: np.ndarray | None = None
    per_unit: bool = False
    segments: Segments | None = None

    @property
    def m(self) -> int:
        return (self.draws.shape[0] if self.draws is not None else self.exhaustive.shape[0])

    def var(self, d, confidence: float | None) -> np.ndarray:
        """Per row, the variance estimate under the design ``d``: the draws' strata variance, the exhaustive
        stratum's (with ``confidence``: Student's factor with documents), the extra term."""
        from .joint import _var0, strata_var

        out = np.zeros(self.m)
        if self.draws is not None:
            v = strata_var(self.draws, d, per_unit=self.per_unit, segments=self.segments)
            out += v if self.draw_scale is None else self.draw_scale ** 2 * v
        if self.exhaustive is not None and self.exhaustive.shape[1]:
            v = _var0(self.exhaustive, d, confidence)
            out += v if self.ex_scale is None else self.ex_scale ** 2 * v
        if self.extra is not None:
            out += self.extra
        return out

    def cov(self, d, confidence: float | None) -> np.ndarray:
        """The ``(m, m)`` covariance matrix of the estimates, whose diagonal is :meth:`var` (the same variances with
        cross products of rows: :func:`.joint.strata_var` and :func:`.joint._var0` with ``cross``); the extra
        terms on the diagonal only."""
        from .joint import _var0, strata_var

        m = self.m
        out = np.zeros((m, m))
        if self.draws is not None:
            C = strata_var(self.draws, d, cross=True, per_unit=self.per_unit)
            out += C if self.draw_scale is None else np.outer(self.draw_scale, self.draw_scale) * C
        if self.exhaustive is not None and self.exhaustive.shape[1]:
            C = _var0(self.exhaustive, d, confidence, cross=True)
            out += C if self.ex_scale is None else np.outer(self.ex_scale, self.ex_scale) * C
        if self.extra is not None:
            out[np.diag_indices(m)] += self.extra
        return out

    def combine(self, L) -> Linear:
        """The linear part of ``L @ estimates`` (``L``: k x m, sparse or dense): the rows combined by ``L``, the
        extra terms by ``|L|`` (each target's own second-order term, not a covariance)."""
        L = sp.csr_matrix(L, dtype=float)
        draws = ex = extra = None
        if self.draws is not None:
            X = self.draws if self.draw_scale is None else self.draws.scaled(rows=self.draw_scale)
            a = None if X.a is None else np.asarray(L @ X.a)
            draws = Rows(sp.csr_matrix(L @ X.sparse), a, X.b)
        if self.exhaustive is not None:
            T = self.exhaustive if self.ex_scale is None else self.ex_scale[:, None] * self.exhaustive
            ex = np.asarray(L @ T)
        if self.extra is not None:
            extra = np.asarray(abs(L) @ self.extra).ravel()
        return Linear(draws, ex, extra=extra, per_unit=self.per_unit)
