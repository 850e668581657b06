"""MTurk as an annotation backend on a real database, with Amazon stubbed by botocore's Stubber:
publish, a crash between the database row and CreateHIT repaired by reconciliation, pay for answers."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import ANY, Stubber
from django.urls import reverse

from unpooled.service.annotation import actions
from unpooled.service.annotation.models import Hit, Task
from unpooled.service.crowd.mturk import SANDBOX_ENDPOINT, MTurkBackend, MTurkConfig
from unpooled.service.crowd.mturk_sync import collect, item_token, publish, reconcile_corpus
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 2, "turk")
    st = actions.settings_for(corpus)
    st.backend = "mturk"
    st.save()
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:2]
    actions.request_verification(sub, ids)
    return corpus


@pytest.fixture
def stubbed():
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=SANDBOX_ENDPOINT,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    with Stubber(client) as stub:
        yield MTurkBackend(client, MTurkConfig(max_retries=1), sleep=lambda s: None), stub
        stub.assert_no_pending_responses()


def _hit(hid, ann):
    return {"HITId": hid, "RequesterAnnotation": ann, "HITStatus": "Assignable", "MaxAssignments": 3}


def test_publish_crash_reconcile_and_pay(client, corpus, stubbed):
    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    h1, h2 = "3" + "A" * 29, "3" + "B" * 29
    # t1 posts; t2's CreateHIT fails twice (the process "crashes" from our point of view: no id saved)
    stub.add_response("create_hit", {"HIT": _hit(h1, item_token(t1))},
                      {"MaxAssignments": 3, "Title": "Does this sentence state the relation?",
                       "Description": "Read one sentence from a document and say whether it states the given relation "
                                      "between the two highlighted names. A few seconds; some items are checked "
                                      "against known answers.",
                       "Keywords": ANY, "Reward": "0.05",
                       "AssignmentDurationInSeconds": ANY, "LifetimeInSeconds": ANY, "AutoApprovalDelayInSeconds": ANY,
                       "Question": ANY, "RequesterAnnotation": item_token(t1), "UniqueRequestToken": ANY,
                       "QualificationRequirements": ANY})
    stub.add_client_error("create_hit", "ServiceFault", "timeout", 500)
    stub.add_client_error("create_hit", "ServiceFault", "timeout", 500)
    rep = publish(corpus, backend, "https://unpooled.example")
    assert rep.created == 1 and len(rep.errors) == 1 and "ServiceFault" in rep.errors[0]
    assert Hit.objects.get(task=t1).hit_id == h1
    pending = Hit.objects.get(task=t2)
    assert pending.hit_id == "" and pending.status == "pending"

    # the failed call had in fact reached Amazon: reconciliation finds it by RequesterAnnotation
    stub.add_response("list_hits", {"HITs": [_hit(h1, item_token(t1)), _hit(h2, item_token(t2))], "NumResults": 2},
                      {"MaxResults": 100})
    for hid in (h1, h2):
        stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                          {"HITId": hid, "MaxResults": 100, "AssignmentStatuses": ["Submitted"]})
    out = reconcile_corpus(corpus, backend)
    assert out["adopted"] == {item_token(t2): h2}
    assert Hit.objects.get(task=t2).hit_id == h2
    # publishing again posts nothing: every open task has its HIT
    assert publish(corpus, backend, "https://unpooled.example").created == 0

    # worker W1 answers t1 on our page (as the HIT's iframe would: the signed link the HIT carries, plus
    # Amazon's parameters); W2 submits on MTurk without answering
    from unpooled.service.annotation.hits import task_query
    from unpooled.service.annotation.models import Answer, Assignment
    from unpooled.service.crowd.mturk_sync import question_url

    hit1 = Hit.objects.get(task=t1)
    assert question_url("https://unpooled.example", t1, hit1).endswith(task_query(t1, hit1))
    from urllib.parse import parse_qsl

    r = client.get(reverse("annotation:mturk"), {**dict(parse_qsl(task_query(t1, hit1))), "assignmentId": AS1,
                                                  "hitId": h1, "workerId": W1})
    client.post(r["Location"], {"answer": json.dumps({"relation": "holds", "subject_ok": True, "object_ok": True,
                                                      "link_ok": None})})
    lease = Assignment.objects.get(annotator__external_id=W1)
    ans = Answer.objects.get(assignment=lease)
    assert ans.quarantined and ans.weight == 0 and ans.cost_cents == 0  # nothing counts before Amazon says so
    subm = [{"AssignmentId": AS1, "WorkerId": W1, "HITId": h1, "AssignmentStatus": "Submitted",
             "Answer": _answer_xml(lease.token)},
            {"AssignmentId": AS2, "WorkerId": W2, "HITId": h1, "AssignmentStatus": "Submitted", "Answer": ""}]
    stub.add_response("list_assignments_for_hit", {"Assignments": subm, "NumResults": 2},
                      {"HITId": h1, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved"]})
    stub.add_response("approve_assignment", {}, {"AssignmentId": AS1})
    stub.add_response("reject_assignment", {}, {"AssignmentId": AS2, "RequesterFeedback": ANY})
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": h2, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved"]})
    rep = collect(corpus, backend)
    assert (rep.approved, rep.rejected, rep.confirmed) == (1, 1, 1)
    ans.refresh_from_db()
    assert not ans.quarantined and ans.weight == 1 and ans.cost_cents == 5 + 1  # confirmed: paid, with the fee
    # a duplicate notification (the same submitted assignments listed again) pays nobody twice
    stub.add_response("list_assignments_for_hit", {"Assignments": subm, "NumResults": 2},
                      {"HITId": h1, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved"]})
    stub.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                      {"HITId": h2, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved"]})
    rep = collect(corpus, backend)
    assert (rep.approved, rep.rejected) == (0, 0)
    assert Hit.objects.get(task=t1).approved == [AS1]


AS1, AS2 = "3" + "S" * 29, "3" + "T" * 29
W1, W2 = "A1WORKERONE0", "A2WORKERTWO0"


def _answer_xml(token: str) -> str:
    """A QuestionFormAnswers document as MTurk keeps an ExternalQuestion's posted fields."""
    return ('<?xml version="1.0" encoding="ASCII"?><QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/'
            'AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd"><Answer><QuestionIdentifier>'
            f'unpooled_token</QuestionIdentifier><FreeText>{token}</FreeText></Answer></QuestionFormAnswers>')


