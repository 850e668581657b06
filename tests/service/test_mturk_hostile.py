"""Hostile and failure cases of the Mechanical Turk backend, Amazon stubbed by botocore's Stubber: an assignment
Amazon no longer knows, a throttled or unavailable Amazon, what a person reads about it."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

import pytest
from botocore.stub import ANY
from django.urls import reverse

from unpooled.service.annotation.hits import task_query
from unpooled.service.annotation.models import Answer, Assignment, Hit, Task
from unpooled.service.crowd.mturk_sync import collect, item_token, publish

from .test_mturk_sync import AS1, W1, _answer_xml, _hit, corpus, stubbed  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

H1, H2 = "3" + "A" * 29, "3" + "B" * 29
LISTED = ["Submitted", "Approved"]


def _create(stub, task, hit_id, reward="0.05", assignments=3):
    stub.add_response("create_hit", {"HIT": _hit(hit_id, item_token(task))}, {
        "MaxAssignments": assignments, "Title": ANY, "Description": ANY, "Keywords": ANY, "Reward": reward,
        "AssignmentDurationInSeconds": ANY, "LifetimeInSeconds": ANY, "AutoApprovalDelayInSeconds": ANY,
        "Question": ANY, "RequesterAnnotation": item_token(task), "UniqueRequestToken": ANY,
        "QualificationRequirements": ANY})


def _published(corpus, stub, backend):  # noqa: F811
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    _create(stub, t1, H1)
    _create(stub, t2, H2)
    assert publish(corpus, backend, "https://unpooled.example").created == 2
    return t1, t2


def _answer(client, task, worker=W1, assignment=AS1) -> Assignment:
    hit = Hit.objects.get(task=task)
    r = client.get(reverse("annotation:mturk"), {**dict(parse_qsl(task_query(task, hit))), "assignmentId": assignment,
                                                  "hitId": hit.hit_id, "workerId": worker})
    client.post(r["Location"], {"answer": json.dumps({"relation": "holds", "subject_ok": True, "object_ok": True,
                                                      "link_ok": None})})
    return Assignment.objects.get(annotator__external_id=worker, external_ref=f"{hit.hit_id}/{assignment}")


def test_an_assignment_amazon_no_longer_knows_does_not_stop_the_sync(client, corpus, stubbed):  # noqa: F811
    """Amazon lists an assignment, then refuses to approve it (gone meanwhile): the sync reports it in a fixed
    sentence, goes on with the next HIT, and approves it on a later run once Amazon has it approved."""
    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    lease = _answer(client, t1)
    subm = {"AssignmentId": AS1, "WorkerId": W1, "HITId": H1, "AssignmentStatus": "Submitted",
            "Answer": _answer_xml(lease.token)}
    stub.add_response("list_assignments_for_hit", {"Assignments": [subm], "NumResults": 1},
                      {"HITId": H1, "MaxResults": 100, "AssignmentStatuses": LISTED})
    stub.add_client_error("approve_assignment", "RequestError",
                          f"Assignment {AS1} does not exist. (1764400000000) secret-detail", 400)
    stub.add_client_error("get_assignment", "RequestError", f"Assignment {AS1} does not exist. (1764400000001)", 400)
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    rep = collect(corpus, backend)
    stub.assert_no_pending_responses()   # the second HIT was collected too
    assert rep.approved == 0 and len(rep.errors) == 1
    assert H1 in rep.errors[0] and "RequestError" in rep.errors[0] and "secret-detail" not in rep.errors[0]
    assert Hit.objects.get(task=t1).approved == []
    # Amazon approved it meanwhile (its auto-approval): the next run records it, paying nothing twice
    stub.add_response("list_assignments_for_hit", {"Assignments": [{**subm, "AssignmentStatus": "Approved"}],
                                                   "NumResults": 1},
                      {"HITId": H1, "MaxResults": 100, "AssignmentStatuses": LISTED})
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    rep = collect(corpus, backend)
    assert not rep.errors and rep.approved == 0 and Hit.objects.get(task=t1).approved == [AS1]


def test_a_throttled_or_unavailable_amazon_is_retried_then_reported(client, corpus, stubbed):  # noqa: F811
    """Throttling and ServiceUnavailable are retried (max_retries=1: two tries); still failing, the HIT is reported in
    a fixed sentence, its quarantined answers are kept (an unlisted HIT discards nothing), and the next HIT runs."""
    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    lease = _answer(client, t1)
    Assignment.objects.filter(pk=lease.pk).update(leased=lease.leased.replace(year=2020))  # long past its duration
    stub.add_client_error("list_assignments_for_hit", "ThrottlingException", "Rate exceeded for 1234", 400)
    stub.add_client_error("list_assignments_for_hit", "ServiceUnavailable", "Service unavailable at 10.0.0.1", 503)
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    rep = collect(corpus, backend)
    stub.assert_no_pending_responses()
    assert len(rep.errors) == 1 and H1 in rep.errors[0] and "ServiceUnavailable" in rep.errors[0]
    assert "10.0.0.1" not in rep.errors[0] and "next sync tries again" in rep.errors[0]
    assert rep.discarded == 0 and Answer.objects.filter(assignment=lease, quarantined=True).exists()


def test_publish_reports_amazon_refusals_in_a_fixed_sentence(corpus, stubbed):  # noqa: F811
    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    stub.add_client_error("create_hit", "RequestError", "Insufficient funds on account 123456789012", 400)
    _create(stub, t2, H2)
    rep = publish(corpus, backend, "https://unpooled.example")
    assert rep.created == 1 and len(rep.errors) == 1
    assert rep.errors[0].startswith(f"task {t1.pk}: ") and "RequestError" in rep.errors[0]
    assert "123456789012" not in rep.errors[0]


def _collect_one(stub, hit_id, assignments, others=()):
    stub.add_response("list_assignments_for_hit", {"Assignments": assignments, "NumResults": len(assignments)},
                      {"HITId": hit_id, "MaxResults": 100, "AssignmentStatuses": LISTED})
    for a in assignments:
        if a["AssignmentStatus"] == "Submitted":
            stub.add_response("approve_assignment", {}, {"AssignmentId": a["AssignmentId"]})
    for h in others:
        stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                          {"HITId": h, "MaxResults": 100, "AssignmentStatuses": LISTED})


def test_a_confirmed_answer_costs_what_its_hit_pays_with_amazons_fee(client, corpus, stubbed):  # noqa: F811
    """The organiser raises the reward after the HIT was posted: Amazon still pays the HIT's reward, so the answer
    costs that, plus Amazon's commission (20%, at least a cent an assignment), not the new setting."""
    from unpooled.service.annotation import actions

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    st = actions.settings_for(corpus)
    st.reward_verify_cents = 40
    st.save()
    lease = _answer(client, t1)
    _collect_one(stub, H1, [{"AssignmentId": AS1, "WorkerId": W1, "HITId": H1, "AssignmentStatus": "Submitted",
                             "Answer": _answer_xml(lease.token)}], [H2])
    assert collect(corpus, backend).approved == 1
    assert Answer.objects.get(assignment=lease).cost_cents == 5 + 1


