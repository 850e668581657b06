import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.errors import InvalidInputError
from unpooled.core.ranking import independent_cov, pairwise, rank_intervals


def test_by_hand():
    rk = rank_intervals([0.5, 0.9, 0.85], np.diag([4e-4, 4e-4, 4e-4]))
    assert rk.order == [1, 2, 0]
    assert rk.rank.tolist() == [3, 1, 1] and rk.group.tolist() == [2, 1, 1]
    assert rk.rank_lo.tolist() == [3, 1, 1] and rk.rank_hi.tolist() == [3, 2, 2]
    # NaN last, in a group of its own, ranks after every system with a value
    rk = rank_intervals([0.9, np.nan, 0.1], np.diag([1e-4, np.nan, 1e-4]))
    assert rk.order == [0, 2, 1] and rk.rank.tolist() == [1, 3, 2]
    assert (rk.rank_lo[1], rk.rank_hi[1]) == (3, 3)


def test_covariance_decides_what_marginal_variances_cannot():
    # two systems 2 points apart, se 2 points each: independent, no decision; correlated 0.99, a clear one
    v = [0.50, 0.52]
    indep = rank_intervals(v, np.diag([4e-4, 4e-4]))
    corr = rank_intervals(v, 4e-4 * np.array([[1, 0.99], [0.99, 1]]))
    assert indep.tied.all() and indep.rank_lo.tolist() == [1, 1]
    assert not corr.tied.any() and corr.rank.tolist() == [2, 1] and corr.better[1, 0]
    assert corr.pairs.diff.se[0] == pytest.approx(np.sqrt(2 * 4e-4 * 0.01))


def test_max_t_critical_value_between_single_and_bonferroni():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6))
    p = pairwise(rng.random(6), A @ A.T / 100)
    K = 15
    from scipy.stats import norm
    assert norm.ppf(0.95) < p.critical < norm.ppf(1 - 0.1 / (2 * K)) + 0.05
    assert p.diff.method == "max-t"


def test_exact_differences():
    # se 0 (a system drawn completely, labels shared): a real difference decides, round-off does not
    S = np.full((3, 3), 1e-4)
    p = pairwise([0.5, 0.5 + 1e-16, 0.6], S)
    assert p.diff.se.tolist() == [0.0, 0.0, 0.0] and p.sign.tolist() == [0, -1, -1]


def test_bad_input_names_the_field():
    with pytest.raises(InvalidInputError, match="cov"):
        rank_intervals([0.1, 0.2], np.eye(3))
    with pytest.raises(InvalidInputError, match="values"):
        rank_intervals(np.zeros((2, 2)), np.eye(2))
    with pytest.raises(InvalidInputError, match="confidence"):
        pairwise([0.1, 0.2], np.eye(2), 1.5)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(0, 2 ** 31 - 1), st.floats(1e-5, 1e-2))
def test_rank_intervals_are_consistent(m, seed, scale):
    rng = np.random.default_rng(seed)
    v = np.round(rng.random(m), 2)
    A = rng.normal(size=(m, m))
    rk = rank_intervals(v, scale * A @ A.T, draws=500)
    pos = np.empty(m, int)
    pos[rk.order] = np.arange(1, m + 1)
    # each system's place on the board lies in its rank interval; groups are runs of the order
    assert np.all((rk.rank_lo <= pos) & (pos <= rk.rank_hi))
    assert np.all(np.diff(rk.group[rk.order]) >= 0) and rk.group.min() == 1
    assert np.all(rk.rank <= pos)  # (a group chains: its competition rank may lie below a rank interval)
    # a significant difference has the sign of the estimates
    pr = rk.pairs
    assert np.all(pr.sign * (v[pr.i] - v[pr.j]) >= 0)
    # across a group boundary every system above beats every system below
    for a in range(m):
        for b in range(m):
            if rk.group[a] < rk.group[b]:
                assert rk.better[a, b]


def test_independent_cov_from_intervals():
    cov = independent_cov([0.4, 0.5], [0.6, 0.9], 0.90)
    z = 1.6448536269514722
    assert np.allclose(np.diag(cov), [(0.2 / (2 * z)) ** 2, (0.4 / (2 * z)) ** 2]) and cov[0, 1] == 0


def _critical_by_gathering(cov, i, j, se, confidence, draws=4000, seed=0):
    """The max-|t| quantile as first written: every live pair's |Z_i - Z_j|/s gathered at once."""
    live = se > 1e-12
    w, E = np.linalg.eigh((cov + cov.T) / 2)
    root = E * np.sqrt(np.clip(w, 0.0, None))
    rng = np.random.default_rng(seed)
    il, jl, sl = i[live], j[live], se[live]
    top = np.empty(draws)
    step = max(1, int(4_000_000 // max(int(live.sum()), len(cov))))
    for a in range(0, draws, step):
        Z = rng.standard_normal((min(step, draws - a), len(cov))) @ root.T
        top[a:a + len(Z)] = np.max(np.abs(Z[:, il] - Z[:, jl]) / sl, axis=1)
    return float(np.quantile(top, confidence))


@settings(max_examples=25, deadline=None)
@given(m=st.integers(2, 60), seed=st.integers(0, 2**31 - 1), exact=st.integers(0, 5))
def test_critical_value_by_rows_is_the_gathered_one_to_the_bit(m, seed, exact):
    """The row-wise maxima (each system against those after it, dead pairs at an infinite s) give the quantile of
    the gathered pairs to the last bit: a maximum does not depend on the order it is taken in."""
    from unpooled.core.ranking import critical_value

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, m + 3))
    cov = A @ A.T * 1e-4
    for k in range(min(exact, m - 1)):  # systems with the same output: their difference is exact
        cov[k + 1], cov[:, k + 1] = cov[k], cov[:, k]
    i, j = np.triu_indices(m, 1)
    se = np.sqrt(np.maximum(cov[i, i] + cov[j, j] - 2 * cov[i, j], 0.0))
    c, method = critical_value(cov, i, j, se, 0.9, draws=500, seed=seed % 7)
    assert method == "max-t"
    if (se > 1e-12).any():
        assert c == _critical_by_gathering(cov, i, j, se, 0.9, draws=500, seed=seed % 7)


def test_critical_value_memo_keeps_it_under_every_input():
    from unpooled.core.ranking import critical_value

    class Memo(dict):
        def set(self, key, value):
            self[key] = value

    rng = np.random.default_rng(3)
    A = rng.standard_normal((8, 10))
    cov = A @ A.T * 1e-4
    i, j = np.triu_indices(8, 1)
    se = np.sqrt(cov[i, i] + cov[j, j] - 2 * cov[i, j])
    memo = Memo()
    first = critical_value(cov, i, j, se, 0.9, memo=memo)
    assert len(memo) == 1 and critical_value(cov, i, j, se, 0.9, memo=memo) == first
    (key,) = memo
    memo[key] = (99.0, "max-t")  # a kept value is what is returned: the draws are not made again
    assert critical_value(cov, i, j, se, 0.9, memo=memo) == (99.0, "max-t")
    # any other input is another entry
    critical_value(cov, i, j, se, 0.95, memo=memo)
    critical_value(cov, i, j, se, 0.9, seed=1, memo=memo)
    critical_value(cov * 2, i, j, se * np.sqrt(2), 0.9, memo=memo)
    assert len(memo) == 4
    # pairwise and rank_intervals pass it on
    v = np.linspace(0.3, 0.6, 8)
    assert pairwise(v, cov, 0.9, memo=memo).critical == 99.0
    assert rank_intervals(v, cov, 0.9, memo=memo).pairs.critical == 99.0
