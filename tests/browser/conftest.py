"""Browser tests: Playwright driving Debian's Chromium (/usr/bin/chromium) against a live server."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = os.environ.get("UNPOOLED_CHROMIUM", "/usr/bin/chromium")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(f"Chromium not found at {CHROMIUM} (./dev test installs Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls of the test are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox"] if os.geteuid() == 0 else [])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    pg.set_default_timeout(15000)
    yield pg
    ctx.close()
