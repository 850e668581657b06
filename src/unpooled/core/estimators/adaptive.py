r"""How many new labels a new system needs, given every label already collected (method.md §2.7).

For a new system :math:`m` with known :math:`p_m` and :math:`n` own draws to come,
the balance-heuristic proposal is
:math:`q(x) = \big(\sum_{j\ne m} n_j p_j(x) + n\,p_m(x)\big)/(N+n)`, a draw of :math:`x` weighs
:math:`W(x) = p_m(x)/((N+n)\,q(x))`, and the precision published is the ratio
:math:`\hat\pi_m = \sum_s W_s f_s / \sum_s W_s` (:func:`.joint.precision_linear`).  Its variance is that of its
linear part :math:`u_s = W_s (f_s - \hat\pi_m)/\sum_s W_s`:

.. math::

    \mathrm{Var}(\hat\pi_m)(n) = \sum_{j\ne m} n_j\,\sigma_j^2(n) + n\,\sigma_m^2(n),

where :math:`\sigma_j^2` is the sample variance of :math:`u` over the existing draws of system :math:`j` (their
labels are known) and :math:`\sigma_m^2` the variance of one own draw's :math:`u`: an instance :math:`x` drawn
with probability :math:`p_m(x)`, its label where :math:`x` is already labelled and, elsewhere, a Bernoulli label
with precision :math:`\rho` (``prior``, :func:`unlabelled_prior`).  :math:`\hat\pi_m` and :math:`\sum_s W_s` are
the plan's: the other draws' weights and labels beside the own draws' expected ones (:func:`_plan_terms`); the
linear part is :func:`.joint.precision_linear`'s, the one the published interval takes.  A lone system gets
:math:`\rho(1-\rho)/n`.  (Before the ratio the plan took the sum's variance, of :math:`p_m f/q`: it carried the
spread of the weights even where every label is known, 779 draws where the ratio needs one in
``test_the_plan_is_the_ratios_variance_not_the_sums``.)  Unlike the paper's bound (:math:`f \equiv 1`, mean term
dropped) this is not conservative by construction, but it does not ask for labels the evidence already provides
(``unpooled simulate adaptive`` measures it: the estimates' squared error is about 0.75 of the plan's variance,
the plan treating draws as independent where the estimate counts distinct instances, :mod:`.finite`).  The
smallest :math:`n \ge 1` (:math:`n\ge1` keeps :math:`w_m>0`) with variance at most the target is found by
bisection (the variance decreases in :math:`n`).

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
from .joint import Design, precision_linear
from .rows import Rows


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
    r"""Predicted :math:`\mathrm{Var}(\hat\pi_{new})` with ``n_new`` own draws (balance weights): the variance of
    the ratio's linear part (:func:`.joint.precision_linear`) over the other systems' draws (their sample variance
    per stratum) and over one own draw's outcomes (exactly, under the labels known and the ``prior``)."""
    W, f, strata, mass = _plan_terms(d, new, n_new, labelled, prior)
    _, lin = precision_linear(Rows.of(np.atleast_2d(W * f)), Rows.of(np.atleast_2d(W)))
    v = lin.draws.toarray().ravel() * lin.draw_scale[0]  # (C - p W) / sum W, per column
    own = strata < 0
    total = 0.0
    if own.any():  # n_new draws of one outcome each: a draw at outcome u adds v_u / (n_new mass_u)
        a = v[own] / (n_new * mass[own])
        total += n_new * max(float((mass[own] * a * a).sum() - (mass[own] * a).sum() ** 2), 0.0)
    if (~own).any():  # each other system's draws: their count times their sample variance
        src, z = strata[~own], v[~own]
        cnt = np.bincount(src, minlength=d.m).astype(float)
        s1 = np.bincount(src, weights=z, minlength=d.m)
        s2 = np.bincount(src, weights=z * z, minlength=d.m)
        with np.errstate(divide="ignore", invalid="ignore"):
            var_j = np.where(cnt > 1, (s2 - s1 ** 2 / np.maximum(cnt, 1)) / np.maximum(cnt - 1, 1), 0.0)
        total += float((cnt * var_j).sum())
    return total


def _plan_terms(d: Design, new: int, n_new: int, labelled, prior: float):
    r"""The columns of system ``new``'s precision terms under a plan of ``n_new`` own draws: ``(W, f, strata,
    mass)``.  The other systems' draws (``strata`` their system) with their weights :math:`p_m(x)/(N q(x))` and
    labels; then one own draw's outcomes (``strata`` -1, probability ``mass``): an instance of :math:`p_m`'s
    support with its known label, or, unlabelled, correct (probability ``prior``) and false, each weighing its
    expected share :math:`n_{new}\,\text{mass}\,p_m(x)/(N q(x))` of the weights' total."""
    P = d.P
    n = d.n.astype(float)
    n[new] = 0.0
    N = n.sum() + n_new
    row = P.getrow(new)
    supp, pm = row.indices, row.data
    pm_full = np.zeros(P.shape[1])
    pm_full[supp] = pm
    others = d.src != new
    xs = d.xs[others]
    x_all = np.r_[xs, supp]
    q = (np.asarray(P[:, x_all].T @ n).ravel() + n_new * pm_full[x_all]) / N
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 0, pm_full[x_all] / (N * q), 0.0)
    r_oth, r_own = ratio[:len(xs)], ratio[len(xs):]
    fx = np.asarray(labelled, dtype=float)[supp]
    known = ~np.isnan(fx)
    mass = np.r_[pm[known], pm[~known] * prior, pm[~known] * (1 - prior)]
    keep = (mass > 0) & (n_new > 0)  # no own draw: no own outcome
    r_own = np.r_[r_own[known], r_own[~known], r_own[~known]]
    f_own = np.r_[fx[known], np.ones((~known).sum()), np.zeros((~known).sum())]
    W = np.r_[r_oth, (n_new * mass * r_own)[keep]]
    f = np.r_[d.f[others], f_own[keep]]
    strata = np.r_[d.src[others], np.full(int(keep.sum()), -1)]
    return W, f, strata, np.r_[np.zeros(len(xs)), mass[keep]]


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

    def short(nn: int) -> bool:  # the variance above the target (beyond rounding)
        return var(nn) > target_var * (1 + 1e-9)

    lo, hi = 1, 1
    if short(1):
        hi = 2
        while short(hi) and hi < n_max:
            lo, hi = hi, min(hi * 2, n_max)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if short(mid):
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
