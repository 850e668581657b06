"""Task workers that survive crashes.

django-tasks-db leaves a task RUNNING forever when its worker dies mid-task.  unpooled recovers
such tasks in two ways:

* **Same id.**  Every worker has a stable id -- ``<host>-<slot>`` -- and a worker starting under an
  id first requeues the tasks still RUNNING under that id (:func:`requeue_orphaned`): only one
  process holds an id at a time, so their previous holder is dead.
* **Heartbeats.**  A machine that died for good never starts its ids again, so every worker also
  records a heartbeat (:class:`~unpooled.service.organiser.models.WorkerHeartbeat`: id, last seen,
  by the database's clock) every ``UNPOOLED_WORKER_HEARTBEAT`` seconds (30) from a background
  thread -- also while it runs a long task -- and, as often, sweeps (:func:`recover_dead`): a
  RUNNING task whose last worker's heartbeat is older than ``UNPOOLED_WORKER_TIMEOUT`` seconds
  (300), or whose last worker has no heartbeat and which started longer ago than that, belonged
  to a dead worker and is requeued.  Any number of workers may sweep at once, on PostgreSQL or
  SQLite: each task is released by one conditional UPDATE (still RUNNING, same start, its worker
  still without a fresh heartbeat), so it is requeued once.  A worker that stops cleanly deletes
  its heartbeat.

A task whose workers died ``MAX_ATTEMPTS`` times is marked failed instead, so a task that kills
its worker cannot loop forever.  Tasks must therefore be idempotent (ingestion is: the same file
resolves to the same submission) -- all the more as a worker cut off from the database for longer
than the timeout (a network partition, a suspended machine) is taken for dead, and its task may
then run twice.  The timeout must be the same on every machine and several heartbeat intervals
long, and every worker of a database must be an ``unpooled worker`` (a bare ``db_worker`` writes no
heartbeat: its tasks would be requeued once they run longer than the timeout).

**A database that stops answering** (PostgreSQL restarted, a network cut, SQLite locked past its
timeout, a full disk) does not end the worker (:func:`run_worker`): while it looks for work it waits
for the database with a back-off; a task interrupted by a database error
(:func:`transient_database_error`) is not recorded as failed but requeued once the database answers
again (at most :data:`MAX_DB_RETRIES` claims, then it fails with that error), and runs again from the
start -- the stages being idempotent, it resumes.  A worker told to stop (SIGTERM twice) in the middle
of a task requeues it rather than marking it failed.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from datetime import datetime, timedelta

from django.db import IntegrityError, InterfaceError, OperationalError, close_old_connections, connections, transaction
from django.db.models import Exists
from django.db.models.functions import Now
from django.utils import timezone

MAX_ATTEMPTS = 3
#: seconds between heartbeats and sweeps (``UNPOOLED_WORKER_HEARTBEAT``; at most a third of the timeout)
DEFAULT_HEARTBEAT = 30.0
#: heartbeats of dead workers are shown (organiser console) this long, then deleted
FORGET_AFTER = timedelta(days=1)
#: seconds after which an unused upload file is left over from a killed web process (UNPOOLED_UPLOAD_ORPHAN_SECONDS)
DEFAULT_UPLOAD_ORPHAN = 3600.0
#: a task interrupted by database errors is requeued until it has been claimed this many times, then failed
MAX_DB_RETRIES = 10
#: longest wait (seconds) between attempts to reach a database that does not answer (from 0.5, doubling)
DB_WAIT_MAX = 30.0

logger = logging.getLogger(__name__)

# what the organiser console reads of the workers lives in the organiser app (workers sit above it)
from unpooled.service.organiser.heartbeats import (  # noqa: E402,F401 - re-exported
    DEFAULT_TIMEOUT, _seconds, worker_rows, worker_timeout,
)


def worker_id(slot: int = 0, host: str | None = None) -> str:
    return f"{host or socket.gethostname()}-{slot}"


def heartbeat_interval(timeout: float | None = None) -> float:
    """Seconds between heartbeats (``UNPOOLED_WORKER_HEARTBEAT``), at most a third of the timeout."""
    timeout = worker_timeout() if timeout is None else timeout
    return min(_seconds("UNPOOLED_WORKER_HEARTBEAT", "WORKER_HEARTBEAT", DEFAULT_HEARTBEAT), timeout / 3)


def beat(wid: str, *, first: bool = False) -> datetime:
    """Record that worker ``wid`` is alive; return the database's current time (its ``last_seen``).

    ``first``: the worker process starts (also records host, pid and start time)."""
    from unpooled.service.organiser.models import WorkerHeartbeat

    rows = WorkerHeartbeat.objects.filter(worker_id=wid)
    fields = {"last_seen": Now()}
    if first:
        fields.update(host=socket.gethostname(), pid=os.getpid(), started_at=Now())
    if not rows.update(**fields):
        try:
            with transaction.atomic():
                WorkerHeartbeat.objects.create(worker_id=wid, **{"host": socket.gethostname(), "pid": os.getpid(),
                                                                 "started_at": Now(), **fields})
        except IntegrityError:  # created meanwhile (cannot happen with unique ids; harmless)
            rows.update(**fields)
    return rows.values_list("last_seen", flat=True).get()


def forget(wid: str) -> None:
    """A worker stops cleanly: delete its heartbeat."""
    from unpooled.service.organiser.models import WorkerHeartbeat

    WorkerHeartbeat.objects.filter(worker_id=wid).delete()


def _release(pk, worker_ids: list[str], started_at: datetime | None, *, dead_since: datetime | None = None) -> str | None:
    """Requeue (or, past MAX_ATTEMPTS, fail) RUNNING task ``pk`` as read (``worker_ids``, ``started_at``).

    One conditional UPDATE: nothing happens when the task changed meanwhile (finished, or released
    by another sweep and perhaps claimed again: a claim sets a new ``started_at``) or, with
    ``dead_since``, when its last worker's heartbeat is no longer older than ``dead_since``.
    Returns ``"requeued"``, ``"failed"`` or ``None`` (left alone)."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from unpooled.service.organiser.models import WorkerHeartbeat

    rows = DBTaskResult.objects.filter(pk=pk, status=TaskResultStatus.RUNNING, started_at=started_at)
    if dead_since is not None and worker_ids:
        rows = rows.filter(~Exists(WorkerHeartbeat.objects.filter(worker_id=worker_ids[-1], last_seen__gte=dead_since)))
    if len(worker_ids) >= MAX_ATTEMPTS:
        done = rows.update(
            status=TaskResultStatus.FAILED, finished_at=timezone.now(),
            exception_class_path="unpooled.service.workers.WorkerDied",
            traceback=f"the worker running this task died {len(worker_ids)} times ({', '.join(worker_ids)})",
        )
        return "failed" if done else None
    return "requeued" if rows.update(status=TaskResultStatus.READY, started_at=None) else None


