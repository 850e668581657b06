"""The documentation site in Chromium, served by the live service at ``/docs/``: the About page's method link
(UX review 2026-11-26, §3: it cited a ``docs/method.md`` that did not exist) and the nav's Docs link open built
pages; the formulas are MathML; the theme's scripts run under the Content-Security-Policy (search answers) with no
violation (the ``page`` fixture fails on any)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from ..docs.build import build_site

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_site(tmp_path_factory.mktemp("docs-site"))


@pytest.fixture
def served(built):
    with override_settings(DOCS_DIR=built):
        yield


def test_about_page_links_the_method_page(page, live_server, served):
    page.goto(f"{live_server.url}/about/numbers/")
    with page.expect_navigation():
        page.click("#method-link")
    assert page.url == f"{live_server.url}/docs/method/"
    assert page.inner_text("h1").startswith("The method")
    assert page.locator("math").count() > 10
    # MathML is laid out by the browser itself: a fraction is taller than a line of text
    assert page.locator("div.math math").first.bounding_box()["height"] > 30


def test_nav_docs_link_search_and_screenshot(page, live_server, served):
    page.goto(f"{live_server.url}/")
    with page.expect_navigation():
        page.click("#nav-docs")
    assert page.url == f"{live_server.url}/docs/"
    shot = page.locator("img[src$='leaderboard.png']")
    assert shot.evaluate("img => img.complete && img.naturalWidth") > 1000
    page.keyboard.press("/")  # the theme's search, a script and a web worker under the page's policy
    page.keyboard.type("jackknife")
    page.wait_for_selector(".md-search-result__item", timeout=15000)
    assert "Document sampling" in page.inner_text(".md-search-result")
