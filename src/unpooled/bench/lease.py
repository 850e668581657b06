"""``unpooled bench lease``: the crowd path's per-call cost -- a lease, an answer, the count of items left -- as the
open verification items grow.

In a database of its own (SQLite: a fresh file; PostgreSQL with ``--postgres URL``: a database
``unpooled_bench_lease`` made on that server and dropped afterwards; the URL's query is kept, so
``?options=-c%20jit%3Doff`` runs it with PostgreSQL's JIT off), in one process:

* a synthetic corpus and two submissions of two teams (the generators of ``bench rescore``), ingested through
  :func:`~unpooled.service.submissions.actions.do_ingest_submission`; ``--controls`` gold controls;
  ``--annotators`` invited in-house annotators, every other one a member of the second submission's team (whose
  items they may not label: the scope's exclusions run);
* for each size of ``--open-tasks`` (ascending), verification requested
  (:func:`~unpooled.service.annotation.actions.request_verification`, the real tasks and requests) until that many
  items are open, then (PostgreSQL) ``ANALYZE``, as autovacuum would after a bulk load;
* a warm-up round, then ``--rounds`` rounds in which each annotator in turn takes an item as the simulated crowd
  does (``lease_next`` with the corpus) and answers it, takes one from the web queue (``lease_next`` without a
  corpus, as ``/annotate/next/<kind>/``) and answers it, counts the items left for them (``count_leasable``, the
  cache miss of a task page's progress) and reads a task page's progress (``progress``: that count kept a minute).

Reported per size and operation: calls, median and p95 milliseconds, SQL queries per call, and the CPU of this
process and (PostgreSQL) of its database backend per call; the load average beside.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from unpooled.bench import cpu_ticks, own_database, percentile, run_child
from unpooled.bench.controls import HOLDS, NONE

PG_DATABASE = "unpooled_bench_lease"
OPS = ("lease_crowd", "answer", "lease_web", "count_leasable", "progress")
LABELS = {"lease_crowd": "lease (crowd: corpus)", "answer": "answer", "lease_web": "lease (web queue)",
          "count_leasable": "count_leasable", "progress": "progress (task page)"}
#: the annotators' kinds, reported apart: a member of a submitting team asks the scope's exclusions of every item
WHO = ("no_team", "team")


# -- the data (in the child process) ------------------------------------------------------------------
def _build(cfg: dict, most: int) -> dict:
    """The corpus, its two submissions, the keys that may be asked for (in order, each with its first submission's
    instance), the gold controls and the annotators."""
    from django.contrib.auth import get_user_model

    from unpooled.bench import rescore as gen  # the corpus and system generators of bench rescore
    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.annotation.models import Annotator, Backend
    from unpooled.service.submissions.actions import do_ingest_submission
    from unpooled.service.submissions.models import RelationInstance

    work, seed = Path(cfg["workdir"]), cfg["seed"]
    # two systems of about ``most`` instances; their union has more distinct keys than ``most`` plus what is answered
    n = most + 2 * cfg["annotators"] * (cfg["rounds"] + 1) + 20
    corpus, (docs, gold, wrong, _, _) = gen.load_generated_corpus(work, n, seed, "lease",
                                                                   title="bench lease: generated corpus")
    name = corpus.name
    subs = []
    for i, rows in enumerate(gen._systems(2, n, gold, wrong, seed)):
        p = work / f"sys{i}.jsonl"
        gen._write_system(p, rows)
        res = do_ingest_submission(p, name, f"lease-team{i}", "run0", "jsonl")
        if not res.ok:
            raise RuntimeError(f"system {i} rejected: {[d.format() for d in res.report.errors[:3]]}")
        subs.append(res.submission)
    keys: dict[str, tuple] = {}
    for sub in subs:
        for pk, key in RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", "key"):
            keys.setdefault(key, (sub, pk))
    User = get_user_model()
    annotators = []
    for i in range(cfg["annotators"]):
        user = User.objects.create_user(f"{name}-{i:02d}")
        Profile.objects.create(user=user, role=Role.ANNOTATOR, invited=True, team=subs[1].team if i % 2 else None)
        annotators.append(Annotator.objects.create(backend=Backend.INHOUSE, external_id=user.get_username(),
                                                   user=user))
    return {"corpus": corpus, "keys": list(keys.values()), "next": 0, "annotators": annotators, "controls": 0,
            "instances": RelationInstance.objects.filter(submission__corpus=corpus).count()}


def _open_items(corpus):
    from unpooled.service.annotation.models import Kind, Task

    return Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, status=Task.Status.OPEN, is_control=False)


def _top_up(world: dict, n: int) -> int:
    """Ask for verification until ``n`` items are open: the next keys, each by its first submission."""
    from unpooled.service.annotation.actions import request_verification

    need = n - _open_items(world["corpus"]).count()
    if need <= 0:
        return 0
    batch = world["keys"][world["next"]:world["next"] + need]
    if len(batch) < need:
        raise RuntimeError(f"only {len(world['keys'])} distinct instances to ask for: too few for {n} open items")
    world["next"] += need
    by_sub: dict = {}
    for sub, pk in batch:
        by_sub.setdefault(sub.pk, (sub, []))[1].append(pk)
    made = sum(request_verification(sub, ids).created for sub, ids in by_sub.values())
    if made != need:
        raise RuntimeError(f"asked for {need} items, {made} made (a budget?)")
    return made


def _make_controls(world: dict, n: int) -> None:
    """``n`` gold controls, copies of open items' payloads (half correct), as ``create_verify_controls`` makes them
    from a gold layer (this corpus has none)."""
    from django.utils import timezone

    from unpooled.service.annotation.models import Task

    now = timezone.now()
    Task.objects.bulk_create([
        Task(corpus=t.corpus, kind=t.kind, document_id=t.document_id, key=f"control:{t.key}", payload=t.payload,
             group=t.group, answers_needed=0, priority=now, is_control=True, control_answer={"correct": j % 2 == 0},
             guideline_version=t.guideline_version)
        for j, t in enumerate(_open_items(world["corpus"]).order_by("pk")[:n])])
    world["controls"] = n


# -- the timing -----------------------------------------------------------------------------------------
class _Meter:
    """Per operation and kind of annotator (:data:`WHO`): wall milliseconds of each call, and the queries and CPU
    (this process's, and its PostgreSQL backend's) they spent."""

    def __init__(self) -> None:
        from django.db import connection

        self.connection = connection
        self.queries = 0
        connection.ensure_connection()
        self.backend = None
        if connection.vendor == "postgresql":
            with connection.cursor() as c:
                c.execute("SELECT pg_backend_pid()")
                self.backend = c.fetchone()[0]
        self.rows = {(op, who): {"ms": [], "queries": 0, "cpu": 0.0, "db": 0} for op in OPS for who in WHO}

    def _count(self, execute, sql, params, many, context):
        self.queries += 1
        return execute(sql, params, many, context)

    def __call__(self, op: str | None, who: str, fn):
        """``fn()``, timed under ``op`` and ``who`` (``op`` ``None``: a warm-up call, not kept)."""
        with self.connection.execute_wrapper(self._count):
            q0, c0, d0 = self.queries, time.process_time(), self._db()
            t0 = time.perf_counter()
            got = fn()
            ms = (time.perf_counter() - t0) * 1000
            if op is not None:
                r = self.rows[op, who]
                r["ms"].append(ms)
                r["queries"] += self.queries - q0
                r["cpu"] += time.process_time() - c0
                r["db"] += self._db() - d0
        return got

    def _db(self) -> int:
        return cpu_ticks([self.backend]).get(self.backend, 0) if self.backend else 0

    def figures(self) -> dict:
        """``{op: {"all" | who: {"calls", "median_ms", "p95_ms", "queries", "cpu_ms", "db_cpu_ms"}}}``: per call."""
        tick = os.sysconf("SC_CLK_TCK")

        def one(rows):
            ms = sorted(x for r in rows for x in r["ms"])
            n = len(ms) or 1
            return {"calls": len(ms), "median_ms": round(statistics.median(ms), 3) if ms else None,
                    "p95_ms": round(percentile(ms, 0.95), 3) if ms else None,
                    "queries": round(sum(r["queries"] for r in rows) / n, 2),
                    "cpu_ms": round(1000 * sum(r["cpu"] for r in rows) / n, 3),
                    "db_cpu_ms": round(1000 * sum(r["db"] for r in rows) / tick / n, 3) if self.backend else None}

        return {op: {"all": one([self.rows[op, w] for w in WHO]), **{w: one([self.rows[op, w]]) for w in WHO}}
                for op in OPS}


def _round(world: dict, meter: _Meter, timed: bool) -> None:
    """Each annotator in turn: a crowd lease and its answer, a web-queue lease and its answer, the count of items
    left, a task page's progress."""
    from unpooled.service.annotation import actions, leasing
    from unpooled.service.annotation.models import Kind

    corpus = world["corpus"]
    for i, ann in enumerate(world["annotators"]):
        who = WHO[i % 2]
        for op, kw in (("lease_crowd", {"corpus": corpus}), ("lease_web", {})):
            lease = meter(op if timed else None, who, lambda: leasing.lease_next(ann, kind=Kind.VERIFY, **kw))
            if lease is None:
                raise RuntimeError(f"no item for annotator {ann.pk} ({op})")
            right = (lease.task.control_answer or {}).get("correct") if lease.task.is_control else lease.pk % 2 == 0
            meter("answer" if timed else None, who,
                  lambda: actions.submit_answer(lease, HOLDS if right else NONE, seconds=7))
        meter("count_leasable" if timed else None, who, lambda: leasing.count_leasable(ann, kind=Kind.VERIFY))
        meter("progress" if timed else None, who, lambda: leasing.progress(ann, Kind.VERIFY))