def _running() -> list[tuple]:
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    return list(DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING).order_by()
                .values_list("pk", "worker_ids", "started_at"))


def requeue_orphaned(wid: str) -> dict[str, int]:
    """Requeue (or, past MAX_ATTEMPTS, fail) the tasks left RUNNING by a dead worker ``wid``."""
    out = {"requeued": 0, "failed": 0}
    for pk, wids, started in _running():
        if wids and wids[-1] == wid:
            got = _release(pk, wids, started)
            if got:
                out[got] += 1
    return out


def recover_dead(own_id: str | None = None, *, timeout: float | None = None, now: datetime | None = None) -> dict:
    """Requeue (or, past MAX_ATTEMPTS, fail) the RUNNING tasks of dead workers.

    Dead: the task's last worker has a heartbeat older than ``timeout`` seconds before ``now`` (the
    database's time, as :func:`beat` returns it; default: this machine's), or none and the task
    started longer ago than that.  ``own_id``: the sweeping worker, whose tasks are left alone.
    Safe to run in many workers at once.  Returns ``{"requeued": n, "failed": n, "workers": [ids]}``."""
    from unpooled.service.organiser.models import WorkerHeartbeat

    timeout = worker_timeout() if timeout is None else timeout
    cutoff = (now or timezone.now()) - timedelta(seconds=timeout)
    out = {"requeued": 0, "failed": 0, "workers": []}
    running = _running()
    last = {wids[-1] for _, wids, _ in running if wids}
    seen = dict(WorkerHeartbeat.objects.filter(worker_id__in=last).values_list("worker_id", "last_seen"))
    for pk, wids, started in running:
        wid = wids[-1] if wids else None
        if wid is not None and wid == own_id:
            continue
        dead = seen[wid] < cutoff if wid in seen else (started is None or started < cutoff)
        if not dead:
            continue
        got = _release(pk, wids, started, dead_since=cutoff)
        if got:
            out[got] += 1
            if wid not in out["workers"]:
                out["workers"].append(wid)
    return out


