"""Task workers that survive crashes.

django-tasks-db leaves a task RUNNING forever when its worker dies mid-task.
unpooled gives every worker a stable id -- ``<host>-<slot>`` -- and a worker
starting under an id first requeues the tasks still RUNNING under that id:
only one process holds an id at a time, so their previous holder is dead.
A task whose workers died ``MAX_ATTEMPTS`` times is marked failed instead, so
a task that kills its worker cannot loop forever.  Tasks must therefore be
idempotent (ingestion is: the same file resolves to the same submission).
"""

from __future__ import annotations

import socket

from django.db import transaction
from django.utils import timezone

MAX_ATTEMPTS = 3


def worker_id(slot: int = 0, host: str | None = None) -> str:
    return f"{host or socket.gethostname()}-{slot}"


def requeue_orphaned(wid: str) -> dict[str, int]:
    """Requeue (or, past MAX_ATTEMPTS, fail) the tasks left RUNNING by a dead worker ``wid``."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    out = {"requeued": 0, "failed": 0}
    with transaction.atomic():
        for r in DBTaskResult.objects.select_for_update().filter(status=TaskResultStatus.RUNNING):
            if not r.worker_ids or r.worker_ids[-1] != wid:
                continue
            if len(r.worker_ids) >= MAX_ATTEMPTS:
                r.status = TaskResultStatus.FAILED
                r.finished_at = timezone.now()
                r.exception_class_path = "unpooled.service.workers.WorkerDied"
                r.traceback = f"the worker running this task died {len(r.worker_ids)} times ({', '.join(r.worker_ids)})"
                r.save(update_fields=["status", "finished_at", "exception_class_path", "traceback"])
                out["failed"] += 1
            else:
                r.status = TaskResultStatus.READY
                r.started_at = None
                r.save(update_fields=["status", "started_at"])
                out["requeued"] += 1
    return out


class WorkerDied(Exception):
    """Recorded on a task whose workers died too often."""
