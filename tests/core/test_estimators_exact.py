"""Exact checks by enumeration of every possible sample on small worlds, and estimator properties."""

from __future__ import annotations

import itertools
import math
from operator import attrgetter

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
def test_joint_precision_numerator_and_denominator_are_exactly_unbiased(level, weights):
    """The joint precision is the ratio sum(C) / sum(W) (Hajek): its numerator, the paper's estimator, is exactly
    unbiased for the precision and its denominator for 1 (the ratio itself is consistent: the test below)."""
    from unpooled.core.estimators.joint import _terms, weight_matrix

    P = distribution_matrix(SYSTEMS, 5, level=level, predicate=PRED, subject=SUBJ, fill=FILL)
    n = [2, 1, 2]

    def sums(d):
        t = _terms(d, weight_matrix(d.P, d.n, weights))
        return np.concatenate([t.C.sum(), t.W.sum()])

    got = enumerate_expectation(P, n, 0, sums)
    np.testing.assert_allclose(got, np.concatenate([true_precision(P), np.ones(3)]), atol=1e-12)


def test_simple_precision_and_recall_are_exactly_unbiased():
    P = distribution_matrix(SYSTEMS, 5, level="relation", predicate=PRED)
    exp_p = enumerate_expectation(P, [2, 1, 1], 2, lambda d: estimate(d, estimator="simple").p.value)
    exp_r = enumerate_expectation(P, [2, 1, 1], 2, lambda d: estimate(d, estimator="simple").r.value)
    np.testing.assert_allclose(exp_p, true_precision(P), atol=1e-12)
    np.testing.assert_allclose(exp_r, true_recall(), atol=1e-12)


def test_pool_recall_theta_is_exactly_unbiased():
    P = distribution_matrix(SYSTEMS, 5)
    exp_theta = enumerate_expectation(P, [1, 1, 1], 2, lambda d: estimate(d, weights="balance").theta)
    pool = member(SYSTEMS).any(axis=0)
    np.testing.assert_allclose(exp_theta, pool[Y].mean(), atol=1e-12)


def test_joint_ratios_are_consistent_with_shrinking_bias():
    """nu-hat and the joint precision are ratio estimators: biased, with a bias of order 1/n that vanishes (Theorem
    2 says nu-hat is "unbiased"; it is only consistent). Exact expectations for n = 2, 4, 6 draws per system (n = 8
    takes twice as long as the three together; nu-hat's bias, 0.0022, continues the row 0.027, 0.012, 0.0051;
    precision's row is 0.019, 0.0075, 0.0033)."""
    systems = SYSTEMS[:2]
    P = distribution_matrix(systems, 5)
    M = member(systems)
    pool = M.any(axis=0)
    nu_true = M[:, Y][:, pool[Y]].mean(axis=1)
    bias = {"p": {}, "nu": {}}
    for k in (2, 4, 6):
        got = enumerate_expectation(
            P, [k, k], 1, lambda d: np.concatenate([(s := estimate(d, weights="balance")).p.value, s.nu]), systems)
        bias["p"][k] = np.abs(got[:2] - true_precision(P)).max()
        bias["nu"][k] = np.abs(got[2:] - nu_true).max()
    for b in bias.values():
        assert b[2] > b[4] > b[6] > 0
        assert 6 * b[6] < 1.5 * 2 * b[2]  # n * bias stays bounded: O(1/n)


def test_identical_systems_reduce_to_the_pooled_mean():
    """If every system shares one p, the joint estimate is the pooled mean of the labels (method.md §2.2), each
    system's draws counted over the distinct instances they reached (:mod:`~unpooled.core.estimators.finite`)."""
    systems = [np.array([0, 1, 2, 3])] * 3
    P = distribution_matrix(systems, 5)
    xs = np.array([0, 0, 1, 2, 2, 2, 3, 0, 1, 1, 3, 3])
    src = np.repeat([0, 1, 2], [3, 4, 5])
    d = make_design(P, src, xs, TRUTH[xs], member(systems)[:, Y])
    distinct = [TRUTH[np.unique(xs[src == j])].mean() for j in range(3)]
    pooled = np.dot([3, 4, 5], distinct) / 12
    for w in ("heuristic", "balance"):
        np.testing.assert_allclose(estimate(d, weights=w).p.value, pooled)
    assert pooled != TRUTH[xs].mean()  # the draws' plain mean counts instance 0 twice in system 0's draws


