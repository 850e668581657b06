"""The service in real processes (gunicorn's sync workers, production settings, SQLite in a fresh data directory):

D5: requests that ``?wait=`` for an upload never hold every web process (the probe: four of them made ``GET /``
take 28 s). D9: damaged files in ``$UNPOOLED_DATA_DIR/cache`` are misses, never a 500. File modes: the data
directory, the secret key, the SQLite file and uploads are the owner's only, created so (``chmod`` is
forbidden in the process that makes them).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from ..conftest import FIXTURES

SETUP = r"""
import json, os, pathlib, sys
os.umask(0o022)  # the usual umask: what is private must be made so explicitly
data = os.path.realpath(os.environ["UNPOOLED_DATA_DIR"])

def no_chmod(path, *a, **k):  # a file created at the umask's mode and tightened later had a window
    if os.path.realpath(str(path)).startswith(data):
        raise AssertionError(f"chmod {path}: private files must be created private")
    return real_chmod(path, *a, **k)

real_chmod = os.chmod
os.chmod = no_chmod
pathlib.Path.chmod = lambda self, mode, **k: no_chmod(self, mode)

from unpooled.service.config.bootstrap import setup_django
setup_django()
from django.contrib.auth import get_user_model
from unpooled.service.accounts.actions import do_issue_token, do_set_role, do_sign_up
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.evaluations.models import Score
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import Submission

