"""The clustering task as a Mechanical Turk worker sees it: our page inside a frame of the sandbox's page (the
sandbox host is served by Playwright here), keyboard only, with no cookie of ours; the answer is stored
quarantined and the frame hands the assignment back to the sandbox's externalSubmit by itself.  Unlike the in-house
page: no Skip, no undo, no progress line, and a last page that posts to Amazon."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode

import pytest

from unpooled.service.annotation import actions, hits
from unpooled.service.annotation.models import Answer, Hit, Task

from .test_clustering_browser import _task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

SANDBOX = "https://workersandbox.mturk.com"


def test_clusters_in_the_mturk_frame(page, live_server, world):
    st = actions.settings_for(world)
    st.backend = "mturk"
    st.save()
    task = _task(world)
    hit = Hit.objects.create(task=task, request_token="tok-clusters", hit_id="3" + "G" * 29, max_assignments=1,
                             status="posted")
    amazon = {"assignmentId": "3" + "H" * 29, "hitId": hit.hit_id, "workerId": "A1FRAMEWORKER",
              "turkSubmitTo": SANDBOX}
    entry = f"{live_server.url}/annotate/mturk/?{hits.task_query(task, hit)}&{urlencode(amazon)}"
    posted = []

    def sandbox(route):
        if route.request.method == "POST":
            posted.append((route.request.url, route.request.post_data))
            route.fulfill(status=200, content_type="text/html", body="<p id=done>MTurk got it</p>")
        else:  # the worker's HIT page on the sandbox: our ExternalQuestion in a frame
            route.fulfill(status=200, content_type="text/html",
                          body=f'<iframe id="hit" src="{entry}" style="width:100%;height:760px"></iframe>')

    page.route(f"{SANDBOX}/**", sandbox)
    # a public page framing a local one needs Chromium's local network access permission (here only: the live
    # server is on localhost, the real service is not)
    page.context.grant_permissions(["local-network-access"], origin=SANDBOX)
    page.goto(f"{SANDBOX}/projects/clusters/tasks/1")
    frame = page.frame_locator("#hit")
    frame.locator("#cluster-items").wait_for()
    assert frame.locator(".cluster-item").count() == 3
    assert frame.locator("#skip").count() == 0 and frame.locator("#progress").count() == 0
    frame.locator('.cluster-item[data-index="0"]').click()  # the frame has the keys from now on
    page.keyboard.press("c")          # item 0 -> group c (the cursor stays)
    page.keyboard.press("j")
    page.keyboard.press("Shift+C")    # item 1 -> group C (Shift: another group)
    page.keyboard.press("j")
    page.keyboard.press("Shift+C")    # item 2 -> group C
    assert frame.locator('.cluster-item[data-group="C"]').count() == 2
    # the lone c counts as a line alone, as the answer will have it
    assert "1 group of two or more lines chosen; 1 line alone." in frame.locator("#cluster-summary").inner_text()
    page.keyboard.press("Enter")      # the groups, to check
    assert frame.locator("#cluster-review").is_visible() and not posted
    page.keyboard.press("Enter")      # sent
    frame.locator("#done").wait_for()
    assert len(posted) == 1 and posted[0][0] == f"{SANDBOX}/mturk/externalSubmit"
    form = parse_qs(posted[0][1])
    ans = Answer.objects.get(task=task)
    assert form["assignmentId"] == [amazon["assignmentId"]] and form["unpooled_token"] == [ans.assignment.token]
    assert ans.value == {"groups": [[0], [1, 2]]} and ans.seconds is not None
    assert ans.quarantined and ans.weight == 0  # until the sync finds the assignment at Amazon
    task.refresh_from_db()
    assert task.status == Task.Status.OPEN and task.result is None
