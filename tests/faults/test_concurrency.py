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


def test_teams_uploading_at_once_are_evaluated_by_two_workers_with_nothing_failed_or_doubled(
        env, serve, shared_data, tmp_path):
    subs = start_teams(env, shared_data, tmp_path / "work", teams=4, n=12, settings=TEAMS)
    s = serve(env, task_workers=2, web_workers=1)
    answers = lambda: one(env, "SELECT COUNT(*) FROM annotation_answer") or 0  # noqa: E731
    # one of the two workers dies in the middle of the annotation; serve restarts it, it requeues its task
    pid = s.until(lambda: answers() >= 40 and s.worker_pid(0), "the annotation to be under way")
    os.kill(pid, signal.SIGKILL)
    s.until(lambda: all(st[0] in ("published", "failed") for st in statuses(env).values()),
            "every submission to finish", every=0.5)
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
    assert "was killed by SIGKILL" in s.log(), s.tail()
    # every submission's last scores: a P, R and F1 at both levels
    newest = query(env, "SELECT submission_id, level, p, r, f1 FROM evaluations_score WHERE id IN "
                        "(SELECT MAX(id) FROM evaluations_score GROUP BY submission_id, level)")
    assert len(newest) == 2 * len(subs) and all(None not in row[2:] for row in newest), newest


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
                                      for x in (row.p, row.p_lo, row.p_hi, row.r, row.r_lo, row.r_hi)])
print(json.dumps(out))
"""


def test_label_batches_arriving_while_workers_rescore_leave_the_newest_scores_on_every_label(
        env, serve, shared_data, tmp_path):
    """People answer (the simulated crowd through the annotators' path, batch after batch, as ``unpooled annotate
    simulate``) while two workers re-score the corpus after each batch: every submission is published, and each
    one's newest scores are those of every label -- equal to a from-scratch scoring of the final labels (a
    re-scoring that read older labels never lands after a newer one)."""
    import json
    import subprocess

    from .harness import PY, run_py

    subs = start_teams(env, shared_data, tmp_path / "work", teams=3, n=12, settings={**TEAMS, "backend": "inhouse"})
    s = serve(env, task_workers=2, web_workers=1)
    s.until(lambda: all(st[0] == "annotating" for st in statuses(env).values()), "the submissions to wait for labels")
    for _ in range(60):
        if all(st[0] in ("published", "failed") for st in statuses(env).values()):
            break
        out = subprocess.run([PY, "-m", "unpooled.cli.main", "annotate", "simulate", "--corpus", "teams",
                              "--max-answers", "40", "--accuracy", "0.85", "--seed", str(_)], env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
    s.until(lambda: all(st[0] in ("published", "failed") for st in statuses(env).values()), "every submission "
            "to finish", every=0.5)
    s.until(lambda: not [t for t in task_rows(env, "labels_arrived") + task_rows(env, "advance_submission")
                         if t["status"] in ("READY", "RUNNING")], "the queue to empty", every=0.5)
    assert [st for st in statuses(env).values() if st[0] != "published"] == [], statuses(env)
    assert len(task_rows(env, "labels_arrived")) > 1  # several re-scorings while the answers came in
    newest = {(r[0], r[1]): r[2:] for r in query(
        env, "SELECT submission_id, level, p, p_lo, p_hi, r, r_lo, r_hi FROM evaluations_score WHERE id IN "
             "(SELECT MAX(id) FROM evaluations_score GROUP BY submission_id, level)")}
    fresh = {(r[0], r[1]): r[2:] for r in json.loads(run_py(env, FROM_SCRATCH).strip().splitlines()[-1])}
    assert set(newest) == set(fresh) == {(sub, lv) for sub in subs for lv in ("instance", "relation")}
    for key, want in fresh.items():
        assert newest[key] == pytest.approx(want, abs=1e-9), (key, newest[key], want)
