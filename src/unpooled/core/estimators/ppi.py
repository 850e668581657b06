r"""Prediction-powered precision: the submitted confidences as control variates, power-tuned (PPI++).

Every submitted instance carries a confidence :math:`c_i(x) \in (0, 1]` (1 when the submission gives none).  It is
known for every instance a system holds, labelled or not, so its mean under the system's sampling distribution is
known exactly,

.. math::

    \mu_i = \sum_x p_i(x)\, c_i(x),

and the draws that estimate precision estimate it too.  Where confidence and correctness go together, the error of
that second estimate predicts the error of the first, and subtracting it (a control variate, a regression
estimator) narrows the interval at no cost in labels.

**The estimator.**  Precision is the self-normalised ratio of per-draw importance-weighted terms (:mod:`.joint`,
:func:`.joint.precision_linear`), :math:`\hat\pi_i = \sum_s \omega_{is} f(x_s) / \sum_s \omega_{is}`,
:math:`\omega_{is} = r_s\,\frac{w_{i,j(s)}/n_{j(s)}}{q_i(x_s)}\,p_i(x_s)` (:math:`r_s` the distinct-instance factor of
:mod:`.finite`; :math:`\omega_{is} = 0` where the system does not hold the drawn instance).  With the centred
confidence :math:`h_i(x) = c_i(x) - \mu_i` (0 off the system's instances),

.. math::

    \hat g_i = \sum_s \omega_{is}\, h_i(x_s), \qquad E\,\hat g_i = \sum_x p_i(x)\, h_i(x) = 0, \qquad
    \hat\pi_i^{\rm PPI} = \hat\pi_i - \lambda_i\, \hat g_i ,

which adds no bias to :math:`\hat\pi_i` for any fixed :math:`\lambda_i` (the draws of all systems are shared
through the same weights, so this is the joint, multi-system version; one system with its own draws has
:math:`\omega_{is} = 1/n`; :math:`\hat g_i = \sum_s\omega_{is}\cdot(\sum_s \omega_{is} h_i / \sum_s\omega_{is})`, its own
self-normalised version to first order, as :math:`h_i` is centred).  Its variance is a quadratic form in
:math:`\lambda_i`,

.. math::

    V_i(\lambda) = V(L_i) - 2\lambda\,\mathrm{Cov}(L_i, G_i) + \lambda^2 V(G_i), \qquad
    \hat\lambda_i = \frac{\widehat{\mathrm{Cov}}(L_i, G_i)}{\widehat V(G_i)},

with :math:`L_{is} = \omega_{is}(f(x_s) - \hat\pi_i)/\sum_s\omega_{is}` (the precision's linear part) and
:math:`G_{is} = \omega_{is} h_i(x_s)` the per-draw rows and every (co)variance the stratified, distinct-instance,
finite-population estimate of :func:`.joint.strata_var` (the one variance of the estimators):
:math:`\widehat{\mathrm{Cov}} = \tfrac14[\widehat V(L+G) - \widehat V(L-G)]` by polarisation, and the estimate's
variance is :math:`\widehat V(L - \hat\lambda G)`, the same function on the combined rows, which is at most
:math:`\widehat V(L)` (the quadratic form's minimum; PPI++'s power tuning).  For the
mean of one simple random sample :math:`\hat\lambda` is PPI++'s
:math:`\mathrm{Cov}(Y, \hat f)/((1 + n/N)\,\mathrm{Var}(\hat f))` with :math:`N \to \infty` (the confidences of the
whole output are known, not sampled), Angelopoulos, Duchi and Zrnic 2023, Example 6.1.  Unlike ``ppi_py`` the
coefficient is not clipped to [0, 1]: a confidence that runs against correctness is as informative as one that runs
with it, and compressed confidences (all in [0.5, 0.55]) need a coefficient above 1.

**Intervals.**  Wilson's interval of :mod:`.joint` at the effective sample size
:math:`\hat\pi(1-\hat\pi)/\widehat V`, with the same fallback size.  Wilson's width depends on the estimate as well
as on the variance, so where the tuned interval would come out wider than the label-only one (the estimate moved
towards 0.5 more than the variance fell), :math:`\lambda_i = 0`: the interval is never wider than labels alone.

**Few draws.**  The coefficient is fitted on the same draws, and the plug-in variance at the fitted optimum is
optimistic by :math:`O(1/n)`: with about 15 distinct labelled instances (a 30-instance system, 20 draws) the
tuned 90% interval held the truth 0.86-0.885 of the time where labels alone held it 0.90-0.93, with
uninformative confidences too (``unpooled simulate ppi``, 200 trials).  So a system whose precision weights have
fewer than :data:`MIN_ESS` effective draws (Kish's) keeps labels alone.  At that threshold the tuned intervals'
coverage stayed within 0.01 of the label-only ones' wherever those cover; where they do not (ten partly
overlapping systems of precision 0.95: the joint estimate itself held 0.55-0.73 while it was an unnormalised sum,
0.88-0.93 as the self-normalised ratio with the finite population's fallback size), up to 0.04 below them
(0.01 with the ratio).

The label-only estimate, a weighted mean of the labels, stays in [0, 1] with them; the PPI estimate may leave it with few draws
(the interval stays inside; those who publish clip it).

**Reductions.**  A system whose confidences are all equal has :math:`h_i \equiv 0`: :math:`\lambda_i = 0` and the
estimate, its variance and interval are exactly the label-only ones.  The centring matters in the joint design:
an uncentred constant confidence :math:`c` would subtract :math:`\lambda c(\sum_s \omega_{is} - 1)`, the variation
of the weights' total that the self-normalised precision has already taken out, not the confidences' information.

References
----------
A. N. Angelopoulos, J. C. Duchi, T. Zrnic. PPI++: Efficient prediction-powered inference. arXiv:2311.01453, 2023.
A. N. Angelopoulos, S. Bates, C. Fannjiang, M. I. Jordan, T. Zrnic. Prediction-powered inference. *Science*
382(6671):669-674, 2023.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from .finite import population_count, unseen_mass
from .intervals import population_size, wilson
from .joint import Design, _terms, precision_linear, strata_var, weight_matrix
from .results import Estimate
from .rows import Rows, scale

METHOD = "ppi++"
#: the method of the label-only estimate beside it (the joint estimator's self-normalised precision)
METHOD_LABELS = "labels"
#: fewest effective draws (Kish's, of the system's precision weights) for the power tuning; below, labels alone
MIN_ESS = 40.0


@dataclass(frozen=True)
class PPIPrecision:
    """Prediction-powered precision of every system beside the label-only estimate from the same draws and weights:
    two :class:`~.results.Estimate` of arrays of length m, each with Wilson's interval and ``n`` the draws'
    effective size.

    Attributes
    ----------
    p : the PPI++ estimate (method :data:`METHOD`).
    labels : the label-only estimate, the joint estimator's precision (method :data:`METHOD_LABELS`).
    lam : the power-tuning coefficient :math:`\\lambda_i` (0: labels alone).
    conf_mean : :math:`\\mu_i`, the known mean confidence of the system's output under :math:`p_i`.
    conf_draws : its estimate from the draws, :math:`\\mu_i + \\hat g_i`.
    """

    p: Estimate
    labels: Estimate
    lam: np.ndarray
    conf_mean: np.ndarray
    conf_draws: np.ndarray

    def row(self, i: int) -> dict:
        """System ``i``'s figures: ``p_ppi``, ``p_ppi_lo``, ``p_ppi_hi``, ``p_ppi_se``, ``ppi_lambda``,
        ``conf_mean`` (plain floats)."""
        e = self.p[i]
        return {"p_ppi": e.value, "p_ppi_lo": e.lo, "p_ppi_hi": e.hi, "p_ppi_se": e.se,
                "ppi_lambda": float(self.lam[i]), "conf_mean": float(self.conf_mean[i])}


def confidence_matrix(P, rows, cols, values) -> sp.csr_matrix:
    """The ``(m, U)`` confidences of :func:`ppi_precision` from ``(system, instance, confidence)`` triples: every
    instance a system holds (non-zero of ``P``) needs one, in (0, 1]."""
    P = sp.csr_matrix(P)
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    values = np.asarray(values, float)
    if not (rows.shape == cols.shape == values.shape) or rows.ndim != 1:
        raise InvalidInputError(f"confidences: expected equal 1-d rows, cols and values, got {rows.shape}, "
                                f"{cols.shape}, {values.shape}")
    K = sp.csr_matrix((values, (rows, cols)), shape=P.shape)
    K.sum_duplicates()
    return _check_confidences(P, K)


def _check_confidences(P: sp.csr_matrix, conf) -> sp.csr_matrix:
    """``conf`` on ``P``'s pattern as a canonical csr matrix; an error names the first system and instance whose
    confidence is missing or outside (0, 1]."""
    K = sp.csr_matrix(conf, dtype=float)
    if K.shape != P.shape:
        raise InvalidInputError(f"confidences: expected shape {P.shape} (systems x universe), got {K.shape}")
    held = sp.csr_matrix(((P.data != 0).astype(float), P.indices, P.indptr), shape=P.shape)
    held.eliminate_zeros()
    on = sp.csr_matrix(held.multiply(K))  # the confidences where the system holds the instance
    on.eliminate_zeros()
    on.sum_duplicates()
    if on.nnz != held.nnz or not np.all((on.data > 0) & (on.data <= 1)):
        hc = held.tocoo()
        vals = np.asarray(K[hc.row, hc.col]).ravel()
        k = int(np.argmax(~((vals > 0) & (vals <= 1))))
        raise InvalidInputError(f"confidences: expected a confidence in (0, 1] for every instance a system holds; "
                                f"system {hc.row[k]}, instance {hc.col[k]} has {float(vals[k])!r}")
    return on


def _ppi_iv(d: Design, conf, W, confidence: float, min_ess) -> tuple[sp.csr_matrix, np.ndarray]:
    if not isinstance(d, Design):
        raise InvalidInputError(f"d: expected a Design (make_design), got {type(d).__name__}")
    if not (isinstance(confidence, (int, float)) and not isinstance(confidence, bool) and 0 < confidence < 1):
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    if not (isinstance(min_ess, (int, float)) and not isinstance(min_ess, bool) and min_ess >= 0):
        raise InvalidInputError(f"min_ess: expected a non-negative number, got {min_ess!r}")
    K = _check_confidences(d.P, conf)
    W = weight_matrix(d.P, d.n, "balance") if W is None else np.asarray(W, float)
    if W.shape != (d.m, d.m) or not np.all(np.isfinite(W)) or np.any(W < 0):
        raise InvalidInputError(f"W: expected non-negative ({d.m}, {d.m}) weights, got shape {W.shape}")
    return K, W


def ppi_precision(d: Design, conf, *, W: np.ndarray | None = None, confidence: float = 0.90,
                  min_ess: float = MIN_ESS) -> PPIPrecision:
    r"""Prediction-powered (PPI++) precision of every system, with the label-only estimate beside it.

    Parameters
    ----------
    d : Design
        The draws and their labels (:func:`~unpooled.core.estimators.joint.make_design`).
    conf : sparse or dense matrix, shape (m, U)
        Each system's confidence in each instance it holds, in (0, 1] (:func:`confidence_matrix`); entries
        where the system does not hold the instance are ignored.
    W : ndarray, shape (m, m), optional
        The joint estimator's weights (``Scores.weights`` of :func:`~unpooled.core.estimators.joint.estimate`,
        so the label-only figures are the published ones); default the balance heuristic's.  The identity gives
        the simple estimator.
    confidence : float
        The intervals' level.
    min_ess : float
        Fewest effective draws (Kish's effective sample size of the system's precision weights) for the power
        tuning: a system with fewer keeps the label-only estimate (:math:`\lambda_i = 0`), whose interval covers
        there, where the tuned one's does not (module docs).

    Returns
    -------
    PPIPrecision

    Raises
    ------
    InvalidInputError
        A confidence missing or outside (0, 1] where a system holds an instance; weights of the wrong shape; a
        level outside (0, 1).

    Notes
    -----
    :math:`\hat\pi_i^{\rm PPI} = \hat\pi_i - \hat\lambda_i \sum_s \omega_{is}(c_i(x_s) - \mu_i)`,
    :math:`\hat\lambda_i = \widehat{\rm Cov}(C_i, G_i)/\widehat V(G_i)` (module docs).
    """
    K, W = _ppi_iv(d, conf, W, confidence, min_ess)
    t = _terms(d, W)
    C, Wt = t.per_unit(recall=False)  # the terms' unit totals, as the joint estimator's
    p_lab, lin = precision_linear(C, Wt, per_unit=True)  # precision and its linear part, exactly as the joint's
    L = lin.draws.scaled(rows=lin.draw_scale)  # its influence rows (C - p W) / sum W
    G, mu = _control_rows(d, K, Wt.sparse, d.xs[d.units.first])
    var_c = lin.var(d, confidence)
    var_g = strata_var(G, d, per_unit=True)
    cov = (strata_var(L + G, d, per_unit=True) - strata_var(L + G.scaled(rows=-np.ones(d.m)), d, per_unit=True)) / 4
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where((var_g > 0) & (t.ess >= min_ess), cov / np.where(var_g > 0, var_g, 1.0), 0.0)
    g = G.sum()
    fallback_of = _fallback(d, t.ess)
    ci_lab = wilson(p_lab, var_c, confidence, fallback_of(var_c))
    p, var = p_lab - lam * g, strata_var(L + G.scaled(rows=-lam), d, per_unit=True)
    ci = wilson(p, var, confidence, fallback_of(var))
    # power tuning over {0, lambda}: labels alone where the tuned interval is not narrower (Wilson's width
    # depends on the estimate too)
    lam = np.where((ci[1] - ci[0]) < (ci_lab[1] - ci_lab[0]), lam, 0.0)
    off = lam == 0
    p, var = np.where(off, p_lab, p), np.where(off, var_c, var)
    ci = (np.where(off, ci_lab[0], ci[0]), np.where(off, ci_lab[1], ci[1]))
    ppi = Estimate.of(p, np.sqrt(var), *ci, level=confidence, interval="wilson", n=t.ess, method=METHOD)
    labels = Estimate.of(p_lab, np.sqrt(var_c), *ci_lab, level=confidence, interval="wilson", n=t.ess,
                         method=METHOD_LABELS)
    return PPIPrecision(ppi, labels, lam, mu, mu + g)


def _control_rows(d: Design, K: sp.csr_matrix, wimp: sp.csr_matrix, xs: np.ndarray) -> tuple[Rows, np.ndarray]:
    r"""The control rows :math:`G_{is} = \omega_{is}(c_i(x_s) - \mu_i)` summed over each unit's draws (``(m,
    units)``, sparse on the pattern of the units' importance weights ``wimp``, :math:`\omega`; ``xs`` the instance
    of each unit) and :math:`\mu_i`; :math:`h_i \equiv 0` for a system whose confidences are all equal."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.asarray(d.P.multiply(K).sum(axis=1)).ravel() / np.asarray(d.P.sum(axis=1)).ravel()
    lo = _row_extreme(K, np.minimum)
    hi = _row_extreme(K, np.maximum)
    flat = lo == hi
    mu = np.where(flat, lo, mu)  # exactly the common value (a sum of p_i c rounds off)
    Ks = sp.csr_matrix(K[:, xs])
    G = sp.csr_matrix(wimp.multiply(Ks)) - scale(wimp, rows=mu)
    return Rows(scale(G, rows=(~flat).astype(float))), mu


def _row_extreme(K: sp.csr_matrix, ufunc) -> np.ndarray:
    """Per row, ``ufunc.reduce`` of the stored values (NaN for an empty row)."""
    out = np.full(K.shape[0], np.nan)
    full = np.diff(K.indptr) > 0
    if K.nnz:
        out[full] = ufunc.reduceat(K.data, K.indptr[:-1][full])
    return out


def _fallback(d: Design, ess: np.ndarray):
    unseen, size = unseen_mass(d.P, d.xs), population_count(d.P)
    return lambda var: population_size(ess, var, unseen, size)


__all__ = ["METHOD", "METHOD_LABELS", "PPIPrecision", "confidence_matrix", "ppi_precision"]
