"""The REST API's write paths as a hostile client uses them: every write (``POST /api/submissions``, ``PATCH
/api/submissions/{pk}``, opening and closing an evaluation period) tried by every caller who may not make it, and
with bodies no client should send.  A refused write answers a JSON error naming what is wrong and changes nothing in
the database (every table compared before and after).  Real database, through Django's client."""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from unpooled.service.accounts.actions import do_issue_token, do_revoke_token
from unpooled.service.corpora.models import Period
from unpooled.service.evaluations import periods
from unpooled.service.submissions.models import Submission

from ..service.test_api import auth, corpus, is_error, kb_text, people, subs  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

#: columns a read or a refused request may touch: a token's last use, a session's sign-in
TOUCHED = {"last_used", "last_login", "session_data", "expire_date"}
JSON = "application/json"


def database() -> dict:
    """Every row of every table (but :data:`TOUCHED`), for comparing before and after a refused write."""
    out = {}
    for model in apps.get_models():
        fields = [f.attname for f in model._meta.concrete_fields if f.attname not in TOUCHED]
        out[model._meta.db_table] = list(model.objects.order_by("pk").values_list(*fields))
    return out


def browser(user) -> tuple[Client, dict]:
    """A signed-in browser that sends Django's CSRF token (as the docs page does), and that header."""
    c = Client(enforce_csrf_checks=True, raise_request_exception=False)
    c.force_login(user)
    c.get("/api/docs")
    return c, {"HTTP_X_CSRFTOKEN": c.cookies["csrftoken"].value}


def upload_form(run: str) -> dict:
    return {"corpus": "fixture", "run": run, "file": SimpleUploadedFile(f"{run}.kb", kb_text(run).encode())}


def test_every_write_by_a_caller_who_may_not_make_it_is_refused_and_changes_nothing(corpus, people, subs):
    """Anonymous, an annotator's session, another team's token, a revoked token, and a signed-in browser (even an
    organiser's) without the CSRF token: each write answers 401, 403 or 404 as JSON, and no table changes."""
    olga_period = periods.do_open_period(people["olga"], corpus, title="first")
    revoked = do_issue_token(people["alice"], "old")
    do_revoke_token(people["alice"], revoked[0].pk)
    anon = Client(raise_request_exception=False)
    anna, anna_csrf = browser(people["anna"])
    alice_no_csrf = Client(enforce_csrf_checks=True, raise_request_exception=False)
    alice_no_csrf.force_login(people["alice"])
    olga_no_csrf = Client(enforce_csrf_checks=True, raise_request_exception=False)
    olga_no_csrf.force_login(people["olga"])
    pub, priv = subs["red_pub"].pk, subs["red_priv"].pk
    patch = json.dumps({"visibility": "private", "description": "taken over"})
    callers = {  # name: (client, headers, the statuses it may get)
        "anonymous": (anon, {}, {401}),
        "annotator": (anna, anna_csrf, {403, 404}),
        "another team": (anon, auth(people["blue"]), {403, 404}),
        "revoked token": (anon, auth(revoked[1]), {401}),
        "team without CSRF": (alice_no_csrf, {}, {403}),
        "organiser without CSRF": (olga_no_csrf, {}, {403}),
    }
    writes = {
        "patch public": lambda c, h: c.patch(f"/api/submissions/{pub}", patch, content_type=JSON, **h),
        "patch private": lambda c, h: c.patch(f"/api/submissions/{priv}", patch, content_type=JSON, **h),
        "upload for red": lambda c, h: c.post("/api/submissions", {**upload_form("hostile"), "team": "red"}, **h),
        "open period": lambda c, h: c.post("/api/corpora/fixture/periods", json.dumps({"title": "x"}),
                                           content_type=JSON, **h),
        "close period": lambda c, h: c.post(f"/api/corpora/fixture/periods/{olga_period.number}/close", **h),
    }
    before = database()
    for who, (client, headers, statuses) in callers.items():
        for what, write in writes.items():
            resp = write(client, headers)
            assert resp.status_code in statuses, (who, what, resp.status_code, resp.content[:300])
            body = resp.json()
            assert set(body) == {"code", "message", "diagnostics"} and body["message"], (who, what, body)
            assert database() == before, (who, what)
    assert Submission.objects.get(pk=priv).visibility == "private" and Period.objects.get().is_open


def _patch(client, pk, body: str, token):
    return client.patch(f"/api/submissions/{pk}", body, content_type=JSON, **auth(token))


