"""A worker killed mid-task: its task is requeued and completes once -- by the next worker with the
same id, or (the machine never comes back) by any other worker once the dead one's heartbeat is stale.

Real processes and a real database (a SQLite file; a fresh PostgreSQL database when one answers):
the CLI loads a corpus, a task is enqueued, ``unpooled worker`` is killed with SIGKILL while
ingesting, a new ``unpooled worker`` with the same slot, or with another slot and a short
heartbeat timeout, finishes the job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

from ..faults.harness import until

PG_URL = os.environ.get("UNPOOLED_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")

PY_STATUS = (
    "from unpooled.service.config.bootstrap import setup_django; setup_django(migrate=False)\n"
    "from django_tasks_db.models import DBTaskResult\n"
    "from unpooled.service.submissions.models import Submission\n"
    "import json; r = DBTaskResult.objects.get()\n"
    "print(json.dumps({'status': r.status, 'workers': r.worker_ids, 'submissions': Submission.objects.count(),"
    " 'counts': [s.counts for s in Submission.objects.all()], 'return': r.return_value}))\n"
)


def _pg_database():
    try:
        import psycopg

        url = PG_URL.replace("postgres://", "postgresql://", 1)
        conn = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except Exception:  # noqa: BLE001 - any failure means: no PostgreSQL here
        return None
    name = f"unpooled_crash_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    return conn, name, url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request, tmp_path):
    e = dict(os.environ, UNPOOLED_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="unpooled.service.config.settings")
    e.pop("DATABASE_URL", None)
    if request.param == "sqlite":
        yield e
        return
    pg = _pg_database()
    if pg is None:
        pytest.skip(f"PostgreSQL does not answer at {PG_URL}")
    conn, name, url = pg
    e["DATABASE_URL"] = url
    yield e
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


def cli(env, *args, **kw):
    return subprocess.run([sys.executable, "-m", "unpooled.cli.main", *map(str, args)], env=env,
                          capture_output=True, text=True, check=True, **kw)


def status(env) -> dict:
    out = subprocess.run([sys.executable, "-c", PY_STATUS], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def task_state(env) -> str | None:
    """The task's status read straight from the database (milliseconds, where ``status`` starts Django)."""
    sql = "SELECT status FROM django_tasks_database_dbtaskresult"
    if "DATABASE_URL" in env:
        import psycopg

        with psycopg.connect(env["DATABASE_URL"].replace("postgres://", "postgresql://", 1)) as conn:
            row = conn.execute(sql).fetchone()
    else:
        import sqlite3

        conn = sqlite3.connect(f"file:{env['UNPOOLED_DATA_DIR']}/unpooled.sqlite3?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute(sql).fetchone()
        finally:
            conn.close()
    return row[0] if row else None


def wait_for_state(env, states, what: str) -> dict:
    """Poll the task's status straight from the database until it is one of ``states``; then the full status.
    The bound only ends a hung run (no test here asserts how long anything takes)."""
    until(lambda: task_state(env) in states, what)
    return status(env)


def kill_worker_mid_task(env, tmp_path, slot: int) -> int:
    """Enqueue an ingestion, start ``unpooled worker --slot SLOT``, SIGKILL it while it ingests; the line count."""
    from unpooled.bench.ingest import prepare

    kb, corpus, lines = prepare(tmp_path, 150_000)
    cli(env, "corpus", "load", corpus, "--format", "jsonl", "--name", "crash", "--json")
    enqueue = (
        "from unpooled.service.config.bootstrap import setup_django; setup_django(migrate=False)\n"
        "from unpooled.service.submissions.tasks import ingest_upload\n"
        f"ingest_upload.enqueue({str(kb)!r}.replace('synthetic.kb', 'upload.kb'), 'crash', 'team', 'run', 'tac', 'x.kb', "
        "start=False)\n"
    )
    (tmp_path / "upload.kb").write_bytes(kb.read_bytes())
    subprocess.run([sys.executable, "-c", enqueue], env=env, check=True)

    first = subprocess.Popen([sys.executable, "-m", "unpooled.cli.main", "worker", "--slot", str(slot)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # killed as soon as it has claimed the task: the ingestion of 150,000 lines, committed in one transaction at
    # its end, takes seconds, so the kill lands inside it however loaded the machine is
    until(lambda: task_state(env) == "RUNNING" or first.poll() is not None, "the worker to claim the task",
          every=0.02)
    assert first.poll() is None, first.communicate()[0][-2000:]
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    st = status(env)
    assert st["status"] == "RUNNING" and st["submissions"] == 0, st  # orphaned, nothing committed
    return lines


def assert_ingested_once(st: dict, lines: int, tmp_path) -> None:
    assert st["status"] == "SUCCESSFUL", st
    assert st["submissions"] == 1 and st["return"]["ok"] is True
    assert st["counts"][0]["lines"] == lines
    assert not (tmp_path / "upload.kb").exists()


def test_killed_worker_task_is_retried(env, tmp_path):
    lines = kill_worker_mid_task(env, tmp_path, 7)
    second = subprocess.run([sys.executable, "-m", "unpooled.cli.main", "worker", "--slot", "7", "--batch"],
                            env=env, capture_output=True, text=True, timeout=900)
    assert "requeued 1 task(s)" in second.stderr, second.stderr[-2000:]
    st = status(env)
    assert_ingested_once(st, lines, tmp_path)
    assert len(st["workers"]) == 2 and st["workers"][0] == st["workers"][1]


def test_dead_machine_task_is_recovered_by_another_worker(env, tmp_path):
    """The killed worker's id never starts again: a worker with another id takes the task over once the
    dead worker's heartbeat is older than the timeout (3 s here; 300 s by default)."""
    lines = kill_worker_mid_task(env, tmp_path, 7)
    other = subprocess.Popen([sys.executable, "-m", "unpooled.cli.main", "worker", "--slot", "8",
                              "--timeout", "3", "--heartbeat", "0.5"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        st = wait_for_state(env, ("SUCCESSFUL", "FAILED"), "the other worker to finish the task")
    finally:
        other.send_signal(signal.SIGTERM)  # a clean stop
        _, err = other.communicate(timeout=60)
    assert other.returncode == 0, err[-2000:]
    assert "requeued 1 task(s) left running by dead worker(s)" in err and st["workers"][0] in err, err[-2000:]
    assert_ingested_once(st, lines, tmp_path)
    assert len(st["workers"]) == 2 and st["workers"][0].endswith("-7") and st["workers"][1].endswith("-8")
    hb = subprocess.run([sys.executable, "-c", "from unpooled.service.config.bootstrap import setup_django; setup_django(migrate=False)\n"
                         "from unpooled.service.organiser.models import WorkerHeartbeat\n"
                         "print(sorted(WorkerHeartbeat.objects.values_list('worker_id', flat=True)))"],
                        env=env, capture_output=True, text=True, check=True).stdout
    assert st["workers"][1] not in hb  # the clean stop forgot the live worker; the dead one stays until forgotten
