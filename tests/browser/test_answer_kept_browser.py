"""An answer that did not reach the server is not lost: the page kept its draft in this browser until the server
had the answer, so coming back to the task after the network failed mid-submit, or after the server answered
5xx, restores it; once the server has the answer the next page drops the draft."""

from __future__ import annotations

import pytest

from unpooled.service.annotation.models import Answer

from .test_annotation_browser import login, mark_mess_of_blues, token_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

DRAFTS = "() => Object.keys(localStorage).filter(k => k.startsWith('unpooled-draft:')).length"


def _posts_fail(page, how):
    """Every POST of a task page fails: ``abort`` (the network) or a 500 from the server."""
    def handle(route):
        if route.request.method != "POST":
            route.continue_()
        elif how == "abort":
            route.abort()
        else:
            route.fulfill(status=500, content_type="text/html", body="<h1>Server Error (500)</h1>")
    page.route("**/annotate/task/**", handle)


def test_a_verification_answer_survives_the_network_failing_mid_submit(page, live_server, world):
    login(page, live_server.url)
    page.keyboard.press("1")
    page.wait_for_selector("#task[data-kind=verify]")
    page.wait_for_load_state("load")
    url = page.url
    page.keyboard.press("3")
    page.keyboard.press("o")
    _posts_fail(page, "abort")
    with page.expect_event("requestfailed"):
        page.keyboard.press("Enter")
    page.unroute("**/annotate/task/**")
    page.goto(url)
    page.wait_for_selector("#task[data-kind=verify]")
    assert page.is_checked("input[name=relation][value=none]")       # the draft, as it was sent
    assert not page.is_checked("#object_ok") and page.is_checked("#subject_ok")
    assert "Restored the answer you chose here" in page.inner_text("#verify-status")   # and the page says so
    assert not Answer.objects.filter(assignment__token=token_of(url)).exists()
    with page.expect_navigation(url=lambda u: u != url):
        page.keyboard.press("Enter")
    assert Answer.objects.get(assignment__token=token_of(url)).value["relation"] == "none"
    assert page.evaluate(DRAFTS) == 0     # the server has it: the next page dropped the draft


def test_entity_marks_survive_a_server_error_on_submit(page, live_server, world):
    task, url = mark_mess_of_blues(page, live_server, world)
    _posts_fail(page, "500")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "Server Error" in page.inner_text("body")
    page.unroute("**/annotate/task/**")
    page.goto(url)
    page.wait_for_selector("#task[data-kind=entities]")
    assert page.inner_text("#summary").startswith("1 mention")
    assert "Restored 1 mark(s)" in page.inner_text("#ent-status")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    ans = Answer.objects.get(task=task)
    assert [task.document.text[m["start"]:m["end"]] for m in ans.value["mentions"]] == ["Mess of Blues"]
    assert page.evaluate(DRAFTS) == 0


def _verify_none(page, base) -> str:
    """Sign in, open a verification item, choose 'no relation' (not sent); the task page's address."""
    login(page, base)
    page.keyboard.press("1")
    page.wait_for_selector("#task[data-kind=verify]")
    page.wait_for_load_state("load")
    page.keyboard.press("3")
    return page.url


def _sign_out_and_in(ctx, base, again: bool) -> None:
    """In another tab of the same browser: sign out, and sign in again when ``again``."""
    other = ctx.new_page()
    other.goto(f"{base}/annotate/")
    with other.expect_navigation():
        other.click("text=sign out")
    if again:
        login(other, base)
    other.close()


def test_an_answer_sent_after_signing_out_elsewhere_asks_to_sign_in_and_comes_back(page, live_server, world):
    """Signed out in another tab, the task page's Submit got "Page not found … a private submission is shown only to
    its team": nothing said the session had ended.  It now asks to sign in, then reopens the task, the answer kept."""
    base = live_server.url
    url = _verify_none(page, base)
    _sign_out_and_in(page.context, base, again=False)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "/accounts/login/" in page.url
    assert "signed out" in page.inner_text("#login-reason")
    page.fill("#id_username", "ann")
    page.fill("#id_password", "pw-ann-123")
    with page.expect_navigation(url=url):
        page.keyboard.press("Enter")
    assert page.is_checked("input[name=relation][value=none]")
    assert not Answer.objects.filter(assignment__token=token_of(url)).exists()


def test_an_answer_sent_with_an_outdated_form_says_so_and_is_kept(page, live_server, world):
    """Signed in again in another tab, the task page's form carried an outdated CSRF token: Django's bare
    "CSRF verification failed. Request aborted." page.  It is now the site's page, saying nothing was stored and
    what to do; the task page restores the answer."""
    base = live_server.url
    url = _verify_none(page, base)
    _sign_out_and_in(page.context, base, again=True)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("#error-page[data-status='403']").count() == 1
    assert "nothing was stored" in page.inner_text("#error-reason")
    page.goto(url)
    page.wait_for_selector("#task[data-kind=verify]")
    assert page.is_checked("input[name=relation][value=none]")
    with page.expect_navigation(url=lambda u: u != url):
        page.keyboard.press("Enter")
    assert Answer.objects.get(assignment__token=token_of(url)).value["relation"] == "none"


def test_the_page_says_how_long_the_item_stays_yours_and_when_the_time_is_up(page, live_server, world):
    """The lease's end was in the page (``data-expires``) but nothing showed it: an annotator deep in a document
    lost the item to another without warning.  In its last five minutes the page shows the time left, by the
    server's clock, and once it is up says the answer is still taken unless someone has taken the item; an answer
    sent then is taken (nobody took it)."""
    from datetime import timedelta

    from django.utils import timezone

    from unpooled.service.annotation.models import Assignment

    url = _verify_none(page, live_server.url)
    assert page.is_hidden("#lease-clock")               # a fresh lease: far from its end
    Assignment.objects.filter(token=token_of(url)).update(expires=timezone.now() + timedelta(seconds=150))
    page.reload()
    page.wait_for_selector("#lease-clock:not([hidden])")
    left = page.inner_text("#lease-clock .left")
    assert left.startswith("2:") and "may go to another annotator" in page.inner_text("#lease-clock")
    Assignment.objects.filter(token=token_of(url)).update(expires=timezone.now() + timedelta(seconds=2))
    page.reload()
    page.wait_for_selector("#lease-clock.over")
    assert "time on this item has run out" in page.inner_text("#lease-clock")
    assert page.get_attribute("#lease-clock", "role") == "alert"
    page.keyboard.press("3")
    with page.expect_navigation(url=lambda u: u != url):
        page.keyboard.press("Enter")
    assert Answer.objects.get(assignment__token=token_of(url)).value["relation"] == "none"
