"""The entity section of a submission's page and the entity leaderboard tab in Chromium, at 1280 and 390 px:
no CSP violation, the figures with intervals, what cannot be scored said; screenshots to a temp dir."""

from __future__ import annotations

import os
import tempfile

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


def test_entity_section_and_leaderboard_tab(page, live_server):
    from unpooled.service.submissions.models import Submission

    from ..service.test_entity_scores import tac_world

    corpus, sub = tac_world("tacbrowser")
    Submission.objects.filter(pk=sub.pk).update(status=Submission.Status.PUBLISHED)
    shots = os.environ.get("UNPOOLED_SHOTS") or tempfile.mkdtemp(prefix="entity-shots-")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/submissions/{sub.pk}/#entities")
        table = page.locator("#entity-table")
        assert table.is_visible()
        assert page.locator('#entity-table tr[data-metric="link_p"] td').nth(1).inner_text().strip() == "0.571"
        assert "[" in page.locator('#entity-table tr[data-metric="mention_f1"] td').nth(2).inner_text()
        page.locator("#entities").screenshot(path=os.path.join(shots, f"submission-entities-{width}.png"))
        page.goto(f"{live_server.url}/corpora/{corpus.name}/leaderboard/")
        page.click("#entities-tab")
        page.wait_for_selector("#entity-leaderboard")
        page.click("text=linking precision")
        assert "metric=link_p" in page.url
        assert page.locator('#entity-leaderboard td[data-ranked="1"]').first.inner_text().startswith("0.571")
        page.screenshot(path=os.path.join(shots, f"leaderboard-entities-{width}.png"), full_page=True)
    print(f"\nscreenshots in {shots}")
