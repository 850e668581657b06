"""Covariances of the joint estimates (core/estimators/paired.py) against brute force over resampled designs."""

import numpy as np
import pytest
import scipy.sparse as sp

from unpooled.core.estimators import estimate
from unpooled.core.estimators.joint import _terms, linear_parts
from unpooled.core.ranking import rank_intervals
from unpooled.core.simulate.ranks import RanksCell, make_systems, marginal_tie_groups, one_trial, run_cell

SMALL = RanksCell("small", (0.5, 0.56, 0.6), (-1, 0, 0), (0.0, 0.9, 0.5), draws=80, n0=80, true_instances=300)


def _monte_carlo(cell, trials, seed):
    rng = np.random.default_rng(seed)
    truth, systems = make_systems(cell, np.random.default_rng(99))
    est, var_diff = [], []
    for _ in range(trials):
        sc, cv = one_trial(cell, truth, systems, rng)
        est.append([getattr(sc, k).value for k in ("p", "r", "f1")])
        var_diff.append([[C[0, 0] + C[1, 1] - 2 * C[0, 1], C[0, 0] + C[2, 2] - 2 * C[0, 2]]
                         for C in (cv.cov[k] for k in ("p", "r", "f1"))])
    est = np.array(est)  # (trials, metric, system)
    true_var = np.stack([np.var(est[:, :, 0] - est[:, :, 1], axis=0, ddof=1),
                         np.var(est[:, :, 0] - est[:, :, 2], axis=0, ddof=1)], axis=1)
    return true_var, np.mean(var_diff, axis=0)


def test_difference_variance_matches_monte_carlo_over_designs():
    true_var, mean_est = _monte_carlo(SMALL, 500, seed=3)
    ratio = mean_est / true_var  # metric x pair
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio
    # shared output: the difference's variance is far below the sum of the two variances
    assert true_var[2, 0] < 0.5 * true_var[2, 1]


def test_difference_variance_from_votes_is_not_narrow():
    cell = RanksCell("small votes", SMALL.f1, SMALL.ref, SMALL.overlap, votes=True, draws=80, n0=80,
                     true_instances=300)
    true_var, mean_est = _monte_carlo(cell, 150, seed=4)
    ratio = mean_est / true_var
    assert np.all(ratio > 0.75), ratio  # the votes' part is an upper bound (module docs): at least about right
    assert np.all(ratio < 2.5), ratio


def test_diagonal_is_the_published_variance_and_a_one_system_combination_its_own():
    rng = np.random.default_rng(1)
    truth, systems = make_systems(SMALL, rng)
    sc, cv = one_trial(SMALL, truth, systems, rng)
    for k in ("p", "r", "f1"):
        assert np.allclose(np.diag(cv.cov[k]), getattr(sc, k).se ** 2)
    d = _design_of(SMALL, truth, systems, rng)
    scd = estimate(d)
    _, lin, var = linear_parts(d, _terms(d, scd.weights), scd.confidence)
    for k in ("p", "f1"):
        assert np.allclose(lin[k].combine(sp.eye(d.m)).var(d, scd.confidence), var[k])
        assert np.allclose(difference_variances(lin[k], d, scd.confidence, np.array([0]), np.array([1])),
                           lin[k].combine(sp.csr_matrix([[1.0, -1.0, 0.0]])).var(d, scd.confidence))
    # recall: its linear part plus the product's second-order term is its published variance
    assert np.allclose(lin["r"].var(d, scd.confidence), var["r"])


def _design_of(cell, truth, systems, rng):
    from unpooled.core.estimators import make_design

    m, U = len(systems), len(truth)
    P = sp.csr_matrix((np.concatenate([np.full(len(s), 1 / len(s)) for s in systems]),
                       (np.repeat(np.arange(m), [len(s) for s in systems]), np.concatenate(systems))), shape=(m, U))
    xs = np.concatenate([rng.choice(s, cell.draws) for s in systems])
    y0 = rng.choice(np.flatnonzero(truth), cell.n0, replace=False)
    return make_design(P, np.repeat(np.arange(m), cell.draws), xs, truth[xs].astype(float),
                       np.array([np.isin(y0, s) for s in systems]))


@pytest.mark.parametrize("votes", [False, True])
def test_paired_separates_what_marginal_intervals_cannot(votes):
    # the world: F1 0.50 and 0.52, 98% of the output shared, 300 draws each
    cell = RanksCell("issue", (0.50, 0.52), (-1, 0), (0.0, 0.98), votes=votes)
    rng = np.random.default_rng(7)
    truth, systems = make_systems(cell, rng)
    sc, cv = one_trial(cell, truth, systems, rng)
    assert len(set(marginal_tie_groups(sc.f1.value, sc.f1.lo, sc.f1.hi).tolist())) == 1
    rk = rank_intervals(sc.f1.value, cv.cov["f1"], 0.90)
    assert rk.better[1, 0] and rk.rank.tolist() == [2, 1] and rk.rank_lo.tolist() == [2, 1]


