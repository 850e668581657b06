"""``unpooled bench lease`` at a tiny size: the figures' structure on SQLite, and on PostgreSQL (its own database,
made and dropped) when ``DATABASE_URL`` names one.  No timing is checked: the figures are the benchmark's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from unpooled.bench.lease import OPS, PG_DATABASE, WHO

pytestmark = pytest.mark.slow
ARGS = ["bench", "lease", "--open-tasks", "40,15", "--annotators", "2", "--rounds", "2", "--controls", "3", "--json"]


def _bench(tmp_path, *extra: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "UNPOOLED_DATA_DIR")}
    out = subprocess.run([sys.executable, "-m", "unpooled.cli.main", *ARGS, *extra], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check(got: dict, database: str) -> None:
    assert got["database"] == database and got["annotators"] == 2 and got["rounds"] == 2 and got["controls"] == 3
    assert got["cpus"] >= 1 and len(got["loadavg"]) == 3
    assert got["distinct_keys"] >= 40 and got["instances"] >= got["distinct_keys"]
    assert [s["open_tasks"] for s in got["sizes"]] == [15, 40]  # ascending, whatever the order asked
    for s in got["sizes"]:
        assert s["tasks"] >= s["open_tasks"] + 3 and set(s["ops"]) == set(OPS)
        for op, by in s["ops"].items():
            assert set(by) == {"all", *WHO}
            # one call an annotator a round, two answers (the crowd's lease's and the web queue's)
            calls = 2 if op == "answer" else 1
            assert by["all"]["calls"] == 2 * 2 * calls and all(by[w]["calls"] == 2 * calls for w in WHO), (op, by)
            for f in by.values():
                assert 0 < f["median_ms"] <= f["p95_ms"] and f["queries"] >= 1 and f["cpu_ms"] >= 0, (op, f)
                assert (f["db_cpu_ms"] is None) == (database == "sqlite"), (op, f)
        # a lease locks its task and writes the lease: more queries than a count of items left
        assert s["ops"]["lease_crowd"]["all"]["queries"] > s["ops"]["count_leasable"]["all"]["queries"]


def test_bench_lease_small_on_sqlite(tmp_path):
    got = _bench(tmp_path)
    assert len(got) == 1
    _check(got[0], "sqlite")
    assert got[0]["jit"] is None


@pytest.mark.db
@pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")),
                    reason="needs DATABASE_URL naming a PostgreSQL server")
def test_bench_lease_small_on_postgres_in_its_own_database(tmp_path):
    from unpooled.bench import pg_admin

    url = os.environ["DATABASE_URL"]
    got = _bench(tmp_path, "--no-sqlite", "--postgres", url)
    assert len(got) == 1
    _check(got[0], "postgresql")
    assert got[0]["jit"] == "off"  # the service's connections run without JIT (settings)
    # its database is gone afterwards: creating it again succeeds
    pg_admin(url, f'CREATE DATABASE "{PG_DATABASE}"')
    pg_admin(url, f'DROP DATABASE "{PG_DATABASE}"')
