"""``unpooled bench shared-task`` at a size that fits the suite: the embedded default (SQLite, one task worker)
evaluates three teams' uploads end to end, and the figures it prints come from that run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.faults


def test_bench_shared_task_runs_a_small_task_end_to_end(shared_data, tmp_path):
    env = {"UNPOOLED_SHARED_DATA": str(shared_data), "PATH": "/usr/bin:/bin"}
    got = subprocess.run([sys.executable, "-m", "unpooled.cli.main", "bench", "shared-task", "--documents", "30",
                          "--submissions", "3", "--draws", "20", "--exhaustive", "2", "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    [r] = json.loads(got.stdout.strip().splitlines()[-1])
    assert r["database"] == "sqlite" and r["workers"] == 1 and r["failed"] == 0 and r["submissions"] == 3
    assert r["documents"] == 30 and r["instances"] > 0 and r["database_mb"] > 0 and r["peak_worker_mb"] > 0
    # every submission went through every stage; the crowd answered the drawn items (20 draws each, 3 answers)
    assert all(r["stages"][k] is not None for k in ("ingest", "sampling", "annotating", "scoring"))
    assert r["answers"] >= 20 and r["labels"] > 0
    # where the worker's time went: three ingests and three lifecycles at least (a lifecycle may run in parts)
    assert r["tasks"]["ingest_upload"]["runs"] == 3 and r["tasks"]["advance_submission"]["runs"] >= 3
