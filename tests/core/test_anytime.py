"""Confidence sequences (core/estimators/anytime.py): the normal-mixture boundary against an independent
computation (the mixture martingale integrated numerically, and Ville's bound on simulated random walks), the
multiplier's tuning, the intervals built from a design's scores, and coverage under peeking with the real
estimator."""

import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, optimize
from scipy.stats import norm

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import estimate, make_design
from unpooled.core.estimators.results import Estimate
from unpooled.core.estimators.anytime import (anytime_intervals, best_ratio, design_intervals, excludes,
                                              mixture_boundary, mixture_multiplier, separated)


def _mixture_root(v: float, rho: float, alpha: float) -> float:
    """The S > 0 at which Robbins' mixture of exp(l S - l^2 v / 2) over l ~ N(0, 1/rho), integrated numerically,
    reaches 1/alpha (an independent computation of the boundary)."""

    def log_mixture(s):
        peak = s * s / (2 * (v + rho))  # the exponent's largest value, taken out so that nothing overflows
        f = lambda lam: np.exp(lam * s - lam * lam * (v + rho) / 2 - peak)
        width = 12 / np.sqrt(rho + v)
        centre = s / (v + rho)
        integral = integrate.quad(f, centre - width, centre + width, epsabs=0, epsrel=1e-11, limit=200)[0]
        return peak + np.log(integral) + 0.5 * np.log(rho / (2 * np.pi))

    return optimize.brentq(lambda s: log_mixture(s) - np.log(1 / alpha), 0.0, 50 * np.sqrt(v + rho), xtol=1e-12)


@pytest.mark.parametrize("v, rho, alpha", [(1.0, 1.0, 0.1), (100.0, 20.0, 0.1), (1000.0, 22.6, 0.05),
                                           (37.0, 300.0, 0.2)])
def test_the_boundary_is_where_the_mixture_martingale_reaches_one_over_alpha(v, rho, alpha):
    assert float(mixture_boundary(v, rho=rho, alpha=alpha)) == pytest.approx(_mixture_root(v, rho, alpha), rel=1e-7)



def _scores(p, r, p_se, r_se, f1_se, p_ci, r_ci):
    """Hand-made scores at 90%: precision and recall with their intervals, F1's standard error."""
    a = np.asarray
    nan = np.full(len(p), np.nan)

    def est(v, se, ci, kind):
        return Estimate.of(a(v, float), a(se, float), a(ci[0], float), a(ci[1], float), level=0.9, interval=kind,
                           n=0, method="joint-balance")

    return SimpleNamespace(p=est(p, p_se, p_ci, "profile"), r=est(r, r_se, r_ci, "wilson"),
                           f1=est(nan, f1_se, (nan, nan), "f1-region"), confidence=0.9)

def test_gaussian_walks_cross_the_boundary_at_most_alpha_of_the_time():
    """Ville: sums of standard normals cross +-M(t) at some t <= 2,000 in at most alpha of the paths; the
    fixed-n boundary z sqrt(t) is crossed in most of them."""
    rng = np.random.default_rng(7)
    S = np.cumsum(rng.standard_normal((3000, 2000)), axis=1)
    t = np.arange(1, 2001)
    rho = 150 / best_ratio(0.9)
    crossed = (np.abs(S) >= mixture_boundary(t, rho=rho, alpha=0.1)).any(1).mean()
    naive = (np.abs(S) >= norm.ppf(0.95) * np.sqrt(t)).any(1).mean()
    assert crossed <= 0.1 + 3 * np.sqrt(0.1 * 0.9 / 3000)
    assert crossed > 0.01  # the boundary is not far out
    assert naive > 0.5


def test_the_multiplier_is_smallest_where_it_is_tuned_and_beyond_z():
    z = norm.ppf(0.95)
    n = np.array([10, 50, 100, 150, 300, 1000, 10 ** 5])
    m = mixture_multiplier(n, confidence=0.9, tight_at=150)
    assert (m > z).all()
    assert m[3] == pytest.approx(m.min())
    assert m[3] == pytest.approx(2.7638, abs=1e-3)
    c = -2 * np.log(0.1)
    assert best_ratio(0.9) == pytest.approx(c + np.log(c + 1), rel=0.06)  # Waudby-Smith et al.'s approximation
    assert mixture_multiplier(150, confidence=0.95, tight_at=150) > m[3]


def test_bad_options_name_the_field():
    with pytest.raises(InvalidInputError, match="confidence"):
        mixture_multiplier(10, confidence=1.5)
    with pytest.raises(InvalidInputError, match="tight_at"):
        mixture_multiplier(10, tight_at=0)


def _two_systems(rng, n=100, pA=0.7, pB=0.5, n0=80):
    NA, NB, shared = 300, 200, 100
    U = NA + NB - shared
    truth = np.where(np.arange(U) < NA, rng.random(U) < pA, rng.random(U) < pB).astype(float)
    A, B = np.arange(NA), np.arange(NA - shared, U)
    P = sp.csr_matrix((np.r_[np.full(NA, 1 / NA), np.full(NB, 1 / NB)], (np.r_[np.zeros(NA), np.ones(NB)],
                                                                         np.r_[A, B])), shape=(2, U))
    return P, truth, A, B


