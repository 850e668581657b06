"""The blocking rule: confident, not point-estimate, so good annotators are not blocked on bad luck."""

from __future__ import annotations

import numpy as np

from unpooled.service.annotation.actions import should_block
from unpooled.service.annotation.models import AnnotationSettings


def _ever_blocked(accuracy: float, controls: int, st, rng) -> float:
    """Share of annotators blocked at some point over ``controls`` control answers (checked after each)."""
    hits = rng.random((1000, controls)) < accuracy
    blocked = 0
    for row in hits:
        c = 0
        for n, h in enumerate(row, 1):
            c += h
            if should_block(c, n, st):
                blocked += 1
                break
    return blocked / len(hits)


def test_good_annotators_stay_and_spammers_go():
    st = AnnotationSettings(block_below_accuracy=0.6, block_min_controls=5)
    rng = np.random.default_rng(0)
    good = _ever_blocked(0.8, 30, st, rng)
    spam = _ever_blocked(0.3, 30, st, rng)
    print(f"\nblocked within 30 controls: accuracy 0.8 {good:.3f}, accuracy 0.3 {spam:.3f}")
    assert good < 0.03
    assert spam > 0.95
    assert not should_block(0, 4, st)      # too few controls to judge
    assert should_block(0, 5, st) and not should_block(3, 5, st)
