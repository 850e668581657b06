"""``unpooled submit FILE --server URL --token T`` against a real HTTP server (pytest-django's live server).

The CLI speaks HTTP through urllib to the live server, which runs the REST API; the upload is
validated by the task backend: in-process (``ImmediateBackend``) or, for ``--wait``, by the real
django-tasks-db worker while the CLI polls.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import pytest
from django.test import override_settings

from unpooled.cli.main import main

from ..conftest import FIXTURES

KB = FIXTURES / "kb" / "coldstart.kb"
IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}

live = pytest.mark.django_db(transaction=True)  # the live server and the worker commit


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The CLI's error line (the live server thread may log to the same captured stderr)."""
    return next((ln for ln in err.splitlines() if ln.startswith("unpooled: error:")), err.strip())


@pytest.fixture
def token(transactional_db):
    from unpooled.service.accounts.actions import do_issue_token, do_sign_up
    from unpooled.service.corpora.actions import do_load_corpus

    do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")
    return do_issue_token(do_sign_up("alice", "pw-alice", team="red"), "cli")[1]


def kb_file(tmp_path, run_id="cli-run", *, bad=False):
    text = KB.read_text().replace("fixture_run_1", run_id, 1)
    if bad:
        text = text.replace(":Paul_Simon\ttype\tPER", ":Paul_Simon\ttype\tPERSON")
    path = tmp_path / ("bad.kb" if bad else f"{run_id}.kb")
    path.write_text(text)
    return path


def counts() -> dict:
    from unpooled.service.submissions.models import RelationInstance, Submission, SubmissionEntity

    return {m.__name__: m.objects.count() for m in (Submission, SubmissionEntity, RelationInstance)}


@live
@override_settings(TASKS=IMMEDIATE)
def test_submit_rejected_prints_located_diagnostics(live_server, token, tmp_path, capsys):
    before = counts()
    bad = kb_file(tmp_path, bad=True)
    code, out, err = run(capsys, "submit", bad, "--server", live_server.url, "--token", token, "--corpus", "fixture")
    assert code == 1, (out, err)
    line = bad.read_text().splitlines().index(":Paul_Simon\ttype\tPERSON") + 1
    first = [x for x in out.splitlines() if "UP217" in x][0]
    assert re.match(rf"{re.escape(str(bad))}:{line}:\d+: UP217 entity type 'PERSON' is not in schema ", first)
    assert first.endswith("[type]")
    assert "  = help: " in out or "  | :Paul_Simon" in out
    assert out.splitlines()[-1].startswith("bad.kb: rejected with ") and out.rstrip().endswith("nothing was stored")
    assert counts() == before

    code, out, _ = run(capsys, "submit", bad, "--server", live_server.url, "--token", token, "--corpus", "fixture",
                       "--json")
    got = json.loads(out)
    assert code == 1 and got["ok"] is False and got["code"] == "submission_rejected" and got["http_status"] == 422
    assert any(d["code"] == "UP217" and d["line"] == line for d in got["diagnostics"])


@live
@override_settings(TASKS=IMMEDIATE)
def test_service_errors_exit_3(live_server, token, tmp_path, capsys):
    path = kb_file(tmp_path)
    base = ["submit", path, "--server", live_server.url, "--corpus", "fixture"]
    code, _, err = run(capsys, *base, "--token", "upt_wrong")
    assert code == 3 and error_line(err) == ("unpooled: error: the API token is not valid: it is unknown or revoked, or "
                                         "its user is inactive (HTTP 401 invalid_token)")
    code, _, err = run(capsys, "submit", path, "--server", live_server.url, "--corpus", "nope", "--token", token)
    assert code == 3 and "unknown corpus 'nope' (corpora: fixture) (HTTP 404 not_found)" in err
    from unpooled.service.submissions.actions import do_ingest_submission

    assert do_ingest_submission(path, "fixture", "red", "r1", "tac").ok
    code, _, err = run(capsys, "submit", kb_file(tmp_path, "other"), "--server", live_server.url, "--corpus",
                       "fixture", "--token", token, "--run", "r1")
    assert code == 3 and "already has a run named 'r1'" in err and "(HTTP 409 duplicate_run)" in err

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = run(capsys, "submit", path, "--server", f"http://127.0.0.1:{port}", "--token", token,
                       "--corpus", "fixture")
    assert code == 3
    assert error_line(err) == f"unpooled: error: cannot reach http://127.0.0.1:{port}/api/submissions: connection refused"


