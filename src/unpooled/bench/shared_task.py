"""``unpooled bench shared-task``: a shared task evaluated end to end by the service's own processes.

For each configuration (SQLite with its one task worker, the embedded default; PostgreSQL with each number of
``--workers``), on a fresh database:

1. **build** (a child process): a corpus of ``--documents`` documents with a gold layer -- Re-DocRED's dev and
   test documents from ``../shared/data`` (1,000), repeated under new titles as often as needed, written as DocRED
   files of 1,000 -- whose settings ask the simulated crowd (it answers from the gold layer), the instance level,
   ``--draws`` draws per submission and ``--exhaustive`` documents annotated exhaustively; and ``--submissions``
   KBs (JSONL, :func:`write_kbs`): true facts (70% of one of five "approaches", the rest at random, so that teams
   overlap as real ones do) and wrong facts (a true pair under another relation); by default each a random share of
   the gold relations, or ``--instances MIN-MAX`` each (:func:`kb_sizes`). The build's times (the corpus written
   and loaded, the KBs) and its peak memory are reported.
2. **run**: ``unpooled serve --task-workers W`` (one web process); every KB uploaded at once through the upload
   path (:func:`~unpooled.service.submissions.uploads.start_upload`: the ingest task, then each submission's
   lifecycle); until every submission is published (or failed), the bench polls the database for each
   submission's stage, the task workers' peak resident memory (``VmHWM``), and the leaderboard page's latency
   (one reader, one request a second).

Reported per configuration: the wall time until every submission was published; per stage (ingest: from the
upload to the stored submission; waiting: stored, until its lifecycle starts, i.e. the queue; sampling;
annotating; scoring and publishing) the median and the longest time a
submission spent in it; instances ingested per second and submissions published per hour; the workers' peak
memory; the database's size; the answers and labels the crowd gave; the leaderboard's p50/p95 during the run;
and where the workers' time went (each background task's runs, seconds in all, longest run).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from unpooled.bench import child_pids, free_port, own_database, wait_until_up

STAGES = ("ingest", "waiting", "sampling", "annotating", "scoring")
PG_DATABASE = "unpooled_bench_task"


# -- build (a child process with Django) --------------------------------------------------------------------
def build(cfg: dict) -> dict:
    """The corpus and its settings in the database, the teams' KBs in ``cfg['workdir']``."""
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=True)
    from unpooled.core.corpus import iter_documents
    from unpooled.core.kb.docred import docred_to_jsonl
    from unpooled.service.annotation import actions
    from unpooled.service.corpora.actions import do_load_corpus

    work = Path(cfg["workdir"])
    t0 = time.perf_counter()
    folder = write_corpus(Path(cfg["shared"]) / "redocred", cfg["documents"], work / "corpus")
    write_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    corpus = do_load_corpus(folder, "docred", "shared-task")
    st = actions.settings_for(corpus)
    st.backend, st.levels, st.exhaustive_documents = "simulated", "instance", cfg["exhaustive"]
    st.min_draws = st.max_draws = cfg["draws"]
    st.save()
    load_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    gold_path = work / "gold.jsonl"
    with open(gold_path, "w") as out:
        docred_to_jsonl(iter_documents(folder, "docred"), out)
    files, gold = write_kbs(gold_path, work, cfg["submissions"], cfg.get("instances"), cfg["seed"])
    return {"corpus": corpus.name, "documents": corpus.n_documents, "gold_relations": gold, "files": files,
            "build": {"corpus_mb": round(sum(p.stat().st_size for p in folder.iterdir()) / 2**20, 0),
                      "write_seconds": round(write_seconds, 1), "load_seconds": round(load_seconds, 1),
                      "kbs_seconds": round(time.perf_counter() - t0, 1),
                      "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0)}}


def write_corpus(shared: Path, n: int, folder: Path, per_file: int = 1000) -> Path:
    """``n`` documents in DocRED files of ``per_file`` each under ``folder``: Re-DocRED's dev and test documents
    (1,000), repeated under new titles as often as needed (a corpus is a folder of files, as a real one is: one
    file of 50,000 documents would be parsed whole)."""
    base = []
    for name in ("dev_revised.json", "test_revised.json"):
        base += json.loads((shared / name).read_text())
    folder.mkdir(parents=True, exist_ok=True)
    for start in range(0, n, per_file):
        docs = []
        for k in range(start, min(n, start + per_file)):
            d = dict(base[k % len(base)])
            if k >= len(base):
                d["title"] = f"{d['title']} (copy {k // len(base)})"
            docs.append(d)
        (folder / f"part{start // per_file:05d}.json").write_text(json.dumps(docs))
    return folder


def kb_sizes(n: int, lo: int, hi: int) -> list[int]:
    """``n`` KB sizes between ``lo`` and ``hi`` with density proportional to 1/size² (many small teams, a few large
    ones; mean lo·hi·ln(hi/lo)/(hi - lo): about 51,000 for 20,000-200,000), at the ``n`` quantiles' midpoints so
    that the total is ``n`` times the mean whatever the seed."""
    u = (np.arange(n) + 0.5) / n
    return [int(round(1.0 / (1.0 / lo - x * (1.0 / lo - 1.0 / hi)))) for x in u]


def write_kbs(gold_path: Path, work: Path, submissions: int, instances: list[int] | None,
              seed: int) -> tuple[list[dict], int]:
    """Each team's KB (JSONL), read from the gold layer's lines by offset (never all in memory): true facts, 70% of
    one of five "approaches" and the rest at random, so that teams overlap as real ones do, and wrong facts (a true
    pair under another relation). Without ``instances``, a team keeps a random share (30-80%) of the gold relations
    it may find and adds 5-30% of their number in wrong facts (KBs grow with the corpus); with ``[lo, hi]``, the
    sizes are :func:`kb_sizes` in a random order, 10-40% of each wrong. Returns the KBs and the gold relations."""
    import mmap

    with open(gold_path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        step = 1 << 26  # the line ends 64 MB at a time (a byte mask of the whole file is its size again)
        ends = np.concatenate([np.flatnonzero(np.frombuffer(mm, np.uint8, min(step, len(mm) - k), k) == 10) + k + 1
                               for k in range(0, len(mm), step)])
        starts = np.concatenate([[0], ends[:-1]])
        g = len(ends)
        predicates = sorted({json.loads(mm[starts[i]:ends[i]])["predicate"] for i in range(min(g, 50_000))})
        rng = np.random.default_rng(seed)
        approaches = rng.random((5, g)) < 0.7
        sizes = None if instances is None else rng.permutation(kb_sizes(submissions, *instances))
        files = []
        for t in range(submissions):
            r = np.random.default_rng([seed, t + 1])
            findable = np.flatnonzero((r.random(g) < 0.85) == approaches[t % 5])
            if sizes is None:
                n_true, n_wrong = r.binomial(len(findable), r.uniform(0.3, 0.8)), int(g * r.uniform(0.05, 0.3))
            else:
                n_wrong = int(sizes[t] * r.uniform(0.1, 0.4))
                n_true = min(len(findable), int(sizes[t]) - n_wrong)
            kb = work / f"team{t:03d}.jsonl"
            with open(kb, "wb") as out:
                for i in np.sort(r.choice(findable, n_true, replace=False)):
                    out.write(mm[starts[i]:ends[i]])
                for i in r.choice(g, min(g, n_wrong), replace=False):
                    d = json.loads(mm[starts[i]:ends[i]])
                    k = predicates.index(d["predicate"]) + int(r.integers(1, max(2, len(predicates))))
                    d["predicate"] = predicates[k % len(predicates)]  # another relation (if there is one)
                    out.write(json.dumps(d, ensure_ascii=False).encode() + b"\n")
            files.append({"path": str(kb), "team": f"team{t:03d}", "instances": int(n_true + min(g, n_wrong))})
        return files, g
    finally:
        mm.close()


def upload(cfg: dict) -> dict:
    """Upload every KB at once through the upload path (the ingest tasks, then the lifecycles)."""
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=False)
    from unpooled.service.submissions.storage import store_upload
    from unpooled.service.submissions.uploads import start_upload

    started = time.time()
    for f in cfg["files"]:
        with open(f["path"], "rb") as src:  # stored as the web process stores an upload
            copy = store_upload(iter(lambda: src.read(1 << 20), b""))
        start_upload(copy, corpus=cfg["corpus"], team=f["team"], run="run1", fmt="jsonl",
                     file_name=Path(f["path"]).name, visibility="public", description="", limited=False)
    return {"started": started, "enqueued_seconds": round(time.time() - started, 2)}


# -- the database, read from the bench's own process ----------------------------------------------------------
class Db:
    """Plain reads of the service's database (no Django in the bench's process)."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            import sqlite3

            self.path = url[len("sqlite:///"):]
            self.conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        else:
            import psycopg

            self.path = None
            self.conn = psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True)

    def rows(self, sql: str) -> list[tuple]:
        cur = self.conn.cursor()
        cur.execute(sql)
        got = cur.fetchall()
        if self.path is not None:
            self.conn.commit()  # end the read transaction: the next read sees the workers' writes
        return got

    def size_mb(self) -> float:
        if self.path is not None:
            return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p)) / 2**20
        return self.rows("SELECT pg_database_size(current_database())")[0][0] / 2**20

    def close(self) -> None:
        self.conn.close()


def _peak_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _child(step: str, cfg: dict, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "unpooled.bench.shared_task", step, json.dumps(cfg)], env=env,
                         stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"bench shared-task: the {step} step failed (see above)")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _follow(db: Db, serve_pid: int, n: int, t0: float, limit: float, log) -> tuple[dict, dict]:
    """Poll until the ``n`` submissions are published or failed (or ``limit`` seconds have passed): when each was first seen in each
    status, and the task workers' peak resident memory (kB) by pid."""
    seen: dict[int, dict[str, float]] = {}
    peak: dict[int, int] = {}
    while True:
        now = time.time()
        for sid, status in db.rows("SELECT id, status FROM submissions_submission WHERE is_reference = "
                                   + ("0" if db.path else "false")):
            seen.setdefault(sid, {}).setdefault(status, now)
        for pid in child_pids(serve_pid):
            if "worker --slot" in _cmdline(pid):
                peak[pid] = max(peak.get(pid, 0), _peak_kb(pid))
        if not _unfinished(seen, n):
            return seen, peak
        if now - t0 > limit:
            log("bench shared-task: not every submission finished within the limit")
            return seen, peak
        time.sleep(0.5)


def _unfinished(seen: dict, n: int) -> int:
    """How many of the ``n`` submissions are neither published nor failed."""
    return n - sum(1 for s in seen.values() if "published" in s or "failed" in s)


def _settle(db: Db, timeout: float = 120.0) -> None:
    """Wait (up to ``timeout`` seconds) until no background task is running: the task that published the last
    submission goes on to warm the leaderboards, and the worker time read next counts finished tasks only."""
    deadline = time.time() + timeout
    while time.time() < deadline and db.rows("SELECT COUNT(*) FROM django_tasks_database_dbtaskresult WHERE "
                                             "started_at IS NOT NULL AND finished_at IS NULL")[0][0]:
        time.sleep(0.5)


def _stage_times(seen: dict, t0: float) -> dict[str, list[float]]:
    """Per stage, the seconds each published submission spent in it (from the upload at ``t0``)."""
    order = ["ingested", "sampling", "annotating", "scoring", "published"]
    stages: dict[str, list[float]] = {s: [] for s in STAGES}
    for times in seen.values():
        if "published" not in times:
            continue
        # a stage shorter than the poll is not seen: it starts when the next one seen starts
        at = [t0] + [min(times[s] for s in order[k:] if s in times) for k in range(len(order))]
        for k, name in enumerate(STAGES):
            stages[name].append(at[k + 1] - at[k])
    return stages


def _publications(seen: dict, t0: float) -> dict | None:
    """When the submissions were published (seconds from the upload at ``t0``): the first, the median and the last,
    and the rate between the first and the last (an hour's): the lifecycles' pace once the queue runs, which the
    whole run's rate (``submissions_per_hour``) mixes with the build-up of the ingests and the first lifecycle."""
    at = sorted(times["published"] - t0 for times in seen.values() if "published" in times)
    if not at:
        return None
    span = at[-1] - at[0]
    return {"first": round(at[0], 1), "median": round(statistics.median(at), 1), "last": round(at[-1], 1),
            "per_hour_after_first": round((len(at) - 1) / span * 3600, 1) if span > 0 else None}


# -- one configuration ----------------------------------------------------------------------------------------
def run_one(cfg: dict, *, database_url: str, workers: int, work: Path, log=lambda msg: None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "UNPOOLED_DEBUG"}
    env.update(UNPOOLED_DATA_DIR=str(work / "data"), DATABASE_URL=database_url, UNPOOLED_LOG_LEVEL="WARNING",
               DJANGO_SETTINGS_MODULE="unpooled.service.config.settings", UNPOOLED_RESCORE_DELAY="2")
    (work / "data").mkdir(parents=True, exist_ok=True)
    built = _child("build", {**cfg, "workdir": str(work)}, env)
    instances = sum(f["instances"] for f in built["files"])
    log(f"built: {built['documents']} documents, {built['gold_relations']} gold relations, "
        f"{len(built['files'])} KBs of {instances:,} instances in all; {json.dumps(built['build'])}")
    port = free_port()
    serve_log = open(work / "serve.log", "wb")
    serve = subprocess.Popen([sys.executable, "-m", "unpooled.cli.main", "serve", "--port", str(port),
                              "--web-workers", "1", "--task-workers", str(workers)], env=env, stdout=serve_log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    db = Db(database_url)
    latencies: list[float] = []
    stop = threading.Event()

    def reader():
        url = f"http://127.0.0.1:{port}/corpora/{built['corpus']}/leaderboard/"
        while not stop.wait(1.0):
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    r.read()
                latencies.append((time.perf_counter() - t) * 1000)
            except OSError:
                pass

    try:
        wait_until_up(port, serve, timeout=120)
        up = _child("upload", {**cfg, "workdir": str(work), "corpus": built["corpus"], "files": built["files"]}, env)
        t0 = up["started"]
        threading.Thread(target=reader, daemon=True).start()
        n = len(built["files"])
        seen, peak = _follow(db, serve.pid, n, t0, cfg["limit"], log)
        wall = time.time() - t0
        stop.set()
        if not _unfinished(seen, n):  # past the limit the lifecycles still run: no point waiting for them
            _settle(db)
        failed = sum(1 for s in seen.values() if "failed" in s)
        answers, labels = db.rows("SELECT (SELECT COUNT(*) FROM annotation_answer), "
                                  "(SELECT COUNT(*) FROM annotation_label)")[0]
        tasks = _task_seconds(db.rows("SELECT task_path, started_at, finished_at FROM django_tasks_database_dbtaskresult "
                                      "WHERE started_at IS NOT NULL AND finished_at IS NOT NULL"))
        size = db.size_mb()
    finally:
        stop.set()
        db.close()
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        serve_log.close()
    stages = _stage_times(seen, t0)
    unfinished = _unfinished(seen, n)
    lat = sorted(latencies)
    return {
        "database": "sqlite" if database_url.startswith("sqlite") else "postgresql", "workers": workers,
        "documents": built["documents"], "submissions": n, "instances": instances, "build": built["build"],
        "failed": failed, "unfinished": unfinished,
        "wall_seconds": round(wall, 1), "instances_per_second": round(instances / max(
            max(stages["ingest"], default=wall), 1e-9), 0),
        "submissions_per_hour": round((n - unfinished) / wall * 3600, 1),  # those that ended, not those uploaded
        "stages": {k: {"median": round(statistics.median(v), 1), "max": round(max(v), 1)} if v else None
                   for k, v in stages.items()},
        "published": _publications(seen, t0),
        "peak_worker_mb": round(max(peak.values(), default=0) / 1024, 0), "database_mb": round(size, 0),
        "answers": answers, "labels": labels, "tasks": tasks,
        "leaderboard_ms": {"requests": len(lat), "p50": round(lat[len(lat) // 2], 0) if lat else None,
                           "p95": round(lat[int(0.95 * (len(lat) - 1))], 0) if lat else None},
    }


def _task_seconds(rows) -> dict:
    """Per background task (its function's name): how many ran and the seconds they took, in all and the longest:
    where the workers' time went."""
    from datetime import datetime

    def when(x):
        return x if isinstance(x, datetime) else datetime.fromisoformat(str(x))

    out: dict[str, dict] = {}
    for path, started, finished in rows:
        name = str(path).rsplit(".", 1)[-1]
        d = out.setdefault(name, {"runs": 0, "seconds": 0.0, "longest": 0.0})
        took = (when(finished) - when(started)).total_seconds()
        d["runs"] += 1
        d["seconds"] = round(d["seconds"] + took, 3)
        d["longest"] = round(max(d["longest"], took), 3)
    return out


def run(*, documents: int = 1000, submissions: int = 20, draws: int = 100, exhaustive: int = 20,
        instances: list[int] | None = None, limit: float = 3600.0, workers: list[int] | None = None, postgres: str | None = None, sqlite: bool = True, seed: int = 0,
        shared: str | None = None, as_json: bool = False, verbose: bool = False) -> int:
    from unpooled.demo import find_shared_data

    cfg = {"documents": documents, "submissions": submissions, "draws": draws, "exhaustive": exhaustive,
           "instances": instances, "limit": limit,
           "seed": seed, "shared": str(shared or find_shared_data() or "")}
    if not (Path(cfg["shared"]) / "redocred" / "dev_revised.json").is_file():
        print("bench shared-task: Re-DocRED not found (../shared/data/redocred, or UNPOOLED_SHARED_DATA)",
              file=sys.stderr)
        return 2
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if verbose else (lambda msg: None)
    results = []
    configs = ([("sqlite", 1)] if sqlite else []) + [("postgresql", w) for w in (workers or []) if postgres]
    for engine, w in configs:
        with tempfile.TemporaryDirectory(prefix="unpooled-bench-task-") as tmp, \
                (own_database(postgres, PG_DATABASE) if engine != "sqlite" else nullcontext()) as pg_url:
            work = Path(tmp)
            url = pg_url or f"sqlite:///{work / 'data' / 'unpooled.sqlite3'}"
            log(f"bench shared-task: {engine}, {w} task worker(s)")
            results.append(run_one(cfg, database_url=url, workers=w, work=work, log=log))
            log(json.dumps(results[-1]))
    if as_json:
        print(json.dumps(results))
        return 0 if all(r["failed"] == r["unfinished"] == 0 for r in results) else 1
    if results:
        r0 = results[0]
        print(f"bench shared-task: {r0['documents']:,} documents, {r0['submissions']} submissions of "
              f"{r0['instances']:,} instances in all, {draws} draws each, {exhaustive} exhaustive documents, "
              f"simulated crowd; {os.cpu_count()} CPUs")
    head = (f"  {'database':10} {'workers':>7} {'wall s':>7} {'ingest':>13} {'waiting':>13} {'sampling':>13} "
            f"{'annotating':>13} "
            f"{'scoring':>13} {'inst/s':>7} {'subs/h':>7} {'peak MB':>7} {'db MB':>6} {'labels':>6} {'board p95 ms':>12}")
    print(head + "\n  " + " " * 36 + "(median / max seconds a submission spent in each stage)")
    for r in results:
        st = " ".join(f"{(s['median'] if s else 0):6.1f}/{(s['max'] if s else 0):6.1f}"
                      for s in (r["stages"][k] for k in STAGES))
        print(f"  {r['database']:10} {r['workers']:>7} {r['wall_seconds']:>7.1f} {st} {r['instances_per_second']:>7.0f} "
              f"{r['submissions_per_hour']:>7.1f} {r['peak_worker_mb']:>7.0f} {r['database_mb']:>6.0f} "
              f"{r['labels']:>6} {str(r['leaderboard_ms']['p95']):>12}" + (f"  {r['failed']} FAILED" if r["failed"] else "")
              + (f"  {r['unfinished']} NOT FINISHED in {limit:.0f} s" if r["unfinished"] else ""))
        b = r["build"]
        print("  " + " " * 36 + f"build: corpus {b['corpus_mb']:.0f} MB written in {b['write_seconds']:.0f} s, "
              f"loaded in {b['load_seconds']:.0f} s; KBs {b['kbs_seconds']:.0f} s; peak {b['peak_mb']:.0f} MB")
        if r["published"]:
            pub = r["published"]
            pace = pub["per_hour_after_first"]
            print("  " + " " * 36 + f"published: the first {pub['first']:.0f} s after the uploads, the median "
                  f"{pub['median']:.0f} s, the last {pub['last']:.0f} s"
                  + (f"; from the first on {pace:.1f} an hour" if pace is not None else ""))
        print("  " + " " * 36 + "worker time: " + ", ".join(
            f"{k} {v['runs']} x, {v['seconds']:.0f} s (longest {v['longest']:.0f} s)" for k, v in r["tasks"].items()))
    return 0 if all(r["failed"] == r["unfinished"] == 0 for r in results) else 1


if __name__ == "__main__":  # python -m unpooled.bench.shared_task build|upload CFG
    step, cfg = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({"build": build, "upload": upload}[step](cfg)))
