"""``unpooled serve`` under faults (finding D4 of the 2026-11 security review): a task worker that dies is
restarted with a back-off and the web server never stops for it; a web server that dies is restarted; a web
server that cannot listen ends serve with a clear message; SIGTERM and SIGINT stop everything.

Real processes: serve, gunicorn and ``unpooled worker`` on a SQLite data directory; the test kills them with
signals and polls /proc, HTTP and the database for the states it expects.
"""

from __future__ import annotations

import os
import signal
import socket
import threading

import pytest

from unpooled.cli.commands.serve import BACKOFF_MAX, _started, backoff

from .harness import alive, one, until

pytestmark = pytest.mark.faults


class Prober:
    """GET / over and over in a thread while faults are injected; every answer is kept."""

    def __init__(self, service) -> None:
        self.service, self.statuses, self._stop = service, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.statuses.append(self.service.get("/", timeout=120)[0])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(180)


def heartbeat_pid(env, slot: int = 0):
    return one(env, "SELECT pid FROM organiser_workerheartbeat WHERE worker_id LIKE ?", (f"%-{slot}",))


def test_the_demo_clock_starts_when_dev_up_did(monkeypatch):
    """UX review #14: ``./dev up`` sets UNPOOLED_STARTED as it begins, and serve's demo clock (the banner, the
    terminal) starts there, set-up included; a value that is not a time of the last hour is ignored."""
    from unpooled.cli.commands import serve

    now = 1_800_000_000.0
    monkeypatch.setattr(serve.time, "time", lambda: now)  # a fixed clock: the test reads values, not durations
    monkeypatch.setenv("UNPOOLED_STARTED", str(now - 90))
    assert _started() == now - 90
    for bad in ("soon", str(now + 60), str(now - 7200), ""):
        monkeypatch.setenv("UNPOOLED_STARTED", bad)
        assert _started() == now
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "dev"), encoding="utf-8").read()
    up = text.split("  up)")[1].split(";;")[0]
    assert up.index('export UNPOOLED_STARTED="${UNPOOLED_STARTED:-$(date +%s)}"') < up.index('setup "docs"')