def test_usage_errors(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("UNPOOLED_TOKEN", raising=False)
    path = kb_file(tmp_path)
    code, _, err = run(capsys, "submit", path, "--corpus", "fixture")
    assert code == 2 and "--team is required" in err
    code, _, err = run(capsys, "submit", path, "--corpus", "fixture", "--server", "http://127.0.0.1:9")
    assert code == 2 and "--token" in err
    code, _, err = run(capsys, "submit", path, "--corpus", "fixture", "--server", "ftp://x", "--token", "t")
    assert code == 3 and "--server: expected a URL" in err
    code, _, err = run(capsys, "submit", tmp_path / "nope.kb", "--corpus", "x", "--server", "http://h", "--token", "t")
    assert code == 3 and "nope.kb: no such file" in err


@live
def test_submit_wait_polls_until_validated(live_server, token, tmp_path, capsys):
    """Accepted: the real db worker validates while the CLI waits (202, then polling the upload)."""
    from django.core.management import call_command
    from django_tasks_db.models import DBTaskResult

    from unpooled.service.submissions.models import Submission

    result: dict = {}

    def cli():
        result["code"] = main(["submit", str(kb_file(tmp_path, "waited")), "--server", live_server.url, "--token",
                               token, "--corpus", "fixture", "--private", "--description", "from the CLI", "--wait",
                               "--timeout", "60"])

    t = threading.Thread(target=cli)
    t.start()
    end = time.monotonic() + 30
    while not DBTaskResult.objects.exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert not Submission.objects.exists()  # queued, not yet validated
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    t.join(60)
    assert not t.is_alive()
    out, err = capsys.readouterr()
    assert result["code"] == 0, (out, err)
    sub = Submission.objects.get()
    assert (sub.team.name, sub.run_id, sub.visibility, sub.description) == ("red", "waited", "private", "from the CLI")
    lines = out.splitlines()
    assert lines[0] == f"submission {sub.pk}: red/waited on fixture: 9 instances, 7 entities, 12 mentions, 0 warning(s)"
    assert lines[1].startswith("stage: ") and lines[1].split(": ")[1] in Submission.Status.values
    assert lines[2:] == [f"page: {live_server.url}/submissions/{sub.pk}/",  # the web pages, not the API's JSON
                         f"live status: {live_server.url}/submissions/{sub.pk}/status/"]

    # without --wait: queued, and the upload's URL to poll
    code, out, err = run(capsys, "submit", kb_file(tmp_path, "later"), "--server", live_server.url, "--token", token,
                         "--corpus", "fixture")
    assert code == 0, err
    upload = DBTaskResult.objects.filter(status="READY").get()
    assert out.splitlines() == [f"upload {upload.id}: queued for validation",
                                f"follow it: {live_server.url}/submissions/uploads/{upload.id}/"]

    # the first file again (--json, --wait): the earlier submission, nothing new
    code, out, _ = run(capsys, "submit", kb_file(tmp_path, "waited"), "--server", live_server.url + "/api/",
                       "--token", token, "--corpus", "fixture", "--json")
    got = json.loads(out)
    assert code == 0 and got["ok"] is True and got["state"] == "queued"


def test_multipart_body_is_streamed_in_blocks(tmp_path):
    """The body is read block by block (the file is never loaded whole) and parses as the form sent."""
    from io import BytesIO

    from django.core.files.uploadhandler import MemoryFileUploadHandler
    from django.http.multipartparser import MultiPartParser

    from unpooled.cli.commands.submission import MultipartFile

    data = bytes(range(256)) * 1000 + b"\r\n--not-a-boundary\r\n"
    path = tmp_path / "rün \"x\".kb"
    path.write_bytes(data)
    body = MultipartFile({"corpus": "fixture", "run": "r ü"}, "file", path, path.name)
    blocks = []
    while block := body.read(8192):
        assert len(block) <= 8192
        blocks.append(block)
    raw = b"".join(blocks)
    assert len(raw) == len(body) and len(blocks) == -(-len(raw) // 8192)
    body.close()
    meta = {"CONTENT_TYPE": body.content_type, "CONTENT_LENGTH": str(len(raw))}
    post, files = MultiPartParser(meta, BytesIO(raw), [MemoryFileUploadHandler()]).parse()
    assert post["corpus"] == "fixture" and post["run"] == "r ü"
    assert files["file"].read() == data and files["file"].name == 'rün %22x%22.kb'
