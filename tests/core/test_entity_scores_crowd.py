"""Entity scores from the crowd's answers (core/estimators/crowd_channels.py and the corrected labels of
core/estimators/entities.py): the rates' fits, the labels' exactness with a unanimous crowd, and the removal of
the aggregated layer's bias under a poor crowd."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.errors import InvalidInputError
from unpooled.core.estimators.crowd_channels import DocumentItems, fit_rates, two_coin, type_channel
from unpooled.core.estimators.entities import METRICS, ExhaustiveDocument, Mention, entity_scores


def M(s, e, typ="PER", cluster=0, link=""):
    return Mention(s, e, typ, cluster, link)


# ---------------------------------------------------------------------------- the rates

@settings(max_examples=25, deadline=None)
@given(pi=st.floats(0.15, 0.85), s1=st.floats(0.75, 0.98), s0=st.floats(0.0, 0.2), seed=st.integers(0, 2 ** 16))
def test_two_coin_recovers_the_rates(pi, s1, s0, seed):
    rng = np.random.default_rng(seed)
    n = 20000
    truth = rng.random(n) < pi
    k = rng.integers(3, 6, n)
    x = rng.binomial(k, np.where(truth, s1, s0))
    out = two_coin(x, k)
    assert out["identified"]
    assert out["s1"] == pytest.approx(s1, abs=0.03)
    assert out["s0"] == pytest.approx(s0, abs=0.03)
    assert out["pi"] == pytest.approx(pi, abs=0.05)
    # the corrected labels' mean is the prevalence
    lab = (x / k - out["s0"]) / (out["s1"] - out["s0"])
    assert lab.mean() == pytest.approx(truth.mean(), abs=0.03)


def test_two_coin_edge_cases():
    out = two_coin([], [])
    assert out["items"] == 0 and math.isnan(out["s1"]) and not out["identified"]
    assert not two_coin([2, 2], [2, 2])["identified"]  # no item with 3 answers, and all say yes
    # the classes are named by their answers: s1 >= s0 whatever the start
    out = two_coin([0] * 50 + [3] * 10, [3] * 60, start=(0.5, 0.1, 0.9))
    assert out["s1"] >= out["s0"]
    with pytest.raises(InvalidInputError):
        two_coin([4], [3])


def test_type_channel_by_hand_and_by_simulation():
    # one mention with 3 answers PER, PER, ORG: 1 agreeing pair of 3; K = 5
    g = 1 / 3
    assert type_channel([1], [3], 5) == pytest.approx((1 + math.sqrt(max(1 - 5 + 20 * g, 0))) / 5)
    assert type_channel([3], [3], 5) == pytest.approx(1.0)
    assert math.isnan(type_channel([], [], 5))
    with pytest.raises(InvalidInputError):
        type_channel([1], [1], 1)
    rng = np.random.default_rng(4)
    c, K = 0.8, 4
    agree = pairs = 0
    for _ in range(4000):
        t = rng.integers(K)
        ans = [t if rng.random() < c else (t + 1 + rng.integers(K - 1)) % K for _ in range(3)]
        agree += sum(ans[i] == ans[j] for i in range(3) for j in range(i + 1, 3))
        pairs += 3
    assert type_channel([agree], [pairs], K) == pytest.approx(c, abs=0.015)


def test_fit_rates_jackknife_and_gaps():
    rng = np.random.default_rng(1)
    items = []
    for _ in range(12):
        t = rng.random(40) < 0.8
        mx = rng.binomial(3, np.where(t, 0.9, 0.05))
        tp = rng.binomial(3, 0.9, 40)  # pairs of answers agreeing on the type, of 3
        px = rng.binomial(3, np.where(rng.random(60) < 0.2, 0.85, 0.02))
        items.append(DocumentItems(mx, [3] * 40, tp, [3] * 40, px, [3] * 60))
    rates = fit_rates(items, 5)
    assert all(rates.corrected.values())
    assert rates.delta.shape == (12, 5) and np.all(np.isfinite(rates.delta)) and np.any(rates.delta != 0)
    # a channel near chance is not corrected
    noisy = [DocumentItems(np.full(30, 1), [2] * 30, [0] * 30, [3] * 30, [], []) for _ in range(3)]
    r2 = fit_rates(noisy, 5)
    assert not any(r2.corrected.values()) and not np.any(r2.delta)
    # what is stored (JSON): no NaN, the pair channel without items gives None
    import json

    out = r2.to_dict()
    json.dumps(out, allow_nan=False)
    assert out["f1"] is None and out["pair_prevalence"] is None


def test_fit_rates_jackknife_is_refitting_without_each_document(monkeypatch):
    """Each delta is the full fit less the fit of the other documents' items, exactly; and the documents' items are
    counted once (the refits subtract a document's counts: refitting from the items read them all once a document,
    140 CPU-s for 200 documents of 5,000 items)."""
    rng = np.random.default_rng(7)
    items = [DocumentItems(rng.binomial(3, np.where(rng.random(30) < 0.7, 0.9, 0.1)), [3] * 30, [2] * 5, [3] * 5,
                           rng.binomial(4, np.where(rng.random(20) < 0.3, 0.8, 0.1)), [4] * 20) for _ in range(9)]
    seen = []
    real = np.unique
    monkeypatch.setattr(np, "unique", lambda a, *args, **kw: seen.append(len(a)) or real(a, *args, **kw))
    rates = fit_rates(items, 5)
    monkeypatch.setattr(np, "unique", real)
    assert sum(seen) == 9 * (30 + 20)
    full = fit_rates(items, 5).theta
    for d in range(9):
        less = fit_rates(items[:d] + items[d + 1:], 5)
        # the refits start from the full fit, so they agree with a cold fit to EM's tolerance
        np.testing.assert_allclose(full - less.theta, rates.delta[d], atol=1e-5)


# ---------------------------------------------------------------------------- the corrected labels

def _random_doc(draw, name):
    n = draw(st.integers(1, 6))
    ms = []
    for x in range(n):
        ms.append(M(10 * x, 10 * x + 5, draw(st.sampled_from(["PER", "ORG", "GPE"])), draw(st.integers(0, 2)),
                    draw(st.sampled_from(["", "", "Q1", "Q2"]))))
    sys_ = [M(m.start + draw(st.integers(0, 1)), m.end, draw(st.sampled_from(["PER", "ORG"])), draw(st.integers(0, 2)),
              draw(st.sampled_from(["", "Q1"]))) for m in ms if draw(st.booleans())]
    sys_ += [M(10 * n + 10 * x, 10 * n + 10 * x + 3, "PER", 9, "") for x in range(draw(st.integers(0, 2)))]
    return tuple(ms), sys_


@settings(max_examples=40, deadline=None)
@given(data=st.data(), k=st.integers(3, 5))
def test_a_unanimous_crowd_gives_the_layers_figures(data, k):
    """Answers that all copy the layer: rates 1 and 0, labels the layer's: every figure equals the layer-only one
    (the corrected path computes the same table)."""
    docs, docs_ans, sysmap = [], [], {}
    for j in range(data.draw(st.integers(2, 5))):
        layer, sys_ = _random_doc(data.draw, str(j))
        docs.append(ExhaustiveDocument(str(j), 0.5, layer))
        docs_ans.append(ExhaustiveDocument(str(j), 0.5, layer, (layer,) * k))
        sysmap[str(j)] = sys_
    plain = entity_scores(docs, [sysmap])[0]
    corr = entity_scores(docs_ans, [sysmap], types=("PER", "ORG", "GPE"))[0]
    for key in METRICS:
        a, b = plain.metrics[key], corr.metrics[key]
        assert (math.isnan(a.value) and math.isnan(b.value)) or a.value == pytest.approx(b.value, abs=1e-9), key
        if a.defined:
            assert b.se == pytest.approx(a.se, abs=1e-6), key


def test_corrected_labels_by_hand():
    # one mention, three answers: two mark it PER, one ORG; a pair marked together by 2 of 3
    layer = (M(0, 5, "PER", 0), M(10, 15, "PER", 0))
    answers = ((M(0, 5, "PER", 1), M(10, 15, "PER", 1)), (M(0, 5, "PER", 1), M(10, 15, "PER", 2)),
               (M(0, 5, "ORG", 3), M(10, 15, "PER", 3)))
    docs = [ExhaustiveDocument("a", 1.0, layer, answers), ExhaustiveDocument("b", 1.0, layer, answers)]
    sys_ = [M(0, 5, "ORG", "e"), M(10, 15, "PER", "e"), M(20, 25, "XYZ", "f")]
    res = entity_scores(docs, [{"a": sys_, "b": sys_}], types=("PER", "ORG"))[0]
    crowd = res.crowd
    # typing: 4 mentions of 3 answers; agreeing pairs 1 + 3 per doc of 6 -> g = 2/3, K = 2
    c = (1 + math.sqrt(2 * (2 / 3) - 1)) / 2
    assert crowd["c"] == pytest.approx(c) and crowd["corrected"]["type"]
    e = 1 - c
    tau = [(1 / 3 - e) / (c - e), (1 - e) / (c - e)]  # ORG given by 1 of the 3 answers, PER by 3
    assert res.metrics["typing"].value == pytest.approx(sum(tau) / 2)
    # the XYZ mention is invalid: no answer marks it; the type outside the schema is never right (not typed: invalid)
    s1, s0 = crowd["s1"], crowd["s0"]
    v = np.array([(1 - s0) / (s1 - s0)] * 2 + [(0 - s0) / (s1 - s0)])
    assert res.metrics["mention_p"].value == pytest.approx(min(1.0, v.sum() / 3))
    # the pair channel: 2 of 3 together, on every pair: f1 = 2/3 or the EM's; B3 P = (1 + rho) / 2 per mention
    f1, f0 = crowd["f1"], crowd["f0"]
    if crowd["corrected"]["pair"]:
        rho = (2 / 3 - f0) / (f1 - f0)
        assert res.metrics["nil_b3_p"].value == pytest.approx(min(1.0, (1 + rho) / 2))
    assert "crowd" in res.to_dict()


def test_a_type_outside_the_schema_is_never_right():
    layer = (M(0, 5, "PER", 0),)
    answers = ((M(0, 5, "PER", 0),), (M(0, 5, "PER", 0),), (M(0, 5, "ORG", 0),))
    docs = [ExhaustiveDocument(str(j), 1.0, layer, answers) for j in range(3)]
    sys_ = {str(j): [M(0, 5, "LOCATION", "e")] for j in range(3)}
    assert entity_scores(docs, [sys_], types=("PER", "ORG", "GPE"))[0].metrics["typing"].value == 0.0


def test_answers_are_validated():
    with pytest.raises(InvalidInputError, match=r"docs\[0\].answers\[0\]"):
        entity_scores([ExhaustiveDocument("a", 1.0, (), ({"start": 0},))], [{}])


# ---------------------------------------------------------------------------- a poor crowd

def _poor_crowd_world(seed, k=3, accuracy=0.75, documents=100, spurious=0.0):
    from unpooled.core.simulate.entities import EntityCell, TYPES, _crowd_layer, _world

    rng = np.random.default_rng(seed)
    cell = EntityCell("t", documents=documents, accuracy=accuracy, k=k)
    gold, systems, _, _ = _world(cell, rng)
    with_answers, layer_only, census = [], [], []
    for d, gms in enumerate(gold):
        layer, answers = _crowd_layer(gms, accuracy, k, rng, spurious=spurious)
        with_answers.append(ExhaustiveDocument(str(d), 1.0, layer, answers))
        layer_only.append(ExhaustiveDocument(str(d), 1.0, layer))
        census.append(ExhaustiveDocument(str(d), 1.0, tuple(gms)))
    sysmaps = [{str(d): systems[s][d] for d in range(len(gold))} for s in range(len(systems))]
    return with_answers, layer_only, census, sysmaps, TYPES


def test_the_answers_remove_the_layers_bias_under_a_poor_crowd():
    """100 documents of a crowd of accuracy 0.75, 3 answers each: the layer's typing, NIL B3 precision and mention
    precision fall short of the census (the gold layer on the same documents); the corrected labels remove most of
    that (their error is under half the layer's shortfall: 0.2-0.3 of it here; 0.1 at 400 documents, which
    ``unpooled simulate entities`` runs as a Monte Carlo) and their interval holds the census's figure."""
    with_answers, layer_only, census, sysmaps, types = _poor_crowd_world(7)
    corr = entity_scores(with_answers, sysmaps, types=types)
    lay = entity_scores(layer_only, sysmaps)
    ref = entity_scores(census, sysmaps)
    for s in range(len(sysmaps)):
        for key, short in (("typing", 0.015), ("nil_b3_p", 0.03), ("mention_p", 0.008)):
            truth = ref[s].metrics[key].value
            gap = truth - lay[s].metrics[key].value
            assert gap > short, (s, key)  # what the correction removes
            m = corr[s].metrics[key]
            assert abs(m.value - truth) < gap / 2, (s, key, m.value, truth, gap)
            assert m.lo <= truth <= m.hi
    assert corr[0].crowd["corrected"] == {"mark": True, "type": True, "pair": True}
    # the rates: marking 1 - 0.25/3 of the true mentions, the right type given marked 0.8333/0.9167
    assert corr[0].crowd["s1"] == pytest.approx(1 - 0.25 / 3, abs=0.01)
    assert corr[0].crowd["c"] == pytest.approx((0.75 + 0.25 / 3) / (1 - 0.25 / 3), abs=0.01)


