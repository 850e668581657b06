"""Subset (per-group) precision, recall and F1: hand computations, identities, exact expectations, coverage."""

from __future__ import annotations

import math
import warnings
from operator import attrgetter

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, chi2, norm

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import (
    UndefinedEstimateWarning,
    WeightDegeneracyWarning,
    distribution_matrix,
    estimate,
    make_design,
    subset_scores,
)
from unpooled.core.estimators.intervals import wilson
from unpooled.core.estimators.breakdown import MIN_EFFECTIVE

from .test_estimators_exact import SUBJ, SYSTEMS, TRUTH, enumerate_expectation

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")


def _wilson_by_hand(p: float, n_eff: float, level: float = 0.9) -> tuple[float, float]:
    z = norm.ppf(0.5 + level / 2)
    c = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    h = z / (1 + z * z / n_eff) * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff))
    lo, hi = c - h, c + h
    # Brown, Cai & DasGupta at the bounds: at most x* rare outcomes, the exact Poisson bound (chi-square form)
    x_star, a = (2 if n_eff <= 50 else 3), (1 - level) / 2
    if p > 0.5 and 0 < n_eff * (1 - p) <= x_star:
        hi = max(hi, 1 - chi2.ppf(a, 2 * n_eff * (1 - p)) / (2 * n_eff))
    if p < 0.5 and 0 < n_eff * p <= x_star:
        lo = min(lo, chi2.ppf(a, 2 * n_eff * p) / (2 * n_eff))
    return lo, hi


# -- hand computation ------------------------------------------------------------------
def test_single_system_instance_level_by_hand():
    # one system, 60 instances (uniform p_i); groups: instances 0-29 -> 0, 30-59 -> 1; 10 distinct draws
    P = sp.csr_matrix(np.full((1, 60), 1 / 60))
    xs = [0, 1, 2, 10, 30, 40, 50, 31, 11, 12]
    f = [1, 0, 1, 1, 1, 1, 0, 1, 0, 1]
    # exhaustive: 5 true instances, groups 0,0,1,1,1, found 1,0,1,1,0, weights (1/inclusion) 2,2,1,1,4
    g0 = [[True, False, True, True, False]]
    v0 = [2.0, 2.0, 1.0, 1.0, 4.0]
    d = make_design(P, [0] * 10, xs, f, g0, v0)
    s = subset_scores(d, 0, [0] * 30 + [1] * 30, [0, 0, 1, 1, 1])
    # group 0: draws 0,1,2,10,11,12 -> labels 1,0,1,1,0,1: 4/6; group 1: draws 30,40,50,31 -> 1,1,0,1: 3/4
    assert s.p.value.tolist() == pytest.approx([4 / 6, 3 / 4])
    assert s.n_draws.tolist() == [6, 4]
    assert s.mass.tolist() == pytest.approx([0.5, 0.5])
    assert s.mass_hat.tolist() == pytest.approx([0.6, 0.4])
    # Hajek variance with n = 10 distinct draws of 60 instances in one stratum: the finite-population correction
    # (1 - n/N) times n/(n-1) * sum_{s in g} (f_s - p_g)^2 / n_g^2
    n = 10
    for g, (lab, pg) in enumerate((([1, 0, 1, 1, 0, 1], 4 / 6), ([1, 1, 0, 1], 3 / 4))):
        var = (1 - n / 60) * n / (n - 1) * sum((x - pg) ** 2 for x in lab) / len(lab) ** 2
        assert s.p.se[g] == pytest.approx(math.sqrt(var))
        n_eff = pg * (1 - pg) / var
        if pg * (1 - pg) * len(lab) < 1:  # intervals.wilson: near a bound, at least the effective sample size
            n_eff = max(n_eff, len(lab))
        lo, hi = _wilson_by_hand(pg, n_eff)
        assert (s.p.lo[g], s.p.hi[g]) == pytest.approx((lo, hi))
    # recall: group 0 = (2*1 + 2*0)/(2+2) = 0.5; group 1 = (1 + 1 + 0)/(1 + 1 + 4) = 1/3
    assert s.r.value.tolist() == pytest.approx([0.5, 1 / 3])
    assert s.n_true.tolist() == [2, 3]
    T = np.array([2 * (1 - 0.5) / 4, 2 * (0 - 0.5) / 4, (1 - 1 / 3) / 6, (1 - 1 / 3) / 6, 4 * (0 - 1 / 3) / 6])
    assert s.r.se == pytest.approx(np.sqrt(5 / 4 * np.array([(T[:2] ** 2).sum(), (T[2:] ** 2).sum()])))
    f1 = [2 * p * r / (p + r) for p, r in zip(s.p.value, s.r.value)]
    assert s.f1.value.tolist() == pytest.approx(f1)
    assert s.method == "joint-balance" and s.confidence == 0.9


