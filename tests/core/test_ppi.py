"""Prediction-powered precision (``estimators.ppi``): ``ppi_py`` as the oracle for one system's mean, the exact
reduction to labels alone with constant confidences, the power tuning (never wider than labels alone), the control
variate's zero mean by exact enumeration in a joint design, and the input checks."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy.stats import norm

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import distribution_matrix, estimate, make_design, weight_matrix
from unpooled.core.estimators.joint import WeightDegeneracyWarning, _terms
from unpooled.core.estimators.ppi import confidence_matrix, ppi_precision


def _one_system(seed: int, N: int = 5000, n: int = 150, informative: bool = True):
    rng = np.random.default_rng(seed)
    truth = rng.random(N) < 0.7
    conf = np.where(truth, rng.beta(4, 2, N), rng.beta(2, 4, N)) if informative else rng.random(N)
    conf = np.clip(conf, 1e-3, 1.0)
    P = sp.csr_matrix(np.full((1, N), 1 / N))
    xs = rng.choice(N, n, replace=False)  # distinct draws: the distinct-instance factor is 1
    d = make_design(P, np.zeros(n, np.int64), xs, truth[xs].astype(float), np.zeros((1, 0), bool))
    return d, truth, conf, xs


@pytest.mark.parametrize("seed,informative", [(0, True), (1, True), (2, False), (3, True)])
def test_one_system_equals_ppi_py(seed, informative):
    N, n = 5000, 150
    d, truth, conf, xs = _one_system(seed, N, n, informative)
    r = ppi_precision(d, sp.csr_matrix(conf[None, :]), confidence=0.90)
    Y, Yhat = truth[xs].astype(float), conf[xs]
    lam = float(r.lam[0])
    # the tuned coefficient is the labelled sample's regression slope (PPI++ with the mean known: N -> infinity)
    slope = np.cov(Y, Yhat)[0, 1] / np.var(Yhat, ddof=1)
    if lam != 0.0:
        assert lam == pytest.approx(slope, rel=1e-10)
    else:  # the power tuning fell back to labels alone: the tuned interval was not narrower
        assert informative is False or slope == pytest.approx(0.0, abs=0.2)
    # the point estimate is ppi_py's at that coefficient, the whole output's confidences as the unlabelled data
    assert r.p.value[0] == pytest.approx(ppi_mean_pointestimate(Y, Yhat, conf, lam=lam).item(), abs=1e-12)
    # the standard error: ppi_py's rectifier term (its imputed term is 0 when the unlabelled predictions are the
    # known mean, which leaves the point estimate as it is), with n/(n-1) (ddof 1) and the finite-population
    # correction 1 - n/N of a sample of distinct instances
    lo, hi = ppi_mean_ci(Y, Yhat, np.full(N, float(r.conf_mean[0])), alpha=0.10, lam=lam)
    assert (lo[0] + hi[0]) / 2 == pytest.approx(r.p.value[0], abs=1e-12)
    se_ppi = (hi[0] - lo[0]) / (2 * norm.ppf(0.95))
    assert r.p.se[0] == pytest.approx(se_ppi * np.sqrt(n / (n - 1) * (1 - n / N)), rel=1e-9)
    # the label-only estimate is the sample mean
    assert r.labels.value[0] == pytest.approx(Y.mean(), abs=1e-12)
    assert (r.p.method, r.labels.method, r.p.interval.method, r.p.interval.level) == ("ppi++", "labels", "wilson", 0.9)


def test_too_few_effective_draws_keep_labels_alone():
    d, truth, conf, _ = _one_system(0, n=39)
    assert np.all(ppi_precision(d, sp.csr_matrix(conf[None, :])).lam == 0)
    assert np.all(ppi_precision(d, sp.csr_matrix(conf[None, :]), min_ess=39).lam != 0)


def test_informative_confidences_narrow_the_interval_and_adversarial_ones_too():
    d, truth, conf, _ = _one_system(0)
    good = ppi_precision(d, sp.csr_matrix(conf[None, :]))
    bad = ppi_precision(d, sp.csr_matrix(1.0 - conf[None, :] + 1e-3))
    assert good.lam[0] > 0 and good.p.interval.width[0] < 0.9 * good.labels.interval.width[0]
    # anti-correlated confidences carry the same information (ppi_py clips its coefficient at 0 and loses it)
    assert bad.lam[0] < 0 and bad.p.interval.width[0] == pytest.approx(good.p.interval.width[0], rel=1e-6)


def _joint(seed: int, m: int = 4, U: int = 80, complete_last: bool = False):
    rng = np.random.default_rng(seed)
    systems = [np.sort(rng.choice(U, rng.integers(8, min(50, U)), replace=False)) for _ in range(m)]
    truth = rng.random(U) < 0.6
    P = distribution_matrix(systems, U)
    n = [int(rng.integers(5, 30)) for _ in range(m)]
    if complete_last:
        n[-1] = 400
    src = np.repeat(np.arange(m), n)
    xs = np.concatenate([s[rng.integers(0, len(s), k)] for s, k in zip(systems, n)])
    y0 = np.flatnonzero(truth)[:15]
    g0 = np.stack([np.isin(y0, s) for s in systems])
    return rng, truth, systems, make_design(P, src, xs, truth[xs].astype(float), g0)


@pytest.mark.parametrize("weights,estimator", [("balance", "joint"), ("heuristic", "joint"), ("minvar", "joint"),
                                               ("balance", "simple")])
@pytest.mark.parametrize("complete_last", [False, True])
def test_constant_confidences_give_exactly_the_label_only_estimate(weights, estimator, complete_last):
    rng, truth, systems, d = _joint(5, complete_last=complete_last)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightDegeneracyWarning)
        sc = estimate(d, estimator=estimator, weights=weights)
    consts = np.array([1.0, 0.3, 0.77, 0.123456789])  # one value per system, the default 1 among them
    K = sp.csr_matrix(d.P.multiply(consts[:, None]) != 0).multiply(consts[:, None])
    r = ppi_precision(d, K, W=sc.weights)
    assert np.all(r.lam == 0)
    for got, want in ((r.p.value, sc.p.value), (r.p.se, sc.p.se), (r.p.lo, sc.p.lo), (r.p.hi, sc.p.hi),
                      (r.labels.value, sc.p.value), (r.labels.se, sc.p.se), (r.labels.lo, sc.p.lo)):
        np.testing.assert_array_equal(got, want)


@st.composite
def _cases(draw):
    seed = draw(st.integers(0, 100_000))
    m = draw(st.integers(1, 5))
    rng, truth, systems, d = _joint(seed, m=m, U=draw(st.integers(20, 120)))
    kind = draw(st.sampled_from(["informative", "noise", "adversarial", "compressed"]))
    U = d.P.shape[1]
    base = {"informative": np.where(truth, rng.beta(4, 2, U), rng.beta(2, 4, U)), "noise": rng.random(U),
            "adversarial": np.where(truth, rng.beta(2, 4, U), rng.beta(4, 2, U)),
            "compressed": 0.5 + 0.05 * truth + 0.01 * rng.random(U)}[kind]
    per_system = np.clip(base[None, :] + rng.normal(0, 0.05, (m, U)), 1e-3, 1.0)  # each system its own scores
    K = sp.csr_matrix(d.P != 0).multiply(per_system)
    return d, sp.csr_matrix(K), draw(st.sampled_from(["balance", "heuristic"]))


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_never_wider_than_labels_alone(case):
    d, K, weights = case
    W = weight_matrix(d.P, d.n, weights)
    r = ppi_precision(d, K, W=W, min_ess=0)  # tuned however few the draws
    assert np.all(r.p.interval.width <= r.labels.interval.width)
    assert np.all(r.p.se <= r.labels.se * (1 + 1e-9) + 1e-15)
    p = np.clip(r.p.value, 0, 1)  # (the joint estimate itself may leave [0, 1] with few draws)
    assert np.all((r.p.lo <= p + 1e-12) & (p <= r.p.hi + 1e-12))
    assert np.all((r.p.lo >= 0) & (r.p.hi <= 1))
    # labels alone are the published joint precision at those weights
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightDegeneracyWarning)
        sc = estimate(d, weights=weights)
    np.testing.assert_array_equal(r.labels.value, sc.p.value)
    np.testing.assert_array_equal(r.labels.hi, sc.p.hi)


def test_control_variate_has_mean_zero_by_exact_enumeration():
    """Two overlapping systems, one draw each, every pair of draws enumerated with its probability: the
    estimate of the mean confidence from the shared draws (balance heuristic) is exactly unbiased, so the PPI
    estimate at any fixed coefficient adds no bias to the label-only one: the Hajek ratio sum(C) / sum(W), whose
    numerator is exactly unbiased for the precision and denominator for 1 (the ratio itself only to O(1/n))."""
    P = sp.csr_matrix(np.array([[0.5, 0.3, 0.2, 0.0], [0.0, 0.25, 0.25, 0.5]]))
    conf = np.array([[0.9, 0.2, 0.6, 0.0], [0.0, 0.4, 0.8, 0.1]])
    f = np.array([1.0, 0.0, 1.0, 1.0])
    K = sp.csr_matrix(conf)
    e_g = np.zeros(2)
    e_num, e_den = np.zeros(2), np.zeros(2)
    for x1, x2 in itertools.product(range(4), range(4)):
        pr = P[0, x1] * P[1, x2]
        if pr == 0:
            continue
        xs = np.array([x1, x2])
        d = make_design(P, np.array([0, 1]), xs, f[xs], np.zeros((2, 0), bool))
        r = ppi_precision(d, K)
        e_g += pr * (r.conf_draws - r.conf_mean)
        t = _terms(d, weight_matrix(d.P, d.n, "balance"))
        np.testing.assert_allclose(r.labels.value, t.C.sum() / t.W.sum(), rtol=1e-14)
        e_num += pr * t.C.sum()
        e_den += pr * t.W.sum()
    np.testing.assert_allclose(e_g, 0.0, atol=1e-12)
    np.testing.assert_allclose(e_num, np.asarray(P.multiply(f).sum(1)).ravel(), atol=1e-12)
    np.testing.assert_allclose(e_den, 1.0, atol=1e-12)


def test_confidence_matrix_and_input_checks():
    P = sp.csr_matrix(np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]))
    K = confidence_matrix(P, [0, 0, 1, 1], [0, 1, 1, 2], [0.9, 0.2, 0.5, 1.0])
    assert K.toarray().tolist() == [[0.9, 0.2, 0.0], [0.0, 0.5, 1.0]]
    with pytest.raises(InvalidInputError, match=r"confidences: .* system 1, instance 2 has 0\.0"):
        confidence_matrix(P, [0, 0, 1], [0, 1, 1], [0.9, 0.2, 0.5])
    with pytest.raises(InvalidInputError, match=r"confidences: .* system 0, instance 1 has 1\.5"):
        confidence_matrix(P, [0, 0, 1, 1], [0, 1, 1, 2], [0.9, 1.5, 0.5, 1.0])
    with pytest.raises(InvalidInputError, match="confidences: expected equal 1-d"):
        confidence_matrix(P, [0, 0], [0], [0.9])
    d = make_design(P, np.array([0, 1]), np.array([0, 2]), np.array([1.0, 0.0]), np.zeros((2, 0), bool))
    with pytest.raises(InvalidInputError, match=r"confidences: expected shape \(2, 3\)"):
        ppi_precision(d, np.ones((2, 4)))
    with pytest.raises(InvalidInputError, match="confidence: expected a number in"):
        ppi_precision(d, K, confidence=1.5)
    with pytest.raises(InvalidInputError, match="min_ess: expected a non-negative number"):
        ppi_precision(d, K, min_ess=-1)
    with pytest.raises(InvalidInputError, match=r"W: expected non-negative \(2, 2\)"):
        ppi_precision(d, K, W=np.eye(3))
    # entries where a system holds nothing are ignored
    r = ppi_precision(d, K + sp.csr_matrix(np.array([[0, 0, 0.7], [0.3, 0, 0]])))
    np.testing.assert_array_equal(r.conf_mean, ppi_precision(d, K).conf_mean)


def test_simulation_small_version():
    """``unpooled simulate ppi``'s core, few trials: the oracle agrees to round-off on one system, informative
    confidences narrow the interval, uninformative ones leave it (nearly) as it is, and a seed repeats."""
    import ppi_py

    from unpooled.core.simulate import ppi as sim

    cells = {c.name: c for c in sim.default_cells()}
    assert len(cells) == 32
    inf = sim.run_cell(cells["infor-5000x1-p50"], 30, seed=1, oracle=ppi_py).summary()
    assert inf["oracle"]["max_diff"] < 1e-12 and inf["tuned"] == 1.0
    assert inf["width_ratio"] < 0.97 and abs(inf["ppi"]["bias"]) < 0.03
    noise = sim.run_cell(cells["uninf-5000x1-p50"], 30, seed=1).summary()
    assert 0.97 < noise["width_ratio"] <= 1.0
    again = sim.run_cell(cells["uninf-5000x1-p50"], 30, seed=1).summary()
    assert {k: v for k, v in again.items() if k != "seconds"} == {k: v for k, v in noise.items() if k != "seconds"}
    with pytest.raises(InvalidInputError, match="trials: expected at least 1"):
        sim.run_cell(cells["uninf-5000x1-p50"], 0)
