"""The web server killed while a large upload streams in, and a disk that fills while an upload is stored: nothing
is half-stored (no submission or task row, no file under uploads/ once the workers' sweep has run), the submitter
gets a clear answer where one can be given, the service keeps serving, and a retry succeeds.

Real processes (``unpooled serve``: gunicorn and a task worker) and real files; the disk is a small tmpfs mounted as
the data directory (skipped, saying why, where mounting is not allowed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .harness import StreamingUpload, one, open_by, query, service_env, synthetic_upload, task_rows, until

pytestmark = pytest.mark.faults

FIELDS = {"corpus": "big", "run": "r1", "format": "tac"}


def stored(env) -> dict:
    """What the database and the upload folders hold."""
    data = Path(env["UNPOOLED_DATA_DIR"])
    return {"submissions": one(env, "SELECT COUNT(*) FROM submissions_submission"),
            "instances": one(env, "SELECT COUNT(*) FROM submissions_relationinstance"),
            "ingest_tasks": len(task_rows(env, "ingest_upload")),
            "uploads": sorted(p.name for p in (data / "uploads").glob("*.upload")),
            "partial": sorted(p.name for p in (data / "uploads" / "partial").iterdir())}


def settles_at(s, env, want: dict) -> None:
    """Wait until what is stored is ``want`` (the answer is sent before the web process closes the request's
    temporary file); fail with what is stored instead if it never is."""
    until(lambda: stored(env) == want, f"the stored state {want}", timeout=120,
          context=lambda: f"stored: {stored(env)}\n{s.tail()}")


def receiving(s, data: Path, upload: StreamingUpload) -> int:
    """Send the first half of the body and wait until a web process is writing it to a temporary file; its pid."""
    upload.send(len(upload.data) // 2)
    partial = data / "uploads" / "partial"
    return s.until(lambda: (got := open_by(s.web_workers(), partial)) and got[0],
                   "a web process to be receiving the upload into uploads/partial")


def test_web_server_killed_mid_upload_stores_nothing_and_a_retry_succeeds(serve, sqlite_env, tmp_path):
    env = dict(sqlite_env, UNPOOLED_WORKER_HEARTBEAT="0.5")  # the workers sweep often
    data = Path(env["UNPOOLED_DATA_DIR"])
    kb, token, lines = synthetic_upload(env, tmp_path / "work", 120_000)
    empty = stored(env)
    s = serve(env)
    s.wait_up()
    # 1. the gunicorn worker receiving the body is killed: gunicorn's master replaces it
    up = StreamingUpload(s.port, token, kb, FIELDS)
    victim = receiving(s, data, up)
    os.kill(victim, signal.SIGKILL)
    with pytest.raises(OSError):
        up.finish()  # the connection is gone
    up.close()
    s.until(lambda: len(s.web_workers()) == 2 and victim not in s.web_workers(), "gunicorn to replace its worker")
    # 2. the whole web server is killed (master and workers): serve starts a new one
    web = s.web_pid()
    up = StreamingUpload(s.port, token, kb, FIELDS)
    receiving(s, data, up)
    os.killpg(web, signal.SIGKILL)
    with pytest.raises(OSError):
        up.finish()
    up.close()
    s.until(lambda: s.web_pid() not in (None, web) and s.get("/")[0] == 200, "serve to restart the web server")
    # nothing was stored; the only trace is the two bodies being received, which nobody uses any more
    after = stored(env)
    assert {k: v for k, v in after.items() if k != "partial"} == {k: v for k, v in empty.items() if k != "partial"}
    assert after["uploads"] == [] and len(after["partial"]) == 2, after
    # the task workers delete them once they are old enough (an hour by default): age them
    for name in after["partial"]:
        os.utime(data / "uploads" / "partial" / name, (time.time() - 7200, time.time() - 7200))
    s.until(lambda: stored(env)["partial"] == [], "a worker's sweep to delete the left-over request bodies")
    swept = [line for line in s.log().splitlines() if "upload file(s) left by killed web processes" in line]
    assert all(any(name in line for line in swept) for name in after["partial"]), s.tail()
    # a retry goes through: stored once, its copy removed
    up = StreamingUpload(s.port, token, kb, FIELDS, query="?wait=300")
    code, body = up.finish()
    up.close()
    out = json.loads(body)
    if code == 202:  # the server waits a few seconds at most (api/waiting.py): on a loaded machine, poll
        def accepted():
            nonlocal out
            st, text = s.get(f"/api/uploads/{out['upload']}?wait=5", headers={"Authorization": f"Bearer {token}"})
            out = json.loads(text) if st == 200 else out
            return out["done"]
        s.until(accepted, "the retried upload's validation")
    else:
        assert code == 201, body
    assert out["state"] == "accepted", out
    s.until(lambda: (st := stored(env))["uploads"] == st["partial"] == [] and st["submissions"] == 1,
            "one submission, no file left")
    assert one(env, "SELECT counts FROM submissions_submission") and out["counts"]["lines"] == lines


# ---------------------------------------------------------------------------- a full disk

@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs as the data directory (unmounted at the end); skips when mounting is not allowed here."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for a full disk here: {got.stderr.strip() or got.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int) -> Path:
    """Fill the filesystem of ``path`` with a ballast file until ``leave`` bytes are free."""
    import errno

    ballast = path / "ballast"
    with open(ballast, "ab", buffering=0) as f:
        while (room := free_bytes(path) - leave) > 0:
            try:
                f.write(b"\0" * min(room, 1 << 20))
            except OSError as exc:  # full to the last block
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return ballast


def test_disk_full_while_storing_an_upload(serve, small_disk, sqlite_template, tmp_path):
    import shutil

    data = small_disk / "data"
    data.mkdir()
    shutil.copy(sqlite_template, data / "unpooled.sqlite3")
    env = service_env(data)
    kb, token, lines = synthetic_upload(env, tmp_path / "work", 60_000)  # about 4 MB
    s = serve(env)
    s.wait_up()
    before = stored(env)
    leaderboard = s.get("/corpora/big/leaderboard/")[0]
    assert leaderboard == 200
    # room for a third of the file: the body cannot even be received
    ballast = fill(small_disk, kb.stat().st_size // 3)
    up = StreamingUpload(s.port, token, kb, FIELDS, query="?wait=120")
    code, body = up.finish()
    up.close()
    err = json.loads(body)
    assert code == 507 and err["code"] == "storage_full" and "nothing was stored" in err["message"], body
    settles_at(s, env, before)  # no row, no file: what was received was removed
    # the service keeps serving pages that need no new disk space
    assert s.get("/")[0] == 200 and s.get("/corpora/big/leaderboard/")[0] == 200
    assert s.get("/api/corpora")[0] == 200
    # room for the body, but not for a second copy of it under uploads/
    ballast.unlink()
    fill(small_disk, int(kb.stat().st_size * 1.5))
    up = StreamingUpload(s.port, token, kb, FIELDS, query="?wait=120")
    code, body = up.finish()
    up.close()
    assert code == 507 and json.loads(body)["code"] == "storage_full", body
    settles_at(s, env, before)
    # room for the body and its copy, not for the rows: the worker's transaction fails and is rolled back, the
    # submitter is told (while it waits: the body's temporary file stays until the answer)
    (small_disk / "ballast").unlink()
    worker = s.worker_pid()
    fill(small_disk, 2 * kb.stat().st_size + (1 << 20))
    up = StreamingUpload(s.port, token, kb, FIELDS, query="?wait=300")
    code, body = up.finish()
    up.close()
    err = json.loads(body)
    assert code == 507 and err["code"] == "storage_full" and "while storing" in err["message"], body
    settles_at(s, env, {**before, "ingest_tasks": 1})  # the task's record of the refusal, nothing else
    assert s.worker_pid() == worker and s.get("/corpora/big/leaderboard/")[0] == 200
    # space again: the same upload is accepted
    (small_disk / "ballast").unlink()
    up = StreamingUpload(s.port, token, kb, FIELDS, query="?wait=300")
    code, body = up.finish()
    up.close()
    assert code == 201 and json.loads(body)["counts"]["lines"] == lines, body
    s.until(lambda: (st := stored(env))["uploads"] == st["partial"] == [] and st["submissions"] == 1,
            "one submission, no file left")
    assert query(env, "SELECT status FROM submissions_submission")


@pytest.mark.django_db
def test_form_upload_on_a_full_disk_says_so_and_keeps_nothing(client, small_disk, settings):
    """The web form (in-process, the Django test client) storing its upload on a real full filesystem."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse
    from django_tasks_db.models import DBTaskResult

    from unpooled.service.accounts.actions import do_sign_up
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.submissions.storage import FULL_MESSAGE

    from ..conftest import FIXTURES

    do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")
    client.force_login(do_sign_up("sub1", "a-long-password", team="web-team"))
    settings.UPLOAD_DIR = small_disk / "uploads"
    settings.UPLOAD_DIR.mkdir()
    fill(small_disk, 0)
    kb = (FIXTURES / "kb" / "coldstart.kb").read_bytes()
    resp = client.post(reverse("web:upload"), {"corpus": "fixture", "run": "", "format": "", "visibility": "public",
                                               "file": SimpleUploadedFile("run.kb", kb)})
    assert resp.status_code == 507 and FULL_MESSAGE in resp.content.decode()
    assert list(settings.UPLOAD_DIR.iterdir()) == [] and not DBTaskResult.objects.exists()
    resp = client.post(reverse("web:upload"), {"corpus": "fixture", "run": "", "format": "", "visibility": "public",
                                               "file": SimpleUploadedFile("run.kb", kb)},
                       headers={"x-requested-with": "fetch"})
    assert resp.status_code == 507 and FULL_MESSAGE in resp.json()["errors"]["__all__"][0]
    (small_disk / "ballast").unlink()
    resp = client.post(reverse("web:upload"), {"corpus": "fixture", "run": "", "format": "", "visibility": "public",
                                               "file": SimpleUploadedFile("run.kb", kb)})
    assert resp.status_code == 302 and DBTaskResult.objects.count() == 1  # queued, its copy stored
    assert len(list(settings.UPLOAD_DIR.glob("*.upload"))) == 1
