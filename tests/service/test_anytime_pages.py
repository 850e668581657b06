"""Anytime-valid intervals in the service (core/estimators/anytime.py): stored beside the fixed-n ones, shown on the
leaderboard and the submission page with the About page's explanation, returned by the API, and the interval
``evaluate --target-width`` is met by."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from unpooled.core.errors import InvalidInputError
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.models import Submission

from ..conftest import load_redocred_subset
from .test_submission_page import world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def test_scores_store_anytime_intervals_holding_the_fixed_n_ones(world):
    corpus, a, b = world
    for s in Score.objects.filter(submission__corpus=corpus):
        cs = s.details["anytime"]
        assert cs["method"] == "normal-mixture" and cs["tight_at"] > 0
        for k in ("p", "r", "f1"):
            lo, hi = getattr(s, f"{k}_lo"), getattr(s, f"{k}_hi")
            assert cs[f"{k}_cs_lo"] <= lo + 1e-9 and hi <= cs[f"{k}_cs_hi"] + 1e-9
            assert cs[f"{k}_cs_hi"] - cs[f"{k}_cs_lo"] > hi - lo


def test_pages_show_both_intervals_and_the_about_page_says_why(world):
    corpus, a, b = world
    Submission.objects.filter(pk__in=[a.pk, b.pk]).update(status=Submission.Status.PUBLISHED)
    s = Score.objects.filter(submission=a, level="instance").latest("id")
    cs = s.details["anytime"]
    mark = f'<span class="ci">{s.f1_lo:.3f}–{s.f1_hi:.3f}</span><span class="ci cs"'
    html = Client().get(reverse("web:leaderboard", args=[corpus.name])).content.decode()
    assert mark in html and f"⟨{cs['f1_cs_lo']:.3f}–{cs['f1_cs_hi']:.3f}⟩" in html
    assert 'id="anytime-note"' in html and "#anytime" in html
    page = Client().get(reverse("web:submission", args=[a.pk])).content.decode()
    assert f"⟨{cs['p_cs_lo']:.3f}–{cs['p_cs_hi']:.3f}⟩" in page and "anytime-valid" in page
    about = Client().get(reverse("web:about_numbers")).content.decode()
    assert 'id="anytime"' in about and "confidence sequence" in about


def test_the_api_returns_them_with_the_scores(world):
    corpus, a, b = world
    Submission.objects.filter(pk__in=[a.pk, b.pk]).update(status=Submission.Status.PUBLISHED)
    got = Client().get(f"/api/submissions/{a.pk}/scores")
    assert got.status_code == 200, got.content
    inst = got.json()["scores"]["instance"]
    assert inst["details"]["anytime"]["f1_cs_lo"] <= inst["f1_lo"]


@pytest.mark.engine_neutral
def test_target_width_is_met_by_the_anytime_interval(shared_data, tmp_path):
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import SimulatedBackend
    from unpooled.service.evaluations.run import evaluate, f1_width

    _, sub, _ = load_redocred_subset(shared_data, tmp_path, 12, "evwidth")
    corpus = Corpus.objects.get(name="evwidth")
    with pytest.raises(InvalidInputError, match="width_of"):
        evaluate(corpus, crowd=SimulatedBackend(accuracy=1.0), labels=30, documents=4, target_width=0.5,
                 width_of="bootstrap")
    rep = evaluate(corpus, crowd=SimulatedBackend(accuracy=1.0), labels=30, documents=4, target_width=0.45,
                   max_labels=150, step=40)
    assert rep.width_of == "anytime"
    s = Score.objects.filter(submission=sub).latest("id")
    draws = Draw.objects.filter(submission=sub).count()
    assert f1_width(s, "anytime") <= 0.45 or draws >= 150
    assert f1_width(s, "anytime") > f1_width(s, "fixed-n")
    assert rep.rows[0]["f1_cs_lo"] == s.details["anytime"]["f1_cs_lo"]
    if rep.rounds > 1:  # it drew more because the anytime interval was wider than the target
        assert draws > 30


def test_the_live_status_page_shows_them_as_labels_arrive(world):
    corpus, a, b = world
    Submission.objects.filter(pk__in=[a.pk, b.pk]).update(status=Submission.Status.PUBLISHED)
    s = Score.objects.filter(submission=a, level="instance").latest("id")
    cs = s.details["anytime"]
    html = Client().get(reverse("web:status", args=[a.pk])).content.decode()
    assert f"⟨{cs['f1_cs_lo']:.3f}, {cs['f1_cs_hi']:.3f}⟩" in html and 'id="anytime-note"' in html
    got = Client().get(reverse("web:status_json", args=[a.pk])).json()
    assert got["scores"]["instance"]["anytime"]["f1_cs_hi"] == cs["f1_cs_hi"]
    assert f"⟨{cs['p_cs_lo']:.3f}, {cs['p_cs_hi']:.3f}⟩" in got["html"]