def test_a_key_sent_twice_in_a_json_body_is_refused_naming_it(corpus, people, subs):
    """``{"visibility": "private", "visibility": "public"}`` was taken as its last value (200): a proxy or a log that
    reads the first saw another request than the one the service acted on.  Refused, naming the key."""
    organiser, csrf = browser(people["olga"])
    client = Client(raise_request_exception=False)
    before = database()
    body = is_error(_patch(client, subs["red_pub"].pk, '{"visibility": "private", "visibility": "public"}',
                           people["red"]), 400, "invalid_request")
    assert "'visibility'" in body["message"] and "twice" in body["message"]
    body = is_error(organiser.post("/api/corpora/fixture/periods", '{"title": "a", "title": "b"}', content_type=JSON,
                                   **csrf), 400, "invalid_request")
    assert "'title'" in body["message"] and "twice" in body["message"]
    assert database() == before


def test_a_field_the_endpoint_does_not_take_is_refused_naming_it(corpus, people, subs):
    """``{"status": "published"}`` or a misspelt ``{"visibilty": "private"}`` answered 200 and changed nothing: the
    client believed it had made the change.  Refused with 400 naming the field."""
    organiser, csrf = browser(people["olga"])
    client = Client(raise_request_exception=False)
    before = database()
    for sent in ({"visibilty": "private"}, {"status": "published", "team": "blue"}):
        body = is_error(_patch(client, subs["red_priv"].pk, json.dumps(sent), people["red"]), 400, "invalid_request")
        assert {d["field"] for d in body["diagnostics"]} == {f"payload.{k}" for k in sent}, body
        assert all(k in body["message"] for k in sent)
    body = is_error(organiser.post("/api/corpora/fixture/periods", json.dumps({"titel": "second"}), content_type=JSON,
                                   **csrf), 400, "invalid_request")
    assert "titel" in body["message"]
    assert database() == before
    schema = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert schema["SubmissionPatch"]["additionalProperties"] is False
    assert schema["PeriodIn"]["additionalProperties"] is False


def test_a_body_that_is_not_utf8_is_refused_as_such(corpus, people, subs):
    """Bytes that are not UTF-8 were reported as "a number with more than 4,300 digits" (json_text took every
    ValueError for that one)."""
    client = Client(raise_request_exception=False)
    body = is_error(client.patch(f"/api/submissions/{subs['red_pub'].pk}", b'{"description": "caf\xe9"}',
                                 content_type=JSON, **auth(people["red"])), 400, "invalid_request")
    assert "UTF-8" in body["message"] and "byte 20" in body["message"] and "digits" not in body["message"]


def test_a_period_title_with_hidden_characters_is_refused(corpus, people):
    """An evaluation period's title (shown on the leaderboard, the console and in releases) took control and
    direction-changing characters; a description or a run name refuses them."""
    organiser, csrf = browser(people["olga"])
    for title, what in (("round\u202e2", "U+202E"), ("round\x072", "U+0007")):
        body = is_error(organiser.post("/api/corpora/fixture/periods", json.dumps({"title": title}), content_type=JSON,
                                       **csrf), 400, "invalid_request")
        assert "title" in body["message"] and what in body["message"], body
    assert not Period.objects.exists()
    resp = organiser.post("/api/corpora/fixture/periods", json.dumps({"title": "round 2\tfinal"}), content_type=JSON,
                          **csrf)
    assert resp.status_code == 400 and "U+0009" in resp.json()["message"]
    resp = organiser.post("/api/corpora/fixture/periods", json.dumps({"title": "round 2"}), content_type=JSON, **csrf)
    assert resp.status_code == 201 and resp.json()["title"] == "round 2"


def test_the_schema_says_a_followed_period_takes_both_its_corpus_and_its_number(corpus, people):
    """The schema let ``follows_corpus`` come alone or empty, which the service refuses (schemathesis, an organiser's
    token: ``{"follows_corpus": "", "follows_number": 200000}`` answered 400 to a request the schema allows)."""
    period_in = Client().get("/api/openapi.json").json()["components"]["schemas"]["PeriodIn"]
    assert period_in["dependentRequired"] == {"follows_corpus": ["follows_number"],
                                              "follows_number": ["follows_corpus"]}
    assert period_in["properties"]["follows_corpus"]["minLength"] == 1
    organiser, csrf = browser(people["olga"])
    sent = json.dumps({"follows_corpus": "", "follows_number": 1})
    body = is_error(organiser.post("/api/corpora/fixture/periods", sent, content_type=JSON, **csrf), 400,
                    "invalid_request")
    assert body["diagnostics"][0]["field"] == "payload.follows_corpus"
    assert not Period.objects.exists()