@settings(max_examples=60, deadline=None)
@given(s1=st.floats(0.6, 0.999), s0=st.floats(0.0, 0.3), k=st.integers(2, 7))
def test_span_weights_are_unbiased_given_that_a_span_was_marked(s1, s0, k):
    """E[w(X) 1[X >= 1] | T] = T: the weights over the marked spans (X ~ Bin(k, s_T)) sum to the true mentions."""
    from unpooled.core.estimators.entities import span_weights

    x = np.arange(1, k + 1)
    w = span_weights(x, k, s1, s0)

    def pmf(s):
        return np.array([math.comb(k, int(j)) * s ** j * (1 - s) ** (k - j) for j in x])

    assert float((w * pmf(s1)).sum()) == pytest.approx(1.0, abs=1e-9)
    assert float((w * pmf(s0)).sum()) == pytest.approx(0.0, abs=1e-9)


def test_recall_counts_every_marked_span_not_the_layers_invented_mentions():
    """Answers that also mark non-mentions (three a document each, where the systems' spurious mentions are): a
    majority of them puts some in the layer, which the layer-only recall counts as gold mentions missed; the
    weighted marked spans remove most of that (their error is under half the layer's shortfall: a quarter of it
    here, on 100 documents)."""
    with_answers, layer_only, census, sysmaps, types = _poor_crowd_world(11, spurious=3.0)
    invented = sum(len(d.mentions) for d in layer_only) - sum(
        sum(1 for g in d.mentions if any((g.start, g.end) == (c.start, c.end) for c in t.mentions))
        for d, t in zip(layer_only, census))
    assert invented > 100  # the layer holds non-mentions
    corr = entity_scores(with_answers, sysmaps, types=types)
    lay = entity_scores(layer_only, sysmaps)
    ref = entity_scores(census, sysmaps)
    for s in range(len(sysmaps)):
        for key in ("mention_r", "link_r"):
            truth = ref[s].metrics[key].value
            m = corr[s].metrics[key]
            assert m.lo <= truth <= m.hi, (s, key)
        link = corr[s].metrics["link_r"]
        assert link.value == pytest.approx(ref[s].metrics["link_r"].value, abs=0.012), s
        truth = ref[s].metrics["mention_r"].value
        gap = truth - lay[s].metrics["mention_r"].value
        assert gap > 0.02, s  # what the weights remove
        assert abs(corr[s].metrics["mention_r"].value - truth) < gap / 2, (s, corr[s].metrics["mention_r"], truth)


