"""Several teams upload at once and several task workers evaluate their submissions at the same time, on a fresh
database of the PostgreSQL server of ``UNPOOLED_TEST_POSTGRES_URL`` (the distributed mode) and on SQLite.

The submissions share many instances, so the workers race for the same verification tasks, the corpus's one
exhaustive sample, its simulated crowd and its re-scoring.  Every submission must end ``published`` with nothing
doubled (draws, tasks, requests, answers, labels, cost: :func:`.harness.evaluation_invariants`), also when one of
the workers is killed with SIGKILL in the middle.
"""

from __future__ import annotations

import os
import signal

import pytest

from .harness import evaluation_invariants, one, query, start_teams, task_rows

pytestmark = pytest.mark.faults

#: small enough for the suite: 4 teams on 12 documents, 30 draws each at 2 levels
TEAMS = dict(backend="simulated", control_share=0.0, exhaustive_documents=4, min_draws=30, max_draws=30,
             target_halfwidth=0.05, levels="instance,relation")


def statuses(env) -> dict[int, tuple]:
    return {r[0]: (r[1], r[2], r[3]) for r in query(env, "SELECT id, status, failed_stage, error FROM "
                                                         "submissions_submission ORDER BY id")}


#: task workers per database: 2 on SQLite (whose writes are serial), 4 on PostgreSQL (the distributed mode)
WORKERS = {"sqlite": 2, "postgresql": 4}


def sampling_now(env) -> tuple[int, int] | None:
    """(the submission, the slot of the worker running its lifecycle) of a submission in ``sampling`` now."""
    sampling = {sub for sub, st in statuses(env).items() if st[0] == "sampling"}
    for t in task_rows(env, "advance_submission"):
        if t["status"] == "RUNNING" and t["args"] and t["args"][0] in sampling and t["workers"]:
            return t["args"][0], int(t["workers"][-1].rsplit("-", 1)[1])
    return None


def test_teams_uploading_at_once_are_evaluated_by_several_workers_with_nothing_failed_or_doubled(
        env, serve, shared_data, tmp_path, request):
    """Four teams upload at once to 2 workers (SQLite) or 4 (PostgreSQL); one worker is killed with SIGKILL in the
    sampling stage and one in the annotation.  Every submission is published with nothing doubled, and each one's
    newest scores equal a single process's scoring of the final labels from scratch."""
    import threading

    from .harness import run_py

    workers = WORKERS[request.node.callspec.params["env"]]
    s = serve(env, task_workers=workers, web_workers=1)
    s.wait_up()
    s.until(lambda: all(s.worker_pid(k) for k in range(workers)), "every worker to start")
    got: dict = {}
    uploads = threading.Thread(target=lambda: got.update(subs=start_teams(env, shared_data, tmp_path / "work",
                                                                          teams=4, n=12, settings=TEAMS)))
    uploads.start()
    # a worker dies in the sampling stage of a submission (the first whose lifecycle is seen there, running)
    victim, slot = s.until(lambda: sampling_now(env), "a submission in sampling", every=0.01)
    os.kill(s.worker_pid(slot), signal.SIGKILL)
    uploads.join()
    subs = got["subs"]
    answers = lambda: one(env, "SELECT COUNT(*) FROM annotation_answer") or 0  # noqa: E731
    # another dies in the middle of the annotation; serve restarts each, and each requeues its task
    pid = s.until(lambda: answers() >= 40 and s.worker_pid(0), "the annotation to be under way")
    os.kill(pid, signal.SIGKILL)
    s.until(lambda: all(st[0] in ("published", "failed") for st in statuses(env).values()),
            "every submission to finish", every=0.5)
    s.until(lambda: not [t for t in task_rows(env, "labels_arrived") + task_rows(env, "advance_submission")
                         if t["status"] in ("READY", "RUNNING")], "the queue to empty", every=0.5)
    got = statuses(env)
    assert [st for st in got.values() if st[0] != "published"] == [], got
    counts = evaluation_invariants(env, subs)
    assert set(counts["draws"]) == set(subs) and all(d == {"instance": 30, "relation": 30}
                                                      for d in counts["draws"].values()), counts
    # the teams' files share instances: some keys were drawn by several submissions, and each was verified and paid
    # for once (evaluation_invariants): the second joined the open task or reused its label, as timing had it
    shared = one(env, "SELECT COUNT(*) FROM (SELECT key FROM evaluations_draw GROUP BY key "
                      "HAVING COUNT(DISTINCT submission_id) > 1) x")
    assert shared > 0
    assert not [t for t in task_rows(env, "advance_submission") if t["status"] == "FAILED"]
    assert s.log().count("was killed by SIGKILL") == 2, s.tail()
    # the lifecycle killed in sampling was requeued and run again to the end (by the restarted worker or another)
    assert any(t["args"][0] == victim and len(t["workers"]) >= 2 and t["status"] == "SUCCESSFUL"
               for t in task_rows(env, "advance_submission")), task_rows(env, "advance_submission")
    assert_newest_scores_are_from_scratch(env, subs, run_py(env, FROM_SCRATCH))


