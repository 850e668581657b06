"""Evaluation periods and the human reference in Chromium: the leaderboard's period selector, frozen scores, the
human reference's marked row, the organiser's periods page (open, close, next period) at 1280 and 390 px."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

SHOTS = Path(os.environ.get("UNPOOLED_SHOTS") or tempfile.mkdtemp(prefix="unpooled-shots-"))


def _setup():
    from django.contrib.auth import get_user_model

    from unpooled.service.accounts.actions import do_set_role
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.evaluations import periods
    from unpooled.service.evaluations.models import Score
    from unpooled.service.submissions.actions import do_ingest_submission
    from unpooled.service.submissions.models import REFERENCE_TEAM, Submission, Team

    from ..conftest import FIXTURES, scratch
    from ..service.test_api import kb_text

    corpus = do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")
    olga = get_user_model().objects.create_user("olga", password="pw-olga-123")
    do_set_role(olga, "organiser")

    def sub(team, run, f1):
        path = scratch(f"{run}.kb")
        path.write_text(kb_text(run))
        s = do_ingest_submission(path, "fixture", team, run, "tac").submission
        Score.objects.create(submission=s, level="instance", estimator="joint", p=f1, p_lo=f1 - .1, p_hi=f1 + .1,
                             r=f1, r_lo=f1 - .1, r_hi=f1 + .1, f1=f1, f1_lo=f1 - .1, f1_hi=f1 + .1, draws=50)
        Submission.objects.filter(pk=s.pk).update(status=Submission.Status.PUBLISHED)
        return s

    p1 = periods.do_open_period(olga, corpus, title="spring")
    sub("red", "a", 0.6)
    sub("blue", "b", 0.5)
    periods.do_close_period(olga, p1)
    periods.do_open_period(olga, corpus, title="summer", follows=p1)
    sub("green", "c", 0.7)
    # a reference row as the reference module stores it (its estimation is tested in tests/service/test_reference.py)
    ref = Submission.objects.create(corpus=corpus, team=Team.objects.get_or_create(name=REFERENCE_TEAM)[0],
                                    run_id="exhaustive-annotation", format="exhaustive", is_reference=True,
                                    file_sha256="x", status=Submission.Status.PUBLISHED)
    Score.objects.create(submission=ref, level="instance", estimator="reference/capture", p=0.95, p_lo=0.9,
                         p_hi=0.98, r=0.8, r_lo=0.7, r_hi=0.88, f1=0.87, f1_lo=0.8, f1_hi=0.92, draws=200)
    return corpus


def _shots(page, name):
    for w in (1280, 390):
        page.set_viewport_size({"width": w, "height": 900})
        page.screenshot(path=str(SHOTS / f"{name}-{w}.png"), full_page=True)


def test_leaderboard_periods_and_human_reference(page, live_server):
    _setup()
    base = live_server.url
    page.goto(f"{base}/corpora/fixture/leaderboard/")
    assert page.locator("#period-selector").is_visible()
    rows = page.locator("#leaderboard tr")
    assert rows.count() == 5  # header, three systems, the human reference
    human = page.locator("#leaderboard tr.reference")
    assert human.count() == 1 and "human reference" in human.inner_text()
    assert "frozen at" in page.inner_text("#leaderboard")
    _shots(page, "leaderboard-overall")
    page.click("#period-selector >> text=1 (spring)")
    page.wait_for_url(f"{base}/corpora/fixture/leaderboard/?level=instance&period=1")
    text = page.inner_text("#leaderboard")
    assert "red/a" in text and "blue/b" in text and "human reference" in text
    assert "green/c" not in text and "Its scores are frozen" in page.inner_text("#period-state")
    _shots(page, "leaderboard-period1")


def test_organiser_periods_page(page, live_server):
    _setup()
    base = live_server.url
    page.goto(f"{base}/accounts/login/?next=/organiser/periods/%3Fcorpus%3Dfixture")
    page.fill("#id_username", "olga")
    page.fill("#id_password", "pw-olga-123")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.goto(f"{base}/organiser/periods/?corpus=fixture")
    assert page.locator("#close-period").is_visible() and page.locator("#periods").is_visible()
    _shots(page, "organiser-periods-open")
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))  # the first time, think again
    page.click("#close-period button")
    assert asked and "uploads to fixture are refused until a new period opens" in asked[0]
    assert page.locator("#close-period").is_visible()  # still open
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.click("#close-period button")
    assert "is closed" in page.inner_text("body")
    assert page.locator("#open-period").is_visible() and page.locator(".next-period").count() == 1
    _shots(page, "organiser-periods-closed")
    print(f"screenshots in {SHOTS}")