def test_the_sequence_holds_the_fixed_n_interval_and_f1_follows_p_and_r():
    rng = np.random.default_rng(1)
    P, truth, A, B = _two_systems(rng)
    src = np.repeat([0, 1], 100)
    xs = np.r_[rng.choice(A, 100), rng.choice(B, 100)]
    y = np.flatnonzero(truth)
    y0 = rng.choice(y, 80)
    g0 = np.array([np.isin(y0, A), np.isin(y0, B)])
    d = make_design(P, src, xs, truth[xs], g0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = estimate(d)
    cs = design_intervals(d, s)
    for k in ("p", "r", "f1"):
        lo, hi = getattr(s, k).lo, getattr(s, k).hi
        clo, chi = cs.ci(k).lo, cs.ci(k).hi
        assert (clo <= lo + 1e-12).all() and (chi >= hi - 1e-12).all()
        assert ((chi - clo) > 1.3 * (hi - lo)).all()
    f = lambda p, r: 2 * p * r / (p + r)
    assert (cs.f1.lo >= f(cs.p.lo, cs.r.lo) - 1e-9).all()
    assert (cs.f1.hi <= f(cs.p.hi, cs.r.hi) + 1e-9).all()
    assert (cs.p.method, cs.f1.method, cs.p.level, cs.boundary) == ("anytime", "anytime", 0.9, "normal-mixture")
    row = cs.row(0)
    assert row["p_cs_lo"] == cs.p.lo[0] and set(row) == {f"{k}_cs_{b}" for k in "p r f1".split() for b in
                                                          ("lo", "hi")}
    # at the multiplier of the effective size, a Wald-like interval: ratio of half-widths about z_t / z
    ratio = (cs.p.hi - cs.p.lo) / (s.p.hi - s.p.lo)
    np.testing.assert_allclose(ratio, cs.z["p"] / norm.ppf(0.95), rtol=0.05)


def test_the_sequence_holds_a_fixed_n_interval_wider_than_wilson_stretched():
    """From crowd votes the fixed-n interval may be a profile-likelihood hull wider than Wilson's (a precision of
    1.0 with [0.88, 1]): the sequence holds it, stretched by z_t / z."""
    S = _scores([1.0], [0.8], [0.0], [0.05], [0.03], ([0.88], [1.0]), ([0.7], [0.9]))
    cs = anytime_intervals(S, n_fallback_p=67.0, n_fallback_r=100.0)
    assert cs.p.lo[0] == pytest.approx(1 - cs.z["p"][0] / norm.ppf(0.95) * 0.12)
    assert cs.p.hi[0] == 1.0


def test_anytime_intervals_stay_in_the_unit_interval_at_the_bounds():
    S = _scores([1.0, 0.0], [0.5, 0.5], [0.0, 0.0], [0.05, 0.05], [0.03, 0.03], ([0.95, 0.0], [1.0, 0.05]),
                ([0.42, 0.42], [0.58, 0.58]))
    cs = anytime_intervals(S, n_fallback_p=np.array([50.0, 50.0]), n_fallback_r=100.0)
    assert cs.p.hi[0] == 1.0 and 0.8 < cs.p.lo[0] < 1.0
    assert cs.p.lo[1] == 0.0 and 0.0 < cs.p.hi[1] < 0.2
    assert cs.f1.lo[1] == 0.0


def test_helpers_for_stopping_rules():
    assert excludes((np.array([0.2, 0.2]), np.array([0.4, 0.4])), [0.5, 0.3]).tolist() == [True, False]
    assert separated((np.array([0.1]), np.array([0.2])), (np.array([0.25]), np.array([0.3])))[0]
    assert not separated((np.array([0.1]), np.array([0.26])), (np.array([0.25]), np.array([0.3])))[0]


def test_peeking_at_the_precision_breaks_the_fixed_n_interval_not_the_sequence():
    """One system, 25 draws a look, up to 400, noise-free labels: stop as soon as the interval excludes the true
    precision (the rule of issue 24 that kept 0.55).  Deterministic (fixed seed, 60 runs)."""
    rng = np.random.default_rng(5)
    N = 2000
    P = sp.csr_matrix(np.full((1, N), 1 / N))
    truth = (rng.random(N) < 0.7).astype(float)
    g0 = np.ones((1, 50), bool)
    held = {"fixed": 0, "anytime": 0}
    for _ in range(60):
        xs = rng.integers(0, N, 400)
        broken = {"fixed": False, "anytime": False}
        for n in range(25, 401, 25):
            d = make_design(P, np.zeros(n, int), xs[:n], truth[xs[:n]], g0)
            s = estimate(d)
            cs = design_intervals(d, s)
            broken["fixed"] |= bool(excludes((s.p.lo, s.p.hi), truth.mean())[0])
            broken["anytime"] |= bool(excludes((cs.p.lo, cs.p.hi), truth.mean())[0])
        for k in held:
            held[k] += not broken[k]
    assert held["anytime"] / 60 >= 0.9
    assert held["fixed"] / 60 <= 0.8


@pytest.mark.filterwarnings("error")
def test_degenerate_variances_and_undefined_estimates_give_wide_or_undefined_intervals():
    S = _scores([0.88, np.nan, 0.5], [0.4, 0.4, 0.5], [1.5e4, 0.1, 0.0], [0.05] * 3, [0.05] * 3,
                ([0.0, np.nan, 0.5], [1.0, np.nan, 0.5]), ([0.3, 0.3, 0.4], [0.5, 0.5, 0.6]))
    cs = anytime_intervals(S, n_fallback_p=np.array([67.0, 10.0, 1e12]), n_fallback_r=100.0)
    assert cs.p.lo[0] < 1e-3 and cs.p.hi[0] > 1 - 1e-3  # about [0, 1]
    assert np.isnan(cs.p.lo[1]) and np.isnan(cs.f1.lo[1])
    assert cs.p.hi[2] - cs.p.lo[2] < 1e-4  # exact (every instance drawn): no width
