"""Evaluation periods: who opens and closes them, the period of an upload, frozen scores, leaderboards per period,
a period's release, the next period on a new corpus (unpooled.service.evaluations.periods)."""

from __future__ import annotations

import io
import json
import threading
import zipfile

import pytest
from django.test import Client
from django.urls import reverse

from unpooled.service.annotation.models import Label
from unpooled.service.corpora.actions import ActionError, do_load_corpus
from unpooled.service.corpora.models import Period
from unpooled.service.evaluations import periods
from unpooled.service.evaluations.leaderboard import leaderboard
from unpooled.service.evaluations.models import Draw, Score, ScoreSnapshot
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import Submission, UploadAttempt

from ..conftest import FIXTURES, load_redocred_subset, scratch
from .test_api import auth, is_error, kb_text, people, publish, score  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db
S = Submission.Status


@pytest.fixture
def corpus():
    """The TAC-format fixture corpus (Cold Start KB and its sources)."""
    return do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")


def ingest(team: str, run: str, corpus: str = "fixture"):
    path = scratch(f"{team}-{run}.kb")
    path.write_text(kb_text(run))
    res = do_ingest_submission(path, corpus, team, run, "tac")
    assert res.ok, res.report.to_dict()
    return res.submission


def test_a_submission_belongs_to_the_period_open_at_upload_and_uploads_between_periods_are_refused(corpus, people):
    olga = people["olga"]
    before = ingest("red", "r0")
    assert before.period is None  # the corpus never had a period: uploads are taken outside periods
    p1 = periods.do_open_period(olga, corpus, title="spring")
    assert (p1.number, p1.title, p1.is_open) == (1, "spring", True)
    sub = ingest("red", "r1")
    assert sub.period == p1
    periods.do_close_period(olga, p1)
    n = Submission.objects.count()
    path = scratch("late.kb")
    path.write_text(kb_text("late"))
    with pytest.raises(ActionError, match=r"corpus 'fixture' takes no submissions now: its evaluation period 1 "
                                          r"closed on .* no new period is open"):
        do_ingest_submission(path, "fixture", "red", "late", "tac")
    assert Submission.objects.count() == n  # nothing stored
    # the API refuses at once, before the upload is queued
    c = Client()
    resp = c.post("/api/submissions", {"corpus": "fixture", "run": "late", "format": "tac",
                                       "file": io.BytesIO(kb_text("late").encode())}, **auth(people["red"]))
    body = is_error(resp, 409, "period_closed")
    assert "evaluation period 1 closed" in body["message"]
    # the upload page says so before anyone uploads, and its form refuses at once (UX review #9: the refusal came
    # after the upload, and nothing said the corpus was closed)
    web = Client()
    web.force_login(people["alice"])
    form_page = web.get(reverse("web:upload")).content.decode()
    assert 'id="closed-corpora"' in form_page and "fixture" in form_page.split('id="closed-corpora"')[1][:200]
    attempts = UploadAttempt.objects.count()
    r = web.post(reverse("web:upload"), {"corpus": "fixture", "run": "late", "format": "tac", "visibility": "public",
                                         "file": io.BytesIO(kb_text("late").encode())})
    assert "takes no submissions now" in r.content.decode()
    assert UploadAttempt.objects.count() == attempts  # nothing stored, nothing queued
    p2 = periods.do_open_period(olga, corpus, follows=p1)
    assert p2.number == 2 and ingest("red", "r2").period == p2


def test_one_open_period_per_corpus_and_clear_refusals(corpus, people):
    olga = people["olga"]
    p1 = periods.do_open_period(olga, corpus)
    with pytest.raises(periods.PeriodError, match="already has an open period \\(1, opened"):
        periods.do_open_period(olga, corpus)
    with pytest.raises(periods.PeriodError, match="still open: its annotated data is released once it closes"):
        periods.do_release_period(olga, p1, io.BytesIO())
    with pytest.raises(periods.PeriodError, match="title: at most 200 characters, got 201"):
        periods.check_open_period(olga, corpus, title="x" * 201)
    periods.do_close_period(olga, p1)
    with pytest.raises(periods.PeriodError, match="fixture period 1 closed on .* already"):
        periods.do_close_period(olga, p1)
    with pytest.raises(periods.PeriodError, match="has no period 7 \\(its periods: 1\\)"):
        periods.get_period(corpus, 7)


