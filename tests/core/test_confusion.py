"""Annotators' confusions (core/annotation/confusion.py): semi-supervised Dawid-Skene, pooling, replicates."""

import re

import numpy as np
import pytest

from unpooled.core.annotation.confusion import (
    VerifyAnswers, between_worker_variance, ds_confusions, fit_confusions, shifted_replicates, shrunk_rates,
)
from unpooled.core.errors import InvalidInputError


def _answers(rng, *, n_items=600, n_controls=100, acc=(0.8,) * 5, prevalence=0.8):
    z = np.r_[(rng.random(n_items) < prevalence).astype(int), np.arange(n_controls) % 2]
    control = np.r_[np.full(n_items, -1), z[n_items:]]
    item, worker, yes = [], [], []
    for i in range(n_items + n_controls):
        for w in rng.choice(len(acc), size=3, replace=False):
            item.append(i)
            worker.append(w)
            yes.append(int(z[i] if rng.random() < acc[w] else 1 - z[i]))
    return VerifyAnswers(np.array(item), np.array(worker), np.array(yes),
                         [f"k{i}" for i in range(n_items + n_controls)], control, len(acc))


def test_semi_supervised_confusions_and_empirical_bayes_pooling():
    a = _answers(np.random.default_rng(1))
    sens, fpr = ds_confusions(a, clamp_controls=True)
    # five workers of equal accuracy: no measurable spread, so empirical Bayes pools them
    assert np.ptp(sens) < 1e-3 and np.ptp(fpr) < 1e-3
    assert sens.mean() == pytest.approx(0.8, abs=0.04) and fpr.mean() == pytest.approx(0.2, abs=0.04)
    # a spammer (answers at random) is not pooled with the others
    assert between_worker_variance(np.array([80.0, 81, 79, 80, 50]), np.full(5, 100.0)) > 0.01
    assert between_worker_variance(np.array([80.0, 81, 79, 80, 80]), np.full(5, 100.0)) == 0.0


def test_a_poor_worker_keeps_its_own_rates():
    a = _answers(np.random.default_rng(2), acc=(0.9, 0.9, 0.9, 0.9, 0.55))
    sens, fpr = ds_confusions(a, clamp_controls=True)
    assert sens[4] - fpr[4] < 0.35 < (sens[:4] - fpr[:4]).min()


def test_shrunk_rates_hand_case():
    # tau = 2 answers towards the pooled rate (9 + 1 + 0.01) / (20 + 0.02)
    got = shrunk_rates(np.array([9.0, 1.0]), np.array([10.0, 10.0]), 2.0)
    pooled = 10.01 / 20.02
    assert got == pytest.approx([(9.01 + 2 * pooled) / 12.02, (1.01 + 2 * pooled) / 12.02])


