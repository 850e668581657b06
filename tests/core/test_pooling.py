"""Leave-team-out pooling bias: hand-computed example, zero-bias systems, the figures on a TAC-like world."""

from __future__ import annotations

import json

import numpy as np
import pytest
from numpy.testing import assert_allclose

from unpooled.core.errors import InvalidInputError
from unpooled.core.simulate import World, make_world, pooled_scores, pooling_bias, reference_bias

from ..conftest import SHARED_DATA

SPREAD = SHARED_DATA / "paper" / "pooling_bias" / "pooling_bias_anydoc.tsv"


def tiny_world(manual=(5,)) -> World:
    """10 instances, 0..5 true; teams A (systems 0, 1), B (2), C (3); a human run finds instance 5.

    Pools (true instances the other teams and the human run know):
    A: {0,1,3,4,5}; B: {0,1,2,3,5}; C: {0,...,5} = all the truth.
    """
    return World(
        truth=[1, 1, 1, 1, 1, 1, 0, 0, 0, 0], fill=np.arange(10), entity=np.zeros(10, int),
        predicate=np.zeros(10, int), doc=np.arange(10),
        systems=(np.array([0, 1, 2, 6]), np.array([0, 1, 6, 7]), np.array([0, 3, 4, 8, 9]), np.array([1, 3, 9])),
        team=[0, 0, 1, 2], system_names=("a1", "a2", "b1", "c1"), team_names=("A", "B", "C"),
        manual=np.array(manual, dtype=int),
    )


def test_hand_computed_example():
    res = pooling_bias(tiny_world(), top=4)
    # true: a1 P 3/4 R 3/6; a2 2/4, 2/6; b1 3/5, 3/6; c1 2/3, 2/6
    assert_allclose(res.true_p, [3 / 4, 2 / 4, 3 / 5, 2 / 3])
    assert_allclose(res.true_r, [1 / 2, 1 / 3, 1 / 2, 1 / 3])
    assert_allclose(res.true_f1, [0.6, 0.4, 6 / 11, 4 / 9])
    # pooled: a1 hits {0,1} of pool A (5 true); a2 {0,1}; b1 {0,3} of pool B (5); c1 {1,3} of all 6
    assert_allclose(res.pooled_p, [2 / 4, 2 / 4, 2 / 5, 2 / 3])
    assert_allclose(res.pooled_r, [2 / 5, 2 / 5, 2 / 5, 1 / 3])
    assert_allclose(res.pooled_f1, [4 / 9, 4 / 9, 2 / 5, 4 / 9])
    assert_allclose(res.bias_p, [1 / 4, 0, 1 / 5, 0], atol=1e-15)
    assert_allclose(res.bias_r, [1 / 10, -1 / 15, 1 / 10, 0], atol=1e-15)
    assert_allclose(res.bias_f1, [0.6 - 4 / 9, 0.4 - 4 / 9, 6 / 11 - 2 / 5, 0], atol=1e-15)
    assert res.rank.tolist() == [0, 2, 3, 1]
    assert res.largest_adjacent_gap_f1 == pytest.approx(6 / 11 - 4 / 9)  # ranks 2 and 3: 10/99
    assert res.median_bias_p == pytest.approx(0.1)  # of 1/4, 1/5, 0, 0
    assert res.median_bias_r == pytest.approx(0.05)  # of 1/10, 1/10, 0, -1/15
    assert res.median_bias_f1 == pytest.approx(4 / 55)  # of 7/45, 8/55, 0, -2/45
    assert res.fraction_above_gap == 0.5  # a1 and b1


def test_top_restricts_the_summary():
    res = pooling_bias(tiny_world(), top=2)
    assert res.top == 2 and res.top_systems.tolist() == [0, 2]
    assert res.largest_adjacent_gap_f1 == pytest.approx(0.6 - 6 / 11)
    assert res.median_bias_p == pytest.approx(0.225)
    assert pooling_bias(tiny_world(), top=99).top == 4


def test_system_without_unique_predictions_has_zero_bias():
    res = pooling_bias(tiny_world())
    assert res.bias_p[3] == 0 and res.bias_r[3] == 0 and res.bias_f1[3] == 0


def test_manual_run_joins_the_pool():
    # without the human run, instance 5 is unknown to C's pool: c1's recall is overestimated
    res = pooling_bias(tiny_world(), manual=False)
    assert res.pooled_r[3] == pytest.approx(2 / 5) and res.bias_r[3] == pytest.approx(-1 / 15)
    assert res.bias_p[3] == 0