def test_participants_annotators_and_anonymous_users_may_not_open_close_or_release(corpus, people):
    from django.contrib.auth.models import AnonymousUser

    p = periods.do_open_period(people["olga"], corpus)
    for who, code in ((AnonymousUser(), "unauthenticated"), (people["alice"], "forbidden"),
                      (people["anna"], "forbidden")):
        with pytest.raises(periods.PeriodError) as err:
            periods.do_close_period(who, p)
        assert err.value.code == code
        with pytest.raises(periods.PeriodError):
            periods.do_open_period(who, corpus)
    assert Period.objects.get(pk=p.pk).is_open
    # the API: anonymous 401, a team's token 403, an annotator's session 403; organisers may
    anon, red = Client(), Client()
    is_error(anon.post("/api/corpora/fixture/periods/1/close"), 401, "unauthenticated")
    is_error(red.post("/api/corpora/fixture/periods/1/close", **auth(people["red"])), 403, "forbidden")
    is_error(red.post("/api/corpora/fixture/periods", data={"title": "x"}, content_type="application/json",
                      **auth(people["red"])), 403, "forbidden")
    is_error(red.get("/api/corpora/fixture/periods/1/release", **auth(people["red"])), 403, "forbidden")
    annotator = Client()
    annotator.force_login(people["anna"])
    is_error(annotator.post("/api/corpora/fixture/periods/1/close"), 403, "forbidden")
    # the console: anonymous users sign in first, others get 403, and nothing changed
    assert anon.get("/organiser/periods/?corpus=fixture").status_code == 302
    assert anon.post(f"/organiser/periods/{p.pk}/close/").status_code == 302
    assert annotator.get("/organiser/periods/?corpus=fixture").status_code == 403
    assert annotator.post(f"/organiser/periods/{p.pk}/close/").status_code == 403
    alice = Client()
    alice.force_login(people["alice"])
    assert alice.post("/organiser/periods/open/", {"corpus": "fixture"}).status_code == 403
    assert alice.get(f"/organiser/periods/{p.pk}/release/").status_code == 403
    assert Period.objects.get(pk=p.pk).is_open and Period.objects.count() == 1
    # the public may list periods
    got = anon.get("/api/corpora/fixture/periods").json()
    assert [(i["number"], i["open"], i["closed"]) for i in got["items"]] == [(1, True, None)]


def test_organiser_console_and_api_run_periods_end_to_end(corpus, people):
    olga = Client()
    olga.force_login(people["olga"])
    page = olga.get("/organiser/periods/?corpus=fixture")
    assert page.status_code == 200 and b"has never had a period" in page.content and b'id="open-period"' in page.content
    resp = olga.post("/organiser/periods/open/", {"corpus": "fixture", "title": "first"})
    assert resp.status_code == 302
    p = Period.objects.get(corpus=corpus)
    page = olga.get("/organiser/periods/?corpus=fixture")
    assert b"is open since" in page.content and b'id="close-period"' in page.content
    sub = ingest("red", "r1")
    score(sub, f1=0.7, lo=0.6, hi=0.8)
    publish(sub)
    assert olga.post(f"/organiser/periods/{p.pk}/close/").status_code == 302
    p.refresh_from_db()
    assert not p.is_open and ScoreSnapshot.objects.filter(period=p, submission=sub).count() == 1
    page = olga.get("/organiser/periods/?corpus=fixture").content.decode()
    assert "Start the next period" in page and "release (.zip)" in page
    # the next period on a new corpus
    do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture-2", schema="tac-kbp")
    assert olga.post("/organiser/periods/open/", {"corpus": "fixture-2", "follows": str(p.pk)}).status_code == 302
    nxt = Period.objects.get(corpus__name="fixture-2")
    assert nxt.follows == p and nxt.number == 1
    got = Client().get("/api/corpora/fixture-2/periods").json()["items"][0]
    assert got["follows"] == {"corpus": "fixture", "number": 1}
    # the API: an organiser's session opens and closes
    resp = olga.post("/api/corpora/fixture/periods", data=json.dumps({"title": "second"}),
                     content_type="application/json")
    assert resp.status_code == 201 and resp.json()["number"] == 2 and resp.json()["open"]
    is_error(olga.post("/api/corpora/fixture/periods", data=json.dumps({}), content_type="application/json"),
             409, "conflict")
    resp = olga.post("/api/corpora/fixture/periods/2/close")
    assert resp.status_code == 200 and resp.json()["closed"]
    is_error(olga.post("/api/corpora/fixture/periods/2/close"), 409, "conflict")
    is_error(olga.post("/api/corpora/fixture/periods/9/close"), 404, "not_found")


