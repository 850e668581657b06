"""The REST API (/api/): authentication, visibility, every endpoint, the error shape, uploads, the schema."""

from __future__ import annotations

import gzip
import json
import math
import re
import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client, override_settings

from unpooled.core.kb.lines import Limits
from unpooled.service.accounts.actions import do_issue_token, do_revoke_token, do_set_role, do_sign_up
from unpooled.service.annotation.models import Label
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import (
    RelationInstance,
    Submission,
    SubmissionEntity,
    SubmissionMention,
    Team,
)

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db

KB = FIXTURES / "kb" / "coldstart.kb"
IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
ERROR_KEYS = {"code", "message", "diagnostics"}
DIAG_KEYS = {"path", "line", "col", "code", "severity", "message", "field", "text", "help"}


def kb_text(run: str = "fixture_run_1") -> str:
    """The fixture KB under another run id (another file: submissions are unique per file)."""
    return KB.read_text().replace("fixture_run_1", run, 1)


def bad_kb_text() -> str:
    return KB.read_text().replace(":Paul_Simon\ttype\tPER", ":Paul_Simon\ttype\tPERSON")


def is_error(resp, status: int, code: str) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.content[:1000])
    assert resp["Content-Type"].startswith("application/json")
    body = resp.json()
    assert set(body) == ERROR_KEYS and body["code"] == code, body
    assert body["message"] and isinstance(body["diagnostics"], list)
    for d in body["diagnostics"]:
        assert set(d) == DIAG_KEYS, d
    return body


