"""The entity scores' argument judgements after a batch of answers cost what changed: the answers to verification
tasks are read once and appended to (only answers with new ids are read again), and the scores are those computed
with every cache forgotten; an answer that stops counting (quarantined) makes them re-read, never stale.

The world is the submission page's (test_submission_page.py: two submissions, draws at two levels)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Max
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from unpooled.service.annotation.models import Annotator, Answer, Assignment, Backend, Kind, Task
from unpooled.service.evaluations import entities, inputs, scoring
from unpooled.service.evaluations.models import Draw, EntityScore
from unpooled.service.submissions.models import RelationInstance

from .test_submission_page import world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def _answer(corpus, inst, who: list[Annotator], n: int) -> None:
    """A verification task about ``inst`` answered by ``who``, the ``n``-th saying the subject is no mention."""
    now = timezone.now()
    task = Task.objects.create(corpus=corpus, kind=Kind.VERIFY, document_id=inst.document_id, key=inst.key,
                               key_hash=inst.key_hash, status=Task.Status.COMPLETE, guideline_version="test",
                               priority=now, completed=now, payload={
                                   "subject": {"start": inst.subject_start, "end": inst.subject_end},
                                   "predicate": inst.predicate,
                                   "object": {"start": inst.object_start, "end": inst.object_end}})
    for k, ann in enumerate(who):
        a = Assignment.objects.create(task=task, annotator=ann, token=f"t{task.pk}-{k}", leased=now,
                                      expires=now + timedelta(hours=1))
        Answer.objects.create(assignment=a, task=task, annotator=ann, correct=True, guideline_version="test",
                              value={"relation": "holds", "subject_ok": (n + k) % 4 != 0, "object_ok": True})


def _drawn() -> tuple[list[Annotator], dict, list]:
    """Three annotators, and the drawn instances by key (one each) with their keys in order."""
    who = [Annotator.objects.create(backend=Backend.SIMULATED, external_id=f"arg-{k}") for k in range(3)]
    insts = {}
    for inst in RelationInstance.objects.filter(pk__in=Draw.objects.filter(level="instance").values("instance_id")):
        insts.setdefault(inst.key, inst)
    return who, insts, sorted(insts)


def _newest(corpus) -> dict:
    return {e.submission_id: e.details for e in EntityScore.objects.filter(submission__corpus=corpus).order_by("id")}


def test_new_answers_are_read_alone_and_the_scores_are_the_from_scratch_ones(world):  # noqa: F811
    corpus, a, b = world
    who, insts, keys = _drawn()
    assert len(keys) >= 8
    for n, key in enumerate(keys[:len(keys) // 2]):
        _answer(corpus, insts[key], who, n)
    assert entities.compute(corpus, level="instance")
    seen = Answer.objects.aggregate(m=Max("id"))["m"]
    for n, key in enumerate(keys[len(keys) // 2:]):
        _answer(corpus, insts[key], who, n)
    with CaptureQueriesContext(connection) as q:
        assert entities.compute(corpus, level="instance"), "the new judgements move the argument precision"
    # the answers' task payloads (the arguments' spans) are read for the new answers only
    payloads = [x["sql"] for x in q.captured_queries
                if '"annotation_task"."payload"' in x["sql"] and 'FROM "annotation_answer"' in x["sql"]]
    assert payloads and all(re.search(rf'"id" > {seen}\b', s) for s in payloads), payloads
    got = _newest(corpus)
    # with every cache forgotten: the same figures (compute writes a score only when its figures changed)
    scoring.clear_cache()
    assert entities.compute(corpus, level="instance") == []
    assert _newest(corpus) == got
    # an answer that stops counting (quarantined): the answers are read again, not taken from the cache
    Answer.objects.filter(pk=seen).update(quarantined=True)
    changed = entities.compute(corpus, level="instance")
    fresh = _newest(corpus)
    inputs.clear_cache()
    assert entities.compute(corpus, level="instance") == []
    assert _newest(corpus) == fresh
    assert changed and fresh != got


def test_nothing_new_keeps_the_argument_precision_and_a_new_answer_recomputes_it(world, monkeypatch):  # noqa: F811
    corpus, a, b = world
    who, insts, keys = _drawn()
    for n, key in enumerate(keys[:-1]):
        _answer(corpus, insts[key], who, n)
    calls = []
    real = entities._arguments
    monkeypatch.setattr(entities, "_arguments", lambda *args: calls.append(1) or real(*args))
    first = entities.results(corpus, level="instance")
    assert len(calls) == 1 and first.info["draws_unjudged"] >= 0
    again = entities.results(corpus, level="instance")
    assert len(calls) == 1, "nothing new: the argument precision is the one kept"
    assert [s.to_dict() for s in again.scores] == [s.to_dict() for s in first.scores]
    _answer(corpus, insts[keys[-1]], who, 1)
    entities.results(corpus, level="instance")
    assert len(calls) == 2, "a new answer: computed again"