def test_leaderboards_per_period_and_overall_and_frozen_scores_say_so(corpus, people):
    olga = people["olga"]
    p1 = periods.do_open_period(olga, corpus)
    a = ingest("red", "a")
    score(a, f1=0.6, lo=0.5, hi=0.7)
    publish(a)
    periods.do_close_period(olga, p1)
    frozen_score = Score.objects.get(submission=a)
    p2 = periods.do_open_period(olga, corpus)
    b = ingest("blue", "b")
    score(b, f1=0.8, lo=0.7, hi=0.9)
    publish(b)
    overall = leaderboard(corpus)
    assert [r["name"] for r in overall["rows"]] == ["blue/b", "red/a"]
    first = leaderboard(corpus, period=p1)
    assert [r["name"] for r in first["rows"]] == ["red/a"] and first["rows"][0]["frozen"] is not None
    assert first["period"]["number"] == 1 and not first["period"]["open"]
    second = leaderboard(corpus, period=p2)
    assert [r["name"] for r in second["rows"]] == ["blue/b"] and second["rows"][0]["frozen"] is None
    # a later score of a frozen submission (a stray write) does not reach the boards: the snapshot does
    Score.objects.create(submission=a, level="instance", estimator="joint", f1=0.1, f1_lo=0.0, f1_hi=0.2)
    row = leaderboard(corpus, period=p1)["rows"][0]
    assert row["score"].id == frozen_score.id and row["score"].f1 == 0.6
    # the page and the API say "frozen at"
    c = Client()
    page = c.get("/corpora/fixture/leaderboard/?period=1").content.decode()
    assert "frozen at" in page and 'id="period-selector"' in page and "Its scores are <strong>frozen</strong>" in page
    assert "red/a" in page and "blue/b" not in page
    assert c.get("/corpora/fixture/leaderboard/?period=5").status_code == 404
    api = c.get("/api/corpora/fixture/leaderboard?period=1").json()
    assert api["period"] == 1 and api["rows"][0]["frozen"] and api["rows"][0]["score"]["frozen"]
    assert api["rows"][0]["score"]["f1"] == 0.6
    is_error(c.get("/api/corpora/fixture/leaderboard?period=5"), 404, "not_found")
    scores = c.get(f"/api/submissions/{a.pk}/scores").json()["scores"]["instance"]
    assert scores["id"] == frozen_score.id and scores["frozen"]
    assert c.get(f"/api/submissions/{b.pk}/scores").json()["scores"]["instance"]["frozen"] is None
    page = c.get(f"/submissions/{a.pk}/").content.decode()
    assert "frozen at" in page and "0.600" in page and "0.100" not in page
    assert "frozen at" not in c.get(f"/submissions/{b.pk}/").content.decode()


