"""Web pages and the upload flow (the ingest task runs in-process in tests)."""

from __future__ import annotations

import gzip
import html as html_lib
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.submissions.models import Submission

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db

KB = FIXTURES / "kb" / "coldstart.kb"


@pytest.fixture
def corpus():
    return do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")


@pytest.fixture
def client(client):
    """Signed in as a submitter of team web-team."""
    from unpooled.service.accounts.actions import do_sign_up

    client.force_login(do_sign_up("sub1", "a-long-password", team="web-team"))
    return client


def upload(client, data: bytes, name="run.kb", **fields):
    """Upload through the form, then let the real django-tasks-db worker run what was queued."""
    form = {"corpus": "fixture", "run": "", "format": "", "visibility": "public", **fields,
            "file": SimpleUploadedFile(name, data)}
    resp = client.post(reverse("web:upload"), form)
    if resp.status_code == 302:
        pending = client.get(resp.url)
        assert pending.status_code == 200 and "Validating" in pending.content.decode()
        call_command("db_worker", batch=True, startup_delay=False, interval=0)
    return resp


@pytest.mark.django_db(transaction=True)
def test_a_queued_upload_says_it_is_queued(client, corpus):
    """The page of an upload no worker has taken yet printed the task's raw status: "The file is being checked
    (ready)", which reads as done; it says the file waits for a worker, as the API's "queued" does."""
    resp = client.post(reverse("web:upload"), {"corpus": "fixture", "run": "", "format": "", "visibility": "public",
                                               "file": SimpleUploadedFile("run.kb", KB.read_bytes())})
    assert resp.status_code == 302
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", client.get(resp.url).content.decode()))
    assert "(ready)" not in text and "being checked" not in text
    assert "queued" in text
    call_command("db_worker", batch=True, startup_delay=False, interval=0)