def test_relation_level_weights_within_a_group():
    # relation level: p_i puts 1/2 on predicate A (instances 0, 1) and 1/2 on B (2, 3, 4, 5)
    P = sp.csr_matrix([[0.25, 0.25, 0.125, 0.125, 0.125, 0.125]])
    # group 0 = {0, 2}: p_i mass 0.375; draws of 0 (label 1) and 2 (label 0)
    d = make_design(P, [0, 0, 0, 0], [0, 2, 2, 1], [1, 0, 0, 1], np.zeros((1, 0), bool))
    with pytest.warns(UndefinedEstimateWarning, match="recall undefined"):
        s = subset_scores(d, 0, [0, 1, 0, 1, 1, 1], np.zeros(0, int))
    # the weights are p_i/q_i = 1 for the own draws: a plain mean over the group's draws
    assert s.p.value[0] == pytest.approx(1 / 3) and s.p.value[1] == pytest.approx(1.0)
    assert s.mass[0] == pytest.approx(0.375)
    assert np.isnan(s.r.value).all() and np.isnan(s.f1.value).all() and np.isnan(s.r.lo).all()


def test_undefined_group_is_nan_and_warns_once():
    P = sp.csr_matrix([[0.5, 0.5, 0.0]])
    d = make_design(P, [0, 0], [0, 0], [1, 1], [[True, False]])
    with pytest.warns(UndefinedEstimateWarning, match=r"precision undefined for groups \[1, 2\]"):
        s = subset_scores(d, 0, [0, 1, 2], [0, 2])
    assert s.p.value[0] == 1.0 and np.isnan(s.p.value[1:]).all() and np.isnan(s.p.lo[1:]).all()
    assert s.r.value[2] == 0.0 and np.isnan(s.r.value[1]) and s.f1.value[2] != s.f1.value[2]  # NaN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        subset_scores(d, 0, [0, 1, 2], [0, 2], zero_division="nan")
    assert s.row(1)["p"] is None and s.row(0)["p"] == 1.0 and s.row(2)["n_true"] == 1


def test_rows_are_each_groups_figures_json_ready():
    """``rows`` gives, for the groups asked (in their order), each group's figures as plain floats (NaN as None), ints
    and bools: what a stored breakdown table holds."""
    P = sp.csr_matrix([[0.25, 0.25, 0.25, 0.25]])
    d = make_design(P, [0, 0, 0, 0, 0], [0, 1, 1, 2, 0], [1, 0, 1, 1, 1], [[True, False, True]])
    s = subset_scores(d, 0, [0, 0, 1, 2], [0, 1, 3], n_groups=4, zero_division="nan")
    got = s.rows([3, 0, 2])
    assert [r["n_draws"] for r in got] == [0, 4, 0] and [r["n_true"] for r in got] == [1, 1, 0]
    for g, r in zip([3, 0, 2], got):
        for k, arr in (("p", s.p.value), ("p_lo", s.p.lo), ("r_hi", s.r.hi), ("f1_se", s.f1.se), ("ess", s.ess),
                       ("mass", s.mass), ("r_ess", s.r_ess)):
            assert (r[k] is None) if np.isnan(arr[g]) else (type(r[k]) is float and r[k] == arr[g])
        assert type(r["n_draws"]) is int and type(r["p_few"]) is bool
        assert r["f1_few"] == (r["p_few"] or r["r_few"]) and r["p_few"] == bool(s.p_ess[g] < MIN_EFFECTIVE)
    assert got[0]["p"] is None and got[2]["r"] is None and s.rows([]) == []
    assert list(got[1]) == ["p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "p_se", "r_se", "f1_se",
                            "n_draws", "ess", "mass", "mass_hat", "n_true", "true_weight", "p_ess", "r_ess", "p_few",
                            "r_few", "f1_few"]