def test_a_period_release_holds_the_labels_of_its_submissions_only(corpus, people):
    from datetime import timedelta

    olga = people["olga"]
    p1 = periods.do_open_period(olga, corpus)
    a, late = ingest("red", "a"), ingest("red", "late")

    def draw_and_label(sub, inst, correct=True, seq=1):
        Draw.objects.create(submission=sub, level="instance", seq=seq, instance=inst, key=inst.key,
                            key_hash=inst.key_hash)
        return Label.objects.create(corpus=corpus, key=inst.key, key_hash=inst.key_hash, probability=1.0,
                                    correct=correct, method="majority", n_answers=3, guideline_version="1")

    ia, il = a.instances.order_by("pk")[0], late.instances.order_by("pk")[1]
    draw_and_label(a, ia)
    periods.do_close_period(olga, p1)
    periods.do_open_period(olga, corpus)
    b = ingest("blue", "b")
    ib = b.instances.order_by("-pk")[0]
    assert len({ia.key, il.key, ib.key}) == 3
    draw_and_label(b, ib)
    # after the close: a newer label of a's key, and a label of a key of `late`, a run of period 1 still being
    # evaluated at the close; it is frozen when published, an hour later
    frozen_at = p1.closed + timedelta(hours=1)
    relabel = Label.objects.create(corpus=corpus, key=ia.key, key_hash=ia.key_hash, probability=0.0, correct=False,
                                   method="majority", n_answers=5, guideline_version="1")
    Label.objects.filter(pk=relabel.pk).update(created=frozen_at + timedelta(minutes=1))
    lab = draw_and_label(late, il, seq=2)
    Label.objects.filter(pk=lab.pk).update(created=frozen_at - timedelta(minutes=1))
    ScoreSnapshot.objects.create(period=p1, submission=late, level="instance", score=score(late), frozen=frozen_at)
    out = io.BytesIO()
    name, counts = periods.do_release_period(olga, p1, out)
    assert name.startswith("unpooled-release-fixture-period1-") and counts.period == 1
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as zf:
        labels = [json.loads(x) for x in zf.read(f"{name}/labels.jsonl").decode().splitlines()]
        readme = zf.read(f"{name}/README.md").decode()
    # cut at the period's last frozen score: the label `late`'s frozen score used is in, the newer row of a's
    # key (after every frozen score of the period) is not, so a's label is the one its frozen score used
    assert [(x["key"], x["correct"], x["superseded"]) for x in labels] == [(ia.key, True, False),
                                                                            (il.key, True, False)]
    assert counts.as_of == frozen_at.isoformat(timespec="seconds")
    assert "evaluation period 1" in readme and "only private submissions drew is not released" in readme
    assert f"as they stood at {counts.as_of}" in readme
    assert Period.objects.get(pk=p1.pk).released is not None
    # the organiser's download
    c = Client()
    c.force_login(olga)
    resp = c.get("/api/corpora/fixture/periods/1/release")
    assert resp.status_code == 200 and resp["Content-Type"] == "application/zip"
    is_error(c.get("/api/corpora/fixture/periods/2/release"), 409, "conflict")


def test_a_run_of_a_closed_period_keeps_its_visibility_but_for_organisers(corpus, people):
    """Security review N11: after its period closed (its scores frozen), a team revealed a private run (and could
    have kept several and revealed the best).  Refused by the API (409) and the page's form (400); organisers may."""
    from django.urls import reverse

    olga = people["olga"]
    p1 = periods.do_open_period(olga, corpus)
    run = ingest("red", "hidden")
    Submission.objects.filter(pk=run.pk).update(visibility=Submission.Visibility.PRIVATE)
    api = Client()
    url = f"/api/submissions/{run.pk}"
    # while the period is open the team may change it (and back)
    for vis in ("public", "private"):
        r = api.patch(url, {"visibility": vis}, content_type="application/json", **auth(people["red"]))
        assert r.status_code == 200 and r.json()["visibility"] == vis
    periods.do_close_period(olga, p1)
    body = is_error(api.patch(url, {"visibility": "public"}, content_type="application/json", **auth(people["red"])),
                    409, "conflict")
    assert "belongs to evaluation period 1, which closed on" in body["message"]
    # the description may still change; the visibility is left as it was
    r = api.patch(url, {"description": "our best run"}, content_type="application/json", **auth(people["red"]))
    assert r.status_code == 200
    web = Client()
    web.force_login(people["alice"])
    r = web.post(reverse("web:submission_settings", args=[run.pk]), {"visibility": "public", "description": "",
                                                                    "link": ""})
    assert r.status_code == 400 and "which closed on" in r.content.decode()
    assert Submission.objects.get(pk=run.pk).visibility == Submission.Visibility.PRIVATE
    staff = Client()
    staff.force_login(olga)
    r = staff.patch(url, {"visibility": "public"}, content_type="application/json")
    assert r.status_code == 200 and r.json()["visibility"] == "public"