FROM_SCRATCH = """
import json
from unpooled.service.corpora.models import Corpus
from unpooled.service.evaluations import scoring
from unpooled.service.evaluations.inputs import system_name

corpus = Corpus.objects.get(name="teams")
out = []
for level in ("instance", "relation"):
    got = scoring.from_scratch(corpus, level=level)
    for row in got.result.rows:
        sub = got.by_name[row.system]
        out.append([sub.pk, level] + [None if x is None else min(1.0, max(0.0, float(x)))
                                      for x in (row.precision.value, row.precision.lo, row.precision.hi,
                                                row.recall.value, row.recall.lo, row.recall.hi)])
print(json.dumps(out))
"""


def test_label_batches_arriving_while_workers_rescore_leave_the_newest_scores_on_every_label(
        env, serve, shared_data, tmp_path):
    """People answer (the simulated crowd through the annotators' path, batch after batch, as ``unpooled annotate
    simulate``) while two workers re-score the corpus after each batch: every submission is published, and each
    one's newest scores are those of every label -- equal to a from-scratch scoring of the final labels (a
    re-scoring that read older labels never lands after a newer one)."""
    import subprocess

    from .harness import PY, run_py

    subs = start_teams(env, shared_data, tmp_path / "work", teams=3, n=12, settings={**TEAMS, "backend": "inhouse"})
    s = serve(env, task_workers=2, web_workers=1)
    s.until(lambda: all(st[0] == "annotating" for st in statuses(env).values()), "the submissions to wait for labels")
    for _ in range(60):
        if all(st[0] in ("published", "failed") for st in statuses(env).values()):
            break
        out = subprocess.run([PY, "-m", "unpooled.cli.main", "annotate", "simulate", "--corpus", "teams",
                              "--max-answers", "100", "--accuracy", "0.85", "--seed", str(_)], env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
    s.until(lambda: all(st[0] in ("published", "failed") for st in statuses(env).values()), "every submission "
            "to finish", every=0.5)
    s.until(lambda: not [t for t in task_rows(env, "labels_arrived") + task_rows(env, "advance_submission")
                         if t["status"] in ("READY", "RUNNING")], "the queue to empty", every=0.5)
    assert [st for st in statuses(env).values() if st[0] != "published"] == [], statuses(env)
    assert len(task_rows(env, "labels_arrived")) > 1  # several re-scorings while the answers came in
    assert_newest_scores_are_from_scratch(env, subs, run_py(env, FROM_SCRATCH))


def assert_newest_scores_are_from_scratch(env, subs, out: str) -> None:
    """Each submission's newest scores (a P, R and F1 with intervals at both levels) equal those of a single
    process's scoring of the final labels from scratch (``out``: FROM_SCRATCH's output)."""
    import json

    newest = {(r[0], r[1]): r[2:] for r in query(
        env, "SELECT submission_id, level, p, p_lo, p_hi, r, r_lo, r_hi FROM evaluations_score WHERE id IN "
             "(SELECT MAX(id) FROM evaluations_score GROUP BY submission_id, level)")}
    fresh = {(r[0], r[1]): r[2:] for r in json.loads(out.strip().splitlines()[-1])}
    assert set(newest) == set(fresh) == {(sub, lv) for sub in subs for lv in ("instance", "relation")}
    for key, want in fresh.items():
        assert None not in newest[key] and newest[key] == pytest.approx(want, abs=1e-9), (key, newest[key], want)
