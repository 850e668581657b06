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
                 port: int | None = None, extra: tuple[str, ...] = ()) -> None:
        self.env, self.log_path = env, log
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")
        self.proc = subprocess.Popen([PY, "-m", "unpooled.cli.main", "serve", "--port", str(self.port),
                                      "--web-workers", str(web_workers), "--task-workers", str(task_workers), *extra],
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

    def started(self) -> dict[str, list[int]]:
        """The pids serve says it started, by child ("web server", "task worker 0"), from its log."""
        import re

        out: dict[str, list[int]] = {}
        for name, pid in re.findall(r"unpooled serve: (?:re)?started (.+?) \(pid (\d+)\)", self.log()):
            out.setdefault(name, []).append(int(pid))
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


#: (a script's head) the first ``n`` Re-DocRED dev documents loaded as corpus ``name`` with annotation ``settings``
LOAD = """
import json, random
from pathlib import Path
from unpooled.core.corpus import iter_documents
from unpooled.core.kb.docred import docred_to_jsonl
from unpooled.service.annotation import actions
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.submissions.actions import do_ingest_submission

shared, work, n, name = Path({shared!r}), Path({work!r}), {n}, {name!r}
data = json.loads((shared / "redocred" / "dev_revised.json").read_text())[:n]
path = work / f"{{name}}.json"
path.write_text(json.dumps(data))
corpus = do_load_corpus(path, "docred", name)
st = actions.settings_for(corpus)
for k, v in {settings!r}.items():
    setattr(st, k, v)
st.save()
"""

SCENARIO = LOAD + """
kb = work / f"{{name}}.jsonl"
with open(kb, "w") as out:
    docred_to_jsonl(iter_documents(path, "docred"), out)
res = do_ingest_submission(kb, name, "DocRED-original", "hwe", "jsonl", start={start!r})
assert res.ok, res.report.to_dict()
print(res.submission.pk)
"""

#: an evaluation whose annotation takes hundreds of simulated answers (a kill lands inside it)
EVALUATION = dict(backend="simulated", control_share=0.0, exhaustive_documents=6, min_draws=40, max_draws=80,
                  target_halfwidth=0.05)


def start_evaluation(env: dict, shared: Path, work: Path, *, n: int = 25, name: str = "faults",
                     settings: dict | None = None, start: bool = True) -> int:
    """Load the first ``n`` Re-DocRED dev documents as corpus ``name`` (simulated crowd) and ingest their DocRED
    labels as a submission whose evaluation is enqueued; returns the submission's id."""
    work.mkdir(parents=True, exist_ok=True)
    code = SCENARIO.format(shared=str(shared), work=str(work), n=n, name=name,
                           settings=dict(settings or EVALUATION), start=start)
    return int(run_py(env, code).strip().splitlines()[-1])


def fresh_postgres(url: str):
    """A new, empty database on the PostgreSQL server at ``url``: (admin connection, name, its URL), or None
    when the server does not answer."""
    import uuid

    try:
        import psycopg

        url = url.replace("postgres://", "postgresql://", 1)
        conn = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except Exception:  # noqa: BLE001 - any failure means: no PostgreSQL here
        return None
    name = f"unpooled_fault_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    return conn, name, url.rsplit("/", 1)[0] + "/" + name


def drop_postgres(conn, name: str) -> None:
    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


# ---------------------------------------------------------------------------- what a finished evaluation holds

REWARD_SQL = "CASE t.kind WHEN 'verify' THEN s.reward_verify_cents WHEN 'entities' THEN s.reward_entities_cents " \
             "WHEN 'clusters' THEN s.reward_clusters_cents " \
             "ELSE s.reward_relations_cents END"


def evaluation_invariants(env: dict, subs: int | list[int]) -> dict:
    """Check that the evaluation of submission(s) ``subs`` finished once: each published, each draw stored once,
    every task answered by exactly its ``answers_needed`` annotators (one answer per lease, one lease per annotator
    and task, nothing left leased or open, no discounted or extra paid answer), one majority label per verify task
    and no Dawid-Skene label repeated, one request per (task, submission), each verify task paid for by exactly one
    submission (one submission: by it), and a cost equal to the rewards of the answers needed.  Returns the counts
    (for the report)."""
    def rows(sql, params=()):
        return query(env, sql, params)

    subs = [subs] if isinstance(subs, int) else list(subs)
    all_draws = {}
    for sub in subs:
        status, error, plan = rows("SELECT status, error, plan FROM submissions_submission WHERE id = ?", (sub,))[0]
        assert status == "published" and not error, (sub, status, error)
        plan = json.loads(plan) if isinstance(plan, str) else plan
        draws = dict((lv, (n, d)) for lv, n, d in rows(
            "SELECT level, COUNT(*), COUNT(DISTINCT seq) FROM evaluations_draw WHERE submission_id = ? GROUP BY level",
            (sub,)))
        for level, (n, distinct) in draws.items():
            assert n == distinct == plan[level]["draws"], (sub, level, n, distinct, plan[level])
        scores = rows("SELECT DISTINCT level FROM evaluations_score WHERE submission_id = ?", (sub,))
        assert {r[0] for r in scores} == set(draws), (sub, scores)
        all_draws[sub] = {k: v[0] for k, v in draws.items()}
    verify = rows("SELECT COUNT(*) FROM annotation_task WHERE kind = 'verify'")[0][0]
    assert rows("SELECT task_id FROM annotation_label WHERE method = 'majority' GROUP BY task_id "
                "HAVING COUNT(*) > 1") == []
    assert rows("SELECT COUNT(*) FROM annotation_label WHERE method = 'majority'")[0][0] == verify
    last: dict[str, float] = {}
    for key, p in rows("SELECT key, probability FROM annotation_label WHERE method = 'dawid-skene' ORDER BY id"):
        assert key not in last or abs(last[key] - p) >= 1e-6, f"a Dawid-Skene label repeated for {key}"
        last[key] = p
    assert rows("SELECT task_id, submission_id FROM annotation_taskrequest GROUP BY task_id, submission_id "
                "HAVING COUNT(*) > 1") == []
    assert rows("SELECT task_id FROM annotation_taskrequest WHERE committed_cents > 0 GROUP BY task_id "
                "HAVING COUNT(*) > 1") == [], "a verify task paid for twice"
    paid = rows("SELECT COUNT(DISTINCT task_id) FROM annotation_taskrequest WHERE committed_cents > 0")[0][0]
    controls = rows("SELECT COUNT(*) FROM annotation_task WHERE kind = 'verify' AND is_control")[0][0]
    assert paid == verify - controls, (paid, verify, controls)
    if len(subs) == 1:
        assert rows("SELECT COUNT(*) FROM annotation_taskrequest WHERE submission_id = ?", (subs[0],))[0][0] == verify
    overpaid = rows(f"SELECT COUNT(*) FROM annotation_answer a JOIN annotation_task t ON t.id = a.task_id "
                    f"JOIN annotation_annotationsettings s ON s.corpus_id = t.corpus_id WHERE a.cost_cents <> {REWARD_SQL}")
    assert overpaid[0][0] == 0
    cost, owed = rows(f"SELECT SUM(a.cost_cents), SUM({REWARD_SQL}) FROM annotation_answer a JOIN annotation_task t "
                      f"ON t.id = a.task_id JOIN annotation_annotationsettings s ON s.corpus_id = t.corpus_id")[0]
    needed = rows(f"SELECT SUM(t.answers_needed * {REWARD_SQL}) FROM annotation_task t "
                  f"JOIN annotation_annotationsettings s ON s.corpus_id = t.corpus_id")[0][0]
    assert cost == owed == needed, (cost, owed, needed)
    return {"answers": rows("SELECT COUNT(*) FROM annotation_answer")[0][0], "verify_tasks": verify,
            "labels": rows("SELECT COUNT(*) FROM annotation_label")[0][0], "cost_cents": cost,
            "draws": all_draws[subs[0]] if len(subs) == 1 else all_draws}


# ---------------------------------------------------------------------------- a PostgreSQL cluster of the test's own

class ThrowawayPostgres:
    """A PostgreSQL cluster made with ``initdb`` in a temporary folder, on a free port of 127.0.0.1 and a socket
    folder of its own (never the shared server): ``start``, ``stop``, ``close`` (stop at once, delete).  As
    root it runs as the ``postgres`` user (``runuser``).  ``unavailable()`` says why it cannot be made here."""

    def __init__(self) -> None:
        import glob
        import tempfile

        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4])
                      if p.split("/")[4].isdigit() else 0)
        self.bin = Path(bins[-1]).parent if bins else None
        self.root = Path(tempfile.mkdtemp(prefix="unpooled-pg-"))
        self.data, self.port = self.root / "data", free_port()
        self.as_user: list[str] = []
        self.log = self.root / "postgres.log"

    def unavailable(self) -> str | None:
        if self.bin is None:
            return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
        if os.geteuid() == 0:
            import pwd

            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no postgres user to run initdb as"
            if shutil.which("runuser") is None:
                return "running as root and runuser is missing"
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        return None

    def _run(self, *args: str, timeout: float = 180) -> str:
        out = subprocess.run([*self.as_user, str(self.bin / args[0]), *args[1:]], capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode != 0:
            raise AssertionError(f"{args[0]} failed: {out.stdout[-2000:]} {out.stderr[-2000:]}\n{self.logs()}")
        return out.stdout

    def logs(self) -> str:
        try:
            return "--- postgres log ---\n" + self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "180", "-o",
                  f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                  f"-c synchronous_commit=off -c full_page_writes=off", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "180", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def url(self, db: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def close(self) -> None:
        if self.bin is not None and self.running():
            try:
                self.stop("immediate")
            except AssertionError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------------------- uploads over HTTP

SUBMITTER = """
from unpooled.service.accounts.actions import do_issue_token, do_sign_up
from unpooled.service.annotation import actions as ann
from unpooled.service.corpora.actions import do_load_corpus

corpus = do_load_corpus({corpus!r}, "jsonl", {name!r})
st = ann.settings_for(corpus)
st.backend, st.exhaustive_documents = "inhouse", 0  # an accepted upload stops at annotating, waiting for people
st.save()
user = do_sign_up("alice", "a-long-password", team="TeamA")
print(do_issue_token(user)[1])
"""


def synthetic_upload(env: dict, work: Path, lines: int, *, name: str = "big") -> tuple[Path, str, int]:
    """A synthetic corpus ``name`` and a TAC file of about ``lines`` lines for it (a large upload), a team with an
    API token; returns (file, token, its line count)."""
    from unpooled.bench.ingest import prepare

    work.mkdir(parents=True, exist_ok=True)
    kb, corpus, n = prepare(work, lines)
    token = run_py(env, SUBMITTER.format(corpus=str(corpus), name=name)).strip().splitlines()[-1]
    return kb, token, n


def multipart(fields: dict, file_name: str) -> tuple[bytes, bytes, str]:
    """(the body before the file's bytes, the body after them, the Content-Type)."""
    boundary = "----unpooled-fault-test-boundary"
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                    for k, v in fields.items())
    head += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
             f"Content-Type: application/octet-stream\r\n\r\n").encode()
    return head, f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