def test_groups_with_too_few_effective_draws_are_flagged():
    """4 draws, all correct, in group 0; 12 in group 1: group 0's row says too few (its Wilson interval would
    be [0.60, 1]); recall's effective sample is at most the documents its true instances come from."""
    P = sp.csr_matrix(np.full((1, 4), 0.25))
    xs = [0] * 4 + [2, 3] * 6
    d = make_design(P, [0] * 16, xs, [1] * 16, [[True] * 6 + [False] * 6], y0_docs=list("aaaaab") + list("cdefgh"))
    s = subset_scores(d, 0, [0, 0, 1, 1], [0] * 6 + [1] * 6)
    assert s.p_ess.tolist() == pytest.approx([4, 12]) and s.r_ess.tolist() == pytest.approx([2, 6])
    assert MIN_EFFECTIVE == 5
    r0, r1 = s.row(0), s.row(1)
    assert r0["p_few"] and r0["r_few"] and r0["f1_few"] and r0["p"] == 1.0
    assert not (r1["p_few"] or r1["r_few"] or r1["f1_few"])


# -- generated designs: identities ----------------------------------------------------
@st.composite
def designs(draw, soft=True):
    m = draw(st.integers(1, 3))
    U = draw(st.integers(2, 9))
    P = np.zeros((m, U))
    for j in range(m):
        support = draw(st.lists(st.integers(0, U - 1), min_size=1, max_size=U, unique=True))
        w = draw(st.lists(st.floats(0.05, 1.0), min_size=len(support), max_size=len(support)))
        P[j, support] = np.array(w) / sum(w)
    src, xs = [], []
    for j in range(m):
        support = np.flatnonzero(P[j])
        k = draw(st.integers(1, 7))
        src += [j] * k
        xs += draw(st.lists(st.sampled_from(support.tolist()), min_size=k, max_size=k))
    # labels on a 1/100 grid: intervals._f1_partials underflows (0/0) for precision ~1e-165
    lab = st.integers(0, 100).map(lambda k: k / 100) if soft else st.sampled_from([0.0, 1.0])
    f = draw(st.lists(lab, min_size=len(xs), max_size=len(xs)))
    n0 = draw(st.integers(1, 8))
    g0 = np.array(draw(st.lists(st.booleans(), min_size=m * n0, max_size=m * n0))).reshape(m, n0)
    v0 = draw(st.lists(st.floats(0.2, 5.0), min_size=n0, max_size=n0))
    G = draw(st.integers(1, 4))
    gu = draw(st.lists(st.integers(0, G - 1), min_size=U, max_size=U))
    gt = draw(st.lists(st.integers(0, G - 1), min_size=n0, max_size=n0))
    target = draw(st.integers(0, m - 1))
    # half the designs know each exhaustive instance's document (recall's variance by documents)
    docs = draw(st.one_of(st.none(), st.lists(st.sampled_from("abcd"), min_size=n0, max_size=n0)))
    return (make_design(sp.csr_matrix(P), src, xs, f, g0, v0, y0_docs=docs), np.array(gu), np.array(gt), G,
            target)


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedEstimateWarning)
        warnings.simplefilter("ignore", WeightDegeneracyWarning)
        return fn(*a, **k)


@settings(max_examples=150, deadline=None)
@given(designs(), st.sampled_from(["balance", "heuristic"]))
def test_partition_combines_back_to_the_overall_estimate(case, weights):
    d, gu, gt, G, i = case
    s = _quiet(subset_scores, d, i, gu, gt, n_groups=G, weights=weights)
    overall = _quiet(estimate, d, weights=weights)
    # sum_g D_g * p_g / sum_g D_g = joint precision, a ratio over X_i (the groups partition X_i)
    D = s.mass_hat.sum()
    assert (np.nansum(s.mass_hat * np.nan_to_num(s.p.value)) / D if D > 0 else 0.0) == pytest.approx(overall.p.value[i], abs=1e-9)
    assert s.mass.sum() == pytest.approx(1.0)
    simple = _quiet(estimate, d, estimator="simple")
    V = s.true_weight
    assert (V * np.nan_to_num(s.r.value)).sum() / V.sum() == pytest.approx(simple.r.value[i], abs=1e-9)
    ss = _quiet(subset_scores, d, i, gu, gt, n_groups=G, estimator="simple")
    assert np.nansum(ss.mass_hat * np.nan_to_num(ss.p.value)) == pytest.approx(simple.p.value[i], abs=1e-9)
    # the same weights given as a matrix give the same answer
    sw = _quiet(subset_scores, d, i, gu, gt, n_groups=G, weights=overall.weights)
    np.testing.assert_allclose(sw.p.value, s.p.value, equal_nan=True)
    assert sw.method == "joint-given"


