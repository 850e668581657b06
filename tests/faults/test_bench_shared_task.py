"""``unpooled bench shared-task`` at a size that fits the suite: the embedded default (SQLite, one task worker)
evaluates three teams' uploads end to end, and the figures it prints come from that run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.faults


def test_stage_times_end_each_stage_where_the_next_status_is_first_seen():
    """Ingest ends when the submission is stored (status ``ingested``), not when its lifecycle starts: the wait in
    the queue between the two is a stage of its own.  A status the poll missed starts at the next one seen."""
    from unpooled.bench.shared_task import _stage_times

    seen = {1: {"ingested": 4.0, "sampling": 10.0, "annotating": 11.0, "scoring": 20.0, "published": 30.0},
            2: {"ingested": 5.0, "annotating": 7.0, "published": 9.0},  # sampling and scoring shorter than a poll
            3: {"ingested": 6.0, "sampling": 8.0}}  # not published: not counted
    got = _stage_times(seen, 0.0)
    assert got == {"ingest": [4.0, 5.0], "waiting": [6.0, 2.0], "sampling": [1.0, 0.0], "annotating": [9.0, 2.0],
                   "scoring": [10.0, 0.0]}


def test_publications_give_the_pace_from_the_first_published_on():
    from unpooled.bench.shared_task import _publications

    seen = {1: {"ingested": 4.0, "published": 110.0}, 2: {"published": 130.0}, 3: {"published": 170.0},
            4: {"ingested": 6.0, "failed": 50.0}}  # failed: not a publication
    assert _publications(seen, 10.0) == {"first": 100.0, "median": 120.0, "last": 160.0,
                                         "per_hour_after_first": 2 / 60 * 3600}
    assert _publications({1: {"published": 5.0}}, 0.0) == {"first": 5.0, "median": 5.0, "last": 5.0,
                                                         "per_hour_after_first": None}
    assert _publications({1: {"failed": 5.0}}, 0.0) is None


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
    assert all(r["stages"][k] is not None for k in ("ingest", "waiting", "sampling", "annotating", "scoring"))
    assert r["answers"] >= 20 and r["labels"] > 0
    assert 0 < r["published"]["first"] <= r["published"]["median"] <= r["published"]["last"] <= r["wall_seconds"]
    # where the worker's time went: three ingests and three lifecycles at least (a lifecycle may run in parts)
    assert r["tasks"]["ingest_upload"]["runs"] == 3 and r["tasks"]["advance_submission"]["runs"] >= 3


def test_bench_shared_task_sizes_the_kbs_on_request(shared_data, tmp_path):
    """``--instances MIN-MAX``: each KB's size is what :func:`kb_sizes` asks (between MIN and MAX, density 1/size²,
    100 of 20,000-200,000 about 5.1M in all), made of the gold layer's lines (true facts, read by offset) and of
    true pairs under another relation (wrong facts); the corpus is written as files of 1,000 documents at most."""
    from unpooled.bench.shared_task import kb_sizes, write_corpus, write_kbs

    sizes = kb_sizes(100, 20_000, 200_000)
    assert min(sizes) >= 20_000 and max(sizes) <= 200_000 and 5.0e6 < sum(sizes) < 5.2e6
    assert sorted(sizes)[50] < 40_000  # many small teams, a few large ones
    folder = write_corpus(shared_data / "redocred", 2500, tmp_path / "corpus")
    parts = sorted(folder.iterdir())
    assert [len(json.loads(p.read_text())) for p in parts] == [1000, 1000, 500]
    assert json.loads(parts[2].read_text())[0]["title"].endswith("(copy 2)")
    gold = tmp_path / "gold.jsonl"
    preds = ["P17", "P27", "P131"]
    lines = [json.dumps({"doc": f"d{k}", "predicate": preds[k % 3], "subject": {"start": 0, "end": 1},
                         "object": {"start": 2, "end": 3 + k}}) for k in range(3000)]
    gold.write_text("\n".join(lines) + "\n")
    files, g = write_kbs(gold, tmp_path, 4, [200, 800], seed=1)
    assert g == 3000
    assert sorted(f["instances"] for f in files) == sorted(kb_sizes(4, 200, 800))
    truth = set(lines)
    for f in files:
        kb = open(f["path"]).read().splitlines()
        assert len(kb) == f["instances"]
        right = [x for x in kb if x in truth]
        assert 0.55 * len(kb) < len(right) < len(kb)  # 10-40% wrong
        for x in kb:
            if x not in truth:  # a true pair under another relation
                d = json.loads(x)
                k = int(d["doc"][1:])
                assert d["predicate"] != preds[k % 3] and d["predicate"] in preds and d["object"]["end"] == 3 + k
    # without --instances: a share of the gold relations, growing with them (today's KBs)
    files, _ = write_kbs(gold, tmp_path, 2, None, seed=1)
    assert all(300 < f["instances"] < 2500 for f in files)