def test_a_system_drawn_completely_is_known_exactly():
    """Every instance drawn (with repeats): precision is exact and its interval a point; drawn partly, the
    finite-population correction narrows the interval but it still holds the truth (Rao–Blackwell)."""
    systems = [np.array([0, 1, 2, 3, 4])]
    P = distribution_matrix(systems, 5)
    xs = np.array([0, 1, 1, 2, 3, 4, 4, 4, 0, 2])
    d = make_design(P, np.zeros(10, int), xs, TRUTH[xs], member(systems)[:, Y])
    s = estimate(d, estimator="simple")
    assert s.p.value[0] == pytest.approx(TRUTH.mean()) and s.p.se[0] == pytest.approx(0.0, abs=1e-12)
    assert s.p.hi[0] - s.p.lo[0] < 1e-9
    # four of five instances drawn: the variance is (1 - 4/5) s^2 / 4 over the distinct ones
    xs = np.array([0, 1, 1, 2, 3, 3])
    d = make_design(P, np.zeros(6, int), xs, TRUTH[xs], member(systems)[:, Y])
    s = estimate(d, estimator="simple")
    y = TRUTH[[0, 1, 2, 3]]
    assert s.p.value[0] == pytest.approx(y.mean())
    assert s.p.se[0] ** 2 == pytest.approx((1 - 4 / 5) * y.var(ddof=1) / 4)


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
    no_truth = d.v0.sum() == 0  # no exhaustive true instance: recall (and F1) undefined, NaN with NaN bounds
    for k, v, (lo, hi) in (("p", sc.p.value, (sc.p.lo, sc.p.hi)), ("r", sc.r.value, (sc.r.lo, sc.r.hi)),
                           ("f1", sc.f1.value, (sc.f1.lo, sc.f1.hi))):
        if k != "p" and no_truth:
            assert np.isnan(v).all() and np.isnan(lo).all() and np.isnan(hi).all()
            continue
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
    np.testing.assert_allclose(a.p.value, b.p.value, atol=1e-12)
    np.testing.assert_allclose(a.r.value, b.r.value, atol=1e-12)
    np.testing.assert_allclose(a.p.se, b.p.se, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(designs())
def test_same_seed_same_bootstrap(dw):
    d, _ = dw
    a = estimate(d, bootstrap=50, rng=7).boot
    b = estimate(d, bootstrap=50, rng=7).boot
    for k in a:
        np.testing.assert_array_equal(a[k].lo, b[k].lo)


# -- the exhaustive sample: documents (cluster variance) and the support of p0 -------------------
def _scores_equal(a, b, *, exact=True):
    fields = [f"{k}.{x}" for k in ("p", "r", "f1") for x in ("value", "se", "lo", "hi")] + ["theta", "nu"]
    for k in fields:
        if exact:
            np.testing.assert_array_equal(attrgetter(k)(a), attrgetter(k)(b), err_msg=k)
        else:
            np.testing.assert_allclose(attrgetter(k)(a), attrgetter(k)(b), rtol=1e-12, atol=1e-15, err_msg=k)


@settings(max_examples=60, deadline=None)
@given(designs(), st.sampled_from(["simple", "joint"]))
def test_one_instance_per_document_is_the_independent_variance(dw, est):
    """Singleton documents with N = n0: the estimates are the independent ones, recall's variance is the
    jackknife over the instances times Student's t (documents known: _var0; the simple estimator's checked
    here), and the bootstrap is the same, bit for bit (documents drawn are instances drawn)."""
    from unpooled.core.estimators.exhaustive import t_factor, theta_variance

    d, _ = dw
    docs = [f"doc{k}" for k in range(d.n0)]
    dc = make_design(d.P, d.src, d.xs, d.f, d.g0, d.v0, d.p0, y0_docs=docs)
    assert dc.n_groups == d.n0
    a, b = estimate(d, estimator=est), estimate(dc, estimator=est)
    for k in ("p.value", "r.value", "f1.value", "p.se", "theta", "nu"):
        np.testing.assert_allclose(attrgetter(k)(a), attrgetter(k)(b), rtol=1e-12, atol=1e-15, err_msg=k)
    if est == "simple" and d.n0:
        V = d.v0.sum()
        T = d.v0 * (d.g0 - a.r.value[:, None]) / V
        want = theta_variance(T, shares=d.v0 / V) * t_factor(d.n0, 0.90)
        np.testing.assert_allclose(b.r.se ** 2, want, rtol=1e-9, atol=1e-15)
    a, b = estimate(d, estimator=est, bootstrap=30, rng=5).boot, estimate(dc, estimator=est, bootstrap=30, rng=5).boot
    for k in a:
        np.testing.assert_array_equal(a[k].lo, b[k].lo)
        np.testing.assert_array_equal(a[k].hi, b[k].hi)


@settings(max_examples=60, deadline=None)
@given(designs())
def test_p0_mask_all_true_is_the_old_result(dw):
    d, _ = dw
    same = make_design(d.P, d.src, d.xs, d.f, d.g0, d.v0, d.p0, inside=np.ones(len(d.xs), bool))
    np.testing.assert_array_equal(same.p0, d.p0)
    _scores_equal(estimate(d), estimate(same))
    from unpooled.core.estimators.exhaustive import restrict_p0

    assert restrict_p0(d, None) is d and restrict_p0(d, np.ones(len(d.xs), bool)) is d


@settings(max_examples=60, deadline=None)
@given(designs(), st.randoms(use_true_random=False))
def test_p0_zero_outside_removes_the_instance_from_pooled_recall_only(dw, rnd):
    """An instance outside p0's support leaves precision alone and drops out of nu-hat: the same
    recall as labelling its draws 0 for recall (A and B are linear in p0 f)."""
    d, _ = dw
    inside = np.array([rnd.random() < 0.7 for _ in d.xs], bool)
    out = set(d.xs[~inside].tolist())
    inside = np.array([x not in out for x in d.xs.tolist()])
    got = estimate(make_design(d.P, d.src, d.xs, d.f, d.g0, d.v0, d.p0, inside=inside))
    p0 = d.p0.copy()
    p0[list(out)] = 0.0
    ref = make_design(d.P, d.src, d.xs, d.f, d.g0, d.v0, p0)
    _scores_equal(got, estimate(ref))
    zero = make_design(d.P, d.src, d.xs, np.where(inside, d.f, 0.0), d.g0, d.v0, d.p0)
    base = estimate(d)
    np.testing.assert_allclose(got.nu, estimate(zero).nu, atol=1e-12)
    np.testing.assert_array_equal(got.p.value, base.p.value)
    np.testing.assert_array_equal(got.theta, base.theta)


_REFS = st.lists(st.tuples(st.sampled_from(["D1", "D2", "D3", "D4"]), st.integers(0, 40), st.integers(1, 9),
                           st.integers(0, 40)), max_size=12)


@settings(max_examples=150, deadline=None)
@given(_REFS, st.sets(st.sampled_from(["D1", "D2", "D3", "D4"])), st.randoms(use_true_random=False))
def test_p0_support_is_the_sentence_support_within_the_population(rows, population, rnd):
    """p0's support: the current documents' instances that the protocol found or can find (one sentence); a
    document outside the population is out whatever its sentences, and the warning counts exactly those draws."""
    from unpooled.core.estimators.exhaustive import outside_population, p0_support, within_sentence
    from unpooled.core.matching import InstanceRef

    refs = [InstanceRef(doc, s, s + n, "p", o, o + 2) for doc, s, n, o in rows]
    sentences = {"D1": ([0, 20], [20, 60]), "D2": ([0], [60])}
    found = {r.key for r in refs if rnd.random() < 0.3}
    memo: dict = {}
    got = p0_support(refs, found=found, sentences=sentences, population=population, memo=memo)
    want = [r.doc in population and (r.key in found or within_sentence(r, sentences)) for r in refs]
    assert got.tolist() == want
    assert p0_support(refs, found=found, sentences=sentences, population=population, memo=memo).tolist() == want
    assert p0_support(refs, population=population).tolist() == [r.doc in population for r in refs]
    assert p0_support(refs).all() and p0_support(refs, population=None, sentences=None).shape == (len(refs),)
    text = outside_population(refs, population)
    out = [r for r in refs if r.doc not in population]
    assert (text is None) == (not out) and outside_population(refs, None) is None
    if out:
        n, k, docs = len(out), len({r.key for r in out}), list(dict.fromkeys(r.doc for r in out))
        assert text.startswith(f"{n} labelled draw{'s' if n > 1 else ''} ({k} distinct instance{'s' if k > 1 else ''}) "
                               f"on {len(docs)} document{'s' if len(docs) > 1 else ''} outside the current corpus "
                               f"({', '.join(docs[:3])}{', ...' if len(docs) > 3 else ''}) count")


def _hajek_T(rng, m, n0):
    """Linearised Hajek values v (s - theta) / V of random weights and indicators (rows sum to 0)."""
    if n0 == 0:
        return np.zeros((m, 0))
    v = rng.random(n0) + 0.1
    S = rng.random((m, n0)) < 0.5
    theta = (S * v).sum(1) / v.sum()
    return v[None, :] * (S - theta[:, None]) / v.sum()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.integers(0, 12), st.integers(1, 6), st.integers(0, 5), st.integers(0, 2 ** 32 - 1))