@settings(max_examples=150, deadline=None)
@given(designs())
def test_one_group_is_the_overall_estimate(case):
    d, _, _, _, i = case
    one_u, one_t = np.zeros(d.P.shape[1], int), np.zeros(d.n0, int)
    s = _quiet(subset_scores, d, i, one_u, one_t, estimator="simple")
    e = _quiet(estimate, d, estimator="simple")
    for k in ("p", "r", "f1"):
        a, b = getattr(s, k), getattr(e, k)
        assert a.value[0] == pytest.approx(b.value[i], abs=1e-9), k
        assert a.se[0] ** 2 == pytest.approx(b.se[i] ** 2, abs=1e-12), k  # variances: ~1e-17 of round-off
        assert (a.lo[0], a.hi[0]) == pytest.approx((b.lo[i], b.hi[i]), abs=1e-9), k
        assert a.interval.method == b.interval.method and a.method == b.method == "simple", k
    # joint: the joint precision, the same self-normalised ratio, with the same variance
    sj = _quiet(subset_scores, d, i, one_u, one_t)
    ej = _quiet(estimate, d)
    assert np.nan_to_num(sj.p.value[0]) == pytest.approx(ej.p.value[i], abs=1e-9)
    assert sj.p.se[0] ** 2 == pytest.approx(ej.p.se[i] ** 2, abs=1e-12)
    assert sj.r.value[0] == pytest.approx(e.r.value[i], abs=1e-9)


@settings(max_examples=150, deadline=None)
@given(designs(), st.sampled_from(["joint", "simple"]), st.sampled_from([0.5, 0.8, 0.9, 0.95]))
def test_intervals_contain_the_estimates(case, estimator, level):
    d, gu, gt, G, i = case
    s = _quiet(subset_scores, d, i, gu, gt, n_groups=G, estimator=estimator, confidence=level)
    for k in ("p", "r", "f1"):
        e = getattr(s, k)
        est, lo, hi = e.value, e.lo, e.hi
        ok = ~np.isnan(est)
        assert np.all((est[ok] >= -1e-12) & (est[ok] <= 1 + 1e-12)), k
        assert np.all(lo[ok] <= est[ok] + 1e-12) and np.all(est[ok] <= hi[ok] + 1e-12), k
        assert np.all((lo[ok] >= 0) & (hi[ok] <= 1)), k
        assert np.isnan(lo[~ok]).all() and np.isnan(hi[~ok]).all()
    assert np.all(s.n_draws <= len(d.xs)) and s.n_true.sum() == d.n0


@settings(max_examples=80, deadline=None)
@given(designs(), st.randoms(use_true_random=False))
def test_permuting_draws_changes_nothing(case, rnd):
    d, gu, gt, G, i = case
    order = list(range(len(d.xs)))
    rnd.shuffle(order)
    k0 = list(range(d.n0))
    rnd.shuffle(k0)
    d2 = make_design(d.P, d.src[order], d.xs[order], d.f[order], d.g0[:, k0], d.v0[k0],
                     y0_docs=None if d.y0_groups is None else d.y0_groups[k0])
    a = _quiet(subset_scores, d, i, gu, gt, n_groups=G)
    b = _quiet(subset_scores, d2, i, gu, gt[k0], n_groups=G)
    for k in ("p.value", "r.value", "f1.value", "p.se", "r.se"):
        # a standard error is the root of a difference of sums: a zero variance can come out as 1e-22 in one
        # order of summation and 0 in another, its root 1e-11
        np.testing.assert_allclose(attrgetter(k)(a), attrgetter(k)(b), equal_nan=True,
                                   atol=1e-12 if ".se" not in k else 1e-9)


