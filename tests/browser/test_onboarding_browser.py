"""Onboarding in Chromium: the home page, a corpus's Participate and schema pages, sign-in with its sign-up link,
the upload form reached from the Participate page (its corpus chosen) and a rejection that names the corpus, and the
styled 404 and 403 pages (the live server runs with DEBUG off).  Every page is checked at 1280 and 390 px for
sideways overflow, with screenshots (tests/browser/layout.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from unpooled.service.accounts.actions import do_sign_up

from .layout import check_layout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


def sign_in(page, base: str, user: str, password: str, next_url: str) -> None:
    page.goto(f"{base}/accounts/login/?next={next_url}")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.keyboard.press("Enter")


def test_home_participate_schema_and_sample(page, live_server, world):
    base = live_server.url
    page.goto(base + "/")
    assert "Evaluate relation extraction without pooling bias" in page.inner_text("h1")
    assert page.title() == "Relation extraction evaluation without pooling bias · unpooled"
    assert page.is_visible("#start-look") and page.is_visible("#start-submit") and page.is_visible("#start-annotate")
    check_layout(page, "home")
    with page.expect_navigation():
        page.click("#start-submit a:text('How to take part')")
    assert page.url == f"{base}/corpora/browser/participate/"
    assert page.inner_text("h1") == "Take part: browser"
    assert '"doc":' in page.inner_text("#example-line")
    assert "-F corpus=browser" in page.inner_text("#curl-example")
    # UX review #11: the recipe waits as long as the server does, and says to poll the upload's url until done
    from django.conf import settings
    wait = int(settings.UPLOAD_WAIT_SECONDS)
    assert page.inner_text("#curl-example").rstrip().endswith(f'/api/submissions?wait={wait}"')
    answers = page.inner_text("#curl-answers")
    assert f"at most {wait} seconds" in answers and "url" in answers and "until done is true" in answers
    assert "unpooled submit browser-sample.jsonl --corpus browser" in page.inner_text("#cli-example")
    check_layout(page, "participate")
    with page.expect_download() as dl:
        page.click("#sample-link")
    body = open(dl.value.path()).read()
    assert body.count("\n") >= 3 and '"predicate": "P' in body
    with page.expect_navigation():
        page.click("#schema-link")
    rows = page.locator("#schema-table tr[data-search]")
    total = rows.count()
    assert total == 96
    check_layout(page, "schema")
    page.fill("#schema-filter", "birth")
    visible = page.eval_on_selector_all("#schema-table tr[data-search]:not([hidden]) code.rel-name",
                                        "els => els.map(e => e.textContent)")
    assert "P19" in visible and "P569" in visible and len(visible) < 10
    assert page.inner_text("#schema-count") == f"{len(visible)} of {total} relations"


def test_sign_in_sign_up_submit_from_participate_and_rejection(page, live_server, world, tmp_path):
    base = live_server.url
    from unpooled.service.corpora.actions import do_load_corpus

    from ..conftest import FIXTURES

    do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "aaa-first", schema="tac-kbp")  # alphabetically first
    do_sign_up("sub-b", "a-long-password", team="team-b")
    page.goto(f"{base}/submissions/new/")              # signed out: to the sign-in page, which says why
    assert page.inner_text("#login-reason") == "Sign in to submit a run for your team."
    assert page.is_visible("#signup-link")
    check_layout(page, "sign-in")
    with page.expect_navigation():
        page.click("#signup-link")
    assert page.url.endswith("/accounts/signup/")
    sign_in(page, base, "sub-b", "a-long-password", "/corpora/browser/participate/")
    with page.expect_navigation():
        page.click("#submit-web")
    assert page.input_value("#id_corpus") == "browser"     # not the alphabetically first corpus
    assert page.get_attribute("#participate-link", "href") == "/corpora/browser/participate/"
    check_layout(page, "upload-form")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc": "Not_A_Document", "subject": {"start": 0, "end": 3, "entity": "a"}, "predicate": "P17", '
                   '"object": {"start": 4, "end": 8, "entity": "b"}}\n')
    page.set_input_files("#id_file", str(bad))
    with page.expect_navigation(url=lambda u: "/submissions/uploads/" in u):
        page.click("#upload-submit")
    from django.core.management import call_command

    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    page.wait_for_selector("#checked-against", timeout=20000)   # the page refreshes itself until validated
    assert "Checked against corpus browser" in page.inner_text("#checked-against")
    assert "not in the corpus 'browser'" in page.inner_text("pre.diag")
    check_layout(page, "upload-rejected")
    page.goto(f"{base}/submissions/new/")                     # the form remembers the corpus of the last upload
    assert page.input_value("#id_corpus") == "browser"


def test_styled_error_pages(page, live_server, world):
    base = live_server.url
    resp = page.goto(f"{base}/no/such/page/")
    assert resp.status == 404 and page.inner_text("h1") == "Page not found"
    assert page.is_visible("header nav") and page.is_visible(".error-next a[href='/']")
    check_layout(page, "error-404")
    User.objects.create_user("plain-sub", password="a-long-password")
    do_sign_up("sub-c", "a-long-password", team="team-c")
    sign_in(page, base, "sub-c", "a-long-password", "/")
    resp = page.goto(f"{base}/organiser/")
    assert resp.status == 403 and page.inner_text("h1") == "Not allowed"
    reason = page.inner_text("#error-reason")
    assert "The organiser console is for organisers only." in reason and "sub-c" in reason
    check_layout(page, "error-403")
    with page.expect_navigation():
        page.click(".error-next a[href='/']")
    assert page.is_visible("#start-submitter")
    check_layout(page, "home-submitter")