def test_replicates_spread_shrinks_with_more_answers():
    spreads = []
    for n in (300, 2400):
        a = _answers(np.random.default_rng(3), n_items=n, n_controls=n // 6)
        point, reps = fit_confusions(a, "semi", replicates=40, rng=0)
        sens = np.array([r[0] for r in reps])
        spreads.append(sens.mean(1).std())
        assert len(reps) == 40 and point[0].shape == (5,)
    assert spreads[1] < 0.6 * spreads[0]


def test_sources_need_their_data():
    a = _answers(np.random.default_rng(4), n_controls=0)
    assert fit_confusions(a, "semi") is None and fit_confusions(a, "controls") is None
    assert fit_confusions(a, "dawid-skene") is not None
    with pytest.raises(InvalidInputError, match="source: expected one of"):
        fit_confusions(a, "majority")


def test_shifted_replicates_move_with_the_point_fit():
    base = (np.array([0.8, 0.7]), np.array([0.2, 0.1]))
    reps = [(np.array([0.82, 0.68]), np.array([0.21, 0.12]))]
    same = shifted_replicates(base, reps, 2, base, 2)
    np.testing.assert_allclose(same[0][0], reps[0][0])
    new = (np.array([0.8, 0.7, 0.9]), np.array([0.2, 0.1, 0.05]))
    moved = shifted_replicates(base, reps, 2, new, 3)
    assert moved[0][0][2] == pytest.approx(0.9) and moved[0][1][2] == pytest.approx(0.05)  # a new worker: no deviation


def _crowd(acc_items, acc_controls, n_items=300, n_controls=100, workers=10, seed=0, prevalence=0.6):
    from unpooled.core.annotation.confusion import VerifyAnswers

    rng = np.random.default_rng(seed)
    truth = np.concatenate([rng.random(n_items) < prevalence, np.arange(n_controls) % 2 == 0])
    control = np.concatenate([np.full(n_items, -1), truth[n_items:].astype(int)])
    item = np.repeat(np.arange(n_items + n_controls), 3)
    worker = np.concatenate([rng.choice(workers, 3, replace=False) for _ in range(n_items + n_controls)])
    acc = np.where(control[item] >= 0, acc_controls, acc_items)
    right = rng.random(len(item)) < acc
    yes = np.where(right, truth[item], ~truth[item]).astype(int)
    return VerifyAnswers(item, worker, yes, [str(i) for i in range(n_items + n_controls)], control, workers)


def test_controls_easier_than_the_items_send_the_fit_to_the_items():
    from unpooled.core.annotation.confusion import control_mismatch, fit_preferred, items_only, preferred_source

    same = _crowd(0.8, 0.8)
    assert (control_mismatch(same) is None or control_mismatch(same) < 2) and preferred_source(same) == "semi"
    easy = _crowd(0.7, 0.95)
    assert control_mismatch(easy) > 4 and preferred_source(easy) == "items"
    source, (sens, fpr), reps = fit_preferred(easy, replicates=5, rng=1)
    assert source == "items" and len(reps) == 5
    # the rates of the items, not the controls': accuracy about 0.7
    assert np.mean(sens) == pytest.approx(0.7, abs=0.08) and np.mean(fpr) == pytest.approx(0.3, abs=0.08)
    sub = items_only(easy)
    assert (sub.control == -1).all() and sub.n_items == 300 and len(sub.item) == 900
    # no controls of both classes: no comparison, Dawid-Skene on everything
    none = _crowd(0.8, 0.8, n_controls=0)
    assert control_mismatch(none) is None and preferred_source(none) == "dawid-skene"


def test_items_of_one_class_do_not_overrule_the_controls():
    """Every item correct (a human reference and a system as good as it): Dawid-Skene on the items alone cannot
    tell a crowd that errs from a few incorrect items, so its rates are no evidence against the controls.  The
    controls are answered somewhat worse than the items here (accuracy 0.7 against 0.8): the old rule compared
    them with the items' own fit, which stops anywhere on a flat ridge, and sent the rates to it (seeds 1 and 2)."""
    from unpooled.core.annotation.confusion import (
        ITEMS_MIN_LR, control_mismatch, ds_fit, items_loglik, items_only, preferred_source, real_items,
    )

    for seed in range(4):
        a = _crowd(0.8, 0.7, seed=seed, prevalence=1.0, n_items=250)
        assert control_mismatch(a) is None and preferred_source(a) == "semi"
        # the items' own rates differ from the anchored ones but explain their votes hardly better
        sub = items_only(a)
        s_x, e_x, post = ds_fit(sub)
        s_a, e_a, anchored = ds_fit(a, clamp_controls=True)
        gain = 2 * (items_loglik(sub, s_x, e_x, post.mean()) - items_loglik(sub, s_a, e_a,
                                                                          anchored[real_items(a)].mean()))
        assert gain <= ITEMS_MIN_LR
    # both classes among the items and the same crowd: nothing to see
    same = _crowd(0.8, 0.8, prevalence=0.6)
    assert control_mismatch(same) is None or control_mismatch(same) < 2


def test_items_loglik_by_hand():
    from unpooled.core.annotation.confusion import VerifyAnswers, items_loglik

    # item 0: worker 0 yes, worker 1 no; item 1: worker 1 yes
    a = VerifyAnswers(np.array([0, 0, 1]), np.array([0, 1, 1]), np.array([1, 0, 1]), ["a", "b"],
                      np.array([-1, -1]), 2)
    sens, fpr, rho = np.array([0.9, 0.8]), np.array([0.2, 0.1]), 0.7
    want = (np.log(rho * 0.9 * 0.2 + (1 - rho) * 0.2 * 0.9) + np.log(rho * 0.8 + (1 - rho) * 0.1))
    assert items_loglik(a, sens, fpr, rho) == pytest.approx(want)


@pytest.mark.parametrize("seed", range(3))
def test_a_crowd_at_chance_on_the_items_still_sends_the_fit_to_them(seed):
    """Items of both classes answered at random (accuracy 0.5), controls at 0.9: the items do identify that the
    crowd tells their classes apart no better than chance, and the rates come from them (the guard above is about
    the items' classes, not about how well the crowd separates them)."""
    from unpooled.core.annotation.confusion import CONTROL_MISMATCH_Z, control_mismatch, preferred_source

    a = _crowd(0.5, 0.9, seed=seed)
    assert control_mismatch(a) > CONTROL_MISMATCH_Z and preferred_source(a) == "items"


def _two_type_crowd(seed, *, item_easy=0.2, control_easy=0.9, hard_controls=(0.75, 0.45), n_items=600,
                    n_controls=300):
    """Two relation types answered by one crowd: easy (sensitivity 0.97, false-positive rate 0.07) and hard (0.75,
    0.45); the items mostly hard, the controls mostly easy (as gold controls usually are).  ``hard_controls``:
    the rates on the hard type's controls (the items' by default)."""
    rng = np.random.default_rng(seed)
    n = n_items + n_controls
    stratum = np.r_[(rng.random(n_items) >= item_easy), (rng.random(n_controls) >= control_easy)].astype(int)
    truth = np.r_[rng.random(n_items) < 0.6, np.arange(n_controls) % 2 == 0].astype(int)
    control = np.r_[np.full(n_items, -1), truth[n_items:]]
    item = np.repeat(np.arange(n), 3)
    worker = np.concatenate([rng.choice(6, 3, replace=False) for _ in range(n)])
    rates = {0: (0.97, 0.07), 1: (0.75, 0.45)}
    sens = np.array([rates[h][0] for h in stratum])
    fpr = np.array([rates[h][1] for h in stratum])
    hard_ctrl = (control >= 0) & (stratum == 1)
    sens[hard_ctrl], fpr[hard_ctrl] = hard_controls
    p_yes = np.where(truth == 1, sens, fpr)[item]
    yes = (rng.random(len(item)) < p_yes).astype(int)
    return VerifyAnswers(item, worker, yes, [str(i) for i in range(n)], control, 6, stratum=stratum, strata=2)


def test_controls_of_another_mix_of_types_are_compared_type_by_type():
    """Controls mostly easy, items mostly hard, the same crowd on each type: in aggregate the controls look far
    better answered than the items (the 400-controls regime was sent to the items' own fit, precision +4 points);
    compared type by type they agree and the controls anchor the fit in 4 of these 5 worlds (the fifth: the
    items' own fit of the hard type drifts along its likelihood ridge).  A crowd truly worse on the hard items
    than on the hard controls is still caught in every world (with enough hard controls to pull the fit: with 30
    the items dominate the anchored fit and there is nothing to correct)."""
    from dataclasses import replace

    from unpooled.core.annotation.confusion import CONTROL_MISMATCH_Z, control_mismatch, preferred_source

    def flagged(a):
        z = control_mismatch(a)
        return z is not None and z > CONTROL_MISMATCH_Z

    worlds = [_two_type_crowd(seed) for seed in range(5)]
    assert sum(flagged(replace(a, stratum=None, strata=None)) for a in worlds) == 5
    assert sum(flagged(a) for a in worlds) <= 1
    assert sum(preferred_source(a) == "semi" for a in worlds) >= 4
    worse = [_two_type_crowd(seed, control_easy=0.5, hard_controls=(0.97, 0.07)) for seed in range(5)]
    assert all(flagged(a) and preferred_source(a) == "items" for a in worse)


def test_relation_groups_parse_and_number_strata():
    from unpooled.core.annotation.relation_groups import grouped_strata, parse_relation_groups, relation_stratum_codes
    from unpooled.core.errors import InvalidInputError

    rels = ["P17", "P131", "P108", "P463", "P26"]
    g = parse_relation_groups("hard: P108, P463\n; P26 P17", rels)
    assert g == {"P108": "hard", "P463": "hard", "P26": "P26+P17", "P17": "P26+P17"}
    strata = grouped_strata(rels, g)
    # names in order: 'P131', 'P26+P17', 'hard'
    assert strata == {"P131": 0, "P17": 1, "P26": 1, "P108": 2, "P463": 2}
    codes, H, _ = relation_stratum_codes(["P108", "P463", "P131", "P999"], strata)
    assert codes.tolist() == [2, 2, 0, 3] and H == 4  # an unnamed relation: the last stratum
    assert grouped_strata(rels) == {r: i for i, r in enumerate(sorted(rels))}
    assert parse_relation_groups("") == {} and parse_relation_groups("  \n ; ") == {}
    for text, msg in (("hard: P108, P46", "'P46' is not a relation of the schema (did you mean 'P463'?)"),
                      ("a: P108\nb: P108", "'P108' is already in group 'a'"),
                      ("a: P108\na: P463", "a second group of this name"),
                      ("P17: P108", "named like a relation"),
                      ("hard:", "no relations")):
        with pytest.raises(InvalidInputError, match=re.escape(msg)):
            parse_relation_groups(text, rels)
    # without the schema: any names
    assert parse_relation_groups("x: a b") == {"a": "x", "b": "x"}


@pytest.mark.parametrize("clamp", [False, True])
def test_the_fit_on_answer_patterns_is_the_fit_on_the_items(monkeypatch, clamp):
    """Items answered alike are merged (answer_patterns); the fit, its posteriors and bootstrap weights are those of
    the item-by-item EM (every item its own pattern) to round-off, with strata and controls."""
    from unpooled.core.annotation import confusion
    from unpooled.core.annotation.confusion import answer_patterns, ds_fit

    a = pool = _two_type_crowd(3)
    pt = answer_patterns(a)
    assert pt.n < a.n_items / 2  # six workers answering three times: few patterns
    # items of one pattern were answered alike
    for p in np.unique(pt.of_item)[:50]:
        items = np.flatnonzero(pt.of_item == p)
        sig = {tuple(sorted(zip(a.rate_rows()[a.item == i].tolist(), a.yes[a.item == i].tolist()))) for i in items}
        assert len(sig) == 1 and len(set(a.control[items].tolist())) == 1
    w = np.random.default_rng(0).integers(0, 3, a.n_items).astype(float)
    merged = [ds_fit(pool, wt, clamp_controls=clamp) for wt in (None, w)]
    monkeypatch.setattr(confusion, "MAX_PATTERN_ANSWERS", 0)  # every answered item alone: the item-by-item EM
    assert answer_patterns(a).n >= a.n_items - 1
    alone = [ds_fit(pool, wt, clamp_controls=clamp) for wt in (None, w)]
    for m, s in zip(merged, alone):
        for x, y in zip(m, s):
            assert np.abs(x - y).max() < 1e-9