def auth(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def domain_counts() -> dict:
    return {m.__name__: m.objects.count() for m in (Submission, SubmissionEntity, SubmissionMention,
                                                    RelationInstance, Team, Draw, Score)}


@pytest.fixture
def corpus():
    return do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")


@pytest.fixture
def people(db):
    alice = do_sign_up("alice", "pw-alice", team="red")
    bob = do_sign_up("bob", "pw-bob", team="blue")
    anna = do_sign_up("anna", "pw-anna", role="annotator", ties="none")
    olga = get_user_model().objects.create_user("olga", password="pw-olga")
    do_set_role(olga, "organiser")
    return {"alice": alice, "bob": bob, "anna": anna, "olga": olga,
            "red": do_issue_token(alice, "ci")[1], "blue": do_issue_token(bob, "ci")[1]}


@pytest.fixture
def subs(corpus, people, tmp_path):
    """red: a public and a private submission; blue: a public one."""
    def ingest(team, run, visibility, tmp_name):
        path = tmp_path / tmp_name  # the test's own folder (the data directory is shared by the suite's processes)
        path.write_text(kb_text(run))
        res = do_ingest_submission(path, "fixture", team, run, "tac", visibility=visibility)
        assert res.ok, res.report.to_dict()
        return res.submission

    return {"red_pub": ingest("red", "r-pub", "public", "a.kb"), "red_priv": ingest("red", "r-priv", "private", "b.kb"),
            "blue_pub": ingest("blue", "b-pub", "public", "c.kb")}


def score(sub, level="instance", f1=0.5, lo=0.4, hi=0.6, **kw):
    return Score.objects.create(submission=sub, level=level, estimator="joint", p=f1, p_lo=lo, p_hi=hi, r=f1,
                                r_lo=lo, r_hi=hi, f1=f1, f1_lo=lo, f1_hi=hi, draws=10, **kw)


def publish(*subs_):
    Submission.objects.filter(pk__in=[s.pk for s in subs_]).update(status=Submission.Status.PUBLISHED)


# ---------------------------------------------------------------------------- schema and docs

EXPECTED_PATHS = {
    "/api/me", "/api/corpora", "/api/corpora/{name}", "/api/corpora/{name}/documents",
    "/api/corpora/{name}/documents/{doc_id}", "/api/corpora/{name}/leaderboard", "/api/corpora/{name}/labels",
    "/api/submissions", "/api/submissions/{pk}", "/api/submissions/{pk}/status", "/api/submissions/{pk}/scores",
    "/api/submissions/{pk}/scores/history", "/api/submissions/{pk}/labels", "/api/uploads/{upload_id}",
    "/api/corpora/{name}/periods", "/api/corpora/{name}/periods/{number}/close",
    "/api/corpora/{name}/periods/{number}/release",
    "/api/submissions/{pk}/entity-scores", "/api/corpora/{name}/leaderboard/entities",
    "/api/corpora/{name}/leaderboard/pairwise",
}


def test_openapi_schema_lists_every_path(client):
    resp = client.get("/api/openapi.json")
    assert resp.status_code == 200
    schema = json.loads(resp.content)
    assert schema["openapi"].startswith("3.") and schema["info"]["title"] == "unpooled API"
    assert set(schema["paths"]) == EXPECTED_PATHS
    assert set(schema["paths"]["/api/submissions"]) == {"get", "post"}
    assert set(schema["paths"]["/api/submissions/{pk}"]) == {"get", "patch"}
    assert {"TokenAuth", "SessionAuth"} <= set(schema["components"]["securitySchemes"])
    assert schema["components"]["securitySchemes"]["TokenAuth"] == {"type": "http", "scheme": "bearer"}
    ids = set()
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            assert op["operationId"] not in ids
            ids.add(op["operationId"])
            assert op["summary"] and op.get("tags"), (path, method)
            # descriptions are Markdown in Swagger UI: no Sphinx role (":mod:`x`") may leak into them
            assert not re.search(r":(mod|func|class|meth|attr|data):`", op.get("description", "")), (path, method)
            assert {"200", "201", "202"} & set(op["responses"])
            errs = [r for s, r in op["responses"].items() if s.startswith(("4", "5"))]
            assert errs, (path, method)
            for r in errs:
                assert r["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorOut"}
    # public reads allow anonymous callers; writes and the label pool need a caller
    assert {} in schema["paths"]["/api/corpora"]["get"]["security"]
    assert {} not in schema["paths"]["/api/submissions"]["post"]["security"]
    assert {} not in schema["paths"]["/api/corpora/{name}/labels"]["get"]["security"]
    body = schema["paths"]["/api/submissions"]["post"]["requestBody"]["content"]
    assert "multipart/form-data" in body
    assert {"file", "corpus"} <= set(body["multipart/form-data"]["schema"]["required"])
    diag = schema["components"]["schemas"]["DiagnosticOut"]["properties"]
    assert DIAG_KEYS == set(diag)


def schema_version(client) -> str:
    return client.get("/api/openapi.json").json()["info"]["version"]


def test_docs_page_works_offline(client):
    resp = client.get("/api/docs")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/html")
    html = resp.content.decode()
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "no asset from another site"
    assets = re.findall(r"(?:src|href)=\"([^\"]+)\"", html)
    assert len(assets) == 4
    for url in assets:
        got = client.get(url)
        assert got.status_code == 200, url
        content = b"".join(got.streaming_content)
        assert len(content) > 100
    settings_json = json.loads(re.search(r'<script id="swagger-settings" type="application/json">(.*?)</script>',
                                         html, re.S).group(1))
    assert settings_json["url"] == "/api/openapi.json" and settings_json["validatorUrl"] is None
    assert client.get("/api/").json() == {"name": "unpooled API", "version": schema_version(client),
                                          "docs": "http://testserver/api/docs",
                                          "openapi": "http://testserver/api/openapi.json"}
    is_error(client.get("/api/docs/assets/../settings.py"), 404, "not_found")
    is_error(client.get("/api/docs/assets/nope.js"), 404, "not_found")


# ---------------------------------------------------------------------------- authentication

def test_a_token_dies_when_its_user_leaves_the_team_or_becomes_an_annotator(client, people):
    """Security review N8: a token acted for its team after its user was made an annotator or moved to another
    team (and then saw both teams' private runs)."""
    from unpooled.service.accounts.models import Profile

    assert client.get("/api/me", **auth(people["red"])).json()["team"]["name"] == "red"
    do_set_role(people["alice"], "annotator")
    is_error(client.get("/api/me", **auth(people["red"])), 401, "invalid_token")
    do_set_role(people["alice"], "submitter")  # back in her team's role: the token acts again
    assert client.get("/api/me", **auth(people["red"])).json()["team"]["name"] == "red"
    Profile.objects.filter(user=people["bob"]).update(team=Team.objects.get(name="red"))
    is_error(client.get("/api/me", **auth(people["blue"])), 401, "invalid_token")


def test_me_anonymous_token_session(client, people):
    assert client.get("/api/me").json() == {"authenticated": False, "via": "anonymous", "user": None, "role": None,
                                            "team": None, "quota": None, "token": None}
    me = client.get("/api/me", **auth(people["red"])).json()
    assert me["via"] == "token" and me["user"] == "alice" and me["role"] == "submitter"
    assert me["team"]["name"] == "red" and me["token"]["name"] == "ci"
    assert me["quota"] == {"per_day": 10, "total": None, "used_day": 0, "used_total": 0, "left_day": 10,
                           "left_total": None}
    s = Client()
    s.force_login(people["olga"])
    me = s.get("/api/me").json()
    assert me["via"] == "session" and me["role"] == "organiser" and me["team"] is None


def test_bad_credentials_are_401_not_anonymous(client, people):
    body = is_error(client.get("/api/me", **auth("upt_not-a-real-token")), 401, "invalid_token")
    assert "not valid" in body["message"]
    is_error(client.get("/api/corpora", **auth("nonsense")), 401, "invalid_token")
    resp = client.get("/api/me", HTTP_AUTHORIZATION="Basic YWxpY2U6cHc=")
    assert "Basic" in is_error(resp, 401, "invalid_authorization")["message"]
    resp = client.post("/api/submissions", {})
    is_error(resp, 401, "unauthenticated")
    assert resp["WWW-Authenticate"] == "Bearer"
    from unpooled.service.accounts.models import ApiToken

    do_revoke_token(people["alice"], ApiToken.objects.get(team__name="red").pk)
    is_error(client.get("/api/me", **auth(people["red"])), 401, "invalid_token")


def test_session_writes_need_csrf(corpus, people, subs):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(people["alice"])
    url = f"/api/submissions/{subs['red_pub'].pk}"
    is_error(browser.patch(url, {"visibility": "private"}, content_type="application/json"), 403, "csrf_failed")
    browser.get("/api/docs")  # sets the CSRF cookie, as the docs page does
    token = browser.cookies["csrftoken"].value
    resp = browser.patch(url, {"visibility": "private"}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert resp.status_code == 200 and resp.json()["visibility"] == "private"
    # a token needs no CSRF token
    tok = Client(enforce_csrf_checks=True)
    resp = tok.patch(url, {"visibility": "public"}, content_type="application/json", **auth(people["red"]))
    assert resp.status_code == 200 and resp.json()["visibility"] == "public"
    assert resp.json()["link"] == ""  # the paper/code link the team sets on the submission's page


# ---------------------------------------------------------------------------- errors in general

def test_error_shapes(client, corpus, monkeypatch):
    is_error(client.get("/api/no/such/thing"), 404, "not_found")
    resp = client.delete("/api/corpora")
    body = is_error(resp, 405, "method_not_allowed")
    assert "DELETE" in body["message"] and resp["Allow"] == "GET"
    body = is_error(client.get("/api/corpora?limit=0&offset=-1"), 400, "invalid_request")
    fields = {(d["path"], d["field"]): d for d in body["diagnostics"]}
    assert set(fields) == {("query", "limit"), ("query", "offset")}
    assert fields[("query", "limit")]["code"] == "greater_than_equal" and fields[("query", "limit")]["line"] == 0
    assert "query.limit" in body["message"]
    body = is_error(client.get("/api/corpora/fixture/leaderboard?level=document"), 400, "invalid_request")
    assert body["diagnostics"][0]["field"] == "level"
    body = is_error(client.get("/api/submissions/abc"), 404, "not_found")

    from unpooled.service.evaluations import status

    sub = do_ingest_submission(KB, "fixture", "t", None, "tac").submission

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(status, "progress", boom)
    body = is_error(client.get(f"/api/submissions/{sub.pk}/status"), 500, "internal")
    assert "RuntimeError" in body["message"] and "disk on fire" not in body["message"]


def test_invalid_json_body(client, people, subs):
    url = f"/api/submissions/{subs['red_pub'].pk}"
    body = is_error(client.patch(url, "{not json", content_type="application/json", **auth(people["red"])), 400,
                    "invalid_request")
    assert "parse" in body["message"]
    body = is_error(client.patch(url, {"visibility": "secret"}, content_type="application/json",
                                 **auth(people["red"])), 400, "invalid_request")
    assert body["diagnostics"][0]["path"] == "body" and body["diagnostics"][0]["field"] == "payload.visibility"


# ---------------------------------------------------------------------------- corpora and documents

def test_corpora_and_documents(client, corpus, subs, people):
    page = client.get("/api/corpora").json()
    assert page["count"] == 1 and page["next"] is None
    c = page["items"][0]
    assert c["name"] == "fixture" and c["schema_name"] == corpus.schema.name and c["n_documents"] == corpus.n_documents
    assert c["url"] == "http://testserver/api/corpora/fixture"
    d = client.get("/api/corpora/fixture").json()
    assert d["counts"]["documents"] == corpus.n_documents
    assert d["counts"]["submissions"] == 2 and d["counts"]["published"] == 0 and "labels" not in d["counts"]
    # the size of the label pool (private runs' labels in it) is for organisers (security review N14)
    org = Client()
    org.force_login(people["olga"])
    assert org.get("/api/corpora/fixture").json()["counts"]["labels"] == 0
    assert d["levels"] == ["instance", "relation", "entity"]
    body = is_error(client.get("/api/corpora/nope"), 404, "not_found")
    assert "unknown corpus 'nope'" in body["message"] and "fixture" in body["message"]

    docs = client.get("/api/corpora/fixture/documents?limit=1").json()
    assert docs["count"] == corpus.n_documents and len(docs["items"]) == 1 and "offset=1" in docs["next"]
    second = client.get(docs["next"]).json()
    assert second["previous"] and second["items"][0]["id"] != docs["items"][0]["id"]
    found = client.get("/api/corpora/fixture/documents?q=Thalians").json()
    assert [x["doc_id"] for x in found["items"]] == ["bolt-eng-DF-170-181103-15978"]
    one = client.get(found["items"][0]["url"]).json()
    assert "Thalians" in one["text"] and one["length"] == len(one["text"])
    assert one["source"].startswith("tac:") and "/" not in one["source"]  # no server directory
    assert all(0 <= s < e <= one["length"] for s, e in one["sentences"])
    is_error(client.get("/api/corpora/fixture/documents/NOPE"), 404, "not_found")


# ---------------------------------------------------------------------------- submissions and visibility

def ids(resp) -> set[int]:
    assert resp.status_code == 200, resp.content
    return {x["id"] for x in resp.json()["items"]}


def test_submission_visibility(client, people, subs):
    pub, priv, blue = subs["red_pub"].pk, subs["red_priv"].pk, subs["blue_pub"].pk
    assert ids(client.get("/api/submissions")) == {pub, blue}
    assert ids(client.get("/api/submissions", **auth(people["red"]))) == {pub, priv, blue}
    assert ids(client.get("/api/submissions", **auth(people["blue"]))) == {pub, blue}
    olga = Client()
    olga.force_login(people["olga"])
    assert ids(olga.get("/api/submissions")) == {pub, priv, blue}
    assert ids(client.get("/api/submissions?team=red", **auth(people["red"]))) == {pub, priv}
    assert ids(client.get("/api/submissions?visibility=private", **auth(people["red"]))) == {priv}
    assert ids(client.get("/api/submissions?status=published")) == set()
    body = is_error(client.get("/api/submissions?status=done"), 400, "invalid_request")
    assert body["diagnostics"][0]["field"] == "status"

    for c, kw in ((client, {}), (client, auth(people["blue"]))):
        for suffix in ("", "/status", "/scores", "/scores/history", "/labels"):
            is_error(c.get(f"/api/submissions/{priv}{suffix}", **kw), 404, "not_found")
    detail = client.get(f"/api/submissions/{priv}", **auth(people["red"])).json()
    assert detail["team"] == "red" and detail["run"] == "r-priv" and detail["visibility"] == "private"
    assert detail["status"] == "ingested" and detail["counts"]["instances"] == 9 and detail["warnings"] == []
    assert detail["status_url"].endswith(f"/api/submissions/{priv}/status")


def test_change_visibility(client, people, subs):
    pub, priv = subs["red_pub"].pk, subs["red_priv"].pk
    url = f"/api/submissions/{priv}"
    is_error(client.patch(url, {"visibility": "public"}, content_type="application/json"), 401, "unauthenticated")
    is_error(client.patch(url, {"visibility": "public"}, content_type="application/json", **auth(people["blue"])),
             404, "not_found")
    body = is_error(client.patch(f"/api/submissions/{pub}", {"visibility": "private"}, content_type="application/json",
                                 **auth(people["blue"])), 403, "forbidden")
    assert "'red'" in body["message"]
    resp = client.patch(url, {"visibility": "public", "description": " final run "}, content_type="application/json",
                        **auth(people["red"]))
    assert resp.status_code == 200
    assert resp.json()["visibility"] == "public" and resp.json()["description"] == "final run"
    assert Submission.objects.get(pk=priv).visibility == "public"
    assert priv in ids(client.get("/api/submissions"))
    olga = Client()
    olga.force_login(people["olga"])
    assert olga.patch(url, {"visibility": "private"}, content_type="application/json").json()["visibility"] == "private"
    is_error(client.patch("/api/submissions/9999", {}, content_type="application/json", **auth(people["red"])), 404,
             "not_found")


def test_change_link_checks_the_url_like_the_web_form(client, people, subs):
    pub = subs["red_pub"].pk
    url = f"/api/submissions/{pub}"
    before = Submission.objects.get(pk=pub).updated
    for bad, why in (("javascript:alert(1)", "link"), ("ftp://example.org/x", "link"),
                     ('https://example.org/"onmouseover="x', "link"), ("https://example.org/" + "a" * 490, "500")):
        body = is_error(client.patch(url, {"link": bad}, content_type="application/json", **auth(people["red"])),
                        400, "invalid_request")
        assert why in body["message"] + json.dumps(body.get("diagnostics", []))
    assert Submission.objects.get(pk=pub).link == "" and Submission.objects.get(pk=pub).updated == before
    is_error(client.patch(url, {"link": "https://example.org/paper"}, content_type="application/json",
                          **auth(people["blue"])), 403, "forbidden")
    resp = client.patch(url, {"link": "https://example.org/paper"}, content_type="application/json",
                        **auth(people["red"]))
    assert resp.status_code == 200 and resp.json()["link"] == "https://example.org/paper"
    assert Submission.objects.get(pk=pub).link == "https://example.org/paper"
    resp = client.patch(url, {"link": ""}, content_type="application/json", **auth(people["red"]))
    assert resp.status_code == 200 and resp.json()["link"] == ""


# ---------------------------------------------------------------------------- uploads

def post_kb(client, token, data: bytes | str, name="run.kb", query="", **fields):
    if isinstance(data, str):
        data = data.encode()
    form = {"corpus": "fixture", **fields, "file": SimpleUploadedFile(name, data)}
    return client.post(f"/api/submissions{query}", form, **(auth(token) if token else {}))


@override_settings(TASKS=IMMEDIATE)
def test_upload_accepted(client, corpus, people):
    resp = post_kb(client, people["red"], gzip.compress(kb_text("up-1").encode(), mtime=0), name="run.kb.gz",
                   visibility="private", description="first try")
    assert resp.status_code == 201, resp.content
    out = resp.json()
    assert out["state"] == "accepted" and out["done"] is True and out["duplicate"] is False
    assert out["team"] == "red" and out["corpus"] == "fixture" and out["file_name"] == "run.kb.gz"
    assert out["counts"]["instances"] == 9 and out["error"] is None
    sub = Submission.objects.get(pk=out["submission"])
    assert (sub.team.name, sub.run_id, sub.visibility, sub.description, sub.submitted_by) == (
        "red", "up-1", "private", "first try", people["alice"])
    assert out["submission_url"] == f"http://testserver/api/submissions/{sub.pk}"
    assert out["status_url"] == f"http://testserver/api/submissions/{sub.pk}/status"
    assert not list(settings.UPLOAD_DIR.glob("*.upload")), "the uploaded copy is removed"
    # the same file again: the earlier submission, nothing new
    again = post_kb(client, people["red"], gzip.compress(kb_text("up-1").encode(), mtime=0), name="run.kb.gz")
    assert again.status_code == 200 and again.json()["duplicate"] is True and again.json()["submission"] == sub.pk
    assert Submission.objects.count() == 1


@override_settings(TASKS=IMMEDIATE)
def test_upload_sent_again_under_its_run_name_answers_its_submission(client, corpus, people):
    """A retried upload (the same file, the same run name: a client that lost the first answer) answers 200 with the
    earlier submission, as the API overview and the submission formats say; it answered 409 ``duplicate_run``."""
    first = post_kb(client, people["red"], kb_text("x"), run="retried")
    assert first.status_code == 201, first.content
    again = post_kb(client, people["red"], kb_text("x"), run="retried")
    assert again.status_code == 200, again.content
    assert again.json()["duplicate"] is True and again.json()["submission"] == first.json()["submission"]
    # another file under the taken name is still refused at once
    is_error(post_kb(client, people["red"], kb_text("y"), run="retried"), 409, "duplicate_run")
    assert Submission.objects.count() == 1


@override_settings(TASKS=IMMEDIATE)
def test_upload_rejected_leaves_database_unchanged(client, corpus, people, subs):
    before = domain_counts()
    resp = post_kb(client, people["red"], bad_kb_text(), name="bad.kb", run="bad")
    body = is_error(resp, 422, "submission_rejected")
    n = len(body["diagnostics"])
    assert body["message"] == f"bad.kb: rejected with {n} error(s) and 0 warning(s); nothing was stored"
    line = bad_kb_text().splitlines().index(":Paul_Simon\ttype\tPERSON") + 1
    (d,) = [d for d in body["diagnostics"] if d["code"] == "UP217"]
    assert (d["path"], d["line"], d["severity"], d["field"]) == ("bad.kb", line, "error", "type")
    assert d["message"] and d["text"].startswith(":Paul_Simon") and d["col"] >= 1
    assert domain_counts() == before
    assert not list(settings.UPLOAD_DIR.glob("*.upload"))


@override_settings(TASKS=IMMEDIATE)
def test_upload_request_errors(client, corpus, people, subs):
    before = domain_counts()
    body = is_error(client.post("/api/submissions", {"corpus": "fixture"}, **auth(people["red"])), 400,
                    "invalid_request")
    assert {(d["path"], d["field"]) for d in body["diagnostics"]} == {("file", "file")}
    body = is_error(post_kb(client, people["red"], kb_text("x"), corpus="nope"), 404, "not_found")
    assert "unknown corpus 'nope'" in body["message"]
    body = is_error(post_kb(client, people["red"], kb_text("x"), format="xml"), 400, "invalid_request")
    assert body["diagnostics"][0]["field"] == "format"
    body = is_error(post_kb(client, people["red"], kb_text("x"), run="r-pub"), 409, "duplicate_run")
    assert "'r-pub'" in body["message"]
    # the run name read from the file (its first line) taken: found by the task, still 409
    body = is_error(post_kb(client, people["red"], kb_text("r-priv") + "\n"), 409, "duplicate_run")
    assert "already has a run named 'r-priv'" in body["message"]
    # a submitter submits for their own team only; an annotator has no team
    body = is_error(post_kb(client, people["red"], kb_text("x"), team="blue"), 403, "forbidden")
    anna = Client()
    anna.force_login(people["anna"])
    is_error(post_kb(anna, None, kb_text("x")), 403, "no_team")
    assert domain_counts() == before
    assert not list(settings.UPLOAD_DIR.glob("*.upload"))
    # an organiser names the team
    olga = Client()
    olga.force_login(people["olga"])
    resp = post_kb(olga, None, kb_text("org-run"), team="green")
    assert resp.status_code == 201 and Submission.objects.get(pk=resp.json()["submission"]).team.name == "green"


@override_settings(TASKS=IMMEDIATE)
def test_upload_too_large(client, corpus, people):
    with override_settings(LIMITS=Limits(max_bytes=100)):
        body = is_error(post_kb(client, people["red"], kb_text("big")), 413, "too_large")
        assert "100 bytes" in body["message"]
        # far beyond the limit: refused from Content-Length, before the body is read
        body = is_error(post_kb(client, people["red"], b"x" * (1 << 20) + b"y" * 200), 413, "too_large")
    assert Submission.objects.count() == 0 and not list(settings.UPLOAD_DIR.glob("*.upload"))


@override_settings(TASKS=IMMEDIATE)
def test_quota_429(client, corpus, people, subs):
    red = Team.objects.get(name="red")
    red.quota_per_day = 2  # red has two submissions already
    red.save()
    body = is_error(post_kb(client, people["red"], kb_text("q")), 429, "quota_day")
    assert "'red'" in body["message"] and "limit is 2" in body["message"]
    red.quota_per_day, red.quota_total = None, 2
    red.save()
    is_error(post_kb(client, people["red"], kb_text("q")), 429, "quota_total")
    assert Submission.objects.count() == 3 and not list(settings.UPLOAD_DIR.glob("*.upload"))
    me = client.get("/api/me", **auth(people["red"])).json()
    assert me["quota"]["left_total"] == 0
    # another team is not affected
    assert post_kb(client, people["blue"], kb_text("q")).status_code == 201


@pytest.mark.django_db(transaction=True)  # the real db worker commits and closes its connection
def test_upload_through_the_worker(client, corpus, people, tmp_path):
    resp = post_kb(client, people["red"], kb_text("w-1"), run="w-1")
    assert resp.status_code == 202, resp.content
    out = resp.json()
    assert out["state"] == "queued" and out["done"] is False and out["submission"] is None
    url = out["url"]
    assert url == f"http://testserver/api/uploads/{out['upload']}"
    assert client.get(url, **auth(people["red"])).json()["state"] == "queued"
    is_error(client.get(url, **auth(people["blue"])), 404, "not_found")  # another team's upload
    is_error(client.get(url), 401, "unauthenticated")
    is_error(client.get("/api/uploads/not-a-uuid", **auth(people["red"])), 404, "not_found")
    t0 = time.monotonic()
    bad = post_kb(client, people["red"], bad_kb_text(), name="bad.kb", run="w-2", query="?wait=1")
    assert bad.status_code == 202 and time.monotonic() - t0 >= 1  # waited, nobody validated it meanwhile
    bad = bad.json()

    call_command("db_worker", batch=True, startup_delay=False, interval=0)

    done = client.get(url, **auth(people["red"])).json()
    assert done["state"] == "accepted" and done["done"] is True
    sub = Submission.objects.get(pk=done["submission"])
    assert sub.run_id == "w-1" and sub.team.name == "red"
    olga = Client()
    olga.force_login(people["olga"])
    assert olga.get(url).json()["submission"] == sub.pk
    rejected = client.get(bad["url"] + "?wait=1", **auth(people["red"])).json()
    assert rejected["state"] == "rejected" and rejected["submission"] is None
    err = rejected["error"]
    assert err["code"] == "submission_rejected" and "UP217" in {d["code"] for d in err["diagnostics"]}
    assert {d["path"] for d in err["diagnostics"]} == {"bad.kb"}
    assert Submission.objects.count() == 1
    # the evaluation started: the submission moved past "ingested"
    prog = client.get(f"/api/submissions/{sub.pk}/status").json()
    assert prog["status"] != "ingested" and prog["steps"][0]["state"] == "done"


# ---------------------------------------------------------------------------- evaluation

def test_status_and_scores(client, people, subs):
    sub = subs["red_pub"]
    prog = client.get(f"/api/submissions/{sub.pk}/status").json()
    assert prog["submission"] == sub.pk and prog["status"] == "ingested" and prog["done"] is False
    assert [s["stage"] for s in prog["steps"]] == ["ingested", "sampling", "annotating", "scoring", "published"]
    assert prog["steps"][0]["state"] == "current" and prog["labels_needed"] == 0
    assert prog["scores_url"].endswith(f"/api/submissions/{sub.pk}/scores")

    assert client.get(f"/api/submissions/{sub.pk}/scores").json() == {"submission": sub.pk, "status": "ingested",
                                                                      "scores": {}}
    score(sub, f1=0.3)
    newest = score(sub, f1=0.5, details={"note": "x"})
    rel = score(sub, level="relation", f1=math.nan, lo=math.nan, hi=math.nan)
    got = client.get(f"/api/submissions/{sub.pk}/scores").json()["scores"]
    assert set(got) == {"instance", "relation"}
    assert got["instance"]["id"] == newest.pk and got["instance"]["f1"] == 0.5
    assert got["instance"]["details"] == {"note": "x"}
    assert got["relation"]["id"] == rel.pk and got["relation"]["f1"] is None  # no NaN in JSON
    hist = client.get(f"/api/submissions/{sub.pk}/scores/history?level=instance&limit=1").json()
    assert hist["count"] == 2 and hist["items"][0]["id"] == newest.pk and hist["next"]
    assert got["instance"]["breakdown"] is None and hist["items"][0]["breakdown"] is None  # none computed yet


def test_scores_carry_their_breakdown_without_the_error_analysis(client, people, subs):
    """A score's breakdown is read from its row (shared by the scores of the same inputs), its ``all`` row the
    score's own figures; the missed true instances (the team's error analysis) are not in it."""
    from django.utils import timezone

    from unpooled.service.evaluations.breakdown import VERSION
    from unpooled.service.evaluations.models import Breakdown, MissedInstances

    sub = subs["red_pub"]
    old, new = score(sub, f1=0.5), score(sub, f1=0.5, labels_new=3)
    missed = MissedInstances.objects.create(submission=sub, level="instance", digest="m", total=1, truth_total=2,
                                            entries=[[None, "d1", 0, 1]])
    bd = Breakdown.objects.create(submission=sub, level="instance", estimator="joint", inputs="d", version=VERSION,
                                  computed=timezone.now(), missed=missed, data={
                                      "relation": [{"group": "P17", "p": 0.25}],
                                      "all_counts": {"instances": 7, "n_draws": 5, "n_true": 2}})
    Score.objects.filter(pk__in=[old.pk, new.pk]).update(breakdown=bd)
    got = client.get(f"/api/submissions/{sub.pk}/scores").json()["scores"]["instance"]
    hist = client.get(f"/api/submissions/{sub.pk}/scores/history").json()["items"]
    assert [h["id"] for h in hist] == [new.pk, old.pk] and hist[0]["breakdown"] == got["breakdown"]
    for shown, s in ((got, new), (hist[1], old)):
        b = shown["breakdown"]
        assert b["relation"] == [{"group": "P17", "p": 0.25}] and "missed" not in b and "missed" not in shown["details"]
        assert (b["missed_total"], b["truth_total"]) == (1, 2)
        assert b["score"] == s.pk and (b["all"]["f1"], b["all"]["instances"], b["all"]["n_true"]) == (0.5, 7, 2)


def test_leaderboard_respects_visibility(client, people, subs):
    pub, priv, blue = subs["red_pub"], subs["red_priv"], subs["blue_pub"]
    score(pub, f1=0.9, lo=0.85, hi=0.95)
    score(priv, f1=0.8, lo=0.6, hi=0.86)
    score(blue, f1=0.5, lo=0.45, hi=0.55)
    url = "/api/corpora/fixture/leaderboard"
    assert client.get(url).json() == {"corpus": "fixture", "level": "instance", "period": None,  # none published
                                      "recall_protocol": "sentence", "rows": []}
    publish(pub, priv, blue)
    rows = client.get(url).json()["rows"]
    assert [(r["name"], r["rank"], r["tied"]) for r in rows] == [("red/r-pub", 1, False), ("blue/b-pub", 2, False)]
    assert rows[0]["score"]["f1"] == 0.9 and rows[0]["url"].endswith(f"/api/submissions/{pub.pk}")
    red_rows = client.get(url, **auth(people["red"])).json()["rows"]
    assert [(r["name"], r["rank"], r["tied"], r["visibility"]) for r in red_rows] == [
        ("red/r-pub", 1, True, "public"), ("red/r-priv", 1, True, "private"), ("blue/b-pub", 3, False, "public")]
    assert [r["name"] for r in client.get(url, **auth(people["blue"])).json()["rows"]] == ["red/r-pub", "blue/b-pub"]
    olga = Client()
    olga.force_login(people["olga"])
    assert len(olga.get(url).json()["rows"]) == 3
    assert client.get(url + "?level=relation").json()["rows"] == []
    is_error(client.get("/api/corpora/nope/leaderboard"), 404, "not_found")


def _paired(batch, var, cov):
    return {"batch": batch, "var": {k: var for k in ("p", "r", "f1")},
            "cov": {k: {str(s.pk): c for s, c in cov.items()} for k in ("p", "r", "f1")}}


def test_pairwise_table_uses_the_covariances_and_respects_visibility(client, people, subs):
    """Two runs 2 points apart whose intervals overlap, correlated 0.99 (one scoring): the paired table separates
    them; a run of another scoring is compared as independent; a private run never appears to others."""
    pub, priv, blue = subs["red_pub"], subs["red_priv"], subs["blue_pub"]
    score(pub, f1=0.52, lo=0.49, hi=0.55, paired=_paired("one", 4e-4, {priv: 0.99 * 4e-4, blue: 0.99 * 4e-4}))
    score(priv, f1=0.50, lo=0.47, hi=0.53, paired=_paired("one", 4e-4, {pub: 0.99 * 4e-4, blue: 0.99 * 4e-4}))
    score(blue, f1=0.51, lo=0.48, hi=0.54, paired=_paired("other", 4e-4, {pub: 0.99 * 4e-4, priv: 0.99 * 4e-4}))
    publish(pub, priv, blue)
    url = "/api/corpora/fixture/leaderboard/pairwise"
    red = client.get(url, **auth(people["red"])).json()
    assert red["metric"] == "f1" and red["confidence"] == 0.9 and red["method"] == "max-t"
    by = {frozenset((p["a"], p["b"])): p for p in red["pairs"]}
    assert len(by) == 3
    sep = by[frozenset((pub.pk, priv.pk))]
    assert sep["better"] == ("a" if sep["a"] == pub.pk else "b") and sep["se"] == pytest.approx((8e-6) ** 0.5)
    assert by[frozenset((pub.pk, blue.pk))]["better"] is None  # another scoring: independent, no decision
    assert by[frozenset((pub.pk, blue.pk))]["se"] == pytest.approx((8e-4) ** 0.5)
    rows = {r["name"]: r for r in client.get("/api/corpora/fixture/leaderboard", **auth(people["red"])).json()["rows"]}
    assert rows["red/r-pub"]["better_than"] == ["red/r-priv"] and rows["red/r-priv"]["rank_lo"] == 2
    assert (rows["red/r-pub"]["rank_lo"], rows["red/r-pub"]["rank_hi"]) == (1, 2)
    only = client.get(url + f"?submission={priv.pk}&metric=p", **auth(people["red"])).json()["pairs"]
    assert len(only) == 2 and all(priv.pk in (p["a"], p["b"]) for p in only)
    for who in (None, "blue"):  # the public and another team: the private run is in no pair, by id or by name
        got = client.get(url, **(auth(people[who]) if who else {}))
        assert got.status_code == 200
        pairs = got.json()["pairs"]
        assert [(p["a_name"], p["b_name"]) for p in pairs] in ([("red/r-pub", "blue/b-pub")],
                                                                [("blue/b-pub", "red/r-pub")])
        assert "r-priv" not in got.content.decode()
        board = client.get("/api/corpora/fixture/leaderboard", **(auth(people[who]) if who else {})).json()
        assert all(r["better_than"] == [] for r in board["rows"])
    # the stored covariances (they name other submissions) are not part of any score's output
    shown = client.get(f"/api/submissions/{pub.pk}/scores").json()["scores"]["instance"]
    assert "paired" not in shown and "paired" not in shown["details"]
    is_error(client.get(url + "?metric=x"), 400, "invalid_request")


# ---------------------------------------------------------------------------- labels

def _label(corpus, key, correct, **kw):
    from unpooled.core.kb.model import key_hash

    return Label.objects.create(corpus=corpus, key=key, key_hash=key_hash(key), probability=0.9 if correct else 0.1,
                                correct=correct, method=kw.pop("method", "dawid-skene"), n_answers=3,
                                guideline_version="1", **kw)


def test_label_pool_is_for_organisers(client, corpus, people, subs):
    insts = list(RelationInstance.objects.filter(submission=subs["red_pub"]).order_by("pk")[:3])
    _label(corpus, insts[0].key, True)
    newer = _label(corpus, insts[0].key, False)
    other = _label(corpus, insts[1].key, True, method="majority")
    url = "/api/corpora/fixture/labels"
    is_error(client.get(url), 401, "unauthenticated")
    body = is_error(client.get(url, **auth(people["red"])), 403, "forbidden")
    assert "/labels" in body["message"]
    olga = Client()
    olga.force_login(people["olga"])
    page = olga.get(url).json()
    assert page["count"] == 2 and [x["id"] for x in page["items"]] == [newer.pk, other.pk]
    assert page["items"][0] == {"id": newer.pk, "key": insts[0].key, "correct": False, "probability": 0.1,
                                "method": "dawid-skene", "n_answers": 3, "guideline_version": "1",
                                "created": page["items"][0]["created"]}
    assert olga.get(url + "?history=true").json()["count"] == 3
    assert [x["id"] for x in olga.get(url + "?method=majority").json()["items"]] == [other.pk]
    assert [x["id"] for x in olga.get(url + "?correct=false").json()["items"]] == [newer.pk]


def test_submission_labelled_sample(client, corpus, people, subs):
    sub = subs["red_pub"]
    insts = list(RelationInstance.objects.filter(submission=sub).order_by("line"))
    for seq, (inst, level) in enumerate([(insts[0], "instance"), (insts[0], "instance"), (insts[1], "instance"),
                                         (insts[2], "relation")]):
        Draw.objects.create(submission=sub, level=level, seq=seq, instance=inst, key=inst.key, key_hash=inst.key_hash)
    _label(corpus, insts[0].key, True)
    _label(corpus, insts[0].key, False)  # newest wins
    _label(corpus, insts[1].key, True)
    url = f"/api/submissions/{sub.pk}/labels"
    is_error(client.get(url), 401, "unauthenticated")
    is_error(client.get(url, **auth(people["blue"])), 403, "forbidden")
    page = client.get(url, **auth(people["red"])).json()
    assert page["submission"] == sub.pk and page["count"] == 3 and page["labelled"] == 2 and page["incorrect"] == 1
    first = page["items"][0]
    assert first["instance"] == insts[0].pk and first["draws"] == 2 and first["levels"] == ["instance"]
    assert first["label"]["correct"] is False and first["line"] == insts[0].line
    assert first["predicate"] == insts[0].predicate and first["subject"] and first["object"]
    assert page["items"][2]["label"] is None and page["items"][2]["levels"] == ["relation"]
    errs = client.get(url + "?errors_only=true", **auth(people["red"])).json()
    assert [x["instance"] for x in errs["items"]] == [insts[0].pk] and errs["count"] == 1
    assert client.get(url + "?level=relation", **auth(people["red"])).json()["count"] == 1
    olga = Client()
    olga.force_login(people["olga"])
    assert olga.get(url).json()["count"] == 3


# ---------------------------------------------------------------------------- property-based: the schema holds

def test_get_endpoints_conform_to_the_schema(corpus, people, subs):
    """schemathesis generates requests for every GET endpoint from the OpenAPI schema, anonymous and with a
    team's token; each answer must be a documented status with a JSON body matching its schema (errors
    included), and never a server error."""
    schemathesis = pytest.importorskip("schemathesis")
    from django.core.handlers.wsgi import WSGIHandler
    from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

    score(subs["red_pub"], f1=0.7, lo=0.6, hi=0.8)
    publish(subs["red_pub"])
    from django.core import signals
    from django.db import close_old_connections

    # as Django's test client does: a bare WSGIHandler would close the test's connection (and its transaction)
    # after each request, persistent connections being "obsolete" outside autocommit
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/openapi.json", WSGIHandler())
        ops = [r.ok() for r in schema.include(method="GET").get_all_operations()]
        assert len(ops) == 19  # 14 + the periods list and a period's release + the entity scores and their board + pairs
        for op in ops:
            @given(case=op.as_strategy(), token=st.sampled_from([None, people["red"]]))
            @hsettings(max_examples=8, deadline=None, database=None, derandomize=True,
                       suppress_health_check=list(HealthCheck))
            def check(case, token):
                case.call_and_validate(headers={"Authorization": f"Bearer {token}"} if token else None)

            check()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@override_settings(TASKS=IMMEDIATE)
def test_crashed_validation_is_a_500_upload_failed(corpus, people, tmp_path):
    """A validation task that crashes (here: the upload is a directory) reports ``upload_failed``, no traceback."""
    from django.test import RequestFactory

    from unpooled.service.api.routes import _upload_out
    from unpooled.service.submissions.tasks import ingest_upload

    (tmp_path / "d.upload").mkdir()
    result = ingest_upload.enqueue(str(tmp_path / "d.upload"), "fixture", "red", "", "", "x.kb")
    out, err = _upload_out(RequestFactory().get("/api/uploads/x"), result)
    assert out["state"] == "failed" and out["done"] is True and "submission" not in out
    assert err.status == 500 and err.code == "upload_failed" and out["error"] == err.body()
    assert err.message == "validating x.kb failed on the server: builtins.IsADirectoryError; nothing was stored"
    assert Submission.objects.count() == 0


def test_a_json_body_must_be_an_object(client, corpus, people, subs):
    """schemathesis found ``PATCH /api/submissions/{pk}`` with the body ``true`` answered 200 (read as no change):
    a body that is not a JSON object is a 400 that says what it got."""
    pk = subs["red_priv"].pk
    for body, got in (("true", "a boolean"), ("[]", "an array"), ("1", "a number"), ('"x"', "a string"),
                      ("null", "null")):
        r = client.patch(f"/api/submissions/{pk}", body, content_type="application/json", **auth(people["red"]))
        err = is_error(r, 400, "invalid_request")
        assert f"body: expected a JSON object, got {got}" in err["message"], (body, err)
    err = is_error(client.patch(f"/api/submissions/{pk}", "{nope", content_type="application/json",
                                **auth(people["red"])), 400, "invalid_request")
    assert "body: cannot parse it as JSON" in err["message"]
    # nested past the decoder's recursion, or an integer past Python's 4,300 digits: said so, not "Cannot parse
    # request body" (the RecursionError) nor Python's advice to call sys.set_int_max_str_digits()
    for body, says in (("[" * 50_000 + "]" * 50_000, "nested too deeply"),
                       ('{"description": ' + "1" * 5_000 + "}", "more than 4,300 digits")):
        err = is_error(client.patch(f"/api/submissions/{pk}", body, content_type="application/json",
                                    **auth(people["red"])), 400, "invalid_request")
        assert "body: cannot parse it as JSON" in err["message"] and says in err["message"], err
        assert "set_int_max_str_digits" not in err["message"]
    assert client.patch(f"/api/submissions/{pk}", "{}", content_type="application/json",
                        **auth(people["red"])).status_code == 200
