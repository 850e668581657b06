"""The crowd model's fit check per stratum (core/annotation/fitcheck.py)."""

import numpy as np
import pytest

from unpooled.core.annotation.confusion import VerifyAnswers, fit_preferred
from unpooled.core.annotation.fitcheck import _poisson_binomial, stratum_fits


def _answers(seed, hidden=0.0, n=1500, W=8, k=3):
    rng = np.random.default_rng(seed)
    stratum = rng.integers(0, 2, n)
    truth = rng.random(n) < np.where(stratum == 0, 0.8, 0.4)
    sens, fpr = np.array([0.97, 0.75])[stratum], np.array([0.07, 0.45])[stratum]
    hard = rng.random(n) < hidden  # difficulty no stratum explains: these items are judged near chance
    sens, fpr = np.where(hard, 0.55, sens), np.where(hard, 0.45, fpr)
    item = np.repeat(np.arange(n), k)
    who = np.argsort(rng.random((n, W)), axis=1)[:, :k].ravel()
    yes = (rng.random(len(item)) < np.where(truth, sens, fpr)[item]).astype(np.int64)
    control = np.full(n, -1)
    control[:300] = truth[:300]
    return VerifyAnswers(item, who, yes, [str(i) for i in range(n)], control, W, stratum=stratum, strata=2)


def test_poisson_binomial_is_a_law():
    p = np.array([[0.2, 0.7, 0.9], [0.5, 0.5, 0.5]])
    law = _poisson_binomial(p)
    assert law.sum(1) == pytest.approx([1, 1])
    assert law[1] == pytest.approx([1 / 8, 3 / 8, 3 / 8, 1 / 8])
    assert (law[0] * np.arange(4)).sum() == pytest.approx(1.8)


def test_a_fitting_model_passes_and_a_weak_stratum_is_named():
    a = _answers(1)
    _, (s, e), _ = fit_preferred(a, replicates=0)
    easy, hard = stratum_fits(a, s, e)
    assert (easy.k, hard.k) == (3, 3) and easy.items + hard.items == 1200 and easy.controls + hard.controls == 300
    assert sum(easy.observed) == pytest.approx(sum(easy.expected))
    assert easy.p_value > 0.001 and hard.p_value > 0.001
    assert not easy.weak and hard.weak and hard.separation == pytest.approx(0.3, abs=0.08)
    assert easy.to_dict()["observed"] == list(easy.observed)
    assert not easy.few_controls and not hard.few_controls
    thin = _answers(1)
    thin = type(thin)(thin.item, thin.worker, thin.yes, thin.item_keys, np.where(np.arange(1500) < 8, thin.control, -1),
                      thin.n_workers, stratum=thin.stratum, strata=2)
    assert any(f.few_controls for f in stratum_fits(thin, s, e))


def test_difficulty_no_stratum_explains_shows_as_a_misfit_with_enough_answers():
    """Half the items judged near chance whatever their stratum: with five answers per item the counts show it;
    with three the check has next to no power (four counts, the rates and the prevalence fitted to them)."""
    for k, misfit in ((5, True), (3, False)):
        a = _answers(2, hidden=0.5, n=4000, k=k)
        _, (s, e), _ = fit_preferred(a, replicates=0)
        assert (min(f.p_value for f in stratum_fits(a, s, e)) < 1e-3) is misfit
    a = _answers(2, n=4000, k=5)
    _, (s, e), _ = fit_preferred(a, replicates=0)
    assert min(f.p_value for f in stratum_fits(a, s, e)) > 1e-3


def test_a_stratum_whose_replicates_reach_weak_is_named_weak():
    """The separation of a hard stratum anchored by few controls is uncertain: its bootstrap replicates' lower
    quantile names it weak even where the point fit lands above the bar; an easy stratum stays clear of it."""
    a = _answers(3, n=300)
    a = type(a)(a.item, a.worker, a.yes, a.item_keys, np.where(np.arange(300) < 30, a.control, -1), a.n_workers,
                stratum=a.stratum, strata=2)
    _, (s, e), reps = fit_preferred(a, replicates=50, rng=0)
    easy, hard = stratum_fits(a, s, e, reps=reps)
    assert hard.separation_lo < hard.separation and hard.separation_lo < 0.4 and hard.weak
    assert easy.separation_lo > 0.6 and not easy.weak
    assert hard.to_dict()["separation_lo"] == hard.separation_lo
    # the same fit, its point separation moved above the bar: still weak by its replicates
    lifted = type(hard)(**{**{k: getattr(hard, k) for k in hard.__dataclass_fields__}, "sens": hard.fpr + 0.45})
    assert lifted.separation > 0.4 and lifted.weak
    assert stratum_fits(a, s, e)[1].separation_lo is None  # without replicates: the point fit alone
