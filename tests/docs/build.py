"""Build the documentation site the way ``./dev docs`` does, strictly, for the tests that need the built pages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_site(out: Path) -> Path:
    """``mkdocs build --strict`` into ``out``; fails the test with mkdocs's log when it warns or fails."""
    import pytest

    mkdocs = Path(sys.executable).with_name("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    got = subprocess.run([str(mkdocs), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    log = got.stdout + got.stderr
    if got.returncode != 0 or "WARNING" in log:
        pytest.fail(f"mkdocs build --strict failed:\n{log[-6000:]}", pytrace=False)
    return out
