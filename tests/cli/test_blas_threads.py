"""Task workers keep BLAS to one thread unless the environment says otherwise (service/config/server.py)."""

import os
import subprocess
import sys

import numpy as np  # noqa: F401 - imported: one_blas_thread must refuse to run after it
import pytest

from unpooled.service.config.server import ONE_BLAS_THREAD, one_blas_thread

PROBE = ("import os; from unpooled.service.config.server import one_blas_thread; one_blas_thread(); "
         "import numpy; print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])")


def _probe(**env) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ONE_BLAS_THREAD}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def test_one_thread_by_default_and_the_environment_wins():
    assert _probe() == "1 1"
    assert _probe(OPENBLAS_NUM_THREADS="2") == "2 1"


def test_refused_once_numpy_is_imported():
    with pytest.raises(RuntimeError, match="before numpy"):
        one_blas_thread()


def test_the_worker_command_sets_it_before_the_commands_import_numpy(tmp_path):
    # registering the commands imports numpy: the worker's one thread is set before the parser is built
    probe = ("import os; from unpooled.cli.main import main; rc = main(['worker', '--batch']); "
             "print(rc, os.environ['OPENBLAS_NUM_THREADS'])")
    env = {k: v for k, v in os.environ.items() if k not in ONE_BLAS_THREAD and k != "DATABASE_URL"}
    out = subprocess.run([sys.executable, "-c", probe], env={**env, "UNPOOLED_DATA_DIR": str(tmp_path)},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "0 1"
