"""The interval correction's fast paths give the statistical method's results (correction.py).

* ``score_design`` computes every bootstrap replicate of the labels by matrix products of the
  core's terms at unit labels; here it is checked against the loop it replaced (one core
  ``_terms`` call per replicate) to 1e-12.
* ``error_rates_incremental``: between full bootstraps, the replicates are the stored ones
  shifted by the new point fit; checked for its rules (when it refits, what it shifts).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp


# --------------------------------------------------------------------------- (1) vectorised replicates
def _score_design_loop(design, keys, *, y, rates, inside, y0_docs, documents, weights="balance"):
    """The former ``score_design``'s point estimates and ``var_rates`` (one ``_terms`` call per replicate)."""
    from unpooled.core.estimators.joint import _f1, _terms, strata_var, weight_matrix
    from unpooled.service.evaluations.correction import corrected

    pos = {k: i for i, k in enumerate(rates.keys)}
    idx = np.array([pos.get(k, -1) for k in keys], np.int64)
    has = idx >= 0

    def labels_for(t_all, f_all):
        tt = np.where(has, t_all[np.maximum(idx, 0)], 1.0)
        ff = np.where(has, f_all[np.maximum(idx, 0)], 0.0)
        return corrected(y, tt, ff, rates.min_gap)

    design = replace(design, f=labels_for(rates.t, rates.f))
    p0 = design.p0.copy()
    p0[design.xs[~inside]] = 0.0
    design = replace(design, p0=p0)
    m = design.m
    W = weight_matrix(design.P, design.n, weights)

    def point(d):
        t = _terms(d, W)
        Bs = t.B.sum(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            nu = np.where(Bs > 0, t.A.sum(1) / Bs, 0.0)
        return t, t.C.sum(1), nu, Bs

    t, p, nu, Bs = point(design)
    v = design.v0
    theta = (t.S0.astype(float) * v).sum(1) / v.sum()
    P_b, R_b, F_b = [], [], []
    for tb, fb in zip(rates.t_rep, rates.f_rep):
        _, pb, nub, _ = point(replace(design, f=labels_for(tb, fb)))
        P_b.append(pb)
        R_b.append(theta * nub)
        F_b.append(_f1(pb, theta * nub))
    extra = {k: np.var(np.array(a), axis=0, ddof=1) for k, a in (("p", P_b), ("r", R_b), ("f1", F_b))}
    with np.errstate(divide="ignore", invalid="ignore"):
        Uu = np.where(Bs[:, None] > 0, (t.A - nu[:, None] * t.B) / np.where(Bs > 0, Bs, 1)[:, None], 0.0)
    return {"p": p, "nu": nu, "theta": theta, "var_p": strata_var(t.C, design.src, m),
            "var_nu": strata_var(Uu, design.src, m), "extra": extra, "ess": t.ess}


def _random_case(seed: int, m: int = 7, U: int = 60, per: int = 12, n0: int = 9, R: int = 30):
    from unpooled.core.estimators.joint import make_design
    from unpooled.service.evaluations.correction import ErrorRates

    rng = np.random.default_rng(seed)
    P = np.zeros((m, U))
    for i in range(m):
        sup = rng.choice(U, size=int(rng.integers(8, 25)), replace=False)
        P[i, sup] = rng.random(len(sup)) + 0.1
    P /= P.sum(1, keepdims=True)
    src, xs = [], []
    for i in range(m - 1):  # the last system has no draws of its own
        sup = np.flatnonzero(P[i])
        xs.extend(rng.choice(sup, size=per, p=P[i, sup] / P[i, sup].sum()).tolist())
        src.extend([i] * per)
    src, xs = np.array(src), np.array(xs)
    g0 = rng.random((m, n0)) < 0.4
    v0 = rng.random(n0) + 0.5
    p0 = rng.random(U) + 0.2
    d = make_design(sp.csr_matrix(P), src, xs, np.zeros(len(xs)), g0, v0, p0, corrected_labels=True)
    keys = [f"k{u}" for u in xs.tolist()]
    y = (rng.random(len(xs)) < 0.7).astype(float)
    ukeys = sorted(set(keys))[:-3]  # a few drawn keys without rates: plain labels
    K = len(ukeys)
    t = rng.uniform(0.75, 0.99, K)
    f = rng.uniform(0.01, 0.3, K)
    f[:2] = t[:2] - 0.1  # rates too close: plain labels
    t_rep = np.clip(t + rng.normal(0, 0.03, (R, K)), 0, 1)
    f_rep = np.clip(f + rng.normal(0, 0.03, (R, K)), 0, 1)
    rates = ErrorRates(ukeys, t, f, "semi", t_rep, f_rep)
    inside = rng.random(len(xs)) < 0.85
    docs = [f"d{int(j)}" for j in rng.integers(0, 4, n0)]
    return d, keys, y, rates, inside, docs


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weights", ["balance", "heuristic"])
def test_vectorised_replicates_equal_the_loop(seed, weights):
    from unpooled.service.evaluations.correction import score_design

    d, keys, y, rates, inside, docs = _random_case(seed)
    ref = _score_design_loop(d, keys, y=y, rates=rates, inside=inside, y0_docs=docs, documents=5, weights=weights)
    got = score_design(d, keys, tuple(f"s{i}" for i in range(d.m)), y=y, rates=rates, inside=inside, y0_docs=docs,
                       documents=5, weights=weights)
    assert np.abs(got.var_rates["p"]).max() > 0
    np.testing.assert_allclose(got.est["p"], ref["p"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.est["r"], ref["theta"] * ref["nu"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.var["p"], ref["var_p"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.ess, ref["ess"], rtol=0, atol=1e-12)
    for k in ("p", "r", "f1"):
        np.testing.assert_allclose(got.var_rates[k], ref["extra"][k], rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- (2) rates between full bootstraps
def _answers(n_items: int, seed: int = 0, *, n_workers: int = 6, controls: int = 60, start=None):
    """Synthetic counted answers (3 per item, controls first) as ``verify_answers`` returns them; ``start``:
    the answers to append to (new items and answers after theirs)."""
    from unpooled.service.evaluations.correction import VerifyAnswers

    rng = np.random.default_rng(seed)
    sens = np.linspace(0.7, 0.95, n_workers)
    fpr = np.linspace(0.3, 0.05, n_workers)
    rows = [] if start is None else [(int(t), int(w), int(y)) for t, w, y in
                                     zip(start.task_ids, start.annotator_ids, start.yes)]
    first = 0 if start is None else int(start.task_ids.max()) + 1
    truth = {} if start is None else dict(_answers.truth)
    for i in range(first, first + n_items):
        z = int(rng.random() < 0.7)
        truth[i] = (z, i < controls)
        for w in rng.choice(n_workers, 3, replace=False).tolist():
            rows.append((i, 100 + w, int(rng.random() < (sens[w] if z else fpr[w]))))
    _answers.truth = truth
    items, workers, keys, control, it, wk = {}, {}, [], [], [], []
    for t, w, _ in rows:
        if t not in items:
            items[t] = len(keys)
            keys.append(f"ctl{t}" if truth[t][1] else f"key{t}")
            control.append(truth[t][0] if truth[t][1] else -1)
        it.append(items[t])
        wk.append(workers.setdefault(w, len(workers)))
    return VerifyAnswers(np.array(it), np.array(wk), np.array([r[2] for r in rows]), keys, np.array(control),
                         len(workers), np.arange(1, len(rows) + 1), np.array([r[0] for r in rows]),
                         np.array([r[1] for r in rows]))


class _Corpus:
    pk = 7
    created = "2026-01-01"


@pytest.fixture
def fake_db(monkeypatch):
    """``service_rates`` over answers held here: ``state['answers']`` (the fingerprint follows them)."""
    from unpooled.service.evaluations import correction

    state = {"answers": None, "fits": 0}
    correction.clear_cache()
    monkeypatch.setattr(correction, "verify_answers", lambda corpus, fp=None: state["answers"])
    monkeypatch.setattr(correction, "_answers_fp", lambda corpus: (
        corpus.pk, corpus.created, len(state["answers"].item), int(state["answers"].answer_ids.max()),
        float(len(state["answers"].item))))
    real = correction._ds_fit

    def counted(*args, **kwargs):
        state["fits"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(correction, "_ds_fit", counted)
    yield state
    correction.clear_cache()


def _full(a, R):
    from unpooled.service.evaluations.correction import error_rates

    return error_rates(None, source="semi", replicates=R, rng=0, answers=a)


def test_rates_between_full_bootstraps(fake_db):
    from unpooled.service.evaluations.correction import service_rates

    R = 40
    a0 = _answers(1500, 0)
    fake_db["answers"] = a0
    first = service_rates(_Corpus, replicates=R)
    ref = _full(a0, R)
    np.testing.assert_array_equal(first.t_rep, ref.t_rep)  # the first call is the full bootstrap
    # a batch of 3% more answers: one Dawid-Skene fit, not R + 1
    a1 = _answers(45, 1, start=a0)
    fake_db["answers"], fake_db["fits"] = a1, 0
    inc = service_rates(_Corpus, replicates=R)
    assert fake_db["fits"] == 1
    full = _full(a1, R)
    assert inc.keys == full.keys
    np.testing.assert_array_equal(inc.t, full.t)  # the point rates are the full fit's, exactly
    np.testing.assert_array_equal(inc.f, full.f)
    for got, want in ((inc.t_rep, full.t_rep), (inc.f_rep, full.f_rep)):
        sd_got, sd_want = got.std(0, ddof=1), want.std(0, ddof=1)
        # the rates' uncertainty is the full bootstrap's up to its own Monte Carlo error (R = 40: ~11% of the sd)
        ratio = sd_got.mean() / sd_want.mean()
        assert 0.8 < ratio < 1.25, ratio
    # replicates centred on the new point (the shift follows the point fit)
    assert np.abs(inc.t_rep.mean(0) - inc.t).max() < 4 * inc.t_rep.std(0).max() + 1e-9
    # nothing new: the memo
    fake_db["fits"] = 0
    assert service_rates(_Corpus, replicates=R) is inc and fake_db["fits"] == 0


def test_rates_rebootstrap_on_growth_or_non_append(fake_db):
    from unpooled.service.evaluations.correction import VerifyAnswers, service_rates

    R = 10
    a0 = _answers(600, 0)
    fake_db["answers"] = a0
    service_rates(_Corpus, replicates=R)
    # growth of 10% or more since the full bootstrap: a full one again (the same as a cold one)
    a1 = _answers(70, 1, start=a0)
    assert len(a1.item) >= 1.1 * len(a0.item)
    fake_db["answers"] = a1
    got = service_rates(_Corpus, replicates=R)
    np.testing.assert_array_equal(got.t_rep, _full(a1, R).t_rep)
    # two small batches: shifted from that bootstrap; then growth is counted from it, not from the last batch
    a2 = _answers(30, 2, start=a1)
    fake_db["answers"] = a2
    got = service_rates(_Corpus, replicates=R)
    assert not np.array_equal(got.t_rep, _full(a2, R).t_rep)
    a3 = _answers(40, 3, start=a2)
    assert len(a3.item) >= 1.1 * len(a1.item)
    fake_db["answers"] = a3
    np.testing.assert_array_equal(service_rates(_Corpus, replicates=R).t_rep, _full(a3, R).t_rep)
    # an answer discounted (not the stored answers plus new ones): a full bootstrap
    keep = np.ones(len(a3.item), bool)
    keep[5] = False
    a4 = _answers(5, 4, start=VerifyAnswers(a3.item[keep], a3.worker[keep], a3.yes[keep], a3.item_keys, a3.control,
                                           a3.n_workers, a3.answer_ids[keep], a3.task_ids[keep],
                                           a3.annotator_ids[keep]))
    fake_db["answers"] = a4
    np.testing.assert_array_equal(service_rates(_Corpus, replicates=R).t_rep, _full(a4, R).t_rep)


def test_shift_keeps_replicates_when_the_point_does_not_move(fake_db):
    from unpooled.service.evaluations import correction

    R = 10
    a0 = _answers(600, 0)
    fake_db["answers"] = a0
    first = correction.service_rates(_Corpus, replicates=R)
    boot = correction._memo[_Corpus.pk][2]
    shifted = correction._shifted(boot, boot.point, a0.n_workers)
    for (s0, f0), (s1, f1) in zip(boot.reps, shifted):
        np.testing.assert_allclose(s1, s0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(f1, f0, rtol=0, atol=1e-12)
    # a new worker: no deviation, the new point's confusion in every replicate
    point = (np.append(boot.point[0], 0.8), np.append(boot.point[1], 0.1))
    shifted = correction._shifted(boot, point, a0.n_workers + 1)
    assert all(abs(s[-1] - 0.8) < 1e-12 and abs(f[-1] - 0.1) < 1e-12 for s, f in shifted)
    assert first.t_rep.shape == (R, len(first.keys))
