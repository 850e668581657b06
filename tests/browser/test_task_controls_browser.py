"""Every form control of a task page has a label a screen reader reads (its <label>, aria-label or
aria-labelledby): the verification item's "another relation" list had none (it read as "choose…")."""

from __future__ import annotations

import pytest

from unpooled.service.annotation.models import Answer

from .test_annotation_browser import _relations_task, login, request_entities

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

UNLABELLED = """() => Array.from(document.querySelectorAll("input:not([type=hidden]), select, textarea"))
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby"))
  .map((el) => el.outerHTML.slice(0, 80))"""


def test_every_control_of_the_verification_page_has_a_label(page, live_server, world):
    login(page, live_server.url)
    page.keyboard.press("1")
    page.wait_for_selector("#task[data-kind=verify]")
    assert page.evaluate(UNLABELLED) == []
    page.keyboard.press("2")                                  # another relation: the list takes the focus
    assert page.evaluate("document.activeElement.id") == "other_predicate"
    assert page.get_by_role("combobox", name="another relation").count() == 1


def test_entities_with_the_mouse_only(page, live_server, world):
    """The entity task took its types, groups and removals from keys only: with a mouse (or a phone's touch screen)
    a mention could be selected but not marked.  The legend's types are buttons that mark the selection, and the
    Group and Remove buttons do what g and Backspace do."""
    task = request_entities(world)
    login(page, live_server.url)
    page.goto(f"{live_server.url}/annotate/next/entities/")
    page.wait_for_selector("#task[data-kind=entities]")
    toks = page.locator("#doc .tok")

    def select(first: int, last: int) -> None:   # press on the first token, release on the last
        toks.nth(first).hover()
        page.mouse.down()
        toks.nth(last).hover()
        page.mouse.up()

    misc = page.locator(".legend .tag", has_text="MISC")
    per = page.locator(".legend .tag", has_text="PER")
    select(0, 2)
    misc.click()                                  # "Mess of Blues"
    select(7, 8)
    per.click()                                   # "Jeff Healey"
    assert page.inner_text("#summary").startswith("2 mentions in 2 group(s)")
    toks.nth(8).click()
    page.click("#ent-remove")
    assert page.inner_text("#summary").startswith("1 mention ")
    select(7, 8)
    per.click()
    toks.nth(7).click()
    page.click("#ent-group")                      # the picker: the one other group, chosen with the mouse
    page.locator("#group-picker li.choice").first.click()
    assert page.inner_text("#summary").startswith("2 mentions in 1 group(s)")
    with page.expect_navigation():
        page.click("#submit-answer")
    ans = Answer.objects.get(task=task)
    text = task.document.text
    assert sorted((text[m["start"]:m["end"]], m["type"]) for m in ans.value["mentions"]) == [
        ("Jeff Healey", "PER"), ("Mess of Blues", "MISC")]
    assert len({m["cluster"] for m in ans.value["mentions"]}) == 1



def test_relations_with_the_mouse_only(page, live_server, world):
    """A relation chosen for a pair could be taken back with the x key only (which clears the whole pair): with a
    mouse it stayed.  Each chosen relation is a button that removes it."""
    rel = _relations_task(world)
    login(page, live_server.url)
    page.goto(f"{live_server.url}/annotate/next/relations/")
    page.wait_for_selector("#task[data-kind=relations]")
    box = page.locator(".pair[data-index='0'] .rel-search")
    box.click()
    options = page.locator(".pair[data-index='0'] .suggest li.option")
    first, second = options.nth(0).inner_text(), options.nth(1).inner_text()
    options.nth(0).click()
    page.locator(".pair[data-index='0'] .suggest li.option").nth(0).click()   # the next match: the second
    chips = page.locator(".pair[data-index='0'] .chips .chip")
    assert chips.count() == 2
    page.locator(".pair[data-index='0'] blockquote").click()                # away from the search box: its list closes
    chips.nth(0).click()                                                    # taken back with the mouse
    assert chips.count() == 1
    with page.expect_navigation():
        page.click("#submit-answer")
    (code,) = Answer.objects.get(task=rel).value["pairs"]["0"]
    assert code.split(":")[1] in second and code.split(":")[1] not in first


def test_clusters_with_the_mouse_only(page, live_server, world):
    """The clustering page grouped lines with letter keys only: a click chose a line and nothing could group it.
    The chosen line now carries buttons: a new group, each group already made, alone."""
    from .test_clustering_browser import _task

    task = _task(world)
    login(page, live_server.url)
    page.goto(f"{live_server.url}/annotate/next/clusters/")
    page.wait_for_selector("#cluster-items")
    lines = page.locator(".cluster-item")
    lines.nth(0).click()
    lines.nth(0).get_by_role("button", name="new group").click()
    lines.nth(2).click()
    lines.nth(2).get_by_role("button", name="group a").click()
    assert "1 group of two or more lines chosen; 1 line alone." in page.inner_text("#cluster-summary")
    lines.nth(1).click()
    lines.nth(1).get_by_role("button", name="new group").click()
    lines.nth(1).get_by_role("button", name="alone").click()
    page.click("#submit-answer")                       # the groups, to check
    with page.expect_navigation():
        page.click("#send-groups")
    assert Answer.objects.get(task=task).value == {"groups": [[0, 2], [1]]}


def test_a_mention_of_several_words_on_a_touch_screen(browser, live_server, world):
    """On a phone a tap selects one word (a touch drag scrolls, and each tap starts a new selection), so a mention of
    several words could not be marked.  The Extend button adds the next word to the selection, as Shift+→ does."""
    task = request_entities(world)
    ctx = browser.new_context(viewport={"width": 390, "height": 800}, has_touch=True, is_mobile=True)
    try:
        page = ctx.new_page()
        login(page, live_server.url)
        page.goto(f"{live_server.url}/annotate/next/entities/")
        page.wait_for_selector("#task[data-kind=entities]")
        page.locator("#doc .tok").nth(0).tap()            # "Mess"
        page.locator("#ent-extend").tap()
        page.locator("#ent-extend").tap()                  # "Mess of Blues"
        page.locator(".legend .tag", has_text="MISC").tap()
        assert page.inner_text("#summary").startswith("1 mention")
        with page.expect_navigation():
            page.locator("#submit-answer").tap()
        (m,) = Answer.objects.get(task=task).value["mentions"]
        assert task.document.text[m["start"]:m["end"]] == "Mess of Blues"
    finally:
        ctx.close()
