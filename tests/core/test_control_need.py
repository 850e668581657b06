"""Which gold control comes next (core/annotation/controls.py): the control answers follow the items' mix of
strata, half of each class, however the controls were made; each control at most once per annotator."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.annotation.controls import control_order
from unpooled.core.simulate.regimes import _control_answers


def allocate(demand, stratum, positive, total, cap):
    n = np.zeros(len(stratum), np.int64)
    for _ in range(total):
        order = control_order(demand, stratum, positive, n, n < cap, rng=len(n) + int(n.sum()))
        if not len(order):
            break
        n[order[0]] += 1
    return n


def test_controls_made_mostly_easy_are_answered_in_the_items_mix():
    # 90 easy controls, 10 hard (half of each class); the items: 20% easy, 80% hard
    stratum = np.r_[np.zeros(90, int), np.ones(10, int)]
    positive = np.arange(100) % 2 == 0
    n = allocate([200, 800], stratum, positive, total=100, cap=10)
    hard = n[stratum == 1]
    # offered at random, the hard ones would get about 10 of the 100 answers; by need 80
    assert hard.sum() == 80 and n.sum() == 100
    assert hard[positive[stratum == 1]].sum() == 40 == hard[~positive[stratum == 1]].sum()
    assert hard.max() - hard.min() <= 1  # the least answered first: every hard control anchors
    # at the cap (one answer per annotator) the rest goes where it is needed next
    n = allocate([200, 800], stratum, positive, total=300, cap=10)
    assert n[stratum == 1].sum() == 100 and np.all(n <= 10) and n.sum() == 300


def test_one_stratum_is_answered_evenly():
    positive = np.arange(50) % 2 == 0
    n = allocate([7], np.zeros(50, int), positive, total=150, cap=10)
    assert np.all(n == 3)


def test_only_available_controls_are_offered_and_strata_without_items_last():
    stratum = np.array([0, 0, 1, 1, 2, 2])
    positive = np.array([True, False] * 3)
    order = control_order([0, 5, 0], stratum, positive, np.zeros(6), [True, True, True, False, True, True], rng=0)
    assert sorted(order.tolist()) == [0, 1, 2, 4, 5] and order[0] == 2  # stratum 1's only available control
    assert len(control_order([1], [0], [True], [0], [False])) == 0


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=5), st.integers(2, 40), st.integers(1, 200),
       st.integers(0, 10 ** 6))
def test_answers_follow_the_demand_within_the_controls_capacity(demand, nc, total, seed):
    H = len(demand)
    rng = np.random.default_rng(seed)
    stratum = rng.integers(0, H, nc)
    positive = rng.random(nc) < 0.5
    cap = 5
    n = allocate(demand, stratum, positive, total, cap)
    assert np.all(n <= cap) and n.sum() == min(total, cap * nc)
    # no (stratum, class) is short of its share by more than one answer while it still had a control to offer
    share = np.asarray(demand, float) / sum(demand) if sum(demand) else np.full(H, 1 / H)
    for h in range(H):
        for z in (False, True):
            sel = (stratum == h) & (positive == z)
            if (n[sel] < cap).any():
                assert n[sel].sum() >= share[h] * n.sum() / 2 - 1


def test_the_simulations_answer_their_controls_as_the_service_offers_them():
    cst = np.r_[np.zeros(90, int), np.ones(10, int)]
    truth = np.arange(100) % 2 == 0
    n = _control_answers(np.array([100, 400]), cst, truth, 10, np.random.default_rng(1))
    assert n.sum() == 300 and n[cst == 1].sum() == 100 and np.all(n <= 10)
