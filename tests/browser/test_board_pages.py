"""The leaderboard, "About these numbers", a submission page and the upload history in Debian's Chromium:
sorting by a column, the rows-without-draws toggle, the team's settings form, the CSV link; every page at
1280 and 390 px wide with no horizontal overflow of the document (tables scroll inside their own box), and a
screenshot of each (``UNPOOLED_SCREENSHOTS``: a folder to keep them in; default a temporary one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from unpooled.service.evaluations.models import Score
from unpooled.service.submissions.models import Submission

from ..service.test_submission_page import make_world
from .layout import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

WIDTHS = (1280, 390)


@pytest.fixture
def shots(tmp_path) -> Path:
    d = Path(os.environ.get("UNPOOLED_SCREENSHOTS") or tmp_path / "shots")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture
def board(shared_data, tmp_path):
    """Two published, scored submissions with a gold truth beside their instance-level scores, one with a
    description and a paper link; a member of team-a and an organiser."""
    from unpooled.service.accounts.models import Profile, Role

    corpus, a, b = make_world(shared_data, tmp_path)
    Submission.objects.filter(pk__in=[a.pk, b.pk]).update(status=Submission.Status.PUBLISHED)
    Submission.objects.filter(pk=a.pk).update(description="BERT-base fine-tuned on DocRED train, then rules for "
                                                          "dates", link="https://example.org/paper")
    for sub, p, ok in ((a, 0.6, True), (b, 0.95, False)):
        s = Score.objects.filter(submission=sub, level="instance").latest("id")
        s.details = {**s.details, "truth": {"p": p, "r": 0.4, "f1": 0.5, "covered": {"p": ok, "r": True, "f1": ok}}}
        s.save(update_fields=["details"])
    u = User.objects.create_user("alice", password="pw-alice-1234")
    Profile.objects.create(user=u, role=Role.SUBMITTER, team=a.team)
    User.objects.create_user("org", password="pw-org-1234", is_staff=True, is_superuser=True)
    return corpus, a, b


def check_widths(page, url: str, name: str, shots: Path) -> None:
    """The page at each width: no horizontal overflow of the document; a full-page screenshot."""
    for w in WIDTHS:
        page.set_viewport_size({"width": w, "height": 900})
        resp = page.goto(url)
        assert resp.status == 200, url
        sw, vw = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        page.screenshot(path=str(shots / f"{name}_{w}.png"), full_page=True)
        # the page in screens of 1,400 px, to look at (the first six)
        height = page.evaluate("() => document.documentElement.scrollHeight")
        for k, y in enumerate(range(0, min(height, 6 * 1400), 1400)):
            page.screenshot(path=str(shots / f"{name}_{w}_seg{k}.png"), full_page=True,
                            clip={"x": 0, "y": y, "width": w, "height": min(1400, height - y)})
        assert sw <= vw, f"{name} at {w} px: the document is {sw} px wide (overflows by {sw - vw} px)"


def column(page, table: str, i: int) -> list[str]:
    return page.eval_on_selector_all(f"#{table} tbody tr", f"rows => rows.map(r => r.cells[{i}].innerText)")


def test_board_pages_in_chromium(page, live_server, board, shots, tmp_path):
    base = live_server.url
    corpus, a, b = board
    lb = f"{base}/corpora/{corpus.name}/leaderboard/"
    check_widths(page, lb, "leaderboard", shots)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(lb)
    # sorting: recall ascending, then descending; the rank column gives the F1 order back
    by_name = page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => r.dataset.submission)")
    page.click("#leaderboard thead th:nth-child(4) button")
    rec = [float(x.split("\n")[0]) for x in column(page, "leaderboard", 3)]
    assert rec == sorted(rec, reverse=True)
    assert page.get_attribute("#leaderboard thead th:nth-child(4)", "aria-sort") == "descending"
    page.click("#leaderboard thead th:nth-child(4) button")
    rec = [float(x.split("\n")[0]) for x in column(page, "leaderboard", 3)]
    assert rec == sorted(rec)
    page.click("#leaderboard thead th:nth-child(1) button")
    page.click("#leaderboard thead th:nth-child(1) button")
    assert page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => r.dataset.submission)") == by_name
    # truth marks, the charts side by side at 1280 px, the paper link, the CSV download
    assert page.locator("#leaderboard td.truth .in").count() >= 1 and page.locator("#leaderboard td.truth .out").count() >= 1
    f1box, prbox = page.locator("#f1-chart").bounding_box(), page.locator("#pr-chart").bounding_box()
    assert abs(f1box["y"] - prbox["y"]) < 5 and prbox["x"] > f1box["x"] + f1box["width"] - 5
    assert page.get_attribute("#leaderboard a.paper", "href") == "https://example.org/paper"
    with page.expect_download() as dl:
        page.click("#csv-link")
    text = Path(dl.value.path()).read_text()
    assert text.startswith("rank,tied,team,run") and "team-a" in text and "team-b" in text
    assert page.locator("#organiser-hint").count() == 0
    check_widths(page, f"{base}/about/numbers/", "about", shots)

    # a submission page, anonymous: short tables, rows without draws hidden until the toggle
    sub_url = f"{base}/submissions/{a.pk}/"
    check_widths(page, sub_url, "submission_anon", shots)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(sub_url)
    hidden = page.locator("#relation-table tr.nodraw")
    assert hidden.count() > 0 and not hidden.first.is_visible()
    page.click("button.toggle-empty[data-table=relation-table]")
    assert hidden.first.is_visible()
    page.click("#relation-table thead th:nth-child(2) button")  # instances, most first
    n = [int(x) for x in column(page, "relation-table", 1)][:-1]  # the "all" row stays last
    assert n == sorted(n, reverse=True)
    assert page.locator("#settings-form").count() == 0

    # the team: its settings form changes the description on the page
    sign_in(page, base, "alice", "pw-alice-1234")
    check_widths(page, sub_url, "submission_team", shots)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(sub_url)
    page.click("#settings summary")
    page.fill("#id_description", "Entity-pair classifier, v2")
    with page.expect_navigation():
        page.click("#settings-form button[type=submit]")
    assert page.inner_text("#settings-saved") == "Saved." and "Entity-pair classifier, v2" in page.inner_text("#method")

    # a rejected upload through the form stays in the team's upload history with its located diagnostics
    from django.core.management import call_command

    bad = tmp_path / "bad-run.jsonl"
    bad.write_text('{"doc": "No_such_document", "subject": {"start": 0, "end": 4}, "predicate": "P17", '
                   '"object": {"start": 10, "end": 14}}\n')
    page.goto(f"{base}/submissions/new/")
    page.select_option("#id_corpus", corpus.name)
    page.set_input_files("#id_file", str(bad))
    page.click("#upload-submit")
    page.wait_for_url("**/submissions/uploads/**")
    call_command("db_worker", batch=True, startup_delay=False, interval=0)
    page.goto(f"{base}/submissions/uploads/")
    row = page.locator("#upload-history tr[data-state=rejected]")
    assert row.count() == 1 and "bad-run.jsonl" in row.inner_text()
    row.locator("summary").click()
    assert "bad-run.jsonl:1:29: UP107 'subject' needs 'entity'" in row.inner_text()  # line 1, column 29: the key
    check_widths(page, f"{base}/submissions/uploads/", "upload_history", shots)
    check_widths(page, f"{base}/submissions/", "submissions", shots)

    # an organiser sees the command-line hint on the leaderboard; visitors never do
    page.goto(f"{base}/accounts/login/")
    with page.expect_navigation():
        page.click("header button.link")
    sign_in(page, base, "org", "pw-org-1234")
    page.goto(lb + "?level=entity")
    assert "unpooled evaluate --corpus" in page.inner_text("#organiser-hint")


PR_SPREAD = """() => {
    const svg = document.querySelector('#pr-chart svg') || document.querySelector('#pr-chart');
    const w = svg.viewBox.baseVal.width || svg.width.baseVal.value;
    const xs = [];
    svg.querySelectorAll('g.items line').forEach(l => xs.push(l.x1.baseVal.value, l.x2.baseVal.value));
    return (Math.max(...xs) - Math.min(...xs)) / (w - 84);
}"""


def test_the_pr_chart_zooms_to_low_recalls(page, live_server, board):
    """UX review #7 in Chromium: with recalls of 0.01-0.06 (and their truth) the P-R chart's recall axis zooms to
    them, so the systems' intervals fill most of the plot's width instead of one corner of [0, 1]; 0.05 of it on
    a fixed 0-1 axis."""
    corpus, a, b = board
    for sub, r in ((a, 0.012), (b, 0.045)):
        s = Score.objects.filter(submission=sub, level="instance").latest("id")
        s.details = {**s.details, "truth": {**s.details["truth"], "r": r + 0.003}}
        s.r, s.r_lo, s.r_hi = r, r - 0.008, r + 0.012
        s.save(update_fields=["details", "r", "r_lo", "r_hi"])
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/corpora/{corpus.name}/leaderboard/")
    assert page.evaluate(PR_SPREAD) > 0.5
