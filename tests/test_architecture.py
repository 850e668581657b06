"""The architecture's import contracts (pyproject.toml [tool.importlinter]) hold: the core is pure, the CLI sits
above the benchmarks above the service above the core, the service's apps form layers without cycles, and so do
the modules of ``service/evaluations``."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    cmd = [str(lint)] if lint.exists() else [sys.executable, "-m", "importlinter.cli"]
    got = subprocess.run(cmd + ["--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stdout[-4000:] + got.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in got.stdout


def test_every_core_module_imports_without_django():
    """Each module of unpooled.core, imported in a fresh interpreter, brings in neither Django nor boto3."""
    import pkgutil

    import unpooled.core

    names = sorted(m.name for m in pkgutil.walk_packages(unpooled.core.__path__, "unpooled.core."))
    code = ("import importlib, sys\n"
            f"for n in {names!r}:\n    importlib.import_module(n)\n"
            "bad = [m for m in ('django', 'boto3') if m in sys.modules]\n"
            "print(len(sys.modules)); sys.exit(1 if bad else 0)")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert len(names) > 30
