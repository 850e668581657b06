"""Adaptive sample size: the binomial case by hand, reuse, monotonicity, recall's exhaustive size."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import distribution_matrix, make_design
from unpooled.core.estimators.adaptive import (
    exhaustive_needed,
    next_draws,
    plan_labels,
    precision_variance,
    unlabelled_prior,
)

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


def test_the_unlabelled_prior_comes_from_own_draws_where_no_other_system_drew():
    # system 0 drew instances 0-3; system 1 (support 0-9) drew 2, 3 (shared) and 5, 6, 7 (alone): 1 of 3 correct
    P = distribution_matrix([np.arange(4), np.arange(10)], 10)
    src = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    xs = np.array([0, 1, 2, 3, 2, 3, 5, 6, 7])
    f = np.array([1, 1, 1, 1, 1, 1, 1, 0, 0], float)
    d = make_design(P, src, xs, f, np.zeros((2, 0), bool))
    assert unlabelled_prior(d, 1) == pytest.approx((1 + 1) / (3 + 2))
    assert unlabelled_prior(d, 0) == pytest.approx((2 + 1) / (2 + 2))  # instances 0 and 1: system 1 did not draw them
    # before its own draws a new system's prior is 1/2, whatever the labels others left on its support
    d0 = make_design(P, src[:4], xs[:4], f[:4], np.zeros((2, 0), bool))
    assert unlabelled_prior(d0, 1) == 0.5
    assert plan_labels(d0, 1, epsilon=0.05).prior == 0.5


def test_target_of_own_draws_is_the_variance_of_that_many_own_draws():
    # a lone system with nothing labelled: precision predicted 1/2, target 0.25 / own, and q = p gives Var = 0.25 / n
    d = empty_design([np.arange(50)], 50)
    for own in (40, 100, 500):
        plan = plan_labels(d, 0, own=own)
        assert plan.precision == 0.5 and plan.target_var == pytest.approx(0.25 / own)
        assert plan.draws == own
    # labels known on the whole support: the predicted precision is theirs and the target follows it
    U = 10
    f = (np.arange(U) < 8).astype(float)  # 8 of 10 correct
    d = make_design(distribution_matrix([np.arange(U)], U), np.zeros(U, int), np.arange(U), f, np.zeros((1, 0), bool))
    plan = plan_labels(d, 0, own=100)
    assert plan.precision == pytest.approx(0.8) and plan.target_var == pytest.approx(0.8 * 0.2 / 100)


def test_next_draws_takes_a_pilot_then_the_rest():
    d = empty_design([np.arange(50)], 50)
    more, plan = next_draws(d, 0, rounds_left=2, own=101)
    assert plan.draws == 101 and more == 51  # half the plan, rounded up
    more, _ = next_draws(d, 0, rounds_left=1, own=101)
    assert more == 101  # the last round takes what is missing
    # with 60 own draws made (all correct, on instances no one else drew) the plan counts them
    rng = np.random.default_rng(3)
    xs = rng.integers(0, 50, 60)
    d = make_design(distribution_matrix([np.arange(50)], 50), np.zeros(60, int), xs, np.ones(60),
                    np.zeros((1, 0), bool))
    more, plan = next_draws(d, 0, rounds_left=1, own=101)
    assert plan.prior == pytest.approx(61 / 62) and more == max(plan.draws - 60, 0)
    with pytest.raises(InvalidInputError, match="rounds_left"):
        next_draws(d, 0, rounds_left=0, own=10)


def test_labels_outside_0_1_do_not_break_the_plan():
    # labels corrected for annotation error may leave [0, 1]: the plan clips them (was: "prior: expected a
    # probability, got 1.03" and a failed evaluation)
    U = 20
    P = distribution_matrix([np.arange(U), np.arange(U)], U)
    xs = np.arange(U)
    d = make_design(P, np.zeros(U, int), xs, np.full(U, 1.03), np.zeros((2, 0), bool), corrected_labels=True)
    plan = plan_labels(d, 1, epsilon=0.05)
    assert 0 <= plan.prior <= 1 and 0 <= plan.precision <= 1 and plan.draws >= 1


def test_the_plan_is_the_ratios_variance_not_the_sums():
    # system 1 (instances 0-19) beside system 0 (0-9, 200 draws), every instance known correct: the ratio
    # sum C / sum W is 1 whatever the draws, so one own draw meets any target.  The sum's variance (the plan before
    # the ratio) came from the spread of the weights p_1/q and asked for 779 draws at a half-width of 0.01.
    U = 20
    P = distribution_matrix([np.arange(10), np.arange(U)], U)
    xs = np.random.default_rng(0).integers(0, 10, 200)
    d = make_design(P, np.zeros(200, int), xs, np.ones(200), np.zeros((2, 0), bool))
    known = np.ones(U)
    assert [precision_variance(d, 1, n, known, 0.5) for n in (1, 10, 100)] == pytest.approx([0, 0, 0], abs=1e-15)
    assert plan_labels(d, 1, epsilon=0.01, labelled=known).draws == 1


def test_the_plans_variance_is_the_ratios_linear_part_over_the_own_draws_outcomes():
    # no other draws, system 1 (instances 0-3, p = 0.1, 0.2, 0.3, 0.4) beside system 0 (instances 0-1), labels
    # 1, 0, 1 known and instance 3 unknown (prior 0.25): with n own draws q = p_1 on the support, the weights are 1/n
    # a draw, the ratio's precision is sum p E f = 0.1 + 0.3 + 0.4 * 0.25 = 0.5, and its variance
    # sum p E(f - 0.5)^2 / n = 0.25 / n
    P = distribution_matrix([np.arange(2), np.arange(4)], 4)
    P = P.tolil()
    P[1, :] = [0.1, 0.2, 0.3, 0.4]
    d = make_design(P.tocsr(), np.array([], int), np.array([], int), np.array([]), np.zeros((2, 0), bool))
    lab = np.array([1.0, 0.0, 1.0, np.nan])
    for n in (1, 7, 40):
        assert precision_variance(d, 1, n, lab, 0.25) == pytest.approx(0.25 / n)