def test_theta_variance_properties(m, n0, n_docs, extra, seed):
    from unpooled.core.estimators.exhaustive import theta_variance

    rng = np.random.default_rng(seed)
    T = _hajek_T(rng, m, n0)
    docs = rng.integers(0, n_docs, n0)
    N = len(set(docs.tolist())) + extra
    var = theta_variance(T, docs, N)
    assert var.shape == (m,) and np.all(var >= -1e-15)
    # a permutation of the instances (with their documents) and a renaming of the documents change nothing
    perm = rng.permutation(n0)
    np.testing.assert_allclose(theta_variance(T[:, perm], [f"d{g}" for g in docs[perm]], N), var, atol=1e-14)
    # documents without a true instance enter only through N/(N-1) (the totals of a Hajek ratio sum to 0)
    N0 = len(set(docs.tolist()))
    if N0 >= 2:
        base = theta_variance(T, docs)
        np.testing.assert_allclose(var, base * (N / (N - 1)) / (N0 / (N0 - 1)), rtol=1e-9, atol=1e-15)
    # fewer documents than are present: N is at least the number present
    np.testing.assert_array_equal(theta_variance(T, docs, 0), theta_variance(T, docs))
    # one document holding every instance: its total is 0, no information on the spread
    if n0:
        np.testing.assert_allclose(theta_variance(T, np.zeros(n0, int), N0 + extra), 0.0, atol=1e-14)
    # singletons: the independent formula (the same sums, reduced along the other axis: float round-off)
    np.testing.assert_allclose(theta_variance(T, np.arange(n0)), theta_variance(T), rtol=1e-12, atol=1e-18)


