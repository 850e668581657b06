"""Issue 25 #10 in Chromium: the organiser's console has a Mechanical Turk page (sandbox or production, credentials
found or not, never a secret; the HITs and answers; the balance asked of Amazon, here botocore's Stubber), and the
organiser makes an API token of their own on the account page and copies it."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from unpooled.service.crowd.mturk import SANDBOX_ENDPOINT, MTurkBackend, MTurkConfig
from unpooled.service.organiser import mturk_page

from .layout import check_layout
from .test_board_pages import board, sign_in  # noqa: F401 - the fixture: two scored submissions, alice and org

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

SECRET = "sekrit-never-on-a-page-0123456789"


def test_the_mturk_page_and_the_balance(page, live_server, board, monkeypatch, tmp_path):  # noqa: F811
    corpus, _, _ = board
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNPOOLEDBROWSER1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=SANDBOX_ENDPOINT)
    with Stubber(client) as stub:
        monkeypatch.setattr(mturk_page, "make_backend", lambda: MTurkBackend(client, MTurkConfig()))
        stub.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
        sign_in(page, live_server.url, "org", "pw-org-1234")
        page.goto(f"{live_server.url}/organiser/?corpus={corpus.name}")
        with page.expect_navigation():
            page.click("#mturk-link")
        assert "sandbox" in page.inner_text("#mturk-mode")
        assert page.inner_text("#mturk-credentials").startswith("found, in environment variables")
        assert SECRET not in page.content() and "AKIAUNPOOLEDBROWSER1" not in page.content()
        assert page.inner_text("#hits-published").startswith("0")
        check_layout(page, "console-mturk")
        with page.expect_navigation():
            page.click("#ask-balance")
        assert "Balance: $10000.00" in page.inner_text("#mturk-asked")
        check_layout(page, "console-mturk-balance")
        stub.assert_no_pending_responses()


def test_an_organiser_makes_and_copies_a_token(page, live_server, board):  # noqa: F811
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    sign_in(page, live_server.url, "org", "pw-org-1234")
    page.goto(f"{live_server.url}/accounts/")
    assert "act as you, an organiser" in page.inner_text("main")
    page.fill("#id_name", "scripts")
    with page.expect_navigation():
        page.click("#make-token")
    token = page.inner_text("#new-token").strip()
    page.click("#copy-token")
    page.wait_for_function("() => document.getElementById('new-token-copied').textContent !== ''")
    assert page.evaluate("() => navigator.clipboard.readText()") == token
    from django.test import Client

    got = Client().get(f"/api/corpora/{board[0].name}/labels", HTTP_AUTHORIZATION=f"Bearer {token}")  # no session
    assert got.status_code == 200                                    # the label pool: organisers only
    check_layout(page, "account-organiser-token")
