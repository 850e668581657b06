r"""Subset (domain) estimates: precision, recall and F1 of one system within groups of instances.

A *group* is any label of instances: the predicate (relation type), the subject entity's
type, a document genre.  For target system :math:`i` and group :math:`g` the
quantities are conditional versions of the metrics of method.md §1.2:

.. math::

    \pi_i(g) = \mathbb E_{x\sim p_i}[f(x)\mid x\in g]
             = \frac{\sum_x p_i(x)\,1_g(x)\,f(x)}{p_i(g)}, \qquad
    p_i(g) = \sum_x p_i(x)\,1_g(x),

    r_i(g) = \mathbb E_{y\sim p_0}[g_i(y)\mid y\in g] .

At the instance level (:math:`p_i` uniform) :math:`\pi_i(g)` is the share of the system's
instances in :math:`g` that are correct; at other levels it is weighted by :math:`p_i`,
as the overall precision is.

**Precision** (a ratio, or Hájek, estimator).  The numerator and the denominator of
:math:`\pi_i(g)` are both expectations under :math:`p_i`, so the joint estimator
(method.md §2.2) estimates each without bias, with the importance weight of draw
:math:`s` (drawn by system :math:`j(s)` from :math:`p_{j(s)}`)

.. math::

    w_s = \frac{w_{i j(s)}}{n_{j(s)}}\,\frac{p_i(x_s)}{q_i(x_s)}, \qquad
    q_i = \sum_j w_{ij}\,p_j ,

    \hat C_g = \sum_s w_s\,1_g(x_s)\,f_s, \qquad \hat D_g = \sum_s w_s\,1_g(x_s), \qquad
    \hat\pi_i(g) = \frac{\hat C_g}{\hat D_g} .

:math:`p_i(g)` is known, so :math:`\hat C_g / p_i(g)` would be unbiased too, but its
variance carries the random number of draws that fall in :math:`g` (at the instance
level it is the number of correct draws in :math:`g` over :math:`n\,p_i(g)`, not the share
of the draws in :math:`g` that are correct); the ratio cancels it (domain estimation,
Särndal, Swensson & Wretman 1992, §10.3).  Its bias is :math:`O(1/n_g)`.  The joint precision is
the same ratio over all of :math:`X_i` (:func:`.joint.precision_linear`), so when the groups
partition :math:`X_i`

.. math::

    \frac{\sum_g \hat D_g\,\hat\pi_i(g)}{\sum_g \hat D_g} = \hat\pi^{\rm joint}_i ,

the group estimates, weighted by their estimated shares of the mass, give back the overall
joint precision exactly, and a single group containing all of :math:`X_i` is the joint
precision itself (:math:`\hat\pi_i^{\rm simple}` for the simple estimator, :math:`\hat D = 1`).

*Variance* (delta method).  :math:`\hat\pi - \pi \approx (\hat C_g - \pi\hat D_g)/p_i(g)`, so
each draw's influence is :math:`u_s = w_s\,1_g(x_s)\,(f_s - \hat\pi_i(g))/\hat D_g` and, the
draws of each system being i.i.d. (strata :math:`h`, sizes :math:`n_h`),

.. math::

    \widehat{\mathrm{Var}}\,\hat\pi_i(g) = \sum_h \frac{n_h}{n_h-1}
        \sum_{s\in h}\bigl(u_s - \bar u_h\bigr)^2 ,

with the zeros of the draws outside :math:`g` included in each stratum (the number of
draws landing in :math:`g` is random).

**Recall** is estimated from the exhaustive sample :math:`\hat Y_0` alone, weighted by
:math:`v_k = p_0(y_k)/\pi_{d(y_k)}` (Horvitz–Thompson weights, self-normalised) and matched
through ``design.g0`` (the policy of the overall recall):

.. math::

    \hat r_i(g) = \frac{\sum_k v_k\,1_g(y_k)\,g_i(y_k)}{V_g}, \qquad
    T_k = \frac{v_k\,1_g(y_k)\,(g_i(y_k) - \hat r_i(g))}{V_g}, \qquad V_g = \sum_k v_k 1_g(y_k) .

:math:`\hat Y_0` is a sample of documents, and the true instances of one document move together, so the
variance is that of the overall recall's :math:`\hat\theta` (:func:`~.joint._var0`): when the design knows the
documents, the leverage-corrected delete-one-document jackknife of the :math:`T_k` over all :math:`N` sampled
documents (zeros for documents without an instance of :math:`g`), the shares :math:`h_d = \sum_{k\in d}
v_k 1_g(y_k)/V_g`, times Student's :math:`(t_{N-1}/z)^2`; otherwise :math:`\frac{n_0}{n_0-1}\sum_k (T_k -
\bar T)^2`.

This is the simple recall estimator (method.md §2.1) within :math:`g`; the joint
factorisation :math:`\theta\nu` (§2.3) would need the group of every pooled positive draw
under the truth's grouping, which for an entity type is not observed (each system types
its own entities).  Weighted by :math:`V_g = \sum_k v_k 1_g(y_k)` the group recalls give
back the overall simple recall.

**F1** is the harmonic mean of the two point estimates; precision and recall come from
independent samples, so :math:`\mathrm{Var}\,\hat F \approx (\partial_P F)^2\,\mathrm{Var}\,\hat\pi
+ (\partial_R F)^2\,\mathrm{Var}\,\hat r`.

**Intervals** are Wilson score intervals at the effective sample size
:math:`\hat e(1-\hat e)/\widehat{\mathrm{Var}}` (:func:`unpooled.core.estimators.intervals.wilson`, as
for the overall scores); the fallback size is the Kish effective sample size of the
group's weights (precision) and the number of exhaustive true instances in the group
(recall).  F1's is derived from those two (:func:`unpooled.core.estimators.intervals.f1_interval`).

**Too few draws.**  A group's precision rests on :math:`e_P = \bigl(\sum w_s\bigr)^2/\sum w_s^2` effective draws
(with votes, at most the effective number of distinct items: an item's votes count once), its recall on
:math:`e_R = V_g^2/\sum_k v_k^2 1_g(y_k)`, at most the number of documents its true instances come from.  Below
:data:`MIN_EFFECTIVE` the row flags the estimate (``p_few``, ``r_few``; F1 with either) instead of giving an
interval that says nothing (1.000 [0.000, 1.000] from 4 draws) or one that is too short.

References
----------
A. Chaganty, A. Paranjape, P. Liang, C. Manning. Importance sampling for unbiased
on-demand evaluation of knowledge base population. EMNLP 2017 (joint estimator, §3).
C.-E. Särndal, B. Swensson, J. Wretman. Model Assisted Survey Sampling. Springer, 1992
(§10.3, domain estimation; §5.6, ratio estimators and their linearised variance).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError, check_choice
from .finite import count_of
from .intervals import _f1_partials, f1_interval, f1_score, population_size, wilson
from .results import ConfidenceInterval, Estimate
from .joint import (ESTIMATORS, WEIGHTS, Design, WeightDegeneracyWarning, _var0, estimate, strata_var,
                    weight_matrix)
from .terms import complete_targets, importance_ratio

ZERO_DIVISION = ("warn", "nan")
#: the smallest effective sample a group's estimate is shown with: below it the variance behind the interval rests
#: on at most 4 degrees of freedom (Student's t at 4 is 2.13 against the normal 1.645 of a 90% interval, so the
#: interval is 30% or more too short where the variance is estimated, and [0, 1] where it is not), and even a group
#: whose 5 draws are all correct has the 90% Wilson interval [0.65, 1]: fewer draws say nothing a reader can use
MIN_EFFECTIVE = 5.0


class UndefinedEstimateWarning(UserWarning):
    """An estimate is undefined (no draw, or no true instance, in a group): it is NaN."""


@dataclass(frozen=True)
class SubsetScores:
    r"""Precision, recall and F1 of one system per group (arrays of length ``n_groups``).

    NaN where undefined: precision of a group without a weighted draw, recall of a group
    without an exhaustively found true instance, F1 where either is NaN.

    Attributes
    ----------
    target : int
        The system.
    p, r, f1 : Estimate
        Each an :class:`~.results.Estimate` of arrays over the groups: ``value``, ``se`` (delta method),
        ``interval`` (``lo``, ``hi`` at ``confidence``), ``n`` (the group's draws; recall: its true instances) and
        ``method``.
    n_draws : ndarray of int
        Draws in the group with a positive importance weight for the target.
    ess : ndarray
        Kish effective sample size of those weights.
    mass : ndarray
        :math:`p_i(g)`, the known share of :math:`p_i` in the group.
    mass_hat : ndarray
        :math:`\hat D_g`, its estimate from the draws (the weights that give back the
        overall joint precision).
    n_true : ndarray of int
        Exhaustively found true instances in the group.
    true_weight : ndarray
        :math:`V_g = \sum_k v_k 1_g(y_k)`.
    p_ess, r_ess : ndarray
        The effective samples :math:`e_P` and :math:`e_R` behind precision and recall (module documentation).
    """

    target: int
    p: Estimate
    r: Estimate
    f1: Estimate
    n_draws: np.ndarray
    ess: np.ndarray
    mass: np.ndarray
    mass_hat: np.ndarray
    n_true: np.ndarray
    true_weight: np.ndarray
    p_ess: np.ndarray
    r_ess: np.ndarray
    warnings: tuple[str, ...] = field(default=())

    @property
    def method(self) -> str:
        return self.p.method

    @property
    def confidence(self) -> float:
        return self.p.interval.level

    @property
    def n_groups(self) -> int:
        return len(self.p)

    def row(self, g: int) -> dict:
        """Group ``g`` as a JSON-ready dict (NaN becomes None); ``p_few``, ``r_few``, ``f1_few``: the estimate
        rests on fewer than :data:`MIN_EFFECTIVE` effective draws (or true instances)."""
        return self.rows([g])[0]

    def rows(self, groups) -> list[dict]:
        """:meth:`row` of each of ``groups``, each array converted once (a breakdown's table is many rows)."""
        idx = np.asarray(groups, dtype=np.int64)

        def num(a):
            return [None if math.isnan(x) else x for x in np.asarray(a, float)[idx].tolist()]

        cols = {}
        for k in ("p", "r", "f1"):
            e = getattr(self, k)
            cols.update({k: num(e.value), f"{k}_lo": num(e.lo), f"{k}_hi": num(e.hi)})
        cols.update({f"{k}_se": num(getattr(self, k).se) for k in ("p", "r", "f1")})
        cols.update({"n_draws": np.asarray(self.n_draws)[idx].astype(np.int64).tolist(), "ess": num(self.ess),
                     "mass": num(self.mass), "mass_hat": num(self.mass_hat),
                     "n_true": np.asarray(self.n_true)[idx].astype(np.int64).tolist(),
                     "true_weight": num(self.true_weight), "p_ess": num(self.p_ess), "r_ess": num(self.r_ess)})
        p_few = (np.asarray(self.p_ess)[idx] < MIN_EFFECTIVE).tolist()
        r_few = (np.asarray(self.r_ess)[idx] < MIN_EFFECTIVE).tolist()
        cols.update({"p_few": p_few, "r_few": r_few, "f1_few": [a or b for a, b in zip(p_few, r_few)]})
        keys = list(cols)
        return [dict(zip(keys, vals)) for vals in zip(*cols.values())] if len(idx) else []


def _int_groups(name: str, a, n: int) -> np.ndarray:
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name}: expected {n} integer group codes, got {type(a).__name__}") from None
    if arr.shape != (n,):
        raise InvalidInputError(f"{name}: expected shape ({n},) (one group code each, -1 for none), "
                                f"got {arr.shape}")
    if n and not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise InvalidInputError(f"{name}: expected integer group codes (-1 for none), got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if n and arr.min() < -1:
        raise InvalidInputError(f"{name}: group codes must be >= -1 (-1: in no group), got {int(arr.min())}")
    return arr


def _options_iv(design, estimator, weights, confidence, zero_division):
    """The options every job of one call shares, checked: the weights (an array as floats) and the confidence."""
    if not isinstance(design, Design):
        raise InvalidInputError(f"design: expected a Design (make_design), got {type(design).__name__}")
    m = design.m
    check_choice("estimator", estimator, ESTIMATORS)
    if isinstance(weights, str):
        if weights not in WEIGHTS:
            raise InvalidInputError(f"weights: expected one of {', '.join(WEIGHTS)} or an (m, m) row-stochastic "
                                    f"array, got {weights!r}")
    else:
        try:
            Wa = np.asarray(weights, dtype=float)
        except (TypeError, ValueError):
            raise InvalidInputError(f"weights: expected one of {', '.join(WEIGHTS)} or an (m, m) array, "
                                    f"got {type(weights).__name__}") from None
        if Wa.shape != (m, m) or not np.all(np.isfinite(Wa)) or np.any(Wa < 0):
            raise InvalidInputError(f"weights: expected a ({m}, {m}) array of finite non-negative weights, "
                                    f"got shape {Wa.shape}")
        weights = Wa
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    if zero_division not in ZERO_DIVISION and not (isinstance(zero_division, float) and math.isnan(zero_division)):
        raise InvalidInputError(f"zero_division: expected 'warn' or 'nan', got {zero_division!r}")
    return weights, float(confidence)


def _job_iv(design, target, groups_of_universe, groups_of_truth, n_groups) -> tuple:
    """One job (a target and its groups), checked: ``(target, gu, gt, n_groups)``."""
    m, U = design.P.shape
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or not 0 <= target < m:
        raise InvalidInputError(f"target: expected a system index in [0, {m}), got {target!r}")
    gu = _int_groups("groups_of_universe", groups_of_universe, U)
    gt = _int_groups("groups_of_truth", groups_of_truth, design.n0)
    top = max(int(gu.max()) if U else -1, int(gt.max()) if design.n0 else -1) + 1
    if n_groups is None:
        n_groups = top
    elif isinstance(n_groups, bool) or not isinstance(n_groups, (int, np.integer)) or n_groups < top:
        raise InvalidInputError(f"n_groups: expected an integer of at least {top} (the largest group code + 1), "
                                f"got {n_groups!r}")
    if n_groups < 1:
        raise InvalidInputError("groups_of_universe, groups_of_truth: every code is -1, so there is no group")
    return int(target), gu, gt, int(n_groups)


def _group_var(u: np.ndarray, g: np.ndarray, at: np.ndarray, d: Design, G: int) -> np.ndarray:
    r"""Per group, the variance of the sum of the draws' values ``u`` (the draws ``at``, each in group ``g``,
    ``g >= 0``; every other draw 0) under the design (:func:`~.joint.strata_var`): the other draws of each stratum
    count as zeros, so the number of draws landing in a group stays random.  Sparse: the work is the target's draws,
    not groups x draws."""
    ok = g >= 0
    U = sp.csr_matrix((u[ok], (g[ok], at[ok])), shape=(G, len(d.xs)))
    return strata_var(U, d)


def _unseen_share(groups: np.ndarray, cols: np.ndarray, vals: np.ndarray, mass: np.ndarray, drawn) -> np.ndarray:
    """Per group, the share of its mass (``vals`` of the target's instances ``cols`` in ``groups``) no draw reached
    (``drawn``: per universe instance, whether a draw reached it)."""
    unseen = np.bincount(groups, weights=vals * ~drawn[cols], minlength=len(mass))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mass > 0, unseen / np.where(mass > 0, mass, 1), 1.0)


def subset_scores(design: Design, target: int, groups_of_universe, groups_of_truth, *, n_groups: int | None = None,
                  estimator: str = "joint", weights="balance", confidence: float = 0.90,
                  zero_division: str = "warn", votes=None, shared: dict | None = None) -> SubsetScores:
    r"""Precision, recall and F1 of system ``target`` within each group, with intervals.

    Parameters
    ----------
    design : Design
        Draws, labels and the exhaustive sample (:func:`~unpooled.core.estimators.make_design`).
    target : int
        The system :math:`i`.
    groups_of_universe : array_like of int, shape (U,)
        The group of every universe instance *as the target sees it* (e.g. the subject type
        the target gave it), -1 for none.  Only the target's instances matter.
    groups_of_truth : array_like of int, shape (n0,)
        The group of every exhaustively found true instance, -1 for none.
    n_groups : int, optional
        Number of groups (default: the largest code + 1).
    estimator : {'joint', 'simple'}
        ``simple`` uses the target's own draws only (:math:`w_{ij} = [i = j]`).
    weights : {'balance', 'heuristic', 'minvar'} or ndarray, shape (m, m)
        The joint estimator's weight rule, or the weight matrix itself (e.g. ``Scores.weights`` from
        :func:`~unpooled.core.estimators.estimate`: the breakdown then uses the overall estimate's weights).
    confidence : float
        Interval confidence, in (0, 1).
    zero_division : {'warn', 'nan'}
        Undefined estimates are NaN (with NaN bounds); ``warn`` also issues an
        :class:`UndefinedEstimateWarning` naming the groups.
    votes : CrowdVotes, optional
        The answers and the workers' confusions (:mod:`.noisy`): each group's precision is then its mixture
        likelihood's maximiser over the items' votes, with their variance, as
        :func:`~unpooled.core.estimators.estimate` does for the whole system (``design.f`` unused for precision).
    shared : dict, optional
        Kept by the caller across the calls on one ``design`` and ``votes``: their target-free parts computed once.

    Returns
    -------
    SubsetScores

    Raises
    ------
    InvalidInputError
        If an argument is outside what is accepted (the message names it).

    Warns
    -----
    UndefinedEstimateWarning
        With ``zero_division='warn'``, when some group has no weighted draw or no true instance.

    Notes
    -----
    Precision is the ratio estimator
    :math:`\hat\pi_i(g) = \sum_s w_s 1_g(x_s) f_s / \sum_s w_s 1_g(x_s)`, recall the
    Horvitz–Thompson-weighted share of the group's exhaustively found true instances that the
    target matches; the module documentation derives both, their delta-method variances
    and the identities :math:`\sum_g \hat D_g\hat\pi_i(g) = \hat\pi_i^{\rm joint}` and
    :math:`\sum_g V_g \hat r_i(g) / \sum_g V_g = \hat r_i^{\rm simple}`.

    References
    ----------
    Chaganty et al. 2017, EMNLP (joint estimator, eq. for :math:`\hat\pi^{\rm joint}`);
    Särndal, Swensson & Wretman 1992, §10.3.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from unpooled.core.estimators import make_design
    >>> P = sp.csr_matrix(np.full((1, 4), 0.25))
    >>> d = make_design(P, src=[0, 0, 0, 0], xs=[0, 1, 2, 3], f=[1, 0, 1, 1], g0=[[True, False]])
    >>> s = subset_scores(d, 0, [0, 0, 1, 1], [0, 1])
    >>> s.p.value.tolist(), s.r.value.tolist()
    ([0.5, 1.0], [1.0, 0.0])
    """
    weights, confidence = _options_iv(design, estimator, weights, confidence, zero_division)
    job = _job_iv(design, target, groups_of_universe, groups_of_truth, n_groups)
    s, = _scores_of_jobs(design, [job], estimator, weights, confidence, votes, shared)
    if s.warnings and zero_division == "warn":
        warnings.warn("; ".join(s.warnings), UndefinedEstimateWarning, stacklevel=2)
    return s


def subset_scores_many(design: Design, jobs, *, estimator: str = "joint", weights="balance",
                       confidence: float = 0.90, zero_division: str = "warn", votes=None,
                       shared: dict | None = None) -> list[SubsetScores]:
    """:func:`subset_scores` of several jobs on one design at once, the same figures as each alone: ``jobs`` a
    sequence of ``(target, groups_of_universe, groups_of_truth, n_groups)`` (``n_groups`` None: the largest code
    + 1), one :class:`SubsetScores` each, in order.  Every job's groups are rows of one pass: the draws' importance
    weights from one proposal where the targets share it (the balance heuristic), one fit of every group's
    prevalence and one of their refits, one variance of all their sums, one interval search; a breakdown of every
    submission by relation and by type is then a few passes, not two per submission (:mod:`unpooled.service`)."""
    weights, confidence = _options_iv(design, estimator, weights, confidence, zero_division)
    checked = [_job_iv(design, *job) for job in jobs]
    out = _scores_of_jobs(design, checked, estimator, weights, confidence, votes, shared)
    msgs = [m for s in out for m in s.warnings]
    if msgs and zero_division == "warn":
        warnings.warn("; ".join(msgs), UndefinedEstimateWarning, stacklevel=2)
    return out


def _scores_of_jobs(d: Design, jobs: list, estimator, weights, confidence, votes, shared) -> list[SubsetScores]:
    """The checked ``jobs`` (:func:`_job_iv`; options: :func:`_options_iv`) scored: their groups are rows
    ``off[k]:off[k+1]`` of every array."""
    if not jobs:
        return []
    common = _common(d, votes, shared)
    Wn, method = _weight_rows(d, estimator, weights, confidence, common["complete"])
    off = np.concatenate([[0], np.cumsum([G for *_, G in jobs])]).astype(np.int64)
    prec = _group_precision(d, Wn, jobs, off, votes, common)
    p, var_p, ess, fit = prec["p"], prec["var_p"], prec["ess"], prec["fit"]
    r, var_r, n_true, V, r_ess = _group_recall(d, jobs, off, confidence)
    p_ci, p_ess = _precision_interval(p, var_p, ess, prec["unseen"], fit, confidence, prec["size"])
    est = _group_estimates(p, var_p, p_ci, "wilson" if fit is None else "profile", prec["n_draws"], r, var_r, n_true,
                           confidence, method)
    out = []
    for k, (i, *_) in enumerate(jobs):
        sl = slice(int(off[k]), int(off[k + 1]))
        e = [Estimate(x.value[sl], x.se[sl], ConfidenceInterval(x.lo[sl], x.hi[sl], x.interval.level,
                                                                x.interval.method), x.n[sl], x.method) for x in est]
        out.append(SubsetScores(i, *e, prec["n_draws"][sl], ess[sl], prec["mass"][sl], prec["D"][sl], n_true[sl],
                                V[sl], p_ess[sl], r_ess[sl].astype(float), _undefined(p[sl], r[sl], i)))
    return out


def _group_estimates(p, var_p, p_ci, p_kind: str, n_draws, r, var_r, n_true, confidence: float, method: str
                     ) -> list[Estimate]:
    """The groups' P, R and F1 as Estimates: recall's Wilson interval at the group's true instances, F1 (NaN where P
    or R is) with its delta-method variance and the interval derived from P's and R's
    (:func:`.intervals.f1_interval`)."""
    with np.errstate(invalid="ignore"):
        f1 = np.where(np.isnan(p + r), np.nan, f1_score(np.nan_to_num(p), np.nan_to_num(r)))
    dP, dR = _f1_partials(p, r)
    var_f = np.nan_to_num(dP) ** 2 * var_p + np.nan_to_num(dR) ** 2 * var_r
    r_ci = _defined_wilson(r, var_r, n_true.astype(float), confidence)
    f_ci = f1_interval(p, r, p_ci, r_ci, var_p, var_r, var_f)
    se = [np.where(np.isnan(e), np.nan, np.sqrt(v)) for e, v in ((p, var_p), (r, var_r), (f1, var_f))]
    return [Estimate(v, s, ConfidenceInterval(*ci, confidence, kind), n, method)
            for v, s, ci, kind, n in zip((p, r, f1), se, (p_ci, r_ci, f_ci), (p_kind, "wilson", "f1-region"),
                                         (n_draws, n_true, n_draws))]


def _undefined(p, r, i: int) -> tuple[str, ...]:
    """Messages naming the groups whose precision or recall is undefined."""
    msgs = []
    if len(no_p := np.flatnonzero(np.isnan(p))):
        msgs.append(f"precision undefined for groups {no_p.tolist()[:10]}: no draw with weight for system {i}")
    if len(no_r := np.flatnonzero(np.isnan(r))):
        msgs.append(f"recall undefined for groups {no_r.tolist()[:10]}: no exhaustively found true instance")
    return tuple(msgs)


def _weight_rows(d: Design, estimator: str, weights, confidence: float, complete: np.ndarray
                 ) -> tuple[np.ndarray, str]:
    r"""The joint estimator's weight rows :math:`w_{i\cdot}` of every target (each normalised; a system drawn
    completely its own, as the headline's precision: :func:`~.terms.complete_targets`) and the method's name."""
    m = d.m
    if estimator == "simple":
        W, method = np.eye(m), "simple"
    elif isinstance(weights, np.ndarray):
        W, method = weights, "joint-given"
    elif weights == "minvar":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeightDegeneracyWarning)
            W = estimate(d, estimator="joint", weights="minvar", confidence=confidence).weights
        method = "joint-minvar"
    else:
        W, method = weight_matrix(d.P, d.n, weights), f"joint-{weights}"
    Wn = np.array(W, dtype=float)
    for i in range(m):
        s = Wn[i].sum()
        if s > 0:
            Wn[i] = Wn[i] / s
    Wn[complete] = np.eye(m)[complete]
    return Wn, method


