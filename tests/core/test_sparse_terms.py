"""The estimator's terms held sparse (``estimators.rows``): the variance of a :class:`Rows` equals the module docs'
formula computed densely by loops, the bootstrap's per-instance totals equal its direct sums, and the votes'
variance built in blocks of targets equals it built at once."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.estimators import distribution_matrix, estimate, make_design
from unpooled.core.estimators import bootstrap, from_votes, noisy, terms, vote_variance
from unpooled.core.estimators.finite import draw_units, strata_var
from unpooled.core.estimators.noisy import crowd_votes
from unpooled.core.estimators.joint import _terms, linear_parts, precision_linear, weight_matrix
from unpooled.core.estimators.joint import strata_var as joint_var
from unpooled.core.estimators.rows import Rows, Segments, add, grouped_ss


def _loop_var(U: np.ndarray, src, xs, P) -> np.ndarray:
    """The module docs' variance of :mod:`.finite`, by loops over strata, cells and distinct instances."""
    m = P.shape[0]
    out = np.zeros(U.shape[0])
    for h in range(m):
        own = np.flatnonzero(src == h)
        n = len(own)
        if not n:
            continue
        p = np.array([P[h, x] for x in xs[own]])
        cells = {v: own[p == v] for v in np.unique(p)}
        N = {v: int(np.sum(np.isclose(P[h].toarray().ravel(), v) & (P[h].toarray().ravel() > 0))) for v in cells}
        for r in range(U.shape[0]):
            if n > 1:
                tot = {v: U[r, s].sum() for v, s in cells.items()}
                mean = sum(tot.values()) / n
                out[r] += n / (n - 1) * sum(len(s) * (tot[v] / len(s) - mean) ** 2 for v, s in cells.items())
            for v, s in cells.items():
                items = np.unique(xs[s])
                k = len(items)
                if k < 2:
                    continue
                a = np.array([U[r, s[xs[s] == x]].sum() for x in items])
                out[r] += (1 - k / N[v]) * k / (k - 1) * ((a - a.mean()) ** 2).sum()
    return out


@st.composite
def _designs(draw):
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    m, U = draw(st.integers(1, 4)), draw(st.integers(3, 12))
    systems = [np.sort(rng.choice(U, rng.integers(1, U + 1), replace=False)) for _ in range(m)]
    weights = [rng.integers(1, 3, len(s)).astype(float) for s in systems]
    rows = np.concatenate([np.full(len(s), i) for i, s in enumerate(systems)])
    P = sp.csr_matrix((np.concatenate([w / w.sum() for w in weights]), (rows, np.concatenate(systems))), shape=(m, U))
    n = rng.integers(0, 6, m)
    src = np.repeat(np.arange(m), n)
    xs = np.concatenate([rng.choice(s, k, p=w / w.sum()) for s, w, k in zip(systems, weights, n)]).astype(np.int64)
    perm = rng.permutation(len(src))
    return rng, P, src[perm], xs[perm]


