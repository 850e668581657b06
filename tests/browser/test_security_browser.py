"""The review's browser probes, in Debian's Chromium against pytest-django's live server: every page runs
under its Content-Security-Policy with no violation (organiser, submitter and anonymous visitor; Swagger UI
and the admin included); a ``turkSubmitTo=javascript:`` link runs nothing (D2) while a real HIT's page still
finishes on Mechanical Turk; an organiser's invite makes an annotator account."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlencode

import pytest
from django.contrib.auth.models import User

from unpooled.service.annotation import actions, hits
from unpooled.service.annotation.models import Answer, Hit, Kind, Task

from .conftest import watch_csp
from .layout import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


def test_the_watcher_sees_a_violation(browser, live_server, world):
    """The check the other browser tests rely on can fail: a script injected into a page is refused and
    reported."""
    ctx = browser.new_context()
    seen = watch_csp(ctx)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/")
    page.evaluate("() => { const s = document.createElement('script'); s.textContent = 'window.pwned = 1';"
                  " document.body.appendChild(s); }")
    page.wait_for_timeout(200)  # the violation event is dispatched asynchronously
    assert page.evaluate("() => window.pwned") is None
    assert seen and "script-src" in " ".join(seen)
    ctx.close()


def test_every_page_under_its_policy(page, live_server, world):
    """Organiser, then anonymous: the pages of the service, each loaded and used a little (their scripts
    work from static files), with no Content-Security-Policy violation (the page fixture checks)."""
    base = live_server.url
    corpus = world
    User.objects.create_user("org", password="pw-org-81234", is_staff=True, is_superuser=True)
    sub = corpus.submissions.first()
    doc = Task.objects.filter(corpus=corpus, kind=Kind.VERIFY).first().document
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(page, base, "org", "pw-org-81234")
    for path in ("/", f"/corpora/{corpus.name}/", f"/corpora/{corpus.name}/leaderboard/", "/submissions/",
                 f"/submissions/{sub.pk}/", f"/submissions/{sub.pk}/status/", "/submissions/new/", "/accounts/",
                 "/accounts/invites/", "/organiser/", "/organiser/annotation/", "/organiser/settings/",
                 "/organiser/submissions/", "/organiser/teams/", "/admin/", "/admin/annotation/task/",
                 "/annotate/"):
        resp = page.goto(base + path)
        assert resp.status == 200, path
    # the document page's layer boxes (document.js)
    page.goto(f"{base}/corpora/{corpus.name}/documents/{doc.pk}/")
    assert "show-gold" in page.get_attribute("#doc-text", "class")
    page.uncheck("#layers input[data-layer=gold]")
    assert "show-gold" not in page.get_attribute("#doc-text", "class")
    # the console's corpus menu submits itself (console.js)
    page.goto(f"{base}/organiser/settings/")
    options = page.eval_on_selector_all("#corpus option", "els => els.map(e => e.value)")
    assert options == [corpus.name]
    # Swagger UI, from this server, renders the API under the policy
    page.goto(f"{base}/api/docs")
    page.wait_for_selector("#swagger-ui .opblock", timeout=30000)
    # the work queue's number keys (queue.js) and a task page (annotate.js)
    page.goto(f"{base}/annotate/")
    with page.expect_navigation():
        page.keyboard.press("1")
    page.wait_for_selector("#task[data-kind=verify]")
    # sign out (a form in the header), then as an anonymous visitor
    with page.expect_navigation():
        page.click("header button.link")
    for path in ("/", f"/corpora/{corpus.name}/", f"/corpora/{corpus.name}/documents/{doc.pk}/",
                 f"/corpora/{corpus.name}/leaderboard/", "/submissions/", f"/submissions/{sub.pk}/",
                 "/accounts/login/", "/accounts/signup/", "/api/docs"):
        assert page.goto(base + path).status == 200, path
    assert dialogs == []


def test_turk_submit_to_runs_no_script_and_a_real_hit_finishes_on_mturk(page, live_server, world):
    """D2: the probe's ``turkSubmitTo=javascript:alert(…)//`` is refused before anything is leased; the
    same HIT with Amazon's sandbox host is answered by keyboard and the page hands the assignment back to
    ``https://workersandbox.mturk.com/mturk/externalSubmit`` by itself (intercepted here)."""
    base = live_server.url
    corpus = world
    st = actions.settings_for(corpus)
    st.backend = "mturk"
    st.save()
    task = Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False).order_by("id").first()
    hit = Hit.objects.create(task=task, request_token="tok-browser", hit_id="3" + "B" * 29, max_assignments=1,
                             status="posted")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    amazon = {"assignmentId": "3" + "C" * 29, "hitId": hit.hit_id, "workerId": "A1BROWSERWORKER"}
    entry = f"{base}/annotate/mturk/?{hits.task_query(task, hit)}&"
    evil = entry + urlencode({**amazon, "turkSubmitTo": "javascript:alert(document.domain+'|'+document.cookie)//"})
    resp = page.goto(evil)
    assert resp.status == 400 and "turkSubmitTo: expected" in page.inner_text("#refused")
    assert not Answer.objects.exists() and not task.assignments.exists()
    posted = []

    def mturk(route):
        posted.append((route.request.url, route.request.post_data))
        route.fulfill(status=200, content_type="text/html", body="<p id=done>MTurk got it</p>")

    page.route("https://workersandbox.mturk.com/**", mturk)
    page.goto(entry + urlencode({**amazon, "turkSubmitTo": "https://workersandbox.mturk.com"}))
    page.wait_for_selector("#task[data-kind=verify]")
    page.keyboard.press("1")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("#done")
    assert len(posted) == 1 and posted[0][0] == "https://workersandbox.mturk.com/mturk/externalSubmit"
    form = parse_qs(posted[0][1])
    ans = Answer.objects.get(task=task)
    assert form["assignmentId"] == [amazon["assignmentId"]] and form["unpooled_token"] == [ans.assignment.token]
    assert ans.quarantined and ans.weight == 0  # until collect finds the assignment at Amazon
    assert json.loads(json.dumps(ans.value))["relation"] == "holds"
    assert dialogs == []


def test_an_invite_makes_an_annotator_account(page, browser, live_server, world):
    base = live_server.url
    User.objects.create_user("org", password="pw-org-81234", is_staff=True)
    sign_in(page, base, "org", "pw-org-81234")
    page.goto(f"{base}/accounts/invites/")
    page.fill("#id_note", "Dana")
    with page.expect_navigation():
        page.click("#invite-submit")
    link = page.inner_text("#invite-link")
    assert "/accounts/signup/?invite=" in link
    ctx = browser.new_context()
    seen = watch_csp(ctx)
    dana = ctx.new_page()
    dana.goto(link)
    dana.fill("#id_username", "dana")
    dana.fill("#id_password", "a-long-password-7")
    assert dana.is_checked("input[name=role][value=annotator]")
    dana.fill("#id_ties", "none")
    with dana.expect_navigation():
        dana.click("#signup-submit")
    assert dana.url == f"{base}/annotate/" and "needs-invite" not in dana.content()
    # without an invite (no corpus open to sign-up) the page says what is missing
    other = ctx.new_page()
    other.context.clear_cookies()
    other.goto(f"{base}/accounts/signup/")
    other.fill("#id_username", "walkin")
    other.fill("#id_password", "a-long-password-7")
    other.check("input[name=role][value=annotator]")
    with other.expect_navigation():
        other.click("#signup-submit")
    assert "an organiser" in other.inner_text("#signup") and not User.objects.filter(username="walkin").exists()
    assert seen == []
    ctx.close()