fixtures = pathlib.Path(sys.argv[1])
do_load_corpus(fixtures / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")
alice = do_sign_up("alice", "pw-alice-long", team="red")
token = do_issue_token(alice, "ci")[1]
sub = do_ingest_submission(fixtures / "kb" / "coldstart.kb", "fixture", "red", "r-pub", "tac").submission
Score.objects.create(submission=sub, level="instance", estimator="joint", p=0.7, p_lo=0.6, p_hi=0.8, r=0.7, r_lo=0.6,
                     r_hi=0.8, f1=0.7, f1_lo=0.6, f1_hi=0.8, draws=10)
Submission.objects.filter(pk=sub.pk).update(status=Submission.Status.PUBLISHED)
print(json.dumps({"token": token, "submission": sub.pk}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """gunicorn with 2 sync workers as ``unpooled serve`` runs it; no task worker (uploads stay queued); a wait may
    last 60 s so that a waiting request is still waiting when the page is asked for."""
    from unpooled.service.config.server import web_server_command

    tmp = tmp_path_factory.mktemp("serve")
    data = tmp / "data"
    env = dict(os.environ, UNPOOLED_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="unpooled.service.config.settings",
               UNPOOLED_UPLOAD_WAIT_SECONDS="60", UNPOOLED_UPLOAD_WAIT_SLOTS="1")
    for k in ("DATABASE_URL", "UNPOOLED_CACHE", "UNPOOLED_SECRET_KEY", "UNPOOLED_SAMPLING_SECRET"):
        env.pop(k, None)
    out = subprocess.run([sys.executable, "-c", SETUP, str(FIXTURES)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    port = _free_port()
    log = open(tmp / "gunicorn.log", "wb")
    proc = subprocess.Popen(web_server_command(f"127.0.0.1:{port}", 2, access_log=False), env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(base + "/api/", timeout=10).read()
            break
        except (OSError, urllib.error.URLError):
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise AssertionError((tmp / "gunicorn.log").read_text()[-3000:])
            time.sleep(0.3)
    try:
        yield {"base": base, "data": data, **info}
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # gunicorn's quick shutdown (a request still waits in one worker)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _get(url: str, token: str | None = None, timeout: float = 120) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _post_file(url: str, token: str, fields: dict, name: str, data: bytes) -> tuple[int, dict]:
    boundary = uuid.uuid4().hex
    body = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                    for k, v in fields.items())
    body += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
             f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_files_are_private_from_creation(server):
    """Made with umask 022 and chmod forbidden: 0700 folders, 0600 files (the probe: the SQLite file 0644,
    uploads/ 0755 with 0644 files, the secret key chmod-ed after it was written)."""
    data = server["data"]
    assert _mode(data) == 0o700
    assert _mode(data / "secret_key") == 0o600 and _mode(data / "sampling_secret") == 0o600
    for f in data.glob("unpooled.sqlite3*"):  # the database, its -wal and -shm
        assert _mode(f) == 0o600, f
    assert (data / "unpooled.sqlite3").stat().st_size > 0
    # an upload waits for validation (no task worker runs): its file is private
    kb = (FIXTURES / "kb" / "coldstart.kb").read_text().replace("fixture_run_1", "modes", 1).encode()
    status, out = _post_file(server["base"] + "/api/submissions", server["token"], {"corpus": "fixture"}, "m.kb", kb)
    assert status == 202, out
    uploads = data / "uploads"
    assert _mode(uploads) == 0o700
    files = list(uploads.glob("*.upload"))
    assert files and all(_mode(f) == 0o600 for f in files)
    if (data / "cache").exists():
        assert _mode(data / "cache") == 0o700


def test_waiting_requests_never_hold_every_web_process(server):
    """Two sync web workers; four clients ``?wait=60`` on a queued upload. One holds the machine's wait slot and
    waits; the other three are answered at once (not done, Retry-After); ``GET /`` is answered while the first
    still waits. (Before: all four waited, in both processes, and the page queued behind them.)"""
    base, token = server["base"], server["token"]
    kb = (FIXTURES / "kb" / "coldstart.kb").read_text().replace("fixture_run_1", "waits", 1).encode()
    status, out = _post_file(base + "/api/submissions", token, {"corpus": "fixture"}, "w.kb", kb)
    assert status == 202 and out["state"] == "queued", out
    url = f"{out['url']}?wait=60"
    answers: list = [None] * 4

    def wait(i):
        try:
            answers[i] = _get(url, token, timeout=300)
        except OSError as exc:  # the server is stopped at the end while the slot's holder still waits
            answers[i] = exc

    threads = [threading.Thread(target=wait, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    deadline = time.time() + 55
    while sum(a is not None for a in answers) < 3 and time.time() < deadline:
        time.sleep(0.1)
    home = _get(base + "/", timeout=55)
    still_waiting = [i for i, t in enumerate(threads) if t.is_alive()]
    done = [a for a in answers if a is not None]
    assert home[0] == 200
    assert len(done) == 3 and len(still_waiting) == 1, (len(done), still_waiting)
    for status, headers, body in done:
        got = json.loads(body)
        assert status == 200 and got["state"] == "queued" and got["done"] is False
        assert headers.get("Retry-After") == "2"


def test_corrupt_cache_files_are_misses(server):
    """The probe cut the files of ``$UNPOOLED_DATA_DIR/cache`` in half, then to 100 bytes: 500s on the leaderboard
    (page and API) and the submission page. Now the same answers, and the entries are rebuilt."""
    base, cache = server["base"], server["data"] / "cache"
    urls = [base + "/corpora/fixture/leaderboard/", base + "/api/corpora/fixture/leaderboard",
            base + f"/submissions/{server['submission']}/", base + "/"]
    first = []
    for u in urls:
        status, _, body = _get(u)
        assert status == 200, u
        first.append(body)
    assert b"red/r-pub" in first[0] and b"red/r-pub" in first[1]
    for cut in (lambda b: b[: len(b) // 2], lambda b: b[:100], lambda b: os.urandom(300)):
        files = list(cache.glob("*.djcache"))
        assert files
        for f in files:
            f.write_bytes(cut(f.read_bytes()))
        for u, before in zip(urls, first):
            status, _, body = _get(u)
            assert status == 200, (u, body[:300])
            if "/api/" in u:
                assert json.loads(body) == json.loads(before)
            else:
                assert b"red/r-pub" in body or u.endswith("/")


def test_an_older_data_directory_is_made_private(tmp_path):
    """A data directory made before this (the SQLite file and its WAL 0644, the secret key 0644, uploads/ 0755):
    starting the service takes the group's and others' bits away."""
    data = tmp_path / "old"
    (data / "uploads").mkdir(parents=True, mode=0o755)
    for name in ("unpooled.sqlite3", "unpooled.sqlite3-wal", "secret_key"):
        (data / name).write_bytes(b"" if name != "secret_key" else b"an-old-secret-key-of-enough-length")
        os.chmod(data / name, 0o644)
    os.chmod(data / "uploads", 0o755)
    env = dict(os.environ, UNPOOLED_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="unpooled.service.config.settings")
    for k in ("DATABASE_URL", "UNPOOLED_SECRET_KEY", "UNPOOLED_SAMPLING_SECRET"):
        env.pop(k, None)
    out = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                          "print(settings.SECRET_KEY)"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "an-old-secret-key-of-enough-length"
    for name in ("unpooled.sqlite3", "unpooled.sqlite3-wal", "secret_key"):
        assert _mode(data / name) == 0o600, name
    assert _mode(data / "uploads") == 0o700