def _size(world: dict, n: int, rounds: int) -> dict:
    from django.db import connection

    from unpooled.service.annotation.models import Task

    t0 = time.perf_counter()
    _top_up(world, n)
    if connection.vendor == "postgresql":
        with connection.cursor() as c:
            c.execute("ANALYZE")
    setup = time.perf_counter() - t0
    meter = _Meter()
    _round(world, meter, timed=False)
    _top_up(world, n)
    for _ in range(rounds):
        _round(world, meter, timed=True)
    return {"open_tasks": n, "tasks": Task.objects.filter(corpus=world["corpus"]).count(),
            "setup_seconds": round(setup, 2), "ops": meter.figures()}


def child(cfg: dict) -> None:
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=True)
    from django.db import connection

    sizes = sorted(cfg["open_tasks"])
    t0 = time.perf_counter()
    world = _build(cfg, sizes[-1])
    _top_up(world, sizes[0])
    _make_controls(world, cfg["controls"])
    build = time.perf_counter() - t0
    jit = None
    if connection.vendor == "postgresql":
        with connection.cursor() as c:
            c.execute("SHOW jit")
            jit = c.fetchone()[0]
    out = [_size(world, n, cfg["rounds"]) for n in sizes]
    print(json.dumps({"database": connection.vendor, "jit": jit, "annotators": cfg["annotators"],
                      "controls": world["controls"], "rounds": cfg["rounds"], "instances": world["instances"],
                      "distinct_keys": len(world["keys"]), "build_seconds": round(build, 1),
                      "sizes": out, "loadavg": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}))


