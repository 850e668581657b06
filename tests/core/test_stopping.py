"""``unpooled simulate stopping`` (core/simulate/stopping.py, boundaries.py): small deterministic versions that
test real properties (fixed seeds), the rules on a hand-made trajectory, the baseline boundaries by hand."""

import numpy as np
import pytest

from unpooled.core.errors import InvalidInputError
from unpooled.core.simulate.boundaries import betting_sequence, compare_boundaries, eb_sequence
from unpooled.core.simulate.stopping import StoppingWorld, run_stopping, stop_index, summarise

SMALL = StoppingWorld(size_a=300, size_b=300, shared=150, unfound=100, exhaustive=150, max_draws=250, width=0.16)


def _tr(lo_f1, hi_f1, rival, lo_p, hi_p, true_p=0.6):
    L = len(lo_f1)
    z = np.zeros((L, 2))

    def pair(lo, hi):
        a, b = z.copy(), z.copy()
        a[:, 0], b[:, 0] = lo, hi
        return a, b

    c = {"p": pair(lo_p, hi_p), "r": pair([0] * L, [1] * L), "f1": pair(lo_f1, hi_f1)}
    est = {"p": z.copy(), "r": z.copy(), "f1": z.copy()}
    est["f1"][:, 1] = rival
    return {"n": np.arange(1, L + 1) * 25, "true": {"p": np.array([true_p, 0.5]), "r": np.array([0.5, 0.5]),
                                                    "f1": np.array([0.5, 0.5])},
            "est": est, "fixed-n": c, "anytime": c}


def test_the_rules_stop_at_the_first_look_that_fires():
    w = StoppingWorld(width=0.1)
    tr = _tr([0.3, 0.45, 0.46, 0.40], [0.7, 0.6, 0.52, 0.48], [0.5, 0.5, 0.44, 0.3], [0.5, 0.61, 0.5, 0.5],
             [0.7, 0.7, 0.7, 0.55])
    assert stop_index(tr, "fixed-n", "rival", w) == 2  # 0.44 below [0.46, 0.52]
    assert stop_index(tr, "fixed-n", "value", w) == 1  # 0.6 below [0.61, 0.7]
    assert stop_index(tr, "fixed-n", "width", w) == 2  # 0.06 wide
    assert stop_index(tr, "fixed-n", "fixed", w) == 3
    tr = _tr([0.3] * 3, [0.7] * 3, [0.5] * 3, [0.5] * 3, [0.7] * 3)
    assert stop_index(tr, "anytime", "rival", w) == 2  # never fires: the last look
    with pytest.raises(InvalidInputError, match="rule"):
        stop_index(tr, "anytime", "sometimes", w)


def test_peeking_rules_cost_the_fixed_n_interval_coverage_and_the_sequence_keeps_it():
    rows = {(r.rule, r.kind): r for r in run_stopping(24, seed=3, world=SMALL)}
    assert rows["value", "anytime"].cover_p >= 0.9
    assert rows["value", "fixed-n"].cover_p <= 0.8
    assert rows["ever", "anytime"].cover_f1 >= rows["ever", "fixed-n"].cover_f1 + 0.1
    for k in ("p", "r", "f1"):
        assert getattr(rows["ever", "anytime"], f"cover_{k}") >= 0.85
    # the sequence is wider at the same look, so it stops later on width
    assert rows["fixed", "anytime"].width_f1 > 1.4 * rows["fixed", "fixed-n"].width_f1
    assert rows["width", "anytime"].draws >= rows["width", "fixed-n"].draws
    assert all(r.trials == 24 for r in rows.values())


def test_trials_are_the_same_for_a_seed_whatever_their_number():
    from unpooled.core.simulate.stopping import trajectory

    a = trajectory(SMALL, np.random.default_rng(np.random.SeedSequence(4).spawn(2)[1]))
    b = trajectory(SMALL, np.random.default_rng(np.random.SeedSequence(4).spawn(5)[1]))
    np.testing.assert_array_equal(a["anytime"]["f1"][0], b["anytime"]["f1"][0])
    assert len(summarise([a, b], SMALL)) == 12


def test_bad_world_options_name_the_field():
    with pytest.raises(InvalidInputError, match="shared"):
        StoppingWorld(size_a=10, size_b=10, shared=20)
    with pytest.raises(InvalidInputError, match="max_draws"):
        StoppingWorld(batch=50, max_draws=25)
    with pytest.raises(InvalidInputError, match="trials"):
        run_stopping(0)


def test_the_empirical_bernstein_sequence_by_hand_at_the_first_two_steps():
    x = np.array([1.0, 0.0])
    a = 0.1
    lam1 = min(np.sqrt(2 * np.log(2 / a) / (0.25 * 1 * np.log(2))), 0.5)
    mu1, sig1 = 0.75, (0.25 + 0.0625) / 2
    lam2 = min(np.sqrt(2 * np.log(2 / a) / (sig1 * 2 * np.log(3))), 0.5)
    psi = lambda lam: (-np.log(1 - lam) - lam) / 4
    v1, v2 = 4 * 0.25, 4 * mu1 ** 2
    centre = (lam1 * 1 + lam2 * 0) / (lam1 + lam2)
    half = (np.log(2 / a) + v1 * psi(lam1) + v2 * psi(lam2)) / (lam1 + lam2)
    lo, hi = eb_sequence(x, a)
    assert lo[1] == pytest.approx(max(centre - half, 0)) and hi[1] == pytest.approx(min(centre + half, 1))


def test_the_betting_sequence_shrinks_around_the_mean_and_holds_it():
    rng = np.random.default_rng(2)
    x = (rng.random(2000) < 0.3).astype(float)
    lo, hi = betting_sequence(x, 0.1, grid=2000)
    assert lo[-1] < 0.3 < hi[-1] and hi[-1] - lo[-1] < 0.1
    assert hi[0] - lo[0] > hi[-1] - lo[-1]


def test_every_sequence_covers_uniformly_and_the_fixed_n_interval_does_not():
    rows = {r.boundary: r for r in compare_boundaries(120, p=0.7, max_draws=400, seed=1, grid=400)}
    assert rows["fixed-n"].uniform_cover < 0.75
    for b in ("bonferroni", "mixture", "mixture-1000", "eb", "betting"):
        assert rows[b].uniform_cover >= 0.88
        assert rows[b].widths[100] > rows["fixed-n"].widths[100]


def test_the_separate_rule_and_the_wrong_order():
    from unpooled.core.simulate.stopping import _wrong_order

    w = StoppingWorld()
    tr = _tr([0.40, 0.45, 0.52], [0.60, 0.58, 0.56], [0.5] * 3, [0.5] * 3, [0.7] * 3)
    lo, hi = tr["fixed-n"]["f1"]
    lo[:, 1], hi[:, 1] = [0.30, 0.42, 0.44], [0.50, 0.50, 0.51]  # B: overlapping, overlapping, below A's
    assert stop_index(tr, "fixed-n", "separate", w) == 2
    assert not _wrong_order(tr, "fixed-n", 2)  # A above B, their true F1s equal: not the wrong order
    tr["true"]["f1"] = np.array([0.45, 0.5])
    assert _wrong_order(tr, "fixed-n", 2) and not _wrong_order(tr, "fixed-n", 1)
