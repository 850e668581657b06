"""Every form control of a task page has a label a screen reader reads (its <label>, aria-label or
aria-labelledby): the verification item's "another relation" list had none (it read as "choose…")."""

from __future__ import annotations

import pytest

from .test_annotation_browser import login

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
