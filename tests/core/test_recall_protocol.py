"""The recall protocol (core.estimators.exhaustive, 4): within one sentence, or every fact of the document.

The switch decides p0's support, the pairs the exhaustive relations task asks about, and (document) the fact
identity through the corpus's entity clusters, so that a pooled instance matches an exhaustive fact through any
mention of its two clusters.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.annotation.answers import candidate_pairs
from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators import estimate, make_design
from unpooled.core.estimators.exhaustive import (
    PROTOCOL_LABELS, RECALL_PROTOCOLS, crossing_share, fact_level, p0_support, span_clusters, within_sentence,
)
from unpooled.core.matching import InstanceRef
from unpooled.core.names import RECALL_PROTOCOLS as REGISTERED

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")

SPLIT = {"d": ([0, 10, 20], [10, 20, 30])}


def test_registry_and_labels():
    assert REGISTERED == RECALL_PROTOCOLS == ("sentence", "document")
    assert PROTOCOL_LABELS == {"sentence": "within-sentence", "document": "document-level"}


def test_unknown_protocol_is_refused_with_the_choices():
    with pytest.raises(InvalidInputError, match=r"protocol: expected one of sentence, document, got 'doc'"):
        p0_support([], protocol="doc")
    with pytest.raises(InvalidInputError, match="protocol: expected one of sentence, document"):
        candidate_pairs([], [], [], protocol="sentences")


spans = st.tuples(st.integers(0, 28), st.integers(1, 2)).map(lambda t: (t[0], t[0] + t[1]))
refs = st.lists(st.builds(lambda d, s, o: InstanceRef(d, s[0], s[1], "r", o[0], o[1]),
                          st.sampled_from(["d", "e", "old"]), spans, spans), max_size=25)


@given(refs)
@settings(max_examples=60, deadline=None)
def test_p0_support_switch(rs):
    population = {"d", "e"}
    found = {r.key for r in rs[:2]}
    sent = p0_support(rs, found=found, sentences=SPLIT, population=population)
    doc = p0_support(rs, found=found, sentences=SPLIT, population=population, protocol="document")
    for r, a, b in zip(rs, sent, doc):
        # the document protocol: every instance of a current document, whatever its sentences
        assert b == (r.doc in population)
        # the sentence protocol: that, and within one sentence (or found by the exhaustive protocol)
        assert a == (r.doc in population and (r.key in found or within_sentence(r, SPLIT)))
        assert a <= b  # the within-sentence support is part of the document's


def _mentions(draw_clusters):
    out, pos = [], 0
    for c in draw_clusters:
        out.append({"start": pos, "end": pos + 2, "cluster": c, "type": "PER"})
        pos += 4
    return out


@given(st.lists(st.integers(0, 5), min_size=0, max_size=12))
@settings(max_examples=60, deadline=None)
def test_document_pairs_cover_every_cluster_pair_once(clusters):
    ms = _mentions(clusters)
    starts, ends = [0, 16, 32], [16, 32, 48]
    doc = candidate_pairs(ms, starts, ends, protocol="document")
    pairs = [frozenset((ms[a]["cluster"], ms[b]["cluster"])) for a, b in doc]
    k = len(set(clusters))
    assert len(pairs) == len(set(pairs)) == k * (k - 1) // 2
    # every cluster pair the within-sentence task asks about is asked about in the document task
    within = {frozenset((ms[a]["cluster"], ms[b]["cluster"])) for a, b in candidate_pairs(ms, starts, ends)}
    assert within <= set(pairs)


def test_span_clusters_exact_overlap_and_own():
    ents = {"d": [(0, 5, 0), (3, 8, 1), (20, 23, 0)]}
    m = span_clusters(ents, [("d", 3, 8), ("d", 4, 5), ("d", 21, 30), ("d", 40, 41), ("x", 0, 1)])
    assert m[("d", 3, 8)] == 1                      # exactly a mention: its cluster only
    assert m[("d", 4, 5)] == frozenset({0, 1})      # overlaps two clusters' mentions
    assert m[("d", 21, 30)] == 0
    assert m[("d", 40, 41)] == ("span", 40, 41)     # no mention: a cluster of its own
    assert m[("x", 0, 1)] == ("span", 0, 1)         # no entity layer for the document


# doc d: cluster 0 at [0,2) (sentence 0) and [22,24) (sentence 2); cluster 1 at [12,14) (sentence 1)
ENTS = {"d": [(0, 2, 0), (22, 24, 0), (12, 14, 1), (4, 6, 2)]}
FACT_FIRST = InstanceRef("d", 0, 2, "r", 12, 14)      # the exhaustive task's pair: first mentions, across sentences
FACT_OTHER = InstanceRef("d", 22, 24, "r", 12, 14)    # the same fact through another mention of cluster 0
WRONG = InstanceRef("d", 4, 6, "r", 12, 14)


def test_fact_level_matches_through_any_mention():
    universe = [FACT_OTHER, WRONG, FACT_FIRST]
    members = [np.array([0, 1]), np.array([2])]
    fl = fact_level(universe, members, np.array([0, 2, 1]), [FACT_FIRST, FACT_FIRST], ENTS)
    assert len(fl.facts) == 1 and fl.first.tolist() == [0]   # two true instances of one fact: one column
    assert fl.g0.tolist() == [[True], [True]]                # system 0 states it through the other mention
    assert fl.mult.tolist() == [2, 1, 2]                     # the fact's two pooled instances share its mass
    assert fl.gs.tolist() == [[True, True, True], [True, True, False]]


def test_fact_level_needs_clusters():
    with pytest.raises(InvalidInputError, match="entities: the document recall protocol counts facts between"):
        fact_level([FACT_FIRST], [np.array([0])], np.array([0]), [FACT_FIRST], {})


def test_crossing_share():
    assert crossing_share([FACT_FIRST, WRONG, InstanceRef("z", 0, 1, "r", 2, 3)], SPLIT) == (2, 2)


def _design(protocol):
    """Two systems on one document; system 0 states the cross-sentence fact (at another mention), system 1 a
    within-sentence one.  The exhaustive sample holds both facts (document protocol) or the within one."""
    within = InstanceRef("d", 12, 14, "s", 15, 17)
    ents = {**ENTS, "d": ENTS["d"] + [(15, 17, 3)]}
    universe = [FACT_OTHER, within]
    members = [np.array([0]), np.array([1])]
    P = np.array([[1.0, 0.0], [0.0, 1.0]])
    xs = np.array([0, 1])
    inside = p0_support(universe, sentences=SPLIT, protocol=protocol)
    if protocol == "document":
        fl = fact_level(universe, members, xs, [FACT_FIRST, within], ents)
        return make_design(P, [0, 1], xs, [1.0, 1.0], fl.g0, None, 1 / fl.mult, fl.gs, inside=inside)
    g0 = np.array([[False], [True]])
    return make_design(P, [0, 1], xs, [1.0, 1.0], g0, inside=inside)


def test_the_protocol_changes_recall():
    doc = estimate(_design("document"), estimator="joint", weights="balance")
    sent = estimate(_design("sentence"), estimator="joint", weights="balance")
    # document-level: each system states one of the two facts
    assert doc.r.value.tolist() == pytest.approx([0.5, 0.5])
    # within-sentence: the cross-sentence fact is outside p0's support; system 1 has the one fact there
    assert sent.r.value.tolist() == pytest.approx([0.0, 1.0])