def test_rank_intervals_cover_in_a_small_run():
    cell = RanksCell("coverage", (0.40, 0.45, 0.50, 0.52, 0.60, 0.61), (-1, 0, 1, 2, 3, 4),
                     (0.0, 0.5, 0.9, 0.98, 0.5, 0.98), draws=150, n0=150, true_instances=800)
    res = run_cell(cell, 40, seed=5).summary()
    assert res["rank_coverage"] >= 0.85
    assert res["mean_rank_width"] < 2.5  # informative: most ranks narrowed to one or two places


def difference_variances(lin, d, confidence, i, j):
    """The oracle: the variance functions applied to the difference of each pair's rows."""
    L = sp.csr_matrix((np.r_[np.ones(len(i)), -np.ones(len(i))], (np.r_[np.arange(len(i)), np.arange(len(i))],
                                                                     np.r_[i, j])), shape=(len(i), lin.m))
    return lin.combine(L).var(d, confidence)


@pytest.mark.parametrize("weights", ["balance", "heuristic"])
@pytest.mark.parametrize("documents", [False, True])
def test_covariance_matrix_is_the_variance_of_the_difference(weights, documents):
    """The cross-product matrix (Linear.cov) has the variances on its diagonal, and Var_ii + Var_jj - 2 Cov_ij is
    the variance functions applied to the difference of the two rows, for every metric, weights and with the
    exhaustive sample clustered in documents."""
    from unpooled.core.estimators import make_design

    cell = RanksCell("five", (0.40, 0.45, 0.50, 0.55, 0.60), (-1, 0, 1, 2, 0), (0.0, 0.9, 0.5, 0.98, 0.3), draws=60,
                     n0=60, true_instances=300)
    rng = np.random.default_rng(2)
    truth, systems = make_systems(cell, rng)
    d = _design_of(cell, truth, systems, rng)
    if documents:
        d = make_design(d.P, d.src, d.xs, d.f, d.g0, y0_docs=np.arange(d.n0) // 4)
    sc = estimate(d, weights=weights)
    _, lin, var = linear_parts(d, _terms(d, sc.weights), 0.9)
    i, j = np.triu_indices(5, 1)
    for k in ("p", "r", "f1"):
        C = lin[k].cov(d, 0.9)
        assert np.allclose(np.diag(C), lin[k].var(d, 0.9), rtol=1e-9, atol=1e-16)
        assert np.allclose(C[i, i] + C[j, j] - 2 * C[i, j], difference_variances(lin[k], d, 0.9, i, j),
                           rtol=1e-8, atol=1e-15)
        assert np.allclose(C, C.T)


def test_vote_covariances_diagonal_is_the_published_variance():
    from unpooled.core.estimators.from_votes import vote_covariances
    from unpooled.core.simulate.ranks import _votes

    rng = np.random.default_rng(3)
    truth, systems = make_systems(SMALL, rng)
    d = _design_of(SMALL, truth, systems, rng)
    v = _votes(np.unique(d.xs), truth, rng)
    sc = estimate(d, votes=v)
    cov, notes = vote_covariances(d, sc.weights, v, 0.9, False)
    assert notes
    for k in ("p", "r", "f1"):
        assert np.allclose(np.diag(cov[k]), getattr(sc, k).se ** 2, rtol=1e-6)


@pytest.mark.parametrize("with_votes", [False, True])
def test_covariances_from_the_fit_s_kept_parts_equal_a_second_fit(with_votes):
    """``estimate(..., linear=True)`` keeps the fit's linear parts (the service scores so): the covariances from
    them equal those of a fit of their own, so the scoring does not fit twice."""
    from unpooled.core.estimators.paired import covariances
    from unpooled.core.simulate.ranks import _votes

    rng = np.random.default_rng(5)
    truth, systems = make_systems(SMALL, rng)
    d = _design_of(SMALL, truth, systems, rng)
    v = _votes(np.unique(d.xs), truth, rng) if with_votes else None
    kept, fresh = estimate(d, votes=v, linear=True), estimate(d, votes=v)
    assert kept.linear is not None and fresh.linear is None
    a, b = covariances(d, kept, votes=v), covariances(d, fresh, votes=v)
    for k in ("p", "r", "f1"):
        assert np.allclose(a.cov[k], b.cov[k], rtol=1e-12, atol=1e-15)


def test_bonferroni_beyond_the_max_t_bound(monkeypatch):
    from scipy.stats import norm

    from unpooled.core import ranking

    monkeypatch.setattr(ranking, "MAX_TABLE_PAIRS", 2)
    p = ranking.pairwise([0.1, 0.2, 0.3], np.eye(3) * 1e-3)
    assert p.diff.method == "bonferroni" and np.isclose(p.critical, norm.ppf(1 - 0.1 / 6))