def forget_dead(*, now: datetime | None = None) -> int:
    """Delete heartbeats older than FORGET_AFTER (workers of machines gone for good)."""
    from unpooled.service.organiser.models import WorkerHeartbeat

    return WorkerHeartbeat.objects.filter(last_seen__lt=(now or timezone.now()) - FORGET_AFTER).delete()[0]


def orphan_upload_seconds() -> float:
    """Seconds after its last write when an upload file nobody uses is left over (``UNPOOLED_UPLOAD_ORPHAN_SECONDS``,
    3600: far longer than a request may last, gunicorn's timeout being 600 s)."""
    return _seconds("UNPOOLED_UPLOAD_ORPHAN_SECONDS", "UPLOAD_ORPHAN_SECONDS", DEFAULT_UPLOAD_ORPHAN)


def sweep_uploads(*, older_than: float | None = None, now: float | None = None) -> list:
    """Delete what killed web processes left in the upload folders; returns the paths deleted.

    Left over: a request body that was being received (``settings.FILE_UPLOAD_TEMP_DIR``) or an upload copy
    (``settings.UPLOAD_DIR/*.upload``) that no queued or running ingestion refers to, not written to for
    ``older_than`` seconds (:func:`orphan_upload_seconds`).  A copy is written and then enqueued in the same
    request, and a body is written to as it arrives, so neither is ever that old while in use."""
    from pathlib import Path

    from django.conf import settings
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from unpooled.service.submissions.tasks import ingest_upload

    cutoff = (now if now is not None else time.time()) - (orphan_upload_seconds() if older_than is None else older_than)
    wanted = set()
    for ak in (DBTaskResult.objects.filter(status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING],
                                           task_path=ingest_upload.module_path).values_list("args_kwargs", flat=True)):
        args = (ak or {}).get("args") or []
        if args:
            wanted.add(Path(str(args[0])).name)
    folders = [(Path(settings.UPLOAD_DIR), "*.upload")]
    if getattr(settings, "FILE_UPLOAD_TEMP_DIR", None):
        folders.append((Path(settings.FILE_UPLOAD_TEMP_DIR), "*"))
    gone = []
    for folder, pattern in folders:
        try:
            paths = list(folder.glob(pattern))
        except OSError:
            continue
        for p in paths:
            try:
                if p.is_file() and p.name not in wanted and p.stat().st_mtime < cutoff:
                    p.unlink()
                    gone.append(p)
            except OSError:  # gone meanwhile, or not ours to delete
                continue
    return gone


def _report(wid: str, got: dict, why: str) -> None:
    if got["requeued"] or got["failed"]:
        print(f"worker {wid}: requeued {got['requeued']} task(s) left running by {why}; "
              f"failed {got['failed']} that crashed workers too often", file=sys.stderr, flush=True)


