"""The estimator and adaptive simulations on a small world: structure and the qualitative findings."""

from __future__ import annotations

import types

import numpy as np
import pytest

from unpooled.core.simulate.experiments import run_adaptive, run_estimators, true_scores

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")


def small_world(seed=0, U=3000, teams=6, runs=18):
    """Teams share components (a team-level base set); runs of a team perturb it."""
    rng = np.random.default_rng(seed)
    truth = rng.random(U) < 0.35
    easy = rng.random(U)
    systems, team = [], []
    for r in range(runs):
        t = r % teams
        trng = np.random.default_rng(1000 + t)
        base_true = np.flatnonzero(truth & (easy > trng.uniform(0.3, 0.9)))
        base_false = np.flatnonzero(~truth & (trng.random(U) < trng.uniform(0.02, 0.3)))
        keep = np.concatenate([base_true[rng.random(len(base_true)) < 0.8],
                               base_false[rng.random(len(base_false)) < 0.8]])
        systems.append(np.unique(keep))
        team.append(t)
    return types.SimpleNamespace(truth=truth, systems=tuple(systems), team=np.array(team))


def test_estimators_simulation():
    w = small_world()
    res = run_estimators(w, trials=40, labels=60, exhaustive=80, top=12, rng=3)
    s = res["summary"]
    assert set(s) == {"pooling", "simple", "joint-heuristic", "joint-balance", "joint-minvar"}
    for name in ("simple", "joint-heuristic", "joint-balance"):
        for k in ("p", "r", "f1"):
            assert abs(s[name][f"bias_{k}"]) < 0.02, (name, k, s[name])
            assert 0.75 <= s[name][f"coverage_{k}"] <= 1.0, (name, k, s[name])
    # pooling misses the held-out teams' unique true instances: recall too high, no interval
    assert s["pooling"]["bias_r"] > 0.02 and "coverage_r" not in s["pooling"]
    # reuse narrows precision
    assert s["joint-balance"]["width_p"] < s["simple"]["width_p"]


def test_estimators_is_reproducible():
    w = small_world(1)
    a = run_estimators(w, trials=3, labels=20, exhaustive=20, top=6, rng=9)["summary"]
    b = run_estimators(w, trials=3, labels=20, exhaustive=20, top=6, rng=9)["summary"]
    assert a == b


def test_adaptive_saves_labels():
    w = small_world(2)
    res = run_adaptive(w, trials=2, systems=8, own=200, rng=4)
    lab = res["labels_by_system"]
    assert lab["fixed"] == [200.0 * (k + 1) for k in range(8)]
    assert all(np.diff(lab["adaptive"]) >= 0)
    assert res["total"]["adaptive"] < res["total"]["fixed"]
    assert res["total"]["fixed-reuse"] <= res["total"]["fixed"]


def test_true_scores():
    w = types.SimpleNamespace(truth=np.array([1, 0, 1, 1], bool), systems=(np.array([0, 1]), np.array([2, 3])),
                              team=np.array([0, 1]))
    p, r, f = true_scores(w)
    np.testing.assert_allclose(p, [0.5, 1.0])
    np.testing.assert_allclose(r, [1 / 3, 2 / 3])
    np.testing.assert_allclose(f, [0.4, 0.8])
