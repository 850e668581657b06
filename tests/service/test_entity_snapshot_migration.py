"""The migrations that freeze entity scores with the others (evaluations 0009, 0010): the published submissions of a
period closed before it get the entity score they had at the close (the newest made by then), or their first one
when they were scored only after it; a submission of an open period, or not published, gets none.  Backwards, the
entity snapshots go (the older schema has no place for them)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("evaluations", "0008_missed_instances")]
AFTER = [("evaluations", "0010_freeze_closed_entity_scores")]


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return MigrationExecutor(connection).loader.project_state(target).apps


def test_closed_periods_get_their_entity_scores_frozen_as_at_the_close():
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.corpora.models import Period
    from unpooled.service.submissions.models import Submission, Team

    apps = _migrate(BEFORE)
    EntityScore = apps.get_model("evaluations", "EntityScore")
    corpus = do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "migent", schema="tac-kbp")
    now = timezone.now()
    closed = Period.objects.create(corpus=corpus, number=1, opened=now - timedelta(days=9),
                                   closed=now - timedelta(days=5))
    still_open = Period.objects.create(corpus=corpus, number=2, opened=now - timedelta(days=4))
    team = Team.objects.create(name="t")

    def sub(run, period, status="published"):
        return Submission.objects.create(corpus=corpus, team=team, run_id=run, format="jsonl", period=period,
                                         file_sha256=run, status=status)

    def entity(s, days_ago):
        es = EntityScore.objects.create(submission_id=s.pk, level="instance", details={"days_ago": days_ago})
        EntityScore.objects.filter(pk=es.pk).update(created=now - timedelta(days=days_ago))
        return es.pk

    early, late, moving, unpublished = (sub("early", closed), sub("late", closed), sub("moving", still_open),
                                        sub("hidden", closed, status="evaluating"))
    at_close = entity(early, 6)
    entity(early, 1)  # written after the close: what the frozen period's board should not have shown
    first_after = entity(late, 3)
    entity(late, 1)
    entity(moving, 1)
    entity(unpublished, 6)
    apps = _migrate(AFTER)
    Snapshot = apps.get_model("evaluations", "ScoreSnapshot")
    got = {s.submission_id: (s.entity_score_id, s.period_id, s.frozen) for s in Snapshot.objects.all()}
    assert got == {early.pk: (at_close, closed.pk, closed.closed), late.pk: (first_after, closed.pk, closed.closed)}
    assert {s.level for s in Snapshot.objects.all()} == {"entities"}
    apps = _migrate(BEFORE)
    assert not apps.get_model("evaluations", "ScoreSnapshot").objects.exists()
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # the newest schema, for the tests after
