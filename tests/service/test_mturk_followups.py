"""Follow-ups of the MTurk sweep, Amazon stubbed by botocore's Stubber: HITs left live when the corpus leaves
Mechanical Turk, Amazon's duplicate-request error told apart from other refusals, the HIT link's handle, HITs
waiting for budget, extensions across Amazon's 10-assignment boundary."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from botocore.stub import ANY
from django.urls import reverse

from unpooled.service.annotation.models import Answer, Hit

from .test_mturk_hostile import H1, H2, LISTED, _answer, _published
from .test_mturk_sync import AS1, W1, _answer_xml, corpus, stubbed  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

SETTLE_TASK = "unpooled.service.evaluations.tasks.settle_mturk"


def _waiting(task_path: str) -> list:
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    return [r.args_kwargs["args"] for r in DBTaskResult.objects.filter(status=TaskResultStatus.READY,
                                                                        task_path=task_path)]


def test_switching_a_corpus_away_from_mturk_keeps_settling_its_hits(client, corpus, stubbed, monkeypatch,  # noqa: F811
                                                                     django_capture_on_commit_callbacks):
    """The sync ran only while the corpus's backend was Mechanical Turk: switched to in-house annotators with HITs
    live, a submitted assignment went unreviewed until Amazon's auto-approval paid it (a made-up answer too), and
    the HITs stayed open to workers the entry page now turns away.  The switch now queues a settling sync that
    confirms and approves (or rejects) what was submitted, expires the HITs, and runs again until they settle."""
    from unpooled.service.accounts.models import Role

    from .test_organiser import _login, _settings_post

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    lease = _answer(client, t1)
    _login(client, "olga", staff=True, role=Role.ORGANISER)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"{reverse('organiser:settings')}?corpus={corpus.name}",
                        _settings_post(corpus, backend="inhouse"), follow=True)
    assert ("its 2 HITs on Mechanical Turk are being expired, and what workers submitted to them is still reviewed"
            in r.content.decode())
    assert _waiting(SETTLE_TASK) == [[corpus.pk]]

    from unpooled.service.evaluations.tasks import settle_mturk

    monkeypatch.setattr("unpooled.service.crowd.mturk.MTurkBackend.from_env", lambda: backend)
    stub.add_response("list_assignments_for_hit", {"Assignments": [
        {"AssignmentId": AS1, "WorkerId": W1, "HITId": H1, "AssignmentStatus": "Submitted",
         "Answer": _answer_xml(lease.token)}], "NumResults": 1},
        {"HITId": H1, "MaxResults": 100, "AssignmentStatuses": LISTED})
    stub.add_response("approve_assignment", {}, {"AssignmentId": AS1})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": H1, "ExpireAt": ANY})
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": H2, "ExpireAt": ANY})
    with django_capture_on_commit_callbacks(execute=True):
        out = settle_mturk.call(corpus.pk)
    stub.assert_no_pending_responses()
    assert out["approved"] == 1 and not out["errors"]
    assert not Answer.objects.get(assignment=lease).quarantined
    assert set(Hit.objects.values_list("status", flat=True)) == {"expired"}
    # a worker who accepted just before may still submit: it looks again later, and stops once they are settled
    assert _waiting(SETTLE_TASK) == [[corpus.pk]]
    Hit.objects.update(status="settled")
    with django_capture_on_commit_callbacks(execute=True):
        assert settle_mturk.call(corpus.pk) == {}


def test_the_hit_link_carries_no_task_id(client, corpus, stubbed):  # noqa: F811
    """The HIT's link (its ExternalQuestion, which every worker previewing it sees) carried the task id; controls are
    created in one batch, so their ids form a block that tells them apart.  The link now names the HIT by a handle
    derived from nothing a worker can see (the service's key), and a link already posted with the task id (live
    HITs at Amazon) still enters."""
    from urllib.parse import parse_qsl, urlsplit

    from unpooled.service.annotation.hits import signature
    from unpooled.service.annotation.models import Assignment
    from unpooled.service.crowd.mturk_sync import question_url

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    links = []
    for task in (t1, t2):
        query = dict(parse_qsl(urlsplit(question_url("https://unpooled.example", task, Hit.objects.get(task=task))).query))
        assert set(query) == {"hit"} and len(query["hit"]) >= 32
        links.append(query["hit"])
    assert links[0][:8] != links[1][:8]
    r = client.get(reverse("annotation:mturk"), {"hit": links[0], "assignmentId": AS1, "hitId": H1, "workerId": W1})
    assert r.status_code == 302 and Assignment.objects.filter(task=t1, annotator__external_id=W1).exists()
    # a made-up handle is refused like an unknown task
    assert client.get(reverse("annotation:mturk"), {"hit": "A" * 43, "assignmentId": "3" + "Q" * 29, "hitId": H1,
                                                    "workerId": "A" * 13}).status_code == 404
    # the link a HIT was posted with before: still entered
    hit2 = Hit.objects.get(task=t2)
    r = client.get(reverse("annotation:mturk"), {"task": t2.pk, "sig": signature(t2.pk, hit2.request_token),
                                                  "assignmentId": "3" + "R" * 29, "hitId": H2, "workerId": "A" * 13})
    assert r.status_code == 302


def test_the_console_says_how_many_hits_wait_for_the_budget_and_what_raising_it_would_post(client, corpus,  # noqa: F811
                                                                                            stubbed):
    """HITs held back by the budget showed only as "open tasks not published yet" and in the sync's errors.  The
    MTurk page and the console's alerts now say how many wait and by how much raising the budget would post them
    (their rewards and Amazon's fee)."""
    from unpooled.service.accounts.models import Role
    from unpooled.service.annotation.models import Task
    from unpooled.service.crowd.mturk_sync import publish
    from unpooled.service.organiser import console

    from .test_mturk_hostile import _budget_for_one_hit, _create
    from .test_organiser import _login

    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    st = _budget_for_one_hit(corpus)
    _create(stub, t1, H1)
    assert publish(corpus, backend, "https://unpooled.example").over_budget == 1
    says = "1 HIT waits for the budget: raising the corpus budget by $0.13 (to $0.36) would post it"
    _login(client, "olga", staff=True, role=Role.ORGANISER)
    html = client.get(f"{reverse('organiser:mturk')}?corpus={corpus.name}").content.decode()
    assert says in html
    assert any(says in a.message for a in console.alerts(corpus))
    st.budget_cents = 36
    st.save()
    assert "waits for the budget" not in client.get(f"{reverse('organiser:mturk')}?corpus={corpus.name}").content.decode()


def test_a_hit_needing_ten_assignments_or_more_is_extended_as_amazon_allows(client, corpus, stubbed):  # noqa: F811
    """Amazon refuses to extend a HIT from fewer than 10 assignments to 10 or more (its large-HIT fee boundary): an
    item asked for 12 answers had its 3-assignment HIT extended by 9, refused at every publish, and never got them.
    The HIT is now extended to 9 (what Amazon takes); once it is settled and still short, a new HIT (its own request
    token and annotation) takes the rest, the old one's cost kept in the budget's count: nothing is paid twice."""
    from unpooled.core.annotation.mturk_fees import hit_cost_cents
    from unpooled.service.annotation.models import Task
    from unpooled.service.crowd.mturk_sync import item_token, publish, requested

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    Task.objects.filter(pk=t1.pk).update(answers_needed=12)
    stub.add_response("create_additional_assignments_for_hit", {},
                      {"HITId": H1, "NumberOfAdditionalAssignments": 6, "UniqueRequestToken": ANY})
    stub.add_response("get_hit", {"HIT": {"HITId": H1, "Expiration": datetime(2026, 12, 1, tzinfo=timezone.utc)}},
                      {"HITId": H1})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": H1, "ExpireAt": ANY})
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    assert rep.extended == 1 and not rep.errors and Hit.objects.get(task=t1).max_assignments == 9
    assert publish(corpus, backend, "https://unpooled.example").extended == 0   # 9 it is, until they are settled
    # its nine assignments were submitted without an answer and rejected: settled, twelve answers still short
    gone = [f"3{i:029d}" for i in range(9)]
    Hit.objects.filter(task=t1).update(rejected=gone, status="settled")
    H3 = "3" + "C" * 29
    stub.add_response("create_hit", {"HIT": {"HITId": H3, "RequesterAnnotation": f"{item_token(t1)}/2"}}, {
        "MaxAssignments": 12, "Title": ANY, "Description": ANY, "Keywords": ANY, "Reward": "0.05",
        "AssignmentDurationInSeconds": ANY, "LifetimeInSeconds": ANY, "AutoApprovalDelayInSeconds": ANY,
        "Question": ANY, "RequesterAnnotation": f"{item_token(t1)}/2", "UniqueRequestToken": ANY,
        "QualificationRequirements": ANY})
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    hit = Hit.objects.get(task=t1)
    assert rep.created == 1 and not rep.errors
    assert (hit.hit_id, hit.max_assignments, hit.rejected, hit.status) == (H3, 12, [], "posted")
    assert [(e["hit_id"], e["assignments"], len(e["rejected"])) for e in hit.earlier] == [(H1, 9, 9)]
    asked = requested(corpus)
    assert asked["requested_cents"] == hit_cost_cents(5, 9) + hit_cost_cents(5, 12) + hit_cost_cents(5, 3)
    assert asked["rejected_cents"] == 9 * 6
    assert publish(corpus, backend, "https://unpooled.example").created == 0   # posted once
    # the old HIT's workers are turned away, even while the new one's id is not recorded yet
    Hit.objects.filter(task=t1).update(hit_id="")
    entry = {"hit": hit.link, "assignmentId": "3" + "W" * 29, "workerId": "A" * 13}
    assert client.get(reverse("annotation:mturk"), {**entry, "hitId": H1}).status_code == 403
    assert client.get(reverse("annotation:mturk"), {**entry, "hitId": H3}).status_code == 302


def test_a_hit_that_ended_with_assignments_untaken_is_opened_again(corpus, stubbed):  # noqa: F811
    """A HIT that ended (its lifetime over) before workers took its assignments is settled, but its untaken
    assignments still counted as answers to come: its item stayed open for ever, its submission waiting.  Such a
    HIT is now opened again for another lifetime, its untaken assignments first (nothing added, nothing paid
    twice); only what they cannot bring is added."""
    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    Hit.objects.filter(task=t1).update(status="settled", approved=[], rejected=[])   # ended, none taken
    stub.add_response("get_hit", {"HIT": {"HITId": H1, "Expiration": datetime(2026, 11, 1, tzinfo=timezone.utc)}},
                      {"HITId": H1})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": H1, "ExpireAt": ANY})
    from unpooled.service.crowd.mturk_sync import publish

    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    hit = Hit.objects.get(task=t1)
    assert rep.extended == 1 and not rep.errors and (hit.max_assignments, hit.status) == (3, "posted")


def test_what_was_requested_is_summed_in_the_database_as_hit_by_hit(corpus):  # noqa: F811
    """The console and the MTurk page show what the corpus's HITs asked of Amazon: it was summed HIT by HIT in
    Python on every view (every row read).  Grouped in the database now, the rows with rejections or earlier HITs
    read one by one: the same figures as the sum over every HIT, whatever the rewards (older rows without one
    take the corpus's), sizes, rejections and earlier HITs."""
    import random

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone as tz

    from unpooled.core.annotation.mturk_fees import assignment_cost_cents, fee_cents
    from unpooled.service.annotation import actions
    from unpooled.service.annotation.models import Kind, Task
    from unpooled.service.crowd.mturk_sync import requested

    rng = random.Random(7)
    doc = corpus.documents.first()
    kinds = [Kind.VERIFY, Kind.ENTITIES, Kind.RELATIONS]
    for i in range(60):
        task = Task.objects.create(corpus=corpus, kind=kinds[i % 3], document=doc, key=f"k{i}", priority=tz.now(),
                                   guideline_version="1")
        earlier = [{"hit_id": f"E{i}{j}", "assignments": rng.choice([3, 9]), "reward_cents": rng.choice([5, 12]),
                    "approved": [], "rejected": [f"R{j}"] * rng.randint(0, 2)} for j in range(rng.choice([0, 0, 1, 2]))]
        Hit.objects.create(task=task, request_token=f"tok-{i}", hit_id=f"H{i}", max_assignments=rng.choice([1, 3, 9, 12]),
                           reward_cents=rng.choice([None, 5, 7, 30]), earlier=earlier,
                           rejected=[f"X{i}"] * rng.choice([0, 0, 0, 1, 3]))
    st = actions.settings_for(corpus)
    n = reward = fee = rejected = 0
    for hit in Hit.objects.filter(task__corpus=corpus).select_related("task"):
        for m, r, nos in [(hit.max_assignments, hit.reward(st), hit.rejected)] + [
                (e["assignments"], e["reward_cents"], e["rejected"]) for e in hit.earlier]:
            n, reward, fee = n + m, reward + m * r, fee + m * fee_cents(r, m)
            rejected += len(nos) * assignment_cost_cents(r, m)
    with CaptureQueriesContext(connection) as q:
        got = requested(corpus, st)
    assert got == {"assignments": n, "reward_cents": reward, "fee_cents": fee, "requested_cents": reward + fee,
                   "rejected_cents": rejected}
    assert rejected > 0 and any(h.reward_cents is None for h in Hit.objects.all())
    assert len(q.captured_queries) == 2 and "GROUP BY" in q.captured_queries[0]["sql"]
