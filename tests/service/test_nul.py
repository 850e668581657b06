"""NUL characters (U+0000) anywhere a client can put them: always a located 400 or 422, never a 500.

Found while running the suite on PostgreSQL, which refuses NUL in text: a NUL in a URL's path or query string
made every lookup by name or search answer 500 (API and pages), a NUL in a form field or a file name made the
upload's task crash, and a rejected file whose diagnostics quoted a NUL byte could not have its outcome
stored (the upload showed as failed, 500 ``upload_failed``). On SQLite the same requests are refused the same
way, so the test runs on both.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client, override_settings

from unpooled.service.submissions.models import Submission

from .test_api import IMMEDIATE, auth, corpus, domain_counts, is_error, kb_text, people, post_kb, subs  # noqa: F401

pytestmark = pytest.mark.django_db

API_URLS = ["/api/corpora/a%00b", "/api/corpora/fixture/documents?q=a%00", "/api/submissions?corpus=a%00&team=%00",
            "/api/corpora/fixture/documents/x%00y", "/api/corpora/fixture/labels?method=%00", "/api/uploads/%00",
            "/api/corpora/fixture/leaderboard?level=%00", "/api/submissions?%00=1", "/api/me?x=%00"]
PAGE_URLS = ["/corpora/a%00b/", "/corpora/fixture/?q=%00", "/submissions/?q=%00&team=%00&corpus=%00",
             "/corpora/fixture/leaderboard/?level=%00", "/submissions/uploads/%00/", "/accounts/login/?next=%00"]


def test_nul_in_the_url_is_400(client, people, subs):
    for url in API_URLS:
        for kw in ({}, auth(people["red"])):
            body = is_error(client.get(url, **kw), 400, "invalid_request")
            assert "NUL" in body["message"], url
    for url in PAGE_URLS:
        for c in (client, _signed_in(people["alice"])):
            resp = c.get(url)
            assert resp.status_code == 400 and b"NUL" in resp.content, url


def _signed_in(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def test_nul_in_the_session_cookie_is_anonymous(client, people):
    c = Client()
    c.cookies[settings.SESSION_COOKIE_NAME] = '"aaaaaaaaaaaaaaaa\\000bbbb"'  # a cookie's octal escape: a NUL
    assert c.get("/api/me").json()["authenticated"] is False
    assert c.get("/").status_code == 200


@override_settings(TASKS=IMMEDIATE)
def test_nul_in_upload_fields_is_400(client, corpus, people, subs):
    before = domain_counts()
    for field in ("run", "description", "team", "corpus"):
        body = is_error(post_kb(client, people["red"], kb_text("n"), **{field: "a\x00b"}), 400, "invalid_request")
        assert body["diagnostics"][0]["field"] == field and "NUL" in body["diagnostics"][0]["message"]
    # a NUL in the file's name: Django's multipart parser drops it; the name is shown without it
    resp = client.post("/api/submissions", {"corpus": "fixture", "file": SimpleUploadedFile("x\x00.kb", b"abc")},
                       **auth(people["red"]))
    body = is_error(resp, 422, "submission_rejected")
    assert "\x00" not in json.dumps(body, ensure_ascii=False) and body["message"].startswith("x.kb: rejected")
    url = f"/api/submissions/{subs['red_pub'].pk}"
    body = is_error(client.patch(url, json.dumps({"description": "a\u0000b"}), content_type="application/json",
                                 **auth(people["red"])), 400, "invalid_request")
    assert body["diagnostics"][0]["field"] == "payload.description"
    assert domain_counts() == before and not list(settings.UPLOAD_DIR.glob("*.upload"))
    # the web form: Django's fields refuse NUL
    page = _signed_in(people["alice"]).post("/submissions/new/", {
        "corpus": "fixture", "run": "a\x00b", "format": "", "visibility": "public",
        "file": SimpleUploadedFile("g.kb", kb_text("w").encode())})
    assert page.status_code == 200 and "Null characters are not allowed" in page.content.decode()
    assert Submission.objects.count() == 3


def _jsonl_line(entity=":Carrie_Fisher", link="WIKI:Carrie_Fisher") -> str:
    return json.dumps({"doc": "NYT_ENG_20130914.0094", "subject": {
        "start": 98, "end": 111, "entity": entity, "type": "PER", "link": link}, "predicate": "per:city_of_birth",
        "object": {"start": 158, "end": 171, "entity": ":Beverly_Hills", "type": "GPE"},
        "provenance": [{"start": 98, "end": 172}], "confidence": 0.95})


@pytest.mark.django_db(transaction=True)  # the real worker stores each outcome (PostgreSQL: JSON without NUL)
def test_nul_in_a_file_is_a_located_rejection(client, corpus, people):
    """A NUL byte in a line (UP102), a JSON ``\\u0000`` in a name or a link (UP107), an over-long line holding NUL
    bytes (UP101): each rejected at its line, the outcome stored and shown (not a failed upload), nothing kept."""
    cases = {
        "bytes.jsonl": (_jsonl_line() + "\n" + _jsonl_line().replace("Beverly", "Bev\x00erly") + "\n", "UP102", 2),
        "escape.jsonl": (_jsonl_line(entity=":Carrie\x00Fisher") + "\n", "UP107", 1),
        "link.jsonl": (_jsonl_line(link="WIKI:\x00") + "\n", "UP107", 1),
        "long.jsonl": ("\x00" * 200_000 + "\n", "UP101", 1),
    }
    urls = {}
    for i, (name, (text, _, _)) in enumerate(cases.items()):
        resp = post_kb(client, people["red" if i % 2 else "blue"], text, name=name, format="jsonl", run=f"nul{i}")
        assert resp.status_code == 202, resp.content
        urls[name] = (resp.json()["url"], people["red" if i % 2 else "blue"])
        call_command("db_worker", batch=True, startup_delay=False, interval=0)
    for name, (text, code, line) in cases.items():
        url, token = urls[name]
        out = client.get(url, **auth(token)).json()
        assert out["state"] == "rejected", (name, out)
        diags = out["error"]["diagnostics"]
        assert (code, line) in {(d["code"], d["line"]) for d in diags}, (name, diags)
        assert "\x00" not in json.dumps(out, ensure_ascii=False)
    assert Submission.objects.count() == 0