def test_a_period_release_holds_nothing_only_private_submissions_drew(corpus, people):
    """Security review N2: a private run's sampled instances and their labels are that team's; a release is public.
    A key a public run drew too is released (its label is the public run's as much as the private one's)."""
    olga = people["olga"]
    p1 = periods.do_open_period(olga, corpus)
    public = ingest("red", "pub")
    private = ingest("blue", "priv")
    Submission.objects.filter(pk=private.pk).update(visibility=Submission.Visibility.PRIVATE)
    mine, shared = private.instances.order_by("pk")[:2]
    theirs = public.instances.get(key=shared.key)
    public.instances.filter(key=mine.key).delete()  # both runs are the fixture's KB: the public one lacks this key
    for seq, (sub, inst) in enumerate(((private, mine), (private, shared), (public, theirs)), 1):
        Draw.objects.create(submission=sub, level="instance", seq=seq, instance=inst, key=inst.key,
                            key_hash=inst.key_hash)
    for inst in (mine, shared):
        Label.objects.create(corpus=corpus, key=inst.key, key_hash=inst.key_hash, probability=1.0, correct=True,
                             method="majority", n_answers=3, guideline_version="1")
    periods.do_close_period(olga, p1)
    out = io.BytesIO()
    name, _ = periods.do_release_period(olga, p1, out)
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as zf:
        released = [json.loads(x)["key"] for x in zf.read(f"{name}/labels.jsonl").decode().splitlines()]
    assert released == [shared.key]


@pytest.mark.engine_neutral
def test_closing_freezes_scores_that_later_labels_would_move(shared_data, tmp_path):
    """End to end on a Re-DocRED subset with the simulated crowd: a period's submission is scored, the period
    closes, a submission of the next period brings new labels and re-scores the corpus: the frozen one's published
    scores (its entity scores too, and the truth beside them) stay the snapshot, the one outside periods moves."""
    from django.contrib.auth import get_user_model

    from unpooled.service.accounts.actions import do_set_role
    from unpooled.service.annotation import actions as ann
    from unpooled.service.annotation.models import AnnotationSettings, Backend
    from unpooled.service.evaluations import lifecycle, publish, status
    from unpooled.service.evaluations.models import EntityScore
    from unpooled.service.evaluations.truth import attach_truth

    from .test_annotation_e2e import _system_jsonl

    olga = get_user_model().objects.create_user("olga", password="x")
    do_set_role(olga, "organiser")
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 20, "periods", team="DocRED-original", run="hwe")
    st = ann.settings_for(corpus)
    st.backend, st.exhaustive_documents, st.min_draws, st.max_draws = Backend.SIMULATED, 5, 20, 40
    st.levels = "instance"
    st.save()
    assert hwe.period is None
    p1 = periods.do_open_period(olga, corpus)
    half = tmp_path / "half.jsonl"
    _system_jsonl(path, half, rng=5, keep=0.5)
    a = do_ingest_submission(half, "periods", "half", "r1", "jsonl").submission
    assert a.period == p1
    assert lifecycle.advance(hwe) == S.PUBLISHED and lifecycle.advance(a) == S.PUBLISHED
    n_entity = EntityScore.objects.filter(submission=a).latest("id").pk
    assert periods.do_close_period(olga, p1) == 2  # a's instance and entity scores; hwe is outside periods
    snap = ScoreSnapshot.objects.get(submission=a, level="instance")
    n_hwe = Score.objects.filter(submission=hwe).count()
    periods.do_open_period(olga, corpus)
    other = tmp_path / "other.jsonl"
    _system_jsonl(path, other, rng=9, keep=0.6)
    b = do_ingest_submission(other, "periods", "other", "r1", "jsonl").submission
    assert lifecycle.advance(b) == S.PUBLISHED
    assert Score.objects.filter(submission=hwe).count() > n_hwe  # the new labels re-scored the others
    assert Score.objects.filter(submission=a, level="instance").latest("id").pk == snap.score_id  # not a
    assert status.newest_scores(a)["instance"].pk == snap.score_id
    row = next(r for r in leaderboard(corpus)["rows"] if r["submission"].pk == a.pk)
    assert row["score"].id == snap.score_id and row["frozen"] == snap.frozen
    # its entity scores too: frozen at the close, not written again by b's re-scorings
    entity_snap = ScoreSnapshot.objects.get(submission=a, level="entities")
    assert EntityScore.objects.filter(submission=a).latest("id").pk == entity_snap.entity_score_id == n_entity
    # and the truth beside its frozen score (a demo's oracle column: page, API and CSV read it from the score) keeps
    # the value it was frozen with, even when a truth computed now differs (the recall protocol changed)
    frozen_truth = Score.objects.get(pk=snap.score_id).details["truth"]
    AnnotationSettings.objects.filter(corpus=corpus).update(recall_protocol="document")
    rows = [publish.leaderboard_row(Score.objects.get(pk=snap.score_id))]
    attach_truth(corpus, rows, level="instance")
    assert rows[0]["r_true"] != frozen_truth["r"]  # the truth computed now is another one
    assert Score.objects.get(pk=snap.score_id).details["truth"] == frozen_truth
    csv = Client().get("/corpora/periods/leaderboard.csv?period=1").content.decode().splitlines()
    head, line = csv[0].split(","), csv[1].split(",")
    assert float(line[head.index("r_true")]) == pytest.approx(frozen_truth["r"])
    api = Client().get("/api/corpora/periods/leaderboard?period=1").json()["rows"][0]["score"]
    assert api["details"]["truth"]["r"] == pytest.approx(frozen_truth["r"])


