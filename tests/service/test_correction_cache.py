"""The correction's memoised and in-place paths give the numbers of a computation from scratch (correction.py).

* ``_linear_terms`` are the core's ``_terms`` at unit labels, to the bit, whether computed or
  returned from the memo, and a changed input (draws, weights, p0, matches, P) is never served
  from it (``S0`` without the core's int8 wrap-around at 128 systems); ``_strata_var`` is the
  core's ``strata_var`` to the bit.
* ``score_design`` after a sequence of "batches" (same design, new labels, new draws, a new system)
  equals ``score_design`` with its memo emptied, to the bit.
* The answers' incremental parse, the vectorised ``KeyWorkers`` and the Dawid–Skene fit are the
  former code's (kept here as references), to the bit.
* In the database: after several label batches (new draws, labels for draws made earlier, a
  relabelled key, a new submission) the published adjustment of the warm caches equals the one
  computed from scratch (``from_scratch`` scores, every memo of correction emptied: answers read
  and parsed anew, terms recomputed), to the bit.  The rates' bootstrap state is kept: between
  full bootstraps the replicates are shifted by design (test_correction_speed.py), a full one is
  another computation.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from .test_correction_speed import _answers, _random_case


# --------------------------------------------------------------------------- (1) terms and strata
def _design(seed: int, *, m: int = 6, U: int = 50, per: int = 10, gs: bool = True):
    from unpooled.core.estimators.joint import make_design

    rng = np.random.default_rng(seed)
    P = np.zeros((m, U))
    for i in range(m):
        sup = rng.choice(U, size=int(rng.integers(6, 20)), replace=False)
        P[i, sup] = rng.random(len(sup)) + 0.1
    P /= P.sum(1, keepdims=True)
    src, xs = [], []
    for i in range(m - 1):  # the last system has no draws of its own
        sup = np.flatnonzero(P[i])
        xs.extend(rng.choice(sup, size=per, p=P[i, sup] / P[i, sup].sum()).tolist())
        src.extend([i] * per)
    src, xs = np.array(src), np.array(xs)
    g = None
    if gs:
        g = rng.random((m, len(xs))) < 0.5
        g[src, np.arange(len(xs))] = True
    return make_design(sp.csr_matrix(P), src, xs, rng.random(len(xs)), rng.random((m, 7)) < 0.4,
                       rng.random(7) + 0.5, rng.random(U) + 0.2, gs=g, corrected_labels=True)


def _same_terms(lt, t):
    for a, b in ((lt.Cw, t.C), (lt.Aw, t.A), (lt.Bw, t.B), (lt.S0, t.S0), (lt.ess, t.ess)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gs", [True, False])
@pytest.mark.parametrize("weights", ["balance", "heuristic"])
def test_linear_terms_are_the_cores_and_memo_is_keyed_on_every_input(seed, gs, weights):
    from unpooled.core.estimators.joint import _terms, weight_matrix
    from unpooled.service.evaluations import correction

    correction.clear_cache()
    d = _design(seed, gs=gs)
    W = weight_matrix(d.P, d.n, weights)

    def cores(design, W):
        return _terms(replace(design, f=np.ones(len(design.f))), W)

    lt = correction._linear_terms(d, W)
    _same_terms(lt, cores(d, W))
    # the same inputs (another Design object, new labels): the memo
    again = correction._linear_terms(replace(d, f=d.f[::-1].copy(), P=sp.csr_matrix(d.P.toarray())), W)
    assert again is lt
    # any input changed: recomputed, the core's numbers
    p0 = d.p0.copy()
    p0[d.xs[0]] = 0.0
    P2 = d.P.toarray()
    P2[0] = np.roll(P2[0], 1)
    changed = [replace(d, p0=p0), replace(d, src=d.src[:-1], xs=d.xs[:-1], f=d.f[:-1],
                                          gs=None if d.gs is None else d.gs[:, :-1]),
               replace(d, g0=~d.g0), replace(d, P=sp.csr_matrix(P2))]
    if d.gs is not None:
        g2 = d.gs.copy()
        g2[-1, 0] = not g2[-1, 0]
        changed.append(replace(d, gs=g2))
    for c in changed:
        W2 = weight_matrix(c.P, c.n, weights)
        got = correction._linear_terms(c, W2)
        assert got is not lt
        _same_terms(got, cores(c, W2))
    W3 = W * 0.5 + np.eye(d.m) * 0.5
    _same_terms(correction._linear_terms(d, W3), cores(d, W3))
    correction.clear_cache()


def test_s0_counts_many_matching_systems():
    """S0 (true instance inside target i's pool) is a boolean product: 130 or 256 matching systems are some."""
    from unpooled.core.estimators.joint import make_design, weight_matrix
    from unpooled.service.evaluations import correction

    for m in (130, 256):
        P = sp.csr_matrix(np.full((m, 2), 0.5))
        d = make_design(P, np.arange(m), np.zeros(m, np.int64), np.ones(m), np.ones((m, 1), bool))
        correction.clear_cache()
        lt = correction._linear_terms(d, weight_matrix(d.P, d.n, "balance"))
        assert lt.S0.all()
    correction.clear_cache()


@pytest.mark.parametrize("seed", [0, 1])
def test_strata_var_is_the_cores(seed):
    from unpooled.core.estimators.joint import strata_var
    from unpooled.service.evaluations.correction import _strata_var

    rng = np.random.default_rng(seed)
    src = np.sort(rng.integers(0, 9, 200))
    src[src == 4] = 5  # an empty stratum
    U = rng.normal(size=(7, len(src)))
    np.testing.assert_array_equal(_strata_var(U, src, 10), strata_var(U, src, 10))
    shuffled = rng.permutation(len(src))  # not grouped by stratum: the core's own
    np.testing.assert_array_equal(_strata_var(U[:, shuffled], src[shuffled], 10),
                                  strata_var(U[:, shuffled], src[shuffled], 10))


# --------------------------------------------------------------------------- (2) score_design: memo vs cold
def _estimates_equal(a, b):
    for name in ("est", "var", "var_rates", "fallback"):
        for k in getattr(a, name):
            np.testing.assert_array_equal(getattr(a, name)[k], getattr(b, name)[k], err_msg=f"{name}.{k}")
    for name in ("t_bar", "f_bar", "ess", "labels"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    m = len(a.est["p"])
    assert [a.row(i) for i in range(m)] == [b.row(i) for i in range(m)]


@pytest.mark.parametrize("weights", ["balance", "heuristic"])
def test_score_design_memoised_equals_cold_over_batches(weights):
    from unpooled.core.estimators.joint import make_design
    from unpooled.service.evaluations import correction

    d, keys, y, rates, inside, docs = _random_case(4)
    m = d.m

    def batch(design, keys, y, inside) -> bool:
        """Warm and cold estimates are equal; returns whether the warm call found its terms in the memo."""
        kw = dict(y=y, rates=rates, inside=inside, y0_docs=docs, documents=6, weights=weights)
        systems = tuple(f"s{i}" for i in range(design.m))
        before = correction._terms_memo.get("last")
        warm = correction.score_design(design, keys, systems, **kw)
        hit = before is not None and correction._terms_memo["last"][1] is before[1]
        correction._terms_memo.clear()
        cold = correction.score_design(design, keys, systems, **kw)
        _estimates_equal(warm, cold)
        return hit

    correction.clear_cache()
    assert not batch(d, keys, y, inside)
    assert batch(d, keys, y, inside)  # nothing new: the terms are the memo's
    flipped = y.copy()
    flipped[:5] = 1 - flipped[:5]
    assert batch(d, keys, flipped, inside)  # new labels for the same draws: so are they
    # new draws of system 0 (inserted in the design's order: by system)
    rng = np.random.default_rng(9)
    sup = np.flatnonzero(d.P[0].toarray()[0])
    new = rng.choice(sup, size=4)
    order = np.argsort(np.concatenate([d.src, [0] * 4]), kind="stable")
    src2 = np.concatenate([d.src, [0] * 4])[order]
    xs2 = np.concatenate([d.xs, new])[order]
    keys2 = [(keys + [f"k{u}" for u in new.tolist()])[j] for j in order.tolist()]
    y2 = np.concatenate([y, rng.random(4) < 0.5])[order].astype(float)
    inside2 = np.concatenate([inside, [True, False, True, True]])[order]
    gs2 = None if d.gs is None else np.concatenate([d.gs, d.P[:, new].toarray() > 0], axis=1)[:, order]
    d2 = make_design(d.P, src2, xs2, np.zeros(len(xs2)), d.g0, d.v0, d.p0, gs=gs2, corrected_labels=True)
    assert not batch(d2, keys2, y2, inside2)
    # a new system (a row of P, of g0 and of gs) with draws of its own
    U = d.P.shape[1]
    row = np.zeros(U)
    row[rng.choice(U, 12, replace=False)] = 1 / 12
    P3 = sp.vstack([d.P, sp.csr_matrix(row)]).tocsr()
    sup = np.flatnonzero(row)
    x3 = rng.choice(sup, size=5)
    src3 = np.concatenate([src2, [m] * 5])
    xs3 = np.concatenate([xs2, x3])
    g03 = np.vstack([d.g0, rng.random(d.g0.shape[1]) < 0.4])
    d3 = make_design(P3, src3, xs3, np.zeros(len(xs3)), g03, d.v0, d.p0, corrected_labels=True)
    assert not batch(d3, keys2 + [f"k{u}" for u in x3.tolist()], np.concatenate([y2, [1.0, 0.0, 1.0, 1.0, 0.0]]),
                     np.concatenate([inside2, [True] * 5]))
    correction.clear_cache()


def test_intervals_are_computed_once_per_kind():
    from unpooled.service.evaluations.correction import score_design

    d, keys, y, rates, inside, docs = _random_case(5)
    est = score_design(d, keys, tuple(f"s{i}" for i in range(d.m)), y=y, rates=rates, inside=inside, y0_docs=docs)
    a = est.intervals("raw-wilson", rates=True)
    assert est.intervals("raw-wilson", rates=True) is a
    b = est.intervals("raw-wilson", rates=False)
    assert b is not a and not all(np.array_equal(a[k][1], b[k][1]) for k in a)
    est._ci.clear()
    fresh = est.intervals("raw-wilson", rates=True)
    for k in a:
        np.testing.assert_array_equal(a[k][0], fresh[k][0])
        np.testing.assert_array_equal(a[k][1], fresh[k][1])


# --------------------------------------------------------------------------- (3) answers, key workers, DS fit
def _key_workers_loop(a):
    """The former ``KeyWorkers.from_answers``: a loop over the answers."""
    by_key: dict[str, list[int]] = {}
    for i, w in zip(a.item.tolist(), a.worker.tolist()):
        if a.control[i] < 0:
            by_key.setdefault(a.item_keys[i], []).append(w)
    keys = list(by_key)
    sizes: dict[int, list[int]] = {}
    for r, k in enumerate(keys):
        sizes.setdefault(len(by_key[k]), []).append(r)
    return keys, [(np.array(rows, np.int64), np.array([by_key[keys[r]] for r in rows], np.int64))
                  for n, rows in sorted(sizes.items())]


def _ds_fit_loop(a, item_weights=None, *, clamp_controls=False, shrinkage="eb", max_iter=200, tol=1e-7, init=None):
    """The former ``_ds_fit`` (one logarithm per answer)."""
    from unpooled.service.evaluations.correction import _shrunk

    n_i = a.n_items
    iw = np.ones(n_i) if item_weights is None else np.asarray(item_weights, float)
    om = iw[a.item]
    fixed = (a.control >= 0) if clamp_controls else np.zeros(n_i, bool)
    real = a.control < 0
    votes = np.bincount(a.item, weights=a.yes, minlength=n_i)
    total = np.bincount(a.item, minlength=n_i)
    T = np.where(total > 0, votes / np.maximum(total, 1), 0.5) if init is None else np.asarray(init, float)
    T = np.where(fixed, a.control, T).astype(float)
    prev = -np.inf
    sens = fpr = None
    for _ in range(max_iter):
        wr = iw * real
        rho = float(np.clip((wr * T).sum() / max(wr.sum(), 1e-12), 1e-6, 1 - 1e-6))
        t_a = T[a.item]
        n1 = np.bincount(a.worker, weights=om * t_a, minlength=a.n_workers)
        y1 = np.bincount(a.worker, weights=om * t_a * a.yes, minlength=a.n_workers)
        n0 = np.bincount(a.worker, weights=om * (1 - t_a), minlength=a.n_workers)
        y0 = np.bincount(a.worker, weights=om * (1 - t_a) * a.yes, minlength=a.n_workers)
        sens, fpr = _shrunk(y1, n1, shrinkage), _shrunk(y0, n0, shrinkage)
        l1 = np.where(a.yes == 1, np.log(sens[a.worker]), np.log1p(-sens[a.worker]))
        l0 = np.where(a.yes == 1, np.log(fpr[a.worker]), np.log1p(-fpr[a.worker]))
        s1 = np.bincount(a.item, weights=l1, minlength=n_i) + math.log(rho)
        s0 = np.bincount(a.item, weights=l0, minlength=n_i) + math.log1p(-rho)
        mx = np.maximum(s1, s0)
        ll = float((iw * real * (mx + np.log(np.exp(s1 - mx) + np.exp(s0 - mx)))).sum())
        T = np.where(fixed, a.control, 1.0 / (1.0 + np.exp(s0 - s1)))
        if math.isfinite(prev) and abs(ll - prev) <= tol * max(1.0, abs(prev)):
            break
        prev = ll
    return sens, fpr, T


def _shuffled_items(a, seed):
    """``a`` with items numbered in another order and one key answered under two items (a re-verification)."""
    from unpooled.service.evaluations.correction import VerifyAnswers

    rng = np.random.default_rng(seed)
    perm = rng.permutation(a.n_items)
    keys = [None] * a.n_items
    control = np.empty(a.n_items, np.int64)
    for old, new in enumerate(perm.tolist()):
        keys[new] = a.item_keys[old]
        control[new] = a.control[old]
    real = [i for i in range(a.n_items) if control[i] < 0]
    keys[real[1]] = keys[real[0]]
    return VerifyAnswers(perm[a.item], a.worker, a.yes, keys, control, a.n_workers)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_key_workers_and_rates_are_the_former_loops(seed):
    from unpooled.service.evaluations.correction import KeyWorkers, majority_yes

    for a in (_answers(300 + 50 * seed, seed, n_workers=5 + seed), _shuffled_items(_answers(200, seed), seed)):
        kw = KeyWorkers.from_answers(a)
        keys, groups = _key_workers_loop(a)
        assert kw.keys == keys and len(kw.groups) == len(groups)
        for (r1, w1), (r2, w2) in zip(kw.groups, groups):
            np.testing.assert_array_equal(r1, r2)
            np.testing.assert_array_equal(w1, w2)
        rng = np.random.default_rng(seed)
        sens = rng.uniform(0.6, 0.99, (7, a.n_workers))
        fpr = rng.uniform(0.01, 0.4, (7, a.n_workers))
        t, f = kw.rates_many(sens, fpr)
        for rows, ws in groups:  # the former rates_many: np.unique over the rows of worker indices
            uniq, inv = np.unique(ws, axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            K, n = uniq.shape
            for got, conf in ((t, sens), (f, fpr)):
                want = majority_yes(conf[:, uniq].reshape(7 * K, n)).reshape(7, K)[:, inv]
                np.testing.assert_array_equal(got[:, rows], want)


@pytest.mark.parametrize("seed", [0, 1])
def test_ds_fit_is_the_former_loop(seed):
    from unpooled.service.evaluations.correction import _ds_fit

    a = _answers(800, seed, n_workers=9)
    w = np.random.default_rng(seed).integers(0, 3, a.n_items).astype(float)
    for kw in ({}, {"clamp_controls": True}, {"item_weights": w, "clamp_controls": True}):
        for got, want in zip(_ds_fit(a, **kw), _ds_fit_loop(a, **kw)):
            np.testing.assert_array_equal(got, want)


def test_parsed_rows_appended_equal_a_full_parse():
    from unpooled.service.evaluations.correction import _Parsed

    rng = np.random.default_rng(3)
    rows = []
    for k in range(400):
        task = int(rng.integers(0, 120))
        control = task % 10 == 0
        rows.append((task, int(rng.integers(0, 7)), bool(rng.random() < 0.6), f"key{task}", control,
                     {"correct": task % 20 == 0} if control else None, k + 1))
    full = _Parsed().extended(rows).answers()
    held = _Parsed().extended(rows[:150])
    before = held.answers()
    got = held.extended(rows[150:290]).extended(rows[290:]).answers()
    for name in ("item", "worker", "yes", "control", "answer_ids", "task_ids", "annotator_ids"):
        np.testing.assert_array_equal(getattr(got, name), getattr(full, name), err_msg=name)
    assert got.item_keys == full.item_keys and got.n_workers == full.n_workers
    assert len(before.item) == 150 and before.n_items == len(held.keys)  # the earlier answers are untouched


# --------------------------------------------------------------------------- (4) the service, in the database
@pytest.fixture
def corpus_world(shared_data, tmp_path):
    from unpooled.service.annotation.sampling import sample_documents
    from unpooled.service.evaluations import correction, scoring
    from unpooled.service.submissions.actions import do_ingest_submission

    from ..conftest import load_redocred_subset
    from .test_annotation_e2e import _system_jsonl
    from .test_scoring_incremental import _ask

    scoring.clear_cache()
    correction.clear_cache()
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 10, "memo")
    noisy_path = tmp_path / "noisy.jsonl"
    _system_jsonl(path, noisy_path, rng=3, keep=0.4)
    noisy = do_ingest_submission(noisy_path, "memo", "noisy", "run-1", "jsonl").submission
    sample_documents(corpus, "uniform", 2, seed=1)
    _ask(corpus, [(hwe, 15, "instance"), (noisy, 15, "instance")], seed=1)
    yield corpus, hwe, noisy, noisy_path, tmp_path
    scoring.clear_cache()
    correction.clear_cache()


_MEMOS = ("_memo", "_adjusted", "_answer_rows", "_terms_memo", "_inside_memo", "_sentence_memo")


@contextmanager
def _memos_emptied(corpus):
    """Every memo of correction emptied for the block and restored after it.  The rates' bootstrap state is
    kept when the warm path shifted its replicates (the answers are still read and parsed anew and the point
    rates refitted); when the warm path bootstrapped these very answers, the block does too (seeded: the same)."""
    from unpooled.service.evaluations import correction

    saved = {name: dict(getattr(correction, name)) for name in _MEMOS}
    fp, _, boot = correction._memo[corpus.pk]
    for name in _MEMOS:
        getattr(correction, name).clear()
    if boot is not None and len(boot.answers.item) != fp[0][2]:
        correction._memo[corpus.pk] = ((fp[0][:2] + (-1, -1, -1),) + fp[1:], None, boot)  # not these answers
    try:
        yield
    finally:
        for name in _MEMOS:
            getattr(correction, name).clear()
            getattr(correction, name).update(saved[name])


def _rows(res):
    return [(r.system, r.p, r.p_lo, r.p_hi, r.r, r.r_lo, r.r_hi, r.f1, r.f1_lo, r.f1_hi, r.labels, r.warnings)
            for r in res.rows]


def _check(corpus):
    """Adjusted scores through the warm caches (as score_corpus) equal those from scratch, to the bit."""
    from unpooled.service.evaluations import correction, scoring

    got = scoring.score(corpus)
    warm = correction.adjust_result(corpus, got.result, got.by_name, documents=got.docs)
    assert not any("adjustment skipped" in w for w in warm.warnings)
    fp = correction._memo[corpus.pk][0][0]
    inc = correction.verify_answers(corpus, fp)  # the parse held, extended
    with _memos_emptied(corpus):
        full = correction.verify_answers(corpus)  # read and parsed anew
        for name in ("item", "worker", "yes", "control", "answer_ids", "task_ids", "annotator_ids"):
            np.testing.assert_array_equal(getattr(inc, name), getattr(full, name), err_msg=name)
        assert inc.item_keys == full.item_keys
        ref = scoring.from_scratch(corpus)
        cold = correction.adjust_result(corpus, ref.result, ref.by_name, documents=ref.docs)
    assert _rows(warm) == _rows(cold) and warm.warnings == cold.warnings
    return warm


@pytest.mark.django_db
def test_memoised_adjustment_equals_from_scratch_over_label_batches(corpus_world):
    from unpooled.service.annotation.actions import request_verification
    from unpooled.service.annotation.models import Label
    from unpooled.service.evaluations import correction
    from unpooled.service.evaluations.actions import draw
    from unpooled.service.evaluations.models import Draw
    from unpooled.service.submissions.actions import do_ingest_submission

    from .test_scoring_incremental import _ask

    corpus, hwe, noisy, noisy_path, tmp_path = corpus_world
    first = _check(corpus)
    assert correction.service_rates(corpus) is not None  # the labels are corrected: the rates' path is exercised
    # (1) new draws and their labels
    _ask(corpus, [(noisy, 10, "instance")], seed=7)
    _check(corpus)
    # (2) new draws (some of keys labelled already), then labels for the others
    ids = draw(hwe, 8, level="instance", rng=11)
    lt = correction._terms_memo["last"][1]
    _check(corpus)
    request_verification(hwe, sorted(set(ids)))
    _ask(corpus, [], seed=12)
    _check(corpus)
    assert correction._terms_memo["last"][1] is not lt
    # (3) a newer label for a labelled key (only the labels move: the terms are the memo's)
    key = Draw.objects.filter(submission=noisy).values_list("key", flat=True).first()
    old = Label.objects.filter(corpus=corpus, key=key, method="majority").order_by("-id").first()
    Label.objects.create(corpus=corpus, key=key, key_hash=old.key_hash, task=old.task, probability=0.0,
                         correct=not old.correct, method="majority", n_answers=3, annotators=[],
                         guideline_version=old.guideline_version)
    lt = correction._terms_memo["last"][1]
    _check(corpus)
    assert correction._terms_memo["last"][1] is lt
    # (4) a new submission, with draws and labels of its own
    again = tmp_path / "again.jsonl"
    again.write_text("".join(line for k, line in enumerate(noisy_path.read_text().splitlines(True)) if k % 3 == 0))
    copycat = do_ingest_submission(again, "memo", "copycat", "run-1", "jsonl").submission
    _ask(corpus, [(copycat, 12, "instance")], seed=3)
    last = _check(corpus)
    assert len(last.rows) == len(first.rows) + 1
