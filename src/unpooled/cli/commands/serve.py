"""``unpooled serve``: the web server and the task workers, supervised; ``unpooled worker``: a worker alone.

What ``unpooled serve`` promises (each child's exit is logged on stderr with why and what happens next):

* **A task worker that ends** -- a crash, ``kill -9``, the OOM killer, a database it cannot reach at start --
  is started again after a back-off of 1, 2, 4, ... seconds, at most :data:`BACKOFF_MAX` (the back-off is
  reset once a worker has run :data:`STABLE_SECONDS`).  The new worker has the same id (``<host>-<slot>``), so
  it first requeues the task its predecessor left running (:mod:`unpooled.service.workers`).  Workers are
  restarted for as long as serve runs; the web server is never stopped for them.
* **The web server** (gunicorn's master; gunicorn replaces its own dead worker processes) **that ends after it
  was listening** is cleaned up (its remaining processes, which still hold the port, get SIGTERM, then SIGKILL
  after :data:`STOP_GRACE` seconds) and started again with the same back-off.  After :data:`WEB_GIVE_UP`
  failures in a row, or when it ends **before it ever listened** (the port is taken, a bad setting), serve
  stops the workers and exits with status 3 and a message saying why: a web tier that cannot come up is an
  operator's problem, not something to retry silently.
* **SIGTERM or SIGINT** (Ctrl-C) stops everything: each child gets SIGTERM (a task worker finishes its current
  task; gunicorn its current requests), then SIGKILL after :data:`STOP_GRACE` seconds (a killed worker's task
  is requeued at its next start); serve exits with status 0.  A second signal kills the children at once.

Each task worker keeps its BLAS to one thread unless the environment sets the count
(:func:`~unpooled.service.config.server.one_blas_thread`): ``--task-workers N`` spread the work over N processes,
not over N x CPUs BLAS threads.

Every child runs in its own process group (a terminal's Ctrl-C reaches serve alone, which stops them in order)
and, on Linux, gets SIGTERM should serve itself die.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from unpooled.service.config.bootstrap import setup_django


from unpooled.service.config.server import (  # noqa: E402,F401
    WEB_TIMEOUT, default_web_workers, web_server_command,
)

from ..main import integer  # noqa: E402

#: first restart delay (seconds); doubled after each failure in a row
BACKOFF_FIRST = 1.0
#: longest restart delay (seconds)
BACKOFF_MAX = 60.0
#: a child that ran this long (seconds) before it ended starts a new series of back-offs
STABLE_SECONDS = 60.0
#: the web server failing this many times in a row ends serve
WEB_GIVE_UP = 5
#: seconds between SIGTERM and SIGKILL when children are stopped
STOP_GRACE = 10.0
#: seconds between looks at the children
TICK = 0.2
#: the longest wait for the web server's first answer before the demo loader starts anyway
PROBE_SECONDS = 60.0


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the web server and a task worker, restarting them if they die (migrates "
                                     "first)",
                       description="Run the web server (gunicorn) and the task workers. A task worker that dies is "
                                   "restarted after a back-off (1, 2, 4 ... 60 s) and never stops the web server; "
                                   "a web server that dies after it was listening is restarted the same way, "
                                   f"and serve exits (status 3) when it fails {WEB_GIVE_UP} times in a row or "
                                   "never listens. SIGTERM or Ctrl-C stops everything (status 0).")
    p.add_argument("--host", default=os.environ.get("UNPOOLED_HOST", "127.0.0.1"),
                   help="address to listen on (default $UNPOOLED_HOST or 127.0.0.1; 0.0.0.0: every interface)")
    p.add_argument("--port", type=integer(1, 65_535), default=os.environ.get("UNPOOLED_PORT", "8000"),
                   help="TCP port to listen on (default $UNPOOLED_PORT or 8000)")
    p.add_argument("--web-workers", type=integer(1, 1024), default=None,
                   help=f"web server (gunicorn) processes (default: 2 per CPU, here {default_web_workers()})")
    p.add_argument("--web-threads", type=integer(1, 1024), default=1,
                   help="threads per web process (default 1: sync workers; more: gthread)")
    p.add_argument("--task-workers", type=integer(0, 256), default=1, help="task worker processes (0: none)")
    p.add_argument("--demo", action="store_true",
                   help="load the demo (a corpus, two real systems, their evaluation) in the background once the "
                        "web server answers, with its progress on every page; prints the demo accounts")
    p.set_defaults(func=cmd_serve)
    w = sub.add_parser("worker", help="run one task worker (django-tasks-db) in the foreground",
                       description="Run a task worker with the stable id HOST-SLOT. On start it requeues the tasks "
                                   "a previous, crashed worker with the same id left running. While it runs it "
                                   "records a heartbeat and requeues the tasks of workers (on any machine) whose "
                                   "heartbeat is older than the timeout. A database that stops answering is "
                                   "waited for (the task it interrupted is requeued once it answers again). Its "
                                   "BLAS runs on one thread (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and "
                                   "MKL_NUM_THREADS default to 1: several workers share the CPUs, each with one "
                                   "thread); set them to give it more.")
    w.add_argument("--slot", type=integer(0, 10_000), default=0, help="worker slot on this host (default 0)")
    w.add_argument("--batch", action="store_true", help="exit once the queue is empty")
    w.add_argument("--timeout", type=float, default=None,
                   help="seconds without a heartbeat after which a worker is dead and its tasks are requeued "
                        "(default $UNPOOLED_WORKER_TIMEOUT or 300; use the same value on every machine)")
    w.add_argument("--heartbeat", type=float, default=None,
                   help="seconds between heartbeats and sweeps for dead workers' tasks "
                        "(default $UNPOOLED_WORKER_HEARTBEAT or 30; at most a third of the timeout)")
    w.set_defaults(func=cmd_worker)


def cmd_worker(args) -> int:
    setup_django()  # BLAS on one thread: set by cli.main before the commands (and numpy) were imported

    from unpooled.service.workers import (
        Liveness, heartbeat_interval, run_worker, wait_for_database, worker_id, worker_timeout,
    )

    wid = worker_id(args.slot)
    try:
        timeout = args.timeout if args.timeout is not None else worker_timeout()
    except ValueError as exc:
        print(f"unpooled worker: error: {exc}", file=sys.stderr)
        return 2
    interval = min(args.heartbeat, timeout / 3) if args.heartbeat is not None else heartbeat_interval(timeout)
    if not (timeout > 0 and interval > 0):
        print("unpooled worker: error: --timeout and --heartbeat must be positive", file=sys.stderr)
        return 2
    live = Liveness(wid, timeout=timeout, interval=interval)
    wait_for_database(wid)  # a database still starting (or restarting) is waited for, not a crash
    live.start()  # requeues this id's orphans, records the first heartbeat before any claim, sweeps once
    try:
        run_worker(wid, batch=args.batch)
    finally:
        live.stop()
    return 0


def _started() -> float:
    """When the demo's clock starts: ``UNPOOLED_STARTED`` (seconds since the epoch; ``./dev up`` sets it as it
    begins, so its banner counts the user's wait, the set-up included) when it is a time of the last hour, else
    now."""
    now = time.time()
    try:
        t = float(os.environ.get("UNPOOLED_STARTED", ""))
    except ValueError:
        return now
    return t if now - 3600 <= t <= now else now


def cmd_serve(args) -> int:
    web_workers = default_web_workers() if args.web_workers is None else args.web_workers
    started = _started()
    _migrate()
    from django.conf import settings

    host = "localhost" if args.host in ("127.0.0.1", "0.0.0.0") else args.host
    url = f"http://{host}:{args.port}"
    if args.demo:
        from unpooled.service.web.demo_progress import write_progress

        # the banner is on the first page served, before the loader has started
        write_progress({"state": "loading", "step": 0, "steps": 0, "message": "starting the web server",
                        "started": started, "levels": {}}, settings.DATA_DIR)
    else:
        _demo_stopped(settings.DATA_DIR, also=("failed",))  # no banner left from an earlier ./dev up
    from django.db import connections

    connections.close_all()  # the children open their own
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="unpooled.service.config.settings")
    children = [Child(f"task worker {i}", [sys.executable, "-m", "unpooled.cli.main", "worker", "--slot", str(i)], env)
                for i in range(args.task_workers)]
    web = Child("web server", web_server_command(f"{args.host}:{args.port}", web_workers, args.web_threads), env,
                port=args.port)
    if args.host not in ("127.0.0.1", "0.0.0.0", "::", "localhost"):
        web.probe_url = f"http://{args.host if ':' not in args.host else f'[{args.host}]'}:{args.port}/"
    if args.demo:
        children.append(Child("demo loader", [sys.executable, "-m", "unpooled.demo", "--started", repr(started),
                                              "--url", url], env, once=True, after_web=True))

    def banner() -> str:
        """Where the service is, and with --demo the demo accounts: made here, while the web server starts."""
        lines = [f"unpooled is running at {url}/  ({args.task_workers} task worker(s); Ctrl-C stops)"]
        if args.demo:
            from django.db import connections

            from unpooled.demo import demo_accounts, demo_corpus_name

            try:
                accounts = demo_accounts(settings.DATA_DIR)
            except Exception as exc:  # noqa: BLE001 - the service runs on without them, and says why
                accounts = []
                _log(f"error: the demo accounts could not be made: {type(exc).__name__}: {exc}")
            finally:
                connections.close_all()
            lines += demo_banner(url, accounts, settings.DATA_DIR, demo_corpus_name())
        return "\n".join(lines)

    status = Supervisor([web, *children], web).run(banner)
    if args.demo:
        _demo_stopped(settings.DATA_DIR)
    return status


def _migrate() -> None:
    """Set up Django and apply pending migrations, saying so (a fresh data directory takes a while)."""
    setup_django(migrate=False)
    from django.core.management import call_command
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        t0 = time.monotonic()
        _log(f"applying {len(plan)} database migration(s) first")
        call_command("migrate", verbosity=0, interactive=False)
        _log(f"database ready after {time.monotonic() - t0:.0f} s")


def demo_banner(url: str, accounts: list, data_dir, corpus: str = "redocred-dev") -> list[str]:
    """The lines printed once the web server answers: where to look and the demo accounts to sign in with."""
    where = {"organiser": f"{url}/organiser/", "submitter": f"{url}/submissions/", "annotator": f"{url}/annotate/"}
    width = max((len(a[1]) for a in accounts), default=0)
    out = ["the demo is loading in the background: every page shows its progress in a banner, and so does this "
           "terminal",
           f"leaderboard: {url}/corpora/{corpus}/leaderboard/ (fills level by level)",
           f"sign in at {url}/accounts/login/ as (passwords kept in {Path(data_dir) / 'demo-accounts.json'}):"]
    out += [f"  {what:<12} {name:<{width}}  " + (f"password {pw}" if pw else "password not known (changed since, or "
                                                 "not made by the demo)") + f"   {where.get(what, '')}"
            for what, name, pw in accounts]
    out.append("  (the demo corpus is labelled by a simulated crowd, so the annotator's queue stays empty until an "
               "organiser switches a corpus to in-house annotators in the console)")
    return out


def _demo_stopped(data_dir, also: tuple[str, ...] = ()) -> None:
    """serve ends: a loader that did not finish says so in the progress file (no banner is left behind)."""
    from unpooled.service.web.demo_progress import read_progress, write_progress

    data = read_progress(data_dir)
    if data and data.get("state") in ("loading", "evaluating", *also):
        try:
            write_progress(dict(data, state="stopped"), data_dir)
        except OSError:
            pass


def _log(msg: str) -> None:
    print(f"unpooled serve: {msg}", file=sys.stderr, flush=True)


def how_it_ended(rc: int) -> str:
    """``exited with status 1`` / ``was killed by SIGKILL``."""
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def backoff(failures: int) -> float:
    """Seconds before the restart that follows ``failures`` failures in a row (1, 2, 4, ... BACKOFF_MAX)."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, failures - 1))


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGTERM when serve dies (even by SIGKILL), so no orphan keeps the port or a task."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: serve's own stop still ends the children
        pass


