"""Uploads and the API under hostile input (the security probe of 2026-11, issue 12).

D8: the duplicate check never reveals another team's submission. 1f: the web upload-status page has the API's
owner check and shows no traceback. The 409 of a concurrent upload shows no SQL. A multipart body without a
boundary is a 400. D6 end to end: a one-line gzip bomb is rejected at the size limit. Rejected uploads are
rate-limited and their stored outcomes expire. D5: ``?wait=`` is capped and takes a machine-wide slot.
"""

from __future__ import annotations

import gzip
import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import IntegrityError, connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from unpooled.core.kb.lines import Limits
from unpooled.service.submissions import actions as sub_actions
from unpooled.service.submissions import uploads
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import Submission, UploadAttempt

from ..conftest import at_once, scratch
from ..service.test_api import (  # noqa: F401  (fixtures)
    IMMEDIATE,
    auth,
    bad_kb_text,
    corpus,
    domain_counts,
    is_error,
    kb_text,
    people,
    post_kb,
    subs,
)

pytestmark = pytest.mark.django_db


def _no_internal_text(text: str) -> None:
    """What an error may never show: SQL, constraint names, tracebacks, file paths of the server."""
    low = text.lower()
    for bad in ("traceback", "integrityerror", "unique constraint", "constraint failed", "duplicate key",
                "submissions_submission", "submission_unique", 'file "/', str(settings.DATA_DIR).lower(),
                "site-packages"):
        assert bad not in low, (bad, text[:2000])


# ---------------------------------------------------------------------------- D8: the duplicate check

@pytest.mark.django_db(transaction=True)  # the real worker: what the stored task result holds
def test_same_file_from_another_team_reveals_nothing(client, corpus, people):
    """Team blue uploads red's private file byte for byte: blue gets its own submission, and neither the
    answer nor the stored task result names red's submission, team, run or id (the probe got red's id and counts,
    and blue's run was silently not stored)."""
    from django_tasks_db.models import DBTaskResult

    data = kb_text("secret-run-A").encode()
    red = post_kb(client, people["red"], data, name="a.kb", visibility="private", query="?wait=0")
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    red_out = client.get(red.json()["url"], **auth(people["red"])).json()
    assert red_out["state"] == "accepted"
    red_sub = Submission.objects.get(pk=red_out["submission"])

    blue = post_kb(client, people["blue"], data, name="copy.kb", run="bob-copy")
    assert blue.status_code == 202
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    resp = client.get(blue.json()["url"], **auth(people["blue"]))
    out = resp.json()
    assert out["state"] == "accepted" and out["duplicate"] is False and out["team"] == "blue"
    blue_sub = Submission.objects.get(pk=out["submission"])
    assert blue_sub.pk != red_sub.pk and (blue_sub.team.name, blue_sub.run_id) == ("blue", "bob-copy")
    assert blue_sub.visibility == "public" and blue_sub.counts == red_sub.counts  # its own, of the same bytes
    stored = DBTaskResult.objects.get(id=out["upload"]).return_value
    for text in (resp.content.decode(), json.dumps(stored)):
        assert "secret-run-A" not in text and '"red"' not in text
        assert f"/submissions/{red_sub.pk}" not in text and f'"submission": {red_sub.pk},' not in text
    assert stored["submission"] == blue_sub.pk and stored["team"] == "blue" and stored["run"] == "bob-copy"
    is_error(client.get(f"/api/submissions/{red_sub.pk}", **auth(people["blue"])), 404, "not_found")
    # the same team again: its own earlier submission, 200
    again = post_kb(client, people["blue"], data, name="again.kb")
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    again = client.get(again.json()["url"], **auth(people["blue"])).json()
    assert again["duplicate"] is True and again["submission"] == blue_sub.pk
    assert Submission.objects.count() == 2


