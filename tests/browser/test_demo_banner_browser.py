"""The "loading the demo" banner of ``./dev up`` in Chromium: shown on every page while the demo loads, kept up to
date by its script (``web/demo.js`` polling ``/demo/status.json``, no inline script), and gone once loaded.
Screenshots at 1280 and 390 px go to the test's temporary folder."""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


def progress(data_dir, **fields) -> None:
    from unpooled.service.web.demo_progress import write_progress

    base = {"state": "loading", "step": 1, "steps": 6, "message": "loading the corpus", "started": time.time() - 5,
            "levels": {}}
    write_progress(dict(base, **fields), data_dir)


def wait_for_text(page, selector: str, text: str, timeout: float = 20.0) -> str:
    """Poll the element's text from Python (the pages' CSP forbids the eval behind wait_for_function)."""
    end = time.monotonic() + timeout
    while True:
        got = page.inner_text(selector)
        if text in got or time.monotonic() > end:
            assert text in got, got
            return got
        page.wait_for_timeout(250)


def test_banner_follows_the_loader(page, live_server, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    base = live_server.url
    page.goto(f"{base}/")
    assert page.locator("#demo-banner").count() == 0  # no demo loading: no banner
    progress(tmp_path)
    for path in ("/", "/submissions/"):
        page.goto(f"{base}{path}")
        banner = page.locator("#demo-banner")
        assert banner.is_visible()
        assert "Loading the demo" in banner.inner_text() and "Step 1 of 6: loading the corpus" in banner.inner_text()
        assert not page.locator("#demo-board").is_visible()  # no corpus yet: no leaderboard to watch
    # the loader moves on: the page follows without a reload
    progress(tmp_path, state="evaluating", step=5, message="evaluating the relation level",
             levels={"instance": 68, "relation": None, "entity": None}, answers=1834, corpus="redocred-dev")
    text = wait_for_text(page, "#demo-banner", "Step 5 of 6")
    assert "instance ready at 1 min 08 s, relation being evaluated" in text and "1,834" in text
    assert page.locator("#demo-board").get_attribute("href") == "/corpora/redocred-dev/leaderboard/"
    assert page.locator("#demo-bar").evaluate("bar => bar.value") == 5
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 800})
        box = page.locator("#demo-banner").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (width, box)  # the banner wraps, never overflows
        page.screenshot(path=str(tmp_path / f"demo_banner_{width}.png"))
    # loaded: the banner says so, and a new page has none
    progress(tmp_path, state="ready", step=6, message="done", levels={"instance": 68, "relation": 102, "entity": 138})
    wait_for_text(page, "#demo-banner", "The demo is loaded")
    assert "ready" in page.locator("#demo-banner").get_attribute("class")
    page.goto(f"{base}/")
    assert page.locator("#demo-banner").count() == 0


def test_a_failed_load_says_why(page, live_server, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    progress(tmp_path, state="failed", error="the evaluation of redocred-dev failed: OperationalError: disk full")
    page.goto(f"{live_server.url}/")
    text = page.inner_text("#demo-banner")
    assert "Demo not loaded" in text and "disk full" in text
