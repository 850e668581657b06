"""Onboarding pages: the home page per role, a corpus's Participate and schema pages, the sample file (which
``unpooled validate`` accepts), the sign-in page's sign-up link, the upload form's corpus, and the styled
403/404/500 pages with DEBUG off."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.urls import reverse

from unpooled.service.accounts.actions import do_sign_up
from unpooled.service.web import participate

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(shared_data, tmp_path):
    corpus, _, path = load_redocred_subset(shared_data, tmp_path, 4, "onb", team="t-onb", run="r-onb")
    corpus.source_path = path
    return corpus


def test_home_says_what_this_is_and_where_to_start_per_role(client, corpus):
    html = client.get("/").content.decode()
    assert "Evaluate relation extraction without pooling bias" in html
    assert 'id="start-look"' in html and 'id="start-submit"' in html and 'id="start-annotate"' in html
    assert reverse("web:participate", args=["onb"]) in html and reverse("web:leaderboard", args=["onb"]) in html
    assert "<title>Relation extraction evaluation without pooling bias · unpooled</title>" in html
    assert "unpooled corpus load" not in html  # the CLI hint is for organisers

    client.force_login(do_sign_up("sub-onb", "a-long-password", team="onb-team"))
    html = client.get("/").content.decode()
    assert 'id="start-submitter"' in html and "team onb-team" in html and 'id="start-look"' not in html

    client.force_login(do_sign_up("ann-onb", "a-long-password", role="annotator", ties="none"))
    html = client.get("/").content.decode()
    assert 'id="start-annotator"' in html and reverse("annotation:queue") in html

    client.force_login(User.objects.create_superuser("org-onb", password="a-long-password"))
    html = client.get("/").content.decode()
    assert 'id="start-organiser"' in html and reverse("organiser:home") in html


def test_participate_page_has_format_schema_sample_and_three_ways(client, corpus):
    html = client.get(reverse("web:participate", args=["onb"])).content.decode()
    assert reverse("web:schema", args=["onb"]) in html
    assert reverse("web:sample", args=["onb"]) in html
    assert f'{reverse("web:upload")}?corpus=onb' in html
    assert 'curl -H "Authorization: Bearer $UNPOOLED_TOKEN"' in html and "-F corpus=onb" in html
    # the recipe matches the API (UX review #11): the wait the server allows, the field to poll
    assert "/api/submissions?wait=5" in html and "the server waits at most 5 seconds" in html
    assert "poll the upload's\n<code>url</code>" in html and "until <code>done</code> is true" in html
    assert "unpooled submit onb-sample.jsonl --corpus onb" in html
    # the example line is a line of the sample file
    first = participate.sample_jsonl(corpus, 1).strip()
    assert json.loads(first)["doc"] in html


def test_participate_pages_tac_example_is_valid_for_the_corpus(client, corpus, tmp_path, capsys):
    """The TAC example is the JSONL example line as a TAC KB, which the corpus's validation accepts (it was a fixed
    text naming an undefined entity :e2, a document DOC1 and a TAC slot, rejected by every corpus)."""
    import html as html_lib
    import re

    from unpooled.cli.main import main

    page = client.get(reverse("web:participate", args=["onb"])).content.decode()
    tac = html_lib.unescape(re.search(r'<pre class="example" id="example-tac">(.*?)</pre>', page, re.S).group(1))
    line = json.loads(participate.sample_jsonl(corpus, 1))
    assert f'"{line["subject"]["text"]}"\t{line["doc"]}:{line["subject"]["start"]}-{line["subject"]["end"] - 1}' in tac
    path = tmp_path / "example.kb"
    path.write_text(tac + "\n", encoding="utf-8")
    code = main(["validate", str(path), "--corpus", "onb", "--format", "tac", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["n_errors"] == 0 and out["n_warnings"] == 0 and out["counts"]["instances"] == 1, out


def test_schema_page_lists_relations_with_names_types_and_gold_examples(client, corpus):
    resp = client.get(reverse("web:schema", args=["onb"]))
    html = resp.content.decode()
    assert resp.status_code == 200
    schema = corpus.schema.schema()
    assert html.count("<tr id=\"rel-") == len(schema.relations)
    assert "place of birth" in html and "<code class=\"rel-name\">P19</code>" in html
    rows = {r.name: r for r in participate.schema_rows(corpus)}
    with_example = [r for r in rows.values() if r.example]
    assert with_example, "the first Re-DocRED documents have gold relations"
    assert all(r.gold > 0 for r in with_example)
    r = with_example[0]
    assert r.example["subject"] in html and r.example["document"]["doc_id"] in html
    assert 'src="/static/web/schema.js"' in html


def test_sample_file_is_valid_for_the_corpus(client, corpus, tmp_path, capsys):
    """The downloaded sample passes ``unpooled validate`` against the corpus (offline, from its file) and the
    service's own validation."""
    resp = client.get(reverse("web:sample", args=["onb"]))
    assert resp.status_code == 200 and resp["Content-Disposition"] == 'attachment; filename="onb-sample.jsonl"'
    body = resp.content.decode()
    lines = [json.loads(x) for x in body.splitlines()]
    assert 3 <= len(lines) <= participate.SAMPLE_LINES
    assert len({x["predicate"] for x in lines}) == len(lines)
    path = tmp_path / "onb-sample.jsonl"
    path.write_text(body)

    from unpooled.cli.main import main

    code = main(["validate", str(path), "--corpus", str(corpus.source_path), "--corpus-format", "docred",
                 "--schema", "docred", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["n_errors"] == 0 and out["n_warnings"] == 0, out
    # and against the stored corpus (the CLI's --corpus NAME)
    code = main(["validate", str(path), "--corpus", "onb", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["n_errors"] == 0, out


def test_sample_of_a_corpus_without_gold_is_empty_and_the_page_shows_the_format(client, tmp_path):
    from unpooled.service.corpora.actions import do_load_corpus

    from ..conftest import FIXTURES

    do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "nogold", schema="tac-kbp")
    assert client.get(reverse("web:sample", args=["nogold"])).content == b""
    html = client.get(reverse("web:participate", args=["nogold"])).content.decode()
    assert '"predicate": "RELATION"' in html
    html = client.get(reverse("web:schema", args=["nogold"])).content.decode()
    assert "per:spouse" in html and "no gold example in this corpus" in html and "inverse of" in html


def test_sign_in_page_links_to_sign_up_and_gives_the_reason(client):
    html = client.get(reverse("login") + "?next=/submissions/new/").content.decode()
    assert "Sign in to submit a run for your team." in html
    assert f'href="{reverse("accounts:signup")}" id="signup-link"' in html
    assert "Annotator accounts need an organiser's invite code." in html
    html = client.get(reverse("login") + "?next=/annotate/").content.decode()
    assert "Sign in to annotate." in html


def test_sign_in_page_says_annotators_may_sign_up_when_a_corpus_is_open(client, corpus):
    from unpooled.service.annotation import actions

    st = actions.settings_for(corpus)
    st.open_signup = True
    st.save()
    html = client.get(reverse("login")).content.decode()
    assert "Annotators may sign up too." in html


def test_upload_form_preselects_the_corpus_in_context(client, corpus):
    from unpooled.service.corpora.actions import do_load_corpus

    from ..conftest import FIXTURES

    do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "aaa-first", schema="tac-kbp")  # alphabetically first
    client.force_login(do_sign_up("sub-up", "a-long-password", team="up-team"))

    def selected(url):
        html = client.get(url).content.decode()
        return [n for n in ("aaa-first", "onb") if f'<option value="{n}" selected>' in html]

    assert selected(reverse("web:upload") + "?corpus=onb") == ["onb"]
    assert selected(reverse("web:upload") + "?corpus=aaa-first") == ["aaa-first"]
    assert selected(reverse("web:upload") + "?corpus=nope") == []  # unknown: the form's default
    session = client.session
    session["unpooled.last-corpus"] = "onb"
    session.save()
    assert selected(reverse("web:upload")) == ["onb"]


@pytest.mark.django_db(transaction=True)
def test_a_rejection_names_the_corpus_it_was_checked_against(client, corpus):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command

    client.force_login(do_sign_up("sub-rej", "a-long-password", team="rej-team"))
    line = json.dumps({"doc": "Not_A_Document", "subject": {"start": 0, "end": 3, "entity": "a"}, "predicate": "P17",
                       "object": {"start": 4, "end": 8, "entity": "b"}})
    resp = client.post(reverse("web:upload"), {"corpus": "onb", "run": "", "format": "jsonl", "visibility": "public",
                                               "file": SimpleUploadedFile("bad.jsonl", line.encode() + b"\n")})
    assert resp.status_code == 302
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    html = client.get(resp.url).content.decode()
    assert "Submission rejected" in html
    assert "Checked against corpus <strong>onb</strong>" in html
    assert "UP201 unknown document &#x27;Not_A_Document&#x27;: not in the corpus &#x27;onb&#x27;" in html
    assert reverse("web:schema", args=["onb"]) in html
    assert client.session["unpooled.last-corpus"] == "onb"


@override_settings(DEBUG=False)
def test_error_pages_are_styled_with_navigation(client):
    resp = client.get("/no/such/page/")
    html = resp.content.decode()
    assert resp.status_code == 404 and 'id="error-page"' in html and "Page not found" in html
    assert '<nav>' in html and 'href="/"' in html and "/static/web/site.css" in html

    client.force_login(do_sign_up("sub-403", "a-long-password", team="t403"))
    resp = client.get(reverse("organiser:home"))
    html = resp.content.decode()
    assert resp.status_code == 403 and 'id="error-page"' in html
    assert "the organiser console is for organisers only" in html.lower() and "sub-403" in html
    assert "who is not an organiser" in html


def test_500_page_is_styled_and_needs_no_database(rf):
    from unpooled.service.web.views.errors import server_error

    resp = server_error(rf.get("/boom/"))
    html = resp.content.decode()
    assert resp.status_code == 500 and 'id="error-page"' in html and "/boom/" in html and "<nav>" in html


@override_settings(DEBUG=False)
def test_a_crashing_view_gets_the_styled_500(client, monkeypatch):
    from unpooled.service.web.views import explore

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(explore, "visible_submissions", boom)
    client.raise_request_exception = False
    resp = client.get("/")
    assert resp.status_code == 500 and 'id="error-page"' in resp.content.decode()
