"""Seed 000's document-sample figures: frequency bins at the percentiles, clusters, relation shares (raw and
1/pi-weighted), the bar chart, and the recall simulation of the document schemes (small, fast version)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from unpooled.core.errors import InvalidInputError
from unpooled.core.plots.svg import bar_chart
from unpooled.core.sampling.analysis import (
    analyse_corpus, analyse_sample, analyse_schemes, buckets, corpus_entities, entity_key, figures_svg,
    format_tables, frequency_thresholds, mean_analysis,
)
from unpooled.core.simulate.documents import default_defensive, draw, recall_with_interval, run_scheme, synthetic_world

NAMES = [["Obama", "Paris"], ["paris", "France"], ["Obama"], [], ["France", "Merkel"], ["Obama", "Berlin"]]
RELS = [["per:visited"], ["loc:in", "loc:in"], [], [], ["per:met"], ["per:visited", "per:met"]]


def test_entity_key_is_case_and_token_insensitive():
    assert entity_key("  The  U.S. ") == entity_key("the u s") == "the u s"


def test_thresholds_are_the_50th_and_90th_percentiles():
    # the seed's TAC KBP 2016 shape: half the entities in <= 3 documents, a tenth above 154
    df = [1] * 30 + [2] * 10 + [3] * 10 + list(range(4, 44)) + [200] * 10
    lo, hi = frequency_thresholds(df)
    assert lo == 3 and hi == 43
    assert frequency_thresholds([1] * 95 + [5, 6, 7, 8, 9]) == (1, 9)   # q90 == q50: high above the rest's q90
    assert all(math.isnan(v) for v in frequency_thresholds([]))


def test_bins_clusters_and_relation_shares_by_hand():
    c = corpus_entities(NAMES, RELS)
    assert c.df == {"obama": 3, "paris": 2, "france": 2, "merkel": 1, "berlin": 1}
    assert c.thresholds == (2.0, 3.0)
    a = analyse_sample(c, [0, 2, 5], [1.0, 0.5, 0.25])
    assert a.entities == 3 and a.by_bin == {"low": 2, "medium": 1, "high": 0}     # paris, berlin low; obama medium
    assert a.clusters == {"low": 0, "medium": 1, "high": 0}                       # obama in 3 sampled documents
    assert a.relations == {"per:visited": 2 / 3, "per:met": 1 / 3}
    # weighted by 1/pi: visited 1*1 + 1*4, met 1*4
    assert a.relations_weighted == pytest.approx({"per:visited": 5 / 9, "per:met": 4 / 9})
    whole = analyse_corpus(c)
    assert sum(whole.relations.values()) == pytest.approx(1) and whole.n_relations == 6
    assert sum(whole.histogram) == len(c.df)


def test_buckets_cover_every_frequency():
    assert buckets(1) == [(1, 1)]
    assert buckets(20) == [(1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32)]


def test_mean_of_draws():
    c = corpus_entities(NAMES, RELS)
    m = mean_analysis([analyse_sample(c, [0]), analyse_sample(c, [0, 2])], "x")
    assert m.documents == 1.5 and m.clusters["medium"] == 0.5


def test_schemes_end_to_end_and_tables_and_svgs():
    texts = [" ".join(n) + " text" for n in NAMES] * 5
    names = NAMES * 5
    rels = RELS * 5
    c, an = analyse_schemes(texts, names, rels, size=10, draws=2, rng=0)
    assert [a.label for a in an] == ["uniform", "two-stage", "tfidf", "seed"]
    assert all(a.documents > 0 for a in an)
    table = format_tables(c, an)
    assert "low" in table and "per:visited" in table
    svgs = figures_svg(c, an)
    for svg in svgs.values():
        ET.fromstring(svg)                                   # well-formed
    # one colour per series across the figures (the clusters chart has no corpus series)
    assert '<circle cx="' in svgs["clusters"] and 'fill="#E69F00"><title>medium: seed' in svgs["clusters"]
    again = analyse_schemes(texts, names, rels, size=10, draws=2, rng=0)[1]
    assert [a.to_dict() for a in again] == [a.to_dict() for a in an]


def test_analysis_iv():
    c = corpus_entities(NAMES, RELS)
    with pytest.raises(InvalidInputError, match=r"indices: expected document indices in 0\.\.5"):
        analyse_sample(c, [9])
    with pytest.raises(InvalidInputError, match=r"doc_relations: expected one list per document \(6\), got 1"):
        corpus_entities(NAMES, [[]])
    with pytest.raises(InvalidInputError, match=r"thresholds: expected 1 <= low < high"):
        corpus_entities(NAMES, thresholds=(5, 2))
    with pytest.raises(InvalidInputError, match=r"size: expected 1\.\.6"):
        analyse_schemes(["a"] * 6, NAMES, size=7)
    with pytest.raises(InvalidInputError, match="scheme: expected one of uniform, two-stage, tfidf, seed, got 'x'"):
        analyse_schemes(["a"] * 6, NAMES, size=2, schemes=["x"])


def test_bar_chart_draws_every_bar_and_checks_input():
    svg = bar_chart(["a", "b"], {"one": [1, 2], "two": [3, float("nan")]}, title="t", colours={"two": "#123456"})
    root = ET.fromstring(svg)
    rects = [e for e in root.iter() if e.tag.endswith("rect")]
    assert len(rects) == 1 + 3                                 # background + three finite bars
    assert 'fill="#123456"' in svg
    log = bar_chart(["a"], {"s": [1000]}, log=True, horizontal=True)
    assert "1,000" in log
    with pytest.raises(InvalidInputError, match=r"series\['s'\]: expected non-negative values"):
        bar_chart(["a"], {"s": [-1]})
    with pytest.raises(InvalidInputError, match="series: expected at least one series"):
        bar_chart(["a"], {})
    with pytest.raises(InvalidInputError, match=r"series\['s'\]: expected 1 values, got 2"):
        bar_chart(["a"], {"s": [1, 2]})


def test_recall_interval_by_hand():
    r, se, lo, hi = recall_with_interval([1, 2], [2, 2], [0.5, 0.5])
    assert r == pytest.approx(0.75)
    # the delete-one-document jackknife: without document 1 recall is 2/2, without document 2 1/2, so the variance
    # is (N-1)/N sum (r_(d) - mean)^2 = 1/2 * (0.0625 + 0.0625) = 0.0625 (as the linearisation: equal shares h_d),
    # times Student's t with N - 1 = 1 degree of freedom
    from unpooled.core.estimators.exhaustive import t_factor

    assert se == pytest.approx(math.sqrt(0.0625 * t_factor(2, 0.90))) and lo < r < hi
    assert all(math.isnan(v) for v in recall_with_interval([0], [0], [1.0]))


@pytest.mark.parametrize("scheme", ["uniform", "two-stage", "tfidf", "seed"])
def test_recall_under_the_schemes_is_unbiased_on_a_small_world(scheme):
    """A quick version of `unpooled simulate documents` (the full table is in the report): bias within
    3 Monte Carlo standard errors, coverage of the 90% intervals near 0.9."""
    w = synthetic_world(300, n_entities=500, recall=0.5, tilt=1.0, rng=5)
    row = run_scheme(w, scheme, 40, trials=150, replicates=60, rng=1)
    assert abs(row.bias) <= 3 * row.bias_se + 0.002
    assert 0.8 <= row.coverage <= 0.97


def test_synthetic_world_is_reproducible():
    a = synthetic_world(50, rng=3)
    b = synthetic_world(50, rng=3)
    assert a.texts == b.texts and np.array_equal(a.x, b.x) and 0 < a.recall < 1


@pytest.mark.parametrize("scheme", ["uniform", "two-stage", "tfidf", "seed"])
def test_simulated_draws_use_the_service_defaults(scheme):
    """The simulation draws each scheme with the share the service uses (and an explicit one when given)."""
    from unpooled.core.sampling.documents import TFIDF_DEFENSIVE, TWO_STAGE_DEFENSIVE
    from unpooled.core.sampling.seed import DEFENSIVE

    assert default_defensive(scheme) == {"uniform": 0.0, "two-stage": TWO_STAGE_DEFENSIVE, "tfidf": TFIDF_DEFENSIVE,
                                         "seed": DEFENSIVE}[scheme]
    w = synthetic_world(200, n_entities=300, rng=2)
    s = draw(w, scheme, 30, np.random.default_rng(0), replicates=20)
    assert s.scheme == scheme and np.all((s.inclusion > 0) & (s.inclusion <= 1))
    assert len(np.unique(s.indices)) == len(s)
    row = run_scheme(w, scheme, 30, trials=3, defensive=None if scheme == "uniform" else 0.7, replicates=20, rng=0)
    assert row.defensive == (0.0 if scheme == "uniform" else 0.7) and row.trials == 3
    with pytest.raises(InvalidInputError, match="scheme: expected one of uniform, two-stage, tfidf, seed"):
        draw(w, "magic", 30, np.random.default_rng(0))