def test_concurrent_same_file_is_the_teams_earlier_submission(corpus, monkeypatch):
    """Two uploads of one file by one team that both passed the duplicate check: the loser's insert hits the
    unique constraint and answers with the winner's submission (the probe got a 409 with the SQL text)."""
    path = _write("same.kb", kb_text("race"))
    winner = do_ingest_submission(path, "fixture", "red", "race", "tac")
    real = sub_actions._same_file
    calls = []

    def not_yet(*a):  # the first look ran before the winner committed
        calls.append(a)
        return None if len(calls) == 1 else real(*a)

    monkeypatch.setattr(sub_actions, "_same_file", not_yet)
    loser = do_ingest_submission(path, "fixture", "red", "race-2", "tac")
    assert len(calls) == 2
    assert loser.duplicate_of == winner.submission and loser.submission == winner.submission
    assert Submission.objects.count() == 1


@override_settings(TASKS=IMMEDIATE)
def test_conflict_409_shows_no_sql(client, corpus, people, monkeypatch):
    """Any other conflict while storing: 409 ``conflict``, a message that says what to do, no database text."""
    def clash(*a, **k):
        raise IntegrityError('UNIQUE constraint failed: submissions_submission.corpus_id, '
                             'submissions_submission.file_sha256 (submission_unique_file) File "/srv/x.py"')

    monkeypatch.setattr(sub_actions, "store_kb", clash)
    before = domain_counts()
    body = is_error(post_kb(client, people["red"], kb_text("c1"), run="c1"), 409, "conflict")
    assert body["message"] == "submission conflicts with one stored at the same time; upload it again"
    _no_internal_text(json.dumps(body))
    assert domain_counts() == before


def _write(name: str, text: str):
    p = scratch(name)
    p.write_text(text)
    return p




@pytest.mark.django_db(transaction=True)
def test_concurrent_uploads_store_one_and_tell_no_sql(corpus):
    """Real concurrency (PostgreSQL: threads on their own connections). One file uploaded ten times at once by
    one team is stored once, and every upload answers with that submission; five files under one run name at
    once: one stored, the others refused with the run-name message (the probe saw one 409 with the SQL text)."""
    if connection.vendor != "postgresql":
        pytest.skip("threads writing at once need PostgreSQL (the SQLite test database is in memory)")
    path = _write("ten.kb", kb_text("ten"))
    results, errors = at_once(10, lambda i: do_ingest_submission(path, "fixture", "red", f"ten-{i}", "tac"))
    assert errors == [] and len({r.submission.pk for r in results}) == 1
    assert sum(r.duplicate_of is None for r in results) == 1
    assert Submission.objects.count() == 1
    files = [_write(f"five-{i}.kb", kb_text(f"five-{i}")) for i in range(5)]
    results, errors = at_once(5, lambda i: do_ingest_submission(files[i], "fixture", "red", "same-run", "tac"))
    assert len(results) == 1 and len(errors) == 4
    for exc in errors:
        assert isinstance(exc, sub_actions.ActionError), repr(exc)
        msg = str(exc)
        assert "already has a run named 'same-run'" in msg or msg.startswith("submission conflicts"), msg
        _no_internal_text(msg)
    assert Submission.objects.filter(run_id="same-run").count() == 1


# ---------------------------------------------------------------------------- malformed multipart requests

BAD_MULTIPART = [
    ("multipart/form-data", b"x"),  # no boundary (the probe's 500)
    ("multipart/form-data; boundary=", b"--\r\n"),  # an empty boundary
    ("multipart/form-data; boundary=\x00\x01", b"--\x00\x01\r\n"),  # control characters in it
    ("multipart/form-data; boundary=" + "b" * 300, b"--" + b"b" * 300 + b"\r\n"),  # longer than allowed
    ("multipart/form-data; boundary=XYZ", b"--XYZ\r\nContent-Disposition: form-data; name=\"corpus\"\r\n\r\nfix"),
    ("multipart/form-data; boundary=XYZ", b"--XYZ\r\nContent-Disposition: form-data; name=\"file\"; "
                                          b"filename=\"a.kb\"\r\n\r\nabc\r\n--XYZ"),  # cut short
    ("multipart/form-data; boundary=XYZ", b"garbage without any boundary at all"),
    ("multipart/form-data; boundary=XYZ", b"--XYZ--\r\n"),  # no parts
    ("multipart/form-data; boundary=XYZ; charset=nope", b"--XYZ\r\nContent-Disposition: form-data; "
                                                         b"name=\"corpus\"\r\n\r\nfixture\r\n--XYZ--\r\n"),
    ("multipart/mixed", b"x"),
    ("application/x-www-form-urlencoded", b"corpus=fixture&file=%ZZ"),
    ("application/json", b'{"corpus": "fixture", "file": "abc"}'),
    ("text/plain", b"\x00\xff\xfe"),
]


