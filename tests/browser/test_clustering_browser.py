"""The cross-document clustering page in Chromium, keyboard only: j/k move, a letter groups, Backspace ungroups,
Enter submits; the stored answer and the aggregated clusters; no CSP violation; screenshots at 1280 and 390 px."""

from __future__ import annotations

import os
import tempfile

import pytest

from unpooled.service.annotation.models import Answer, Kind, Task

from .conftest import PASSWORD, USER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


def _task(corpus) -> Task:
    from django.utils import timezone

    from unpooled.service.corpora.models import Document

    docs = list(Document.objects.filter(corpus=corpus).order_by("id")[:3])
    items = []
    for d, (s, e) in zip(docs, [(0, 13), (0, 8), (0, 6)]):
        items.append({"doc": d.doc_id, "document": d.pk, "cluster": 0, "type": "MISC", "start": s, "end": e,
                      "text": d.text[s:e], "context": [0, 60], "before": "", "after": d.text[e:60]})
    return Task.objects.create(corpus=corpus, kind=Kind.CLUSTERS, document=docs[0], key="clusters:test",
                               payload={"items": items}, answers_needed=1, priority=timezone.now(),
                               guideline_version="2026.11")


def test_clusters_with_the_keyboard(page, live_server, world):
    task = _task(world)
    base = live_server.url
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", USER)
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    shots = os.environ.get("UNPOOLED_SHOTS") or tempfile.mkdtemp(prefix="cluster-shots-")
    page.goto(f"{base}/annotate/next/clusters/")
    page.wait_for_selector("#cluster-items")
    assert page.locator(".cluster-item").count() == 3
    page.keyboard.press("a")          # item 0 -> group a, cursor to item 1
    page.keyboard.press("b")          # item 1 -> group b
    page.keyboard.press("k")          # back to item 1
    page.keyboard.press("Backspace")  # item 1 out of its group
    page.keyboard.press("a")          # item 1 -> group a, cursor to item 2
    assert page.locator('.cluster-item[data-group="a"]').count() == 2
    assert "1 group of two or more lines chosen; 1 lines alone." in page.inner_text("#cluster-summary")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=os.path.join(shots, f"clusters-{width}.png"), full_page=True)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    ans = Answer.objects.get(task=task)
    assert ans.value == {"groups": [[0, 1], [2]]} and ans.seconds is not None
    task.refresh_from_db()
    assert task.status == Task.Status.COMPLETE and task.result["clusters"] == [[0, 1], [2]]
    print(f"\nscreenshots in {shots}")


def test_u_is_a_group_letter_beside_an_undo_offer(page, live_server, world):
    """After an answer that may still be undone, the clustering page offers the undo as a button only: u puts the
    line in group u (it withdrew the previous answer and left the page)."""
    Task.objects.filter(kind=Kind.VERIFY).update(answers_needed=2)  # one answer leaves the item open: undoable
    task = _task(world)
    base = live_server.url
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", USER)
    page.fill("#id_password", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.goto(f"{base}/annotate/next/verify/")
    page.wait_for_selector("#task[data-kind=verify]")
    first = page.url
    page.keyboard.press("3")
    with page.expect_navigation(url=lambda u: u != first):
        page.keyboard.press("Enter")
    page.goto(f"{base}/annotate/next/clusters/")
    page.wait_for_selector("#cluster-items")
    assert page.is_visible("#undo") and page.locator("#undo kbd").count() == 0
    clusters = page.url
    page.keyboard.press("u")          # item 0 -> group u, cursor to item 1
    page.keyboard.press("u")          # item 1 -> group u
    assert page.url == clusters and page.locator('.cluster-item[data-group="u"]').count() == 2
    assert Answer.objects.filter(task__kind=Kind.VERIFY).count() == 1  # the verification answer stands
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert Answer.objects.get(task=task).value == {"groups": [[0, 1], [2]]}