class StreamingUpload:
    """``POST /api/submissions`` of ``path`` over a raw HTTP connection, the body sent in pieces the test
    controls: :meth:`send` up to a byte count, :meth:`finish` (the rest, then the response)."""

    def __init__(self, port: int, token: str, path: Path, fields: dict, *, query: str = "") -> None:
        import http.client

        self.data = path.read_bytes()
        self.head, self.tail, ctype = multipart(fields, path.name)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.conn.putrequest("POST", "/api/submissions" + query)
        self.conn.putheader("Authorization", f"Bearer {token}")
        self.conn.putheader("Content-Type", ctype)
        self.conn.putheader("Content-Length", str(len(self.head) + len(self.data) + len(self.tail)))
        self.conn.endheaders()
        self.conn.send(self.head)
        self.sent = 0

    def send(self, upto: int, chunk: int = 1 << 16) -> None:
        while self.sent < min(upto, len(self.data)):
            piece = self.data[self.sent:min(upto, self.sent + chunk)]
            self.conn.send(piece)
            self.sent += len(piece)

    def finish(self) -> tuple[int, str]:
        try:
            self.send(len(self.data))
            self.conn.send(self.tail)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused the body before its end and closed the connection: its answer is waiting
        resp = self.conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")

    def close(self) -> None:
        self.conn.close()


