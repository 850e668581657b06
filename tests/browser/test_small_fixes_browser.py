"""Issue 25, below the top 15 (UX review 2026-11-26 §3), in Chromium: a new API token has a Copy button that puts
it on the clipboard; home's recent submissions show each one's published F1 and link the run to its page; the
console's settings form speaks in words, not Django's field names.  Screenshots at 1280 and 390 px."""

from __future__ import annotations

import pytest

from unpooled.service.evaluations.models import Score

from .layout import check_layout
from .test_board_pages import board, sign_in  # noqa: F401 - the fixture: two scored submissions, alice and org

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


def test_a_new_token_is_copied_by_its_button(page, live_server, board):  # noqa: F811
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    sign_in(page, live_server.url, "alice", "pw-alice-1234")
    page.goto(f"{live_server.url}/accounts/")
    page.fill("#id_name", "laptop")
    with page.expect_navigation():
        page.click("#make-token")
    token = page.inner_text("#new-token").strip()
    assert token.startswith("upt_")
    page.click("#copy-token")
    page.wait_for_function("() => document.getElementById('new-token-copied').textContent !== ''")
    assert page.inner_text("#new-token-copied") == "Copied."
    assert page.evaluate("() => navigator.clipboard.readText()") == token
    check_layout(page, "account-new-token")


def test_without_the_clipboard_the_token_is_selected(page, live_server, board):  # noqa: F811
    """Where the page may not write the clipboard, the button selects the token for Ctrl+C and says so."""
    sign_in(page, live_server.url, "alice", "pw-alice-1234")
    page.goto(f"{live_server.url}/accounts/")
    with page.expect_navigation():
        page.click("#make-token")
    page.evaluate("() => { Object.defineProperty(navigator, 'clipboard', {value: undefined}); }")
    page.click("#copy-token")
    assert "press Ctrl+C" in page.inner_text("#new-token-copied")
    assert page.evaluate("() => window.getSelection().toString()") == page.inner_text("#new-token").strip()


def test_home_lists_each_submission_with_its_score_and_a_link(page, live_server, board):  # noqa: F811
    corpus, a, b = board
    page.goto(f"{live_server.url}/")
    for sub in (a, b):
        s = Score.objects.filter(submission=sub, level="instance").latest("id")
        row = page.locator("tr", has=page.locator(f"a[href='/submissions/{sub.pk}/'].run"))
        assert row.count() == 1
        cell = row.locator("td.score")
        assert cell.locator("a").inner_text() == f"{s.f1:.3f}"
        assert f"{s.f1_lo:.3f}–{s.f1_hi:.3f}" in cell.inner_text() and "instance" in cell.inner_text()
    check_layout(page, "home-recent-scores")
    with page.expect_navigation():
        page.locator(f"a[href='/submissions/{a.pk}/'].run").click()
    assert page.url.endswith(f"/submissions/{a.pk}/")


def test_settings_labels_are_words(page, live_server, board):  # noqa: F811
    from django.forms.utils import pretty_name

    from unpooled.service.organiser.console import SETTINGS_FIELDS
    from unpooled.service.organiser.forms import SettingsForm

    corpus, _, _ = board
    sign_in(page, live_server.url, "org", "pw-org-1234")
    page.goto(f"{live_server.url}/organiser/settings/?corpus={corpus.name}")
    labels = {f: page.inner_text(f"#field-{f} label").rstrip(":") for f in SETTINGS_FIELDS}
    assert labels == SettingsForm.Meta.labels  # every field is labelled on purpose
    for field, label in labels.items():
        if any(w in field for w in ("cents", "halfwidth", "seconds", "backend", "share", "public", "signup")):
            assert label != pretty_name(field), (field, label)  # Django's default: "Reward verify cents"
    assert labels["reward_verify_cents"] == "Pay per verification answer (cents)"
    check_layout(page, "console-settings-labels")
