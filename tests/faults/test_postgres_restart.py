"""PostgreSQL stopped and started again in the middle of the evaluations of several teams by two task workers:
neither worker dies nor fails an evaluation -- each waits for the database, requeues the task the outage
interrupted, and every evaluation finishes with nothing duplicated and the scores a single process computes from
the final labels; the web server answers again without errors once the database is back.

A throw-away cluster of the test's own (``initdb``/``pg_ctl`` on a free port and a temporary folder, run as the
``postgres`` user when the test runs as root), never the shared server.
"""

from __future__ import annotations

import pytest

from .harness import ThrowawayPostgres, evaluation_invariants, one, service_env, task_rows

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


def test_postgres_restart_mid_evaluation_of_several_teams_by_two_workers(postgres, serve, shared_data, tmp_path):
    from .harness import run_py, start_teams
    from .test_concurrency import FROM_SCRATCH, TEAMS, assert_newest_scores_are_from_scratch, statuses

    env = service_env(tmp_path / "data", postgres.url("unpooled"))
    subs = start_teams(env, shared_data, tmp_path / "work", teams=3, n=12, settings=TEAMS)
    s = serve(env, task_workers=2)
    s.wait_up()
    answers = lambda: one(env, "SELECT COUNT(*) FROM annotation_answer")  # noqa: E731
    s.until(lambda: "annotating" in {st[0] for st in statuses(env).values()} and answers() >= 30,
            "the annotation to be under way")
    workers, web = [s.worker_pid(0), s.worker_pid(1)], s.web_pid()
    postgres.stop("fast")  # ends every connection ("terminating connection due to administrator command")
    s.until(lambda: "the database failed during it" in s.log() or "the database does not answer" in s.log(),
            "the workers to notice the outage")
    assert s.get("/")[0] is not None  # the web server is up (it answers 500 while it has no database)
    postgres.start()
    s.until(lambda: (got := statuses(env)) and all(st[0] in ("published", "failed") for st in got.values()),
            "every evaluation to finish", every=0.5)
    s.until(lambda: not [t for t in task_rows(env, "labels_arrived") + task_rows(env, "advance_submission")
                         if t["status"] in ("READY", "RUNNING")], "the queue to empty", every=0.5)
    # reconnected: nobody died or was restarted
    assert [s.worker_pid(0), s.worker_pid(1)] == workers and s.web_pid() == web, s.tail()
    counts = evaluation_invariants(env, subs)
    tasks = task_rows(env, "advance_submission")
    assert {t["status"] for t in tasks} == {"SUCCESSFUL"}, tasks
    assert any(len(t["workers"]) >= 2 for t in tasks), tasks  # a task the outage interrupted ran again
    log = s.log()
    assert "requeuing it" in log and "the database answers again" in log, s.tail()
    assert "restarting" not in log
    # every web process reconnects on its own: no request fails once the database is back
    got = [s.get(path)[0] for _ in range(6) for path in ("/", f"/api/submissions/{subs[0]}/status")]
    assert set(got) == {200}, (got, s.tail())
    assert counts["answers"] > 0
    # the outage changed no number: each submission's newest scores are a single process's from scratch
    assert_newest_scores_are_from_scratch(env, subs, run_py(env, FROM_SCRATCH))
