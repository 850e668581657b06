"""``unpooled score`` prints the same bytes for the same inputs and seed, in separate processes with different
``PYTHONHASHSEED`` (string hashing orders sets and dicts of ids): the table, ``--json`` and ``--csv`` at the
entity level (codes of the systems' entity ids), ``--json`` at the relation level, with the bootstrap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _inputs(tmp: Path) -> list[str]:
    rng = np.random.default_rng(4)
    universe = [(f"doc{d}", (s, s + 4), f"rel:{r}", (s + 10, s + 13))
                for d in range(8) for s in range(0, 60, 20) for r in ("a", "b", "c")]
    truth = {u: rng.random() < 0.5 for u in universe}
    subs = tmp / "subs"
    subs.mkdir()
    labels, ex = [], []

    def fields(u, ent=None):
        o = {"doc": u[0], "subject": {"start": u[1][0], "end": u[1][1]}, "predicate": u[2],
             "object": {"start": u[3][0], "end": u[3][1]}}
        if ent:
            o["subject"]["entity"], o["object"]["entity"] = f"{ent}-{u[0]}-{u[1][0]}", f"{ent}-x{u[3][0]}"
        return o

    for name in ("sys-b", "sys-a", "sys-c"):
        mine = [u for u in universe if rng.random() < 0.5]
        (subs / f"{name}.jsonl").write_text("".join(json.dumps(fields(u, name)) + "\n" for u in mine))
        for k in rng.integers(0, len(mine), 12):
            labels.append({"system": name, **fields(mine[k]), "label": int(truth[mine[k]])})
    for u in universe:
        if truth[u] and u[0] in ("doc1", "doc4", "doc6"):
            ex.append(fields(u))
    (tmp / "L.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    (tmp / "E.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ex))
    return ["score", "--labels", str(tmp / "L.jsonl"), "--submissions", str(subs), "--exhaustive",
            str(tmp / "E.jsonl"), "--exhaustive-documents", "3", "--bootstrap", "30", "--seed", "9"]


def _run(argv: list[str], hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed,
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "unpooled.cli.main", *argv], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("level, outputs", [("entity", ([], ["--json"], ["--csv"])), ("relation", (["--json"],))])
def test_same_inputs_and_seed_print_the_same_bytes(tmp_path, level, outputs):
    argv = _inputs(tmp_path) + ["--level", level]
    for out in outputs:
        first = _run(argv + out, "1")
        assert first == _run(argv + out, "2")
        assert "sys-a" in first
