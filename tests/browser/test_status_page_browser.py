"""The status page tells one story (UX review 2026-11-26 #6), in Debian's Chromium: a submission still waiting for
labels whose levels already have scores says those scores are provisional (no ✓ beside "waiting for labels"); an
in-house queue nobody works on has no time-left estimate but says so (the simulated crowd that answered here a
minute ago, before the corpus switched to in-house annotators, sets no pace); the draws say they are with
replacement, of how many instances, how many distinct and labelled; and every count adds up: the labels needed are
the sum of where they come from, the labels received the sum of those received, the answers to come those the open
items still need -- on the page as served and after its live update."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User

from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.models import Annotator, Backend, Kind, Label, Task, TaskRequest
from unpooled.service.evaluations.models import Draw
from unpooled.service.submissions.models import RelationInstance, Submission

from .layout import check_layout, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

MEMBER, MEMBER_PW = "member", "pw-member-1234"
VERIFY = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}


def waiting_with_provisional_scores(corpus) -> Submission:
    """The world's submission in ``annotating``: drawn at two levels (more draws than it has instances), some keys
    labelled in the pool before it asked, a few over its budget, some items answered by a simulated crowd a moment
    ago (the corpus has since switched to in-house annotators, who have not started), provisional scores."""
    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.crowd.simulated import SimulatedCrowd
    from unpooled.service.evaluations.draws import draw
    from unpooled.service.evaluations.lifecycle import request_labels
    from unpooled.service.evaluations.publish import rescore_all

    sub = Submission.objects.get(corpus=corpus, is_reference=False)
    n = RelationInstance.objects.filter(submission=sub).count()
    draw(sub, 2 * n, level="instance", rng=1)
    draw(sub, 20, level="relation", rng=2)
    keys = list(dict.fromkeys(Draw.objects.filter(submission=sub).order_by("id").values_list("key", "key_hash")))
    asked = set(Task.objects.filter(requests__submission=sub).values_list("key", flat=True))
    pooled = [k for k in keys if k[0] not in asked][:4]
    for key, key_hash in pooled:  # labelled before this submission asked (another system's draw, long ago)
        Label.objects.create(corpus=corpus, key=key, key_hash=key_hash, probability=1.0, correct=True,
                             method="majority", n_answers=1, guideline_version="test")
    st = actions.settings_for(corpus)
    new = len(keys) - len(asked) - len(pooled)
    st.submission_budget_cents = 5 * (len(asked) + new - 3)   # 3 keys over the budget
    st.save()
    Submission.objects.filter(pk=sub.pk).update(status=Submission.Status.ANNOTATING, plan={
        "instance": {"draws": 2 * n, "round": 2}, "relation": {"draws": 20, "round": 2}})
    sub.refresh_from_db()
    request_labels(sub)
    SimulatedCrowd.uniform(corpus, 1, accuracy=1.0, rng=0).run(kinds=[Kind.VERIFY], max_answers=5)
    st.backend = Backend.INHOUSE
    st.save()
    rescore_all(corpus)
    u = User.objects.create_user(MEMBER, password=MEMBER_PW)
    Profile.objects.create(user=u, role=Role.SUBMITTER, team=sub.team)
    return sub


def _int(page, sel: str) -> int:
    return int(page.inner_text(sel).strip())


def check_counts(page, sub: Submission) -> dict:
    """Every count on the page against the database and against each other."""
    needed, received = _int(page, "#labels-needed"), _int(page, "#labels-received")
    parts = page.eval_on_selector_all("#label-parts tr[data-part]", "rs => rs.map(r => [r.dataset.part, "
                                      "Number(r.querySelector('.n').textContent), "
                                      "Number(r.querySelector('.got').textContent)])")
    assert sum(n for _, n, _ in parts) == needed, parts
    assert sum(g for _, _, g in parts) == received, parts
    assert all(0 <= g <= n for _, n, g in parts), parts
    keys = set(Draw.objects.filter(submission=sub).values_list("key", flat=True))
    labelled = set(Label.objects.filter(corpus=sub.corpus, key__in=keys).values_list("key", flat=True))
    assert (needed, received) == (len(keys), len(labelled))
    got = dict((p, n) for p, n, _ in parts)
    paid = set(TaskRequest.objects.filter(submission=sub, committed_cents__gt=0).values_list("task__key", flat=True))
    assert got["new"] == len(keys & paid) and got["unasked"] == 3, got
    # the answers to come: what this submission's open items still need
    open_ = Task.objects.filter(requests__submission=sub, kind=Kind.VERIFY, status=Task.Status.OPEN)
    assert _int(page, "#outstanding") == sum(t.answers_needed - t.answers.filter(weight__gt=0).count() for t in open_)
    bar = page.eval_on_selector("#labels-bar", "b => [b.value, b.max]")
    assert bar == [received, max(1, needed)]
    # the draws: with replacement, of the submission's instances, distinct and labelled per level
    n_inst = RelationInstance.objects.filter(submission=sub).count()
    for lv in ("instance", "relation"):
        text = page.inner_text(f"#draws li[data-level={lv}]")
        m = re.search(r"(\d+) draws \(with replacement\) of (\d+) instances: (\d+) distinct, (\d+) of them labelled",
                      text)
        assert m, text
        draws = Draw.objects.filter(submission=sub, level=lv)
        distinct = set(draws.values_list("instance_id", "key"))
        assert [int(x) for x in m.groups()] == [draws.count(), n_inst, len(distinct),
                                                sum(1 for _, k in distinct if k in labelled)], text
        assert int(m.group(1)) > int(m.group(3)) or lv == "relation"
    return {"needed": needed, "received": received}


def test_status_page_tells_one_story(page, live_server, world):
    sub = waiting_with_provisional_scores(world)
    sign_in(page, live_server.url, MEMBER, MEMBER_PW)
    page.goto(f"{live_server.url}/submissions/{sub.pk}/status/")
    check_layout(page, "status-waiting-provisional")
    # the state sentence and the level marks agree: scores while labels are missing are provisional, not ✓
    assert page.inner_text("#stage").startswith("waiting for labels")
    assert "provisional" in page.inner_text("#stage")
    marks = page.eval_on_selector_all("#levels .level-state", "els => els.map(e => [e.dataset.level, e.className, "
                                      "e.textContent])")
    assert [m[0] for m in marks] == ["instance", "relation"], marks
    assert all("provisional" in c and "✓" not in t and "provisional" in t for _, c, t in marks), marks
    assert "Provisional scores" in page.inner_text("#scores-heading")
    # nobody works the in-house queue: no time left, and the page says why
    eta = page.inner_text("#eta")
    assert re.search(r"\d+ s\b", eta) is None and "nobody is working on this corpus's queue" in eta, eta
    first = check_counts(page, sub)
    assert first["received"] < first["needed"]

    # an in-house annotator starts: the live update (every 2 s) shows the new label, still adding up
    ann = Annotator.objects.create(backend=Backend.INHOUSE, external_id="in-house-1")
    lease = leasing.lease_next(ann, kind=Kind.VERIFY, corpus=world)
    assert lease is not None
    actions.submit_answer(lease, VERIFY)
    page.wait_for_function(f"() => document.getElementById('labels-received').textContent.trim() === "
                           f"'{first['received'] + 1}'", timeout=10000)
    assert check_counts(page, sub)["received"] == first["received"] + 1
    assert "nobody is working" not in page.inner_text("#eta")  # somebody answered a moment ago
    check_layout(page, "status-waiting-live")