def test_publishing_stays_within_the_budget_with_fees_and_more_assignments(client, corpus, stubbed):  # noqa: F811
    """HITs are posted while what Amazon may charge for them (every assignment's reward and fee, a control's HIT and
    the assignments added to a HIT included) stays within the corpus budget; the rest wait, and the MTurk page says
    what was requested from Amazon: the sum of the CreateHIT rewards, and the fee on them."""
    from unpooled.service.accounts.models import Role

    from .test_organiser import _login

    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    _budget_for_one_hit(corpus)
    _create(stub, t1, H1)
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    assert rep.created == 1 and rep.over_budget == 1 and not Hit.objects.filter(task=t2).exists()
    assert any("budget" in e for e in rep.errors)
    # more answers asked of t1: two more assignments would cost 12 cents; 5 are left
    Task.objects.filter(pk=t1.pk).update(answers_needed=5)
    rep = publish(corpus, backend, "https://unpooled.example")
    assert rep.extended == 0 and rep.over_budget == 2 and Hit.objects.get(task=t1).max_assignments == 3
    _login(client, "olga", staff=True, role=Role.ORGANISER)
    html = client.get(f"{reverse('organiser:mturk')}?corpus={corpus.name}").content.decode()
    assert "id=\"mturk-requested\">$0.18 for 3 assignments ($0.15 in rewards, $0.03 Amazon's fee)" in html