def _draw_weights(d: Design, Wn: np.ndarray, targets, common: dict) -> dict:
    r"""Per target: the draws of its instances (``at``, in draw order) and, at them, :math:`p_i`, the importance
    ratios (:func:`~.terms.importance_ratio`, of the proposal :math:`q_i`) and the importance weights (the ratios
    times :math:`p_i`).  :math:`q_i` at every draw is one product when the targets' weight rows are equal (the
    balance heuristic's single proposal), the same sums as each target's own."""
    Px, Pc, complete = common["Px"], common["Pc"], common["complete"]
    live = [i for i in targets if not complete[i]]
    one = bool(live) and bool(np.all(Wn[live] == Wn[live[0]]))
    q_all = Pc.T @ Wn[live[0]] if one and len(d.xs) else None
    out = {}
    for i in targets:
        at, pi_x = Px.indices[Px.indptr[i]:Px.indptr[i + 1]], Px.data[Px.indptr[i]:Px.indptr[i + 1]]
        if complete[i]:
            q_x = pi_x  # its own draws alone: q_i = p_i
        elif q_all is not None:
            q_x = q_all[at]
        else:
            q_x = Pc[:, at].T @ Wn[i] if len(at) else np.zeros(0)
        src = d.src[at]
        ratio = importance_ratio(Wn[i, src], d.units.factor[at], d.n[src], q_x)
        out[i] = (at, d.xs[at], pi_x, ratio, ratio * pi_x)
    return out


