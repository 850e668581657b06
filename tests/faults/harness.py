"""Real processes for the fault tests, and how the tests look at them.

``unpooled serve`` and ``unpooled worker`` run in subprocesses against a data directory (and database) of the
test's own; the test reads the database straight (``sqlite3`` or ``psycopg``, no Django in the test process)
and polls for states with :func:`until`, whose timeout only bounds a hung run: no test asserts how long
anything took.  Every process a test starts is ended by its pid (never by name).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

PY = sys.executable
#: the longest any single wait may last before the test fails as hung (a bound, not an expectation)
HUNG = 600.0


def until(pred, what: str, *, timeout: float = HUNG, every: float = 0.05, context=lambda: ""):
    """Poll ``pred()`` until it returns something truthy, and return that; fail with ``what`` (and
    ``context()``, e.g. a log's tail) if it never does within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}\n{context()}")
        time.sleep(every)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_env(data_dir: Path, database_url: str | None = None, **extra) -> dict:
    env = dict(os.environ, UNPOOLED_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="unpooled.service.config.settings",
               UNPOOLED_LOG_LEVEL="WARNING", **{k: str(v) for k, v in extra.items()})
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def run_py(env: dict, code: str, *, timeout: float = HUNG) -> str:
    """Run ``code`` in a fresh Python with Django set up (migrating first); its stdout."""
    head = "from unpooled.service.config.bootstrap import setup_django; setup_django()\n"
    out = subprocess.run([PY, "-c", head + code], env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise AssertionError(f"python -c failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out.stdout


def migrated_sqlite(template_dir: Path) -> Path:
    """A migrated SQLite file (made once per session; each test copies it: migrating takes seconds)."""
    db = template_dir / "unpooled.sqlite3"
    if not db.exists():
        run_py(service_env(template_dir), "")
    return db


def prepare_data_dir(data_dir: Path, template: Path) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(template, data_dir / "unpooled.sqlite3")
    return data_dir


def query(env: dict, sql: str, params=()) -> list[tuple]:
    """Rows of ``sql`` read straight from the service's database (``?`` placeholders on both)."""
    url = env.get("DATABASE_URL")
    if url:
        import psycopg

        try:
            with psycopg.connect(url.replace("postgres://", "postgresql://", 1), connect_timeout=10) as conn:
                return conn.execute(sql.replace("?", "%s"), params).fetchall()
        except psycopg.OperationalError:
            return None  # the server is down (a test stops it on purpose)
    conn = sqlite3.connect(f"file:{env['UNPOOLED_DATA_DIR']}/unpooled.sqlite3?mode=ro", uri=True, timeout=60)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def one(env: dict, sql: str, params=()):
    rows = query(env, sql, params)
    return rows[0][0] if rows else None


def http(url: str, *, data: bytes | None = None, headers: dict | None = None, method: str | None = None,
         timeout: float = 60) -> tuple[int | None, str]:
    """(status, body); status None when the server does not answer."""
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (OSError, urllib.error.URLError) as e:
        return None, str(e)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Service:
    """``unpooled serve`` on a free port, its output in a log file; the pids of what it started."""

    def __init__(self, env: dict, log: Path, *, task_workers: int = 1, web_workers: int = 2,
                 port: int | None = None) -> None:
        self.env, self.log_path = env, log
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")
        self.proc = subprocess.Popen([PY, "-m", "unpooled.cli.main", "serve", "--port", str(self.port),
                                      "--web-workers", str(web_workers), "--task-workers", str(task_workers)],
                                     env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.seen: dict[int, str] = {}  # every descendant seen, with its command line (cleanup checks it)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self) -> str:
        return "--- serve's log (tail) ---\n" + self.log()[-6000:]

    def _kids(self) -> dict[int, str]:
        out = {}
        for pid in children(self.proc.pid):
            cmd = cmdline(pid)
            if cmd and alive(pid):
                out[pid] = cmd
                for sub in children(pid):
                    if alive(sub):
                        self.seen.setdefault(sub, cmdline(sub))
        self.seen.update(out)
        return out

    def web_pid(self) -> int | None:
        return next((p for p, c in self._kids().items() if "gunicorn" in c), None)

    def web_workers(self) -> list[int]:
        pid = self.web_pid()
        return [p for p in children(pid) if alive(p)] if pid else []

    def worker_pid(self, slot: int = 0) -> int | None:
        return next((p for p, c in self._kids().items() if f"worker --slot {slot}" in c), None)

    def get(self, path: str = "/", **kw) -> tuple[int | None, str]:
        return http(self.url + path, **kw)

    def wait_up(self) -> None:
        until(lambda: self.get("/")[0] == 200 and self.worker_pid() is not None, "serve to answer", context=self.tail)

    def until(self, pred, what: str, **kw):
        return until(pred, what, context=self.tail, **kw)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=120)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        for pid, cmd in self.seen.items():  # anything left of what it started (same pid, same command)
            if alive(pid) and cmdline(pid) == cmd:
                os.kill(pid, signal.SIGKILL)
        self._log.close()


def task_rows(env: dict, task: str) -> list[dict]:
    """The django-tasks-db rows of ``task`` (a function name), oldest first."""
    rows = query(env, "SELECT id, status, worker_ids, args_kwargs FROM django_tasks_database_dbtaskresult "
                      "WHERE task_path LIKE ? ORDER BY enqueued_at", (f"%.{task}",)) or []
    return [{"id": r[0], "status": r[1], "workers": json.loads(r[2]) if isinstance(r[2], str) else r[2],
             "args": (json.loads(r[3]) if isinstance(r[3], str) else r[3]).get("args")} for r in rows]