def test_a_failed_create_hit_is_posted_again_with_its_token_and_never_twice(corpus, stubbed):  # noqa: F811
    """CreateHIT failed (Amazon unavailable): the next publish posts the HIT again with the same request token (a
    task was left without a HIT until someone reconciled by hand, and reconciling finds nothing Amazon never got);
    a row pending longer than Amazon keeps a token is looked up by its annotation first, and adopted, not re-posted."""
    from datetime import timedelta

    from django.utils import timezone

    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    stub.add_client_error("create_hit", "ServiceUnavailable", "down", 503)
    stub.add_client_error("create_hit", "ServiceUnavailable", "down", 503)
    stub.add_client_error("create_hit", "ServiceUnavailable", "down", 503)
    stub.add_client_error("create_hit", "ServiceUnavailable", "down", 503)
    rep = publish(corpus, backend, "https://unpooled.example")
    assert rep.created == 0 and len(rep.errors) == 2
    token = Hit.objects.get(task=t1).request_token
    Hit.objects.filter(task=t2).update(created=timezone.now() - timedelta(days=2))
    _create(stub, t1, H1)
    # t2's row is two days old: Amazon has forgotten its token, so it is looked for first; its CreateHIT had not
    # reached Amazon, so it is posted
    stub.add_response("list_hits", {"HITs": [], "NumResults": 0}, {"MaxResults": 100})
    _create(stub, t2, H2)
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    assert rep.created == 2 and not rep.errors and Hit.objects.get(task=t1).request_token == token
    assert {h.hit_id for h in Hit.objects.filter(task__corpus=corpus)} == {H1, H2}
    # a HIT that did reach Amazon two days ago is adopted, not posted twice
    t3 = Task.objects.create(corpus=corpus, kind=t1.kind, document=t1.document, key="k3", payload=t1.payload,
                             answers_needed=3, priority=t1.priority, guideline_version=t1.guideline_version)
    stub.add_client_error("create_hit", "ServiceFault", "lost", 500)
    stub.add_client_error("create_hit", "ServiceFault", "lost", 500)
    assert publish(corpus, backend, "https://unpooled.example").created == 0
    Hit.objects.filter(task=t3).update(created=timezone.now() - timedelta(days=2))
    h3 = "3" + "C" * 29
    stub.add_response("list_hits", {"HITs": [_hit(h3, item_token(t3))], "NumResults": 1}, {"MaxResults": 100})
    rep = publish(corpus, backend, "https://unpooled.example")
    assert rep.created == 1 and Hit.objects.get(task=t3).hit_id == h3


def test_the_mturk_page_shows_the_pay_publishing_asks_for(client, corpus):  # noqa: F811
    """The page listed the adapter's default rewards (UNPOOLED_MTURK_REWARD_*, $0.05 a verification), which publishing
    never pays: it pays the corpus's settings.  It now shows those, with Amazon's fee."""
    from unpooled.service.accounts.models import Role
    from unpooled.service.annotation import actions

    from .test_organiser import _login

    st = actions.settings_for(corpus)
    st.reward_verify_cents = 12
    st.save()
    _login(client, "olga", staff=True, role=Role.ORGANISER)
    html = client.get(f"{reverse('organiser:mturk')}?corpus={corpus.name}").content.decode()
    row = html.split('id="mturk-rewards">')[1].split("</td>")[0]
    assert "verify an instance $0.12 + $0.03 Amazon's fee" in row and "$0.05" not in html