def test_backoff_doubles_up_to_its_cap():
    assert [backoff(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert backoff(50) == BACKOFF_MAX


def test_killed_task_worker_is_restarted_and_the_web_server_never_stops(serve, sqlite_env):
    s = serve(sqlite_env)
    s.wait_up()
    web = s.web_pid()
    with Prober(s) as probe:
        for round_ in range(3):
            old = s.worker_pid()
            s.until(lambda: heartbeat_pid(sqlite_env) == old, f"worker {old} to record its heartbeat")
            s.until(lambda: len(probe.statuses) > 0, "a first answer")
            os.kill(old, signal.SIGKILL)
            new = s.until(lambda: (p := s.worker_pid()) not in (None, old) and p, "a new task worker")
            # the new worker is really up: connected, beating under the same id
            s.until(lambda: heartbeat_pid(sqlite_env) == new, f"the restarted worker {new} to record its heartbeat")
            assert f"task worker 0 (pid {old}) was killed by SIGKILL" in s.log(), s.tail()
            assert s.web_pid() == web  # the same gunicorn master all along
        seen = len(probe.statuses)
        s.until(lambda: len(probe.statuses) > seen, "another answer after the last restart")
    assert probe.statuses and set(probe.statuses) == {200}, probe.statuses  # no refused or failed request
    log = s.log()
    assert log.count("restarting it in") == 3 and "its running task is requeued when it starts" in log, s.tail()
    assert s.stop() == 0


def test_crash_looping_worker_backs_off_and_the_web_server_keeps_serving(serve, sqlite_env):
    """A worker that cannot start (here: a bad setting) is retried ever later, with its reason in the log."""
    env = dict(sqlite_env, UNPOOLED_WORKER_TIMEOUT="0")
    s = serve(env)
    s.until(lambda: "restarting it in 4 s" in s.log(), "the third back-off")
    log = s.log()
    assert "UNPOOLED_WORKER_TIMEOUT must be a positive number of seconds" in log, s.tail()  # why, from the worker
    assert "task worker 0" in log and "exited with status 2" in log
    assert log.index("restarting it in 1 s") < log.index("restarting it in 2 s") < log.index("restarting it in 4 s")
    assert s.get("/")[0] == 200 and s.proc.poll() is None
    assert s.stop() == 0


@pytest.mark.parametrize("how", ["master", "group"])
def test_killed_web_server_is_restarted(serve, sqlite_env, how):
    """kill -9 of gunicorn's master alone (its workers, orphaned, still hold the port: serve ends them) or of
    the master and all its workers: serve starts a new web server, and the task worker is left alone."""
    s = serve(sqlite_env)
    s.wait_up()
    web, worker, old_workers = s.web_pid(), s.worker_pid(), s.web_workers()
    assert old_workers
    os.kill(web, signal.SIGKILL)
    if how == "group":
        for p in old_workers:
            os.kill(p, signal.SIGKILL)
    new = s.until(lambda: (p := s.web_pid()) not in (None, web) and p, "a new web server")
    s.until(lambda: s.get("/")[0] == 200, "the new web server to answer")
    assert not any(alive(p) for p in old_workers)  # nothing of the old web server is left
    assert s.worker_pid() == worker and f"web server (pid {web}) was killed by SIGKILL" in s.log()
    assert new != web and s.stop() == 0


def test_web_server_that_cannot_listen_ends_serve_with_a_clear_message(serve, sqlite_env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        s = serve(sqlite_env, port=taken.getsockname()[1])
        rc = until(lambda: s.proc.poll(), "serve to give up", context=s.tail)
        assert rc == 3, s.tail()
    log = s.log()
    assert f"before it ever listened on port {s.port} (is the port in use?" in log and "stopping" in log, s.tail()
    started = s.started()
    assert {k: len(v) for k, v in started.items()} == {"web server": 1, "task worker 0": 1}, started  # no restart
    assert not any(alive(p) for pids in started.values() for p in pids)  # the task worker was stopped too


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_stop_everything(serve, sqlite_env, sig):
    s = serve(sqlite_env)
    s.wait_up()
    until(lambda: heartbeat_pid(sqlite_env) == s.worker_pid(), "the worker's heartbeat")
    procs = [s.web_pid(), s.worker_pid(), *s.web_workers()]
    assert s.stop(sig) == 0, s.tail()
    assert not any(alive(p) for p in procs), [p for p in procs if alive(p)]
    assert f"{signal.Signals(sig).name} received: stopping" in s.log()
    assert "restarting" not in s.log()  # a requested stop is not a crash
    assert heartbeat_pid(sqlite_env) is None  # the worker stopped cleanly: it forgot its heartbeat


FLAKY_WEB = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
s.accept()  # the first connection ends it, as a crash would
sys.exit(1)
"""

SUPERVISE = """
import os, sys
from unpooled.cli.commands import serve
serve.BACKOFF_FIRST = 0.05  # the policy, not the waiting, is under test
web = serve.Child("web server", [sys.executable, "-c", sys.argv[2], sys.argv[1]], dict(os.environ), port=int(sys.argv[1]))
sys.exit(serve.Supervisor([web], web).run("up"))
"""


def test_web_server_failing_again_and_again_ends_serve(tmp_path):
    """The supervisor of ``unpooled serve`` with a stand-in web server that dies at its first request: restarted
    after each death, until the fifth in a row ends serve with status 3 and says why."""
    import subprocess
    import sys

    from unpooled.cli.commands.serve import WEB_GIVE_UP

    from .harness import free_port

    port, log = free_port(), tmp_path / "supervisor.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", SUPERVISE, str(port), FLAKY_WEB], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        for n in range(1, WEB_GIVE_UP + 1):
            until(lambda: log.read_text().count("is listening on port") == n, f"start {n} of the web server",
                  context=log.read_text)
            socket.create_connection(("127.0.0.1", port), timeout=30).close()
        rc = until(lambda: proc.poll(), "the supervisor to give up", context=log.read_text)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 3 and f"it failed {WEB_GIVE_UP} times in a row; stopping" in text, text
    assert text.count("restarting it in") == WEB_GIVE_UP - 1 and text.count("exited with status 1") == WEB_GIVE_UP