def open_by(pids, folder: Path) -> list[int]:
    """The processes among ``pids`` with a file of ``folder`` open."""
    out = []
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(folder) + "/"):
                        out.append(pid)
                        break
                except OSError:
                    continue
        except OSError:
            continue
    return out


# ---------------------------------------------------------------------------- several teams at once

TEAMS = LOAD + """
teams = {teams}
with open(work / "all.jsonl", "w") as out:
    docred_to_jsonl(iter_documents(path, "docred"), out)
lines = (work / "all.jsonl").read_text().splitlines()
predicates = sorted({{json.loads(x)["predicate"] for x in lines}})
ids = []
for t in range(teams):
    rng = random.Random(t)
    kept = [x for x in lines if rng.random() < 0.6]
    for x in rng.sample(lines, len(lines) // 5):  # wrong facts: a true pair with another relation
        d = json.loads(x)
        d["predicate"] = rng.choice([p for p in predicates if p != d["predicate"]])
        kept.append(json.dumps(d))
    kb = work / f"team{{t}}.jsonl"
    kb.write_text("\\n".join(kept) + "\\n")
    res = do_ingest_submission(kb, name, f"Team{{t}}", "run1", "jsonl", start={start!r})
    assert res.ok, res.report.to_dict()
    ids.append(res.submission.pk)
print(json.dumps(ids))
"""


def start_teams(env: dict, shared: Path, work: Path, *, teams: int = 6, n: int = 25, name: str = "teams",
                settings: dict | None = None, start: bool = True) -> list[int]:
    """Load the first ``n`` Re-DocRED dev documents as corpus ``name`` (simulated crowd) and ingest one submission
    per team, each a different random 60% of DocRED's labels plus wrong facts (a fifth of the labels with another
    relation), so that every two submissions share many instances; their evaluations are enqueued all at once
    (``start``).  Returns the submissions' ids."""
    work.mkdir(parents=True, exist_ok=True)
    code = TEAMS.format(shared=str(shared), work=str(work), n=n, name=name, teams=teams,
                        settings=dict(settings or EVALUATION), start=start)
    return json.loads(run_py(env, code).strip().splitlines()[-1])