def test_collecting_goes_on_when_the_public_url_is_missing(client, corpus, stubbed, monkeypatch):  # noqa: F811
    """Without UNPOOLED_PUBLIC_URL no HIT can be posted, and publishing raised: the sync (and the submission's
    annotating stage) stopped before collecting, so submitted assignments were never reviewed and Amazon's
    auto-approval paid them unseen.  Now publishing says why it posted nothing, and collecting goes on."""
    from unpooled.service.crowd.base import MTurkCrowd

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    t3 = Task.objects.create(corpus=corpus, kind=t1.kind, document=t1.document, key="k3", payload=t1.payload,
                             answers_needed=3, priority=t1.priority, guideline_version=t1.guideline_version)
    monkeypatch.delenv("UNPOOLED_PUBLIC_URL", raising=False)
    crowd = MTurkCrowd(backend)
    out = crowd.publish(corpus)
    assert out["created"] == 0 and any("UNPOOLED_PUBLIC_URL" in e for e in out["errors"])
    assert not Hit.objects.filter(task=t3).exists()
    lease = _answer(client, t1)
    _collect_one(stub, H1, [{"AssignmentId": AS1, "WorkerId": W1, "HITId": H1, "AssignmentStatus": "Submitted",
                             "Answer": _answer_xml(lease.token)}], [H2])
    assert crowd.collect(corpus)["approved"] == 1


def test_settled_hits_are_not_listed_again(corpus, stubbed):  # noqa: F811
    """Every sync listed every HIT the corpus ever had (a control's, whose task never closes, too): thousands of
    calls a minute on a large corpus, throttled by Amazon.  A HIT whose assignments are all approved or rejected, or
    that ended and can take no more submissions, is settled and not listed again (until it is given more)."""
    from datetime import timedelta

    from django.utils import timezone

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    a2, a3 = "3" + "U" * 29, "3" + "V" * 29
    Hit.objects.filter(task=t1).update(approved=[AS1, a2], rejected=[a3])   # all three of its assignments
    Task.objects.filter(pk=t2.pk).update(status=Task.Status.COMPLETE)
    approved = [{"AssignmentId": a, "WorkerId": W1, "HITId": H1, "AssignmentStatus": "Approved", "Answer": ""}
                for a in (AS1, a2)]
    stub.add_response("list_assignments_for_hit", {"Assignments": approved, "NumResults": 2},
                      {"HITId": H1, "MaxResults": 100, "AssignmentStatuses": LISTED})
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": H2, "ExpireAt": ANY})
    assert not collect(corpus, backend).errors
    # t2's HIT ended; a worker who accepted it just before may still submit for an assignment's duration
    assert Hit.objects.get(task=t2).expires <= timezone.now() + timedelta(seconds=backend.config.assignment_seconds)
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    assert not collect(corpus, backend).errors
    Hit.objects.filter(task=t2).update(expires=timezone.now() - timedelta(seconds=1))
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    assert not collect(corpus, backend).errors
    rep = collect(corpus, backend)   # nothing left to ask Amazon
    stub.assert_no_pending_responses()
    assert not rep.errors and set(Hit.objects.values_list("status", flat=True)) == {"settled"}