# -- exact expectations (every multinomial sample of a small world) -----------------
def test_numerator_and_denominator_are_unbiased_exactly():
    """E[C_g] = p_i(g) pi_i(g) and E[D_g] = p_i(g): the two halves of the ratio are unbiased."""
    P = distribution_matrix([s for s in SYSTEMS], 5, level="entity", subject=SUBJ)
    groups = np.array([0, 1, 0, 1, 1])
    n, target = [2, 2, 1], 1
    p_i = np.asarray(P[target].todense()).ravel()
    for g in (0, 1):
        inside = (groups == g) & (p_i > 0)
        mass = p_i[inside].sum()
        num = (p_i * TRUTH)[inside].sum()

        def c(d, g=g):
            s = _quiet(subset_scores, d, target, groups, np.zeros(d.n0, int), n_groups=2)
            return s.mass_hat[g] * np.nan_to_num(s.p.value[g])

        def dd(d, g=g):
            return _quiet(subset_scores, d, target, groups, np.zeros(d.n0, int), n_groups=2).mass_hat[g]

        assert enumerate_expectation(P, n, 0, c) == pytest.approx(num)
        assert enumerate_expectation(P, n, 0, dd) == pytest.approx(mass)


# -- simulation: bias and coverage ----------------------------------------------------------
def test_simulation_nearly_unbiased_and_intervals_cover():
    rng = np.random.default_rng(20240611)
    U, G = 90, 3
    group = np.arange(U) % G
    # correct with a group-dependent rate
    truth = (rng.random(U) < np.array([0.85, 0.55, 0.3])[group]).astype(float)
    supports = [np.arange(0, 60), np.arange(30, 90), np.arange(15, 75)]
    P = np.zeros((3, U))
    for j, s in enumerate(supports):
        w = rng.uniform(0.3, 1.0, len(s))
        P[j, s] = w / w.sum()
    P = sp.csr_matrix(P)
    n = [120, 120, 120]
    target = 0
    p_i = np.asarray(P[target].todense()).ravel()
    pi_true = np.array([(p_i * truth)[group == g].sum() / p_i[group == g].sum() for g in range(G)])
    # recall population: the true universe instances plus 45 true instances no system found
    Y_group = np.concatenate([group[truth == 1], np.arange(45) % G])
    Y_found = np.zeros((3, len(Y_group)), bool)
    for j, s in enumerate(supports):
        Y_found[j, :int(truth.sum())] = np.isin(np.flatnonzero(truth), s)
    r_true = np.array([Y_found[target][Y_group == g].mean() for g in range(G)])
    # the exhaustive sample is drawn non-uniformly (proposal h) and re-weighted by p0/h
    h = 1.0 + Y_group + (np.arange(len(Y_group)) % 2)
    h = h / h.sum()
    n0 = 150
    R = 300
    est = np.zeros((R, 2, G))
    cover = np.zeros((R, 2, G), bool)
    for rep in range(R):
        src = np.repeat(np.arange(3), n)
        xs = np.concatenate([rng.choice(U, size=k, p=np.asarray(P[j].todense()).ravel()) for j, k in enumerate(n)])
        y = rng.choice(len(Y_group), size=n0, p=h)
        d = make_design(P, src, xs, truth[xs], Y_found[:, y], 1.0 / h[y] / len(Y_group))
        s = subset_scores(d, target, group, Y_group[y], n_groups=G, zero_division="nan")
        for k, (val, (lo, hi), tv) in enumerate(((s.p.value, (s.p.lo, s.p.hi), pi_true), (s.r.value, (s.r.lo, s.r.hi), r_true))):
            est[rep, k] = val
            cover[rep, k] = (lo <= tv) & (tv <= hi)
    mean, sd = est.mean(0), est.std(0)
    truth_pr = np.stack([pi_true, r_true])
    # ratio estimators: bias O(1/n_g), far below the Monte Carlo error here
    assert np.all(np.abs(mean - truth_pr) <= 4 * sd / math.sqrt(R) + 0.005), (mean, truth_pr, sd)
    rates = cover.mean(0)
    assert np.all(rates >= 0.84), rates
    # 90% nominal: the pooled rate (6 x 300 intervals, correlated within a replicate) is near 0.90,
    # neither anti-conservative nor uselessly wide (measured: 0.88-0.92 per cell)
    pooled = int(cover.sum())
    assert binomtest(pooled, cover.size, 0.90).pvalue > 1e-3 or 0.9 <= pooled / cover.size <= 0.95, rates
    assert 0.86 <= pooled / cover.size <= 0.95, rates


