r"""The intervals of every estimate: Wilson's score interval at the effective sample size, modified at the bounds
(:func:`wilson`, :func:`effective_size`, its fallback size :func:`population_size`), and F1's interval derived from
precision's and recall's (:func:`f1_interval`, through :func:`monotone_interval`).

Every estimate of :mod:`.joint` (and of the crowd's votes, :mod:`.noisy`; the entity scores; the reference) is a
proportion with a variance estimated from its linear part; its interval is Wilson's at the effective sample size
:math:`\hat e(1-\hat e)/\widehat{\mathrm{Var}}`, which stays inside [0, 1] and behaves near the bounds; F1's is
the range of :math:`F = 2PR/(P+R)` over the joint region of precision's and recall's intervals, so that it reaches 0
whenever either of theirs does.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.stats import gamma, norm


def population_size(ess: np.ndarray, var: np.ndarray, unseen: np.ndarray, size: np.ndarray | None = None
                    ) -> np.ndarray:
    r"""Wilson's fallback size for a precision whose variance is 0 (all labels equal, or every instance drawn):
    the effective sample size over the share :math:`u` of the target's population no draw reached (``unseen``,
    :func:`.finite.unseen_mass`), infinite once every instance was drawn (the estimate is then exact).

    ``size``: the target's population, in instances (:func:`.finite.population_count`).  The size is then at most
    :math:`N(-\log u)`: :math:`F` false instances all escape the draws with probability about :math:`u^F`, so
    with none seen the false share is bounded by :math:`F/N` with :math:`u^F = \alpha/2`, which Wilson's (and the
    Poisson) bound at that size gives; without it, :math:`\mathrm{ess}/u` claimed the unseen part known from the
    seen one (ten systems of 30 instances sharing 20 draws each, precision 0.95: where a false instance existed and
    none was drawn, 8% of the estimates, the 90% interval held the truth 0.02 of the time).  For a large
    population (:math:`u \to 1`) it is the number of instances seen, about the effective sample size."""
    ess = np.maximum(ess, 1)
    u = np.maximum(unseen, 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(unseen > 1e-12, ess / u, np.inf)
        if size is not None:
            exact = np.minimum(exact, np.where(unseen > 1e-12, np.maximum(size * -np.log(u), 1.0), np.inf))
    return np.where(var > 1e-15, ess, exact)


def z_of(confidence):
    """The two-sided normal quantile of ``confidence`` (:math:`z_{(1+c)/2}`; an array of levels: one each),
    computed once per level (the breakdowns ask for it thousands of times a re-scoring)."""
    if np.ndim(confidence):
        return norm.ppf(0.5 + np.asarray(confidence) / 2)
    return _z(float(confidence))


@lru_cache(maxsize=64)
def _z(confidence: float) -> float:
    return float(norm.ppf(0.5 + confidence / 2))


def wilson(est: np.ndarray, var: np.ndarray, confidence: float, n_fallback: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Wilson score interval at the effective sample size :math:`\hat e(1-\hat e)/\widehat{\rm Var}`, modified
    at the bounds as Brown, Cai and DasGupta recommend.

    Where the variance is 0 (all labels equal), and within about ``1/n_fallback`` of 0 or 1
    (where :math:`\hat e(1-\hat e)` collapses), the fallback size ``n_fallback`` is used.

    *Near a bound.* With :math:`x = n\min(\hat e, 1-\hat e)` rare outcomes among :math:`n` (the effective size),
    :math:`0 < x \le x^*` (:math:`x^* = 2` for :math:`n \le 50`, else 3), the bound on the side of 0 (or 1) is
    at least as far out as the exact Poisson one, :math:`\tfrac12\chi^2_{2x,\,\alpha/2}/n`: Wilson's interval
    stops short there (its coverage dips well below the nominal level for :math:`x = 1, 2`).  Measured through
    the service: a system of true precision 0.9963 (14 false instances in 3,830, 13 of one relation), 150 draws;
    2 false draws happen in 10% of runs and give Wilson's upper bound 0.9956 (the Poisson bound: 0.9976), and the
    precision interval held the truth in 0.84 of 50 runs.  :math:`x` may be fractional (a weighted or crowd-voted
    count); the Poisson bound is then the gamma quantile :math:`\Gamma^{-1}_x(\alpha/2)/n`.

    References: L. D. Brown, T. T. Cai, A. DasGupta. Interval estimation for a binomial proportion.
    *Statistical Science* 16(2):101-133, 2001, §4.1.1 (the modified Wilson interval).
    """
    z = z_of(confidence)
    est = np.clip(est, 0.0, 1.0)
    neff = effective_size(est, var, n_fallback)
    z2n = z * z / neff
    center = (est + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * np.sqrt(est * (1 - est) / neff + z2n / (4 * neff))
    # an exact estimate (every instance drawn, :mod:`.finite`) keeps the round-off of its sums: 1e-12 around it
    lo, hi = np.clip(center - half - 1e-12, 0, 1), np.clip(center + half + 1e-12, 0, 1)
    lo, hi = _poisson_at_bounds(est, neff, lo, hi, confidence)
    return np.minimum(lo, est), np.maximum(hi, est)


def effective_size(est, var, n_fallback) -> np.ndarray:
    r"""The effective sample size :func:`wilson` uses, :math:`\hat e(1-\hat e)/\widehat{\rm Var}`, and
    ``n_fallback`` where the variance is 0, the estimate at 0 or 1, or within about ``1/n_fallback`` of them (the
    time index of :mod:`.anytime`'s confidence sequences too)."""
    est = np.clip(est, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        neff = np.where(var > 1e-15, est * (1 - est) / var, n_fallback)
    neff = np.where((neff > 0) & np.isfinite(neff), neff, np.maximum(n_fallback, 1e-9))
    # est in {0, 1} with positive variance (soft labels): use the fallback size too
    neff = np.where((est <= 0) | (est >= 1), np.maximum(n_fallback, 1e-9), neff)
    # within ~1/n of 0 or 1, est(1-est) collapses while an importance-weighted variance need not:
    # est(1-est)/var would be a handful and the interval absurdly wide (0.999 +- 0.012 gave
    # [0.06, 1]); there the fallback size (the effective sample size) is the better guide
    with np.errstate(invalid="ignore"):
        near = est * (1 - est) * n_fallback < 1 - 1e-9  # round-off must not decide (est 1/2, n_fallback 4)
    return np.where(near, np.maximum(neff, n_fallback), neff)


def _poisson_at_bounds(est, neff, lo, hi, confidence: float):
    """:func:`wilson`'s bounds, the one on the side of a near bound moved out to the exact Poisson bound where the
    rare outcomes number at most 2 (effective size up to 50) or 3 (Brown, Cai and DasGupta's modification)."""
    x_star = np.where(neff <= 50 + 1e-6, 2.0, 3.0) + 1e-6  # counts are often whole: round-off must not decide
    a = (1 - confidence) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        x0, x1 = neff * est, neff * (1 - est)
        # both sides where the effective size is tiny (x0 + x1 = neff <= 2 x*), as Brown, Cai and DasGupta's rule
        # reads: a side chosen by est < 1/2 made the interval jump at 1/2 (n 3, est 0.5 -/+ 1e-16: [0.089, 0.818]
        # against [0.156, 0.844])
        near0 = (x0 > 1e-9) & (x0 <= x_star)
        near1 = (x1 > 1e-9) & (x1 <= x_star)
        if near0.any():
            lo = np.where(near0, np.minimum(lo, gamma.ppf(a, np.where(near0, x0, 1.0)) / neff), lo)
        if near1.any():
            hi = np.where(near1, np.maximum(hi, 1 - gamma.ppf(a, np.where(near1, x1, 1.0)) / neff), hi)
    return lo, hi


def monotone_interval(fn, a, b, a_ci, b_ci, rho, *, steps: int = 1440) -> tuple[np.ndarray, np.ndarray]:
    r"""The interval of :math:`g(\hat a, \hat b)`, ``fn`` non-decreasing in both, from the intervals of the two
    estimates (at one level) and their correlation ``rho``: the extremes of :math:`g` on their joint region, an
    interval at that level.

    Each estimate is put on a standard scale by its own interval, piecewise linearly:
    :math:`u(a) = z\,(a - \hat a)/(a_{\rm hi} - \hat a)` above :math:`\hat a` and
    :math:`z\,(a - \hat a)/(\hat a - a_{\rm lo})` below (so :math:`u = \pm z` at the bounds), :math:`v(b)` likewise;
    the joint region is the ellipse :math:`u^2 - 2\rho uv + v^2 \le (1-\rho^2) z^2`.  As :math:`g` is monotone its
    bounds are its minimum and maximum on the boundary :math:`(u, v) = z(\cos t, \rho\cos t + \sqrt{1-\rho^2}\sin t)`,
    searched on ``steps`` angles.  With symmetric intervals and :math:`g` linear this is the delta-method interval
    :math:`\hat g \pm z\sqrt{g_a^2\sigma_a^2 + g_b^2\sigma_b^2 + 2\rho g_a g_b\sigma_a\sigma_b}` (the method of
    variance estimates recovery, Zou & Donner 2008, for a monotone function of two parameters); near the bounds it
    inherits the shape of the two intervals.  The ellipse spans exactly :math:`\pm z` along each axis, so the
    interval lies within :math:`[g(a_{\rm lo}, b_{\rm lo}), g(a_{\rm hi}, b_{\rm hi})]` and reaches
    :math:`g(a_{\rm lo}, \cdot)` (at :math:`u = -z`).  NaN where ``a`` or ``b`` is.

    References: G. Y. Zou, A. Donner. Construction of confidence limits about effect measures: a general
    approach. *Statistics in Medicine* 27(10):1693-1702, 2008.
    """
    a, b = (np.atleast_1d(np.asarray(x, float)) for x in (a, b))
    al, ah = np.minimum(np.asarray(a_ci[0], float), a), np.maximum(np.asarray(a_ci[1], float), a)
    bl, bh = np.minimum(np.asarray(b_ci[0], float), b), np.maximum(np.asarray(b_ci[1], float), b)
    rho = np.clip(np.nan_to_num(np.broadcast_to(np.asarray(rho, float), a.shape)), -1.0, 1.0)[:, None]
    t = np.linspace(0.0, 2 * np.pi, steps, endpoint=False)[None, :]
    u = np.cos(t)
    v = rho * u + np.sqrt(1 - rho ** 2) * np.sin(t)
    aa = a[:, None] + np.where(u >= 0, u * (ah - a)[:, None], u * (a - al)[:, None])
    bb = b[:, None] + np.where(v >= 0, v * (bh - b)[:, None], v * (b - bl)[:, None])
    G = fn(aa, bb)
    g = fn(a, b)
    nan = np.isnan(a) | np.isnan(b)
    return (np.where(nan, np.nan, np.minimum(G.min(1), g)), np.where(nan, np.nan, np.maximum(G.max(1), g)))


def f1_interval(p, r, p_ci, r_ci, var_p, var_r, var_f) -> tuple[np.ndarray, np.ndarray]:
    r"""F1's interval from precision's and recall's: :func:`monotone_interval` of :math:`F = 2PR/(P+R)`, with the
    correlation of the two estimates recovered from F1's delta-method variance,
    :math:`\rho = (\mathrm{Var}\,\hat F - F_P^2\,\mathrm{Var}\,\hat P - F_R^2\,\mathrm{Var}\,\hat R) /
    (2 F_P F_R\,\sigma_P\sigma_R)` (0 where a partial derivative vanishes), clipped to [-1, 1].  So F1's interval
    reaches 0 when either of theirs does, and 1 only when both do.
    """
    p, r = (np.atleast_1d(np.asarray(x, float)) for x in (p, r))
    var_p, var_r, var_f = (np.broadcast_to(np.asarray(x, float), p.shape) for x in (var_p, var_r, var_f))
    dP, dR = _f1_partials(p, r)
    den = 2 * dP * dR * np.sqrt(np.maximum(var_p, 0) * np.maximum(var_r, 0))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rho = np.where(den > 0, (var_f - dP ** 2 * var_p - dR ** 2 * var_r) / np.where(den > 0, den, 1.0), 0.0)
    lo, hi = monotone_interval(f1_score, p, r, p_ci, r_ci, rho)
    # exactly 0 where either lower bound is (the combination's arithmetic leaves ~1e-10 there)
    zero = (np.asarray(p_ci[0]) <= 0) | (np.asarray(r_ci[0]) <= 0)
    return np.where(zero & ~np.isnan(lo), 0.0, np.clip(lo, 0.0, 1.0)), np.clip(hi, 0.0, 1.0)


def f1_score(p, r) -> np.ndarray:
    r""":math:`F_1 = 2PR/(P+R)`, 0 where :math:`P+R=0` (and where either is NaN), elementwise: the one definition
    every estimate, truth and simulation uses."""
    p = np.asarray(p, dtype=float)
    r = np.asarray(r, dtype=float)
    s = p + r
    return np.divide(2 * p * r, s, out=np.zeros(np.broadcast(p, r).shape), where=s > 0)


def _f1_partials(p, r):
    """:math:`\\partial F_1/\\partial P = 2R^2/(P+R)^2` and :math:`\\partial F_1/\\partial R = 2P^2/(P+R)^2`, 0
    where :math:`P+R=0` (arrays; plain floats too)."""
    p = np.asarray(p, dtype=float)
    r = np.asarray(r, dtype=float)
    s = p + r
    with np.errstate(divide="ignore", invalid="ignore"):
        dP = np.where(s > 0, 2 * r ** 2 / s ** 2, 0.0)
        dR = np.where(s > 0, 2 * p ** 2 / s ** 2, 0.0)
    return dP, dR


__all__ = ["effective_size", "f1_interval", "f1_score", "monotone_interval", "population_size", "wilson"]
