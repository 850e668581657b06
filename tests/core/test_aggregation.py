"""Aggregation, agreement and the simulated crowd, checked by hand, against crowd-kit and krippendorff,
and by properties."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.annotation import (
    Answers, SimulatedAnnotator, agreement_by_group, dawid_skene, expected_majority_accuracy, fleiss_kappa,
    krippendorff_alpha, majority_vote, simulate_answers, worker_accuracy_on_gold, workers_to_block,
)
from unpooled.core.errors import InvalidInputError


def test_from_records_encodes_keys_in_first_seen_order():
    a = Answers.from_records([("t2", "w1", 1), ("t1", "w2", 0), ("t2", "w2", 1)])
    assert a.item_keys == ("t2", "t1") and a.worker_keys == ("w1", "w2") and a.classes == (0, 1)
    assert a.items.tolist() == [0, 1, 0] and a.labels.tolist() == [1, 0, 1]
    with pytest.raises(InvalidInputError, match="labels: 'x' is not one of the classes"):
        Answers.from_records([("t", "w", "x")], classes=(0, 1))


def test_majority_vote_by_hand():
    a = Answers.from_arrays([0, 0, 0, 1, 1, 2], [0, 1, 2, 0, 1, 0], [1, 1, 0, 0, 1, 0], n_items=4)
    r = majority_vote(a, n_classes=2, tie="none")
    assert r.labels.tolist() == [1, -1, 0, -1]
    assert np.allclose(r.shares[0], [1 / 3, 2 / 3]) and r.shares[3].sum() == 0
    assert majority_vote(a, n_classes=2, tie="first").labels.tolist()[:2] == [1, 0]
    # a zero weight removes an answer
    w = majority_vote(Answers.from_arrays([0, 0, 0], [0, 1, 2], [1, 1, 0], [0, 0, 1]), n_classes=2)
    assert w.labels.tolist() == [0]
    with pytest.raises(InvalidInputError, match="tie: expected"):
        majority_vote(a, tie="coin")


def test_dawid_skene_first_iteration_by_hand():
    # 2 items, 3 workers; init = majority shares
    a = Answers.from_arrays([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [1, 1, 0, 0, 0, 1])
    r = dawid_skene(a, n_classes=2, max_iter=1, smoothing=0.0, shrinkage=0.0)
    T0 = np.array([[1 / 3, 2 / 3], [2 / 3, 1 / 3]])
    priors = T0.sum(axis=0) / 2
    assert np.allclose(r.priors, priors)
    # worker 0 answered 1 on item 0 and 0 on item 1: row c is T0[:, c] spread over its answers
    conf0 = np.array([[T0[1, 0], T0[0, 0]], [T0[1, 1], T0[0, 1]]])
    conf0 /= conf0.sum(axis=1, keepdims=True)
    assert np.allclose(r.confusion[0], conf0)
    assert np.allclose(r.probas.sum(axis=1), 1)


def _crowdkit_probas(ans: Answers, n_iter: int):
    pd = pytest.importorskip("pandas")
    ck = pytest.importorskip("crowdkit.aggregation")
    df = pd.DataFrame({"task": ans.items, "worker": ans.workers, "label": ans.labels})
    return ck.DawidSkene(n_iter=n_iter, tol=0.0).fit_predict_proba(df)


@pytest.mark.filterwarnings("ignore::Warning")  # crowd-kit 1.4 on pandas 3 deprecations
def test_dawid_skene_agrees_with_crowd_kit():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 2000)
    workers = [SimulatedAnnotator(acc) for acc in (0.95, 0.9, 0.8, 0.7, 0.6, 0.55)]
    ans, _ = simulate_answers(truth, workers, k=3, rng=1)
    ours = dawid_skene(ans, n_classes=2, max_iter=50, tol=0.0, smoothing=0.0, shrinkage=0.0)
    theirs = _crowdkit_probas(ans, 50)
    theirs = theirs.reindex(columns=[0, 1]).fillna(0).to_numpy()[np.argsort(theirs.index.to_numpy())]
    agree = (ours.labels == theirs.argmax(axis=1)).mean()
    assert agree >= 0.99, agree
    assert np.abs(ours.probas - theirs).max() < 0.05


def test_accuracy_at_0_8_and_k_3_matches_the_binomial_expectation():
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, 20000)
    ans, lat = simulate_answers(truth, [SimulatedAnnotator(0.8) for _ in range(7)], k=3, rng=4)
    maj = (majority_vote(ans, n_classes=2).labels == truth).mean()
    ds = (dawid_skene(ans, n_classes=2).labels == truth).mean()
    assert expected_majority_accuracy(0.8, 3) == pytest.approx(0.896)
    assert abs(maj - 0.896) < 0.01
    assert ds >= maj - 0.002
    assert lat.shape == (60000,) and abs(np.median(lat) - 10) < 1


def test_dawid_skene_beats_majority_with_heterogeneous_annotators():
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, 5000)
    ws = [SimulatedAnnotator(0.95)] * 2 + [SimulatedAnnotator(0.55)] * 4
    ans, _ = simulate_answers(truth, ws, k=3, rng=6)
    maj = (majority_vote(ans, n_classes=2).labels == truth).mean()
    ds = dawid_skene(ans, n_classes=2)
    assert (ds.labels == truth).mean() > maj + 0.02
    assert ds.worker_accuracy[:2].min() > 0.9 and ds.worker_accuracy[2:].max() < 0.65


def test_gold_accuracy_and_blocking():
    a = Answers.from_arrays([0, 1, 2, 0, 1, 2, 3], [0, 0, 0, 1, 1, 1, 1], [1, 0, 1, 0, 1, 0, 1])
    acc = worker_accuracy_on_gold(a, [1, 0, 1, -1])
    assert acc.answered.tolist() == [3, 3] and acc.correct.tolist() == [3, 0]
    assert np.allclose(acc.accuracy, [4 / 5, 1 / 5])
    assert workers_to_block(acc, threshold=0.6, min_answers=3).tolist() == [False, True]
    assert workers_to_block(acc, threshold=0.6, min_answers=4).tolist() == [False, False]


def test_fleiss_kappa_worked_example():
    # Fleiss (1971) / Wikipedia: 10 subjects, 14 raters, 5 categories, kappa = 0.210
    table = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                      [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    items, labels = [], []
    for i, row in enumerate(table):
        for c, n in enumerate(row):
            items += [i] * n
            labels += [c] * n
    workers = [j % 14 for j in range(len(items))]
    a = Answers.from_arrays(items, workers, labels)
    assert fleiss_kappa(a, n_classes=5) == pytest.approx(0.2099, abs=1e-4)


def test_krippendorff_alpha_agrees_with_the_krippendorff_package():
    kr = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(8)
    for trial in range(20):
        n_items, n_workers, k = 30, 5, 3
        data = rng.integers(0, k, (n_workers, n_items)).astype(float)
        truth = rng.integers(0, k, n_items)
        agree = rng.random((n_workers, n_items)) < 0.6
        data[agree] = np.broadcast_to(truth, data.shape)[agree]
        data[rng.random(data.shape) < 0.3] = np.nan
        w, i = np.nonzero(~np.isnan(data))
        a = Answers.from_arrays(i, w, data[w, i].astype(int), n_items=n_items, n_workers=n_workers, n_classes=k)
        ours = krippendorff_alpha(a, n_classes=k)
        theirs = kr.alpha(reliability_data=data, level_of_measurement="nominal", value_domain=list(range(k)))
        assert ours == pytest.approx(theirs, abs=1e-9), trial


def test_agreement_perfect_and_undefined():
    a = Answers.from_arrays([0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 0, 0])
    assert fleiss_kappa(a, n_classes=2) == pytest.approx(1.0)
    assert krippendorff_alpha(a, n_classes=2) == pytest.approx(1.0)
    one = Answers.from_arrays([0, 0], [0, 1], [1, 1])
    assert math.isnan(fleiss_kappa(one, n_classes=2)) and math.isnan(krippendorff_alpha(one, n_classes=2))
    per = agreement_by_group(a, ["x", "y"], n_classes=2)
    assert per["x"]["items"] == 1 and per["x"]["answers"] == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.integers(0, 1)), min_size=1, max_size=40),
       st.integers(0, 2 ** 16))
def test_dawid_skene_properties(records, seed):
    recs = list({(i, w): (i, w, l) for i, w, l in records}.values())
    a = Answers.from_arrays(*zip(*recs), n_items=7, n_workers=5, n_classes=2)
    r = dawid_skene(a, n_classes=2, max_iter=20)
    assert np.allclose(r.probas.sum(axis=1), 1) and np.all(r.probas >= 0)
    # permuting worker ids permutes confusion matrices and leaves the posterior unchanged
    perm = np.random.default_rng(seed).permutation(5)
    b = Answers.from_arrays(a.items, perm[a.workers], a.labels, n_items=7, n_workers=5, n_classes=2)
    rb = dawid_skene(b, n_classes=2, max_iter=20)
    assert np.allclose(r.probas, rb.probas, atol=1e-9)
    assert np.allclose(r.confusion, rb.confusion[perm], atol=1e-9)
    # a zero weight is the same as no answer
    drop = np.zeros(len(recs), bool)
    drop[0] = True
    w = np.where(drop, 0.0, 1.0)
    c = Answers.from_arrays(a.items, a.workers, a.labels, w, n_items=7, n_workers=5, n_classes=2)
    d = Answers.from_arrays(a.items[~drop], a.workers[~drop], a.labels[~drop], n_items=7, n_workers=5, n_classes=2)
    assert np.allclose(majority_vote(c, n_classes=2, tie="first").shares, majority_vote(d, n_classes=2, tie="first").shares)
    assert np.allclose(dawid_skene(c, n_classes=2, max_iter=20).probas, dawid_skene(d, n_classes=2, max_iter=20).probas)


def test_simulated_crowd_properties():
    truth = np.array([0, 1] * 5000)
    ws = [SimulatedAnnotator(0.8, bias=0.5) for _ in range(4)]
    a, _ = simulate_answers(truth, ws, k=3, rng=2)
    per_item = a.workers.reshape(-1, 3)
    assert all(len(set(r)) == 3 for r in per_item)
    t = truth[a.items]
    wrong_on_1 = (a.labels[t == 1] != 1).mean()
    wrong_on_0 = (a.labels[t == 0] != 0).mean()
    assert abs(wrong_on_1 - 0.1) < 0.01 and abs(wrong_on_0 - 0.3) < 0.015
    a2, _ = simulate_answers(truth, ws, k=3, rng=2)
    assert np.array_equal(a.labels, a2.labels)
    with pytest.raises(InvalidInputError, match="k: expected 1..4"):
        simulate_answers(truth, ws, k=5)
    with pytest.raises(InvalidInputError, match="accuracy"):
        SimulatedAnnotator(1.5)


def test_core_does_not_import_django_boto3_or_pandas():
    code = ("import sys, unpooled.core, unpooled.core.annotation, unpooled.core.estimators, unpooled.core.simulate;"
            "bad = [m for m in ('django', 'boto3', 'botocore', 'pandas', 'crowdkit') if m in sys.modules];"
            "print(','.join(bad)); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
