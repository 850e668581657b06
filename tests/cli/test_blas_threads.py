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