class Liveness:
    """A worker's heartbeat and its share of recovering dead workers' tasks.

    :meth:`start` (before the worker claims anything): requeue this id's own orphans, record the
    first heartbeat, sweep once, then beat and sweep every ``interval`` seconds in a daemon thread
    (so a long task does not silence the worker).  A sweep also deletes the upload files killed web
    processes left behind (:func:`sweep_uploads`).  :meth:`stop`: end the thread, delete the heartbeat.
    """

    def __init__(self, wid: str, *, timeout: float | None = None, interval: float | None = None) -> None:
        self.wid = wid
        self.timeout = worker_timeout() if timeout is None else timeout
        self.interval = heartbeat_interval(self.timeout) if interval is None else interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sweeps = 0

    def start(self) -> None:
        _report(self.wid, requeue_orphaned(self.wid), "a crashed worker")
        self.sweep(beat(self.wid, first=True))
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.wid}", daemon=True)
        self._thread.start()

    def sweep(self, now: datetime) -> dict:
        got = recover_dead(self.wid, timeout=self.timeout, now=now)
        self.sweeps += 1
        if got["workers"]:
            _report(self.wid, got, f"dead worker(s) {', '.join(map(str, got['workers']))}")
        if self.sweeps % 100 == 1:
            forget_dead(now=now)
        gone = sweep_uploads()
        if gone:
            print(f"worker {self.wid}: deleted {len(gone)} upload file(s) left by killed web processes: "
                  f"{', '.join(p.name for p in gone[:5])}{' ...' if len(gone) > 5 else ''}", file=sys.stderr, flush=True)
        return got

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    close_old_connections()
                    now = beat(self.wid)
                    self.sweep(now)
                except Exception:  # noqa: BLE001 - a locked or unreachable database: try again next time
                    logger.warning("worker %s: heartbeat failed", self.wid, exc_info=True)
        finally:
            connections.close_all()  # this thread's connections

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        try:
            forget(self.wid)
        except Exception:  # noqa: BLE001 - the heartbeat then just goes stale
            logger.warning("worker %s: could not delete its heartbeat", self.wid, exc_info=True)


class WorkerDied(Exception):
    """Recorded on a task whose workers died too often."""


# ---------------------------------------------------------------------------- a worker that outlives its database