def test_a_body_with_more_fields_than_a_request_may_have_is_refused_in_one_line(corpus, people, subs):
    """A 10 MB body of 700,000 made-up fields was answered with one diagnostic per field: 128 MB of JSON after 19 s
    of work.  A JSON body has at most ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` fields, as a form has (Django's limit), and
    an error lists at most :data:`~unpooled.service.api.errors.MAX_DIAGNOSTICS` request diagnostics."""
    from django.conf import settings

    from unpooled.service.api.errors import MAX_DIAGNOSTICS

    client = Client(raise_request_exception=False)
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    resp = _patch(client, subs["red_pub"].pk, json.dumps({f"k{i}": 0 for i in range(limit + 1)}), people["red"])
    body = is_error(resp, 400, "invalid_request")
    assert f"{limit + 1:,} fields" in body["message"] and len(resp.content) < 1000
    resp = _patch(client, subs["red_pub"].pk, json.dumps({f"k{i}": 0 for i in range(limit)}), people["red"])
    body = is_error(resp, 400, "invalid_request")
    assert len(body["diagnostics"]) == MAX_DIAGNOSTICS and f"and {limit - 5} more" in body["message"]
    assert body["diagnostics"][0]["field"] == "payload.k0"


def test_an_upload_with_a_form_field_it_does_not_take_or_one_sent_twice_is_refused(corpus, people, subs):
    """``visibilty=private`` (misspelt) was ignored and the run stored public; ``corpus`` sent twice was taken as its
    last value.  Both are refused (400 naming the field) before anything is stored or queued."""
    client = Client(raise_request_exception=False)
    before = database()
    body = is_error(client.post("/api/submissions", {**upload_form("typo"), "visibilty": "private"},
                                **auth(people["red"])), 400, "invalid_request")
    assert "visibilty" in body["message"] and body["diagnostics"][0]["field"] == "visibilty"
    body = is_error(client.post("/api/submissions", {**upload_form("twice"), "corpus": ["fixture", "other"]},
                                **auth(people["red"])), 400, "invalid_request")
    assert "corpus" in body["message"] and "twice" in body["message"]
    form = upload_form("two-files")
    body = is_error(client.post("/api/submissions", {**form, "file": [form["file"], SimpleUploadedFile("b.kb", b"x")]},
                                **auth(people["red"])), 400, "invalid_request")
    assert "file" in body["message"] and "twice" in body["message"]
    assert database() == before
    form_schema = client.get("/api/openapi.json").json()["paths"]["/api/submissions"]["post"]["requestBody"]
    assert form_schema["content"]["multipart/form-data"]["schema"]["additionalProperties"] is False


def test_a_closed_periods_run_keeps_its_visibility_with_a_documented_409(corpus, people, subs):
    """Once its period closed, a team's change of its run's visibility answers 409 ``conflict`` (security review N11),
    a status the schema did not list for ``PATCH /api/submissions/{pk}`` (only 400, 401, 403, 404)."""
    p = periods.do_open_period(people["olga"], corpus)
    Submission.objects.filter(pk=subs["red_priv"].pk).update(period=p)
    periods.do_close_period(people["olga"], p)
    client = Client(raise_request_exception=False)
    before = database()
    body = is_error(_patch(client, subs["red_priv"].pk, json.dumps({"visibility": "public"}), people["red"]), 409,
                    "conflict")
    assert "period 1" in body["message"]
    assert database() == before
    op = client.get("/api/openapi.json").json()["paths"]["/api/submissions/{pk}"]["patch"]
    assert "409" in op["responses"]


def test_a_json_body_over_the_limit_is_a_documented_413(corpus, people, subs, settings):
    """A JSON write's body above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is refused unread with 413 ``too_large``, a status the
    schema listed only for the upload."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = Client(raise_request_exception=False)
    big = json.dumps({"description": "x" * 1000})
    is_error(_patch(client, subs["red_pub"].pk, big, people["red"]), 413, "too_large")
    organiser, csrf = browser(people["olga"])
    is_error(organiser.post("/api/corpora/fixture/periods", json.dumps({"title": "x" * 1000}), content_type=JSON,
                            **csrf), 413, "too_large")
    paths = client.get("/api/openapi.json").json()["paths"]
    assert "413" in paths["/api/submissions/{pk}"]["patch"]["responses"]
    assert "413" in paths["/api/corpora/{name}/periods"]["post"]["responses"]


def test_an_upload_with_a_form_field_sent_in_the_query_is_refused(corpus, people, subs):
    """``POST /api/submissions?visibility=private`` (the field in the query, not the form) was ignored like any
    unknown query parameter, and the run stored public.  The upload takes ``wait`` alone in its query."""
    client = Client(raise_request_exception=False)
    before = database()
    body = is_error(client.post("/api/submissions?visibility=private", upload_form("query"), **auth(people["red"])),
                    400, "invalid_request")
    assert "visibility" in body["message"] and "query" in body["message"]
    assert body["diagnostics"][0]["path"] == "query" and body["diagnostics"][0]["field"] == "visibility"
    assert database() == before
