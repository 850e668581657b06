"""Answer formats: validation with located messages, and aggregation of document tasks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.annotation.answers import (
    AnswerError, aggregate_mentions, aggregate_relations, candidate_pairs, quorum, relation_triples,
    validate_entities, validate_relations, validate_verify, verify_correct,
)

OK = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}


def test_verify_valid_and_correct_rule():
    assert validate_verify(OK) == OK
    assert verify_correct(OK)
    assert not verify_correct({**OK, "object_ok": False})
    assert not verify_correct({**OK, "link_ok": False})
    assert verify_correct({**OK, "link_ok": True})
    assert not verify_correct({**OK, "relation": "none"})
    other = validate_verify({**OK, "relation": "other", "other_predicate": "P17"}, predicates=["P17"])
    assert other["other_predicate"] == "P17" and not verify_correct(other)


@pytest.mark.parametrize("value, field, match", [
    ([], "answer", "expected an object"),
    ({**OK, "relation": "maybe"}, "relation", "expected one of holds, other, none, got 'maybe'"),
    ({**OK, "relation": "other"}, "other_predicate", "expected a relation of the schema"),
    ({**OK, "relation": "other", "other_predicate": "P999"}, "other_predicate", "got 'P999'"),
    ({**OK, "subject_ok": "yes"}, "subject_ok", "expected true or false, got 'yes'"),
    ({**OK, "link_ok": 1}, "link_ok", "expected true or false or null"),
    ({**OK, "extra": 1}, "extra", "unknown field"),
])
def test_verify_errors_name_the_field(value, field, match):
    with pytest.raises(AnswerError, match=match) as exc:
        validate_verify(value, predicates=["P17"])
    assert exc.value.field == field


def test_entities_validation():
    good = {"mentions": [{"start": 5, "end": 9, "type": "LOC", "cluster": 2},
                         {"start": 0, "end": 4, "type": "PER", "cluster": 1}]}
    out = validate_entities(good, text_length=20, types=["PER", "LOC"])
    assert [m["start"] for m in out["mentions"]] == [0, 5] and out["mentions"][0]["link"] == ""
    cases = [
        ({"mentions": [{"start": 0, "end": 30, "type": "PER"}]}, "mentions[0].end", "not inside the document"),
        ({"mentions": [{"start": 0, "end": 4, "type": "XXX"}]}, "mentions[0].type", "got 'XXX'"),
        ({"mentions": [{"start": 0, "end": 4, "type": "PER"}, {"start": 0, "end": 4, "type": "LOC"}]}, "mentions[1]", "marked twice"),
        ({"mentions": [{"start": 0, "end": 6, "type": "PER"}, {"start": 4, "end": 9, "type": "LOC"}]}, "mentions", "overlap"),
        ({"mentions": [{"start": True, "end": 4, "type": "PER"}]}, "mentions[0].start", "integers"),
        ({"mentions": [{"start": 0, "end": 4, "type": "PER", "cluster": "a"}]}, "mentions[0].cluster", "integer"),
        ({}, "mentions", "list 'mentions'"),
    ]
    for value, field, match in cases:
        with pytest.raises(AnswerError, match=match) as exc:
            validate_entities(value, text_length=20, types=["PER", "LOC"])
        assert exc.value.field == field


def test_relations_validation():
    out = validate_relations({"pairs": {"0": ["ab:P17", "ab:P17"], "1": []}}, n_pairs=2, predicates=["P17"])
    assert out == {"pairs": {"0": ["ab:P17"], "1": []}}
    with pytest.raises(AnswerError, match=r"no answer for pair 1 \(1 pairs unanswered\)"):
        validate_relations({"pairs": {"0": []}}, n_pairs=2, predicates=["P17"])
    with pytest.raises(AnswerError, match="got 'xy:P17'"):
        validate_relations({"pairs": {"0": ["xy:P17"]}}, n_pairs=1, predicates=["P17"])
    with pytest.raises(AnswerError, match="the task has pairs 0-0"):
        validate_relations({"pairs": {"0": [], "5": []}}, n_pairs=1, predicates=["P17"])


def test_quorum():
    assert [quorum(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_aggregate_mentions_majority_spans_types_and_clusters():
    a1 = {"mentions": [{"start": 0, "end": 4, "type": "PER", "cluster": 1}, {"start": 10, "end": 14, "type": "PER", "cluster": 1},
                       {"start": 20, "end": 25, "type": "LOC", "cluster": 2}]}
    a2 = {"mentions": [{"start": 0, "end": 4, "type": "PER", "cluster": 7}, {"start": 10, "end": 14, "type": "PER", "cluster": 7},
                       {"start": 20, "end": 25, "type": "ORG", "cluster": 8}]}
    a3 = {"mentions": [{"start": 0, "end": 4, "type": "ORG", "cluster": 1}, {"start": 10, "end": 14, "type": "PER", "cluster": 2},
                       {"start": 30, "end": 33, "type": "LOC", "cluster": 3}]}
    got = aggregate_mentions([a1, a2, a3])
    assert [(m["start"], m["type"]) for m in got] == [(0, "PER"), (10, "PER"), (20, "LOC")]
    # 0-4 and 10-14 are together for 2 of 3 answers: one cluster; 30-33 (one vote) dropped
    assert got[0]["cluster"] == got[1]["cluster"] == 0 and got[2]["cluster"] == 2
    assert aggregate_mentions([]) == []


def test_candidate_pairs_one_per_sentence_and_cluster_pair():
    mentions = [{"start": 0, "end": 2, "type": "PER", "cluster": 0}, {"start": 4, "end": 6, "type": "LOC", "cluster": 1},
                {"start": 8, "end": 9, "type": "PER", "cluster": 0}, {"start": 12, "end": 14, "type": "LOC", "cluster": 1},
                {"start": 21, "end": 23, "type": "ORG", "cluster": 2}, {"start": 25, "end": 27, "type": "PER", "cluster": 0}]
    pairs = candidate_pairs(mentions, [0, 20], [15, 30])
    assert pairs == [(0, 1), (4, 5)]
    assert candidate_pairs(mentions, [0, 20], [15, 30], compatible=lambda a, b: "ORG" not in (a, b)) == [(0, 1)]


def test_aggregate_relations_and_triples():
    answers = [{"pairs": {"0": ["ab:P1", "ba:P2"], "1": []}}, {"pairs": {"0": ["ab:P1"], "1": ["ab:P3"]}},
               {"pairs": {"0": ["ab:P1", "ba:P2"], "1": []}}]
    agg = aggregate_relations(answers, 2)
    assert agg == {"0": ["ab:P1", "ba:P2"], "1": []}
    assert relation_triples([{}, {}], [(0, 1), (0, 1)], agg) == [(0, "P1", 1), (1, "P2", 0)]


spans = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 6), st.sampled_from(["PER", "LOC"]), st.integers(0, 3)),
                 max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(spans, min_size=1, max_size=5))
def test_aggregated_mentions_are_valid_and_majority_backed(raw):
    answers = []
    for ms in raw:
        seen, out = [], []
        for s, n, t, c in sorted(ms):
            if all(s >= e0 or s + n <= s0 for s0, e0 in seen):
                seen.append((s, s + n))
                out.append({"start": s, "end": s + n, "type": t, "cluster": c})
        answers.append(validate_entities({"mentions": out}, text_length=50, types=["PER", "LOC"]))
    got = aggregate_mentions(answers)
    need = quorum(len(answers))
    for m in got:
        votes = sum(any(x["start"] == m["start"] and x["end"] == m["end"] for x in a["mentions"]) for a in answers)
        assert votes >= need
    # the aggregate is itself a valid answer (no overlapping spans: a majority cannot back two crossing spans)
    validate_entities({"mentions": got}, text_length=50, types=["PER", "LOC"])
    # unanimous answers aggregate to themselves
    assert [(m["start"], m["end"], m["type"]) for m in aggregate_mentions([answers[0]] * 3)] == \
        [(m["start"], m["end"], m["type"]) for m in answers[0]["mentions"]]
