"""kill -9 the task worker in the middle of an evaluation (sampling -> annotating -> scoring with the simulated
crowd): ``unpooled serve`` restarts it, the restarted worker requeues the evaluation, which resumes and finishes
with no duplicate answer, label, assignment, task request, draw or cost.  On SQLite and (when it answers) on a
fresh database of the PostgreSQL server of ``UNPOOLED_TEST_POSTGRES_URL``.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from .harness import evaluation_invariants, one, start_evaluation, task_rows

pytestmark = pytest.mark.faults


def answers(env) -> int:
    return one(env, "SELECT COUNT(*) FROM annotation_answer")


def ended(env) -> bool:
    return all(t["status"] not in ("RUNNING", "READY") for t in task_rows(env, "advance_submission"))


def test_worker_killed_mid_evaluation_resumes_and_finishes_once(env, serve, shared_data, tmp_path):
    sub = start_evaluation(env, shared_data, tmp_path / "work")
    s = serve(env)
    status = lambda: one(env, "SELECT status FROM submissions_submission WHERE id = ?", (sub,))  # noqa: E731
    kills = []
    for more in (30, 150):  # kill once a few answers are in, then again well into the resumed annotation
        floor = (kills[-1]["answers"] if kills else 0) + more
        pid = s.until(lambda: status() == "annotating" and answers(env) >= floor and s.worker_pid(),
                      f"{floor} answers")
        os.kill(pid, signal.SIGKILL)
        s.until(lambda: s.worker_pid() not in (None, pid), "serve to restart the worker")
        task = task_rows(env, "advance_submission")[-1]
        kills.append({"answers": answers(env), "status": status(), "task": task["status"]})
        # the kill landed in the middle: the evaluation was not over, its task was left running (or was just
        # requeued by the restarted worker, or already claimed again)
        assert kills[-1]["status"] == "annotating" and task["status"] in ("RUNNING", "READY"), kills
    s.until(lambda: status() in ("published", "failed"), "the evaluation to finish")
    s.until(lambda: ended(env), "its task to end (after publishing, it builds the leaderboards)")
    done = [t for t in task_rows(env, "advance_submission") if t["status"] == "SUCCESSFUL"]
    assert done and len(done[0]["workers"]) == 3 and len(set(done[0]["workers"])) == 1, task_rows(env, "advance_submission")
    assert not [t for t in task_rows(env, "advance_submission") if t["status"] == "FAILED"]
    counts = evaluation_invariants(env, sub)
    assert counts["answers"] > kills[-1]["answers"]  # the resumed worker went on from where the dead one stopped
    log = s.log()
    assert log.count("was killed by SIGKILL") == 2 and "requeued 1 task(s) left running by a crashed worker" in log
    code, body = s.get(f"/api/submissions/{sub}/status")  # what the submitter is shown: the same cost, once
    verify_cost = one(env, "SELECT SUM(a.cost_cents) FROM annotation_answer a JOIN annotation_task t "
                           "ON t.id = a.task_id WHERE t.kind = 'verify'")
    progress = json.loads(body)
    assert code == 200 and progress["status"] == "published" and progress["cost_cents"] == verify_cost > 0, body


def test_worker_killed_while_scoring_resumes_and_publishes_once(env, serve, shared_data, tmp_path):
    """kill -9 inside the scoring stage (the joint re-scoring of the corpus, made seconds long here by 1,000
    refits of the crowd's confusions so that the kill lands inside it): the restarted worker requeues the task,
    the stage runs again and the submission is published once, with nothing doubled and scores at every level."""
    env = dict(env, UNPOOLED_RATE_REPLICATES="60")
    sub = start_evaluation(env, shared_data, tmp_path / "work")
    s = serve(env)
    status = lambda: one(env, "SELECT status FROM submissions_submission WHERE id = ?", (sub,))  # noqa: E731
    pid = s.until(lambda: status() == "scoring" and s.worker_pid(), "the scoring stage", every=0.02)
    os.kill(pid, signal.SIGKILL)
    s.until(lambda: s.worker_pid() not in (None, pid), "serve to restart the worker")
    s.until(lambda: status() in ("published", "failed"), "the evaluation to finish")
    s.until(lambda: ended(env), "its task to end (after publishing, it builds the leaderboards)")
    assert status() == "published", s.tail()
    tasks = task_rows(env, "advance_submission")
    assert not [t for t in tasks if t["status"] == "FAILED"], tasks
    assert any(len(t["workers"]) == 2 for t in tasks if t["status"] == "SUCCESSFUL"), tasks  # the killed run's task
    counts = evaluation_invariants(env, sub)
    assert counts["answers"] > 0
    log = s.log()
    assert "was killed by SIGKILL" in log and "requeued 1 task(s) left running by a crashed worker" in log, s.tail()
