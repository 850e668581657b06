"""Incremental re-scoring (:mod:`unpooled.service.evaluations.scoring`) equals the from-scratch path.

Each check scores through the cache (kept warm across the changes, as in the worker) and
from scratch (``offline_data`` + the core's ``score``) and compares every estimate to 1e-9,
and the design arrays exactly, after new labels, new draws, a newer label for a key, a new
submission (the pool is extended), a changed exhaustive truth, a deleted submission (the
pool is rebuilt), and at another level.  One test (one corpus) keeps the suite fast.
"""

from __future__ import annotations

import pytest

from unpooled.service.annotation.actions import reaggregate, request_verification
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Label, Task
from unpooled.service.annotation.sampling import sample_documents
from unpooled.service.crowd.base import SimulatedBackend
from unpooled.service.evaluations import inputs, rates, scoring
from unpooled.service.evaluations.draws import draw
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.evaluations.publish import score_corpus
from unpooled.service.submissions.actions import do_ingest_submission

from ..conftest import load_redocred_subset
from .test_annotation_e2e import _system_jsonl

pytestmark = [pytest.mark.db, pytest.mark.django_db]

TOL = 1e-9


def _same(corpus, *, level="instance", match="overlap", weights="balance"):
    inc = scoring.score(corpus, level=level, match=match, weights=weights)
    ref = scoring.from_scratch(corpus, level=level, match=match, weights=weights)
    assert inc.result.systems == ref.result.systems
    assert inc.docs == ref.docs and set(inc.by_name) == set(ref.by_name)
    assert inc.result.warnings == ref.result.warnings
    d = scoring.max_abs_difference(inc.result, ref.result)
    assert d <= TOL, f"incremental and from-scratch differ by {d} ({level}, {match}, {weights})"
    a, b = inc.result.design, ref.result.design
    assert (a.src == b.src).all() and (a.xs == b.xs).all() and (a.f == b.f).all()
    assert (a.g0 == b.g0).all() and (a.v0 == b.v0).all() and (a.p0 == b.p0).all()
    assert (a.gs is None) == (b.gs is None) and (a.gs is None or (a.gs == b.gs).all())
    assert abs(a.P - b.P).max() == 0
    assert inc.keys == ref.keys and inc.truth == ref.truth  # the labelled draws' keys and the truth, in order
    return inc


def _ask(corpus, requests, *, seed=0):
    """Draw (sub, n, level) for each request, ask for the labels, let the simulated crowd answer."""
    for k, (sub, n, level) in enumerate(requests):
        ids = draw(sub, n, level=level, rng=seed + k)
        request_verification(sub, sorted(set(ids)))
    crowd = SimulatedBackend(accuracy=0.8, seed=seed)
    crowd.publish(corpus)
    crowd.collect(corpus)
    reaggregate(corpus)


@pytest.fixture
def world(shared_data, tmp_path):
    scoring.clear_cache()
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 10, "incr")
    noisy_path = tmp_path / "noisy.jsonl"
    _system_jsonl(path, noisy_path, rng=3, keep=0.4)
    noisy = do_ingest_submission(noisy_path, "incr", "noisy", "run-1", "jsonl").submission
    sample_documents(corpus, "uniform", 2, seed=1)  # exhaustive documents, annotated by the crowd below
    _ask(corpus, [(hwe, 15, "instance"), (noisy, 15, "instance")], seed=1)
    yield corpus, hwe, noisy, noisy_path, tmp_path
    scoring.clear_cache()


