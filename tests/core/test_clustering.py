"""The cross-document clustering task's answers (core/annotation/clustering.py): validation, aggregation,
agreement figures by hand, B-cubed."""

from __future__ import annotations

import math

import pytest

from unpooled.core.annotation.answers import AnswerError
from unpooled.core.annotation.clustering import aggregate_clusters, b_cubed, validate_clusters


def test_validate_clusters():
    assert validate_clusters({"groups": [[2, 0], [1]]}, n_items=3) == {"groups": [[0, 2], [1]]}
    for bad, match in [({"groups": [[0], [0, 1]]}, r"groups\[1\]: item 0 is already in groups\[0\]"),
                       ({"groups": [[0]]}, "item 1 is in no group"),
                       ({"groups": [[0, 5], [1]]}, r"groups\[0\]: expected item numbers 0-1"),
                       ({"groups": [[]]}, "non-empty"),
                       ({"groups": [[0, 1]], "x": 1}, "x: unknown field"),
                       ([], "expected an object"),
                       ({"groups": [[True, 1]]}, "expected item numbers")]:
        with pytest.raises(AnswerError, match=match):
            validate_clusters(bad, n_items=2)


def test_aggregate_majority_and_agreement_by_hand():
    a = {"groups": [[0, 1], [2], [3]]}
    b = {"groups": [[0, 1, 2], [3]]}
    c = {"groups": [[0, 1], [2, 3]]}
    got = aggregate_clusters([a, b, c], 4)
    assert got["clusters"] == [[0, 1], [2], [3]]
    ag = got["agreement"]
    # 6 pairs: (0,1) 3 votes; (0,2) 1; (1,2) 1; (2,3) 1; (0,3), (1,3) 0: unanimous 3 of 6
    assert ag["pairs"] == 6 and ag["unanimous"] == pytest.approx(0.5)
    # Rand between answers: a-b agree on 4 of 6, a-c 5 of 6, b-c 3 of 6
    assert ag["rand"] == pytest.approx((4 + 5 + 3) / 18)
    votes = [3, 1, 0, 1, 0, 1]
    Pi = [(v * (v - 1) + (3 - v) * (2 - v)) / 6 for v in votes]
    pj = sum(votes) / 18
    Pe = pj ** 2 + (1 - pj) ** 2
    assert ag["kappa"] == pytest.approx((sum(Pi) / 6 - Pe) / (1 - Pe))
    assert ag["support"] == [1.0]
    # transitive closure: 0-1 and 1-2 together by majority makes one cluster
    x = {"groups": [[0, 1], [2]]}
    y = {"groups": [[0], [1, 2]]}
    z = {"groups": [[0, 1, 2]]}
    assert aggregate_clusters([x, y, z], 3)["clusters"] == [[0, 1, 2]]
    empty = aggregate_clusters([], 2)
    assert empty["clusters"] == [[0], [1]] and empty["agreement"]["kappa"] is None
    one = aggregate_clusters([x], 3)
    assert one["clusters"] == [[0, 1], [2]] and one["agreement"]["rand"] is None and one["agreement"]["kappa"] is None


def test_b_cubed():
    assert b_cubed([0, 0, 1], [0, 1, 1]) == pytest.approx((2 / 3, 2 / 3))
    assert b_cubed(["a", "b"], ["x", "x"]) == pytest.approx((1.0, 0.5))
    assert all(math.isnan(v) for v in b_cubed([], []))


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=80, deadline=None)
@given(types=st.lists(st.sampled_from(["PER", "ORG", "LOC", "per"]), max_size=60),
       names=st.lists(st.sampled_from(["Bill Clinton", "Clinton", "Paris", "", "Al  Gore", "x"]), min_size=60,
                      max_size=60),
       max_items=st.integers(1, 12))
def test_blocks_partition_the_items_by_type_within_the_limit(types, names, max_items):
    from collections import Counter

    from unpooled.core.annotation.clustering import blocks

    items = [{"type": t, "text": names[i]} for i, t in enumerate(types)]
    got = blocks(items, max_items)
    flat = [i for b in got for i in b]
    assert sorted(flat) == list(range(len(items)))  # every item exactly once
    assert all(1 <= len(b) <= max_items for b in got)
    if len(items) <= max_items:
        assert got == ([list(range(len(items)))] if items else [])
        return
    per_type = Counter(t.upper() for t in types)
    for b in got:
        kinds = {types[i].upper() for i in b}
        assert len(kinds) == 1  # split by type (case-insensitive)
        assert len(b) >= 2 or per_type[kinds.pop()] == 1 or max_items <= 2  # no lone item cut off a type


def test_combine_agreement_of_one_block_is_that_blocks():
    from unpooled.core.annotation.clustering import combine_agreement

    one = {"pairs": 6, "unanimous": 0.5, "rand": 0.75, "kappa": 0.2}
    assert combine_agreement([one]) == {**one, "blocks": 1}
    assert combine_agreement([]) == {"pairs": 0, "unanimous": None, "rand": None, "kappa": None, "blocks": 0}
