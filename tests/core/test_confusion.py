"""Annotators' confusions (core/annotation/confusion.py): semi-supervised Dawid-Skene, pooling, replicates."""

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