@override_settings(TASKS=IMMEDIATE)
@pytest.mark.parametrize("ctype,body", BAD_MULTIPART)
def test_malformed_multipart_is_400(client, corpus, people, ctype, body):
    before = domain_counts()
    resp = client.generic("POST", "/api/submissions", body, content_type=ctype, **auth(people["red"]))
    assert resp.status_code == 400, (resp.status_code, resp.content[:500])
    err = is_error(resp, 400, "invalid_request")
    _no_internal_text(json.dumps(err))
    assert domain_counts() == before and not list(settings.UPLOAD_DIR.glob("*.upload"))


def test_malformed_multipart_web_form_is_400(corpus, people):
    """The upload form is a multipart POST too (Django answers 400 before the view)."""
    c = Client()
    c.force_login(people["alice"])
    resp = c.generic("POST", reverse("web:upload"), b"x", content_type="multipart/form-data")
    assert resp.status_code == 400


# ---------------------------------------------------------------------------- D6 end to end

@override_settings(TASKS=IMMEDIATE, LIMITS=Limits(max_bytes=10 * (1 << 20)))
def test_one_line_gzip_bomb_is_rejected_at_the_size_limit(client, corpus, people, monkeypatch):
    """The probe's bomb (one line, 1 GiB once decompressed, here 1,024 gzip members of 1 MiB): rejected with
    UP101 and UP110, having read about the limit; nothing stored."""
    from unpooled.core.kb import lines

    member = gzip.compress(b"a" * (1 << 20), compresslevel=9, mtime=0)
    bomb = member * 1024
    read = []
    real_open = lines.open_binary

    def counting(source):
        stream = real_open(source)
        real_read = stream.readline

        def readline(n=-1):
            out = real_read(n)
            read.append(len(out))
            return out

        stream.readline = readline
        return stream

    monkeypatch.setattr(lines, "open_binary", counting)
    before = domain_counts()
    body = is_error(post_kb(client, people["red"], bomb, name="bomb.jsonl.gz", format="jsonl", run="bomb"), 422,
                    "submission_rejected")
    assert [d["code"] for d in body["diagnostics"]] == ["UP101", "UP110"]
    assert sum(read) <= 10 * (1 << 20) + 1, sum(read)  # not a byte past the limit was asked for
    assert domain_counts() == before


# ---------------------------------------------------------------------------- 1f: the web upload-status page

@pytest.mark.django_db(transaction=True)
def test_upload_status_page_checks_the_owner(corpus, people):
    """As ``GET /api/uploads/{id}``: the uploading team, the user who uploaded and organisers; anonymous callers sign
    in, anyone else gets 404 (the probe read another team's diagnostics, with excerpts of the file)."""
    alice = Client()
    alice.force_login(people["alice"])
    form = {"corpus": "fixture", "run": "", "format": "", "visibility": "private",
            "file": SimpleUploadedFile("secret.kb", bad_kb_text().replace("Paul_Simon", "SECRETLINKA").encode())}
    resp = alice.post(reverse("web:upload"), form)
    assert resp.status_code == 302
    url = resp.url
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    mine = alice.get(url)
    assert mine.status_code == 200 and "SECRETLINKA" in mine.content.decode()
    anon = Client().get(url)
    assert anon.status_code == 302 and "/accounts/login/" in anon["Location"]
    for who in ("bob", "anna"):
        other = Client()
        other.force_login(people[who])
        page = other.get(url)
        assert page.status_code == 404 and "SECRETLINKA" not in page.content.decode()
    olga = Client()
    olga.force_login(people["olga"])
    assert olga.get(url).status_code == 200
    # a teammate sees the team's upload
    from unpooled.service.accounts.actions import do_sign_up
    from unpooled.service.submissions.models import Team

    mate = do_sign_up("alice2", "pw-alice2-long", team="red", invite_code=Team.objects.get(name="red").invite_code)
    c = Client()
    c.force_login(mate)
    assert c.get(url).status_code == 200
    for bad in ("/submissions/uploads/not-a-uuid/", "/submissions/uploads/00000000-0000-0000-0000-000000000000/",
                "/submissions/uploads/" + "9" * 500 + "/"):
        assert alice.get(bad).status_code == 404, bad
    assert alice.get("/submissions/uploads/%00/").status_code == 400  # a NUL in a URL: refused before any view


