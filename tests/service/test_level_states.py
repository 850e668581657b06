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
    # scored while still waiting for labels (a label batch re-scores every submission with draws): not ✓
    waiting = _sub("t-waiting", status="annotating", plan=PLAN, scored=("instance", "relation"),
                   drawn=("instance", "relation", "entity"))
    got = level_states([part, full, new, failed, waiting])
    assert [r["state"] for r in got[waiting.pk]] == ["provisional", "provisional", "waiting"]
    assert stage_summary(waiting, got[waiting.pk]) == "waiting for labels; the scores so far are provisional"
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
    """Reviews: "time left 17 s", then "2 s", for an in-house queue nobody worked on (the second from the pace of a
    simulated crowd that had answered before the corpus moved to in-house annotators)."""
    from datetime import timedelta

    from django.utils import timezone

    from unpooled.service.annotation import actions, leasing
    from unpooled.service.annotation.models import Annotator, Answer, Assignment, Task
    from unpooled.service.evaluations.status import IDLE_MINUTES

    st = actions.settings_for(corpus)
    st.backend = "inhouse"
    st.save()
    sub = _sub("t-eta", status="annotating", plan={"instance": {"draws": 5}})
    ids = list(RelationInstance.objects.filter(submission=sub).values_list("pk", flat=True)[:3])
    actions.request_verification(sub, ids)
    verify = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}
    sim = Annotator.objects.create(backend="simulated", external_id="sim-1")
    actions.submit_answer(leasing.lease_next(sim, kind="verify"), verify)
    assert Task.objects.filter(requests__submission=sub, status="open").exists()
    p = progress(sub)  # a simulated crowd answered a moment ago, but the corpus's annotators are in-house
    assert p["eta_seconds"] is None and "nobody is working on this corpus's queue" in p["time_left"]
    ann = Annotator.objects.create(backend="inhouse", external_id="a1")
    lease = leasing.lease_next(ann, kind="verify")
    p = progress(sub)  # an in-house annotator holds an item: at work, no pace yet
    assert p["eta_seconds"] is None and "none has answered yet" in p["time_left"]
    actions.submit_answer(lease, verify)
    p = progress(sub)  # somebody answered a moment ago: the pace gives a time
    assert p["eta_seconds"] is not None and p["time_left"].startswith("about ") and "(1 answer)" in p["time_left"]
    Answer.objects.update(created=timezone.now() - timedelta(minutes=IDLE_MINUTES + 1))
    Assignment.objects.filter(status="leased").update(expires=timezone.now() - timedelta(seconds=1))
    assert progress(sub)["eta_seconds"] is None


def test_counts_add_up(corpus):
    """Review: "labels received / needed 27 / 30" beside "new / reused 4 / 26", and "207 / 207" beside "74 / 105":
    counts that did not add up.  The labels needed are the distinct drawn keys, in parts that add up to them, and
    their received counts add up to the labels received; the draws are more than the distinct instances drawn."""
    from unpooled.service.annotation import actions
    from unpooled.service.annotation.models import Label, TaskRequest
    from unpooled.service.evaluations.draws import draw
    from unpooled.service.evaluations.lifecycle import request_labels

    sub = _sub("t-sum", status="annotating", plan={"instance": {"draws": 40}})
    n = RelationInstance.objects.filter(submission=sub).count()
    draw(sub, 2 * n, level="instance", rng=0)
    keys = list(dict.fromkeys(Draw.objects.filter(submission=sub).order_by("id").values_list("key", "key_hash")))
    for key, h in keys[:3]:  # in the pool before it asks
        Label.objects.create(corpus=corpus, key=key, key_hash=h, probability=1, correct=True, method="majority",
                             n_answers=1, guideline_version="t")
    st = actions.settings_for(corpus)
    st.submission_budget_cents = st.answers_per_item * st.reward_verify_cents * (len(keys) - 5)
    st.save()
    request_labels(sub)
    for key, h in keys[-4:-2]:  # labelled later, by another submission's item (or the pool)
        Label.objects.create(corpus=corpus, key=key, key_hash=h, probability=1, correct=True, method="majority",
                             n_answers=1, guideline_version="t")
    p = progress(sub)
    parts = {o["part"]: (o["n"], o["got"]) for o in p["label_origins"]}
    assert p["labels_needed"] == len(keys) == sum(n_ for n_, _ in parts.values())
    assert p["labels_received"] == 5 == sum(g for _, g in parts.values())
    paid = set(TaskRequest.objects.filter(submission=sub, committed_cents__gt=0).values_list("task__key", flat=True))
    later = {k for k, _ in keys[-4:-2]}
    assert len(paid) == len(keys) - 5  # 2 keys over the budget
    assert parts == {"new": (len(paid), len(paid & later)), "reused": (3 + len(later - paid),) * 2, "joined": (0, 0),
                     "unasked": (2 - len(later - paid), 0)}, parts
    assert p["over_budget"] == parts["unasked"][0] and p["labels_new"] == len(paid)
    (d,) = p["draws_detail"]
    assert (d["level"], d["draws"], p["instances"]) == ("instance", 2 * n, n)
    assert d["distinct"] == len({i for i in Draw.objects.filter(submission=sub).values_list("instance_id", flat=True)})
    assert d["distinct"] < d["draws"] and d["labelled"] <= d["distinct"]


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
