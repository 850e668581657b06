"""The least-MSE estimator with a bounded bias (core/simulate/bias_bound.py): its bias holds the bound on the whole
grid, where the maximum-likelihood estimate's does not near the bounds, at no greater error there."""

import pytest

from unpooled.core.errors import InvalidInputError
from unpooled.core.simulate.bias_bound import bias_bounded, vote_counts


def test_vote_counts_enumerates_every_split():
    got = vote_counts(3, 2)
    assert len(got) == 10 and (got.sum(1) == 3).all() and len({tuple(r) for r in got.tolist()}) == 10


def test_the_bound_holds_where_the_mle_leans():
    got = bias_bounded(30, sensitivity=0.7, false_positive_rate=0.3, bound=0.015)
    assert got["converged"] and got["max_abs_bias"] <= 0.015 + 1e-6
    rows = {r["precision"]: r for r in got["rows"]}
    assert rows[1.0]["mle_bias"] < -0.015 and rows[0.0]["mle_bias"] > 0.015  # the MLE is one-sided at the bounds
    assert abs(rows[0.5]["mle_bias"]) < 1e-6  # and unbiased in the middle (symmetric crowd)
    for P in (0.0, 0.5, 1.0):
        assert rows[P]["bounded_rmse"] <= rows[P]["mle_rmse"] + 1e-9


@pytest.mark.parametrize("kw", [dict(n=0), dict(n=500), dict(sensitivity=0.3), dict(bound=0.0), dict(votes=9)])
def test_bad_input_says_what(kw):
    args = dict(n=10, sensitivity=0.7, false_positive_rate=0.3, bound=0.01) | kw
    with pytest.raises(InvalidInputError):
        bias_bounded(**args)
