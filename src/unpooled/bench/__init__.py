"""Benchmarks runnable from the CLI (``unpooled bench ...``); each prints its figures."""

from __future__ import annotations

import json
import os
import math
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path


def child_env(work: Path, database_url: str | None = None) -> dict:
    """The environment of a benchmark's child process: ``database_url``, else ``DATABASE_URL``, else a fresh SQLite
    file in ``work``; ``work`` as the data directory unless one is set, and the service's settings."""
    env = dict(os.environ)
    if database_url:
        env["DATABASE_URL"] = database_url
    elif not env.get("DATABASE_URL"):
        env["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
    env.setdefault("UNPOOLED_DATA_DIR", str(work))
    env["DJANGO_SETTINGS_MODULE"] = "unpooled.service.config.settings"
    return env


def run_child(name: str, cfg: dict, work: Path, database_url: str | None = None) -> dict | None:
    """Run ``python -m unpooled.bench.NAME --child CFG`` in :func:`child_env` and return the JSON of its last
    line of output, or ``None`` (after saying so on stderr) when it failed."""
    out = subprocess.run([sys.executable, "-m", f"unpooled.bench.{name}", "--child", json.dumps(cfg)],
                         env=child_env(work, database_url), stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        print(f"bench {name}: the benchmark failed (see above)", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A free TCP port of 127.0.0.1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def wait_until_up(port: int, proc, timeout: float = 60.0) -> None:
    """Until the server started as ``proc`` answers ``GET /`` on ``port``; RuntimeError when it exits or does
    not answer within ``timeout`` seconds."""
    import http.client
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server did not answer on port {port} within {timeout:.0f} s")


def pg_admin(url: str, sql: str) -> None:
    """Run ``sql`` on the PostgreSQL server of ``url``, connected to its ``postgres`` database outside a transaction
    (CREATE / DROP DATABASE of the bench's own database)."""
    import dj_database_url
    import psycopg

    db = dj_database_url.parse(url)
    with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"] or "postgres",
                         password=db["PASSWORD"] or None, dbname="postgres", autocommit=True) as conn:
        conn.execute(sql)


def with_database(url: str, name: str) -> str:
    """``url`` naming the database ``name`` instead."""
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(url)
    return urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


@contextmanager
def own_database(url: str, name: str, *, keep: bool = False):
    """A fresh database ``name`` on the PostgreSQL server of ``url`` (one left over by an earlier run is dropped
    first), dropped afterwards unless ``keep``: yields its URL (``url``'s query, e.g. ``options``, kept)."""
    pg_admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_admin(url, f'CREATE DATABASE "{name}"')
    try:
        yield with_database(url, name)
    finally:
        if not keep:
            pg_admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentile(xs: list[float], q: float) -> float:
    """Nearest rank of the sorted ``xs`` (NaN when empty)."""
    if not xs:
        return math.nan
    return xs[max(0, min(len(xs) - 1, math.ceil(q * len(xs)) - 1))]


def cpu_ticks(pids) -> dict[int, int]:
    """utime + stime of each process (all its threads), in clock ticks; processes gone are left out."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            out[pid] = int(parts[11]) + int(parts[12])
        except (OSError, IndexError, ValueError):
            pass
    return out
