"""Recall from pooled and unassessed output (core/estimators/unassessed.py): hand cases, the seed's literal rule's
bias, the combination with the exhaustive sample, and the simulation command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from unpooled.core.estimators import distribution_matrix, estimate, make_design
from unpooled.core.estimators.unassessed import (
    RecallEstimate, agreement_band, combined_recall, merge_cells, stratified_recall,
)


def test_merge_cells_joins_sparse_bands_downwards_within_each_g():
    # 3 bands; g=0 counts (10, 2, 1): the top two join band 0; g=1 counts (0, 7, 30): band 0 is empty and joins
    # the next cell left
    t = merge_cells(np.array([10, 2, 1, 0, 7, 30]), 3, 5)
    assert t.tolist() == [0, 0, 0, 4, 4, 5]
    # a g without any draw joins the other g's lowest cell
    t = merge_cells(np.array([0, 0, 0, 6, 6, 6]), 3, 5)
    assert t.tolist() == [3, 3, 3, 3, 4, 5]


def test_agreement_bands():
    P = distribution_matrix([np.arange(4), np.arange(2, 6), np.arange(3, 5)], 7)
    # instance: 0 1 2 3 4 5 6 -> systems 1 1 2 3 2 1 0
    assert agreement_band(P, (1, 2, 3)).tolist() == [0, 0, 1, 2, 1, 0, -1]


def _two_systems():
    # A outputs 0..9, B outputs 5..14; each draws every one of its instances once: cells are uniform in q
    U = 15
    f = np.array([1, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1], float)
    P = distribution_matrix([np.arange(10), np.arange(5, 15)], U)
    src = np.r_[np.zeros(10, int), np.ones(10, int)]
    xs = np.r_[np.arange(10), np.arange(5, 15)]
    return make_design(P, src, xs, f[xs], np.zeros((2, 0), bool)), f


def test_stratified_within_pool_recall_is_exact_when_every_cell_is_drawn_evenly():
    d, f = _two_systems()
    got = stratified_recall(d, min_draws=1)
    pool_true = f.sum()
    assert got.nu[0] == pytest.approx(f[:10].sum() / pool_true)  # 5 of the pool's 6 correct
    assert got.nu[1] == pytest.approx(f[5:].sum() / pool_true)   # 5 of 6
    assert np.all(got.recall.se >= 0) and got.recall.method == "stratified"


def test_the_seeds_literal_rule_gives_a_system_its_bands_precision():
    # band k=1 holds A's 0..4 (1 of 5 correct) and B's 10..14 (1 of 5): the same precision 0.2, so the literal
    # rule is right here; make B's singletons all correct and it credits A with B's precision
    d, f = _two_systems()
    f2 = f.copy()
    f2[10:15] = 1.0
    d2 = make_design(d.P, d.src, d.xs, f2[d.xs], np.zeros((2, 0), bool))
    own = stratified_recall(d2, min_draws=1)
    lit = stratified_recall(d2, min_draws=1, shared=True)
    true_nu_a = f2[:10].sum() / f2.sum()
    assert own.nu[0] == pytest.approx(true_nu_a)
    assert lit.nu[0] > true_nu_a + 0.1  # A's singletons judged by the band's precision (0.6 instead of 0.2)


def test_combination_weights_and_variance():
    rng = np.random.default_rng(4)
    U = 400
    f = rng.random(U) < 0.4
    systems = [np.arange(0, 250), np.arange(100, 400), np.arange(50, 300)]
    P = distribution_matrix(systems, U)
    src = np.repeat(np.arange(3), 120)
    xs = np.concatenate([rng.choice(s, 120) for s in systems])
    y0 = rng.choice(np.flatnonzero(f), 100)
    g0 = np.array([np.isin(y0, s) for s in systems])
    d = make_design(P, src, xs, f[xs].astype(float), g0)
    sc = estimate(d)
    base = RecallEstimate(sc.r, sc.theta, sc.nu)
    both = combined_recall(d, base)
    assert np.all((0 <= both.weight) & (both.weight <= 1))
    r_e = g0.mean(1)
    rec = both.recall
    assert np.allclose(rec.value, both.weight * r_e + (1 - both.weight) * sc.r.value)
    assert np.all(rec.se <= sc.r.se + 1e-12)  # the optimal combination is never worse than either part
    assert np.all(rec.interval.contains(rec.value)) and rec.method == "joint-balance+exhaustive"


def test_simulate_unassessed_command(tmp_path, capsys):
    from unpooled.cli.main import main

    out = tmp_path / "u.json"
    assert main(["simulate", "unassessed", "--trials", "2", "--seed", "1", "--spread", "parametric",
                 "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert set(d["rows"]) == {"joint", "exhaustive", "stratified", "seed-shared", "joint+exhaustive",
                              "stratified+exhaustive"}
    assert d["rows"]["joint"]["re_joint"] == pytest.approx(1.0)
    assert "RE/joint" in capsys.readouterr().out