def test_human_reference_button_is_for_organisers_and_says_when_there_is_nothing_to_score(corpus, people):
    anon, alice, olga = Client(), Client(), Client()
    alice.force_login(people["alice"])
    olga.force_login(people["olga"])
    assert anon.post("/organiser/reference/", {"corpus": "fixture"}).status_code == 302
    assert alice.post("/organiser/reference/", {"corpus": "fixture"}).status_code == 403
    resp = olga.post("/organiser/reference/", {"corpus": "fixture"}, follow=True)
    assert "has no completely annotated exhaustive document yet" in resp.content.decode()
    assert not Submission.objects.filter(is_reference=True).exists()
    page = olga.get("/organiser/periods/?corpus=fixture").content.decode()
    assert 'id="reference-form"' in page and "Score the human reference" in page


def test_the_api_names_a_submissions_period(corpus, people):
    p = periods.do_open_period(people["olga"], corpus)
    sub = ingest("red", "r1")
    got = Client().get(f"/api/submissions/{sub.pk}").json()
    assert got["period"] == p.number and got["reference"] is False


@pytest.mark.django_db(transaction=True)
def test_a_period_closed_during_a_rescoring_freezes_what_the_rescoring_publishes(shared_data, tmp_path, monkeypatch):
    """A close landing between the re-scoring's reading of the frozen levels and its writing of the scores left a
    score newer than the snapshot (and the snapshot's covariances wiped as superseded).  The close now waits for the
    re-scoring's transaction (the open period's row is locked), then freezes what it published.  PostgreSQL:
    two connections at once."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from unpooled.service.accounts.actions import do_set_role
    from unpooled.service.annotation import actions as ann
    from unpooled.service.annotation.models import Backend
    from unpooled.service.evaluations import lifecycle, publish

    from .test_annotation_e2e import _system_jsonl

    if connection.vendor != "postgresql":
        pytest.skip("two connections writing at once: PostgreSQL")
    olga = get_user_model().objects.create_user("olga", password="x")
    do_set_role(olga, "organiser")
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 20, "race", team="DocRED-original", run="hwe")
    st = ann.settings_for(corpus)
    st.backend, st.exhaustive_documents, st.min_draws, st.max_draws = Backend.SIMULATED, 5, 20, 40
    st.levels = "instance"
    st.save()
    p1 = periods.do_open_period(olga, corpus)
    half = tmp_path / "half.jsonl"
    _system_jsonl(path, half, rng=5, keep=0.5)
    a = do_ingest_submission(half, "race", "half", "r1", "jsonl").submission
    assert lifecycle.advance(hwe) == S.PUBLISHED and lifecycle.advance(a) == S.PUBLISHED
    Score.objects.filter(submission=a).update(breakdown=None)  # the re-scoring below then writes a new score
    original, closer = publish._unchanged, []

    def close_meanwhile(*args, **kw):
        _close_from_another_connection(olga, p1, closer)  # the old code: closed (and frozen) before the scores
        return original(*args, **kw)                      # below are written

    monkeypatch.setattr(publish, "_unchanged", close_meanwhile)
    publish.score_corpus(corpus, level="instance")
    closer[0].join(timeout=60)
    assert not closer[0].is_alive()
    snap = ScoreSnapshot.objects.get(submission=a, level="instance")
    newest = Score.objects.filter(submission=a, level="instance").latest("id")
    assert newest.pk == snap.score_id  # what is published is what is frozen
    assert newest.paired  # and its covariances with the others are kept


def _answer_clusters_and_rescore(corpus):
    """The cross-document clustering task of :func:`.test_entity_scores.tac_world` answered (Lucasfilm and the
    Thalians apart), then the corpus re-scored: every submission's NIL scores are then across documents."""
    from unpooled.service.annotation import actions, leasing
    from unpooled.service.annotation.models import Annotator, Kind
    from unpooled.service.evaluations import publish

    for ann in Annotator.objects.filter(external_id__startswith="tac-"):
        lease = leasing.lease_next(ann, kind=Kind.CLUSTERS, corpus=corpus)
        actions.submit_answer(lease, {"groups": [[0], [1]]})
    publish.rescore(corpus)


