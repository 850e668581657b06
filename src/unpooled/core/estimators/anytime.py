r"""Anytime-valid intervals: confidence sequences for precision, recall and F1 that may be looked at after every
batch of labels.

**Why.**  The service re-scores after every label batch and shows the new interval.  A fixed-:math:`n` interval
covers at *one* sample size chosen in advance; read at a time that depends on the data (stop once A's interval
excludes the rival's estimate, once an interval excludes a value, once annotators have separated a pair) it does
not: issue 24 measured coverage 0.80-0.83 and 0.55 for 90% intervals.  A *confidence sequence*
:math:`(C_t)_{t\ge1}` covers at every time simultaneously, :math:`\Pr(\forall t: \theta \in C_t) \ge 1-\alpha`,
so it covers at any stopping time, however the stop was chosen.

**What the sequence is indexed by.**  The looks are the re-scorings (after each batch of draws; the service keeps
the draws in their order); a sequence valid uniformly over every time is valid over any subset of looks, so
batches need no special treatment.  Each estimate here is an asymptotically linear function of
stratum sums (:mod:`.joint`): :math:`\hat\theta_t - \theta \approx \sum_s u_s` over the per-draw influence values
:math:`u_s` whose stratified variance :math:`\widehat V_t` (:func:`.joint.strata_var`) the fixed-:math:`n`
interval uses.  On the scale of the effective sample size :math:`n_t = \hat\theta_t(1-\hat\theta_t)/\widehat V_t`
(:func:`.intervals.effective_size`, Wilson's), the standardised deviation
:math:`S_t = n_t(\hat\theta_t-\theta)/\sqrt{\hat\theta_t(1-\hat\theta_t)}` has variance :math:`n_t`: the
sequence's intrinsic time is :math:`n_t`, the number of labels an unweighted sample of the same precision would
hold (for the simple estimator, the number of labels).

**The boundary: Robbins' normal mixture, asymptotically (Waudby-Smith et al. 2024).**  For a process that is
(a strong approximation of) Brownian motion in the intrinsic time :math:`v`, mixing the martingales
:math:`\exp(\lambda S_v - \lambda^2 v/2)` over :math:`\lambda \sim N(0, 1/\rho)` gives
:math:`\sqrt{\rho/(v+\rho)}\exp\{S_v^2/2(v+\rho)\}`, and Ville's inequality (:math:`\Pr(\sup \ge 1/\alpha) \le
\alpha`) the two-sided boundary (Howard et al. 2021, eq. 3.7)

.. math::

    |S_v| < \mathcal M_{\rho,\alpha}(v) = \sqrt{(v+\rho)\,\log\frac{v+\rho}{\rho\,\alpha^2}}
    \quad\text{for every } v,\ \text{with probability} \ge 1-\alpha

(:func:`mixture_boundary`).  Dividing by the standard deviation :math:`\sqrt v` turns it into a multiplier that
replaces :math:`z_{1-\alpha/2}` of the fixed-:math:`n` interval,

.. math::

    z_t = \frac{\mathcal M_{\rho,\alpha}(n_t)}{\sqrt{n_t}}
        = \sqrt{\Bigl(1 + \frac{\rho}{n_t}\Bigr)\Bigl(\log\bigl(1 + \tfrac{n_t}{\rho}\bigr) + 2\log\tfrac1\alpha\Bigr)}

(:func:`mixture_multiplier`), which is Waudby-Smith et al.'s asymptotic confidence sequence
:math:`\hat\theta_t \pm \sqrt{\frac{2(t\hat\sigma_t^2\rho'^2+1)}{t^2\rho'^2}\log\frac{\sqrt{t\hat\sigma_t^2\rho'^2+1}}{\alpha}}`
with :math:`\rho'^{-2} = \rho\,\hat\sigma^2_t` (their Theorem 2.2 with a scale-free :math:`\rho`).  :math:`\rho`
sets where the sequence is tightest: :math:`z_t` is smallest at :math:`n_t/\rho = \eta^*` (6.64 at
:math:`\alpha = 0.1`, :func:`best_ratio`), so :math:`\rho = \text{tight\_at}/\eta^*` with ``tight_at``
(:data:`TIGHT_AT`, 150 effective labels, the service's default labels per submission).  At 90%:
:math:`z_t` = 3.19, 2.78, 2.76, 2.85, 2.93 at 25, 100, 150, 500, 1,000 effective labels against 1.645.

The interval is then the fixed-:math:`n` construction at the level :math:`2\Phi(z_t)-1` (:func:`.intervals.wilson`,
the same estimate, variance and fallback size): it stays in [0, 1] and keeps Wilson's behaviour near the
bounds; its hull is taken with the published fixed-:math:`n` interval stretched about the estimate by
:math:`z_t/z_{1-\alpha/2}` on each side, so the sequence always holds the fixed-:math:`n` interval (from crowd
votes that one is the hull of Wilson's and a profile-likelihood interval, :func:`.noisy.precision_interval`,
wider than Wilson's where votes are weak; stretched, it is the profile interval at :math:`z_t` where the
log-likelihood is quadratic).  F1's is derived from precision's and recall's sequences as its fixed-:math:`n` interval is from theirs
(:func:`.intervals.f1_interval`), so it lies in :math:`[F(P_{lo},R_{lo}), F(P_{hi},R_{hi})]` of the two sequences;
with equal multipliers its extremes are the normal-mixture sequence of F1's linearisation
:math:`F_P\hat P + F_R\hat R`.

**Why not betting or empirical Bernstein.**  Both are exact (non-asymptotic) for means of *bounded* i.i.d.
observations (Waudby-Smith & Ramdas 2024; Howard et al. 2021).  The joint estimates are not such means: a
precision term :math:`p_i(x)f(x)/q_i(x)` is bounded only by the largest importance ratio, which a small system
beside large ones pushes to hundreds; recall is a self-normalised ratio :math:`\hat\theta\hat\nu` with
:math:`p_0` known up to a constant (no known bound at all); the draws' weights (:math:`n_j/N`, the distinct-
instance factors of :mod:`.finite`) change as batches arrive, so the sums are not a fixed martingale; and the
service scores crowd votes, whose estimates are mixture-likelihood fits.  A bound-free boundary on the
influence values, valid as the time-uniform central limit theorem makes it, is the one construction that
applies to every estimate the service shows.  ``unpooled simulate stopping`` prints its coverage under each
stopping rule and, for the one case where betting and empirical Bernstein apply (own draws, labels in [0, 1]),
the width each boundary pays (the table in the module :mod:`unpooled.core.simulate.stopping`).

**What is asymptotic.**  :math:`\widehat V_t` and :math:`n_t` are estimated; the guarantee is that of an
asymptotic confidence sequence: the time-uniform coverage tends to :math:`1-\alpha` as the first look grows
(in practice: looks after a few dozen labels).

References
----------
H. Robbins. Statistical methods related to the law of the iterated logarithm. *Ann. Math. Statist.* 41, 1970.
S. R. Howard, A. Ramdas, J. McAuliffe, J. Sekhon. Time-uniform, nonparametric, nonasymptotic confidence
sequences. *Annals of Statistics* 49(2), 2021.
I. Waudby-Smith, D. Arbour, R. Sinha, E. H. Kennedy, A. Ramdas. Time-uniform central limit theory and
asymptotic confidence sequences. *Annals of Statistics* 52(6), 2024 (arXiv 2103.06476, 2021).
I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting. *JRSS B* 86(1), 2024.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from ..errors import InvalidInputError
from .finite import population_count, unseen_mass
from .intervals import effective_size, f1_interval, population_size, wilson
from .results import ConfidenceInterval

#: the effective number of labels at which the sequences are tightest (the service's default labels per submission)
TIGHT_AT = 150.0
METHOD = "normal-mixture"
METRICS = ("p", "r", "f1")


def _iv(confidence, tight_at) -> None:
    if not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    if not isinstance(tight_at, (int, float, np.integer, np.floating)) or not 0 < tight_at < np.inf:
        raise InvalidInputError(f"tight_at: expected a positive number of effective labels, got {tight_at!r}")


def mixture_boundary(v, *, rho: float, alpha: float) -> np.ndarray:
    r"""Robbins' two-sided normal-mixture boundary :math:`\sqrt{(v+\rho)\log((v+\rho)/(\rho\alpha^2))}` at
    intrinsic time ``v`` (Howard et al. 2021, eq. 3.7; module docs)."""
    v = np.asarray(v, float)
    return np.sqrt((v + rho) * np.log((v + rho) / (rho * alpha ** 2)))


@lru_cache(maxsize=64)
def best_ratio(confidence: float) -> float:
    r""":math:`\eta^* = \arg\min_\eta (1 + 1/\eta)(\log(1+\eta) + 2\log(1/\alpha))`: the ratio :math:`n/\rho`
    at which the multiplier is smallest (6.64 at 90%; Waudby-Smith et al.'s closed-form approximation
    :math:`-2\log\alpha + \log(1 - 2\log\alpha)` gives 6.33)."""
    c = -2 * np.log(1 - confidence)
    res = minimize_scalar(lambda x: (1 + np.exp(-x)) * (np.log1p(np.exp(x)) + c), bounds=(-8.0, 12.0),
                          method="bounded", options={"xatol": 1e-10})
    return float(np.exp(res.x))


def mixture_multiplier(n, *, confidence: float = 0.90, tight_at: float = TIGHT_AT) -> np.ndarray:
    r""":math:`z_t = \mathcal M_{\rho,\alpha}(n)/\sqrt n` at effective size ``n`` with
    :math:`\rho = \text{tight\_at}/\eta^*` (module docs): the factor that replaces :math:`z_{1-\alpha/2}`."""
    _iv(confidence, tight_at)
    n = np.maximum(np.asarray(n, float), 1e-9)
    rho = tight_at / best_ratio(float(confidence))
    return mixture_boundary(n, rho=rho, alpha=1 - confidence) / np.sqrt(n)


#: the largest level handed to the fixed-n construction (:math:`z` = 7.1): reached only below about 2 effective
#: labels, where Wilson's interval at that level is [0, 1] up to 0.1%
MAX_LEVEL = 1 - 1e-12


def anytime_level(n, *, confidence: float = 0.90, tight_at: float = TIGHT_AT) -> np.ndarray:
    r"""The level :math:`2\Phi(z_t) - 1` at which the fixed-:math:`n` interval is the confidence sequence (at most
    :data:`MAX_LEVEL`)."""
    return np.minimum(1 - 2 * norm.sf(mixture_multiplier(n, confidence=confidence, tight_at=tight_at)), MAX_LEVEL)


@dataclass(frozen=True)
class AnytimeIntervals:
    """Confidence sequences of every system's precision, recall and F1 at the current look: each a
    :class:`~.results.ConfidenceInterval` of arrays of length m (construction ``'anytime'``, level the sequence's).

    ``z``: the multiplier used per metric (in place of the fixed-n interval's :math:`z_{1-\\alpha/2}`);
    ``n_eff``: the effective sample size the multiplier was taken at (F1: none, it is derived); ``boundary``: the
    boundary the sequences follow (:data:`METHOD`), tightest at ``tight_at`` effective labels."""

    p: ConfidenceInterval
    r: ConfidenceInterval
    f1: ConfidenceInterval
    z: dict
    n_eff: dict
    tight_at: float
    boundary: str = METHOD

    @property
    def confidence(self) -> float:
        return self.p.level

    def ci(self, metric: str) -> ConfidenceInterval:
        if metric not in METRICS:
            raise InvalidInputError(f"metric: expected one of {', '.join(METRICS)}, got {metric!r}")
        return getattr(self, metric)

    def row(self, i: int) -> dict:
        """System ``i``'s bounds as ``{p_cs_lo, p_cs_hi, r_cs_lo, ..., f1_cs_hi}`` (floats)."""
        out = {}
        for k in METRICS:
            c = self.ci(k)
            out[f"{k}_cs_lo"], out[f"{k}_cs_hi"] = float(c.lo[i]), float(c.hi[i])
        return out

    def to_dict(self) -> dict:
        return {"method": self.boundary, "confidence": self.confidence, "tight_at": self.tight_at,
                **{f"{k}_cs": [self.ci(k).lo.tolist(), self.ci(k).hi.tolist()] for k in METRICS}}


def anytime_intervals(scores, *, n_fallback_p, n_fallback_r, confidence: float | None = None,
                      tight_at: float = TIGHT_AT) -> AnytimeIntervals:
    r"""Confidence sequences at the current look from a :class:`~.joint.Scores` (the estimates, standard
    errors and fixed-:math:`n` intervals of ``p`` and ``r``) and the fallback sizes of its Wilson intervals
    (``n_fallback_p``, ``n_fallback_r``: where a variance is 0 or an estimate at a bound).  ``confidence``:
    default the scores' level.  See the module docs for the construction."""
    confidence = scores.confidence if confidence is None else confidence
    _iv(confidence, tight_at)
    p, r = np.asarray(scores.p.value, float), np.asarray(scores.r.value, float)
    var = {k: np.asarray(getattr(scores, k).se, float) ** 2 for k in METRICS}
    ci, z, n_eff = {}, {}, {}
    z0 = norm.ppf(0.5 + scores.confidence / 2)
    for k, est, nfb in (("p", p, n_fallback_p), ("r", r, n_fallback_r)):
        nfb = np.broadcast_to(np.asarray(nfb, float), est.shape)
        n_eff[k] = effective_size(est, var[k], nfb)
        level = anytime_level(n_eff[k], confidence=confidence, tight_at=tight_at)
        z[k] = norm.ppf(0.5 + level / 2)
        lo, hi = wilson(est, var[k], level, nfb)
        # the hull with the scores' own interval stretched by z_t / z about the estimate (the crowd votes' profile
        # likelihood hull is wider than Wilson's where votes are weak: the sequence must hold it)
        flo, fhi = (np.asarray(x, float) for x in (getattr(scores, k).lo, getattr(scores, k).hi))
        with np.errstate(invalid="ignore"):
            ci[k] = (np.fmin(lo, np.clip(est - z[k] / z0 * (est - flo), 0.0, 1.0)),
                     np.fmax(hi, np.clip(est + z[k] / z0 * (fhi - est), 0.0, 1.0)))
    ci["f1"] = f1_interval(p, r, ci["p"], ci["r"], var["p"], var["r"], var["f1"])
    z["f1"] = np.maximum(z["p"], z["r"])
    level = float(confidence)
    return AnytimeIntervals(*(ConfidenceInterval(*ci[k], level, "anytime") for k in METRICS), z, n_eff,
                            float(tight_at))


def design_intervals(d, scores, **kw) -> AnytimeIntervals:
    """:func:`anytime_intervals` of the scores of design ``d`` (:func:`.joint.estimate`), with the fallback sizes
    its fixed-n intervals use: precision's effective size over the unseen share of the target's distribution
    (:func:`.intervals.population_size`), recall's the exhaustive sample's size."""
    nfb_p = population_size(np.asarray(scores.ess, float), np.asarray(scores.p.se, float) ** 2,
                            unseen_mass(d.P, d.xs), population_count(d.P))
    return anytime_intervals(scores, n_fallback_p=nfb_p, n_fallback_r=np.full(d.m, float(max(d.n0, 1))), **kw)


def excludes(ci: tuple, value) -> np.ndarray:
    """Whether the interval ``ci`` (lo, hi arrays) excludes ``value`` (broadcast)."""
    lo, hi = (np.asarray(x, float) for x in ci)
    value = np.asarray(value, float)
    return (value < lo) | (value > hi)


def separated(a_ci: tuple, b_ci: tuple) -> np.ndarray:
    """Whether two intervals (lo, hi) are disjoint."""
    return (np.asarray(a_ci[1]) < np.asarray(b_ci[0])) | (np.asarray(b_ci[1]) < np.asarray(a_ci[0]))


__all__ = ["AnytimeIntervals", "METHOD", "TIGHT_AT", "anytime_intervals", "anytime_level", "best_ratio",
           "design_intervals", "excludes", "mixture_boundary", "mixture_multiplier", "separated"]