def listening(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (Linux /proc; elsewhere: whether
    anything accepts a connection on the port)."""
    try:
        sockets = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    rows = f.read().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                cols = row.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port and f"socket:[{cols[9]}]" in sockets:
                    return True
        return False
    except OSError:
        import socket

        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False


class Child:
    """One supervised process: how to start it, its current process, and its failures in a row."""

    def __init__(self, name: str, argv: list[str], env: dict, *, port: int | None = None, once: bool = False,
                 after_web: bool = False) -> None:
        self.name, self.argv, self.env, self.port = name, argv, env, port
        self.once = once  # runs to its end once and is never restarted (the demo loader)
        self.after_web = after_web  # started once the web server first listens
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.failures = 0
        self.restart_at: float | None = None
        self.listened = False  # the web server: listened at least once since serve started
        self.probe_url = f"http://127.0.0.1:{port}/" if port else ""  # where serve asks the web server for a page
        self.up = False  # the web server: its current process listens

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=self.env, start_new_session=True, preexec_fn=_die_with_parent)
        self.started = time.monotonic()
        self.restart_at = None
        self.up = False

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's process group (gunicorn's master and its workers)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def group_alive(self) -> bool:
        if self.proc is None:
            return False
        try:
            os.killpg(self.proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        if self.proc.poll() is None:
            return True
        # the leader is reaped: is anything but zombies left in its group?
        try:
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    with open(f"/proc/{pid}/stat") as f:
                        stat = f.read().rsplit(")", 1)[1].split()
                    if int(stat[2]) == self.proc.pid and stat[0] != "Z":
                        return True
        except OSError:
            return True
        return False


class Supervisor:
    """Start the children, restart those that end (see the module's docstring), stop them all on a signal."""

    def __init__(self, children: list[Child], web: Child | None) -> None:
        self.children, self.web = children, web
        self.signals: list[int] = []
        self.banner = ""
        self.answered = threading.Event()  # the web server answered an HTTP request (see _first_listen)
        self.deferred_started = False

    def _on_signal(self, signum, frame) -> None:
        self.signals.append(signum)
        if len(self.signals) > 1:  # a second Ctrl-C: do not wait for anyone
            for c in self.children:
                c.signal_group(signal.SIGKILL)

    def run(self, banner) -> int:
        """Supervise until a signal (or a web server that cannot come up); ``banner``, a text or a function
        returning it, is printed when the web server first listens (or answers, see :meth:`_first_listen`)."""
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.banner = banner
            for c in self.children:
                if not c.after_web:
                    c.start()
                    _log(f"started {c.name} (pid {c.proc.pid})")
            if self.web is None:
                print(banner, flush=True)
            status = self._watch()
        finally:
            self._stop_all()
            for s, h in old.items():
                signal.signal(s, h)
        return status

    def _watch(self) -> int:
        while not self.signals:
            if self.answered.is_set() and not self.deferred_started:
                self._start_deferred()
            now = time.monotonic()
            for c in self.children:
                if c.proc is None:
                    if c.restart_at is not None and now >= c.restart_at:
                        c.start()
                        _log(f"restarted {c.name} (pid {c.proc.pid})")
                    continue
                rc = c.proc.poll()
                if rc is None:
                    if c is self.web and c.port is not None and not c.up and listening(c.proc.pid, c.port):
                        first = not c.listened
                        c.up = c.listened = True
                        _log(f"{c.name} (pid {c.proc.pid}) is listening on port {c.port}")
                        if first:
                            self._first_listen()
                    continue
                if self.signals:  # it ended because we are stopping (a signal to the whole group)
                    break
                status = self._ended(c, rc, now)
                if status is not None:
                    return status
            time.sleep(TICK)
        _log(f"{signal.Signals(self.signals[0]).name} received: stopping")
        return 0

    def _first_listen(self) -> None:
        """The web server listens.  Without children waiting for it: say where.  With some (the demo loader):
        ask it for a page first, in a thread, so the URL is printed when a page answers and the loader does not
        compete with the web workers' start for the CPU; :meth:`_start_deferred` follows."""
        if not any(c.after_web for c in self.children):
            print(self._banner_text(), flush=True)
            return
        threading.Thread(target=self._probe, daemon=True, name="web-probe").start()
        self.banner = self._banner_text()  # (the demo accounts are made meanwhile)

    def _banner_text(self) -> str:
        if callable(self.banner):
            self.banner = self.banner()
        return self.banner

    def _probe(self) -> None:
        from urllib.error import HTTPError, URLError
        from urllib.request import urlopen

        end = time.monotonic() + PROBE_SECONDS
        while time.monotonic() < end and not self.signals:
            try:
                urlopen(self.web.probe_url, timeout=PROBE_SECONDS).close()
                break
            except HTTPError:  # an answer all the same
                break
            except (URLError, OSError):
                time.sleep(0.5)
        self.answered.set()  # or it never answered in time: the loader starts anyway

    def _start_deferred(self) -> None:
        self.deferred_started = True
        print(self._banner_text(), flush=True)
        for c in self.children:
            if c.after_web and c.proc is None:
                c.start()
                _log(f"started {c.name} (pid {c.proc.pid})")

    def _ended(self, c: Child, rc: int, now: float) -> int | None:
        """Child ``c`` ended by itself: schedule its restart, or return serve's exit status."""
        ran = now - c.started
        if c.once:
            if rc == 0:
                _log(f"{c.name} (pid {c.proc.pid}) finished after {ran:.0f} s")
            else:
                _log(f"{c.name} (pid {c.proc.pid}) {how_it_ended(rc)} after {ran:.0f} s (its messages are above); "
                     "not restarted: the web server and the task workers go on")
            c.proc, c.restart_at = None, None
            return None
        c.failures = 1 if ran >= STABLE_SECONDS else c.failures + 1
        pid = c.proc.pid
        what = f"{c.name} (pid {pid}) {how_it_ended(rc)} after {ran:.0f} s"
        if c is self.web:
            if c.group_alive():  # gunicorn's workers outlive a killed master and keep the port
                c.signal_group(signal.SIGTERM)
                end = time.monotonic() + STOP_GRACE
                while c.group_alive() and time.monotonic() < end and not self.signals:
                    time.sleep(TICK)
                c.signal_group(signal.SIGKILL)
            if not c.listened:
                _log(f"error: {what} before it ever listened on port {c.port} (is the port in use? its messages "
                     f"are above); stopping")
                return 3
            if c.failures >= WEB_GIVE_UP:
                _log(f"error: {what}; it failed {c.failures} times in a row; stopping")
                return 3
        delay = backoff(c.failures)
        why = " (its running task is requeued when it starts)" if c is not self.web else ""
        _log(f"{what}; restarting it in {delay:g} s{why}")
        c.proc, c.restart_at = None, now + delay
        return None

    def _stop_all(self) -> None:
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for c in running:
            c.signal_group(signal.SIGTERM)
        end = time.monotonic() + STOP_GRACE
        for c in running:
            try:
                c.proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                _log(f"{c.name} (pid {c.proc.pid}) did not stop within {STOP_GRACE:g} s: killed")
        for c in self.children:
            if c.proc is not None and c.group_alive():
                c.signal_group(signal.SIGKILL)
            if c.proc is not None:
                try:
                    c.proc.wait(timeout=STOP_GRACE)
                except subprocess.TimeoutExpired:
                    pass
