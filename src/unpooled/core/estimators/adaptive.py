r"""How many new labels a new system needs, given every label already collected (method.md §2.7).

For a new system :math:`m` with known :math:`p_m` and :math:`n` own draws to come,
the balance-heuristic proposal is
:math:`q(x) = \big(\sum_{j\ne m} n_j p_j(x) + n\,p_m(x)\big)/(N+n)` and, by Theorem 1,

.. math::

    \mathrm{Var}(\hat\pi_m)(n) = \sum_{j\ne m}\frac{w_j^2}{n_j}\,\sigma_j^2(n) + \frac{w_m^2}{n}\,\sigma_m^2(n),
    \qquad w_j = \frac{n_j}{N+n},

where :math:`\sigma_j^2` is the sample variance of :math:`p_m f/q` over the existing
draws of system :math:`j` (their labels are known), and the new system's own term

.. math::

    \sigma_m^2(n) = \sum_x p_m(x)\Big(\frac{p_m(x)}{q(x)}\Big)^2 \mathbb E[f(x)^2]
                   - \Big(\sum_x p_m(x)\frac{p_m(x)}{q(x)}\mathbb E[f(x)]\Big)^2

uses the label where :math:`x` is already labelled and, elsewhere, a Bernoulli
label with the precision estimated so far (``prior``; 0.5 -- the worst case --
when nothing is known). Unlike the paper's bound (:math:`f \equiv 1`, mean term
dropped) this is not conservative by construction, but it does not ask for
labels the evidence already provides. The smallest :math:`n \ge 1` (:math:`n\ge1`
keeps :math:`w_m>0`, so the estimate stays unbiased) with variance at most the
target is found by bisection (the variance decreases in :math:`n`).

Only unlabelled draws cost: :math:`n` draws with replacement need in expectation
:math:`\sum_{x \text{ unlabelled}} 1-(1-p_m(x))^n` new labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from ..errors import InvalidInputError
from .joint import Design


@dataclass(frozen=True)
class LabelPlan:
    draws: int  # n: draws from p_m
    expected_new_labels: float  # of which are not labelled yet (expected)
    predicted_var: float
    target_var: float
    prior: float

    @property
    def predicted_halfwidth(self) -> float:
        return float(np.sqrt(self.predicted_var))


def precision_variance(d: Design, new: int, n_new: int, labelled: dict[int, float] | np.ndarray,
                       prior: float) -> float:
    """Predicted :math:`\\mathrm{Var}(\\hat\\pi_{new})` with ``n_new`` own draws (balance weights)."""
    P = d.P
    n = d.n.astype(float)
    n[new] = 0.0
    N = n.sum() + n_new
    pm_row = P.getrow(new)
    supp = pm_row.indices
    pm = pm_row.data
    # q on the new system's support
    nP = (P[:, supp].T @ n)  # sum_j n_j p_j(x), j != new (n[new] = 0)
    q = (np.asarray(nP).ravel() + n_new * pm) / N
    # expected labels on the support
    lab = np.asarray(labelled, dtype=float)  # per-universe labels, NaN where unknown
    fx = lab[supp]
    known = ~np.isnan(fx)
    ef = np.where(known, fx, prior)
    ef2 = np.where(known, fx * fx, prior)
    ratio = pm / q
    own_var = float((pm * ratio ** 2 * ef2).sum() - ((pm * ratio * ef).sum()) ** 2)
    total = (n_new / N) ** 2 / max(n_new, 1) * max(own_var, 0.0)
    # existing strata: draws of other systems landing on the new system's support
    if len(d.src):
        pm_full = np.zeros(P.shape[1])
        pm_full[supp] = pm
        others = d.src != new
        xs, src, f = d.xs[others], d.src[others], d.f[others]
        qx = (np.asarray((P[:, xs].T @ n)).ravel() + n_new * pm_full[xs]) / N
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(qx > 0, pm_full[xs] * f / qx, 0.0)
        m = d.m
        cnt = np.bincount(src, minlength=m).astype(float)
        s1 = np.bincount(src, weights=z, minlength=m)
        s2 = np.bincount(src, weights=z * z, minlength=m)
        with np.errstate(divide="ignore", invalid="ignore"):
            var_j = np.where(cnt > 1, (s2 - s1 ** 2 / np.maximum(cnt, 1)) / np.maximum(cnt - 1, 1), 0.0)
        w = cnt / N
        total += float((w ** 2 / np.maximum(cnt, 1) * var_j).sum())
    return total


def plan_labels(d: Design, new: int, *, target_var: float | None = None, epsilon: float | None = None,
                level: float = 0.90, labelled=None, prior: float | None = None, n_max: int = 5000) -> LabelPlan:
    """Smallest number of own draws for system ``new`` meeting the variance target.

    Give either ``target_var`` or ``epsilon`` (the interval half-width at ``level``).
    ``labelled`` is a per-universe array of known labels (NaN where unknown); by
    default the design's labels. ``prior`` is the precision assumed for unlabelled
    instances (default: the share of correct labels already on the new system's
    support, shrunk towards 0.5 by two pseudo-labels).
    """
    if (target_var is None) == (epsilon is None):
        raise InvalidInputError("target_var, epsilon: give exactly one")
    if target_var is None:
        if not 0 < epsilon < 1:
            raise InvalidInputError(f"epsilon: expected a half-width in (0, 1), got {epsilon!r}")
        target_var = (epsilon / norm.ppf(0.5 + level / 2)) ** 2
    U = d.P.shape[1]
    if labelled is None:
        labelled = np.full(U, np.nan)
        labelled[d.xs] = d.f
    supp = d.P.getrow(new).indices
    known = labelled[supp]
    ok = ~np.isnan(known)
    if prior is None:
        prior = float((np.nansum(known) + 1.0) / (ok.sum() + 2.0))
    if not 0 <= prior <= 1:
        raise InvalidInputError(f"prior: expected a probability, got {prior!r}")

    def var(nn: int) -> float:
        return precision_variance(d, new, nn, labelled, prior)

    lo, hi = 1, 1
    if var(1) > target_var:
        hi = 2
        while var(hi) > target_var and hi < n_max:
            lo, hi = hi, min(hi * 2, n_max)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if var(mid) > target_var:
                lo = mid
            else:
                hi = mid
    n_draws = hi
    pm = d.P.getrow(new).data
    unl = np.isnan(known)
    expected_new = float((1 - (1 - pm[unl]) ** n_draws).sum())
    return LabelPlan(n_draws, expected_new, var(n_draws), float(target_var), prior)


def exhaustive_needed(theta: float, nu: float, var_nu: float, *, epsilon: float, level: float = 0.90) -> float:
    r"""Exhaustively found true instances :math:`n_0` bringing recall's half-width to ``epsilon``.

    From :math:`\mathrm{Var}(\hat r) \approx \theta^2\sigma_\nu^2 + \nu^2\theta(1-\theta)/n_0`;
    ``inf`` when the :math:`\nu` term alone exceeds the target (more precision labels are needed first).
    Divide by the mean number of true instances per document for a number of documents.
    """
    target = (epsilon / norm.ppf(0.5 + level / 2)) ** 2
    rest = target - theta ** 2 * var_nu
    if rest <= 0:
        return float("inf")
    return float(np.ceil(nu ** 2 * theta * (1 - theta) / rest)) if theta * (1 - theta) > 0 else 1.0