def test_cluster_variance_by_hand_and_validation():
    from unpooled.core.estimators.exhaustive import document_groups, theta_variance

    # two instances of one document move together: totals 0.5 and -0.5, N/(N-1) = 2
    T = np.array([[0.25, 0.25, -0.5]])
    assert theta_variance(T, ["a", "a", "b"]) == pytest.approx([1.0])
    assert theta_variance(T) == pytest.approx([1.5 * (0.0625 + 0.0625 + 0.25)])
    # 2 more documents without a true instance: 4/3 instead of 2
    assert theta_variance(T, ["a", "a", "b"], 4) == pytest.approx([4 / 3 * 0.5])
    g, n = document_groups(["x", "y", "x"], 5)
    assert g.tolist() == [0, 1, 0] and n == 5
    P = distribution_matrix(SYSTEMS, 5)
    g0 = member(SYSTEMS)[:, Y]
    with pytest.raises(InvalidInputError, match=r"documents: expected an integer >= 2 \(the true instances lie in 2"):
        make_design(P, [0], [0], [1.0], g0, y0_docs=["a", "a", "b"], documents=1)
    with pytest.raises(InvalidInputError, match="y0_docs: expected the document of each of the 3"):
        make_design(P, [0], [0], [1.0], g0, y0_docs=["a"])
    with pytest.raises(InvalidInputError, match="documents: give y0_docs"):
        make_design(P, [0], [0], [1.0], g0, documents=4)
    with pytest.raises(InvalidInputError, match=r"inside: expected one flag per labelled draw \(1\)"):
        make_design(P, [0], [0], [1.0], g0, inside=[True, False])
    with pytest.raises(InvalidInputError, match="groups: expected the document of each of the 3"):
        theta_variance(T, ["a"])