def test_a_controls_hit_looks_like_an_items(client, corpus, stubbed):  # noqa: F811
    """A gold control's HIT took one assignment, an item's three: anyone holding the links (a preview shows them)
    could tell the controls apart by entering each with made-up assignment ids (a control's HIT refused the third
    with "as many workers on it as it takes", an item's took six).  A control's HIT now takes as many assignments as
    an item's, and the same number of made-up entries."""
    from unpooled.service.annotation import actions

    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    ctl = Task.objects.create(corpus=corpus, kind=t1.kind, document=t1.document, key="control:1", payload=t1.payload,
                              group=t1.group, answers_needed=0, priority=t2.priority, is_control=True,
                              control_answer={"correct": True}, guideline_version=t1.guideline_version)
    n = actions.settings_for(corpus).answers_per_item
    _create(stub, t1, H1, assignments=n)
    _create(stub, t2, H2, assignments=n)
    h3 = "3" + "C" * 29
    _create(stub, ctl, h3, assignments=n)
    assert publish(corpus, backend, "https://unpooled.example").created == 3
    stub.assert_no_pending_responses()

    def entries(task, hit_id):
        hit = Hit.objects.get(task=task)
        return [client.get(reverse("annotation:mturk"), {**dict(parse_qsl(task_query(task, hit))), "hitId": hit_id,
                                                         "assignmentId": f"3PROBE{hit_id[:3]}{i:021d}",
                                                         "workerId": f"APROBE{i:06d}"}).status_code
                for i in range(8)]

    assert entries(ctl, h3) == entries(t1, H1)


def test_reconciling_one_corpus_leaves_another_corpus_hits_alone(corpus, stubbed, shared_data, tmp_path):  # noqa: F811
    """Reconciling lists every HIT of the Amazon account: another corpus's HITs (annotated "unpooled:task:N" too)
    were this corpus's "orphans", and ``--expire-orphans`` expired them, ending that corpus's live work."""
    from unpooled.service.crowd.mturk_sync import reconcile_corpus

    from ..conftest import load_redocred_subset

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    (tmp_path / "b").mkdir()
    other, _, _ = load_redocred_subset(shared_data, tmp_path / "b", 1, "turk-b")
    tb = Task.objects.create(corpus=other, kind=t1.kind, document=other.documents.first(), key="kb", payload={},
                             answers_needed=3, priority=t1.priority, guideline_version=t1.guideline_version)
    hb, gone = "3" + "D" * 29, "3" + "E" * 29
    Hit.objects.create(task=tb, request_token="tb", hit_id=hb, max_assignments=3, status="posted")
    stub.add_response("list_hits", {"HITs": [_hit(H1, item_token(t1)), _hit(H2, item_token(t2)),
                                             _hit(hb, item_token(tb)), _hit(gone, "unpooled:task:999999")],
                                    "NumResults": 4}, {"MaxResults": 100})
    for h in (H1, H2):
        stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                          {"HITId": h, "MaxResults": 100, "AssignmentStatuses": ["Submitted"]})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": gone, "ExpireAt": ANY})   # a deleted task's
    out = reconcile_corpus(corpus, backend, expire_orphans=True)
    stub.assert_no_pending_responses()
    assert out["orphans"] == [gone] and out["expired_orphans"] == [gone]


def test_requests_commit_amazons_fee_on_mturk(corpus):  # noqa: F811
    """On Mechanical Turk an answer costs its reward and Amazon's fee; requests committed the reward only, so a
    submission's (and the corpus's) budget let through a fifth more than it said.  The fixture asked for 2 items of
    3 answers at 5 cents on an MTurk corpus: 2 × 3 × (5 + 1) cents committed."""
    from unpooled.service.annotation import actions
    from unpooled.service.annotation.models import TaskRequest

    sub = TaskRequest.objects.filter(task__corpus=corpus).first().submission
    assert actions.submission_committed_cents(sub) == 2 * 3 * (5 + 1)
    assert actions.corpus_committed_cents(corpus) == 2 * 3 * (5 + 1)


def test_a_database_failure_during_collect_is_not_taken_for_amazons(client, corpus, stubbed, monkeypatch):  # noqa: F811
    """Only Amazon's failures are reported and passed over: a database error (the lifecycle requeues the task once
    the database answers) goes up, and nothing is approved."""
    from django.db import OperationalError

    from unpooled.service.annotation import actions

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    lease = _answer(client, t1)
    stub.add_response("list_assignments_for_hit", {"Assignments": [
        {"AssignmentId": AS1, "WorkerId": W1, "HITId": H1, "AssignmentStatus": "Submitted",
         "Answer": _answer_xml(lease.token)}], "NumResults": 1},
        {"HITId": H1, "MaxResults": 100, "AssignmentStatuses": LISTED})

    def locked(*a, **k):
        raise OperationalError("database is locked")

    monkeypatch.setattr(actions, "confirm_mturk_answer", locked)
    with pytest.raises(OperationalError):
        collect(corpus, backend)


