"""Benchmarks runnable from the CLI (``unpooled bench ...``); each prints its figures."""

from __future__ import annotations

import os
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