def transient_database_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) is a database error that can pass: a lost or refused
    connection, a server shutting down, a lock or serialization conflict, a full disk
    (Django's ``OperationalError`` and ``InterfaceError``)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, (OperationalError, InterfaceError)):
            return True
        exc, seen = exc.__cause__, seen + 1
    return False


def _close_connections() -> None:
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is dropped anyway
            conn.connection = None


def database_answers() -> bool:
    """One ``SELECT 1`` on a fresh connection to the default database."""
    from django.db import connection

    _close_connections()
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return True
    except (OperationalError, InterfaceError):
        _close_connections()
        return False


def wait_for_database(wid: str, *, go_on=lambda: True, first: BaseException | None = None) -> bool:
    """Block until the default database answers: a try after 0.5 s, then doubling up to :data:`DB_WAIT_MAX`.

    Says on stderr that it waits (and why) and when the database is back.  Returns False when ``go_on()``
    turned false (the worker is stopping) before that."""
    delay, announced = 0.5, False
    while go_on():
        if database_answers():
            if announced:
                print(f"worker {wid}: the database answers again", file=sys.stderr, flush=True)
            return True
        if not announced:
            why = f" ({type(first).__name__}: {str(first).strip().splitlines()[0] if str(first).strip() else ''})" \
                if first is not None else ""
            print(f"worker {wid}: the database does not answer{why}; waiting for it", file=sys.stderr, flush=True)
            announced = True
        end = time.monotonic() + delay
        while go_on() and time.monotonic() < end:
            time.sleep(min(0.2, delay))
        delay = min(DB_WAIT_MAX, delay * 2)
    return False


def requeue_interrupted(pk, started_at) -> bool:
    """Put a task this worker was running back in the queue (one conditional UPDATE: still RUNNING, same
    start); True when it was requeued."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    return bool(DBTaskResult.objects.filter(pk=pk, status=TaskResultStatus.RUNNING, started_at=started_at)
                .update(status=TaskResultStatus.READY, started_at=None))


def _worker_class():
    from django_tasks_db.compat import TaskContext, task_finished, task_started
    from django_tasks_db.management.commands.db_worker import Worker

    class ResilientWorker(Worker):
        """django-tasks-db's worker loop, which waits out database outages instead of dying, and requeues the
        task an outage (or a forced stop) interrupted instead of recording it as failed."""

        def run(self) -> None:
            while True:
                try:
                    return super().run()
                except (OperationalError, InterfaceError) as exc:  # claiming a task: the database went away
                    if not self.running or not wait_for_database(self.worker_id, go_on=lambda: self.running,
                                                                 first=exc):
                        return None

        def run_task(self, db_task_result) -> None:
            pk, started = db_task_result.pk, db_task_result.started_at
            try:
                self.running_task = True
                try:
                    task = db_task_result.task
                    task_result = db_task_result.task_result
                    backend_type = task.get_backend()
                    task_started.send(sender=backend_type, task_result=task_result)
                    args, kwargs = task_result.args, task_result.kwargs
                    value = task.call(TaskContext(task_result=task_result), *args, **kwargs) if task.takes_context \
                        else task.call(*args, **kwargs)
                except (KeyboardInterrupt, SystemExit) as exc:  # stopped by force in the middle: run it again later
                    self._requeue(pk, started, exc, "the worker was stopped during it")
                    raise
                except BaseException as exc:  # noqa: BLE001 - recorded on the task, as django-tasks-db does
                    if transient_database_error(exc) and len(db_task_result.worker_ids) < MAX_DB_RETRIES:
                        self._requeue(pk, started, exc, "the database failed during it")
                        return
                    self._record(db_task_result, "set_failed", exc)
                else:
                    try:
                        self._record(db_task_result, "set_successful", value)
                    except Exception as exc:  # noqa: BLE001 - e.g. a return value JSON cannot hold: the task failed
                        self._record(db_task_result, "set_failed", exc)
            finally:
                self.running_task = False
                self._run_tasks += 1

        def _requeue(self, pk, started, exc, why: str) -> None:
            """Put the interrupted task back in the queue once the database answers.  Stopping meanwhile (or
            stopped by force, with the database gone) leaves it RUNNING under this id: the next start of this
            id requeues it."""
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(f"worker {self.worker_id}: task {pk}: {why} ({type(exc).__name__}: {msg}); requeuing it",
                  file=sys.stderr, flush=True)
            forced = isinstance(exc, (KeyboardInterrupt, SystemExit))
            while forced or wait_for_database(self.worker_id, go_on=lambda: self.running, first=exc):
                try:
                    if not requeue_interrupted(pk, started):
                        logger.warning("worker %s: task %s was no longer running under it", self.worker_id, pk)
                    return
                except (OperationalError, InterfaceError):
                    if forced:
                        return

        def _record(self, db_task_result, how: str, value) -> None:
            """Record the outcome; a database that fails meanwhile is waited for (the outcome is not lost)."""
            while True:
                try:
                    getattr(db_task_result, how)(value)
                    break
                except (OperationalError, InterfaceError) as exc:
                    if not wait_for_database(self.worker_id, go_on=lambda: self.running, first=exc):
                        return  # stopping: the task stays RUNNING under this id; the next start requeues it
            try:
                task_finished.send(sender=type(db_task_result.task.get_backend()),
                                   task_result=db_task_result.task_result)
            except Exception:  # noqa: BLE001 - as django-tasks-db: a task that cannot be imported any more
                logger.exception("Task id=%s failed unexpectedly", db_task_result.id)

    return ResilientWorker


def run_worker(wid: str, *, batch: bool = False, interval: float = 1.0, queue: str = "default") -> None:
    """Run the task loop under id ``wid`` until stopped (SIGTERM/SIGINT: after the current task) or, with
    ``batch``, until the queue is empty; database outages are waited out (see the module's docstring)."""
    from django_tasks_db.compat import DEFAULT_TASK_BACKEND_ALIAS, TASKS_LOGGER

    for name in (TASKS_LOGGER, "django_tasks_db"):  # what ``manage.py db_worker`` prints: each task's start and end
        log = logging.getLogger(name)
        log.setLevel(logging.INFO)
        if not log.hasHandlers():
            log.addHandler(logging.StreamHandler(sys.stdout))
    worker = _worker_class()(queue_names=[queue], interval=interval, batch=batch,
                             backend_name=DEFAULT_TASK_BACKEND_ALIAS, startup_delay=False, max_tasks=None,
                             worker_id=wid, excluded_queue_names=[])
    worker.configure_signals()
    worker.run()