def test_assignments_used_up_by_rejected_ones_are_posted_again(client, corpus, stubbed):  # noqa: F811
    """Two of a HIT's three assignments were submitted without an answer and rejected: the item had one answer of
    three and a HIT with no assignment left, so it stayed open for ever (and its submission waited).  The HIT now
    gets the two assignments back, within the budget; a control's HIT is never topped up."""
    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    lease = _answer(client, t1)
    a2, a3 = "3" + "U" * 29, "3" + "V" * 29
    listed = [{"AssignmentId": AS1, "WorkerId": W1, "HITId": H1, "AssignmentStatus": "Submitted",
               "Answer": _answer_xml(lease.token)}] + [
              {"AssignmentId": a, "WorkerId": f"AEMPTY{i:06d}", "HITId": H1, "AssignmentStatus": "Submitted",
               "Answer": ""} for i, a in enumerate((a2, a3))]
    stub.add_response("list_assignments_for_hit", {"Assignments": listed, "NumResults": 3},
                      {"HITId": H1, "MaxResults": 100, "AssignmentStatuses": LISTED})
    stub.add_response("approve_assignment", {}, {"AssignmentId": AS1})
    for a in (a2, a3):
        stub.add_response("reject_assignment", {}, {"AssignmentId": a, "RequesterFeedback": ANY})
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    rep = collect(corpus, backend)
    assert (rep.approved, rep.rejected) == (1, 2) and Hit.objects.get(task=t1).status == "settled"
    # a budget with room for the two HITs only: the rejected assignments were not paid, so their slots fit again
    from unpooled.service.annotation import actions

    st = actions.settings_for(corpus)
    st.budget_cents = 2 * 3 * (5 + 1)
    st.save()
    stub.add_response("create_additional_assignments_for_hit", {},
                      {"HITId": H1, "NumberOfAdditionalAssignments": 2, "UniqueRequestToken": ANY})
    stub.add_response("get_hit", {"HIT": {**_hit(H1, item_token(t1)), "Expiration": lease.leased}}, {"HITId": H1})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": H1, "ExpireAt": ANY})
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    hit = Hit.objects.get(task=t1)
    assert rep.extended == 1 and hit.max_assignments == 5 and hit.status == "posted"
    assert publish(corpus, backend, "https://unpooled.example").extended == 0   # once


def test_the_settings_say_which_mechanical_turk_the_server_posts_to(client, corpus, monkeypatch):  # noqa: F811
    """Choosing Mechanical Turk on the settings page said nothing of the sandbox or production (only the MTurk page
    did): an organiser could start spending real money unaware."""
    from unpooled.service.accounts.models import Role

    from .test_organiser import _login

    _login(client, "olga", staff=True, role=Role.ORGANISER)
    url = f"{reverse('organiser:settings')}?corpus={corpus.name}"
    monkeypatch.delenv("UNPOOLED_MTURK_PRODUCTION", raising=False)
    field = client.get(url).content.decode().split('id="field-backend"')[1].split("</div>")[0]
    assert "Mechanical Turk here is the sandbox: test workers, no money paid" in field
    monkeypatch.setenv("UNPOOLED_MTURK_PRODUCTION", "1")
    field = client.get(url).content.decode().split('id="field-backend"')[1].split("</div>")[0]
    assert "Mechanical Turk here is PRODUCTION: real workers, paid real money" in field