def _draw_rows(d: Design, Wn: np.ndarray, jobs: list, off: np.ndarray, common: dict) -> dict:
    """Every job's draws (:func:`_draw_weights` of its target) one after the other, each with its group's row
    (``row``: the job's offset plus its group; -1 without weight or group)."""
    per = _draw_weights(d, Wn, sorted({i for i, *_ in jobs}), common)
    cols = ("at", "xs", "pi_x", "ratio", "w")
    parts: dict[str, list] = {k: [] for k in (*cols, "row")}
    for k, (i, gu, _, _) in enumerate(jobs):
        for name, a in zip(cols, per[i]):
            parts[name].append(a)
        g = np.where(per[i][4] > 0, gu[per[i][1]], -1)
        parts["row"].append(np.where(g >= 0, g + off[k], -1))
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}


def _group_precision(d: Design, Wn: np.ndarray, jobs: list, off: np.ndarray, votes, common: dict) -> dict:
    """Per group of every job: the ratio estimator of precision (or the votes' one) and its variance, the draws'
    effective size, the group's known mass :math:`p_i(g)` and the share of it no draw reached (module docs).  Only
    the draws of each target's instances weigh (:math:`p_i(x_s) > 0`): the work is theirs (``common``:
    :func:`_common`)."""
    R = int(off[-1])
    el = _draw_rows(d, Wn, jobs, off, common)
    row, at, w = el["row"].astype(np.int64), el["at"].astype(np.int64), el["w"]
    ok = row >= 0
    C = np.bincount(row[ok], weights=(w * d.f[at])[ok], minlength=R)
    D = np.bincount(row[ok], weights=w[ok], minlength=R)
    D2 = np.bincount(row[ok], weights=w[ok] ** 2, minlength=R)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(D > 0, C / np.where(D > 0, D, 1), np.nan)
        ess = np.where(D2 > 0, D ** 2 / np.where(D2 > 0, D2, 1), 0.0)
    fit = None
    if votes is not None:
        p, var_p, fit = _group_precision_from_votes(d, votes, el, row, at, ok, D, R, _items(common))
    else:
        pg = np.where(ok, np.nan_to_num(p)[np.maximum(row, 0)], 0.0)
        Dg = np.where(ok, D[np.maximum(row, 0)], 1.0)
        u = np.where(ok, w * (d.f[at] - pg) / np.where(Dg > 0, Dg, 1), 0.0)
        var_p = _group_var(u, row, at, d, R)
    mass, unseen, size = _group_masses(d, jobs, common["drawn"])
    return dict(p=p, var_p=var_p, ess=ess, fit=fit, D=D, mass=mass, unseen=unseen, size=size,
                n_draws=np.bincount(row[ok], minlength=R))


