"""The blocking rule: confident, not point-estimate, so good annotators are not blocked on bad luck."""

from __future__ import annotations

import numpy as np

from unpooled.core.annotation.controls import blocking_bar, should_block


def _ever_blocked(accuracy: float, controls: int, rng, bar: float = 0.6) -> float:
    """Share of annotators blocked at some point over ``controls`` control answers (checked after each)."""
    hits = rng.random((1000, controls)) < accuracy
    blocked = 0
    for row in hits:
        c = 0
        for n, h in enumerate(row, 1):
            c += h
            if should_block(c, n, bar=bar, min_controls=5):
                blocked += 1
                break
    return blocked / len(hits)


def test_good_annotators_stay_and_spammers_go():
    rng = np.random.default_rng(0)
    good = _ever_blocked(0.8, 30, rng)
    spam = _ever_blocked(0.3, 30, rng)
    print(f"\nblocked within 30 controls: accuracy 0.8 {good:.3f}, accuracy 0.3 {spam:.3f}")
    assert good < 0.03
    assert spam > 0.95
    assert not should_block(0, 4, bar=0.6, min_controls=5)      # too few controls to judge
    assert should_block(0, 5, bar=0.6, min_controls=5) and not should_block(3, 5, bar=0.6, min_controls=5)


def test_the_bar_follows_the_crowd_on_the_same_relations():
    """An honest crowd weak on a hard relation (0.75 / 0.45: accuracy 0.65 on its controls) answering mostly
    that relation's controls is rarely blocked against the relative bar, where the fixed 0.6 blocks many; a
    spammer (0.5) answering the same mix is still blocked, at least 10 times as often; the bar is never above the threshold and is the
    threshold before the crowd has answered."""
    assert blocking_bar([3, 0], [0, 0], [0, 0], 0.6) == 0.6
    assert blocking_bar([], [], [], 0.6) == 0.6
    # stratum 0 easy (crowd 0.95 of 400), stratum 1 hard (crowd 0.65 of 400): bars 0.6 and ~0.55
    right, answered = [380, 260], [400, 400]
    assert abs(blocking_bar([1, 0], right, answered, 0.6) - 0.6) < 1e-12
    hard = blocking_bar([0, 1], right, answered, 0.6)
    assert 0.54 < hard < 0.56
    mixed = blocking_bar([1, 3], right, answered, 0.6)
    assert abs(mixed - (0.6 + 3 * hard) / 4) < 1e-12
    assert blocking_bar([1, 1], [400, 400], [400, 400], 0.6) == 0.6  # a perfect crowd does not raise it
    # a crowd answering a relation's controls wrong on purpose does not lower the bar below chance
    assert blocking_bar([0, 1], right, [400, 4000], 0.6) == 0.5
    assert blocking_bar([0, 1], right, [400, 4000], 0.4) == 0.4
    rng = np.random.default_rng(1)
    honest_fixed = _ever_blocked(0.65 * 0.75 + 0.95 * 0.25, 60, rng, bar=0.6)
    honest = _ever_blocked(0.65 * 0.75 + 0.95 * 0.25, 60, rng, bar=0.6 * 0.25 + hard * 0.75)
    weak_fixed = _ever_blocked(0.65, 60, rng, bar=0.6)
    weak = _ever_blocked(0.65, 60, rng, bar=hard)
    spam = _ever_blocked(0.5, 60, rng, bar=0.6 * 0.25 + hard * 0.75)
    print(f"\nblocked within 60 controls (3 in 4 hard): honest {honest:.3f} (fixed bar {honest_fixed:.3f}); "
          f"all hard: honest {weak:.3f} (fixed {weak_fixed:.3f}); spammer {spam:.3f}")
    assert weak < 0.05 < weak_fixed
    assert honest < 0.02
    assert spam > 0.4 and spam > 10 * honest