def test_backend_for_follows_the_settings(corpus, stubbed):
    from unpooled.service.crowd.base import InHouseBackend, MTurkCrowd, SimulatedBackend, backend_for

    backend, _ = stubbed
    assert isinstance(backend_for(corpus, backend=backend, base_url="https://u.example"), MTurkCrowd)
    st = actions.settings_for(corpus)
    st.backend = "inhouse"
    st.save()
    assert isinstance(backend_for(corpus), InHouseBackend)
    assert backend_for(corpus).publish(corpus) == {"open": 2}
    st.backend = "simulated"
    st.save()
    sim = backend_for(corpus, accuracy=1.0, annotators=3)
    assert isinstance(sim, SimulatedBackend)
    assert sim.collect(corpus)["answers"] == 6
    assert not Task.objects.filter(corpus=corpus, status=Task.Status.OPEN).exists()


def test_more_answers_extend_the_hit(corpus, stubbed):
    """A closed item of a relation the crowd judges weakly, asked for more answers, opens again and its HIT takes
    the missing assignments for another lifetime; an item of another relation, or asked twice, costs nothing."""
    from datetime import datetime, timezone

    from django.utils import timezone as dj_tz

    from unpooled.service.annotation.models import TaskRequest

    backend, stub = stubbed
    t1, t2 = Task.objects.filter(corpus=corpus).order_by("priority", "id")
    h1, h2 = "3" + "A" * 29, "3" + "B" * 29
    for t, h in ((t1, h1), (t2, h2)):
        stub.add_response("create_hit", {"HIT": _hit(h, item_token(t))}, {
            "MaxAssignments": 3, "Title": ANY, "Description": ANY, "Keywords": ANY, "Reward": "0.05",
            "AssignmentDurationInSeconds": ANY, "LifetimeInSeconds": ANY, "AutoApprovalDelayInSeconds": ANY,
            "Question": ANY, "RequesterAnnotation": item_token(t), "UniqueRequestToken": ANY,
            "QualificationRequirements": ANY})
    assert publish(corpus, backend, "https://unpooled.example").created == 2
    Task.objects.filter(pk=t1.pk).update(status=Task.Status.COMPLETE, completed=dj_tz.now())
    Hit.objects.filter(task=t1).update(status="expired")
    sub = TaskRequest.objects.get(task=t1).submission
    st = actions.settings_for(corpus)
    committed = actions.submission_committed_cents(sub)
    assert t1.group != t2.group
    weak = {t1.group}
    res = actions.request_more_answers(sub, weak)
    t1.refresh_from_db()
    extra = st.answers_weak_relation - st.answers_per_item
    assert res.more_answers == 1 and res.more_answers_cents == extra * (st.reward_verify_cents + 1)  # and the fee
    assert t1.status == Task.Status.OPEN and t1.answers_needed == st.answers_weak_relation and t1.completed is None
    assert actions.submission_committed_cents(sub) == committed + res.more_answers_cents
    assert actions.request_more_answers(sub, weak).more_answers == 0  # asked once
    stub.add_response("create_additional_assignments_for_hit", {},
                      {"HITId": h1, "NumberOfAdditionalAssignments": extra, "UniqueRequestToken": ANY})
    stub.add_response("get_hit", {"HIT": {**_hit(h1, item_token(t1)), "Expiration": datetime(2015, 1, 1,
                                                                                             tzinfo=timezone.utc)}},
                      {"HITId": h1})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": h1, "ExpireAt": ANY})
    rep = publish(corpus, backend, "https://unpooled.example")
    stub.assert_no_pending_responses()
    assert rep.created == 0 and rep.extended == 1 and not rep.errors
    hit = Hit.objects.get(task=t1)
    assert hit.max_assignments == st.answers_weak_relation and hit.status == "posted"
    assert publish(corpus, backend, "https://unpooled.example").extended == 0  # once
    # over the submission's budget: nothing is asked, and the request says so
    Task.objects.filter(pk=t2.pk).update(status=Task.Status.COMPLETE)
    st.submission_budget_cents = actions.submission_committed_cents(sub)
    st.save()
    res = actions.request_more_answers(sub, {t2.group})
    assert res.more_answers == 0 and res.over_budget == 1
    assert Task.objects.get(pk=t2.pk).status == Task.Status.COMPLETE
