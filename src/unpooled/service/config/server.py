"""The web server command as ``unpooled serve`` runs it (and ``unpooled bench pages`` measures it), and the task
workers' BLAS threads."""

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
           "--log-level", "warning", "--logger-class", "unpooled.service.config.access_log.RedactingLogger"]
    return cmd + (["--access-logfile", "-"] if access_log else [])


#: a process's BLAS (OpenBLAS, or an OpenMP/MKL build) on one thread
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def one_blas_thread() -> None:
    """Keep this process's BLAS to one thread, unless the environment already sets its thread count (then that).

    A task worker (``unpooled worker``, each of ``unpooled serve --task-workers N``) re-scores on numpy's dense
    products; OpenBLAS starts one thread per CPU in every process, so N workers beside the web server
    oversubscribe the CPUs, and on a shared 2-CPU machine the same product of ``bench rescore`` took
    0.05-0.46 s with the default threads.  The work is spread over the workers, not over BLAS threads.  BLAS reads
    the variables once, when numpy is first imported: call this before (RuntimeError after)."""
    if "numpy" in sys.modules:
        raise RuntimeError("one_blas_thread() must run before numpy is imported")
    for name, value in ONE_BLAS_THREAD.items():
        os.environ.setdefault(name, value)