@settings(max_examples=60, deadline=None)
@given(_designs(), st.sampled_from([0, 1, 3]))
def test_variance_of_sparse_rows_is_the_documented_formula(design, rank):
    """Sparse values (zeros where a target lacks the instance) plus a shared part (one row, or three): the same
    variance as the formula by loops on the dense matrix, after the draws' Rao-Blackwell factors."""
    rng, P, src, xs = design
    units = draw_units(P, src, xs)
    S, T = len(xs), 3
    dense = rng.normal(size=(T, S)) * (rng.random((T, S)) < 0.5)
    X = Rows(sp.csr_matrix(dense))
    if rank == 1:
        X = Rows(X.sparse, rng.normal(size=T), rng.normal(size=S))
    elif rank:
        X = Rows(X.sparse, rng.normal(size=(T, rank)), rng.normal(size=(rank, S)))
    want = _loop_var(X.toarray(), src, xs, P)
    np.testing.assert_allclose(strata_var(X, src, P.shape[0], units), want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(strata_var(X.toarray(), src, P.shape[0], units), want, rtol=1e-9, atol=1e-12)


def test_rows_operations_match_dense():
    rng = np.random.default_rng(0)
    s = sp.csr_matrix(rng.normal(size=(4, 9)) * (rng.random((4, 9)) < 0.4))
    X = Rows(s, rng.normal(size=4), rng.normal(size=9))
    D = X.toarray()
    r, c = rng.normal(size=4), rng.normal(size=9)
    np.testing.assert_allclose(X.sum(), D.sum(1))
    np.testing.assert_allclose(X.scaled(r, c).toarray(), r[:, None] * D * c[None, :])
    Y = Rows(sp.csr_matrix(rng.normal(size=(4, 9)) * (rng.random((4, 9)) < 0.4)))
    np.testing.assert_allclose((X + Y).toarray(), D + Y.toarray())
    M = sp.csr_matrix(rng.random((4, 9)) < 0.5, dtype=float)
    np.testing.assert_allclose((X * M).toarray(), D * M.toarray())
    np.testing.assert_allclose(X.totals(np.array([0, 1, 0, 2, 2, 1, 0, 3, 3]), 4),
                               D @ np.eye(4)[[0, 1, 0, 2, 2, 1, 0, 3, 3]])
    np.testing.assert_allclose(X.block(np.array([3, 1])), D[[3, 1]])
    other = Rows(s, rng.normal(size=4), rng.normal(size=9))  # another shared row: a shared part of rank 2
    both = X + other
    assert both.a.shape == (4, 2)
    np.testing.assert_allclose(both.toarray(), D + other.toarray())
    np.testing.assert_allclose(both.sum(), D.sum(1) + other.toarray().sum(1))
    np.testing.assert_allclose(both.scaled(r, c).toarray(), r[:, None] * (D + other.toarray()) * c[None, :])
    np.testing.assert_allclose((both * M).toarray(), (D + other.toarray()) * M.toarray())
    np.testing.assert_allclose(both.block(np.array([2, 0])), (D + other.toarray())[[2, 0]])
    assert np.all(both.abs_sum() >= np.abs(D + other.toarray()).sum(1) - 1e-12)
    long = sp.csr_matrix(rng.normal(size=(3, 200)))  # rows long enough to be scaled row by row
    r3 = np.array([2.0, 1.0, -0.5])
    np.testing.assert_allclose(Rows(long).scaled(r3, None).toarray(), r3[:, None] * long.toarray())
    np.testing.assert_allclose(Rows(long).scaled(r3, c := rng.normal(size=200)).toarray(),
                               r3[:, None] * long.toarray() * c[None, :])


def _world(seed=1, m=6, U=60, weighted=False):
    rng = np.random.default_rng(seed)
    systems = [np.sort(rng.choice(U, rng.integers(5, 40), replace=False)) for _ in range(m)]
    truth = rng.random(U) < 0.6
    P = distribution_matrix(systems, U)
    if weighted:  # two probabilities per system (two cells), not the instance level's one
        P.data *= rng.integers(1, 3, P.nnz)
        P = sp.csr_matrix(P.multiply(1 / P.sum(axis=1)))
    n = [25] * (m - 1) + [200]  # the last one drawn completely (its precision from its own draws)
    src = np.repeat(np.arange(m), n)
    xs = np.concatenate([s[rng.integers(0, len(s), k)] for s, k in zip(systems, n)])
    y0 = np.flatnonzero(truth)[:20]
    g0 = np.stack([np.isin(y0, s) for s in systems])
    return rng, truth, make_design(P, src, xs, truth[xs].astype(float), g0, y0_docs=y0 % 7, documents=8)


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_segments_and_grouped_sums_of_squares_match_dense(order):
    """A row's totals per group of columns through the runs of its values (one run per (row, group) when the
    groups come in order, several otherwise) equal the dense products, and so do the centred sums of squares."""
    rng = np.random.default_rng(1)
    group = np.sort(rng.integers(0, 7, 40))
    if order == "shuffled":
        group = rng.permutation(group)
    D = rng.normal(size=(5, 40)) * (rng.random((5, 40)) < 0.4)
    D[2] = 0.0  # an empty row
    Y = sp.csr_matrix(D)
    seg = Segments.of(Y, group)
    assert (len(seg.start) == len(seg.total)) == (order == "sorted")
    np.testing.assert_allclose(seg.matrix((5, 7)).toarray(), D @ np.eye(7)[group], rtol=0, atol=1e-14)
    omega, scale = rng.random(40) + 0.5, rng.random(7)
    for om in (omega, np.ones(40)):
        np.testing.assert_allclose(grouped_ss(Y, None, None, group, om, scale),
                                   grouped_ss(D, None, None, group, om, scale), rtol=1e-12, atol=1e-14)
    Z = sp.csr_matrix((rng.normal(size=Y.nnz), Y.indices, Y.indptr), shape=Y.shape)  # Y's pattern, shared
    np.testing.assert_array_equal(add(Y, Z).toarray(), Y.toarray() + Z.toarray())
    np.testing.assert_allclose(add(Y, sp.csr_matrix(np.ones((5, 40)))).toarray(), D + 1)  # another pattern


@pytest.mark.parametrize("weighted", [False, True])
def test_bootstrap_by_instance_totals_equals_direct_sums(monkeypatch, weighted):
    """The bootstrap's per-instance totals (ByItem; at the instance level precision's numerator and recall's
    share theirs) and the direct sums over the terms' non-zeros give the same replicates: the same seed, the same
    intervals."""
    _, _, d = _world(weighted=weighted)
    parts = bootstrap._distinct_items([(*t_, None) for t_ in (lambda t: (t.C_items, t.W_items, t.A_items))(
        _terms(d, weight_matrix(d.P, d.n, "balance")))], 300)
    assert [[j for j, _ in g[3]] for g in parts] == ([[0], [1], [2]] if weighted else [[0, 2], [1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(bootstrap, "DENSE_PRODUCT", 2.0)  # the items' totals summed by the sparse product
        by_item = estimate(d, bootstrap=300, rng=4).boot
        monkeypatch.setattr(bootstrap, "DENSE_PRODUCT", 0.0)  # by dense blocks of two rows
        monkeypatch.setattr(bootstrap, "DENSE_BLOCK_BYTES", 16 * d.P.shape[1])
        by_block = estimate(d, bootstrap=300, rng=4).boot
        monkeypatch.setattr(bootstrap, "ITEM_TOTALS_BYTES", 0)
        direct = estimate(d, bootstrap=300, rng=4).boot
    for k in by_item:
        for x in ("lo", "hi"):
            np.testing.assert_allclose(getattr(by_item[k], x), getattr(direct[k], x), rtol=0, atol=1e-12)
            np.testing.assert_allclose(getattr(by_block[k], x), getattr(direct[k], x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("strata", [False, True])
def test_votes_variance_in_blocks_of_targets_equals_at_once(monkeypatch, strata):
    """The draws' and the votes' variances one target at a time, with the shared part made dense, and the
    confusions' replicates refitted one at a time: the same as at once (with and without strata of the crowd
    model)."""
    rng, truth, d = _world(seed=2)
    items = np.unique(d.xs)
    it = np.repeat(items, 3)
    wk = np.concatenate([rng.choice(8, 3, replace=False) for _ in items])
    yes = np.where(rng.random(len(it)) < 0.8, truth[it], ~truth[it])
    rep = np.clip(0.8 + rng.normal(0, 0.03, (12, 8)), 0.5, 0.99)
    v = crowd_votes(it, wk, yes, np.full(8, 0.8), np.full(8, 0.2), rep, 1 - rep, n_items=d.P.shape[1],
                    strata=(np.arange(d.P.shape[1]) % 2) if strata else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        once = estimate(d, votes=v)
        monkeypatch.setattr(terms, "BLOCK_VALUES", 1)  # one target at a time
        monkeypatch.setattr(noisy, "PAIRS_AT_ONCE", 1)  # one replicate at a time
        monkeypatch.setattr(vote_variance, "PAIRS_PER_CHUNK", 1)  # the votes' variance a target at a time
        blocks = estimate(d, votes=v)
        monkeypatch.setattr(from_votes, "MAX_SHARED_RANK", 0)  # recall's denominator dense, not of low rank
        dense = estimate(d, votes=v)
    assert np.all(once.var_parts["rates"]["p"] > 0)
    for k in ("p", "r", "f1"):
        np.testing.assert_allclose(getattr(blocks, k).se, getattr(once, k).se, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(getattr(dense, k).se, getattr(once, k).se, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("weights", ["balance", "heuristic"])
@pytest.mark.parametrize("matched", [False, True])
def test_unit_totals_give_the_per_draw_terms_variances(monkeypatch, weights, matched):
    """The terms' totals per unit (a system's draws of one instance), built a few targets at a time, give the
    estimates and variances of the per-draw terms (a system drawn completely, documents, a matching policy)."""
    _, _, d = _world(seed=3, weighted=True)
    if matched:
        d = replace(d, gs=np.asarray(d.P[:, d.xs].todense() > 0))
    W = weight_matrix(d.P, d.n, weights)
    monkeypatch.setattr(terms, "BLOCK_VALUES", 7)  # blocks of one or two targets
    t = _terms(d, W)
    assert len(terms._row_blocks(t.PI.indptr)) > 1
    p, lin = precision_linear(t.C, t.W)
    C, Wt, A, B = _terms(d, W).per_unit()
    pu, lin_u = precision_linear(C, Wt, per_unit=True)
    np.testing.assert_allclose(pu, p, rtol=1e-13, atol=0)
    np.testing.assert_allclose(lin_u.var(d, 0.9), lin.var(d, 0.9), rtol=1e-10, atol=1e-16)
    for per_draw, per_unit in ((t.A, A), (t.B, B)):
        np.testing.assert_allclose(per_unit.sum(), per_draw.sum(), rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(joint_var(per_unit, d, per_unit=True), joint_var(per_draw, d), rtol=1e-10,
                                   atol=1e-16)
    np.testing.assert_allclose(_terms(d, W).ess, t.ess, rtol=1e-13)


@pytest.mark.parametrize("weights", ["balance", "heuristic"])
@pytest.mark.parametrize("simple", [False, True])
def test_linear_parts_a_block_of_targets_at_a_time_equal_all_at_once(monkeypatch, weights, simple):
    """Without kept linear parts the unit terms are built and dropped a block of targets at a time: the same
    estimates, variances and effective sizes as all targets at once (a system drawn completely, documents)."""
    _, _, d = _world(seed=5, weighted=True)
    W = np.eye(d.m) if simple else weight_matrix(d.P, d.n, weights)
    t_all = _terms(d, W)
    est, lin, var = linear_parts(d, t_all, 0.9, simple=simple, keep=True)
    monkeypatch.setattr(terms, "BLOCK_VALUES", 7)  # blocks of one or two targets
    t = _terms(d, W)
    assert len(terms._row_blocks(t.PI.indptr)) > 1
    est_b, lin_b, var_b = linear_parts(d, t, 0.9, simple=simple, keep=False)
    assert lin_b is None and set(est_b) == set(est) and set(var_b) == set(var)
    assert np.all(var["p"] > 0)
    for k in est:
        np.testing.assert_allclose(est_b[k], est[k], rtol=1e-14, atol=0)
    for k in var:
        np.testing.assert_allclose(var_b[k], var[k], rtol=1e-12, atol=1e-18)
        np.testing.assert_allclose(lin[k].var(d, 0.9), var[k], rtol=1e-12, atol=1e-18)  # the kept parts' own
    np.testing.assert_allclose(t.ess, t_all.ess, rtol=1e-14)


def test_bootstrap_counts_are_those_of_the_int32_draws():
    """The bootstrap's counts per stratum: its draws resampled by ``integers(0, k, (B, k))`` of the given stream
    (int32 draws: keyed in int64 they are the same numbers), counted per draw and replicate."""
    sizes = np.array([3, 0, 1, 40, 7])
    got = list(bootstrap._stratified_counts(sizes, 25, np.random.default_rng(9)))
    rng = np.random.default_rng(9)
    assert [h for h, _ in got] == [0, 2, 3, 4]
    for h, K in got:
        k = sizes[h]
        idx = rng.integers(0, k, size=(25, k), dtype=np.int32)
        want = np.zeros((k, 25))
        np.add.at(want, (idx, np.arange(25)[:, None]), 1.0)
        assert K.flags.c_contiguous and K.dtype == float
        np.testing.assert_array_equal(K, want)


@pytest.mark.parametrize("weights", ["balance", "heuristic"])
@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("matched", [False, True])
def test_votes_terms_per_unit_give_the_per_draw_sums_to_the_bit(weights, shuffled, matched):
    """The crowd votes' path holds one draw's values per unit (:meth:`_Terms.unit_values`): its totals per distinct
    instance and the strata variances of its influence rows are those of the per-draw terms to the last bit, with
    the draws in the systems' order or shuffled (an instance's draws then no longer unit after unit), with a
    matching policy or without."""
    _, _, d = _world(seed=4, weighted=True)
    if shuffled:
        perm = np.random.default_rng(0).permutation(len(d.xs))
        d = make_design(d.P, d.src[perm], d.xs[perm], d.f[perm], d.g0)
    d = replace(d, f=np.ones(len(d.xs)))
    if matched:
        d = replace(d, gs=np.asarray(d.P[:, d.xs].todense() > 0))
    W = weight_matrix(d.P, d.n, weights)
    t = _terms(d, W)
    assert t.units_in_draw_order != shuffled
    K = len(t.codes)
    per_draw = [t.C, t.A, t.B, t.ratio]
    (rows, C, A, B), = t.unit_values(whole=True)
    for X, Y in zip(per_draw, (C, A, B, t.ratio_u)):
        np.testing.assert_array_equal(from_votes._item_totals(t, Y), X.totals(t.item, K))
    lam = np.random.default_rng(1).normal(0, 2, len(d.xs))[np.unique(t.item, return_index=True)[1]][t.item]
    order = from_votes._registration(d)
    lam_u = lam[d.units.first]
    rho, k = np.full((d.m, 1), 0.7), np.random.default_rng(2).random((d.m, 1))
    parts = noisy._exp_parts(lam_u[order])
    (_, *ordered), = t.unit_values(whole=True, order=order)
    pattern = from_votes._Pattern.of(ordered[0].sparse, t.unit_draws, order)
    for X, Y in zip(per_draw[:3], ordered):
        got = pattern.totals(from_votes._influence(Y, slice(0, d.m), parts, rho, k, rho, np.zeros(len(lam_u), int)))
        want = from_votes._influence(X, slice(0, d.m), noisy._exp_parts(lam), rho, k, rho, np.zeros(len(lam), int))
        np.testing.assert_array_equal(joint_var(got, d, per_unit=True), joint_var(want, d))


def test_pattern_and_unique_rows_are_numpys():
    # the fast forms of csr_matrix(mask) (its values set to 1) and np.unique(axis=0)'s first rows and inverse: the
    # same arrays, so the terms and the merged items (summed in their order) are the same to the last bit
    from unpooled.core.estimators.rows import pattern, unique_rows

    rng = np.random.default_rng(11)
    for shape, dens in (((0, 4), 0.5), ((3, 0), 0.5), ((1, 1), 1.0), ((9, 17), 0.3), ((40, 300), 0.0)):
        X = rng.random(shape) < dens
        want = sp.csr_matrix(X, dtype=float)
        got = pattern(X)
        assert got.has_canonical_format and got.shape == want.shape
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert np.array_equal(got.data, np.ones(want.nnz))
    base = np.round(rng.normal(size=(40, 6)), 1)
    base[0], base[1] = np.inf, -np.inf
    A = base[rng.integers(0, 40, 500)]
    A[1] = A[0]
    A[1, A[1] == 0] = -0.0  # equal to 0
    for B in (A, A[:, :1], np.array([[0.0, 2.0], [-0.0, 2.0], [np.nan, 1.0], [np.nan, 1.0], [1.0, 3.0]])):
        _, first, inv = np.unique(B, axis=0, return_index=True, return_inverse=True)
        f, i = unique_rows(B)
        assert np.array_equal(f, first) and np.array_equal(i, inv.reshape(-1))



def test_group_totals_are_the_indicator_products_to_the_bit(monkeypatch):
    # the totals of a dense array's columns by group (merged items, strata, a shared part's cells): the product with
    # the groups' indicator as it was computed at once, the same sums in the same order, in one block of rows or
    # several; 1-d: bincount's, as before
    from unpooled.core.estimators import rows
    from unpooled.core.estimators.rows import group_totals, indicator

    rng = np.random.default_rng(12)
    for shape, G in (((7, 50), 6), ((1, 3), 5), ((0, 4), 2), ((3, 0), 4), ((30, 200), 1), ((9, 40), 60)):
        X = rng.normal(size=shape) * 10.0 ** rng.integers(-8, 9, size=shape)
        X[X > 1e7] = -0.0
        group = rng.integers(0, G, shape[1])
        want = np.asarray((indicator(group, G).T @ X.T).T)
        for block in ((1 << 20, 16), (3 * shape[1] + 1, 1)):  # one block, or blocks of 3 rows
            monkeypatch.setattr(rows, "GROUP_BLOCK_VALUES", block[0])
            monkeypatch.setattr(rows, "GROUP_BLOCK_ROWS", block[1])
            got = group_totals(X, group, G)
            assert got.shape == want.shape and np.array_equal(got.view(np.int64), want.view(np.int64))
        if shape[0]:
            assert np.array_equal(group_totals(X[0], group, G), np.bincount(group, weights=X[0], minlength=G))