def test_pooled_scores():
    w = tiny_world()
    mask = np.array([True, False, False, False])  # pool: a1 plus the human run -> true {0,1,2,5}
    assert pooled_scores(w, mask, 2) == pytest.approx((1 / 5, 1 / 4, 2 * (1 / 5) * (1 / 4) / (1 / 5 + 1 / 4)))
    p, r, f = pooled_scores(w, mask, [0, 3])
    assert_allclose(p, [3 / 4, 1 / 3])
    assert_allclose(r, [3 / 4, 1 / 4])
    assert isinstance(p, np.ndarray)
    p, r, f = pooled_scores(w, np.zeros(4, bool), 0, manual=False)  # empty pool: everything is wrong
    assert (p, r, f) == (0.0, 0.0, 0.0)
    with pytest.raises(InvalidInputError, match="pooled_systems_mask: expected 4 booleans"):
        pooled_scores(w, [1, 0, 0, 0], 0)
    with pytest.raises(InvalidInputError, match=r"system: expected system indices in 0..3"):
        pooled_scores(w, mask, 4)
    with pytest.raises(InvalidInputError, match="top: expected a positive integer, got 0"):
        pooling_bias(w, top=0)


def test_filter_system_in_generated_world_has_zero_bias():
    """A one-run team that only filters other teams' output (like SF_UTAustin1) has no pooling bias."""
    w = make_world(rng=8, n_instances=3000, n_entities=100)
    rng = np.random.default_rng(0)
    union = np.unique(np.concatenate(w.systems))
    filt = np.sort(rng.choice(union, size=300, replace=False))
    w2 = World(truth=w.truth, fill=w.fill, entity=w.entity, predicate=w.predicate, doc=w.doc,
               systems=w.systems + (filt,), team=np.append(w.team, w.n_teams), manual=w.manual,
               system_names=w.system_names + ("filter1",), team_names=w.team_names + ("filter",))
    res = pooling_bias(w2)
    assert res.bias_p[-1] == 0 and res.bias_r[-1] == 0 and res.bias_f1[-1] == 0
    assert np.median(res.bias_p[:-1]) > 0  # the others do have unique predictions


def test_to_dict_is_json_ready():
    d = pooling_bias(tiny_world()).to_dict()
    json.dumps(d)
    assert d["systems"][0]["system"] == "a1" and d["systems"][0]["rank"] == 1
    assert set(d) >= {"median_bias_p", "median_bias_r", "median_bias_f1", "largest_adjacent_gap_f1",
                      "fraction_above_gap", "top"}


def test_bias_on_a_tac_like_world_is_of_the_papers_order():
    res = pooling_bias(make_world(rng=1))
    assert 0.02 < res.median_bias_p < 0.09
    assert 0.005 < res.median_bias_r < 0.05
    assert 0.01 < res.median_bias_f1 < 0.06
    assert np.all(res.bias_p >= 0)  # pooling can only lose correct instances


@pytest.mark.skipif(not SPREAD.is_file(), reason=f"{SPREAD} not found")
def test_bias_with_the_tac_spread_matches_the_paper():
    ref = reference_bias(SPREAD)
    assert ref["median_bias_f1"] == pytest.approx(0.0319, abs=1e-4)
    assert ref["largest_adjacent_gap_f1"] == pytest.approx(0.0338, abs=1e-4)
    macro = reference_bias(SPREAD, level="macro")
    assert macro["median_bias_f1"] == pytest.approx(0.0203, abs=1e-4)  # method.md §4.1: 2.05 (ranked differently)
    res = [pooling_bias(make_world(rng=s, spread=SPREAD)) for s in range(3)]
    f1 = np.mean([r.median_bias_f1 for r in res])
    assert 0.5 * ref["median_bias_f1"] < f1 < 1.5 * ref["median_bias_f1"]
    assert res[0].largest_adjacent_gap_f1 == pytest.approx(ref["largest_adjacent_gap_f1"], abs=0.002)


def test_reference_bias_file(tmp_path):
    f = tmp_path / "pb.tsv"
    head = "system\tmicro-p\tmicro-r\tmicro-f1\tmicro-p-lto\tmicro-r-lto\tmicro-f1-lto\n"
    f.write_text(head + "A1\t0.5\t0.4\t0.44\t0.4\t0.3\t0.34\nB1\t0.3\t0.2\t0.24\t0.3\t0.2\t0.24\n"
                 "LDC\t0.9\t0.2\t0.3\t0.9\t0.2\t0.3\n")
    ref = reference_bias(f)
    assert ref["systems"] == 2 and ref["largest_adjacent_gap_f1"] == pytest.approx(0.2)
    assert ref["median_bias_p"] == pytest.approx(0.05) and ref["fraction_above_gap"] == 0.0
    with pytest.raises(InvalidInputError, match="level: expected 'micro' or 'macro'"):
        reference_bias(f, level="mean")
    with pytest.raises(InvalidInputError, match="lacks macro-f1"):
        reference_bias(f, level="macro")
