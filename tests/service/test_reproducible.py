"""The same inputs and seed publish the same numbers: ``unpooled evaluate --crowd simulated --seed 5`` run twice in
separate processes on fresh databases, with different ``PYTHONHASHSEED`` and, in the second run, the database
returning the rows of unordered queries in another order.  The first run is on SQLite (a fresh data directory);
the second on SQLite with ``reverse_unordered_selects``, or, when ``DATABASE_URL`` is set (``./dev test``'s
PostgreSQL pass), on a fresh PostgreSQL database of that server without sequential scans, so that pass also
compares the two databases.  Every published field of every score must be equal, to the last bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from .test_annotation_e2e import _system_jsonl

pytestmark = pytest.mark.db

RUN = r"""
import json, os, sys
from django.db.backends.signals import connection_created


def other_row_order(sender, connection, **kw):
    with connection.cursor() as c:
        if connection.vendor == "sqlite":
            c.execute("PRAGMA reverse_unordered_selects = ON")
        elif connection.vendor == "postgresql":
            c.execute("SET enable_seqscan = off")


if os.environ.get("REPRO_OTHER_ROW_ORDER"):
    connection_created.connect(other_row_order)
from unpooled.cli.main import main

corpus, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
assert main(["corpus", "load", corpus, "--name", "rc"]) == 0
for i, f in enumerate(files):
    assert main(["submit", f, "--corpus", "rc", "--team", f"team{i}", "--run", "run"]) == 0
assert main(["evaluate", "--corpus", "rc", "--crowd", "simulated", "--seed", "5", "--documents", "4", "--labels",
             "60", "--controls", "30", "--json"]) == 0

from django.forms.models import model_to_dict
from unpooled.service.evaluations.models import EntityScore, Score


def published(obj):
    d = model_to_dict(obj)
    for k in ("id", "created"):
        d.pop(k, None)
    if "breakdown" in d:  # a score's breakdown, as its readers see it (its row's id aside)
        from unpooled.service.evaluations.breakdown import stored

        d["breakdown"] = {k: v for k, v in (stored(obj) or {}).items() if k != "score"}
    return d


with open(out, "w") as f:
    json.dump({"scores": [published(s) for s in Score.objects.order_by("submission_id", "level", "id")],
               "entity": [published(s) for s in EntityScore.objects.order_by("submission_id", "level", "id")]},
              f, default=str)
"""


def _differences(a, b, path: str = "") -> list[str]:
    """Where two dumps differ, but for the moments things were computed at (``computed``) and the digest of the
    database's state a breakdown was computed from (``inputs``: row ids and creation times, breakdown.py)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) if k not in ("computed", "inputs")
                for d in _differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@contextmanager
def _fresh_database(name: str, postgres: bool):
    """``DATABASE_URL`` of a fresh database: none (SQLite in the data directory) unless ``postgres`` and one is in
    the environment, then a new PostgreSQL database on the same server, dropped afterwards."""
    url = os.environ.get("DATABASE_URL")
    if not url or not postgres:
        yield None
        return
    import psycopg

    base, _, _ = url.rpartition("/")
    db = f"repro_{uuid.uuid4().hex[:10]}_{name}"
    with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    try:
        yield f"{base}/{db}"
    finally:
        with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def _evaluate(tmp: Path, name: str, hash_seed: str, files: list[Path], *, other_row_order: bool,
              postgres: bool) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "UNPOOLED_SECRET_KEY", "UNPOOLED_CACHE", "REPRO_OTHER_ROW_ORDER")}
    src = Path(__file__).resolve().parents[2] / "src"
    env.update(PYTHONHASHSEED=hash_seed, UNPOOLED_DATA_DIR=str(tmp / f"data-{name}"),
               PYTHONPATH=os.pathsep.join([str(src), env.get("PYTHONPATH", "")]))
    if other_row_order:
        env["REPRO_OTHER_ROW_ORDER"] = "1"
    out = tmp / f"{name}.json"
    with _fresh_database(name, postgres) as url:
        if url:
            env["DATABASE_URL"] = url
        proc = subprocess.run([sys.executable, "-c", RUN, str(files[0]), str(out), *map(str, files[1:])], env=env,
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_the_same_inputs_and_seed_publish_the_same_numbers(shared_data, tmp_path):
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:12]))
    files = [corpus]
    for i, keep in enumerate((0.8, 0.3)):
        files.append(tmp_path / f"system{i}.jsonl")
        _system_jsonl(corpus, files[-1], rng=i, keep=keep)
    a = _evaluate(tmp_path, "a", "1", files, other_row_order=False, postgres=False)
    b = _evaluate(tmp_path, "b", "4242", files, other_row_order=True, postgres=True)
    assert len(a["scores"]) == 2 and all(s["p"] is not None and s["r"] is not None for s in a["scores"])
    assert a["entity"], "the entity scores are published too"
    diff = _differences(a, b)
    assert not diff, f"{len(diff)} differences: " + "; ".join(diff[:10])


