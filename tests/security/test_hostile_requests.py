"""Hostile requests of the 2026-11-30 sweep (every URL pattern tried anonymously, as another team's submitter,
as an annotator and as an organiser): what a malformed request made the server answer 500 or in the wrong
format.  Real pages and API through Django's client, real database."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from unpooled.service.accounts.actions import do_set_role
from unpooled.service.accounts.models import Role
from unpooled.service.annotation.models import Answer, Assignment

from .test_crowd_integrity import _private_submission_with_links

pytestmark = pytest.mark.django_db

HOLDS = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}


def _annotator_client() -> Client:
    ann = User.objects.create_user("hostile-ann", password="pw-hostile-1")
    do_set_role(ann, Role.ANNOTATOR)
    c = Client(raise_request_exception=False)
    c.force_login(ann)
    return c


def test_a_deeply_nested_answer_is_refused_with_400_and_stores_nothing(shared_data, tmp_path):
    """``[[[[...]]]]`` (200 KB, under the answer's size limit) made the JSON decoder recurse past Python's limit:
    a RecursionError and a 500.  Nesting deeper than any task format needs is refused like any malformed answer,
    the lease stays open, and a good answer is still taken."""
    _private_submission_with_links(shared_data, tmp_path, "hostile", "simulated")
    c = _annotator_client()
    url = c.get(reverse("annotation:next", args=["verify"]))["Location"]
    token = url.rstrip("/").split("/")[-1]
    for raw in ("[" * 100_000 + "]" * 100_000, '{"a":' * 5_000 + "1" + "}" * 5_000, "[" * 17 + "]" * 17):
        r = c.post(url, {"answer": raw})
        assert r.status_code == 400, (raw[:20], r.status_code)
        assert "not JSON" in r.content.decode() and "Traceback" not in r.content.decode(), raw[:20]
    assert not Answer.objects.filter(assignment__token=token).exists()
    assert Assignment.objects.get(token=token).status == Assignment.Status.LEASED
    assert c.post(url, {"answer": json.dumps(HOLDS)}).status_code == 302
    assert Answer.objects.filter(assignment__token=token).count() == 1


@pytest.mark.parametrize("pk", ["9223372036854775808", "99999999999999999999999"])
def test_a_submission_id_past_64_bits_is_a_404_for_everyone(pk):
    """The submission page of an anonymous reader looks the id up by a plain query, which SQLite cannot bind past
    64 bits (OverflowError: a 500); every submission URL answers 404 for such an id, signed in or not."""
    user = User.objects.create_user("hostile-sub", password="pw-hostile-2")
    signed_in = Client(raise_request_exception=False)
    signed_in.force_login(user)
    for c in (Client(raise_request_exception=False), signed_in):
        for path in (f"/submissions/{pk}/", f"/submissions/{pk}/status/", f"/submissions/{pk}/status.json",
                     f"/submissions/{pk}/export.jsonl", f"/submissions/{pk}/scores.json", f"/api/submissions/{pk}"):
            assert c.get(path).status_code == 404, path


def test_too_many_query_parameters_are_a_json_error_under_the_api():
    """More query parameters than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` were refused with Django's HTML 400 page under
    ``/api/``, whose every error is JSON ``{code, message, diagnostics}``; pages keep Django's 400."""
    from django.conf import settings

    many = "&".join(f"corpus={i}" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    c = Client(raise_request_exception=False)
    r = c.get("/api/submissions?" + many)
    assert r.status_code == 400 and r["Content-Type"].startswith("application/json")
    assert r.json()["code"] == "invalid_request" and "parameters" in r.json()["message"]
    assert c.get("/api/submissions?corpus=x").status_code == 200
    r = c.get("/submissions/?" + many)
    assert r.status_code == 400 and b"Traceback" not in r.content


def test_an_annotator_with_a_team_acts_for_it_nowhere(shared_data, tmp_path):
    """A member made an annotator (or ``unpooled user add --role annotator --team``) keeps the team on the profile,
    as the team they never label.  Their API token already died (N8), but their browser session still uploaded for
    the team, read its private runs and labelled samples and changed their visibility: an annotator does none of
    that, whatever the profile names."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from unpooled.service.submissions.models import Submission

    corpus, _, sec = _private_submission_with_links(shared_data, tmp_path, "hostile", "simulated")
    dave = User.objects.create_user("dave", password="pw-dave-1234")
    do_set_role(dave, Role.SUBMITTER, team=sec.team)
    do_set_role(dave, Role.ANNOTATOR)
    c = Client(raise_request_exception=False)
    c.force_login(dave)
    assert c.get("/api/me").json()["team"] is None
    for path in (f"/api/submissions/{sec.pk}", f"/api/submissions/{sec.pk}/labels", f"/submissions/{sec.pk}/",
                 f"/submissions/{sec.pk}/sample.jsonl", f"/submissions/{sec.pk}/export.jsonl"):
        assert c.get(path).status_code == 404, path
    assert not any(s["id"] == sec.pk for s in c.get("/api/submissions?visibility=private").json()["items"])
    data = (tmp_path / "hostile.jsonl").read_bytes()
    before = Submission.objects.count()
    assert c.get("/submissions/new/").status_code == 403
    assert c.post("/submissions/new/", {"corpus": corpus.pk, "run": "r1", "format": "jsonl", "visibility": "public",
                                        "file": SimpleUploadedFile("a.jsonl", data)}).status_code == 403
    r = c.post("/api/submissions", {"corpus": corpus.name, "run": "r2", "file": SimpleUploadedFile("b.jsonl", data)})
    assert r.status_code == 403, r.content
    assert c.post(f"/submissions/{sec.pk}/settings/", {"visibility": "public", "description": "", "link": ""}
                  ).status_code == 404
    assert c.post("/accounts/tokens/", {"name": "t"}).status_code in (302, 403)
    from unpooled.service.accounts.models import ApiToken

    assert not ApiToken.objects.filter(user=dave).exists()
    sec.refresh_from_db()
    assert sec.visibility == "private" and Submission.objects.count() == before
    assert c.get("/annotate/").status_code == 200  # still an annotator, who never labels the team (leasing)


def test_a_large_body_is_refused_unread_on_every_address_but_the_uploads():
    """Django writes a form's attached files to disk while it receives them (the CSRF check reads the form first),
    so an anonymous client sent gigabytes to the upload folder through the sign-in page.  A body above
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is now refused before it is read (413; 411 for one sent in chunks, whose length
    is unknown) everywhere but the two submission uploads, which keep their own limit."""
    from django.conf import settings
    from django.core.files.uploadedfile import SimpleUploadedFile

    big = SimpleUploadedFile("big.bin", b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1))
    c = Client(raise_request_exception=False)
    r = c.post("/accounts/login/", {"username": "a", "file": big})
    assert r.status_code == 413 and r["Content-Type"].startswith("text/plain") and b"larger than" in r.content
    big.seek(0)
    r = c.post("/api/corpora/x/periods", {"file": big})
    assert r.status_code == 413 and r.json()["code"] == "too_large"
    r = c.post("/accounts/login/", {"username": "a"}, HTTP_TRANSFER_ENCODING="chunked")
    assert r.status_code == 411
    for path, anonymous in (("/submissions/new/", 302), ("/api/submissions", 401)):  # through to the view
        big.seek(0)
        assert c.post(path, {"file": big}).status_code == anonymous, path
    assert c.post("/accounts/login/", {"username": "a", "password": "b"}).status_code == 200  # small: as before