def test_theta_variance_estimates_the_cluster_sampling_variance():
    """Over repeated samples of documents, the mean of the cluster variance estimate is close to the
    Monte Carlo variance of theta-hat; the independent-instance estimate is far below it."""
    from unpooled.core.estimators.exhaustive import theta_variance

    rng = np.random.default_rng(0)
    D = 400
    sizes = rng.poisson(5, D)
    hit = rng.beta(0.5, 0.5, D)  # instances of a document are found together
    docs_of = np.repeat(np.arange(D), sizes)
    s = rng.random(len(docs_of)) < hit[docs_of]
    est, v_cl, v_in = [], [], []
    for _ in range(1500):
        pick = rng.choice(D, 20)  # with replacement: draws are clusters (the same document twice: two clusters)
        idx = np.concatenate([np.flatnonzero(docs_of == d) for d in pick])
        lab = np.repeat(np.arange(20), sizes[pick])
        if len(idx) == 0:
            continue
        th = s[idx].mean()
        T = ((s[idx] - th) / len(idx))[None, :]
        est.append(th)
        v_cl.append(theta_variance(T, lab, 20)[0])
        v_in.append(theta_variance(T)[0])
    mc = np.var(est)
    assert np.mean(v_cl) == pytest.approx(mc, rel=0.15)
    assert np.mean(v_in) < 0.5 * mc


@pytest.mark.parametrize("m", [127, 128, 130, 256])
def test_joint_recall_does_not_wrap_with_many_systems(m):
    """m systems sharing two instances, one exhaustive true instance found by all: joint recall is 1, as the
    simple estimator's, whatever m (an int8 count wrapped at 128 and gave 0)."""
    import scipy.sparse as sp

    from unpooled.core.estimators import estimate, make_design

    P = sp.csr_matrix(np.full((m, 2), 0.5))
    src = np.repeat(np.arange(m), 2)
    xs = np.tile([0, 1], m)
    d = make_design(P, src, xs, np.ones(2 * m), np.ones((m, 1), bool))
    joint, simple = estimate(d), estimate(d, estimator="simple")
    np.testing.assert_allclose(joint.r.value, 1.0)
    np.testing.assert_allclose(simple.r.value, 1.0)


def _brute_jackknife(s, v, docs, N):
    """Delete-one-document jackknife of the Hajek ratios sum_y v s_iy / sum_y v over N documents (codes
    ``0..N-1``; a code without an instance is a document without a true instance)."""
    est = []
    for k in range(N):
        keep = docs != k
        est.append((s[:, keep] * v[keep]).sum(1) / v[keep].sum())
    est = np.array(est)  # (N, m)
    return (N - 1) / N * ((est - est.mean(0)) ** 2).sum(0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.integers(2, 14), st.integers(2, 7), st.integers(0, 4), st.integers(0, 2 ** 32 - 1))
