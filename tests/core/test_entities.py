"""Entity scores (core/estimators/entities.py): hand computations, the estimators' exactness on a census,
unbiasedness and coverage of the importance-sampling part by simulation, validation, the crowd-error correction."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import binomtest

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators.entities import (ExhaustiveDocument, Mention, argument_precision, document_ratio,
                                               entity_scores, t_factor, validity_labels)
from unpooled.core.estimators.joint import make_design, weight_matrix


def M(s, e, typ="PER", cluster=0, link=""):
    return Mention(s, e, typ, cluster, link)


# ---------------------------------------------------------------------------- hand computations

def test_document_ratio_by_hand():
    est, var, z, B = document_ratio([1, 2, 0], [2, 2, 1], [0.5, 0.5, 0.5])
    assert est == pytest.approx(3 / 5) and B == pytest.approx(10)
    # the jackknife values (N-1)/N z_d/(1 - h_d): z_d = (a_d - R b_d) / pi_d / B, h_d = b_d / pi_d / B
    lin = np.array([1 - 1.2, 2 - 1.2, 0 - 0.6]) / 0.5 / 10
    assert z == pytest.approx(2 / 3 * lin / (1 - np.array([0.4, 0.4, 0.2])))
    assert var == pytest.approx(3 / 2 * float(((z - z.mean()) ** 2).sum()))
    # the variance is the delete-one-document jackknife of the ratio: without each document 2/3, 1/3, 3/4
    deleted = np.array([2 / 3, 1 / 3, 3 / 4])
    assert var == pytest.approx(2 / 3 * float(((deleted - deleted.mean()) ** 2).sum()), rel=1e-12)
    assert math.isnan(document_ratio([0, 0], [0, 0], [1, 1])[0])


def test_entity_scores_by_hand():
    # doc a: gold 3 mentions (0-5 PER c0 linked X, 10-15 PER c0 linked X, 20-25 ORG c1 NIL, 30-35 ORG c2 NIL)
    gold_a = (M(0, 5, "PER", 0, "X"), M(10, 15, "PER", 0, "X"), M(20, 25, "ORG", 1), M(30, 35, "ORG", 2))
    gold_b = (M(0, 5, "GPE", 0, "Y"),)
    docs = [ExhaustiveDocument("a", 1.0, gold_a), ExhaustiveDocument("b", 1.0, gold_b)]
    sys_a = [M(0, 5, "PER", "e1", "X"), M(10, 15, "ORG", "e1", "X"), M(20, 25, "ORG", "e2"), M(30, 35, "ORG", "e2"),
             M(40, 45, "PER", "e3", "Z")]
    sys_b = [M(1, 4, "GPE", "e4", "W")]  # overlaps the gold mention: valid, wrong link
    res = entity_scores(docs, [{"a": sys_a, "b": sys_b}])[0].metrics
    assert res["mention_p"].value == pytest.approx(5 / 6)
    assert res["mention_r"].value == pytest.approx(5 / 5)
    assert res["typing"].value == pytest.approx(4 / 5)
    assert res["link_p"].value == pytest.approx(2 / 4)   # X, X right; Z (no gold), W (wrong)
    assert res["link_r"].value == pytest.approx(2 / 3)   # X, X of 3 linked gold mentions
    # NIL: 20-25 (gold c1) and 30-35 (gold c2) put in one system entity: B3 P = 1/2, R = 1
    assert res["nil_b3_p"].value == pytest.approx(0.5) and res["nil_b3_r"].value == pytest.approx(1.0)
    assert res["nil_b3_f1"].value == pytest.approx(2 / 3)
    exact = entity_scores(docs, [{"a": sys_a, "b": sys_b}], match="exact")[0].metrics
    assert exact["mention_p"].value == pytest.approx(4 / 6) and exact["link_p"].value == pytest.approx(2 / 4)
    for m in res.values():
        assert m.lo <= m.value <= m.hi


def test_what_cannot_be_scored_says_why():
    docs = [ExhaustiveDocument("a", 0.5, (M(0, 5, "PER", 0),)), ExhaustiveDocument("b", 0.5, (M(0, 5, "ORG", 0),))]
    res = entity_scores(docs, [{"a": [M(0, 5, None, "e")]}])[0].metrics
    for k in ("link_p", "link_r", "link_f1"):
        assert math.isnan(res[k].value) and "no KB links" in res[k].reason
    assert math.isnan(res["typing"].value) and "without entity types" in res["typing"].reason
    none = entity_scores([], [{}])[0].metrics
    assert all(math.isnan(m.value) and m.reason for m in none.values())
    d = none["mention_p"].to_dict()
    assert d["value"] is None and d["reason"]


def test_validation_names_the_parameter():
    docs = [ExhaustiveDocument("a", 0.0, ())]
    with pytest.raises(InvalidInputError, match=r"docs\[0\].inclusion"):
        entity_scores(docs, [{}])
    with pytest.raises(InvalidInputError, match="match: expected one of overlap, exact"):
        entity_scores([], [{}], match="fuzzy")
    with pytest.raises(InvalidInputError, match="confidence"):
        entity_scores([], [{}], confidence=1.5)
    with pytest.raises(InvalidInputError, match=r"arguments\['p'\]"):
        entity_scores([], [{}, {}], arguments={"p": [1.0], "var": [0, 0], "sizes": [1, 1], "draws": [1, 1]})


def test_t_factor():
    assert t_factor(1, 0.9) == 1.0
    assert t_factor(8, 0.9) == pytest.approx((1.894579 / 1.644854) ** 2, rel=1e-5)
    assert t_factor(10_000, 0.9) == pytest.approx(1.0, abs=1e-3)


# ---------------------------------------------------------------------------- argument mentions

def _world(rng, n_sys=3, U=400, K=300):
    """Instances over argument mentions (2 each), systems as random subsets, per-mention validity."""
    args = sp.lil_matrix((U, K))
    for u in range(U):
        a, b = rng.choice(K, 2, replace=False)
        args[u, a] = args[u, b] = 1
    args = args.tocsr()
    valid = (rng.random(K) < 0.8).astype(float)
    members = [np.sort(rng.choice(U, int(rng.integers(U // 6, U * 5 // 8)), replace=False)) for _ in range(n_sys)]
    rows = np.concatenate([np.full(len(x), i) for i, x in enumerate(members)])
    cols = np.concatenate(members)
    vals = np.concatenate([np.full(len(x), 1 / len(x)) for x in members])
    P = sp.csr_matrix((vals, (rows, cols)), shape=(n_sys, U))
    truth = []
    for x in members:
        used = np.unique(args[x].indices)
        truth.append(valid[used].mean())
    return args, valid, P, members, np.array(truth)


def test_argument_precision_is_unbiased_and_covers():
    rng = np.random.default_rng(0)
    args, valid, P, members, truth = _world(rng)
    m = len(members)
    est, cover = [], []
    for _ in range(300):
        src = np.repeat(np.arange(m), 60)
        xs = np.concatenate([rng.choice(x, 60) for x in members])
        d = make_design(P, src, xs, np.ones(len(xs)), np.zeros((m, 0), bool))
        W = weight_matrix(d.P, d.n, "balance")
        ap = argument_precision(d, W, args, valid)
        est.append(ap["p"])
        cover.append((ap["lo"] <= truth) & (truth <= ap["hi"]))
    est = np.array(est)
    se = est.std(0) / math.sqrt(len(est))
    assert np.all(np.abs(est.mean(0) - truth) < 4 * se + 0.002), (est.mean(0), truth)
    hits = int(np.array(cover).sum())
    n = np.array(cover).size
    assert binomtest(hits, n, 0.9).pvalue > 0.001 or hits / n > 0.9, hits / n


def test_argument_precision_sizes_and_missing_labels():
    rng = np.random.default_rng(1)
    args, valid, P, members, truth = _world(rng, n_sys=2, U=50, K=40)
    src = np.array([0, 1])
    xs = np.array([members[0][0], members[1][0]])
    d = make_design(P, src, xs, np.ones(2), np.zeros((2, 0), bool))
    W = weight_matrix(d.P, d.n, "balance")
    got = argument_precision(d, W, args, valid)
    assert list(got["sizes"]) == [len(np.unique(args[x].indices)) for x in members]
    bad = valid.copy()
    bad[args[xs[0]].indices[0]] = np.nan
    with pytest.raises(InvalidInputError, match="used by a draw but has no label"):
        argument_precision(d, W, args, bad)
    with pytest.raises(InvalidInputError, match="valid: expected 40 labels"):
        argument_precision(d, W, args, valid[:3])


def _by_definition(d, W, args, valid):
    """The argument precision and its linearised values written out draw by draw (module docs of
    :mod:`unpooled.core.estimators.entity_arguments`): q_i = sum_j w_ij p_j, a draw's weight w_ij(s) r_s p_i(x_s) /
    (n_j q_i(x_s)) (r_s over distinct instances, :mod:`unpooled.core.estimators.finite`; a system drawn
    completely: its own draws, r_s / (n_i p_i(x_s))), phi and phi^1 by their sums."""
    from unpooled.core.estimators.terms import complete_targets

    P, m, S = d.P.toarray(), d.m, len(d.xs)
    C = P @ args.toarray()
    sizes = (C > 0).sum(1)
    done = complete_targets(d)
    num, den = np.zeros((m, S)), np.zeros((m, S))
    for i in range(m):
        for s, (j, x, r) in enumerate(zip(d.src, d.xs, d.units.factor)):
            if P[i, x] == 0:
                continue
            if done[i]:
                w = r / (d.n[i] * P[i, x]) if j == i else 0.0
            else:
                w = W[i, j] * r / d.n[j] / (W[i] @ P[:, x])
            mentions = args[x].indices
            phi = sum(valid[a] / (sizes[i] * C[i, a]) for a in mentions)
            one = sum(1.0 / (sizes[i] * C[i, a]) for a in mentions)
            num[i, s], den[i, s] = w * P[i, x] * phi, w * P[i, x] * one
    p = num.sum(1) / den.sum(1)
    return p, (num - p[:, None] * den) / den.sum(1)[:, None]


def test_argument_precision_is_its_definition():
    # unequal weights (a proposal per target), a system drawn completely, labels outside [0, 1] (corrected)
    from unpooled.core.estimators.joint import strata_var

    rng = np.random.default_rng(4)
    args, valid, P, members, _ = _world(rng, n_sys=4, U=60, K=40)
    valid = valid * 1.3 - 0.1
    small = np.sort(rng.choice(60, 3, replace=False))
    P = sp.vstack([P, sp.csr_matrix((np.full(3, 1 / 3), (np.zeros(3, int), small)), shape=(1, 60))]).tocsr()
    members = [*members, small]
    src = np.concatenate([np.full(12, i) for i in range(5)])
    xs = np.concatenate([rng.choice(x, 12) for x in members[:4]] + [np.repeat(small, 4)])
    d = make_design(P, src, xs, np.ones(len(xs)), np.zeros((5, 0), bool))
    for rule in ("balance", "heuristic"):
        W = weight_matrix(d.P, d.n, rule)
        got = argument_precision(d, W, args, valid)
        p, U = _by_definition(d, W, args, valid)
        assert got["p"] == pytest.approx(p, rel=1e-12)
        assert got["var"] == pytest.approx(strata_var(U, d), rel=1e-9)


def test_argument_precision_holds_no_targets_by_draws_array():
    # 400 systems of 20 instances each in a universe of 8,000, 20 draws each: a targets x draws array is 25.6 MB;
    # the terms are the draws of the instances a target holds (its own, about 8,000 values in all)
    import tracemalloc

    rng = np.random.default_rng(5)
    m, U, K = 400, 8000, 12000
    args = sp.csr_matrix((np.ones(2 * U), (np.repeat(np.arange(U), 2), rng.integers(0, K, 2 * U))), shape=(U, K))
    rows = np.repeat(np.arange(m), 20)
    P = sp.csr_matrix((np.full(m * 20, 1 / 20), (rows, np.arange(m * 20) % U)), shape=(m, U))
    src = np.repeat(np.arange(m), 20)
    xs = np.concatenate([rng.choice(P[i].indices, 20) for i in range(m)])
    d = make_design(P, src, xs, np.ones(len(xs)), np.zeros((m, 0), bool))
    W = weight_matrix(d.P, d.n, "balance")
    valid = rng.random(K)
    tracemalloc.start()
    try:
        got = argument_precision(d, W, args, valid)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.isfinite(got["p"]).all()
    assert peak < m * len(xs) * 8 / 4, peak  # (2.7 MB; 309 MB when it held dense ones)


# ---------------------------------------------------------------------------- crowd errors

def test_validity_labels_remove_the_crowds_error():
    rng = np.random.default_rng(2)
    n = 3000
    truth = rng.random(n) < 0.85
    it, wk, y = [], [], []
    for i in range(n):
        for w in rng.choice(10, 3, replace=False):
            it.append(i)
            wk.append(int(w))
            y.append(int((rng.random() < 0.75) == truth[i]))
    lab, rates = validity_labels(it, wk, y, n_items=n)
    assert rates["corrected"] and rates["accuracy"] == pytest.approx(0.75, abs=0.02)
    assert lab.mean() == pytest.approx(truth.mean(), abs=0.02)
    majority = (np.bincount(it, weights=y, minlength=n) >= 2).mean()
    assert abs(majority - truth.mean()) > 0.05  # what the correction removes
    # a crowd near chance: no correction, the raw shares
    y2 = rng.integers(0, 2, len(y))
    lab2, r2 = validity_labels(it, wk, y2, n_items=n)
    assert not r2["corrected"]
    assert np.all((lab2 >= 0) & (lab2 <= 1))


def test_validity_labels_by_hand():
    # item 0: 3 yes; item 1: yes, no; agreeing pairs 3 + 0 of 4: g = 3/4, a = (1 + sqrt(1/2)) / 2
    lab, rates = validity_labels([0, 0, 0, 1, 1], [0, 1, 2, 0, 1], [1, 1, 1, 1, 0])
    a = (1 + math.sqrt(0.5)) / 2
    assert rates["accuracy"] == pytest.approx(a)
    assert lab[0] == pytest.approx((1 - (1 - a)) / (2 * a - 1))
    assert lab[1] == pytest.approx((0.5 - (1 - a)) / (2 * a - 1))


def test_cross_document_b3_by_hand_and_in_entity_scores():
    from unpooled.core.estimators.entities import cross_document_b3

    out = cross_document_b3([[("e1", "g")], [("e1", "g")], [("e2", "g")]])
    assert out["n"] == 3 and out["p"][0] == pytest.approx(1.0) and out["r"][0] == pytest.approx(5 / 9)
    # jackknife: leaving out doc 1 or 2 gives R 1/2, leaving out doc 3 gives 1
    reps = np.array([0.5, 0.5, 1.0])
    assert out["r"][1] == pytest.approx(2 / 3 * ((reps - reps.mean()) ** 2).sum())
    # the same NIL entity in two documents: within documents B3 is perfect, across them it sees the split
    docs = [ExhaustiveDocument("a", 1.0, (M(0, 5, "ORG", 0),)), ExhaustiveDocument("b", 1.0, (M(0, 5, "ORG", 0),)),
            ExhaustiveDocument("c", 1.0, (M(0, 5, "ORG", 0),))]
    sys_ = {"a": [M(0, 5, "ORG", "x")], "b": [M(0, 5, "ORG", "y")], "c": [M(0, 5, "ORG", "x")]}
    within = entity_scores(docs, [sys_])[0].metrics
    assert within["nil_b3_r"].value == pytest.approx(1.0)
    ident = {("a", 0): 7, ("b", 0): 7, ("c", 0): 7}
    across = entity_scores(docs, [sys_], nil_identity=ident)[0]
    assert across.metrics["nil_b3_r"].value == pytest.approx(5 / 9)
    assert across.metrics["nil_b3_p"].value == pytest.approx(1.0)
    assert any("across documents" in n for n in across.notes)