def test_a_closed_periods_entity_scores_are_frozen_and_the_entity_board_shows_one_period(people):
    """A closed period's entity scores kept moving (entities.compute wrote a new EntityScore for its submissions
    after the close) and the entity board ignored ?period= (200 to any number, every period's rows).  They are now
    frozen with the other levels (ScoreSnapshot, level 'entities') and the board (page, API) shows one period's."""
    from unpooled.service.evaluations import entities
    from unpooled.service.evaluations.models import EntityScore

    from ..conftest import FIXTURES
    from .test_entity_scores import tac_world

    olga = people["olga"]
    corpus, a = tac_world("tacp")
    p1 = periods.do_open_period(olga, corpus)
    Submission.objects.filter(pk=a.pk).update(period=p1, status=S.PUBLISHED)  # a's upload, in period 1
    before = EntityScore.objects.filter(submission=a).latest("id")
    assert before.details["nil_across_documents"] is False
    periods.do_close_period(olga, p1)
    p2 = periods.do_open_period(olga, corpus)
    b = do_ingest_submission(FIXTURES / "kb" / "coldstart.kb", "tacp", "team-b", None, "tac").submission
    Submission.objects.filter(pk=b.pk).update(status=S.PUBLISHED)
    _answer_clusters_and_rescore(corpus)  # the NIL figures now across documents: b's move, a's stay frozen
    assert EntityScore.objects.filter(submission=b).latest("id").details["nil_across_documents"] is True
    assert EntityScore.objects.filter(submission=a).latest("id").pk == before.pk
    snap = ScoreSnapshot.objects.get(submission=a, level="entities")
    assert snap.entity_score_id == before.pk and snap.score_id is None
    got = entities.newest(a)
    assert got.pk == before.pk and got.frozen == snap.frozen
    # a stray later row (not the re-scoring's) does not reach the pages either: the snapshot does
    EntityScore.objects.create(submission=a, level="instance", details={"metrics": {}})
    assert entities.newest(a).pk == before.pk

    def names(board):
        return [(r["name"], r["entity"].pk, r["frozen"]) for r in board["rows"]]

    assert names(entities.leaderboard(corpus, period=p1)) == [("team-a/" + a.run_id, before.pk, snap.frozen)]
    assert [n for n, _, f in names(entities.leaderboard(corpus, period=p2))] == ["team-b/" + b.run_id]
    assert len(entities.leaderboard(corpus)["rows"]) == 2
    c = Client()
    page = c.get("/corpora/tacp/leaderboard/entities/?period=1").content.decode()
    assert "team-a/" in page and "team-b/" not in page and "(frozen at" in page and 'id="period-selector"' in page
    assert "team-b/" in c.get("/corpora/tacp/leaderboard/entities/?period=2").content.decode()
    for bad in ("5", str(10**30), "x"):
        assert c.get(f"/corpora/tacp/leaderboard/entities/?period={bad}").status_code == 404
    api = c.get("/api/corpora/tacp/leaderboard/entities?period=1").json()
    assert api["period"] == 1 and [r["submission"] for r in api["rows"]] == [a.pk]
    assert api["rows"][0]["frozen"] and api["rows"][0]["entity_score"]["id"] == before.pk
    assert api["rows"][0]["entity_score"]["frozen"]
    is_error(c.get("/api/corpora/tacp/leaderboard/entities?period=5"), 404, "not_found")
    assert c.get(f"/api/corpora/tacp/leaderboard/entities?period={10**30}").status_code in (400, 422)
    mine = c.get(f"/api/submissions/{a.pk}/entity-scores").json()["entity_score"]
    assert mine["id"] == before.pk and mine["frozen"]
    assert c.get(f"/api/submissions/{b.pk}/entity-scores").json()["entity_score"]["frozen"] is None
    html = c.get(f"/submissions/{a.pk}/").content.decode()
    assert 'id="entity-frozen"' in html and 'id="entity-frozen"' not in c.get(f"/submissions/{b.pk}/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_period_closed_during_the_entity_scoring_freezes_what_it_publishes(monkeypatch):
    """The entity scores are written as the relation scores are (periods.frozen_writes): a close landing between
    the entity scoring's reading of the frozen levels and its writing waits for it (the open period's row is
    locked), then freezes what it wrote; without the lock the close froze the older row and a newer one followed.
    PostgreSQL: two connections at once."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from unpooled.service.accounts.actions import do_set_role
    from unpooled.service.annotation import actions, leasing
    from unpooled.service.annotation.models import Annotator, Kind
    from unpooled.service.evaluations import entities
    from unpooled.service.evaluations.models import EntityScore

    from .test_entity_scores import tac_world

    if connection.vendor != "postgresql":
        pytest.skip("two connections writing at once: PostgreSQL")
    olga = get_user_model().objects.create_user("olga", password="x")
    do_set_role(olga, "organiser")
    corpus, a = tac_world("tacrace")
    p1 = periods.do_open_period(olga, corpus)
    Submission.objects.filter(pk=a.pk).update(period=p1, status=S.PUBLISHED)
    for ann in Annotator.objects.filter(external_id__startswith="tac-"):  # what the next entity scoring changes
        actions.submit_answer(leasing.lease_next(ann, kind=Kind.CLUSTERS, corpus=corpus), {"groups": [[0], [1]]})
    original, closer = periods.frozen_levels, []

    def close_meanwhile(c):
        got = original(c)
        _close_from_another_connection(olga, p1, closer)  # without the lock: closed (and frozen) before the entity
        return got                                        # scores are written

    monkeypatch.setattr(periods, "frozen_levels", close_meanwhile)
    made = entities.compute(corpus)
    closer[0].join(timeout=60)
    assert not closer[0].is_alive() and [e.submission_id for e in made] == [a.pk]
    newest = EntityScore.objects.filter(submission=a).latest("id")
    assert newest.details["nil_across_documents"] is True
    assert ScoreSnapshot.objects.get(submission=a, level="entities").entity_score_id == newest.pk


def _close_from_another_connection(olga, period, closer: list) -> None:
    """Once (``closer`` empty): organiser ``olga`` closes ``period`` from another connection, in a thread appended to
    ``closer``, waited for up to 3 s (it waits longer while the caller holds the period's lock)."""
    if closer:
        return

    def close():
        from django.db import connection as theirs

        try:
            periods.do_close_period(olga, Period.objects.get(pk=period.pk))
        finally:
            theirs.close()

    closer.append(threading.Thread(target=close))
    closer[0].start()
    closer[0].join(timeout=3)
