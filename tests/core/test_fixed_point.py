"""SQUAREM (core/annotation/fixed_point.py) and Dawid-Skene run to its fixed point (confusion.ds_fit)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.annotation.confusion import VerifyAnswers, ds_fit
from unpooled.core.annotation.fixed_point import squarem


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0.5, 0.9995), b=st.lists(st.floats(-5, 5), min_size=1, max_size=6))
def test_squarem_reaches_the_fixed_point_of_a_slow_contraction(rate, b):
    b = np.array(b)
    x, n = squarem(lambda x: rate * x + (1 - rate) * b, np.zeros_like(b), tol=1e-10)
    np.testing.assert_allclose(x, b, atol=1e-7)
    assert n < 50  # plain iteration: log(1e-10) / log(rate) steps, 46,000 at 0.9995


def test_squarem_stops_at_max_steps_on_a_map_without_a_fixed_point():
    x, n = squarem(lambda x: x + 1.0, np.zeros(1), max_steps=25)
    assert 25 <= n <= 27 and x[0] >= 25


def _weak_crowd(seed=0, items=3000, controls=100, workers=10):
    """Two strata: easy (0.97/0.07), hard (0.75/0.45: sensitivity minus false-positive rate 0.30); items half hard,
    correct 0.8 (easy) and 0.4 (hard); 3 answers an item; gold controls half correct, in the items' mix."""
    rng = np.random.default_rng(seed)
    rates = np.array([[0.97, 0.07], [0.75, 0.45]])
    h = np.r_[rng.integers(0, 2, items), rng.integers(0, 2, controls)]
    f = np.r_[rng.random(items) < np.where(h[:items] == 0, 0.8, 0.4), np.arange(controls) % 2 == 0]
    item = np.repeat(np.arange(items + controls), 3)
    worker = np.concatenate([rng.choice(workers, 3, replace=False) for _ in range(items + controls)])
    p_yes = np.where(f[item], rates[h[item], 0], rates[h[item], 1])
    yes = (rng.random(len(item)) < p_yes).astype(np.int64)
    control = np.r_[np.full(items, -1), f[items:].astype(np.int64)]
    keys = [str(i) for i in range(items + controls)]
    return VerifyAnswers(item, worker, yes, keys, control, workers, stratum=h, strata=2)


def test_dawid_skene_runs_to_its_fixed_point_where_the_crowd_is_weak():
    """A stop on the log-likelihood's relative change (1e-7) left the hard stratum's rates along the likelihood's
    flat ridge: 0.001-0.04 from the fixed point in these three worlds, enough to move precision by points."""
    for seed in range(3):
        a = _weak_crowd(seed)
        s, e, post = ds_fit(a, clamp_controls=True)
        s_far, e_far, post_far = ds_fit(a, clamp_controls=True, tol=1e-12, max_iter=200_000)
        np.testing.assert_allclose(s, s_far, atol=1e-6)
        np.testing.assert_allclose(e, e_far, atol=1e-6)
        np.testing.assert_allclose(post, post_far, atol=1e-5)
        # probabilities, finite rates
        assert np.all((post >= 0) & (post <= 1)) and np.isfinite(s).all() and np.isfinite(e).all()