# -- orchestration ----------------------------------------------------------------------------------------
def run(*, open_tasks: list[int], annotators: int = 6, rounds: int = 5, controls: int = 20,
        postgres: str | None = None, sqlite: bool = True, seed: int = 0, keep: bool = False,
        as_json: bool = False) -> int:
    cfg = {"open_tasks": open_tasks, "annotators": annotators, "rounds": rounds, "controls": controls, "seed": seed}
    results = []
    for engine in (["sqlite"] if sqlite else []) + (["postgresql"] if postgres else []):
        with tempfile.TemporaryDirectory(prefix="unpooled-bench-lease-") as tmp, \
                (own_database(postgres, PG_DATABASE, keep=keep) if engine != "sqlite" else nullcontext()) as url:
            work = Path(tmp)
            got = run_child("lease", {**cfg, "workdir": tmp}, work, url or f"sqlite:///{work / 'bench.sqlite3'}")
        if got is None:
            return 3
        results.append(got)
    if as_json:
        print(json.dumps(results))
        return 0
    for r in results:
        jit = f", JIT {r['jit']}" if r["jit"] else ""
        print(f"bench lease on {r['database']}{jit}: {r['annotators']} annotators (every other one in a submitting "
              f"team), {r['controls']} gold controls, {r['rounds']} rounds after a warm-up; built in "
              f"{r['build_seconds']:.1f} s; load average {' '.join(map(str, r['loadavg']))} on {r['cpus']} CPUs")
        print(f"  {'open tasks':>10} {'operation':22} {'annotators':10} {'calls':>5} {'median ms':>9} {'p95 ms':>8} "
              f"{'queries':>7} {'CPU ms':>7} {'db CPU ms':>9}")
        for s in r["sizes"]:
            for op in OPS:
                for who in WHO:
                    f = s["ops"][op][who]
                    db = "" if f["db_cpu_ms"] is None else f"{f['db_cpu_ms']:9.2f}"
                    print(f"  {s['open_tasks']:>10,} {LABELS[op]:22} {who.replace('_', ' '):10} {f['calls']:5d} "
                          f"{f['median_ms']:9.2f} {f['p95_ms']:8.2f} {f['queries']:7.1f} {f['cpu_ms']:7.2f} {db:>9}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: python -m unpooled.bench.lease --child CONFIG")