@pytest.mark.django_db(transaction=True)
def test_crashed_upload_page_shows_no_traceback(corpus, people, tmp_path):
    """A validation that crashed: the page says it failed and what to do, never the traceback or server paths."""
    from unpooled.service.submissions.tasks import ingest_upload

    (tmp_path / "d.upload").mkdir()
    user = people["alice"]
    result = ingest_upload.enqueue(str(tmp_path / "d.upload"), "fixture", "red", "", "", "x.kb", "public", user.pk)
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    result.refresh()
    assert result.status == "FAILED" and "Traceback" in result.errors[-1].traceback
    c = Client()
    c.force_login(user)
    page = c.get(reverse("web:upload_status", args=[result.id]))
    html = page.content.decode()
    assert page.status_code == 200 and "Upload failed" in html and "IsADirectoryError" in html
    _no_internal_text(html)
    assert str(tmp_path) not in html
    api = Client().get(f"/api/uploads/{result.id}", **auth(people["red"])).json()
    assert api["state"] == "failed"
    _no_internal_text(json.dumps(api))


@pytest.mark.django_db(transaction=True)
def test_upload_status_page_shows_control_characters_replaced(corpus, people):
    alice = Client()
    alice.force_login(people["alice"])
    data = b"\x00\x01binary\x00junk\x07\n" * 3
    resp = alice.post(reverse("web:upload"), {"corpus": "fixture", "run": "", "format": "jsonl",
                                              "visibility": "public", "file": SimpleUploadedFile("b.jsonl", data)})
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    html = alice.get(resp.url).content.decode()
    assert "Submission rejected" in html and "\x00" not in html and "\x07" not in html


# ---------------------------------------------------------------------------- rate limits on rejected uploads

@override_settings(TASKS=IMMEDIATE, UPLOAD_REJECTS_PER_DAY=2, UPLOAD_REJECTS_PER_ADDRESS=0)
def test_rejected_uploads_are_rate_limited_per_team_and_user(client, corpus, people):
    """Rejected uploads store nothing (so no quota counts them): after 2 in 24 hours, the team's next upload
    is refused with 429 ``rate_limited`` before any validation; other teams and organisers are not affected."""
    for i in range(2):
        is_error(post_kb(client, people["red"], bad_kb_text() + f"\n# {i}", name=f"bad{i}.kb", run=f"b{i}"), 422,
                 "submission_rejected")
    assert UploadAttempt.objects.filter(team_name="red", state="rejected").count() == 2
    before, n_attempts = domain_counts(), UploadAttempt.objects.count()
    body = is_error(post_kb(client, people["red"], kb_text("good")), 429, "rate_limited")
    assert "team 'red' has had 2 uploads rejected in the last 24 hours" in body["message"]
    assert "unpooled validate" in body["message"]
    assert domain_counts() == before and UploadAttempt.objects.count() == n_attempts
    assert not list(settings.UPLOAD_DIR.glob("*.upload"))
    # the web form says the same
    alice = Client()
    alice.force_login(people["alice"])
    page = alice.post(reverse("web:upload"), {"corpus": "fixture", "run": "", "format": "", "visibility": "public",
                                              "file": SimpleUploadedFile("g.kb", kb_text("g2").encode())})
    assert page.status_code == 200 and "uploads rejected in the last 24 hours" in page.content.decode()
    # another team: fine; an organiser naming red: fine
    assert post_kb(client, people["blue"], kb_text("blue-ok")).status_code == 201
    olga = Client()
    olga.force_login(people["olga"])
    assert post_kb(olga, None, kb_text("org-for-red"), team="red").status_code == 201
    # a day later the window has passed
    UploadAttempt.objects.update(created=timezone.now() - timedelta(days=1, seconds=1))
    assert post_kb(client, people["red"], kb_text("next-day")).status_code == 201


