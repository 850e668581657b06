"""Worker heartbeats: any live worker requeues the RUNNING tasks of workers whose heartbeat is stale.

The subprocess version (a worker killed with SIGKILL, another worker with a different id finishes
its task) is in test_worker_crash.py.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_tasks import TaskResultStatus, task
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from unpooled.service.organiser.models import WorkerHeartbeat
from unpooled.service.workers import (
    MAX_ATTEMPTS,
    Liveness,
    _release,
    beat,
    forget_dead,
    recover_dead,
    requeue_orphaned,
    worker_rows,
)

from ..conftest import at_once
from ..faults.harness import until

pytestmark = pytest.mark.django_db

TIMEOUT = 60.0


@task()
def double(x: int) -> int:
    return 2 * x


def running(*workers: str, started_ago: float | None = None, x: int = 21) -> DBTaskResult:
    row = DBTaskResult.objects.get(pk=double.enqueue(x).id)
    for w in workers:
        row.claim(w)
    if started_ago is not None:
        row.started_at = timezone.now() - timedelta(seconds=started_ago)
        row.save(update_fields=["started_at"])
    return row


def heartbeat(wid: str, age: float) -> None:
    WorkerHeartbeat.objects.update_or_create(worker_id=wid, defaults={"last_seen": timezone.now() - timedelta(seconds=age)})


def fresh(row: DBTaskResult) -> DBTaskResult:
    row.refresh_from_db()
    return row


@pytest.mark.django_db(transaction=True)  # the real worker loop commits and closes its connection
def test_stale_worker_task_is_requeued_and_completes():
    heartbeat("dead-0", age=10 * TIMEOUT)
    row = running("dead-0", started_ago=10 * TIMEOUT)
    live = Liveness("live-0", timeout=TIMEOUT, interval=TIMEOUT / 3)
    live.start()  # sweeps once at start
    try:
        assert fresh(row).status == TaskResultStatus.READY and row.started_at is None
        assert WorkerHeartbeat.objects.get(worker_id="live-0").pid is not None
        Worker(queue_names=["default"], interval=0, batch=True, backend_name="default", startup_delay=False,
               max_tasks=None, worker_id="live-0", excluded_queue_names=[]).run()
    finally:
        live.stop()
    row = fresh(row)
    assert row.status == TaskResultStatus.SUCCESSFUL and row.return_value == 42
    assert row.worker_ids == ["dead-0", "live-0"]
    assert not WorkerHeartbeat.objects.filter(worker_id="live-0").exists()  # a clean stop forgets the worker


def test_task_of_live_worker_is_not_touched():
    heartbeat("alive-0", age=1)
    row = running("alive-0", started_ago=10 * TIMEOUT)  # a long task, but its worker beats
    assert recover_dead("sweeper-0", timeout=TIMEOUT) == {"requeued": 0, "failed": 0, "workers": []}
    assert fresh(row).status == TaskResultStatus.RUNNING


def test_stale_heartbeat_requeues_only_that_workers_tasks():
    heartbeat("dead-0", age=2 * TIMEOUT)
    heartbeat("alive-0", age=1)
    dead, alive = running("dead-0", started_ago=5), running("alive-0", started_ago=5)
    assert recover_dead("sweeper-0", timeout=TIMEOUT) == {"requeued": 1, "failed": 0, "workers": ["dead-0"]}
    assert fresh(dead).status == TaskResultStatus.READY and dead.started_at is None
    assert fresh(alive).status == TaskResultStatus.RUNNING


def test_worker_without_heartbeat_is_dead_once_its_task_is_older_than_the_timeout():
    recent = running("ghost-0", started_ago=5)
    old = running("ghost-1", started_ago=2 * TIMEOUT)
    got = recover_dead("sweeper-0", timeout=TIMEOUT)
    assert got == {"requeued": 1, "failed": 0, "workers": ["ghost-1"]}
    assert fresh(recent).status == TaskResultStatus.RUNNING
    assert fresh(old).status == TaskResultStatus.READY


def test_sweeper_leaves_its_own_tasks_alone():
    heartbeat("me-0", age=10 * TIMEOUT)
    row = running("me-0", started_ago=10 * TIMEOUT)
    assert recover_dead("me-0", timeout=TIMEOUT)["requeued"] == 0
    assert fresh(row).status == TaskResultStatus.RUNNING


def test_max_attempts_still_fails_the_task():
    heartbeat("dead-0", age=2 * TIMEOUT)
    row = running(*["other-0"] * (MAX_ATTEMPTS - 1), "dead-0", started_ago=2 * TIMEOUT)
    assert recover_dead("sweeper-0", timeout=TIMEOUT) == {"requeued": 0, "failed": 1, "workers": ["dead-0"]}
    row = fresh(row)
    assert row.status == TaskResultStatus.FAILED and row.finished_at is not None
    assert row.exception_class_path == "unpooled.service.workers.WorkerDied"
    assert f"died {MAX_ATTEMPTS} times" in row.traceback and "dead-0" in row.traceback
    assert recover_dead("sweeper-0", timeout=TIMEOUT)["failed"] == 0


def test_release_is_conditional():
    """What keeps concurrent sweeps from requeuing a task twice: each release is one conditional UPDATE."""
    row = running("dead-0", started_ago=2 * TIMEOUT)
    seen = (row.pk, list(row.worker_ids), row.started_at)
    assert _release(*seen) == "requeued"
    assert _release(*seen) is None  # a second sweep that read the same row: nothing left to do
    fresh(row).claim("live-0")  # claimed again: the stale snapshot must not requeue the new run
    assert _release(*seen) is None and fresh(row).status == TaskResultStatus.RUNNING
    # the task's worker beat between the sweep's read and its update: left alone
    heartbeat("live-0", age=0)
    cutoff = timezone.now() - timedelta(seconds=TIMEOUT)
    assert _release(row.pk, row.worker_ids, row.started_at, dead_since=cutoff) is None
    assert fresh(row).status == TaskResultStatus.RUNNING


def test_same_id_requeue_on_start_is_kept():
    heartbeat("h-0", age=1)  # fresh: the previous holder of this id was alive a second ago
    row = running("h-0", started_ago=1)
    assert requeue_orphaned("h-0") == {"requeued": 1, "failed": 0}
    assert fresh(row).status == TaskResultStatus.READY


def test_beat_records_the_database_time_and_old_heartbeats_are_forgotten():
    t0 = beat("w-0", first=True)
    hb = WorkerHeartbeat.objects.get(worker_id="w-0")
    assert hb.last_seen == t0 and hb.started_at is not None and hb.pid is not None and hb.host
    assert abs((t0 - timezone.now()).total_seconds()) < 5
    time.sleep(0.01)
    assert beat("w-0") > t0
    heartbeat("gone-0", age=3 * 86400)
    assert forget_dead() == 1
    assert set(WorkerHeartbeat.objects.values_list("worker_id", flat=True)) == {"w-0"}


def test_worker_rows_for_the_console():
    heartbeat("alive-0", age=1)
    heartbeat("dead-0", age=2 * TIMEOUT)
    running("alive-0")
    rows = {r["worker_id"]: r for r in worker_rows(timeout=TIMEOUT)}
    assert rows["alive-0"]["alive"] and rows["alive-0"]["running"] == 1
    assert not rows["dead-0"]["alive"] and rows["dead-0"]["running"] == 0


def test_console_lists_workers_with_their_heartbeat(client):
    from django.contrib.auth.models import User
    from django.urls import reverse

    from unpooled.service.accounts.models import Profile, Role

    url = reverse("organiser:home")
    User.objects.create_user("olga", password="pw-olga-123")
    Profile.objects.create(user=User.objects.get(username="olga"), role=Role.ORGANISER)
    assert client.login(username="olga", password="pw-olga-123")
    assert "No task worker has recorded a heartbeat" in client.get(url).content.decode()
    heartbeat("alive-0", age=1)
    heartbeat("dead-0", age=3600)
    html = client.get(url).content.decode()
    assert 'id="workers"' in html and "alive-0" in html and "dead-0" in html
    assert html.count(">alive<") == 1 and "dead, its tasks are requeued" in html


@pytest.mark.django_db(transaction=True)  # the heartbeat thread has its own connection
def test_heartbeat_thread_keeps_beating_and_sweeps():
    live = Liveness("beating-0", timeout=3.0, interval=0.05)
    live.start()
    try:
        first = WorkerHeartbeat.objects.get(worker_id="beating-0").last_seen
        heartbeat("dead-0", age=10)
        row = running("dead-0", started_ago=10)  # dies after the start-up sweep: the thread's sweep finds it
        until(lambda: fresh(row).status != TaskResultStatus.RUNNING, "the heartbeat thread's sweep", every=0.05)
        assert row.status == TaskResultStatus.READY
        assert WorkerHeartbeat.objects.get(worker_id="beating-0").last_seen > first
        assert live.sweeps >= 2
    finally:
        live.stop()
    assert not WorkerHeartbeat.objects.filter(worker_id="beating-0").exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_sweeps_do_not_double_requeue():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent sweeps from several connections: PostgreSQL (DATABASE_URL=postgres://...)")
    n_requeue, n_fail, n_sweepers = 30, 10, 6
    for i in range(n_requeue):
        heartbeat(f"dead-{i % 3}", age=2 * TIMEOUT)
        running(f"dead-{i % 3}", started_ago=2 * TIMEOUT, x=i)
    for i in range(n_fail):
        running(*["old-0"] * (MAX_ATTEMPTS - 1), "dead-0", started_ago=2 * TIMEOUT, x=100 + i)
    got, errors = at_once(n_sweepers, lambda i: [recover_dead(f"sweeper-{i}", timeout=TIMEOUT) for _ in range(3)])
    results = [r for rs in got for r in rs]
    assert not errors, errors
    assert sum(r["requeued"] for r in results) == n_requeue
    assert sum(r["failed"] for r in results) == n_fail
    statuses = list(DBTaskResult.objects.values_list("status", flat=True))
    assert statuses.count(TaskResultStatus.READY) == n_requeue and statuses.count(TaskResultStatus.FAILED) == n_fail