def test_controls_take_only_what_the_items_leave_of_the_budget(corpus, stubbed):  # noqa: F811
    """Controls are made at a corpus's first run, so they queue before later submissions' items: under a budget they
    were posted first and held the items back.  Items are posted first; controls get what remains."""
    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    Task.objects.create(corpus=corpus, kind=t1.kind, document=t1.document, key="control:1", payload=t1.payload,
                        group=t1.group, answers_needed=0, priority=t1.priority.replace(year=2020), is_control=True,
                        control_answer={"correct": True}, guideline_version=t1.guideline_version)
    from unpooled.service.annotation import actions

    st = actions.settings_for(corpus)
    st.budget_cents = 2 * 3 * (5 + 1)   # the two items' HITs, no more
    st.save()
    _create(stub, t1, H1)
    _create(stub, t2, H2)
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    assert rep.created == 2 and rep.over_budget == 1


def test_old_pending_rows_ask_amazon_for_its_hits_once(corpus, stubbed):  # noqa: F811
    """Rows pending for more than a day are looked up in one listing of Amazon's HITs; when that listing fails, it is
    reported once and not tried again for every other row."""
    from datetime import timedelta

    from django.utils import timezone

    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    for t in (t1, t2):
        Hit.objects.create(task=t, request_token=f"old-{t.pk}", max_assignments=3, reward_cents=5)
    Hit.objects.update(created=timezone.now() - timedelta(days=2))
    stub.add_client_error("list_hits", "ServiceUnavailable", "down", 503)
    stub.add_client_error("list_hits", "ServiceUnavailable", "down", 503)
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    assert rep.created == 0 and len(rep.errors) == 1 and "listing them" in rep.errors[0]
    assert set(Hit.objects.values_list("hit_id", flat=True)) == {""}


def test_two_syncs_at_once_lose_no_assignment_and_no_extension(client, corpus, stubbed, monkeypatch):  # noqa: F811
    """Every submission annotating on an MTurk corpus polls it each minute, so two syncs of one corpus run at once.
    One wrote the HIT's row from what it had read before its calls: an assignment the other had rejected meanwhile
    was lost (its slot then never posted again), and a HIT the other had just given more assignments was marked
    settled (never listed again).  The row is now merged under its lock."""
    from unpooled.service.crowd.mturk import MTurkBackend

    backend, stub = stubbed
    t1, t2 = _published(corpus, stub, backend)
    other = "3" + "O" * 29

    real = MTurkBackend.reject

    def reject_while_another_sync_runs(self, assignment_id, feedback):
        real(self, assignment_id, feedback)
        # meanwhile, another sync rejected another assignment of the HIT and gave the HIT more assignments
        Hit.objects.filter(task=t1).update(rejected=[other], max_assignments=5, status="posted")

    monkeypatch.setattr(MTurkBackend, "reject", reject_while_another_sync_runs)
    empty = [{"AssignmentId": a, "WorkerId": f"AEMPTY{i:06d}", "HITId": H1, "AssignmentStatus": "Submitted",
              "Answer": ""} for i, a in enumerate((AS1, "3" + "U" * 29, "3" + "V" * 29))]
    stub.add_response("list_assignments_for_hit", {"Assignments": empty, "NumResults": 3},
                      {"HITId": H1, "MaxResults": 100, "AssignmentStatuses": LISTED})
    for a in empty:
        stub.add_response("reject_assignment", {}, {"AssignmentId": a["AssignmentId"], "RequesterFeedback": ANY})
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": H2, "MaxResults": 100, "AssignmentStatuses": LISTED})
    assert collect(corpus, backend).rejected == 3
    hit = Hit.objects.get(task=t1)
    assert set(hit.rejected) == {other} | {a["AssignmentId"] for a in empty}
    assert hit.status == "posted" and hit.max_assignments == 5


def _budget_for_one_hit(corpus):
    """Give ``corpus`` a budget that bears one HIT of 3 assignments at 5 cents and a cent's fee each, not two; its
    settings."""
    from unpooled.service.annotation import actions

    st = actions.settings_for(corpus)
    st.budget_cents = 3 * 6 + 5
    st.save()
    return st
