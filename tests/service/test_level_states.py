"""Per-level progress in the submission lists (review defect 4): a published submission whose entity level has no
score yet does not say "scored and published"; each level's state comes from the plan, the draws and the scores."""

from __future__ import annotations

import pytest
from django.urls import reverse

from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.evaluations.status import level_states, progress, stage_summary
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import RelationInstance, Submission

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db

KB = FIXTURES / "kb" / "coldstart.kb"


@pytest.fixture
def corpus():
    return do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "fixture", schema="tac-kbp")


def _sub(team, *, status, plan, scored=(), drawn=(), kb=KB):
    sub = do_ingest_submission(kb, "fixture", team, None, "tac").submission
    Submission.objects.filter(pk=sub.pk).update(status=status, plan=plan)
    inst = RelationInstance.objects.filter(submission=sub).first()
    for i, lv in enumerate(drawn):
        Draw.objects.create(submission=sub, level=lv, seq=i, instance=inst, key="k", key_hash=1)
    for lv in scored:
        Score.objects.create(submission=sub, level=lv, estimator="joint", p=0.5, p_lo=0.4, p_hi=0.6)
    sub.refresh_from_db()
    return sub


PLAN = {"instance": {"draws": 5}, "relation": {"draws": 5}, "entity": {"draws": 5}, "labels": {"new": 3}}


def test_states_per_level(corpus):
    part = _sub("t-part", status="published", plan=PLAN, scored=("instance", "relation"),
                drawn=("instance", "relation", "entity"))
    full = _sub("t-full", status="published", plan={**PLAN, "entity": {"draws": 0, "reason": "no instances"}},
                scored=("instance", "relation"), drawn=("instance", "relation"))
    new = _sub("t-new", status="sampling", plan={"instance": {"draws": 5}})
    failed = _sub("t-failed", status="failed", plan={"instance": {"draws": 5}}, drawn=("instance",))
    got = level_states([part, full, new, failed])
    assert [(r["level"], r["state"]) for r in got[part.pk]] == [("instance", "scored"), ("relation", "scored"),
                                                                ("entity", "waiting")]
    assert [r["state"] for r in got[full.pk]] == ["scored", "scored", "none"]
    assert [r["state"] for r in got[new.pk]] == ["todo"]
    assert [r["state"] for r in got[failed.pk]] == ["failed"]
    assert stage_summary(part, got[part.pk]) == "published, partly scored"
    assert stage_summary(full, got[full.pk]) == "scored and published"
    assert stage_summary(new, got[new.pk]) == "sampling instances"
    from unpooled.service.evaluations.status import newest_scores

    assert list(newest_scores(part)) == ["instance", "relation"]  # in the levels' order, not the rows'
    p = progress(part)  # the status page and its JSON say the same
    assert p["status_label"] == "published, partly scored" and p["levels"] == got[part.pk]


def test_lists_show_levels_with_bounded_queries(corpus, client, django_assert_max_num_queries):
    part = _sub("t-part", status="published", plan=PLAN, scored=("instance", "relation"),
                drawn=("instance", "relation", "entity"))
    for url in (reverse("web:home"), reverse("web:submissions")):
        html = client.get(url).content.decode()
        assert "published, partly scored" in html and "scored and published</a>" not in html, url
        assert "instance ✓" in html and "relation ✓" in html and "entity: waiting for labels" in html, url
    st = client.get(reverse("web:status", args=[part.pk])).content.decode()
    assert "entity: waiting for labels" in st and "published, partly scored" in st
    js = client.get(reverse("web:status_json", args=[part.pk])).json()
    assert js["levels"][2] == {"level": "entity", "state": "waiting", "label": "waiting for labels"}

    def count(url):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    few = {u: count(u) for u in (reverse("web:home"), reverse("web:submissions"))}
    for i in range(6):  # more submissions, at several stages: the same number of queries
        _sub(f"t-{i}", status=("published", "annotating", "sampling")[i % 3], plan=PLAN,
             scored=("instance",) if i % 2 else (), drawn=("instance", "entity"))
    for url, n in few.items():
        with django_assert_max_num_queries(n):
            client.get(url)


def test_leaderboard_says_which_published_submissions_wait_at_its_level(corpus, client):
    _sub("t-part", status="published", plan=PLAN, scored=("instance", "relation"),
         drawn=("instance", "relation", "entity"))
    ent = client.get(reverse("web:leaderboard", args=["fixture"]) + "?level=entity").content.decode()
    assert "1 submission published, still waiting for labels at the entity level" in ent
    inst = client.get(reverse("web:leaderboard", args=["fixture"]) + "?level=instance").content.decode()
    assert "still waiting for labels at the" not in inst


def test_entity_tab_gives_the_cli_hint_to_organisers_only(corpus, client):
    """Review defect 4: an empty level told visitors to run `unpooled evaluate`, which starts an evaluation."""
    from django.contrib.auth.models import User

    url = reverse("web:leaderboard_entities", args=["fixture"])
    html = client.get(url).content.decode()
    assert 'id="no-entity-scores"' in html and "unpooled evaluate" not in html
    client.force_login(User.objects.create_user("boss", password="x-long-password", is_staff=True))
    assert "unpooled evaluate --corpus fixture" in client.get(url).content.decode()


def test_time_left_is_unknown_when_nobody_answers(corpus):
    """Review: "time left 17 s" was shown for an in-house queue nobody worked on."""
    from datetime import timedelta

    from django.utils import timezone

    from unpooled.service.annotation import actions, leasing
    from unpooled.service.annotation.models import Annotator, Answer, Task
    from unpooled.service.evaluations.status import IDLE_MINUTES

    sub = _sub("t-eta", status="annotating", plan={"instance": {"draws": 5}})
    ids = list(RelationInstance.objects.filter(submission=sub).values_list("pk", flat=True)[:3])
    actions.request_verification(sub, ids)
    ann = Annotator.objects.create(backend="inhouse", external_id="a1")
    actions.submit_answer(leasing.lease_next(ann, kind="verify"), {"relation": "holds", "subject_ok": True, "object_ok": True,
                                                                                 "link_ok": None})
    assert Task.objects.filter(requests__submission=sub, status="open").exists()
    assert progress(sub)["eta_seconds"] is not None  # somebody answered a moment ago: the pace gives a time
    Answer.objects.update(created=timezone.now() - timedelta(minutes=IDLE_MINUTES + 1))
    assert progress(sub)["eta_seconds"] is None


def test_account_page_shows_levels_with_bounded_queries(corpus, client, django_assert_max_num_queries, tmp_path):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from unpooled.service.accounts.actions import do_sign_up

    client.force_login(do_sign_up("member", "a-long-password", team="t-part"))
    _sub("t-part", status="published", plan=PLAN, scored=("instance", "relation"),
         drawn=("instance", "relation", "entity"))
    url = reverse("accounts:account")
    with CaptureQueriesContext(connection) as ctx:
        html = client.get(url).content.decode()
    assert "published, partly scored" in html and "entity: waiting for labels" in html
    for i in range(4):
        lines = KB.read_text().splitlines(keepends=True)
        (tmp_path / f"r{i}.kb").write_text(f"run{i}\n" + "".join(lines[1:]))  # another run: another submission
        _sub("t-part", status="published", plan=PLAN, scored=("instance",), drawn=("instance",), kb=tmp_path / f"r{i}.kb")
    assert Submission.objects.filter(team__name="t-part").count() == 5
    with django_assert_max_num_queries(len(ctx.captured_queries)):
        assert client.get(url).content.decode().count("instance ✓") == 5
