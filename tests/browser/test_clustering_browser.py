"""The cross-document clustering page in Chromium, keyboard only: j/k move, a letter groups (the cursor stays),
Backspace ungroups, Enter shows the groups and Enter again sends them; the stored answer and the aggregated
clusters; a draft kept in the browser; the page after; no CSP violation; screenshots at 1280 and 390 px."""

from __future__ import annotations

import os
import tempfile

import pytest

from unpooled.service.annotation.models import Answer, Kind, Task

from .test_annotation_browser import login

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
    login(page, base)
    shots = os.environ.get("UNPOOLED_SHOTS") or tempfile.mkdtemp(prefix="cluster-shots-")
    page.goto(f"{base}/annotate/next/clusters/")
    page.wait_for_selector("#cluster-items")
    assert page.locator(".cluster-item").count() == 3
    page.keyboard.press("a")          # item 0 -> group a (the cursor stays)
    page.keyboard.press("j")
    page.keyboard.press("b")          # item 1 -> group b
    page.keyboard.press("Backspace")  # item 1 out of its group
    page.keyboard.press("a")          # item 1 -> group a
    assert page.locator('.cluster-item[data-group="a"]').count() == 2
    assert "1 group of two or more lines chosen; 1 line alone." in page.inner_text("#cluster-summary")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=os.path.join(shots, f"clusters-{width}.png"), full_page=True)
    page.keyboard.press("Enter")      # the groups, to check
    with page.expect_navigation():
        page.keyboard.press("Enter")  # sent
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
    login(page, base)
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
    page.keyboard.press("u")          # item 0 -> group u
    page.keyboard.press("j")
    page.keyboard.press("u")          # item 1 -> group u
    assert page.url == clusters and page.locator('.cluster-item[data-group="u"]').count() == 2
    assert Answer.objects.filter(task__kind=Kind.VERIFY).count() == 1  # the verification answer stands
    page.keyboard.press("Enter")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert Answer.objects.get(task=task).value == {"groups": [[0, 1], [2]]}


def test_letters_stay_review_before_send_draft_kept_and_the_page_after(page, live_server, world):
    """UX review #8: a letter also moved to the next line (not in the legend), Enter sent the groups unseen, leaving
    the page lost them, and the page afterwards explained the relations task.  Now a letter leaves the cursor on its
    line and says what the line is grouped with; Enter shows the groups for review (Esc goes back, Enter sends);
    the groups are kept in this browser until sent (leaving asks first); the page after speaks of clustering."""
    from .layout import check_layout

    task = _task(world)
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/annotate/next/clusters/")
    page.wait_for_selector("#cluster-items")
    url = page.url
    current = "() => Array.from(document.querySelectorAll('.cluster-item')).findIndex(li => li.classList.contains('current'))"
    page.keyboard.press("a")          # line 1 -> group a; the cursor stays on line 1
    assert page.evaluate(current) == 0
    keys = page.inner_text(".keys")
    assert "the cursor stays" in keys and "review" in keys, keys
    names = page.eval_on_selector_all(".cluster-item .name", "els => els.map(e => e.textContent)")
    assert f"\u201c{names[0]}\u201d is in group a" in page.inner_text("#cluster-status")
    page.keyboard.press("j")
    page.keyboard.press("a")          # line 2 -> group a
    assert page.evaluate(current) == 1
    assert f"with \u201c{names[0]}\u201d" in page.inner_text("#cluster-status")
    check_layout(page, "clusters-letter-stays")

    # leaving asks first; coming back restores the groups from this browser's draft
    asked = []
    page.on("dialog", lambda d: (asked.append(d.type), d.accept()))
    page.goto(f"{base}/annotate/")
    page.goto(url)
    page.wait_for_selector("#cluster-items")
    assert page.locator('.cluster-item[data-group="a"]').count() == 2
    assert "Restored" in page.inner_text("#cluster-status") and asked == ["beforeunload"]

    # Enter shows the groups for review; nothing is sent yet; Esc goes back to editing
    page.keyboard.press("Enter")
    review = page.locator("#cluster-review")
    assert review.is_visible()
    text = review.inner_text()
    assert f"{names[0]}" in text and f"{names[1]}" in text and "1 group of two or more lines" in text, text
    assert names[2] in review.locator(".alone").inner_text()
    check_layout(page, "clusters-review")
    assert Answer.objects.filter(task=task).count() == 0
    page.keyboard.press("Escape")
    assert not review.is_visible()
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("b")          # the keys edit again: line 3 into group b, and out of it
    assert page.locator('.cluster-item[data-group="b"]').count() == 1
    page.keyboard.press("Backspace")
    page.keyboard.press("Enter")
    assert review.is_visible() and Answer.objects.filter(task=task).count() == 0
    with page.expect_navigation():
        page.keyboard.press("Enter")  # sends
    assert Answer.objects.get(task=task).value == {"groups": [[0, 1], [2]]}
    assert page.evaluate("() => Object.keys(localStorage).filter(k => k.startsWith('unpooled-draft:')).length") == 0

    # the page after: no clustering task is open, said of clustering (not of the relations task)
    assert page.locator("#empty").count() == 1
    reasons = page.inner_text("#empty-reasons")
    assert "clustering" in reasons and "relation annotation" not in reasons, reasons
    check_layout(page, "clusters-after-send")