# -- input validation ---------------------------------------------------------------------
def _tiny():
    P = sp.csr_matrix([[0.5, 0.5]])
    return make_design(P, [0, 0], [0, 1], [1, 0], [[True]])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"design": "x"}, "design: expected a Design"),
    ({"target": 1}, r"target: expected a system index in \[0, 1\), got 1"),
    ({"target": True}, "target: expected a system index"),
    ({"groups_of_universe": [0]}, r"groups_of_universe: expected shape \(2,\)"),
    ({"groups_of_universe": [0, -2]}, "groups_of_universe: group codes must be >= -1"),
    ({"groups_of_universe": [0.5, 1]}, "groups_of_universe: expected integer group codes"),
    ({"groups_of_truth": [0, 1]}, r"groups_of_truth: expected shape \(1,\)"),
    ({"groups_of_universe": [-1, -1], "groups_of_truth": [-1]}, "there is no group"),
    ({"n_groups": 1}, "n_groups: expected an integer of at least 2"),
    ({"estimator": "pooled"}, "estimator: expected one of simple, joint, got 'pooled'"),
    ({"weights": "optimal"}, "weights: expected one of heuristic, balance, minvar"),
    ({"weights": np.ones((2, 2))}, r"weights: expected a \(1, 1\) array"),
    ({"confidence": 1.0}, r"confidence: expected a number in \(0, 1\), got 1.0"),
    ({"zero_division": 0}, "zero_division: expected 'warn' or 'nan', got 0"),
])
def test_subset_scores_iv(kwargs, match):
    args = {"design": _tiny(), "target": 0, "groups_of_universe": [0, 1], "groups_of_truth": [1], **kwargs}
    with pytest.raises(InvalidInputError, match=match):
        subset_scores(args.pop("design"), args.pop("target"), args.pop("groups_of_universe"),
                      args.pop("groups_of_truth"), **args)


def test_minvar_weights_and_simple_agree_on_own_draws_only():
    # with a single system every weight rule is the simple estimator
    d = _tiny()
    a = subset_scores(d, 0, [0, 1], [1], weights="minvar", zero_division="nan")
    b = subset_scores(d, 0, [0, 1], [1], estimator="simple", zero_division="nan")
    np.testing.assert_allclose(a.p.value, b.p.value)
    assert a.method == "joint-minvar" and b.method == "simple"


def test_wilson_is_the_joint_modules():
    # the interval is intervals.wilson at the effective size (a regression guard against a private copy)
    P = sp.csr_matrix(np.full((1, 40), 1 / 40))
    d = make_design(P, [0] * 8, [0, 1, 2, 3, 4, 5, 6, 7], [1, 0, 1, 1, 1, 0, 1, 1], [[True, True, False]])
    s = subset_scores(d, 0, [0] * 40, [0, 0, 0])
    lo, hi = wilson(np.array([s.p.value[0]]), np.array([s.p.se[0] ** 2]), 0.9, np.array([s.ess[0]]))
    assert (s.p.lo[0], s.p.hi[0]) == pytest.approx((lo[0], hi[0]))


def test_group_weights_are_the_joint_terms_to_the_last_bit():
    # the importance ratio is written once (terms.importance_ratio): a group's draws weigh what the headline's terms
    # weigh them, bit for bit, under one proposal (balance), a proposal per target and for a system drawn completely
    from unpooled.core.estimators.breakdown import _common, _draw_weights, _weight_rows
    from unpooled.core.estimators.joint import make_design
    from unpooled.core.estimators.terms import _terms

    rng = np.random.default_rng(7)
    U = 50
    members = [rng.choice(U, k, replace=False) for k in (30, 20, 12)] + [np.array([3, 9, 40])]
    rows = np.concatenate([np.full(len(x), i) for i, x in enumerate(members)])
    P = sp.csr_matrix((np.concatenate([np.full(len(x), 1 / len(x)) for x in members]),
                       (rows, np.concatenate(members))), shape=(len(members), U))
    src = np.concatenate([np.full(n, i) for i, n in enumerate((17, 11, 9))] + [np.full(6, 3)])
    xs = np.concatenate([rng.choice(x, n) for x, n in zip(members, (17, 11, 9))] + [np.repeat(members[3], 2)])
    d = make_design(P, src, xs, (rng.random(len(xs)) < 0.7).astype(float), np.zeros((4, 0), bool))
    common = _common(d, None, None)
    assert common["complete"][3] and not common["complete"][:3].any()
    for rule in ("balance", "heuristic"):
        Wn, _ = _weight_rows(d, "joint", rule, 0.9, common["complete"])
        terms = _terms(d, Wn).W.toarray()
        for i, got in _draw_weights(d, Wn, range(d.m), common).items():
            at, w = got[0], got[-1]
            assert len(at) and np.array_equal(w, terms[i, at]), (rule, i)
