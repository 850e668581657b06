"""PostgreSQL stopped and started again in the middle of an evaluation: the task worker neither dies nor fails the
evaluation -- it waits for the database, requeues the task the outage interrupted, and the evaluation finishes
with nothing duplicated; the web server answers again without errors once the database is back.

A throw-away cluster of the test's own (``initdb``/``pg_ctl`` on a free port and a temporary folder, run as the
``postgres`` user when the test runs as root), never the shared server.
"""

from __future__ import annotations

import pytest

from .harness import ThrowawayPostgres, evaluation_invariants, one, service_env, start_evaluation, task_rows

pytestmark = pytest.mark.faults


@pytest.fixture
def postgres():
    pg = ThrowawayPostgres()
    why = pg.unavailable()
    if why:
        pg.close()
        pytest.skip(f"no throw-away PostgreSQL cluster: {why}")
    try:
        pg.init()
        pg.start()
        import psycopg

        with psycopg.connect(pg.url().replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
            conn.execute("CREATE DATABASE unpooled")
        yield pg
    finally:
        pg.close()


def test_postgres_restart_mid_evaluation(postgres, serve, shared_data, tmp_path):
    env = service_env(tmp_path / "data", postgres.url("unpooled"))
    sub = start_evaluation(env, shared_data, tmp_path / "work")
    s = serve(env)
    s.wait_up()
    status = lambda: one(env, "SELECT status FROM submissions_submission WHERE id = ?", (sub,))  # noqa: E731
    answers = lambda: one(env, "SELECT COUNT(*) FROM annotation_answer")  # noqa: E731
    s.until(lambda: status() == "annotating" and answers() >= 50, "the annotation to be under way")
    worker, web = s.worker_pid(), s.web_pid()
    postgres.stop("fast")  # ends every connection ("terminating connection due to administrator command")
    s.until(lambda: "the database failed during it" in s.log() or "the database does not answer" in s.log(),
            "the worker to notice the outage")
    assert s.get("/")[0] is not None  # the web server is up (it answers 500 while it has no database)
    postgres.start()
    s.until(lambda: status() in ("published", "failed"), "the evaluation to finish")
    assert s.worker_pid() == worker and s.web_pid() == web, s.tail()  # reconnected: nobody died or was restarted
    counts = evaluation_invariants(env, sub)
    tasks = task_rows(env, "advance_submission")
    assert [t["status"] for t in tasks] == ["SUCCESSFUL"] and len(tasks[0]["workers"]) == 2, tasks  # run again once
    log = s.log()
    assert "requeuing it" in log and "the database answers again" in log, s.tail()
    assert "restarting" not in log
    # every web process reconnects on its own: no request fails once the database is back
    got = [s.get(path)[0] for _ in range(6) for path in ("/", f"/api/submissions/{sub}/status")]
    assert set(got) == {200}, (got, s.tail())
    assert counts["answers"] > 0
