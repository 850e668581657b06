"""The estimator from crowd votes (core/estimators/noisy.py): hand cases, limits and invariants."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import estimate, make_design
from unpooled.core.estimators.noisy import crowd_votes, kappa, posterior, prevalence


def _design(sizes, draws, rng, f=None, n0=20):
    """Systems with disjoint instance blocks (instance-level p_i), ``draws`` own draws each."""
    U = sum(sizes)
    rows, cols, vals, items, off = [], [], [], [], 0
    for i, n in enumerate(sizes):
        it = np.arange(off, off + n)
        items.append(it)
        rows += [i] * n
        cols += it.tolist()
        vals += [1 / n] * n
        off += n
    P = sp.csr_matrix((vals, (rows, cols)), shape=(len(sizes), U))
    src = np.repeat(np.arange(len(sizes)), draws)
    xs = np.concatenate([rng.choice(it, draws) for it in items])
    f = rng.integers(0, 2, U).astype(float) if f is None else f
    true = np.flatnonzero(f == 1)
    y0 = rng.choice(true, n0) if len(true) else np.zeros(0, int)
    g0 = np.array([np.isin(y0, it) for it in items])
    return make_design(P, src, xs, f[xs], g0), f, items


def _votes(items_u, f, rng, *, k=3, W=6, acc=0.8, sens=None, fpr=None, U=None, reps=0):
    it = np.repeat(items_u, k)
    wk = np.concatenate([rng.choice(W, k, replace=False) for _ in items_u]) if len(items_u) else np.zeros(0, int)
    correct = rng.random(len(it)) < acc
    yes = np.where(correct, f[it] == 1, f[it] == 0)
    s = np.full(W, acc) if sens is None else sens
    e = np.full(W, 1 - acc) if fpr is None else fpr
    sr = er = None
    if reps:
        sr = np.clip(s[None, :] + rng.normal(0, 0.03, (reps, W)), 0.01, 0.99)
        er = np.clip(e[None, :] + rng.normal(0, 0.03, (reps, W)), 0.01, 0.99)
    return crowd_votes(it, wk, yes, s, e, sr, er, n_items=U)


def test_kappa_limits():
    rho = 0.3
    assert kappa(np.inf, rho) == pytest.approx(1 / rho)
    assert kappa(-np.inf, rho) == pytest.approx(-1 / (1 - rho))
    assert kappa(0.0, rho) == 0.0
    # the posterior at prior rho: rho e^lam / (rho e^lam + 1 - rho)
    assert posterior(np.log(4.0), 0.5) == pytest.approx(0.8)


def test_score_has_expectation_zero_at_the_true_prevalence():
    """sum_v P(v) kappa(lambda(v), rho) = 0 when P(v) is the mixture at rho (three workers, different confusions)."""
    s = np.array([0.9, 0.7, 0.6])
    e = np.array([0.2, 0.1, 0.45])
    for rho in (0.05, 0.4, 0.93):
        tot = 0.0
        for v in itertools.product((0, 1), repeat=3):
            v = np.array(v)
            l1 = np.prod(np.where(v, s, 1 - s))
            l0 = np.prod(np.where(v, e, 1 - e))
            tot += (rho * l1 + (1 - rho) * l0) * kappa(np.log(l1 / l0), rho)
        assert abs(tot) < 1e-12


def test_prevalence_hand_cases():
    # one item, votes worth a likelihood ratio of 4, weight 1: l'(rho) = 3 / (1 + 3 rho) > 0 -> rho = 1
    rho, _ = prevalence(np.array([[1.0]]), np.array([np.log(4.0)]))
    assert rho[0] == 1.0
    # items with ratios 4 and 1/4, equal weights: symmetric, rho = 1/2
    rho, J = prevalence(np.array([[1.0, 1.0]]), np.log(np.array([4.0, 0.25])))
    assert rho[0] == pytest.approx(0.5)
    k = kappa(np.log(np.array([4.0, 0.25])), 0.5)
    assert J[0] == pytest.approx((k ** 2).sum())
    # EM fixed point: rho = mean posterior
    lam = np.log(np.array([9.0, 3.0, 0.5, 0.1, 2.0]))
    w = np.array([[1.0, 2.0, 1.0, 0.5, 1.5]])
    rho, _ = prevalence(w, lam)
    assert rho[0] == pytest.approx((w[0] * posterior(lam, rho[0])).sum() / w.sum(), abs=1e-10)
    # a row without weight is undefined
    rho, _ = prevalence(np.zeros((1, 3)), lam[:3])
    assert np.isnan(rho[0])


@pytest.mark.parametrize("spread, atol", [(0.05, 1e-5), (0.3, 1e-5), (1.0, 1e-4)])
def test_refits_from_a_start_find_the_maximisers_or_continue_past_a_bound(spread, atol):
    """Replicates' refits by Newton steps from the point fit (``start``) give the searched maximisers where these
    are inside (0, 1), and where a replicate's maximiser is a bound, the bound plus one Newton step of the
    likelihood continued past it, :math:`b + \\ell'(b)/J(b)`: rows starting inside, at a bound, and rows whose
    replicate's log ratios are all of one sign; a row without weight stays undefined.  ``spread``: how far the
    replicates' log ratios are from the point's (1.0: the confusions hardly known); ``atol``: the steps stop below
    ``REFIT_TOL`` (1e-3), leaving an error of the order of the last step squared."""
    rng = np.random.default_rng(5)
    K = 40
    M = rng.random((6, K)) * (rng.random((6, K)) < 0.7)
    lam = rng.normal(0.5, 1.5, K)
    lam_rep = lam[None, :] + rng.normal(0, spread, (8, K))
    lam_rep[3] = -np.abs(lam_rep[3]) - 1  # every vote leans to no: maximiser 0 for every row
    lam_rep[5] = np.abs(lam_rep[5]) + 1  # every vote leans to yes: maximiser 1
    M[4] = 0.0  # a row without weight
    start, _ = prevalence(M, lam)
    start[1] = 0.0  # at a bound
    searched, _ = prevalence(M, lam_rep, information=False)
    expect = searched.copy()
    for r in range(len(lam_rep)):
        for i in np.flatnonzero((searched[r] == 0) | (searched[r] == 1)):
            k = kappa(lam_rep[r], searched[r, i])
            expect[r, i] += (M[i] * k).sum() / (M[i] * k * k).sum()
    refit, J = prevalence(M, lam_rep, start=start)
    assert J is None
    assert np.array_equal(np.isnan(refit), np.isnan(expect))
    np.testing.assert_allclose(refit, expect, rtol=0, atol=atol)
    assert np.all(refit[3][~np.isnan(refit[3])] < 0) and np.all(refit[5][~np.isnan(refit[5])] > 1)
    grouped, _ = prevalence(M, lam_rep, groups=np.arange(K) % 2, n_groups=2, start=np.stack([start, start], 1))
    g0, _ = prevalence(M[:, ::2], lam_rep[:, ::2], start=prevalence(M[:, ::2], lam[::2])[0])
    np.testing.assert_allclose(grouped[..., 0], g0, rtol=0, atol=atol)  # other starts: the same within the steps


def test_near_certain_votes_give_the_self_normalised_estimate():
    rng = np.random.default_rng(3)
    d, f, items = _design((40, 60), 50, rng)
    labelled = np.unique(d.xs)
    v = _votes(labelled, f, rng, acc=1 - 1e-9, sens=np.full(6, 1 - 1e-9), fpr=np.full(6, 1e-9), U=len(f))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        noisy = estimate(d, votes=v)
        plain = estimate(d, estimator="simple")
    t = (d.P[d.src, d.xs].A1 > 0)
    assert t.all()
    # precision: the Hajek form of the joint estimator (sum c f / sum c) -- for the simple estimator the same as HT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        simple_noisy = estimate(d, estimator="simple", votes=v)
    np.testing.assert_allclose(simple_noisy.p.value, plain.p.value, atol=1e-9)
    np.testing.assert_allclose(simple_noisy.r.value, plain.r.value, atol=1e-12)
    np.testing.assert_allclose(noisy.raw["p"], noisy.p.value, atol=1e-9)


def test_repeated_draws_of_few_items_do_not_shrink_the_interval():
    """Six items drawn 150 or 3,000 times carry six noisy labels: the vote variance does not fall with draws."""
    rng = np.random.default_rng(5)
    f = np.array([1, 1, 1, 1, 1, 0, 1, 0, 1, 0] + [1] * 2000, float)
    widths = []
    for draws in (150, 3000):
        P = sp.csr_matrix(np.vstack([np.r_[np.full(6, 1 / 6), np.zeros(2004)],
                                     np.r_[np.zeros(6), np.full(2004, 1 / 2004)]]))
        src = np.repeat([0, 1], draws)
        xs = np.r_[rng.integers(0, 6, draws), rng.integers(6, 2010, draws)]
        d = make_design(P, src, xs, f[xs], np.ones((2, 5), bool))
        v = _votes(np.unique(xs), f, rng, U=len(f))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = estimate(d, votes=v)
        widths.append(s.var_parts["votes"]["p"][0])
        assert s.var_parts["votes"]["p"][1] < s.var_parts["votes"]["p"][0]
    assert widths[1] > 0.5 * widths[0] > 0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), acc=st.sampled_from([0.6, 0.8, 0.95]),
       sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4))
def test_estimates_lie_in_unit_range_and_inside_their_intervals(seed, acc, sizes):
    rng = np.random.default_rng(seed)
    d, f, _ = _design(tuple(sizes), 20, rng, n0=5)
    v = _votes(np.unique(d.xs), f, rng, acc=acc, U=len(f), reps=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = estimate(d, votes=v)
    for k, (lo, hi) in (("p", (s.p.lo, s.p.hi)), ("r", (s.r.lo, s.r.hi)), ("f1", (s.f1.lo, s.f1.hi))):
        est = getattr(s, k).value
        if k != "p" and d.n0 == 0:  # no true instance (f all 0): recall and F1 undefined
            assert np.isnan(est).all() and np.isnan(lo).all() and np.isnan(hi).all(), k
            continue
        assert np.all((est >= 0) & (est <= 1)), k
        assert np.all((lo <= est + 1e-12) & (est <= hi + 1e-12)), k
        assert np.all((lo >= 0) & (hi <= 1)), k


def test_confusion_replicates_add_variance():
    rng = np.random.default_rng(11)
    d, f, _ = _design((50, 80), 60, rng)
    labelled = np.unique(d.xs)
    v = _votes(labelled, f, np.random.default_rng(1), U=len(f), reps=30)
    v0 = crowd_votes(v.item, v.worker, v.yes, v.sens, v.fpr, np.tile(v.sens, (30, 1)), np.tile(v.fpr, (30, 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = estimate(d, votes=v), estimate(d, votes=v0)
    assert np.all(a.var_parts["rates"]["p"] > 0)
    np.testing.assert_allclose(b.var_parts["rates"]["p"], 0, atol=1e-20)
    np.testing.assert_allclose(a.p.value, b.p.value)


def test_crowd_votes_validation():
    with pytest.raises(InvalidInputError, match="sens: expected rates strictly inside"):
        crowd_votes([0], [0], [1], [1.0], [0.1])
    with pytest.raises(InvalidInputError, match="worker: expected indices"):
        crowd_votes([0], [3], [1], [0.9], [0.1])
    with pytest.raises(InvalidInputError, match="yes: expected booleans"):
        crowd_votes([0], [0], [2], [0.9], [0.1])
    with pytest.raises(InvalidInputError, match="sens_rep, fpr_rep: give both"):
        crowd_votes([0], [0], [1], [0.9], [0.1], sens_rep=[[0.9]])
    rng = np.random.default_rng(0)
    d, f, _ = _design((5,), 10, rng)
    v = _votes(np.unique(d.xs), f, rng, U=len(f))
    with pytest.raises(InvalidInputError, match="bootstrap: not available with votes"):
        estimate(d, votes=v, bootstrap=10)


def test_breakdown_from_votes_agrees_with_the_whole_system():
    """One group holding every instance: the breakdown's precision, standard error and interval are the
    system's (the same estimator, from the same votes)."""
    from unpooled.core.estimators import subset_scores

    rng = np.random.default_rng(21)
    d, f, _ = _design((30, 60, 45), 40, rng)
    v = _votes(np.unique(d.xs), f, rng, U=len(f), reps=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = estimate(d, votes=v)
        for i in range(d.m):
            b = subset_scores(d, i, np.zeros(len(f), np.int64), np.zeros(d.n0, np.int64), n_groups=1,
                              weights=whole.weights, votes=v)
            assert b.p.value[0] == pytest.approx(whole.p.value[i], abs=1e-9)
            assert b.p.se[0] == pytest.approx(whole.p.se[i], rel=1e-6)
            assert b.p.lo[0] == pytest.approx(whole.p.lo[i], abs=1e-6)
            assert b.p.hi[0] == pytest.approx(whole.p.hi[i], abs=1e-6)
    # two groups: each in [0, 1] and inside its interval
    groups = (np.arange(len(f)) % 2).astype(np.int64)
    b = subset_scores(d, 1, groups, np.zeros(d.n0, np.int64), n_groups=2, votes=v, zero_division="nan")
    ok = ~np.isnan(b.p.value)
    assert np.all((b.p.lo[ok] <= b.p.value[ok]) & (b.p.value[ok] <= b.p.hi[ok]))


def test_breakdowns_sharing_the_items_parts_are_the_same():
    """``subset_scores(shared=)``: every target's breakdown, under two groupings, computes the drawn items' log ratios,
    their merges and vote patterns once; the figures are those computed alone, to the last bit; a dict kept from
    another design is not reused."""
    from unpooled.core.estimators import subset_scores

    rng = np.random.default_rng(5)
    d, f, _ = _design((30, 60, 45), 40, rng)
    v = _votes(np.unique(d.xs), f, rng, U=len(f), reps=10)
    groupings = [(np.arange(len(f)) % 3).astype(np.int64), (np.arange(len(f)) // 50).astype(np.int64)]
    truth = np.zeros(d.n0, np.int64)
    shared: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(d.m):
            for gu in groupings:
                alone = subset_scores(d, i, gu, truth, votes=v, zero_division="nan")
                kept = subset_scores(d, i, gu, truth, votes=v, zero_division="nan", shared=shared)
                for k in ("p", "r", "f1"):
                    for at in ("value", "se", "lo", "hi"):
                        np.testing.assert_array_equal(getattr(getattr(kept, k), at), getattr(getattr(alone, k), at))
        assert shared["of"][0] is d and "patterns" in shared and "lam_rep" in shared
        d2, f2, _ = _design((20, 25), 30, rng)
        v2 = _votes(np.unique(d2.xs), f2, rng, U=len(f2), reps=10)
        gu2 = np.zeros(len(f2), np.int64)
        alone = subset_scores(d2, 0, gu2, np.zeros(d2.n0, np.int64), votes=v2, zero_division="nan")
        kept = subset_scores(d2, 0, gu2, np.zeros(d2.n0, np.int64), votes=v2, zero_division="nan", shared=shared)
        np.testing.assert_array_equal(kept.p.value, alone.p.value)
        np.testing.assert_array_equal(kept.p.se, alone.p.se)
        assert shared["of"][0] is d2


@pytest.mark.parametrize("acc, lowest", [(0.9, 0.9), (0.75, 0.85)])
def test_a_precision_estimated_at_1_has_a_narrow_interval(acc, lowest):
    """Sixty items, all correct, each answered by 3 of 6 workers of known accuracy, drawn 200 times: every
    seed whose estimate is 1 gets an interval about as wide as a binomial 60 of 60 (Wilson's lower bound 0.957; 0.947 at seed 0),
    not [0.004, 1] (seed 0 at accuracy 0.9 before the expected information was used at the bound).  At the bound the observed information holds none of the contrary vote patterns the votes'
    variance weighs (their kappa is unbounded there); the expected information is used for both."""
    from unpooled.core.estimators.noisy import item_log_lr
    from unpooled.core.estimators.vote_variance import vote_patterns

    at_one = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        f = np.ones(60)
        P = sp.csr_matrix(np.full((1, 60), 1 / 60))
        xs = rng.integers(0, 60, 200)
        d = make_design(P, np.zeros(200, int), xs, f[xs], np.ones((1, 5), bool))
        v = _votes(np.unique(xs), f, rng, acc=acc, U=60)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = estimate(d, estimator="simple", votes=v)
        if s.p.value[0] < 1:
            continue
        at_one += 1
        assert s.p.lo[0] > lowest, (seed, (s.p.lo, s.p.hi))
        # the votes' variance at the bound: sum_x r(x) p(x)^2 V_x / J_exp^2 with J_exp = sum_x c(x) V_x, c(x) the
        # item's share of the draws, r(x) = c(x) / p(x) its importance ratio, p(x) = 1/60; the draws count over
        # the distinct items (estimators/finite.py): each of the k drawn items has the share 1/k
        codes = np.unique(xs)
        c = np.full(len(codes), 1 / len(codes))
        pat = vote_patterns(v, codes)
        lam = item_log_lr(v, 60)[codes]
        V = np.empty(len(codes))
        for g, (lv, p1, p0) in enumerate(pat.groups):
            items = np.flatnonzero(pat.grp == g)
            k = kappa(lv[pat.pos[items]], 1.0)
            V[items] = (k * k * p1[pat.pos[items]]).sum(-1)
        assert np.isfinite(lam).all()
        # J: the expected information, or the observed one where larger (from_votes._information_at_edges)
        J = max((c * V).sum(), (c * kappa(lam, 1.0) ** 2).sum())
        want = (c * 60 * (1 / 60) ** 2 * V).sum() / J ** 2
        assert s.var_parts["votes"]["p"][0] == pytest.approx(want, rel=1e-6)
    assert at_one >= 3


@pytest.mark.parametrize("groups", [None, 3])
def test_refits_under_replicates_are_each_replicates_refit(groups):
    """prevalence's refits under (R, K) log ratios (one pass over (pair, replicate) arrays) are the refits under
    each replicate alone, in groups too; rows at a bound continue past it in both."""
    rng = np.random.default_rng(4)
    m, K, R = 7, 60, 9
    M = rng.random((m, K)) * (rng.random((m, K)) < 0.5)
    M[0] = 0.0  # a row without items
    lam = rng.normal(1.0, 2.0, K)
    lam[:5] = np.inf  # certain votes
    g = None if groups is None else rng.integers(0, groups, K)
    kw = {} if groups is None else {"groups": g, "n_groups": groups}
    start, _ = prevalence(M, lam, **kw)
    start = np.where(np.isfinite(start), start, np.nan)
    if groups is None:
        start[1] = 1.0  # a row at a bound
    reps = lam[None, :] + rng.normal(0.0, 0.4, (R, K))
    together, _ = prevalence(M, reps, start=start, **kw)
    for r in range(R):
        alone, _ = prevalence(M, reps[r], start=start, **kw)
        np.testing.assert_allclose(together[r], alone, rtol=0, atol=1e-12)
    assert np.isnan(together[:, 0]).all()


def _overlapping_design(rng, m=5, U=150, draws=40, n0=40, complete_one=True):
    """Systems on overlapping random instance sets (one small, drawn completely), exhaustive instances in 8
    documents."""
    sets = [np.sort(rng.choice(U, rng.integers(30, 90), replace=False)) for _ in range(m - 1)]
    sets.append(np.sort(rng.choice(U, 6, replace=False)) if complete_one else sets[0])
    P = sp.csr_matrix((np.concatenate([np.full(len(s), 1 / len(s)) for s in sets]),
                       (np.repeat(np.arange(m), [len(s) for s in sets]), np.concatenate(sets))), shape=(m, U))
    n = [draws] * (m - 1) + [30 if complete_one else draws]
    src = np.repeat(np.arange(m), n)
    xs = np.concatenate([rng.choice(s, k) for s, k in zip(sets, n)])
    f = rng.integers(0, 2, U).astype(float)
    y0 = rng.choice(np.flatnonzero(f == 1), n0)
    g0 = np.array([np.isin(y0, s) & (rng.random(n0) < 0.8) for s in sets])
    return make_design(P, src, xs, f[xs], g0, y0_docs=rng.integers(0, 8, n0)), f


@pytest.mark.parametrize("weights, with_votes", [("balance", True), ("balance", False), ("heuristic", True),
                                                 ("heuristic", False)])
def test_breakdowns_of_many_jobs_at_once_are_each_alone(weights, with_votes):
    """``subset_scores_many``: every (target, grouping) job scored in one pass (one proposal, one fit of all the
    groups' prevalences and refits, one variance, one interval search) gives each job's figures alone, to 1e-9,
    with targets of different numbers of groups, a system drawn completely and groups without a draw."""
    from unpooled.core.estimators import subset_scores, subset_scores_many

    rng = np.random.default_rng(8)
    d, f = _overlapping_design(rng)
    U = len(f)
    v = _votes(np.unique(d.xs), f, rng, U=U, reps=12) if with_votes else None
    jobs = []
    for i in range(d.m):
        jobs.append((i, (np.arange(U) % 4).astype(np.int64), rng.integers(0, 4, d.n0), 4))
        gu = np.where(rng.random(U) < 0.9, rng.integers(0, 3, U), -1)
        jobs.append((i, gu, rng.integers(-1, 3, d.n0), None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        many = subset_scores_many(d, jobs, weights=weights, votes=v, zero_division="nan")
        for job, got in zip(jobs, many):
            i, gu, gt, G = job
            alone = subset_scores(d, i, gu, gt, n_groups=G, weights=weights, votes=v, zero_division="nan")
            assert got.target == i and got.n_groups == alone.n_groups and got.warnings == alone.warnings
            for k in ("p", "r", "f1"):
                for at in ("value", "se", "lo", "hi", "n"):
                    np.testing.assert_allclose(getattr(getattr(got, k), at), getattr(getattr(alone, k), at),
                                               rtol=0, atol=1e-9)
            for at in ("n_draws", "ess", "mass", "mass_hat", "n_true", "true_weight", "p_ess", "r_ess"):
                np.testing.assert_allclose(getattr(got, at), getattr(alone, at), rtol=0, atol=1e-9)
    assert subset_scores_many(d, [], votes=v) == []


def test_prevalence_and_profile_of_a_sparse_matrix_are_the_dense_ones():
    """``prevalence`` and ``profile_interval`` of a sparse M (many rows, each on a few items; merged items, replicate
    refits) are those of the dense M, row by row: the same fits on the same pairs."""
    from unpooled.core.estimators.noisy import item_merge, profile_interval

    rng = np.random.default_rng(3)
    K, m, R = 60, 40, 15
    lam = np.round(rng.normal(0, 2, K), 1)  # repeated values: items merge
    lam[:3] = [np.inf, -np.inf, 0.0]
    lam_rep = lam[None, :] + np.round(rng.normal(0, 0.2, (R, K)), 1)
    M = np.where(rng.random((m, K)) < 0.15, rng.random((m, K)), 0.0)
    M[5] = 0.0  # a row without items
    S = sp.csr_matrix(M)
    rho, J = prevalence(M, lam)
    rho_s, J_s = prevalence(S, lam, merge=item_merge(lam))
    np.testing.assert_allclose(rho_s, rho, rtol=0, atol=1e-12)
    np.testing.assert_allclose(J_s, J, rtol=0, atol=1e-9)
    rep, _ = prevalence(M, lam_rep, start=rho)
    rep_s, _ = prevalence(S, lam_rep, start=rho, merge=item_merge(lam_rep))
    np.testing.assert_allclose(rep_s, rep, rtol=0, atol=1e-12)
    var = np.where(np.isnan(rho), 0.0, 0.01)
    lo, hi = profile_interval(M, lam, np.nan_to_num(rho), J, var, 0.9)
    lo_s, hi_s = profile_interval(S, lam, np.nan_to_num(rho), J, var, 0.9)
    np.testing.assert_allclose(lo_s, lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi_s, hi, rtol=0, atol=1e-12)


def test_refits_of_many_rows_are_each_rows_alone(monkeypatch):
    """The replicates' refits of many rows at once (rows dropped once all their replicates are refitted, blocks of
    rows of a few MB) are each row's refit alone, to the bit."""
    from unpooled.core.estimators import noisy

    rng = np.random.default_rng(4)
    K, m, R = 80, 300, 20
    lam = rng.normal(0, 2, K)
    lam_rep = lam[None, :] + rng.normal(0, 0.3, (R, K))
    M = np.where(rng.random((m, K)) < 0.1, rng.random((m, K)), 0.0)
    rho, _ = prevalence(M, lam, merge=None)
    monkeypatch.setattr(noisy, "REFIT_VALUES", 200)  # blocks of a few rows
    together, _ = prevalence(sp.csr_matrix(M), lam_rep, start=rho, merge=None)
    for i in range(0, m, 37):
        alone, _ = prevalence(M[i:i + 1], lam_rep, start=rho[i:i + 1], merge=None)
        np.testing.assert_array_equal(together[:, i], alone[:, 0])


def test_kappa_offsets_give_kappa():
    """The refits' form of the score, 1/(rho + b) with b = _kappa_offsets, is kappa to rounding, certain votes
    (lambda = +-inf, kappa = 1/rho or -1/(1 - rho)) and uninformative ones (lambda = 0, kappa = 0) included, inside
    [0, 1] and past its ends (the refits continue the likelihood past a bound).  Near a pole (rho 1e-6 from 1, a
    near-certain no) both forms lose the same digits to cancellation: they agree to 1e-10 there."""
    from unpooled.core.estimators.noisy import _exp_parts, _kappa_offsets

    lam = np.array([-np.inf, -30.0, -2.0, -1e-9, 0.0, 1e-9, 0.5, 40.0, np.inf])
    b = _kappa_offsets(_exp_parts(lam))
    for rho in (1e-6, 0.01, 0.3, 0.5, 0.97, 1.0 - 1e-6, 1.05, -0.02):
        with np.errstate(divide="ignore"):
            want = kappa(lam, rho)
            got = 1.0 / (rho + b)
        np.testing.assert_allclose(got, want, rtol=1e-9 if rho == 1.0 - 1e-6 else 1e-13, atol=0)
    with np.errstate(divide="ignore"):
        assert 1.0 / (0.0 + b[-1]) == np.inf and 1.0 / (0.0 + b[0]) == -1.0  # a certain yes and a certain no at 0