@pytest.mark.django_db
def test_the_sampling_secret_keys_the_lifecycle_samples_and_the_audit_prints_it(shared_data, tmp_path, capsys,
                                                                               settings):
    from unpooled.cli.main import main
    from unpooled.service.evaluations.lifecycle import draw_up_to, sampling_key, stage_sampling
    from unpooled.service.evaluations.models import Draw

    from ..conftest import load_redocred_subset

    _, sub, _ = load_redocred_subset(shared_data, tmp_path, 5, "audited")

    def drawn(secret: str) -> list[str]:
        settings.SAMPLING_SECRET = secret
        Draw.objects.filter(submission=sub).delete()
        draw_up_to(sub, "instance", 40)
        return list(Draw.objects.filter(submission=sub).order_by("seq").values_list("key", flat=True))

    first = drawn("one")
    assert len(first) == 40 and drawn("one") == first  # the secret reproduces the draws
    assert drawn("two") != first  # and without it they cannot be told
    settings.SAMPLING_SECRET = "one"
    stage_sampling(sub)
    assert main(["corpus", "audit", "audited"]) == 0
    got = capsys.readouterr()
    audit = json.loads(got.out)
    assert audit["sampling_secret"] == "one" and audit["sampling_key"] == sampling_key()
    assert audit["exhaustive_documents"] == [{"scheme": "uniform", "stage": 1, "seed": sampling_key()}]
    assert "give it to the auditor only" in got.err
    assert main(["corpus", "audit", "nosuch"]) == 3


@pytest.mark.django_db
def test_the_upload_order_does_not_change_the_numbers(shared_data, tmp_path, capsys):
    """A batch ``evaluate`` draws each submission from a seed of its contents and queues their items in an order
    of their contents, so the same files uploaded in the other order publish the same numbers (to rounding: the
    systems are summed in another order)."""
    from unpooled.cli.main import main
    from unpooled.service.annotation.models import Annotator
    from unpooled.service.evaluations.models import Score

    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:10]))
    files = []
    for i, keep in enumerate((0.8, 0.3)):
        files.append(tmp_path / f"system{i}.jsonl")
        _system_jsonl(corpus, files[-1], rng=i, keep=keep)
    published = []
    for name, order in (("upfirst", (0, 1)), ("uplast", (1, 0))):
        Annotator.objects.filter(backend="simulated").update(blocked=False, controls_answered=0, controls_correct=0)
        assert main(["corpus", "load", str(corpus), "--name", name]) == 0
        for i in order:
            assert main(["submit", str(files[i]), "--corpus", name, "--team", f"team{i}", "--run", "run"]) == 0
        assert main(["evaluate", "--corpus", name, "--crowd", "simulated", "--seed", "5", "--documents", "4",
                     "--labels", "60", "--controls", "30", "--json"]) == 0
        capsys.readouterr()
        published.append({(s.submission.team.name, s.level): [getattr(s, k) for k in (
            "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "draws", "labels_new", "labels_reused")]
            for s in Score.objects.filter(submission__corpus__name=name).select_related("submission__team")})
    a, b = published
    assert len(a) == 2 and sorted(a) == sorted(b)
    for k in a:
        assert b[k] == pytest.approx(a[k], abs=1e-9), k