def test_jackknife_variance_is_the_delete_one_document_jackknife(m, n0, n_docs, extra, seed):
    """theta_variance(shares=...) equals the brute-force delete-one-document jackknife of the ratio (1e-12),
    with unequal weights, several instances per document and documents without a true instance."""
    from unpooled.core.estimators.exhaustive import jackknife_values, theta_variance

    rng = np.random.default_rng(seed)
    docs = rng.integers(0, n_docs, n0)
    _, docs = np.unique(docs, return_inverse=True)  # codes 0..distinct-1
    distinct = int(docs.max()) + 1
    if distinct < 2:
        docs[0], docs[-1] = 0, 1
        distinct = 2
    N = distinct + extra
    v = rng.uniform(0.05, 5.0, n0)
    s = (rng.random((m, n0)) < rng.random((m, 1))).astype(float)
    V = v.sum()
    theta = (s * v).sum(1) / V
    T = v * (s - theta[:, None]) / V
    got = theta_variance(T, docs, N, shares=v / V)
    np.testing.assert_allclose(got, _brute_jackknife(s, v, docs, N), rtol=1e-12, atol=1e-15)
    # one instance per document: the same without groups
    if n0 >= 2:
        single = np.arange(n0)
        np.testing.assert_allclose(theta_variance(T, shares=v / V), _brute_jackknife(s, v, single, n0),
                                   rtol=1e-12, atol=1e-15)
    # equal shares: the linearisation exactly
    D = np.zeros((m, N))
    np.add.at(D.T, docs, T.T)
    np.testing.assert_allclose(theta_variance(jackknife_values(D, np.full(N, 1 / N))), theta_variance(D),
                               rtol=1e-12, atol=1e-18)


def test_jackknife_values_guard_a_document_with_every_instance():
    from unpooled.core.estimators.exhaustive import jackknife_values, theta_variance

    # one document holds every true instance (h = 1): its total is 0, the others' too; no division by 0
    T = np.array([[0.25, -0.25, 0.0]])
    var = theta_variance(T, ["a", "a", "a"], 4, shares=np.array([0.5, 0.5, 0.0]) + np.array([0, 0, 0]))
    assert np.all(np.isfinite(var)) and var == pytest.approx([0.0], abs=1e-15)
    z = jackknife_values(np.array([[1e-17, 0.0]]), np.array([1.0, 0.0]))
    assert np.all(np.isfinite(z))
    with pytest.raises(InvalidInputError, match="shares: expected one share per exhaustive instance"):
        theta_variance(T, shares=np.ones(2))
    with pytest.raises(InvalidInputError, match=r"Z, shares: expected shapes"):
        jackknife_values(np.ones((1, 3)), np.ones(2))


def test_simple_recall_variance_is_the_document_jackknife():
    """The simple estimator's recall over documents: its variance is the brute-force jackknife of the ratio."""
    P = distribution_matrix(SYSTEMS, 5)
    g0 = member(SYSTEMS)[:, Y]
    v0 = np.array([1.0, 3.0, 0.5])
    d = make_design(P, [0, 1, 2], [0, 2, 3], [1.0, 1.0, 1.0], g0, v0=v0, y0_docs=["a", "b", "b"], documents=3)
    from unpooled.core.estimators.exhaustive import t_factor

    res = estimate(d, estimator="simple")
    docs = np.array([0, 1, 1])
    # times Student's t with N - 1 = 2 degrees of freedom (the interval's level, 0.90)
    np.testing.assert_allclose(res.r.se ** 2, _brute_jackknife(g0.astype(float), v0, docs, 3) * t_factor(3, 0.90),
                               rtol=1e-12)


def test_a_system_drawn_completely_beside_a_large_one_takes_its_own_draws():
    """A 30-instance system whose 150 draws reached every instance, beside a 3,000-instance one sharing 15 of them:
    its precision comes from its own draws alone (terms.complete_targets), exact; recall keeps the joint pool."""
    rng = np.random.default_rng(5)
    U = 30 + 3000 - 15
    truth = (rng.random(U) < 0.6).astype(float)
    A, B = np.arange(30), np.arange(15, 3015)
    P = distribution_matrix([A, B], U)
    xa = np.r_[A, rng.choice(A, 120)]  # every instance of A, then more
    xs = np.r_[xa, rng.choice(B, 150)]
    src = np.r_[np.zeros(150, int), np.ones(150, int)]
    d = make_design(P, src, xs, truth[xs], np.zeros((2, 0), bool))
    s = estimate(d)
    assert s.p.value[0] == pytest.approx(truth[A].mean()) and s.p.hi[0] - s.p.lo[0] < 1e-9
    assert s.p.hi[1] - s.p.lo[1] > 0.05  # the large system: an ordinary joint estimate


