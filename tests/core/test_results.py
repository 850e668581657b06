"""The one result type (:mod:`unpooled.core.estimators.results`)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from unpooled.core.estimators.results import ConfidenceInterval, Estimate

prob = st.floats(0, 1, allow_nan=False)


@given(st.lists(st.tuples(prob, prob, prob), min_size=1, max_size=8))
def test_an_array_estimate_is_its_systems_scalar_estimates(rows):
    v = np.array([r[0] for r in rows])
    lo = np.minimum(v, [r[1] for r in rows])
    hi = np.maximum(v, [r[2] for r in rows])
    est = Estimate.of(v, v / 10, lo, hi, level=0.9, interval="wilson", n=np.arange(len(v)), method="joint-balance")
    assert len(est) == len(rows) and est.defined
    for i in range(len(rows)):
        one = est[i]
        assert (one.value, one.lo, one.hi, one.n) == (v[i], lo[i], hi[i], i)
        assert (one.method, one.interval.method, one.interval.level) == ("joint-balance", "wilson", 0.9)
        d = one.to_dict()
        assert d["value"] == v[i] and d["lo"] <= d["value"] <= d["hi"] and d["n"] == i
        assert bool(one.interval.contains(v[i]))


def test_undefined_estimates_say_why_and_give_no_number():
    e = Estimate.undefined("no verified draw yet", "capture", 0.9)
    assert not e.defined and e.interval.method == "none"
    d = e.to_dict(digits=6)
    assert d["value"] is None and d["lo"] is None and d["reason"] == "no verified draw yet" and d["n"] == 0
    assert d["method"] == "capture"


def test_rounding_counts_and_bad_interval_methods():
    e = Estimate(1 / 3, 0.01, ConfidenceInterval(0.3, 0.37, 0.9, "hull"), 12.5, "document-ratio")
    assert e.to_dict(digits=3)["value"] == 0.333 and e.to_dict()["n"] == 12.5
    with pytest.raises(ValueError, match="method: expected one of"):
        ConfidenceInterval(0, 1, 0.9, "guess")
    with pytest.raises(TypeError, match="array estimate"):
        Estimate.of(np.ones(2), np.zeros(2), np.ones(2), np.ones(2), level=0.9, interval="wilson", n=1,
                    method="x").to_dict()
    assert math.isclose(e.interval.width, 0.07)