def test_incremental_rescoring_equals_from_scratch(world, monkeypatch):
    corpus, hwe, noisy, noisy_path, tmp_path = world
    fits = []
    real = rates.fit_confusions

    def counted(*a, **kw):  # a fit that happened (a source without its data returns None)
        got = real(*a, **kw)
        if got is not None:
            fits.append(1)
        return got

    monkeypatch.setattr(rates, "fit_confusions", counted)

    # score_corpus (cold cache): one Score per submission, the same rows as score_corpus on the from-scratch
    # estimates (whatever score_corpus does with them afterwards)
    scoring.clear_cache()
    before = Score.objects.count()
    scores = score_corpus(corpus)
    assert Score.objects.count() == before + 2 and len(scores) == 2 and all(s.pk for s in scores)
    with monkeypatch.context() as mp:
        mp.setattr(scoring, "score", lambda c, level, match, weights: scoring.from_scratch(
            c, level=level, match=match, weights=weights))
        expected = {s.submission_id: s for s in score_corpus(corpus)}
    for s in scores:
        e = expected[s.submission_id]
        for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi"):
            assert getattr(s, k) == pytest.approx(getattr(e, k), abs=TOL), k
        assert (s.draws, s.exhaustive_documents, s.estimator, s.level) == (e.draws, e.exhaustive_documents,
                                                                           e.estimator, e.level)
        assert s.details["warnings"] == e.details["warnings"] and s.draws > 0
        assert s.details["raw"] == pytest.approx(e.details["raw"], abs=TOL)
    # the confusions are memoised on the answers: scoring again without new answers does not refit them (the
    # from-scratch path reads the same fingerprint, so it shares the fit)
    n = len(fits)
    first = _same(corpus)
    assert len(fits) == n
    assert first.docs > 0 and len(first.result.design.xs) > 0
    _same(corpus, match="exact")
    _same(corpus, weights="heuristic")

    # new draws and a batch of new labels (with their answers: the confusions are refitted)
    n_labels = Label.objects.filter(corpus=corpus).count()
    _ask(corpus, [(noisy, 15, "instance")], seed=7)
    assert Label.objects.filter(corpus=corpus).count() > n_labels
    got = _same(corpus)
    assert len(got.result.design.xs) > len(first.result.design.xs)

    # a newer label for an already-labelled drawn key wins (written behind the cache's back)
    key = Draw.objects.filter(submission=hwe).values_list("key", flat=True).first()
    old = Label.objects.filter(corpus=corpus, key=key, method="majority").order_by("-id").first()
    Label.objects.create(corpus=corpus, key=key, key_hash=old.key_hash, task=old.task, probability=0.0,
                         correct=not old.correct, method="majority", n_answers=3, annotators=[],
                         guideline_version=old.guideline_version)
    _same(corpus)

    # a new submission: the pool is extended (its instances, R columns, a row of P), first without
    # draws of its own, then with them; and draws at another level for everyone
    again = tmp_path / "again.jsonl"
    again.write_text("".join(line for k, line in enumerate(noisy_path.read_text().splitlines(True)) if k % 3 == 0))
    copycat = do_ingest_submission(again, "incr", "copycat", "run-1", "jsonl").submission
    pool = inputs._pools[(inputs.corpus_key(corpus), "overlap")]
    _same(corpus)
    _ask(corpus, [(copycat, 20, "instance")] + [(s, 10, "entity") for s in (hwe, noisy, copycat)], seed=3)
    # a label batch re-scores every level with draws (publish.rescore); the new answers moved the correction, and
    # one refit serves both levels
    n = len(fits)
    out = {level: score_corpus(corpus, level=level) for level in scoring.levels_with_draws(corpus)}
    assert set(out) == {"instance", "entity"} and len(fits) == n + 1
    assert len(out["instance"]) == len(out["entity"]) == 3
    got = _same(corpus)
    assert inputs._pools[(inputs.corpus_key(corpus), "overlap")] is pool and pool.generation >= 1  # not rebuilt
    assert got.result.systems[-1] == "copycat/run-1"
    _same(corpus, level="entity")

    # the exhaustive truth changes: another inclusion probability, a document's relations reopened
    ed = ExhaustiveDocument.objects.filter(corpus=corpus).order_by("id").first()
    ExhaustiveDocument.objects.filter(pk=ed.pk).update(inclusion=ed.inclusion / 2)
    _same(corpus)
    docs = got.docs
    Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, document_id=ed.document_id).update(status=Task.Status.OPEN)
    got = _same(corpus)
    assert got.docs == docs - 1

    # a deleted submission: the pool is rebuilt
    copycat.delete()
    got = _same(corpus)
    assert inputs._pools[(inputs.corpus_key(corpus), "overlap")] is not pool
    assert "copycat/run-1" not in got.result.systems


def test_published_scores_are_the_cores_on_the_released_answers(world, tmp_path):
    """What the service publishes is what the core computes offline from the released answers: the scores of a
    cold re-scoring equal unpooled.core.offline.score on offline_data with the answers read back from the
    release's answers.jsonl (the same fit of the error rates, the same estimator)."""
    import math

    from unpooled.core.annotation.confusion import fit_preferred, keyed_answers
    from unpooled.core.offline import read_answers
    from unpooled.core.offline import score as offline_score
    from unpooled.service.annotation.release import export_release
    from unpooled.service.evaluations import inputs

    corpus, *_ = world
    scoring.clear_cache()
    stored = {s.submission_id: s for s in score_corpus(corpus)}
    export_release(corpus, tmp_path / "release")
    answers, rep = read_answers(tmp_path / "release" / "answers.jsonl")
    assert rep.ok and len(answers.item) > 0
    from django.conf import settings

    source, point, reps = fit_preferred(answers, replicates=settings.RATE_REPLICATES)  # the service's bootstrap
    data, by_name, docs = inputs.offline_data(corpus)
    res = offline_score(data, level="instance", estimator="joint", weights="balance", match="overlap",
                        corrected_labels=True, documents=docs or None, sentences=rates.sentences(corpus),
                        votes=keyed_answers(answers, point, reps))
    assert res.scores.raw is not None
    for row in res.rows:
        s = stored[by_name[row.system].pk]
        for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi"):
            want = row.to_dict()[k]
            assert getattr(s, k) == pytest.approx(min(1.0, max(0.0, want)), abs=1e-12), (row.system, k)
            assert not math.isnan(want)
