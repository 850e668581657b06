"""The organiser's Document sampling page in Chromium: the three SVG figures render (at 1280 and 390 px, within
the page's width), the scheme form draws the seed scheme's first stage, a non-organiser is refused, and no
Content-Security-Policy violation (the page fixture checks).  Screenshots go to a temporary folder
(``UNPOOLED_SCREENSHOTS`` to keep them)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from unpooled.service.accounts.models import Profile, Role
from unpooled.service.annotation.models import ExhaustiveDocument

from .test_security_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


@pytest.fixture
def corpus40(shared_data, tmp_path):
    from ..conftest import load_redocred_subset

    corpus, _, _ = load_redocred_subset(shared_data, tmp_path, 40, "sampling-browser")
    return corpus


def _shots() -> Path:
    d = os.environ.get("UNPOOLED_SCREENSHOTS") or tempfile.mkdtemp(prefix="docsample-shots-")
    Path(d).mkdir(parents=True, exist_ok=True)
    return Path(d)


def test_document_sampling_page(page, live_server, corpus40):
    base = live_server.url
    User.objects.create_user("org", password="pw-org-81234")
    Profile.objects.create(user=User.objects.get(username="org"), role=Role.ORGANISER)
    sign_in(page, base, "org", "pw-org-81234")
    shots = _shots()
    url = f"{base}/organiser/documents/?corpus={corpus40.name}&size=20&draws=2"
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        for fig in ("#fig-histogram", "#fig-clusters", "#fig-relations"):
            box = page.locator(f"{fig} svg").bounding_box()
            # legible: never shrunk below 540 px (a narrow window scrolls the figure in its own box)
            assert box is not None and box["width"] >= min(540, 720) - 1 and box["height"] > 50, (fig, width, box)
            frame = page.locator(f"{fig}").locator("xpath=..").bounding_box()
            assert frame["x"] >= 0 and frame["x"] + frame["width"] <= width + 1, (fig, width, frame)
        assert page.locator("#fig-histogram svg rect").count() > 10
        page.screenshot(path=str(shots / f"documents-{width}.png"), full_page=True)
        # nothing of this page's content reaches past the window (wide tables scroll in their own box; the
        # site header's own overflow at 390 px is the base template's, not this page's)
        wide = page.evaluate("""() => [...document.querySelectorAll('main *')].filter(e => {
            const r = e.getBoundingClientRect(); return r.right > window.innerWidth + 1 && !e.closest('.scroll-x'); })
            .slice(0, 8).map(e => e.tagName + '#' + e.id + ':' + Math.round(e.getBoundingClientRect().right))""")
        assert not wide, f"content wider than the {width} px window: {wide}"
    print(f"screenshots in {shots}")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(url)
    page.select_option("#scheme", "seed")
    page.fill("#sample_size", "20")
    with page.expect_navigation():
        page.click("#sample-form button")
    assert "4 documents drawn (seed), 4 new" in page.inner_text("main")
    assert ExhaustiveDocument.objects.filter(corpus=corpus40, scheme="seed", stage=1).count() == 4
    assert "drawn sample (seed)" in page.inner_text("#bins")


def test_document_sampling_page_refuses_a_submitter(page, live_server, corpus40):
    base = live_server.url
    u = User.objects.create_user("sub", password="pw-sub-81234")
    Profile.objects.create(user=u, role=Role.SUBMITTER)
    sign_in(page, base, "sub", "pw-sub-81234")
    resp = page.goto(f"{base}/organiser/documents/?corpus={corpus40.name}")
    assert resp.status == 403
    assert page.locator("svg").count() == 0