@pytest.mark.django_db(transaction=True)  # the real worker commits and closes its connection
def test_upload_accepted_redirects_to_submission(client, corpus):
    resp = upload(client, gzip.compress(KB.read_bytes()), name="run.kb.gz")
    assert resp.status_code == 302
    status = client.get(resp.url)
    assert status.status_code == 302, status.content[:500]
    sub = Submission.objects.get()
    assert status.url == reverse("web:status", args=[sub.pk])
    assert sub.submitted_by.username == "sub1" and sub.visibility == "public"
    page = client.get(reverse("web:submission", args=[sub.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<bdi>web-team</bdi> / <bdi>fixture_run_1</bdi>" in html and "per:spouse" in html and "Carrie Fisher" in html
    st = client.get(status.url)
    assert st.status_code == 200 and "labels received / needed" in st.content.decode()


@pytest.mark.django_db(transaction=True)
def test_upload_rejected_shows_located_errors(client, corpus, tmp_path):
    from django.conf import settings

    before = set(settings.UPLOAD_DIR.glob("*.upload")) if settings.UPLOAD_DIR.exists() else set()
    bad = KB.read_text().replace(":Paul_Simon\ttype\tPER", ":Paul_Simon\ttype\tPERSON")
    resp = upload(client, bad.encode())
    page = client.get(resp.url)
    html = page.content.decode()
    assert page.status_code == 200
    assert "Submission rejected" in html and "UP217" in html and "run.kb:" in html
    assert Submission.objects.count() == 0
    assert set(settings.UPLOAD_DIR.glob("*.upload")) <= before, "the uploaded copy is removed"
    # a column where the reader has one (invalid JSON), as the API's diagnostics give it
    html = client.get(upload(client, b'{"doc": "x", oops}\n', name="run.jsonl", run="r2").url).content.decode()
    assert re.search(r"run\.jsonl:1:\d+: UP", html), html[html.find("diag"):][:300]


def test_pages_render(client, corpus):
    from unpooled.service.submissions.actions import do_ingest_submission

    sub = do_ingest_submission(KB, "fixture", "t", None, "tac").submission
    for url in [reverse("web:home"), reverse("web:corpus", args=["fixture"]),
                reverse("web:corpus", args=["fixture"]) + "?q=Fisher", reverse("web:submissions"),
                reverse("web:upload"), reverse("web:submission", args=[sub.pk])]:
        assert client.get(url).status_code == 200, url
    doc = corpus.documents.first()
    assert client.get(reverse("web:document", args=["fixture", doc.pk])).status_code == 200
    tac = client.get(reverse("web:export", args=[sub.pk, "tac"]))
    assert tac.status_code == 200 and b"".join(tac.streaming_content).decode().startswith("fixture_run_1\n")
    assert client.get(reverse("web:export", args=[sub.pk, "xml"])).status_code == 404
    assert client.get(reverse("web:submission", args=[9999])).status_code == 404


def test_search_finds_text(client, corpus):
    html = client.get(reverse("web:corpus", args=["fixture"]) + "?q=Thalians").content.decode()
    assert "bolt-eng-DF-170-181103-15978" in html and "NYT_ENG_20130914.0094" not in html
    # a count, and the text around the match with the match marked (any case)
    assert "1 document matches “Thalians”" in html
    html = client.get(reverse("web:corpus", args=["fixture"]) + "?q=thalians").content.decode()
    m = re.search(r'<small class="snippet">(…?)([^<]*)<mark>([^<]*)</mark>([^<]*?)(…?)</small>', html)
    before, after = html_lib.unescape(m.group(2)), html_lib.unescape(m.group(4))
    assert m.group(3) == "Thalians" and len(before) == 70 and 0 < len(after) <= 70 and m.group(1) == "…"


def test_upload_needs_a_team(corpus):
    from django.test import Client

    from unpooled.service.accounts.actions import do_sign_up

    anon = Client()
    assert anon.get(reverse("web:upload")).status_code == 302  # to the sign-in page
    anon.force_login(do_sign_up("ann", "a-long-password", role="annotator", ties="none"))
    page = anon.get(reverse("web:upload"))
    assert page.status_code == 403 and "Only members of a team can submit" in page.content.decode()


def test_upload_form_errors(client, corpus):
    resp = client.post(reverse("web:upload"), {"corpus": "fixture"})
    assert resp.status_code == 200
    assert "This field is required" in resp.content.decode()


def test_corpus_page_names_the_file_not_the_server_path(client, corpus):
    """Review: the corpus page showed the directory the corpus was loaded from, and its name twice."""
    html = client.get(reverse("web:corpus", args=["fixture"])).content.decode()
    assert "loaded from <code>sources.xml</code>" in html and str(FIXTURES) not in html
    corpus.title = "fixture"
    corpus.save(update_fields=["title"])
    html = client.get(reverse("web:corpus", args=["fixture"])).content.decode()
    assert "<h1>fixture</h1>" in html


def test_favicon_ico_is_the_site_icon(client):
    """Review: every page's /favicon.ico request was a 404."""
    resp = client.get("/favicon.ico")
    assert resp.status_code == 302 and resp.url.endswith("favicon.svg")


@pytest.mark.parametrize("fmt", ["jsonl", "tac"])
def test_an_export_is_streamed_never_the_whole_kb_in_memory(client, corpus, monkeypatch, fmt):
    """A public submission's export is anyone's to ask for: it loaded the whole KB and held its text twice (a
    StringIO and the response).  It is written from database iterators to a temporary file and sent in blocks;
    the bytes are those the export always wrote."""
    import io

    from unpooled.service.submissions import actions
    from unpooled.service.submissions.actions import do_ingest_submission, export_submission

    sub = do_ingest_submission(KB, "fixture", "t", None, "tac").submission
    want = io.StringIO()
    export_submission(sub, fmt, want)

    def whole_kb(*a, **kw):
        raise AssertionError("the export loaded the whole KB")

    monkeypatch.setattr(actions, "load_kb", whole_kb)
    r = client.get(reverse("web:export", args=[sub.pk, fmt]))
    assert r.status_code == 200 and r.streaming
    assert r["Content-Disposition"] == f'attachment; filename="submission-{sub.pk}.{"kb" if fmt == "tac" else fmt}"'
    assert b"".join(r.streaming_content).decode() == want.getvalue()
