"""requeue_orphaned: which RUNNING tasks a starting worker takes back, and the attempt cap."""

from __future__ import annotations

import pytest
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from unpooled.service.submissions.tasks import ingest_upload
from unpooled.service.workers import MAX_ATTEMPTS, requeue_orphaned, worker_id

pytestmark = pytest.mark.django_db


def running(*workers: str) -> DBTaskResult:
    res = ingest_upload.enqueue("/nonexistent", "c", "t", "r", "tac", "f")
    row = DBTaskResult.objects.get(pk=res.id)
    for w in workers:
        row.claim(w)
    return row


def test_requeues_only_own_tasks():
    mine = running("h-0")
    other = running("h-1")
    assert requeue_orphaned("h-0") == {"requeued": 1, "failed": 0}
    mine.refresh_from_db()
    other.refresh_from_db()
    assert mine.status == TaskResultStatus.READY and mine.started_at is None
    assert other.status == TaskResultStatus.RUNNING


def test_gives_up_after_max_attempts():
    row = running(*["h-0"] * MAX_ATTEMPTS)
    assert requeue_orphaned("h-0") == {"requeued": 0, "failed": 1}
    row.refresh_from_db()
    assert row.status == TaskResultStatus.FAILED and "died 3 times" in row.traceback


def test_worker_id_is_host_and_slot():
    assert worker_id(2, host="box") == "box-2"
