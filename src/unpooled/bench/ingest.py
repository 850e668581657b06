"""``unpooled bench ingest``: validation plus storage of a large synthetic TAC KB.

Steps: generate a synthetic corpus and a valid Cold Start KB of ``--lines``
lines (:mod:`unpooled.core.kb.synthetic`), load the corpus into the database
named by ``DATABASE_URL`` (a fresh SQLite file by default), then run the
ingestion -- parse, validate, store in one transaction -- in a fresh process
and report its wall time and peak resident memory.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from unpooled.bench import child_env


def prepare(workdir: Path, n_lines: int, seed: int = 0) -> tuple[Path, Path, int]:
    from unpooled.core.kb.synthetic import write_synthetic_tac

    docs: list = []
    kb_path = workdir / "synthetic.kb"
    with open(kb_path, "w", encoding="utf-8") as out:
        lines, _ = write_synthetic_tac(out, n_lines, rng=seed, docs_out=docs)
    corpus_path = workdir / "corpus.jsonl"
    with open(corpus_path, "w", encoding="utf-8") as out:
        for d in docs:
            out.write(json.dumps({"id": d.id, "text": d.text, "title": d.title, "sentences": d.sentences}) + "\n")
    return kb_path, corpus_path, lines


def child(kb_path: str, corpus: str) -> None:
    """Run in a fresh process: ingest and print timings and peak RSS as JSON."""
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=False)
    from django.db import connection

    from unpooled.service.submissions.actions import do_ingest_submission

    marks = {}
    t0 = time.perf_counter()
    last = [t0]

    def timer(stage: str) -> None:
        now = time.perf_counter()
        marks[stage] = round(now - last[0], 3)
        last[0] = now

    res = do_ingest_submission(kb_path, corpus, "bench", f"run-{uuid.uuid4().hex[:8]}", "tac", timer=timer)
    seconds = time.perf_counter() - t0
    print(json.dumps({
        "ok": res.ok, "seconds": round(seconds, 2), "stages": marks,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "database": connection.vendor, "counts": res.report.counts,
        "errors": [d.format() for d in res.report.errors[:5]],
    }))


def run(n_lines: int, *, as_json: bool, keep: bool = False, seed: int = 0) -> int:
    from unpooled.progress import progress_bar

    with tempfile.TemporaryDirectory(prefix="unpooled-bench-") as tmp:
        work = Path(tmp)
        env = child_env(work)
        steps = ["generate", "load corpus", "ingest"]
        with progress_bar(total=len(steps), desc="bench ingest", unit="step") as bar:
            bar.set_postfix_str("generating")
            kb_path, corpus_path, lines = prepare(work, n_lines, seed)
            bar.update(1)
            corpus = f"bench-{uuid.uuid4().hex[:8]}"
            bar.set_postfix_str("loading corpus")
            subprocess.run([sys.executable, "-m", "unpooled.cli.main", "corpus", "load", str(corpus_path),
                            "--format", "jsonl", "--name", corpus, "--json"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            bar.update(1)
            bar.set_postfix_str("ingesting")
            out = subprocess.run([sys.executable, "-m", "unpooled.bench.ingest", "--child", str(kb_path), corpus],
                                 env=env, check=True, capture_output=True, text=True)
            bar.update(1)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if not keep and got.get("database") == "postgresql":
            _cleanup_pg(env, corpus)
    result = {"lines": lines, "seconds": got["seconds"], "peak_rss_mb": got["peak_rss_mb"], "database": got["database"]}
    if as_json:
        print(json.dumps(result))
    else:
        c = got["counts"]
        print(f"ingest {lines:,} lines on {got['database']}: {got['seconds']:.1f} s "
              f"(validate {got['stages'].get('validate', 0):.1f} s, store {got['stages'].get('store', 0):.1f} s), "
              f"peak RSS {got['peak_rss_mb']:.0f} MB; {c.get('instances', 0):,} instances, "
              f"{c.get('mentions', 0):,} mentions, {c.get('entities', 0):,} entities")
    if not got["ok"]:
        print("bench: the generated KB was rejected:\n" + "\n".join(got["errors"]), file=sys.stderr)
        return 3
    return 0


def _cleanup_pg(env: dict, corpus: str) -> None:
    """Remove the benchmark's corpus and submission from a shared PostgreSQL database."""
    code = (
        "from unpooled.service.config.bootstrap import setup_django; setup_django(migrate=False)\n"
        "from unpooled.service.corpora.models import Corpus\n"
        "from unpooled.service.submissions.models import Submission\n"
        f"Submission.objects.filter(corpus__name={corpus!r}).delete(); Corpus.objects.filter(name={corpus!r}).delete()\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=False)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
