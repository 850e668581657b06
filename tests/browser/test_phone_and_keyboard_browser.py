"""Issue 25 #15 in Chromium: on a phone (390 px, touch, no hover) the annotation pages' targets are at least 44 px
on each side and the keyboard legends are hidden (shown with a mouse and a keyboard); a skip link leads past the
header to the main content; what was said only on hover (why an entity score is missing, what covers a passage of
a document) is reached by a tap or a key."""

from __future__ import annotations

import pytest

from unpooled.service.annotation.models import Kind

from .conftest import watch_csp
from .layout import shots_dir
from .test_board_pages import board  # noqa: F401 - the fixture: two scored submissions
from .test_clustering_browser import _sign_in, _task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

#: what a finger presses in an annotation page's main content: the answer's choices and checks (their labels), the buttons, the
#: selects, the search boxes, the lines of a list and the queue's task types
TARGETS = ", ".join(f"main {t}" for t in ("label.choice", "label.check", "button", "select", ".rel-search",
                                            "li.cluster-item", "details.guide > summary", "ol.queue li a"))
SMALL = """(sel) => [...document.querySelectorAll(sel)].filter(e => e.offsetParent !== null).map(e => {
    const r = e.getBoundingClientRect();
    return [e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + e.className, Math.round(r.width), Math.round(r.height)];
}).filter(([, w, h]) => w < 44 || h < 44)"""


@pytest.fixture
def phone(browser):
    """A phone: 390 px wide, touch, no pointer that hovers."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                              device_scale_factor=2)
    violations = watch_csp(ctx)
    pg = ctx.new_page()
    pg.set_default_timeout(15000)
    yield pg
    ctx.close()
    assert not violations, violations


def _relations(world):
    from .test_annotation_browser import _relations_task

    return _relations_task(world)


def test_annotation_pages_on_a_phone(phone, live_server, world):
    _relations(world)
    _task(world)
    base = live_server.url
    _sign_in(phone, base)
    assert phone.evaluate("matchMedia('(hover: none) and (pointer: coarse)').matches")
    seen = []
    for kind in ("queue", Kind.VERIFY, Kind.RELATIONS, Kind.CLUSTERS):
        phone.goto(f"{base}/annotate/" if kind == "queue" else f"{base}/annotate/next/{kind}/")
        if kind != "queue":
            phone.wait_for_selector(f"#task[data-kind={kind}]")
            assert not phone.is_visible(".keys"), kind           # the keyboard legend
            assert phone.locator(".task kbd").evaluate_all("els => els.filter(e => e.offsetParent !== null).length") == 0
        assert not phone.locator(".key-hint").first.is_visible(), kind
        targets = phone.evaluate(f"() => document.querySelectorAll('{TARGETS}').length")
        assert targets >= 3, kind
        small = phone.evaluate(SMALL, TARGETS)
        assert not small, f"{kind}: targets under 44 px: {small}"
        # the screen, not the full page: Chromium's full-page capture drops the touch emulation (legends reappear)
        phone.screenshot(path=str(shots_dir() / f"phone-{kind}-top.png"))
        phone.locator(TARGETS).last.scroll_into_view_if_needed()
        phone.screenshot(path=str(shots_dir() / f"phone-{kind}-answer.png"))
        seen.append(kind)
    # a choice is taken by a tap on its label
    phone.goto(f"{base}/annotate/next/verify/")
    phone.locator("label.choice", has_text="no relation").tap()
    assert phone.is_checked("input[name=relation][value=none]")
    assert seen == ["queue", "verify", "relations", "clusters"]


def test_legends_stay_for_a_keyboard_and_mouse(page, live_server, world):
    base = live_server.url
    _sign_in(page, base)
    page.goto(f"{base}/annotate/next/verify/")
    page.wait_for_selector("#task[data-kind=verify]")
    assert page.is_visible(".keys") and page.is_visible(".key-hint") and page.locator(".task kbd").first.is_visible()


@pytest.mark.parametrize("path", ["/", "/annotate/", "/corpora/browser/", "/about/numbers/"])
def test_a_skip_link_leads_to_the_main_content(page, live_server, world, path):
    base = live_server.url
    if path == "/annotate/":
        _sign_in(page, base)
    page.goto(base + path)
    skip = page.locator("a.skip-link")
    assert not skip.is_visible() or skip.bounding_box()["y"] < 0    # out of sight until focused
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    box = skip.bounding_box()
    assert box["y"] >= 0 and box["height"] >= 24                     # shown once focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.keyboard.press("Tab")                                       # the next stop is inside the main content
    assert page.evaluate("!!document.activeElement.closest('main')"), page.evaluate("document.activeElement.outerHTML")


def test_why_a_score_is_missing_is_a_tap_away(phone, live_server, board):  # noqa: F811
    """The entity leaderboard said "not scored … says why on hover": a phone has no hover.  A column no system is
    scored at is said once above the table, with its reason; each "not scored" opens its reason on a tap."""
    from unpooled.core.estimators.entities import METRICS
    from unpooled.service.evaluations.models import EntityScore

    corpus, a, b = board
    why = "the corpus has no KB links"
    for sub, f1 in ((a, 0.61), (b, 0.52)):
        metrics = {k: ({"value": None, "reason": why} if k.startswith("link_") else
                       {"value": f1, "lo": f1 - 0.1, "hi": f1 + 0.1, "n": 30}) for k in METRICS}
        metrics["typing"] = {"value": None, "reason": f"{sub.team.name}: submitted without entity types"}
        EntityScore.objects.create(submission=sub, level="instance", documents=3, details={"metrics": metrics})
    phone.goto(f"{live_server.url}/corpora/{corpus.name}/leaderboard/entities/")
    said = phone.inner_text("#unscored-columns")
    assert "linking precision: no system is scored: the corpus has no KB links." in said, said
    assert "typing accuracy: no system is scored (each system's cell says why)." in said  # two reasons
    assert "linking F1" not in said and "mention" not in said   # not a column of the table; scored
    cell = phone.locator("#entity-leaderboard details.why").first
    assert not cell.locator(".why-text").is_visible()
    cell.locator("summary").tap()
    assert cell.locator(".why-text").is_visible() and cell.locator(".why-text").inner_text().endswith(
        "submitted without entity types")
    phone.screenshot(path=str(shots_dir() / "phone-leaderboard-entities-why.png"))


def test_what_covers_a_passage_is_a_tap_or_a_key_away(phone, page, live_server, board):  # noqa: F811
    from unpooled.service.corpora.models import Document

    corpus, _, _ = board
    doc = Document.objects.filter(corpus=corpus).order_by("id").first()
    url = f"{live_server.url}/corpora/{corpus.name}/documents/{doc.pk}/"
    phone.goto(url)
    seg = phone.locator("#doc-text .seg[title]").first
    title = seg.get_attribute("title")
    seg.tap()
    assert phone.inner_text("#seg-info") == f"\u201c{seg.inner_text()}\u201d: {title}"
    phone.screenshot(path=str(shots_dir() / "phone-document-tap.png"))
    page.goto(url)                                     # with the keyboard: Tab reaches the passages
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('seg')"):
            break
    assert page.inner_text("#seg-info").endswith(page.evaluate("document.activeElement.title"))