@override_settings(TASKS=IMMEDIATE, UPLOAD_REJECTS_PER_DAY=0, UPLOAD_REJECTS_PER_ADDRESS=3)
def test_rejected_uploads_are_rate_limited_per_address(client, corpus, people):
    for i, who in enumerate(("red", "blue", "red")):
        is_error(post_kb(client, people[who], bad_kb_text() + f"\n# {i}", name="bad.kb", run=f"b{i}"), 422,
                 "submission_rejected")
    body = is_error(post_kb(client, people["blue"], kb_text("x")), 429, "rate_limited")
    assert "from your address" in body["message"]
    other = client.post("/api/submissions", {"corpus": "fixture", "file": SimpleUploadedFile("y.kb", kb_text("y").encode())},
                        REMOTE_ADDR="10.1.2.3", **auth(people["blue"]))
    assert other.status_code == 201, other.content


@pytest.mark.django_db(transaction=True)
@override_settings(UPLOADS_PENDING=2)
def test_waiting_uploads_are_limited(client, corpus, people):
    """No worker runs: two uploads wait, the third is refused until one is done."""
    for i in range(2):
        assert post_kb(client, people["red"], kb_text(f"p{i}")).status_code == 202
    body = is_error(post_kb(client, people["red"], kb_text("p2")), 429, "rate_limited")
    assert "has 2 uploads waiting for validation" in body["message"]
    assert len(list(settings.UPLOAD_DIR.glob("*.upload"))) == 2  # the refused one was removed
    assert post_kb(client, people["blue"], kb_text("b0")).status_code == 202
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    assert set(UploadAttempt.objects.values_list("state", flat=True)) == {"accepted"}
    assert post_kb(client, people["red"], kb_text("p2")).status_code == 202


# ---------------------------------------------------------------------------- retention of upload outcomes

@pytest.mark.django_db(transaction=True)
def test_outcomes_of_uploads_expire(client, corpus, people):
    """Each rejected upload kept a task result with its whole report for ever; now outcomes older than
    UPLOAD_RESULT_HOURS are deleted by the next upload's task, and the report keeps at most 1,000 diagnostics."""
    from django_tasks_db.models import DBTaskResult

    lines = "\n".join(f'{{"bad": {i}' for i in range(3000))  # 3,000 erroneous lines
    old = post_kb(client, people["red"], lines, name="many.jsonl", format="jsonl", run="old").json()
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    row = DBTaskResult.objects.get(id=old["upload"])
    rep = row.return_value["report"]
    assert rep["n_errors"] == 3000 and len(rep["errors"]) <= uploads.STORED_DIAGNOSTICS
    assert sum(rep["by_code"].values()) == 3000
    assert sum(rep["omitted"].values()) == 3000 - len(rep["errors"])
    got = client.get(old["url"], **auth(people["red"])).json()
    assert got["state"] == "rejected" and got["error"]["code"] == "submission_rejected"
    assert "3,000 error(s)" in got["error"]["message"]
    # two days later another upload's task prunes it
    DBTaskResult.objects.filter(id=old["upload"]).update(finished_at=timezone.now() - timedelta(hours=49))
    UploadAttempt.objects.update(created=timezone.now() - timedelta(hours=49))
    new = post_kb(client, people["red"], bad_kb_text(), name="bad.kb", run="new").json()
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    assert not DBTaskResult.objects.filter(id=old["upload"]).exists()
    assert DBTaskResult.objects.filter(id=new["upload"]).exists()
    # the rejected attempt stays in the team's upload history (its diagnostics) until HISTORY_DAYS have passed
    assert sorted(UploadAttempt.objects.values_list("task_id", flat=True)) == sorted([old["upload"], new["upload"]])
    UploadAttempt.objects.filter(task_id=old["upload"]).update(
        created=timezone.now() - timedelta(days=uploads.HISTORY_DAYS + 1))
    assert uploads.prune()["attempts"] == 1
    assert list(UploadAttempt.objects.values_list("task_id", flat=True)) == [new["upload"]]
    is_error(client.get(old["url"], **auth(people["red"])), 404, "not_found")
    # prune() on its own: nothing young is touched
    assert uploads.prune() == {"results": 0, "attempts": 0}


