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
label with precision :math:`\rho` (``prior``, :func:`unlabelled_prior`). Unlike the
paper's bound (:math:`f \equiv 1`, mean term dropped) this is not conservative by
construction, but it does not ask for labels the evidence already provides. The
smallest :math:`n \ge 1` (:math:`n\ge1` keeps :math:`w_m>0`, so the estimate stays
unbiased) with variance at most the target is found by bisection (the variance
decreases in :math:`n`).

**The precision where nothing is labelled.**  The labelled part of a new system's
support is what earlier systems drew, and instances several systems output are
more often correct than a system's own: the share of correct labels there
overstates :math:`\rho` (on the paper's set-up, 0.96 against a true 0.57).  So
:math:`\rho` is learnt from the system's *own* draws that landed where no other
system drew, a :math:`p_m`-weighted sample of the part the others left
unlabelled: :math:`\hat\rho = (k + 1)/(n + 2)` for :math:`k` correct of :math:`n`
such draws, and :math:`\hat\rho = 1/2` before any.

**Sequential sizing** (:func:`next_draws`).  Before its own labels the plan rests on
:math:`\hat\rho = 1/2`; a pilot of half the planned draws is labelled, the plan is
made again with the learnt :math:`\hat\rho` (and, with ``own``, the target
:math:`\hat\pi_m(1-\hat\pi_m)/n_{\rm own}`, the variance of ``own`` own draws, at the
predicted precision :math:`\hat\pi_m=\sum_x p_m(x)\,\mathbb E[f(x)]`), and the rest is
drawn; at most ``rounds`` rounds.  Stopping depends on the labels only through
:math:`\hat\rho` and :math:`\hat\pi_m`; ``unpooled simulate adaptive`` measures the
coverage of the intervals after stopping.

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
    prior: float  # precision assumed where nothing is labelled
    precision: float = float("nan")  # predicted precision sum_x p_m(x) E[f(x)]

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


def unlabelled_prior(d: Design, new: int) -> float:
    r"""Precision :math:`\hat\rho` of system ``new`` where its support has no label yet.

    ``(k + 1) / (n + 2)`` for the ``n`` own draws of ``new`` that landed on instances no
    other system of the design drew, ``k`` of them correct; 0.5 when there are none.
    Labels may be fractional (a share of votes); they are clipped to [0, 1].
    """
    own = d.src == new
    if not own.any():
        return 0.5
    xo, fo = d.xs[own], np.clip(d.f[own], 0.0, 1.0)
    alone = ~np.isin(xo, d.xs[~own])
    return float((fo[alone].sum() + 1.0) / (alone.sum() + 2.0))


def plan_labels(d: Design, new: int, *, target_var: float | None = None, epsilon: float | None = None,
                own: int | None = None, confidence: float = 0.90, labelled=None, prior: float | None = None,
                n_max: int = 5000) -> LabelPlan:
    r"""Smallest number of own draws for system ``new`` meeting the variance target.

    Give exactly one target: ``target_var``; ``epsilon``, the interval half-width at
    ``confidence``; or ``own``, the variance of ``own`` own draws at the predicted
    precision, :math:`\hat\pi(1-\hat\pi)/{\rm own}` (the paper's set-up).
    ``labelled`` is a per-universe array of known labels (NaN where unknown); by
    default the design's labels. ``prior`` is the precision assumed for unlabelled
    instances (default: :func:`unlabelled_prior`). The draws of ``new`` already in the
    design count towards the plan's ``draws``.
    """
    if sum(x is not None for x in (target_var, epsilon, own)) != 1:
        raise InvalidInputError("target_var, epsilon, own: give exactly one")
    if epsilon is not None and not 0 < epsilon < 1:
        raise InvalidInputError(f"epsilon: expected a half-width in (0, 1), got {epsilon!r}")
    if own is not None and (isinstance(own, bool) or not isinstance(own, (int, np.integer)) or own < 1):
        raise InvalidInputError(f"own: expected a positive number of draws, got {own!r}")
    U = d.P.shape[1]
    if labelled is None:
        labelled = np.full(U, np.nan)
        labelled[d.xs] = np.clip(d.f, 0.0, 1.0)
    row = d.P.getrow(new)
    supp, pm = row.indices, row.data
    known = labelled[supp]
    if prior is None:
        prior = unlabelled_prior(d, new)
    if not 0 <= prior <= 1:
        raise InvalidInputError(f"prior: expected a probability, got {prior!r}")
    precision = float((pm * np.where(np.isnan(known), prior, known)).sum() / max(pm.sum(), 1e-300))
    if epsilon is not None:
        target_var = (epsilon / norm.ppf(0.5 + confidence / 2)) ** 2
    elif own is not None:
        target_var = max(precision * (1 - precision), 1e-6) / own

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
    unl = np.isnan(known)
    expected_new = float((1 - (1 - pm[unl]) ** n_draws).sum())
    return LabelPlan(n_draws, expected_new, var(n_draws), float(target_var), float(prior), precision)


def next_draws(d: Design, new: int, *, rounds_left: int, pilot: float = 0.5, **plan) -> tuple[int, LabelPlan]:
    """How many more own draws system ``new`` needs now (sequential sizing, module docstring).

    The plan (:func:`plan_labels` with ``plan``'s arguments) minus the draws of ``new``
    already in ``d``; before any own draw, and with more rounds to come, only the
    ``pilot`` share of it (rounded up), so that the rest is planned with the pilot's
    labels. ``rounds_left``: rounds still allowed, this one included (the last round
    takes all that is missing). Returns ``(draws, plan)``; 0 when the target is met.
    """
    if rounds_left < 1:
        raise InvalidInputError(f"rounds_left: expected at least 1, got {rounds_left!r}")
    if not 0 < pilot <= 1:
        raise InvalidInputError(f"pilot: expected a share in (0, 1], got {pilot!r}")
    p = plan_labels(d, new, **plan)
    have = int(np.count_nonzero(d.src == new))
    more = max(p.draws - have, 0)
    if more and have == 0 and rounds_left > 1:
        more = int(np.ceil(more * pilot))
    return more, p


def exhaustive_needed(theta: float, nu: float, var_nu: float, *, epsilon: float, confidence: float = 0.90) -> float:
    r"""Exhaustively found true instances :math:`n_0` bringing recall's half-width to ``epsilon``.

    From :math:`\mathrm{Var}(\hat r) \approx \theta^2\sigma_\nu^2 + \nu^2\theta(1-\theta)/n_0`;
    ``inf`` when the :math:`\nu` term alone exceeds the target (more precision labels are needed first).
    Divide by the mean number of true instances per document for a number of documents.
    """
    target = (epsilon / norm.ppf(0.5 + confidence / 2)) ** 2
    rest = target - theta ** 2 * var_nu
    if rest <= 0:
        return float("inf")
    return float(np.ceil(nu ** 2 * theta * (1 - theta) / rest)) if theta * (1 - theta) > 0 else 1.0
