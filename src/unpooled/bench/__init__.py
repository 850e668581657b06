"""Benchmarks runnable from the CLI (``unpooled bench ...``); each prints its figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def child_env(work: Path) -> dict:
    """The environment of a benchmark's child process: ``DATABASE_URL`` (else a fresh SQLite file in ``work``),
    ``work`` as the data directory unless one is set, and the service's settings."""
    env = dict(os.environ)
    if not env.get("DATABASE_URL"):
        env["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
    env.setdefault("UNPOOLED_DATA_DIR", str(work))
    env["DJANGO_SETTINGS_MODULE"] = "unpooled.service.config.settings"
    return env


def run_child(name: str, cfg: dict, work: Path) -> dict | None:
    """Run ``python -m unpooled.bench.NAME --child CFG`` in :func:`child_env` and return the JSON of its last
    line of output, or ``None`` (after saying so on stderr) when it failed."""
    out = subprocess.run([sys.executable, "-m", f"unpooled.bench.{name}", "--child", json.dumps(cfg)],
                         env=child_env(work), stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        print(f"bench {name}: the benchmark failed (see above)", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])
