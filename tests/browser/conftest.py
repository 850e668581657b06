"""Browser tests: Playwright's sync API driving Debian's Chromium (/usr/bin/chromium) against pytest-django's
live server.  ``./dev test`` installs the Debian package ``chromium`` when it is missing (as root, with apt-get);
without it these tests skip, naming the missing executable.  Playwright's own browsers are never downloaded.
They are ``engine_neutral`` (SQLite only): what they check is the page in Chromium; the service paths behind it are
the service tests', which run on PostgreSQL too."""

from __future__ import annotations

import os

import pytest

CHROMIUM = os.environ.get("UNPOOLED_CHROMIUM", "/usr/bin/chromium")

TEAM, RUN = "zz-hidden-team", "zz-hidden-run"   # the submitting system: no annotation page may name it
USER, PASSWORD = "ann", "pw-ann-123"


@pytest.fixture(scope="package")
def browser():
    """One Chromium for the browser tests, stopped when they are done.

    Package scope, not session: while Playwright's sync API is alive, an asyncio loop counts as running in
    this thread, and Django refuses ORM calls there unless DJANGO_ALLOW_ASYNC_UNSAFE is set.  The loop and
    the variable both end with this package, so the rest of the suite keeps Django's async-safety check.
    """
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium; "
                    f"./dev test does it when run as root) or set UNPOOLED_CHROMIUM")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                                                 "(pip install -e '.[test]')")
    old = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_api.sync_playwright() as p:
            try:
                b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=["--no-sandbox"] if os.geteuid() == 0 else [])
            except sync_api.Error as exc:  # installed but unable to start: fail with the reason, not a skip
                pytest.fail(f"{CHROMIUM} did not start under Playwright: {exc}", pytrace=False)
            yield b
            b.close()
    finally:
        if old is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = old


# every page reports a Content-Security-Policy violation to the console, where watch_csp collects it
_CSP_LISTENER = """document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " on " + e.documentURI);
});"""


def watch_csp(ctx) -> list[str]:
    """Collect the Content-Security-Policy violations of every page of browser context ``ctx`` (the listener
    script is Playwright's, outside the pages' policy; Chromium's own "Refused to …" console errors too)."""
    seen: list[str] = []
    ctx.add_init_script(_CSP_LISTENER)

    def on_console(msg) -> None:
        text = msg.text
        if "CSP violation" in text or "Content Security Policy" in text:
            seen.append(text)

    ctx.on("console", on_console)
    return seen


@pytest.fixture
def page(browser):
    """A fresh browser context (own cookies: not logged in) per test; no page it visits may report a
    Content-Security-Policy violation."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    violations = watch_csp(ctx)
    pg = ctx.new_page()
    pg.set_default_timeout(15000)
    yield pg
    ctx.close()
    assert not violations, f"Content-Security-Policy violations: {violations}"


@pytest.fixture
def world(shared_data, tmp_path):
    """The first 3 Re-DocRED dev documents as a corpus with the DocRED labels ingested as a submission of
    team TEAM, run RUN; verification tasks for 6 of its instances (one answer each) and an in-house user.
    Same set-up as tests/service/test_annotation_pages.py."""
    from django.contrib.auth.models import User

    from unpooled.service.annotation import actions
    from unpooled.service.submissions.models import RelationInstance

    from ..conftest import load_redocred_subset

    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 3, "browser", team=TEAM, run=RUN)
    st = actions.settings_for(corpus)
    st.answers_per_item = 1
    st.save()
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:6]
    res = actions.request_verification(sub, ids)
    assert res.created >= 3, res.to_dict()
    User.objects.create_user(USER, password=PASSWORD)
    return corpus
