"""Adaptive sample size: the binomial case by hand, reuse, monotonicity, recall's exhaustive size."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import distribution_matrix, make_design
from unpooled.core.estimators.adaptive import exhaustive_needed, plan_labels, precision_variance

Z90 = norm.ppf(0.95)


def empty_design(systems, U):
    P = distribution_matrix(systems, U)
    return make_design(P, np.array([], int), np.array([], int), np.array([]), np.zeros((len(systems), 0), bool))


def test_lone_system_matches_the_binomial_formula():
    d = empty_design([np.arange(50)], 50)
    for eps in (0.1, 0.05, 0.03):
        plan = plan_labels(d, 0, epsilon=eps)
        # prior 0.5 (nothing known), q = p: Var = 0.25 / n
        assert plan.draws == int(np.ceil(0.25 / (eps / Z90) ** 2))
        assert plan.predicted_var <= plan.target_var


def test_labels_already_collected_are_reused():
    U = 200
    rng = np.random.default_rng(1)
    truth = rng.random(U) < 0.7
    systems = [np.arange(U), np.arange(U)]
    P = distribution_matrix(systems, U)
    xs = rng.integers(0, U, 400)
    d = make_design(P, np.zeros(400, int), xs, truth[xs].astype(float), np.zeros((2, 0), bool))
    plan = plan_labels(d, 1, epsilon=0.05)
    assert plan.draws == 1  # a copy of a well-labelled system needs (almost) nothing new
    alone = plan_labels(empty_design([np.arange(U)], U), 0, epsilon=0.05)
    assert alone.draws > 200


def test_variance_decreases_in_n():
    U = 300
    systems = [np.arange(0, 200), np.arange(100, 300)]
    rng = np.random.default_rng(2)
    P = distribution_matrix(systems, U)
    xs = rng.integers(0, 200, 100)
    d = make_design(P, np.zeros(100, int), xs, (rng.random(100) < 0.5).astype(float), np.zeros((2, 0), bool))
    lab = np.full(U, np.nan)
    lab[xs] = d.f
    v = [precision_variance(d, 1, n, lab, 0.5) for n in (1, 2, 5, 10, 50, 200, 1000)]
    assert all(a > b for a, b in zip(v, v[1:]))


def test_expected_new_labels_counts_distinct_unlabelled():
    d = empty_design([np.arange(10)], 10)
    plan = plan_labels(d, 0, target_var=0.25 / 40)  # 40 draws over 10 instances
    assert plan.draws == 40
    assert plan.expected_new_labels == pytest.approx(10 * (1 - 0.9 ** 40))


def test_exhaustive_needed():
    # nu known exactly: n0 = nu^2 theta (1 - theta) / target
    eps = 0.05
    n0 = exhaustive_needed(0.5, 0.8, 0.0, epsilon=eps)
    assert n0 == np.ceil(0.64 * 0.25 / (eps / Z90) ** 2)
    assert exhaustive_needed(0.5, 0.8, 1.0, epsilon=eps) == float("inf")


def test_arguments_checked():
    d = empty_design([np.arange(5)], 5)
    with pytest.raises(InvalidInputError, match="give exactly one"):
        plan_labels(d, 0)
    with pytest.raises(InvalidInputError, match="epsilon: expected a half-width"):
        plan_labels(d, 0, epsilon=2.0)
