"""The task workers' heartbeats as the organiser console shows them, and the timeout that declares one dead.

The workers themselves (:mod:`unpooled.service.workers`) write the heartbeats and requeue a dead worker's
tasks; they read the timeout from here.
"""

from __future__ import annotations

import os
from datetime import datetime

from django.utils import timezone

#: a worker whose heartbeat is older than this (seconds) is dead (``UNPOOLED_WORKER_TIMEOUT``)
DEFAULT_TIMEOUT = 300.0


def _seconds(env: str, setting: str, default: float) -> float:
    from django.conf import settings

    raw = os.environ.get(env)
    value = float(raw) if raw else float(getattr(settings, setting, default))
    if not value > 0:
        raise ValueError(f"{env} must be a positive number of seconds, not {value!r}")
    return value


def worker_timeout() -> float:
    """Seconds without a heartbeat after which a worker is dead (``UNPOOLED_WORKER_TIMEOUT``, setting ``WORKER_TIMEOUT``)."""
    return _seconds("UNPOOLED_WORKER_TIMEOUT", "WORKER_TIMEOUT", DEFAULT_TIMEOUT)


def worker_rows(*, timeout: float | None = None, now: datetime | None = None) -> list[dict]:
    """The workers with a heartbeat, for the organiser console: id, host, pid, started, last seen,
    seconds since, alive (heartbeat younger than the timeout), tasks running under it."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from .models import WorkerHeartbeat

    if timeout is None:
        try:
            timeout = worker_timeout()
        except ValueError:  # misconfigured: the workers refuse to start; the console still shows them
            timeout = DEFAULT_TIMEOUT
    now = now or timezone.now()
    running: dict[str, int] = {}
    for wids in DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING).values_list("worker_ids", flat=True):
        if wids:
            running[wids[-1]] = running.get(wids[-1], 0) + 1
    rows = []
    for hb in WorkerHeartbeat.objects.order_by("worker_id"):
        age = (now - hb.last_seen).total_seconds()
        rows.append({"worker_id": hb.worker_id, "host": hb.host, "pid": hb.pid, "started_at": hb.started_at,
                     "last_seen": hb.last_seen, "age": max(age, 0.0), "alive": age <= timeout,
                     "running": running.get(hb.worker_id, 0)})
    return rows
