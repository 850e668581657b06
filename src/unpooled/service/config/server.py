"""The web server command as ``unpooled serve`` runs it (and ``unpooled bench pages`` measures it)."""

from __future__ import annotations

import os
import sys

#: seconds a web worker may spend on one request (a large upload over a slow link) before gunicorn restarts it
WEB_TIMEOUT = 600


def default_web_workers() -> int:
    """Two web processes per usable CPU (at least 2, at most 16)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(16, 2 * cpus))


def web_server_command(bind: str, workers: int, threads: int = 1, *, access_log: bool = True) -> list[str]:
    """gunicorn as ``unpooled serve`` runs it (``bench pages`` measures this command).

    One thread per process by default: gunicorn's sync workers, each request on a fresh connection
    that the kernel hands to an idle process. Measured with 20 closed-loop clients on 2 CPUs
    (PostgreSQL, ``bench pages``): 4 processes x 1 thread gave leaderboard / submission / verify p95
    39 / 57 / 67 ms; 2 processes x 4 threads (gthread, keep-alive) 87 / 84 / 75 ms, as each
    connection stays with the process that accepted it and threads of one process share a GIL.
    ``threads > 1`` selects gthread. The request timeout is :data:`WEB_TIMEOUT` (uploads)."""
    cmd = [sys.executable, "-m", "gunicorn", "unpooled.service.config.wsgi", "--bind", bind,
           "--workers", str(workers), "--threads", str(threads), "--timeout", str(WEB_TIMEOUT),
           "--log-level", "warning"]
    return cmd + (["--access-logfile", "-"] if access_log else [])
