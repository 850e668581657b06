"""``unpooled bench pages``: latency of the leaderboard, submission and annotation task pages under load.

Steps, each in its own process:

1. **build** -- in the database named by ``DATABASE_URL`` (PostgreSQL: a database of its own,
   ``unpooled_bench_pages`` on the same server, dropped afterwards; default a fresh SQLite file):
   a synthetic corpus and ``--submissions`` JSONL submissions of about ``--instances`` instances
   each, ingested through :func:`~unpooled.service.submissions.actions.do_ingest_submission` (the
   generators of ``bench rescore``: teams share correct instances, popular mistakes recur);
   ``--draws`` draws per submission at each level (instance, relation, entity); a verification
   task, three simulated answers and a majority label for every drawn key, with the requests
   (:class:`~unpooled.service.annotation.models.TaskRequest`) of the submissions that drew it;
   exhaustively annotated documents; the scores of every level (``score_corpus``) plus
   ``--history`` older generations of them (each label batch re-scores the corpus and appends
   one Score per submission and level) and their breakdowns (as the re-scoring task computes
   them); every submission published.  For the task page, one
   in-house annotator per client, with a session and an open lease on a verification task
   (made by ``request_verification``: the real payload) and on an entity task.  On PostgreSQL,
   ``ANALYZE`` at the end, as autovacuum would after a bulk load (this machine's server runs
   with autovacuum off; without statistics the planner picks nested loops over every score).
2. **serve** -- gunicorn as ``unpooled serve`` runs it (``serve.web_server_command``: 2 processes per
   CPU, one thread each, DEBUG off).
3. **drive** -- from a separate process, ``--clients`` threads in closed loop, each with its own
   keep-alive connection, page by page: a warm-up, then ``--requests`` timed requests.  A
   response counts as an error unless it is ``200`` with the page's marker in it.
   Before the submission page's timed requests, one client views every submission's page once
   (``first_view``): a page is rendered on its first view after a new score and then served from
   the cache shared by the server's processes, so the timed phase is the steady state.

Reported per page: requests, errors, p50/p95/p99/max latency (ms), throughput, response size,
and the CPU the gunicorn workers (and the PostgreSQL backends of the bench database) spent per
timed request (the warm-up's cold renders are not counted: a cache miss's cost is reported apart);
plus the machine's CPU count and load average.  The targets (:data:`TARGETS`): a cached leaderboard or submission
page costs at most 2 ms of server CPU and its p95 is at most 100 ms; a task page costs at most 5 ms (its latency
at 100 clients is the closed loop's arithmetic: clients x CPU per request / cores).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from unpooled.bench import child_pids, cpu_ticks, free_port, percentile, pg_admin, wait_until_up, with_database
from unpooled.service.evaluations.policy import SERVICE_LEVELS as LEVELS

#: per page: (server CPU ms a request, p95 ms or None) at most
TARGETS = {**{p: (2.0, 100.0) for p in ("leaderboard_instance", "leaderboard_relation", "leaderboard_entity",
                                        "submission")}, "task_verify": (5.0, None), "task_entities": (5.0, None)}
PAGES = tuple(TARGETS)
PG_DATABASE = "unpooled_bench_pages"


# -- build (a fresh process with Django) -------------------------------------------------------------
def build(cfg: dict) -> dict:
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=True)
    import secrets
    from datetime import timedelta

    import numpy as np
    from django.conf import settings as django_settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection, transaction
    from django.utils import timezone

    from unpooled.bench import rescore as gen  # the corpus and system generators of bench rescore
    from unpooled.core.kb.model import instance_key
    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.annotation.actions import request_verification
    from unpooled.service.annotation.models import Annotator, Assignment, Backend, Kind, Task, TaskRequest
    from unpooled.service.corpora.models import Document
    from unpooled.service.evaluations.draws import draw
    from unpooled.service.evaluations.publish import score_corpus
    from unpooled.service.evaluations.models import Draw, Score
    from unpooled.service.submissions.actions import do_ingest_submission
    from unpooled.service.submissions.models import RelationInstance, Submission

    m, n, seed, n_draws = cfg["submissions"], cfg["instances"], cfg["seed"], cfg["draws"]
    work = Path(cfg["workdir"])
    log = (lambda msg: print(f"bench pages: {msg}", file=sys.stderr, flush=True)) if cfg.get("verbose") \
        else (lambda msg: None)
    setup: dict[str, float] = {}
    t0 = time.perf_counter()
    corpus, (docs, gold, wrong, spans, _) = gen.load_generated_corpus(work, n, seed, "pages",
                                                                       title="bench pages: generated corpus")
    name = corpus.name
    systems = gen._systems(m, n, gold, wrong, seed)
    truth = {instance_key(*inst[:7]): ok for rows in systems for inst, ok in rows}
    setup["generate"] = time.perf_counter() - t0
    log(f"corpus {name}: {len(docs)} documents")

    t0 = time.perf_counter()
    subs = []
    for i, rows in enumerate(systems):
        p = work / f"sys{i:03d}.jsonl"
        gen._write_system(p, rows)
        res = do_ingest_submission(p, name, f"team{i // 5:02d}", f"run{i % 5}", "jsonl")
        p.unlink()
        if not res.ok:
            raise RuntimeError(f"system {i} rejected: {[d.format() for d in res.report.errors[:3]]}")
        subs.append(res.submission)
        if (i + 1) % 10 == 0:
            log(f"ingested {i + 1}/{m} submissions ({time.perf_counter() - t0:.0f} s)")
    setup["ingest"] = time.perf_counter() - t0

    # draws at every level, a label for every drawn key, the requests of the submissions that drew it
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed + 5)
    for sub in subs:
        for level in LEVELS:
            draw(sub, n_draws, level=level, rng=rng)
    drawn = list(dict.fromkeys(Draw.objects.filter(submission__corpus=corpus).order_by("id")
                               .values_list("key", flat=True)))
    gen._Labeller(corpus, seed, truth, spans).label(drawn)
    task_of = dict(Task.objects.filter(corpus=corpus, kind=Kind.VERIFY).values_list("key", "id"))
    requested: set[int] = set()
    reqs = []
    for sub in subs:
        keys = dict.fromkeys(Draw.objects.filter(submission=sub).order_by("id").values_list("key", flat=True))
        for k in keys:
            tid = task_of[k]
            reqs.append(TaskRequest(task_id=tid, submission=sub, committed_cents=0 if tid in requested else 15))
            requested.add(tid)
    TaskRequest.objects.bulk_create(reqs, batch_size=2000)
    for sub in subs:
        sub.plan = {lv: {"draws": n_draws, "min": 20, "max": 500} for lv in LEVELS}
    Submission.objects.bulk_update(subs, ["plan"])
    n_exhaustive = gen._exhaustive(corpus, docs, spans, gold, cfg["documents"], seed)
    setup["draws_labels"] = time.perf_counter() - t0
    log(f"{len(drawn)} labelled keys, {n_exhaustive} exhaustive documents ({setup['draws_labels']:.0f} s)")

    # scores: the real ones, after ``history - 1`` older generations (perturbed copies)
    t0 = time.perf_counter()
    generations = []
    for level in LEVELS:
        got = score_corpus(corpus, level=level)
        Score.objects.filter(pk__in=[s.pk for s in got]).delete()
        generations.append(got)
    jitter = np.random.default_rng(seed + 6)
    fields = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")
    with transaction.atomic():
        for g in range(cfg["history"]):
            last = g == cfg["history"] - 1
            batch = []
            for got in generations:
                for s in got:
                    c = Score(**{f.attname: getattr(s, f.attname) for f in Score._meta.concrete_fields
                                 if f.attname != "id"})
                    if not last:
                        for f in fields:
                            v = getattr(c, f)
                            if v is not None:
                                setattr(c, f, min(1.0, max(0.0, v + float(jitter.normal(0, 0.02)))))
                        c.draws = max(0, s.draws - (cfg["history"] - 1 - g) * 3)
                    batch.append(c)
            Score.objects.bulk_create(batch, batch_size=2000)
    now = timezone.now()
    Submission.objects.filter(corpus=corpus).update(status=Submission.Status.PUBLISHED, status_changed=now)
    setup["score"] = time.perf_counter() - t0
    log(f"{Score.objects.filter(submission__corpus=corpus).count()} scores ({setup['score']:.0f} s)")
    # the breakdowns of the newest scores, as the re-scoring task computes them after each label batch
    from unpooled.service.evaluations.breakdown import compute_breakdowns

    t0 = time.perf_counter()
    for level in LEVELS:
        compute_breakdowns(corpus, level)
    setup["breakdowns"] = time.perf_counter() - t0
    log(f"breakdowns of the newest scores at {len(LEVELS)} levels ({setup['breakdowns']:.0f} s)")

    # annotators with a session and open leases (a verification task, an entity task)
    User = get_user_model()
    free = list(RelationInstance.objects.filter(submission=subs[0]).exclude(key__in=drawn).order_by("pk")
                .values_list("pk", flat=True)[:cfg["clients"]])
    request_verification(subs[0], free)
    verify = list(Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, status=Task.Status.OPEN).order_by("id"))
    if not verify:
        raise RuntimeError("no instance left without a label for the verification task page: raise --instances")
    busy = set(Task.objects.filter(corpus=corpus).exclude(kind=Kind.VERIFY).values_list("document_id", flat=True))
    all_docs = list(Document.objects.filter(corpus=corpus).order_by("id").values_list("id", flat=True))
    ent_docs = [d for d in all_docs if d not in busy] or all_docs  # (a tiny corpus: all exhaustively annotated)
    clients = []
    expires = now + timedelta(days=1)
    for i in range(cfg["clients"]):
        user = User.objects.create_user(f"bench-annotator-{i:02d}")
        Profile.objects.create(user=user, role=Role.ANNOTATOR, invited=True)
        ann = Annotator.objects.create(backend=Backend.INHOUSE, external_id=user.get_username(), user=user)
        vt = verify[i % len(verify)]
        doc = ent_docs[i % len(ent_docs)]
        et = Task.objects.create(corpus=corpus, kind=Kind.ENTITIES, document_id=doc, payload={},
                                 key=f"bench-{i}" if i >= len(ent_docs) or doc in busy else "",
                                 priority=now, guideline_version="bench")
        tokens = {}
        for kind, task in (("verify", vt), ("entities", et)):
            lease = Assignment.objects.create(task=task, annotator=ann, token=secrets.token_urlsafe(24),
                                              leased=now, expires=expires)
            tokens[kind] = lease.token
        s = SessionStore()
        s[SESSION_KEY] = str(user.pk)
        s[BACKEND_SESSION_KEY] = django_settings.AUTHENTICATION_BACKENDS[0]  # the service's (throttled) backend
        s[HASH_SESSION_KEY] = user.get_session_auth_hash()
        s.create()
        clients.append({"session": s.session_key, **tokens})

    # a member of each submitting team with a session: the team's view of its submission pages (the error analysis)
    team_sessions = {}
    for sub in subs:
        if sub.team_id in team_sessions:
            continue
        user = User.objects.create_user(f"bench-member-{sub.team_id}")
        Profile.objects.create(user=user, role=Role.SUBMITTER, team_id=sub.team_id)
        s = SessionStore()
        s[SESSION_KEY] = str(user.pk)
        s[BACKEND_SESSION_KEY] = django_settings.AUTHENTICATION_BACKENDS[0]
        s[HASH_SESSION_KEY] = user.get_session_auth_hash()
        s.create()
        team_sessions[sub.team_id] = s.session_key
    member_session = {str(sub.pk): team_sessions[sub.team_id] for sub in subs}

    if connection.vendor == "postgresql":  # the statistics autovacuum would gather after a bulk load
        with connection.cursor() as cur:
            cur.execute("ANALYZE")

    # the leaderboard built in this process (no HTTP, no template): the cost of a cache miss
    from django.core.cache import cache

    from unpooled.service.evaluations import leaderboard as lb

    build_ms = {}
    for level in LEVELS:
        times = []
        for _ in range(3):
            cache.clear()
            t = time.perf_counter()
            rows = lb.leaderboard(corpus, level=level)["rows"]
            times.append((time.perf_counter() - t) * 1000)
        assert len(rows) == m, (level, len(rows))
        build_ms[level] = round(min(times), 1)
    counts = {
        "documents": len(docs), "submissions": m,
        "instances": RelationInstance.objects.filter(submission__corpus=corpus).count(),
        "draws": Draw.objects.filter(submission__corpus=corpus).count(), "labelled_keys": len(drawn),
        "task_requests": len(reqs), "scores": Score.objects.filter(submission__corpus=corpus).count(),
        "exhaustive_documents": n_exhaustive,
    }
    return {"database": connection.vendor, "corpus": name, "submissions": [s.pk for s in subs],
            "clients": clients, "member_session": member_session, "counts": counts, "leaderboard_build_ms": build_ms,
            "setup_seconds": {k: round(v, 1) for k, v in setup.items()}}


# -- drive (a separate process, stdlib only) ----------------------------------------------------------
class _CpuMeter(threading.Thread):
    """CPU ticks spent by the processes ``find()`` names, polled every 0.5 s: a process that ends
    while it runs keeps what it spent until its last poll; one that starts counts from zero."""

    def __init__(self, find) -> None:
        super().__init__(daemon=True)
        self.find, self.stop = find, threading.Event()
        self.base = cpu_ticks(find())
        self.last = dict(self.base)

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.last.update(cpu_ticks(self.find()))

    def spent(self) -> int:
        self.stop.set()
        self.join()
        self.last.update(cpu_ticks(self.find()))
        return sum(t - self.base.get(pid, 0) for pid, t in self.last.items())


def _pg_backends(dbname: str | None) -> list[int]:
    """The PostgreSQL backend processes serving ``dbname`` (their command line names the database)."""
    if not dbname:
        return []
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("postgres:") and f" {dbname} " in cmd:
                out.append(int(d))
    return out


def _wrong(resp, body: bytes, marker: bytes | None) -> str | None:
    """What is wrong with a response (``None``: a 200 holding ``marker``, looked for in the page as sent or
    unzipped)."""
    if resp.status != 200:
        return f"HTTP {resp.status}"
    if marker is not None and resp.getheader("Content-Encoding", "") == "gzip":
        body = gzip.decompress(body)
    return None if marker is None or marker in body else "HTTP 200 without the page marker"


def _phase(port: int, clients: int, requests: int, warmup: int, target, marker: bytes | None,
           timed=lambda: None) -> dict:
    """``clients`` threads in closed loop: ``warmup`` requests each, then ``requests`` timed ones in all.

    ``target(client, i)`` gives (path, cookie) of the client's i-th request; ``timed()`` is called once every
    client has ended its warm-up, before the first timed request (the CPU meters start there).
    """
    import http.client

    lat: list[float] = []
    sizes: list[int] = []
    errors: dict[str, int] = {}
    lock = threading.Lock()
    counter = iter(range(requests))
    barrier = threading.Barrier(clients + 1, action=timed)  # run once all have arrived, before any leaves
    reconnects = [0]

    def one(conn_box, client, i):
        path, cookie = target(client, i)
        headers = {"Accept-Encoding": "gzip"}  # as every browser asks
        if cookie:
            headers["Cookie"] = f"sessionid={cookie}"
        for attempt in (0, 1):
            conn = conn_box[0]
            try:
                t = time.perf_counter()
                conn.request("GET", path, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                ms = (time.perf_counter() - t) * 1000
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn_box[0] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                return ms, len(body), _wrong(resp, body, marker)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                conn_box[0] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                if attempt:  # a fresh connection failed too
                    return None, 0, type(exc).__name__
                with lock:
                    reconnects[0] += 1
            except OSError as exc:
                conn.close()
                conn_box[0] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                return None, 0, type(exc).__name__
        return None, 0, "unreachable"

    def client_loop(c):
        box = [http.client.HTTPConnection("127.0.0.1", port, timeout=120)]
        k = 0
        try:
            for _ in range(warmup):
                one(box, c, k)
                k += 1
        finally:
            barrier.wait()
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            ms, size, err = one(box, c, k)
            k += 1
            with lock:
                if err is None:
                    lat.append(ms)
                    sizes.append(size)
                else:
                    errors[err] = errors.get(err, 0) + 1
        box[0].close()

    threads = [threading.Thread(target=client_loop, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()
    return {"lat": lat, "wall": wall, "errors": errors, "bytes": round(sum(sizes) / len(sizes)) if sizes else 0,
            "reconnects": reconnects[0]}


def drive(cfg: dict) -> dict:
    import random

    port, clients, n, warmup = cfg["port"], cfg["clients"], cfg["requests"], cfg["warmup"]
    built = cfg["built"]
    corpus, subs, who = built["corpus"], built["submissions"], built["clients"]
    tick = os.sysconf("SC_CLK_TCK")
    rnd = random.Random(cfg["seed"])

    def leaderboard(level):
        return lambda c, i: (f"/corpora/{corpus}/leaderboard/?level={level}", None)

    def submission(c, i):
        return f"/submissions/{subs[rnd.randrange(len(subs))]}/", None

    def task(kind):
        return lambda c, i: (f"/annotate/task/{who[c % len(who)][kind]}/", who[c % len(who)]["session"])

    plan = {
        "leaderboard_instance": (leaderboard("instance"), b'id="leaderboard"'),
        "leaderboard_relation": (leaderboard("relation"), b'id="leaderboard"'),
        "leaderboard_entity": (leaderboard("entity"), b'id="leaderboard"'),
        "submission": (submission, None),
        "task_verify": (task("verify"), b'id="task"'),
        "task_entities": (task("entities"), b'id="task"'),
    }
    out = {}
    for page in cfg["pages"]:
        target, marker = plan[page]
        # the first views render and cache each page (reported apart): the meters count the phase's requests only
        first = _first_views(port, subs) if page == "submission" else None
        first_team = (_first_views(port, subs, sessions=built.get("member_session"))
                      if page == "submission" else None)
        meters = {}

        def timed():  # the warm-up's cold renders are not a cached view's cost (first views are reported apart)
            meters["server"] = _CpuMeter(lambda: [cfg["server_pid"], *child_pids(cfg["server_pid"])])
            meters["db"] = _CpuMeter(lambda: _pg_backends(cfg.get("pg_database")))
            meters["self"] = time.process_time()
            meters["server"].start()
            meters["db"].start()

        r = _phase(port, clients, n, warmup, target, marker, timed)
        done = len(r["lat"]) or 1
        server_cpu, db_cpu = meters["server"].spent() / tick, meters["db"].spent() / tick
        lat = r["lat"]
        out[page] = {
            "requests": len(lat) + sum(r["errors"].values()), "errors": sum(r["errors"].values()),
            "error_kinds": r["errors"], "p50_ms": round(percentile(lat, 0.50), 1),
            "p95_ms": round(percentile(lat, 0.95), 1), "p99_ms": round(percentile(lat, 0.99), 1),
            "max_ms": round(lat[-1], 1) if lat else math.nan,
            "throughput_rps": round(len(lat) / r["wall"], 1) if r["wall"] > 0 else 0.0,
            "bytes": r["bytes"], "reconnects": r["reconnects"],
            # per timed request answered: the meters start when every client's warm-up has ended
            "server_cpu_ms_per_request": round(1000 * server_cpu / done, 2),
            "db_cpu_ms_per_request": (round(1000 * db_cpu / done, 2)
                                      if cfg.get("pg_database") else None),
            "client_cpu_ms_per_request": round(1000 * (time.process_time() - meters["self"]) / done, 2),
        }
        if first is not None:
            out[page]["first_view"] = first
        if first_team is not None:
            out[page]["first_view_team"] = first_team
    return out


def _first_views(port: int, subs: list, sessions: dict | None = None) -> dict:
    """Every submission's page once, by one client, before the timed phase: a page is rendered on its first
    view after a new score and served from the cache afterwards (``web.views.submission``), so the timed
    phase measures the steady state and this the first views (one client: a render's own latency).
    ``sessions``: submission id -> a session of a member of its team (the team's view, with the error analysis,
    is rendered and cached apart from the visitors')."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    lat, errors = [], 0
    for pk in subs:
        t = time.perf_counter()
        headers = {"Cookie": f"sessionid={sessions[str(pk)]}"} if sessions else {}
        conn.request("GET", f"/submissions/{pk}/", headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        lat.append((time.perf_counter() - t) * 1000)
        # the team's view must be the team's (the error analysis), not a visitor's
        errors += resp.status != 200 or bool(sessions) and b'id="errors"' not in body
    conn.close()
    lat.sort()
    return {"pages": len(lat), "errors": errors, "p50_ms": round(percentile(lat, 0.50), 1),
            "p95_ms": round(percentile(lat, 0.95), 1), "max_ms": round(lat[-1], 1) if lat else math.nan}


# -- orchestration ------------------------------------------------------------------------------------
def _loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def _server_env(work: Path, base_url: str, is_pg: bool) -> dict:
    """The environment of the build and the server: ``work`` as the data directory, the bench's own database (on
    PostgreSQL made afresh beside ``base_url``'s), DEBUG off."""
    env = {k: v for k, v in os.environ.items() if k != "UNPOOLED_DEBUG"}
    env["UNPOOLED_DATA_DIR"] = str(work)
    env["DJANGO_SETTINGS_MODULE"] = "unpooled.service.config.settings"
    env["UNPOOLED_RENDERS_PER_ADDRESS"] = str(10**6)  # every client is 127.0.0.1: the readers' limit is not measured
    if is_pg:
        pg_admin(base_url, f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
        pg_admin(base_url, f'CREATE DATABASE "{PG_DATABASE}"')
        env["DATABASE_URL"] = with_database(base_url, PG_DATABASE)
    else:
        env["DATABASE_URL"] = base_url or f"sqlite:///{work / 'bench.sqlite3'}"
    return env


@contextmanager
def _workdir(keep: bool):
    """The server's data directory: a temporary one, or with ``keep`` (SQLite) one left in place and named on
    stderr, so its database and cache can be read again (``UNPOOLED_DATA_DIR=...``)."""
    if not keep:
        with tempfile.TemporaryDirectory(prefix="unpooled-bench-pages-") as tmp:
            yield tmp
        return
    tmp = tempfile.mkdtemp(prefix="unpooled-bench-pages-")
    try:
        yield tmp
    finally:
        print(f"bench pages: kept the data directory {tmp} (its database: bench.sqlite3)", file=sys.stderr)


def run(submissions: int = 100, clients: int = 20, requests: int = 1000, *, as_json: bool = False,
        instances: int = 3000, draws: int = 150, history: int = 20, documents: int = 30, workers: int | None = None,
        threads: int = 1, warmup: int = 3, pages: list[str] | None = None, seed: int = 0, keep: bool = False,
        verbose: bool = False) -> int:
    from unpooled.service.config.server import default_web_workers, web_server_command

    pages = list(pages or PAGES)
    workers = default_web_workers() if workers is None else workers
    base_url = os.environ.get("DATABASE_URL", "")
    is_pg = base_url.startswith(("postgres://", "postgresql://"))
    with _workdir(keep and not is_pg) as tmp:
        work = Path(tmp)
        env = _server_env(work, base_url, is_pg)
        server = None
        try:
            cfg = {"submissions": submissions, "instances": instances, "draws": draws, "history": history,
                   "documents": documents, "clients": clients, "seed": seed, "workdir": str(work),
                   "verbose": verbose}
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "unpooled.bench.pages", "--build", json.dumps(cfg)],
                                 env=env, stdout=subprocess.PIPE, text=True)
            if out.returncode != 0:
                print("bench pages: building the database failed (see above)", file=sys.stderr)
                return 3
            built = json.loads(out.stdout.strip().splitlines()[-1])
            build_seconds = time.perf_counter() - t0
            port = free_port()
            server = subprocess.Popen(web_server_command(f"127.0.0.1:{port}", workers, threads, access_log=False),
                                      env=env, start_new_session=True)
            wait_until_up(port, server)
            if verbose:
                print(f"bench pages: gunicorn on port {port}; driving {', '.join(pages)}", file=sys.stderr, flush=True)
            load0 = _loadavg()
            dcfg = {"port": port, "clients": clients, "requests": requests, "warmup": warmup, "pages": pages,
                    "seed": seed, "server_pid": server.pid, "built": built,
                    "pg_database": PG_DATABASE if is_pg else None}
            got = subprocess.run([sys.executable, "-m", "unpooled.bench.pages", "--drive", json.dumps(dcfg)],
                                 env=env, stdout=subprocess.PIPE, text=True)
            load1 = _loadavg()
            if got.returncode != 0:
                print("bench pages: driving the server failed (see above)", file=sys.stderr)
                return 3
            figures = json.loads(got.stdout.strip().splitlines()[-1])
        finally:
            if server is not None and server.poll() is None:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
            if is_pg and not keep:
                pg_admin(base_url, f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
    result = {
        "database": built["database"], "submissions": submissions, "clients": clients,
        "requests_per_page": requests, "warmup_per_client": warmup,
        "gunicorn": {"workers": workers, "threads": threads}, "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "loadavg_before": load0, "loadavg_after": load1, "counts": built["counts"],
        "leaderboard_build_ms": built["leaderboard_build_ms"], "setup_seconds": built["setup_seconds"],
        "build_seconds": round(build_seconds, 1), "targets": TARGETS, "pages": figures,
        "meets_target": {page: meets(page, f) for page, f in figures.items()},
    }
    if as_json:
        print(json.dumps(result))
    else:
        _print_report(result)
    return 0 if all(p["errors"] == 0 for p in figures.values()) else 4


def _print_report(result: dict) -> None:
    """:func:`run`'s figures as text: the set-up, a line per page, the first views, the verdict per page."""
    figures, gun = result["pages"], result["gunicorn"]
    workers, threads, clients = gun["workers"], gun["threads"], result["clients"]
    load0, load1 = result["loadavg_before"], result["loadavg_after"]
    c = result["counts"]
    print(f"bench pages on {result['database']}: {c['submissions']} published submissions "
          f"({c['instances']:,} instances, {c['draws']:,} draws, {c['labelled_keys']:,} labelled keys, "
          f"{c['scores']:,} scores); gunicorn {workers} workers x {threads} threads; {clients} clients in "
          f"closed loop; {result['cpus_usable']} CPUs, load average {' '.join(map(str, load0))} before, "
          f"{' '.join(map(str, load1))} after")
    print(f"  {'page':22} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8} {'req/s':>7} {'KB':>6} {'CPU ms/req':>10}")
    for page, f in figures.items():
        cpu = f"{f['server_cpu_ms_per_request']:.1f}" + (f"+{f['db_cpu_ms_per_request']:.1f}db"
                                                         if f["db_cpu_ms_per_request"] is not None else "")
        print(f"  {page:22} {f['requests']:8d} {f['errors']:6d} {f['p50_ms']:8.1f} {f['p95_ms']:8.1f} "
              f"{f['p99_ms']:8.1f} {f['max_ms']:8.1f} {f['throughput_rps']:7.1f} {f['bytes'] / 1024:6.1f} "
              f"{cpu:>10}")
    for page, f in figures.items():
        for k, who in (("first_view", "a visitor"), ("first_view_team", "a member of its team")):
            if k in f:
                fv = f[k]
                print(f"  {page}: first view of each of the {fv['pages']} pages by {who} (rendered, then "
                      f"cached; one client, before the timed requests): p50 {fv['p50_ms']:.1f} ms, "
                      f"p95 {fv['p95_ms']:.1f} ms, max {fv['max_ms']:.1f} ms, {fv['errors']} errors")
    print("  leaderboard built in-process (cache miss): "
          + ", ".join(f"{lv} {ms:.0f} ms" for lv, ms in result["leaderboard_build_ms"].items())
          + "; targets (server CPU ms a request, p95 ms): " + ", ".join(
              f"{page} {TARGETS[page][0]:g}" + (f"/{TARGETS[page][1]:g}" if TARGETS[page][1] else "")
              + (" met" if ok else " NOT met") for page, ok in result["meets_target"].items()))


def meets(page: str, f: dict) -> bool:
    """Whether a page's figures meet its :data:`TARGETS` (no errors either)."""
    cpu, p95 = TARGETS[page]
    return (f["errors"] == 0 and f["server_cpu_ms_per_request"] <= cpu
            and (p95 is None or f["p95_ms"] <= p95))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--build":
        print(json.dumps(build(json.loads(sys.argv[2]))))
    elif len(sys.argv) == 3 and sys.argv[1] == "--drive":
        print(json.dumps(drive(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: python -m unpooled.bench.pages --build CONFIG | --drive CONFIG")