def _sign_in(page, base):
    login(page, base)


def _send_groups(page, base):
    """Open the clustering task, group lines 1 and 2 (letter a), review and send; returns the task page's URL."""
    page.goto(f"{base}/annotate/next/clusters/")
    page.wait_for_selector("#cluster-items")
    url = page.url
    for key in ("a", "j", "a", "Enter"):
        page.keyboard.press(key)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    return url


def test_undo_a_clustering_answer_until_the_next_one(page, live_server, world):
    """Issue 25 build 2: the page after a clustering answer (no other clustering task: the empty queue's page)
    offers its undo; u takes it back and reopens the task with the groups filled in, to be corrected and sent
    again."""
    from .layout import check_layout

    task = _task(world)
    Task.objects.filter(pk=task.pk).update(answers_needed=2)  # one answer leaves the task open: undoable
    base = live_server.url
    _sign_in(page, base)
    url = _send_groups(page, base)
    assert page.locator("#empty").count() == 1 and page.is_visible("#undo")
    assert Answer.objects.get(task=task).value == {"groups": [[0, 1], [2]]}
    check_layout(page, "clusters-after-send-undoable")
    with page.expect_navigation(url=url):
        page.keyboard.press("u")
    assert page.is_visible("#undone") and not Answer.objects.filter(task=task).exists()
    assert page.locator('.cluster-item[data-group="a"]').count() == 2   # the answer, to correct
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("a")                                           # line 3 joins them
    page.keyboard.press("Enter")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert Answer.objects.get(task=task).value == {"groups": [[0, 1, 2]]}


def test_a_clustering_answer_that_closed_its_task_says_it_cannot_be_undone(page, live_server, world):
    """With one answer per task the answer completes it: the page after says the answer was saved and why it can no
    longer be undone, and u makes that note flash instead of doing nothing."""
    from .layout import check_layout

    task = _task(world)
    base = live_server.url
    _sign_in(page, base)
    _send_groups(page, base)
    task.refresh_from_db()
    assert task.status == Task.Status.COMPLETE
    assert page.locator("#undo").count() == 0
    note = page.locator("#saved-final")
    assert "it completed its item, so it can no longer be undone" in note.inner_text()
    page.keyboard.press("u")
    assert "flash" in note.get_attribute("class")
    check_layout(page, "clusters-after-send-final")


def test_the_line_buttons_keep_the_keyboard_focus(page, live_server, world):
    """A line's buttons (new group, a group, alone) are redrawn after each choice: pressed from the keyboard
    (Tab to it, Enter or Space), the focus stays on the redrawn button, not on the page's body."""
    _task(world)
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/annotate/next/clusters/")
    page.wait_for_selector(".cluster-tools button")
    focused = "() => { const a = document.activeElement; return a && a.closest('.cluster-tools') ? a.getAttribute('aria-label') : a.tagName; }"
    page.focus('.cluster-tools button[aria-label="new group"]')
    page.keyboard.press("Enter")                           # line 1 -> group a
    assert page.locator('.cluster-item[data-group="a"]').count() == 1
    assert page.evaluate(focused) == "new group"
    page.keyboard.press("Tab")                             # to "alone"
    assert page.evaluate(focused) == "alone"
    page.keyboard.press(" ")                               # line 1 alone again: "alone" is gone, the first button has it
    assert page.locator('.cluster-item[data-group="a"]').count() == 0
    assert page.evaluate(focused) == "new group"
