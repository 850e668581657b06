"""The entity scores after a label batch compute only what the batch changes: the document side (the core's
document terms, the exhaustive layers and answers, the submissions' mentions in them) is kept under fingerprints
and computed again only when an exhaustive document's answers, the clustering or the submissions change; every
figure is the one computed with every cache forgotten."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from unpooled.service.annotation.models import Annotator, Answer, Assignment, Backend, Kind, Task
from unpooled.service.evaluations import entities, inputs

from .test_entity_scores import tac_world

pytestmark = pytest.mark.django_db


def _figures(corpus) -> dict:
    got = entities.results(corpus)
    return {(sub.pk, k): (e.value, e.se, e.lo, e.hi, e.reason)
            for sub, res in zip(got.subs, got.scores) for k, e in res.metrics.items()}


def _same(a: dict, b: dict) -> bool:
    def eq(x, y):
        return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))

    return a.keys() == b.keys() and all(all(eq(x, y) for x, y in zip(a[k], b[k])) for k in a)


def _from_scratch(corpus) -> dict:
    inputs.clear_cache()
    return _figures(corpus)


def _counted(monkeypatch, module, name: str) -> list:
    """A list that grows by one at each call of ``module.name`` (which still runs)."""
    calls, real = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_label_batch_keeps_the_document_side(monkeypatch):
    corpus, sub = tac_world("tacinc")
    calls = _counted(monkeypatch, entities, "document_terms")
    before = _figures(corpus)
    assert calls == [], "the world's re-scoring kept the document terms"
    # a label batch: one more annotator judges a drawn instance's subject no mention (mention precision moves)
    task = Task.objects.filter(corpus=corpus, kind=Kind.VERIFY).order_by("id").first()
    ann = Annotator.objects.create(backend=Backend.SIMULATED, external_id="tac-late")
    now = timezone.now()
    a = Assignment.objects.create(task=task, annotator=ann, token="late-0", leased=now, expires=now + timedelta(hours=1))
    Answer.objects.create(assignment=a, task=task, annotator=ann, correct=True, guideline_version="test",
                          value={"relation": "holds", "subject_ok": False, "object_ok": True})
    with CaptureQueriesContext(connection) as q:
        after = _figures(corpus)
    assert calls == []
    # neither the submissions' mentions nor the exhaustive documents' layers and answers are read again
    sqls = [x["sql"] for x in q.captured_queries]
    assert not [s for s in sqls if "submissions_submissionmention" in s and "SELECT" in s and "EXISTS" not in s]
    assert not [s for s in sqls if '"annotation_task"."result"' in s]
    assert after[(sub.pk, "mention_p")][0] != before[(sub.pk, "mention_p")][0], "the batch moves mention precision"
    assert _same(after, _from_scratch(corpus))

    # a fourth answer on an exhaustive document, marking two of its mentions alone: the document side is computed
    # again
    calls.clear()
    _figures(corpus)
    assert calls == []
    ent = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES).order_by("id").first()
    a = Assignment.objects.create(task=ent, annotator=ann, token="late-1", leased=now, expires=now + timedelta(hours=1))
    Answer.objects.create(assignment=a, task=ent, annotator=ann, guideline_version="test",
                          value={"mentions": ent.result["mentions"][:2]})
    moved = _figures(corpus)
    assert len(calls) == 1
    assert _same(moved, _from_scratch(corpus)) and not _same(moved, after)


def test_a_new_submission_computes_its_own_part_alone(monkeypatch):
    """A new submission computes its own mentions' terms in every exhaustive document, then the crowd's rates (they
    take every submission's spans) and what they move from the other submissions' kept sums: the others' mentions
    are not matched again (the core's ``_sys_doc``, one call per submission and document), and every figure is the
    one computed with every cache forgotten."""
    from unpooled.core.estimators import entities as core
    from unpooled.service.annotation.models import ExhaustiveDocument
    from unpooled.service.submissions.actions import do_ingest_submission

    from ..conftest import FIXTURES

    corpus, sub = tac_world("tacnew")
    n_docs = ExhaustiveDocument.objects.filter(corpus=corpus).count()
    calls = _counted(monkeypatch, core, "_sys_doc")
    before = _figures(corpus)
    assert calls == []
    late = do_ingest_submission(FIXTURES / "kb" / "coldstart.kb", corpus.name, "team-late", None, "tac").submission
    after = _figures(corpus)
    assert len(calls) == n_docs == 2, "the new submission's documents alone"
    assert {k for k in after if k[0] == late.pk} and before.keys() < after.keys()
    calls.clear()
    assert _same(after, _from_scratch(corpus)) and len(calls) == 2 * n_docs