def test_the_variance_matches_the_jackknife_of_the_whole_estimate():
    """The linearised variance (labels and the rates' delete-one-document differences, one sum over documents)
    agrees with the delete-one-document jackknife of the whole estimator (the rates refitted each time), and
    differs from the variance that treats the rates as known."""
    import unpooled.core.estimators.crowd_channels as cc
    import unpooled.core.estimators.entities as ent
    from unpooled.core.estimators.entities import t_factor

    with_answers, _, _, sysmaps, types = _poor_crowd_world(3, documents=40)
    N = len(with_answers)
    keys = ("typing", "nil_b3_p", "mention_p")
    full = entity_scores(with_answers, sysmaps, types=types)
    reps = {(s, k): [] for s in range(len(sysmaps)) for k in keys}
    for d in range(N):
        less = with_answers[:d] + with_answers[d + 1:]
        got = entity_scores(less, sysmaps, types=types)
        for (s, k), v in reps.items():
            v.append(got[s].metrics[k].value)
    real = cc.fit_rates

    def known(items, n_types, **kw):
        r = real(items, n_types, **kw)
        r.delta[:] = 0.0
        return r

    ent.fit_rates = known  # the name entity_scores calls
    try:
        fixed = entity_scores(with_answers, sysmaps, types=types)
    finally:
        ent.fit_rates = real
    tf = t_factor(N, 0.90)
    moved = compared = 0
    for (s, k), v in reps.items():
        v = np.array(v)
        if v.max() >= 0.999:  # an estimate clamped at 1 has no spread to compare
            continue
        compared += 1
        jack = (N - 1) / N * float(((v - v.mean()) ** 2).sum())
        assert full[s].metrics[k].se ** 2 / tf == pytest.approx(jack, rel=0.15), (s, k)
        moved += abs(fixed[s].metrics[k].se ** 2 / tf / jack - 1) > 0.05
    assert compared >= 4
    assert moved >= 2
