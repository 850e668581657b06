"""Exact checks by enumeration of every possible sample on small worlds, and estimator properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import distribution_matrix, estimate, make_design, sampling_distribution

# tiny designs have few draws per system: the degeneracy warning is expected here
pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")

# universe of 5 instances; instance 1 and 4 are false
TRUTH = np.array([1, 0, 1, 1, 0], dtype=float)
SYSTEMS = [np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([2, 3, 4])]
PRED = np.array([0, 0, 1, 1, 2])  # predicates, for a non-uniform (relation-level) p_i
SUBJ = np.array([0, 1, 1, 2, 2])
FILL = np.array([0, 1, 2, 3, 4])
Y = np.flatnonzero(TRUTH)  # true instances (p0 uniform over them)


def member(systems, U=5):
    M = np.zeros((len(systems), U), bool)
    for j, s in enumerate(systems):
        M[j, s] = True
    return M


def _count_vectors(k: int, size: int):
    """Every way to put k draws into ``size`` cells."""
    for cut in itertools.combinations(range(k + size - 1), size - 1):
        bounds = (-1, *cut, k + size - 1)
        yield [bounds[i + 1] - bounds[i] - 1 for i in range(size)]


def _multinomial(counts, probs) -> float:
    return math.factorial(sum(counts)) / math.prod(math.factorial(c) for c in counts) * math.prod(
        p ** c for p, c in zip(probs, counts))


def enumerate_expectation(P, n, n0, fn, systems=SYSTEMS):
    """E[fn(design)] exactly: every multinomial outcome of n[j] draws from p_j and n0 from p0.

    The estimators depend on the draws only through their counts, so enumerating count
    vectors (with multinomial probabilities) is the same as enumerating ordered samples.
    """
    m = P.shape[0]
    M = member(systems)
    rows = [np.asarray(P[j].todense()).ravel() for j in range(m)]
    supports = [np.flatnonzero(r) for r in rows]
    per_system = [list(_count_vectors(n[j], len(supports[j]))) for j in range(m)]
    y_counts = list(_count_vectors(n0, len(Y))) if n0 else [[0] * len(Y)]
    total = prob_sum = 0.0
    for combo in itertools.product(*per_system, y_counts):
        prob = 1.0
        src, xs = [], []
        for j in range(m):
            prob *= _multinomial(combo[j], rows[j][supports[j]])
            for inst, c in zip(supports[j], combo[j]):
                src += [j] * c
                xs += [inst] * c
        if n0:
            prob *= _multinomial(combo[m], [1 / len(Y)] * len(Y))
        y0 = np.repeat(Y, combo[m])
        xs = np.array(xs, dtype=int)
        d = make_design(P, np.array(src, dtype=int), xs, TRUTH[xs], M[:, y0])
        total += prob * fn(d)
        prob_sum += prob
    assert prob_sum == pytest.approx(1.0)
    return total


def true_precision(P):
    return np.asarray(P @ TRUTH).ravel()


def true_recall(systems=SYSTEMS):
    M = member(systems)
    return M[:, Y].mean(axis=1)


@pytest.mark.parametrize("level", ["instance", "relation", "entity"])
@pytest.mark.parametrize("weights", ["heuristic", "balance"])
def test_joint_precision_is_exactly_unbiased(level, weights):
    P = distribution_matrix(SYSTEMS, 5, level=level, predicate=PRED, subject=SUBJ, fill=FILL)
    n = [2, 1, 2]
    got = enumerate_expectation(P, n, 0, lambda d: estimate(d, weights=weights).p)
    np.testing.assert_allclose(got, true_precision(P), atol=1e-12)


def test_simple_precision_and_recall_are_exactly_unbiased():
    P = distribution_matrix(SYSTEMS, 5, level="relation", predicate=PRED)
    exp_p = enumerate_expectation(P, [2, 1, 1], 2, lambda d: estimate(d, estimator="simple").p)
    exp_r = enumerate_expectation(P, [2, 1, 1], 2, lambda d: estimate(d, estimator="simple").r)
    np.testing.assert_allclose(exp_p, true_precision(P), atol=1e-12)
    np.testing.assert_allclose(exp_r, true_recall(), atol=1e-12)


def test_pool_recall_theta_is_exactly_unbiased():
    P = distribution_matrix(SYSTEMS, 5)
    exp_theta = enumerate_expectation(P, [1, 1, 1], 2, lambda d: estimate(d, weights="balance").theta)
    pool = member(SYSTEMS).any(axis=0)
    np.testing.assert_allclose(exp_theta, pool[Y].mean(), atol=1e-12)


def test_joint_recall_is_consistent_with_shrinking_bias():
    """nu-hat is a ratio estimator: biased, with a bias of order 1/n that vanishes (Theorem 2 says
    "unbiased"; it is only consistent). Exact expectations for n = 2, 4, 8 draws per system."""
    systems = SYSTEMS[:2]
    P = distribution_matrix(systems, 5)
    M = member(systems)
    pool = M.any(axis=0)
    nu_true = M[:, Y][:, pool[Y]].mean(axis=1)
    bias = {}
    for k in (2, 4, 8):
        got = enumerate_expectation(P, [k, k], 1, lambda d: estimate(d, weights="balance").nu, systems)
        bias[k] = np.abs(got - nu_true).max()
    assert bias[2] > bias[4] > bias[8] > 0
    assert 8 * bias[8] < 1.5 * 2 * bias[2]  # n * bias stays bounded: O(1/n)


def test_identical_systems_reduce_to_the_pooled_mean():
    """If every system shares one p, the joint estimate is the plain mean of all labels (method.md §2.2)."""
    systems = [np.array([0, 1, 2, 3])] * 3
    P = distribution_matrix(systems, 5)
    rng = np.random.default_rng(3)
    xs = rng.choice(4, size=12)
    src = np.repeat([0, 1, 2], [3, 4, 5])
    d = make_design(P, src, xs, TRUTH[xs], member(systems)[:, Y])
    for w in ("heuristic", "balance"):
        np.testing.assert_allclose(estimate(d, weights=w).p, TRUTH[xs].mean())


def test_sampling_distributions_hand_computed():
    # relation level: predicates [a, a, b] -> 1/2 * 1/2, 1/2 * 1/2, 1/2 * 1
    np.testing.assert_allclose(sampling_distribution(3, level="relation", predicate=[5, 5, 7]), [0.25, 0.25, 0.5])
    # entity level, subjects [x, y, y, y]
    np.testing.assert_allclose(sampling_distribution(4, level="entity", subject=[1, 2, 2, 2]), [0.5, 1 / 6, 1 / 6, 1 / 6])
    # subj-rel: u(s) = distinct fills of s; weights u/(n(s) n(r)), normalised
    p = sampling_distribution(3, level="subj-rel", subject=[1, 1, 2], predicate=[0, 1, 1], fill=[10, 11, 12])
    w = np.array([2 / (2 * 1), 2 / (2 * 2), 1 / (1 * 2)])
    np.testing.assert_allclose(p, w / w.sum())
    with pytest.raises(InvalidInputError, match="level: expected one of"):
        sampling_distribution(2, level="nope")
    with pytest.raises(InvalidInputError, match="predicate: required for level 'relation'"):
        sampling_distribution(2, level="relation")


def test_design_validation_messages():
    P = distribution_matrix(SYSTEMS, 5)
    g0 = member(SYSTEMS)[:, Y]
    with pytest.raises(InvalidInputError, match="f: labels must be probabilities"):
        make_design(P, [0], [0], [1.5], g0)
    with pytest.raises(InvalidInputError, match=r"xs: sample 0 \(instance 3\) has p_src = 0"):
        make_design(P, [0], [3], [1.0], g0)
    with pytest.raises(InvalidInputError, match=r"src: system indices must be in \[0, 3\)"):
        make_design(P, [5], [0], [1.0], g0)
    d = make_design(P, [0, 1, 2], [0, 1, 2], [1, 0, 1], g0)
    with pytest.raises(InvalidInputError, match="weights: expected one of heuristic, balance, minvar"):
        estimate(d, weights="optimal")


# -- properties -------------------------------------------------------------------
@st.composite
def designs(draw):
    U = draw(st.integers(3, 12))
    m = draw(st.integers(1, 4))
    truth = np.array(draw(st.lists(st.booleans(), min_size=U, max_size=U)), dtype=float)
    systems = [np.array(sorted(draw(st.sets(st.integers(0, U - 1), min_size=1, max_size=U)))) for _ in range(m)]
    P = distribution_matrix(systems, U)
    src, xs = [], []
    for j, s in enumerate(systems):
        k = draw(st.integers(1, 5))
        picks = draw(st.lists(st.sampled_from(list(s)), min_size=k, max_size=k))
        src += [j] * k
        xs += picks
    ytrue = np.flatnonzero(truth)
    n0 = draw(st.integers(0, 4)) if len(ytrue) else 0
    y0 = np.array(draw(st.lists(st.sampled_from(list(ytrue)), min_size=n0, max_size=n0)) if n0 else [], dtype=int)
    M = member(systems, U)
    xs = np.array(xs)
    soft = draw(st.booleans())
    f = truth[xs] if not soft else np.clip(truth[xs] * 0.8 + 0.1, 0, 1)
    return make_design(P, np.array(src), xs, f, M[:, y0]), systems


@settings(max_examples=150, deadline=None)
@given(designs(), st.sampled_from(["simple-balance", "joint-heuristic", "joint-balance", "joint-minvar"]))
def test_intervals_hold_the_estimate_and_stay_in_unit_range(dw, how):
    d, _ = dw
    est, w = how.split("-")
    sc = estimate(d, estimator=est, weights=w)
    for v, (lo, hi) in ((sc.p, sc.p_ci), (sc.r, sc.r_ci), (sc.f1, sc.f1_ci)):
        assert np.all((0 <= lo) & (lo <= np.clip(v, 0, 1) + 1e-12) & (np.clip(v, 0, 1) <= hi + 1e-12) & (hi <= 1))
        assert np.all(np.isfinite(v))


@settings(max_examples=80, deadline=None)
@given(designs(), st.randoms(use_true_random=False))
def test_order_of_draws_does_not_matter(dw, rnd):
    d, _ = dw
    perm = np.arange(len(d.src))
    rnd.shuffle(perm)
    d2 = make_design(d.P, d.src[perm], d.xs[perm], d.f[perm], d.g0, d.v0, d.p0)
    a, b = estimate(d), estimate(d2)
    np.testing.assert_allclose(a.p, b.p, atol=1e-12)
    np.testing.assert_allclose(a.r, b.r, atol=1e-12)
    np.testing.assert_allclose(a.p_se, b.p_se, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(designs())
def test_same_seed_same_bootstrap(dw):
    d, _ = dw
    a = estimate(d, bootstrap=50, rng=7).boot
    b = estimate(d, bootstrap=50, rng=7).boot
    for k in a:
        np.testing.assert_array_equal(a[k][0], b[k][0])