def _sum_estimate(d, W):
    """The importance-weighted sum the joint precision was before it was self-normalised, with its variance:
    ``(terms, sum(C), Var sum(C), sum(W))``."""
    from unpooled.core.estimators.joint import _terms, strata_var

    t = _terms(d, W)
    return t, t.C.sum(), strata_var(t.C, d), t.W.sum()


@settings(max_examples=150, deadline=None)
@given(designs(), st.sampled_from(["balance", "heuristic"]))
def test_self_normalising_leaves_simple_and_complete_systems_unchanged(dw, weights):
    """The weights of the simple estimator's own draws, and of a system drawn completely (its own draws alone,
    ``complete_targets``), sum to 1 exactly over distinct instances: there the ratio sum(C) / sum(W) is the sum,
    and its variance the sum's (W's per-instance and per-cell totals are constant, so C - p W varies as C)."""
    from unpooled.core.estimators.joint import weight_matrix
    from unpooled.core.estimators.terms import complete_targets

    d, _ = dw
    own = d.n > 0
    simple = estimate(d, estimator="simple")
    _, p_sum, var_sum, w_sum = _sum_estimate(d, np.eye(d.m))
    np.testing.assert_allclose(w_sum[own], 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(simple.p.value, p_sum, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(simple.p.se ** 2, var_sum, rtol=1e-9, atol=1e-15)
    done = complete_targets(d)
    joint = estimate(d, weights=weights)
    _, p_sum, var_sum, w_sum = _sum_estimate(d, weight_matrix(d.P, d.n, weights))
    np.testing.assert_allclose(w_sum[done], 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(joint.p.value[done], p_sum[done], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(joint.p.se[done] ** 2, var_sum[done], rtol=1e-9, atol=1e-15)


def test_a_complete_system_beside_overlapping_ones_keeps_its_sum():
    """A 5-instance system drawn completely (with repeats) beside two larger ones sharing its instances: its
    precision is exact, the same as before self-normalising; the others' weights do not sum to 1 (their ratios
    differ from the sums) and stay inside [0, 1]."""
    from unpooled.core.estimators.joint import weight_matrix
    from unpooled.core.estimators.terms import complete_targets

    systems = [np.array([0, 1, 2, 3, 4]), np.arange(0, 12), np.arange(3, 15)]
    truth = (np.arange(15) % 4 != 1).astype(float)
    P = distribution_matrix(systems, 15)
    xs = np.array([0, 1, 2, 3, 4, 4, 2, 5, 7, 9, 1, 11, 3, 14, 8, 12, 6])
    src = np.repeat([0, 1, 2], [7, 5, 5])
    d = make_design(P, src, xs, truth[xs], np.zeros((3, 0), bool))
    assert complete_targets(d).tolist() == [True, False, False]
    s = estimate(d, weights="balance")
    t, p_sum, var_sum, w_sum = _sum_estimate(d, weight_matrix(d.P, d.n, "balance"))
    assert w_sum[0] == pytest.approx(1.0, abs=1e-14) and s.p.value[0] == pytest.approx(truth[:5].mean(), abs=1e-14)
    assert s.p.value[0] == pytest.approx(p_sum[0], abs=1e-14) and s.p.se[0] == 0.0 == var_sum[0]
    assert np.all(np.abs(w_sum[1:] - 1) > 1e-3)
    np.testing.assert_allclose(s.p.value[1:], p_sum[1:] / w_sum[1:], rtol=1e-12)
    assert np.all((s.p.value >= 0) & (s.p.value <= 1))


def test_theta_variance_of_sparse_rows_is_the_dense_one():
    """``theta_variance`` of sparse rows (the breakdowns' groups, each on a few exhaustive instances) with per-row
    shares: the dense rows' variance, by documents and without."""
    import scipy.sparse as sp

    from unpooled.core.estimators.exhaustive import theta_variance

    rng = np.random.default_rng(2)
    T = np.where(rng.random((30, 50)) < 0.2, rng.normal(size=(30, 50)), 0.0)
    H = np.where(T != 0, rng.random((30, 50)) / 10, 0.0)
    docs = rng.integers(0, 7, 50)
    for groups in (docs, None):
        want = theta_variance(T, groups, shares=H)
        got = theta_variance(sp.csr_matrix(T), groups, shares=sp.csr_matrix(H))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