# ---------------------------------------------------------------------------- D5: ?wait= is bounded

class FakeClock:
    def __init__(self):
        self.now, self.slept = 1000.0, 0.0

    def clock(self):
        return self.now

    def sleep(self, s):
        self.now += s
        self.slept += s


@pytest.mark.django_db(transaction=True)
def test_wait_is_capped_and_needs_a_slot(client, corpus, people, monkeypatch):
    """``?wait=300`` holds a web process at most UPLOAD_WAIT_SECONDS (5) and answers with Retry-After; when every
    wait slot of the machine is taken it answers at once (the probe's four ``?wait=60`` made ``GET /`` take 28 s).
    The clock is a fake one: what is measured is how long the request asked to sleep."""
    from unpooled.service.api import waiting

    fake = FakeClock()
    monkeypatch.setattr(waiting.time, "monotonic", fake.clock)
    monkeypatch.setattr(waiting.time, "sleep", fake.sleep)
    resp = post_kb(client, people["red"], kb_text("w"), query="?wait=300")
    assert resp.status_code == 202 and resp["Retry-After"] == str(waiting.POLL_SECONDS)
    assert 0 < fake.slept <= settings.UPLOAD_WAIT_SECONDS == 5
    url = resp.json()["url"]
    fake.slept = 0.0
    got = client.get(url + "?wait=300", **auth(people["red"]))
    assert got.status_code == 200 and got.json()["state"] == "queued" and got["Retry-After"]
    assert 0 < fake.slept <= 5
    with waiting.wait_slot() as held:  # another request of this machine is waiting
        assert held
        fake.slept = 0.0
        got = client.get(url + "?wait=300", **auth(people["red"]))
        assert got.status_code == 200 and got.json()["done"] is False and fake.slept == 0.0
        with override_settings(UPLOAD_WAIT_SLOTS=2):
            client.get(url + "?wait=3", **auth(people["red"]))
            assert fake.slept == 3.0  # the second slot was free
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    fake.slept = 0.0
    done = client.get(url + "?wait=300", **auth(people["red"]))
    assert done.json()["state"] == "accepted" and fake.slept == 0.0 and "Retry-After" not in done


# ---------------------------------------------------------------------------- a failed stage's cause

def test_a_failed_stage_tells_its_cause_to_the_team_only(client, people, subs):
    """A stage's cause is an exception's text (it may quote the database): the team and organisers read it; anyone
    else who may view the submission is told only that the stage failed."""
    sub = subs["red_pub"]
    cause = ('django.db.utils.IntegrityError: UNIQUE constraint failed: evaluations_draw.submission_id, '
             'evaluations_draw.seq')
    Submission.objects.filter(pk=sub.pk).update(status="failed", failed_stage="sampling", error=cause)
    olga = Client()
    olga.force_login(people["olga"])
    alice = Client()
    alice.force_login(people["alice"])
    bob = Client()
    bob.force_login(people["bob"])
    for c, kw, sees in ((client, {}, False), (client, auth(people["blue"]), False), (bob, {}, False),
                        (client, auth(people["red"]), True), (olga, {}, True)):
        detail = c.get(f"/api/submissions/{sub.pk}", **kw).json()
        status = c.get(f"/api/submissions/{sub.pk}/status", **kw).json()
        assert detail["failed_stage"] == status["failed_stage"] == "sampling"
        assert (detail["error"] == cause) is sees and (status["error"] == cause) is sees
        if not sees:
            assert detail["error"] == sub_actions.STAGE_ERROR_HIDDEN
            _no_internal_text(json.dumps(detail) + json.dumps(status))
    for c, sees in ((Client(), False), (bob, False), (alice, True), (olga, True)):
        page = c.get(reverse("web:status", args=[sub.pk])).content.decode()
        js = c.get(reverse("web:status_json", args=[sub.pk])).json()
        assert ("UNIQUE constraint" in page) is sees and (js["error"] == cause) is sees
        assert "sampling" in page