def _group_masses(d: Design, jobs: list, drawn: np.ndarray):
    """Per group of every job: the target's known mass in it, the share of that no draw reached (``drawn``: per
    universe instance) and its instances (:func:`.finite.count_of`)."""
    mass, unseen, size = [], [], []
    rows = {}
    for i, gu, _, G in jobs:
        if i not in rows:
            Pi = d.P.getrow(i)
            rows[i] = Pi.indices, Pi.data
        cols, vals = rows[i]
        gc = gu[cols]
        inside = gc >= 0
        m_g = np.bincount(gc[inside], weights=vals[inside], minlength=G)
        mass.append(m_g)
        unseen.append(_unseen_share(gc[inside], cols[inside], vals[inside], m_g, drawn))
        size.append(count_of(m_g, np.bincount(gc[inside], weights=vals[inside] ** 2, minlength=G)))
    return np.concatenate(mass), np.concatenate(unseen), np.concatenate(size)


def _group_recall(d: Design, jobs: list, off: np.ndarray, confidence: float):
    """Per group of every job: recall from the exhaustive sample, its variance (documents as clusters), the true
    instances, the weighted size :math:`V_g` and recall's effective sample (Kish's, at most the group's
    documents)."""
    R = int(off[-1])
    parts = [(np.flatnonzero(gt >= 0), gt, i, k) for k, (i, _, gt, _) in enumerate(jobs)]
    ys = np.concatenate([oc for oc, *_ in parts]).astype(np.int64)
    rows = np.concatenate([gt[oc] + off[k] for oc, gt, _, k in parts]).astype(np.int64)
    gi = np.concatenate([d.g0[i, oc] for oc, _, i, _ in parts]).astype(float)
    v = d.v0[ys]
    V = np.bincount(rows, weights=v, minlength=R)
    A = np.bincount(rows, weights=v * gi, minlength=R)
    n_true = np.bincount(rows, minlength=R)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(V > 0, A / np.where(V > 0, V, 1), np.nan)
    rk = np.nan_to_num(r)[rows]
    Vk = V[rows]
    Vk = np.where(Vk > 0, Vk, 1.0)
    # one row per group: its linearised values and its shares of V_g, zero outside the group (sparse: a group holds
    # few of the exhaustive instances)
    Tg = sp.csr_matrix((v * (gi - rk) / Vk, (rows, ys)), shape=(R, d.n0))
    Hg = sp.csr_matrix((v / Vk, (rows, ys)), shape=(R, d.n0))
    var_r = np.maximum(_var0(Tg, d, confidence, shares=Hg), 0.0) if d.n0 >= 2 else np.zeros(R)
    with np.errstate(divide="ignore", invalid="ignore"):
        r_ess = np.nan_to_num(V ** 2 / np.bincount(rows, weights=v ** 2, minlength=R))
    if d.y0_groups is not None and d.n0:
        n_docs = int(d.y0_groups.max()) + 1
        pairs = np.unique(rows * n_docs + d.y0_groups[ys])  # distinct (group, document)
        r_ess = np.minimum(r_ess, np.bincount(pairs // n_docs, minlength=R))
    return r, var_r, n_true, V, r_ess


def _defined_wilson(est, var, n_eff, confidence: float):
    """Wilson bounds where ``est`` is defined, NaN elsewhere."""
    defined = ~np.isnan(est)
    lo, hi = wilson(np.nan_to_num(est), var, confidence, np.maximum(n_eff, 1.0))
    return np.where(defined, lo, np.nan), np.where(defined, hi, np.nan)


def _precision_interval(p, var_p, ess, unseen, fit, confidence: float, size=None):
    """The groups' precision intervals and effective sizes: Wilson at the draws' effective size, whose unseen share
    of the mass (of ``size`` instances) makes a group every instance of which was drawn exact
    (:func:`.intervals.population_size`); from the votes, the likelihood's interval
    (:func:`.noisy.precision_interval`)."""
    if fit is None:
        return _defined_wilson(p, var_p, population_size(ess, var_p, unseen, size), confidence), ess
    from .noisy import precision_interval

    Mg, lam, J, items_eff = fit
    p_ess = np.minimum(ess, items_eff)
    lo, hi = precision_interval(Mg, lam, np.nan_to_num(p), J, var_p, confidence, np.maximum(p_ess, 1.0))
    defined = ~np.isnan(p)
    return (np.where(defined, lo, np.nan), np.where(defined, hi, np.nan)), p_ess


def _common(d: Design, votes, shared: dict | None) -> dict:
    """What every target's groups share on one design and votes, kept in ``shared`` (for this design and votes
    only; a new dict when None): the design's probabilities at the draws (``Px``: targets x draws, csr, and ``Pc``,
    csc), which targets' draws reached all their instances (``complete``, :func:`~.terms.complete_targets`), which
    universe instances a draw reached (``drawn``); with ``votes`` the rest on first use (:func:`_items`)."""
    shared = {} if shared is None else shared
    if shared.get("of") is None or shared["of"][0] is not d or shared["of"][1] is not votes:
        shared.clear()
        Px = d.P.tocsc()[:, d.xs].tocsr() if len(d.xs) else sp.csr_matrix((d.m, 0))  # (through columns: sorted)
        Px.sort_indices()
        drawn = np.zeros(d.P.shape[1], bool)
        drawn[d.xs] = True
        shared.update({"of": (d, votes), "Px": Px, "Pc": Px.tocsc(), "complete": complete_targets(d),
                       "drawn": drawn, "votes": votes, "design": d})
    return shared


def _items(common: dict) -> dict:
    """What the votes' precision of every target and grouping shares (``common``: :func:`_common`): the drawn items
    (``codes``, ``inv``), their log ratios (``lam``; under the confusions' replicates ``lam_rep``), which of them
    merge (``merge``, ``merge_rep``: :func:`.noisy.item_merge`) and their vote patterns (``patterns``), each
    computed when first needed."""
    from .noisy import item_log_lr, item_merge

    d, votes = common["design"], common["votes"]
    if "codes" not in common:
        codes, inv = np.unique(d.xs, return_inverse=True)
        lam = item_log_lr(votes, d.P.shape[1], items=codes)
        common.update(codes=codes, inv=inv, lam=lam, merge=item_merge(lam))
    if "lam_rep" not in common and votes.replicates > 1:
        common["lam_rep"] = item_log_lr(votes, d.P.shape[1], votes.sens_rep, votes.fpr_rep, items=common["codes"])
        common["merge_rep"] = item_merge(common["lam_rep"])
    return common


def _group_precision_from_votes(d, votes, el: dict, row, at, ok, D, R: int, items: dict):
    """Per group of every job: precision from the votes (:func:`.noisy.prevalence` with the group's importance
    weights per item), its variance (draws + votes + confusions, :mod:`.noisy`), and what its interval needs
    (``items``: :func:`_items`).  ``el``: the jobs' draws (:func:`_draw_rows`); the (group, item) pairs are a
    sparse matrix over all the drawn items, fitted at once."""
    from .noisy import kappa, posterior, prevalence
    from .vote_variance import vote_patterns, vote_variance

    w = el["w"]
    inv_at = items["inv"][at]
    K = len(items["codes"])
    pairs, pair_of = np.unique(row[ok] * K + inv_at[ok], return_inverse=True)  # (group, item), by group then item
    pair_of = pair_of.reshape(-1)
    prow, pcol = pairs // K, pairs % K
    Mg = sp.csr_matrix((np.bincount(pair_of, weights=w[ok], minlength=len(pairs)), (prow, pcol)), shape=(R, K))
    rho, J = prevalence(Mg, items["lam"], merge=items["merge"])
    p = np.where(D > 0, rho, np.nan)
    p0 = np.nan_to_num(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        invJ = np.where(J > 0, 1.0 / np.where(J > 0, J, 1.0), 0.0)
    gs = np.maximum(row, 0)
    k_s = np.nan_to_num(kappa(items["lam"][inv_at], p0[gs]), posinf=0.0, neginf=0.0)
    u = np.where(ok, w * k_s * invJ[gs], 0.0)
    var_p = _group_var(u, row, at, d, R)
    # the votes: pairs (group, item), weighted by the importance ratio, gamma = p_i(item) / J_g
    ratio_sum = np.bincount(pair_of, weights=el["ratio"][ok], minlength=len(pairs))
    p_item = np.zeros(len(pairs))
    p_item[pair_of] = el["pi_x"][ok]
    if len(pairs):
        if "patterns" not in items:
            items["patterns"] = vote_patterns(votes, items["codes"])
        post = posterior(items["lam"][pcol], p0[prow])
        vp, *_ = vote_variance(items["patterns"], R, prow, pcol, p_item * invJ[prow], p0, np.zeros(len(pairs)),
                               np.zeros(R), post, post, ratio_sum)
        var_p = var_p + vp
    if votes.replicates > 1:  # the confusions: the spread of the prevalences refitted under their replicates
        rho_rep, _ = prevalence(Mg, items["lam_rep"], start=rho, merge=items["merge_rep"])
        var_p = var_p + np.var(np.nan_to_num(rho_rep), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        items_eff = np.nan_to_num(np.bincount(prow, weights=Mg.data, minlength=R) ** 2
                                  / np.bincount(prow, weights=Mg.data ** 2, minlength=R))
    return p, var_p, (Mg, items["lam"], J, items_eff)


__all__ = ["MIN_EFFECTIVE", "SubsetScores", "UndefinedEstimateWarning", "ZERO_DIVISION", "subset_scores",
           "subset_scores_many"]
