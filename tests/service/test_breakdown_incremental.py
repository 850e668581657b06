"""The breakdowns after a re-scoring cost what changed: each submission's instances (their predicates, their
subjects' types) come from the scoring's inputs in memory, never from the database again; a score estimated from
the same inputs as its submission's newest breakdown points to that row (nothing copied); and a re-scoring with
nothing new writes no row at all.  The numbers are those computed from scratch (the caches forgotten, every
breakdown recomputed).

The world is the submission page's (test_submission_page.py: two submissions, draws at two levels, three exhaustive
documents)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from unpooled.service.annotation.models import Label, Task
from unpooled.service.evaluations import breakdown, scoring
from unpooled.service.evaluations.models import Breakdown, MissedInstances, Score
from unpooled.service.evaluations.publish import rescore, score_corpus
from unpooled.service.submissions.models import RelationInstance, SubmissionEntity

from .test_submission_page import world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

#: what a breakdown records of when and from what it was computed (the rest is its numbers)
STAMPS = ("computed",)


def _newest(corpus, level="instance") -> dict[int, dict]:
    return {sid: breakdown.stored(s) for sid, s in breakdown.newest_scores_of_corpus(corpus, level).items()}


def _numbers(bd: dict) -> dict:
    return {k: v for k, v in bd.items() if k not in STAMPS}


def _from_scratch(corpus, level="instance") -> dict[int, dict]:
    """Every newest breakdown recomputed with every cache forgotten (restored afterwards: the tests go on)."""
    with transaction.atomic():  # rolled back: the stored breakdowns stay
        scoring.clear_cache()
        breakdown.compute_breakdowns(corpus, level, only_missing=False)
        got = _newest(corpus, level)
        transaction.set_rollback(True)
    return got


def _tables(queries) -> str:
    return " ".join(q["sql"] for q in queries).lower()


def _stored_sizes() -> tuple[int, int, int]:
    """The scores, the breakdown rows, and the characters of every breakdown stored (rows' data and scores' details)."""
    import json

    chars = sum(len(json.dumps(d)) for d in Breakdown.objects.values_list("data", flat=True))
    chars += sum(len(json.dumps(d)) for d in Score.objects.values_list("details", flat=True))
    chars += sum(len(json.dumps(d)) for d in MissedInstances.objects.values_list("entries", flat=True))
    return Score.objects.count(), Breakdown.objects.count(), chars


def test_rescorings_with_nothing_new_store_nothing(world):  # noqa: F811
    """A label batch that changed nothing re-scores every level: no score is written (it would repeat the newest,
    breakdown included) and no breakdown is copied, however many times; the newest scores and their breakdowns (the
    pages' cache keys) stay as they were."""
    corpus, a, b = world
    rescore(corpus)
    newest = {lv: {sid: (s.pk, breakdown.stored(s)) for sid, s in breakdown.newest_scores_of_corpus(corpus, lv).items()}
              for lv in ("instance", "relation")}
    assert all(bd is not None for by in newest.values() for _, bd in by.values())
    sizes = _stored_sizes()
    for _ in range(3):
        assert len(rescore(corpus)) == 4  # every submission's current score at both levels: the kept ones
    assert _stored_sizes() == sizes
    assert {lv: {sid: (s.pk, breakdown.stored(s)) for sid, s in breakdown.newest_scores_of_corpus(corpus, lv).items()}
            for lv in ("instance", "relation")} == newest


def test_a_new_score_from_the_same_inputs_points_to_their_breakdown(world):  # noqa: F811
    corpus, a, b = world
    assert breakdown.compute_breakdowns(corpus, "instance") == 2
    old = breakdown.newest_scores_of_corpus(corpus, "instance")
    before = _newest(corpus)
    # the newest scores say other counts than a scoring now would: a new score is written from the same inputs
    Score.objects.filter(pk__in=[s.pk for s in old.values()]).update(labels_reused=F("labels_reused") + 1)
    rows = Breakdown.objects.count()
    score_corpus(corpus, level="instance")
    new = breakdown.newest_scores_of_corpus(corpus, "instance")
    assert all(new[s].pk != old[s].pk and breakdown.stored(new[s]) is None for s in new)
    with CaptureQueriesContext(connection) as q:
        assert breakdown.compute_breakdowns(corpus, "instance") == 2
    sql = _tables(q.captured_queries)
    # nothing is recomputed: neither the submissions' instances nor the truth's tasks (their payloads: the
    # inputs' fingerprint reads their ids and completion times) are read, and no breakdown is written
    for model in (RelationInstance, SubmissionEntity):
        assert model._meta.db_table.lower() not in sql, model
    assert f'"{Task._meta.db_table}"."payload"'.lower() not in sql
    assert Breakdown.objects.count() == rows
    after = breakdown.newest_scores_of_corpus(corpus, "instance")
    assert all(after[s].pk == new[s].pk and after[s].breakdown_id == old[s].breakdown_id for s in new)
    got = _newest(corpus)
    for sid, bd in got.items():
        assert bd["score"] == new[sid].pk and before[sid]["score"] == old[sid].pk
        assert {**bd, "score": None} == {**before[sid], "score": None}
    # and they are the breakdowns computed from scratch
    scratch = _from_scratch(corpus)
    assert {s: _numbers(bd) for s, bd in scratch.items()} == {s: _numbers(bd) for s, bd in got.items()}


def test_new_labels_recompute_the_breakdowns_from_memory(world):  # noqa: F811
    corpus, a, b = world
    breakdown.compute_breakdowns(corpus, "instance")
    old = _newest(corpus)
    # a label batch: some labels flipped (newest wins)
    for lab in Label.objects.filter(corpus=corpus).order_by("id")[:6]:
        Label.objects.create(corpus=corpus, key=lab.key, key_hash=lab.key_hash, probability=1 - lab.probability,
                             correct=not lab.correct, method=lab.method, n_answers=3, guideline_version="test")
    score_corpus(corpus, level="instance")
    with CaptureQueriesContext(connection) as q:
        assert breakdown.compute_breakdowns(corpus, "instance") == 2
    # the submissions' instances and their subjects' types are the scoring's, in memory
    sql = _tables(q.captured_queries)
    for model in (RelationInstance, SubmissionEntity):
        assert model._meta.db_table.lower() not in sql, model
    got = _newest(corpus)
    assert all(got[s]["inputs"] != old[s]["inputs"] for s in got)
    assert any(got[s]["relation"] != old[s]["relation"] for s in got), "the labels moved the groups' estimates"
    # the missed true instances moved with no label: the new breakdowns share the rows of the old ones
    assert all(got[s]["missed"] == old[s]["missed"] and got[s]["missed_total"] == old[s]["missed_total"] for s in got)
    assert MissedInstances.objects.count() == len(got)
    assert {b.missed_id for b in Breakdown.objects.all()} == set(MissedInstances.objects.values_list("id", flat=True))
    scratch = _from_scratch(corpus)
    assert {s: _numbers(bd) for s, bd in scratch.items()} == {s: _numbers(bd) for s, bd in got.items()}
    # a re-score with nothing new after that keeps the scores and their breakdowns
    score_corpus(corpus, level="instance")
    assert breakdown.compute_breakdowns(corpus, "instance") == 0
    assert _newest(corpus) == got


def test_another_truth_recomputes_the_breakdowns(world):  # noqa: F811
    """The truth's subject types are the exhaustive tasks': a task completed again (the same relations) is another
    input, and the breakdowns are recomputed, not carried over."""
    from django.utils import timezone

    corpus, a, b = world
    breakdown.compute_breakdowns(corpus, "instance")
    old = _newest(corpus)
    task = Task.objects.filter(corpus=corpus, kind="relations").order_by("id").first()
    ms = task.payload["mentions"]
    for m in ms:
        m["type"] = "RETYPED"
    Task.objects.filter(pk=task.pk).update(payload={**task.payload, "mentions": ms}, completed=timezone.now())
    score_corpus(corpus, level="instance")
    breakdown.compute_breakdowns(corpus, "instance")
    got = _newest(corpus)
    assert all(got[s]["computed"] != old[s]["computed"] for s in got)
    assert any("RETYPED" in {r["group"] for r in got[s]["entity_type"]} for s in got)
    # the missed instances carry the truth's types: stored anew where the submission misses a retyped one
    assert MissedInstances.objects.count() > len(got)
    assert any(e[7] == "RETYPED" for s in got for e in got[s]["missed"])


def test_recomputing_every_breakdown_deletes_the_rows_no_score_points_to(world):  # noqa: F811
    corpus, a, b = world
    assert breakdown.compute_breakdowns(corpus, "instance") == 2
    old = set(Breakdown.objects.values_list("id", flat=True))
    before = _newest(corpus)
    assert breakdown.compute_breakdowns(corpus, "instance", only_missing=False) == 2
    assert not Breakdown.objects.filter(id__in=old).exists()  # each was its newest score's alone
    assert {s: _numbers(bd) for s, bd in _newest(corpus).items()} == {s: _numbers(bd) for s, bd in before.items()}
