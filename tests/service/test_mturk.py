"""The MTurk adapter against botocore's Stubber (requests and responses checked against the real
service model; no network). Nothing is ever posted or paid twice."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import ANY, Stubber

from unpooled.service.crowd.mturk import (
    PRODUCTION_ENDPOINT, SANDBOX_ENDPOINT, LocalHit, MTurkBackend, MTurkConfig, MTurkError, external_question,
    parse_answer_xml, reconcile, request_token,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
HIT_ID = "3" + "A" * 29
HIT_ID_2 = "3" + "B" * 29
ANSWER_XML = ('<?xml version="1.0" encoding="ASCII"?><QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/'
              'AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd"><Answer><QuestionIdentifier>unpooled_token'
              '</QuestionIdentifier><FreeText>tok-1</FreeText></Answer></QuestionFormAnswers>')


def _hit(hit_id=HIT_ID, annotation="unpooled:task:1", expiration=NOW + timedelta(days=1)):
    return {"HITId": hit_id, "HITTypeId": "T" * 30, "RequesterAnnotation": annotation, "HITStatus": "Assignable",
            "MaxAssignments": 3, "Expiration": expiration, "Title": "t", "Reward": "0.05"}


@pytest.fixture
def stubbed():
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=SANDBOX_ENDPOINT,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    sleeps: list[float] = []
    with Stubber(client) as stub:
        yield MTurkBackend(client, MTurkConfig(), sleep=sleeps.append), stub, sleeps
        stub.assert_no_pending_responses()


def _create_params(token):
    return {"MaxAssignments": 3, "Title": "Verify", "Description": "d", "Keywords": ANY, "Reward": "0.05",
            "AssignmentDurationInSeconds": 1800, "LifetimeInSeconds": ANY, "AutoApprovalDelayInSeconds": ANY,
            "Question": external_question("https://u.example/annotate/mturk/?task=1"),
            "RequesterAnnotation": "unpooled:task:1", "UniqueRequestToken": token, "QualificationRequirements": ANY}


def _create(backend, token):
    return backend.create_hit("unpooled:task:1", "https://u.example/annotate/mturk/?task=1", task_type="verify",
                              max_assignments=3, title="Verify", description="d", request_token=token)


def test_create_hit_posts_an_external_question(stubbed):
    backend, stub, _ = stubbed
    token = request_token("task", 1, 0)
    stub.add_response("create_hit", {"HIT": _hit()}, _create_params(token))
    assert _create(backend, token)["HITId"] == HIT_ID
    assert len(token) <= 64 and token == request_token("task", 1, 0)


def test_retry_after_service_fault_reuses_the_token_and_posts_once(stubbed):
    backend, stub, sleeps = stubbed
    token = request_token("task", 1, 0)
    stub.add_client_error("create_hit", "ServiceFault", "try again", 500, expected_params=_create_params(token))
    stub.add_client_error("create_hit", "ServiceFault", "try again", 500, expected_params=_create_params(token))
    stub.add_response("create_hit", {"HIT": _hit()}, _create_params(token))
    assert _create(backend, token)["HITId"] == HIT_ID
    assert sleeps == [1.0, 2.0]


def test_duplicate_token_adopts_the_existing_hit(stubbed):
    backend, stub, _ = stubbed
    token = request_token("task", 1, 0)
    stub.add_client_error("create_hit", "RequestError",
                          f"The HIT with ID {HIT_ID} already exists (UniqueRequestToken {token}).", 400,
                          expected_params=_create_params(token))
    stub.add_response("get_hit", {"HIT": _hit()}, {"HITId": HIT_ID})
    assert _create(backend, token)["HITId"] == HIT_ID


def test_duplicate_without_id_is_found_by_annotation(stubbed):
    backend, stub, _ = stubbed
    token = request_token("task", 1, 0)
    stub.add_client_error("create_hit", "RequestError", "This request has already been processed.", 400,
                          expected_params=_create_params(token),
                          modeled_fields={"TurkErrorCode": "AWS.MechanicalTurk.HitAlreadyExists"})
    stub.add_response("list_hits", {"HITs": [_hit(HIT_ID_2, "other")], "NextToken": "p2", "NumResults": 1},
                      {"MaxResults": 100})
    stub.add_response("list_hits", {"HITs": [_hit()], "NumResults": 1}, {"MaxResults": 100, "NextToken": "p2"})
    assert _create(backend, token)["HITId"] == HIT_ID


def test_non_retryable_error_names_operation_and_code(stubbed):
    backend, stub, _ = stubbed
    token = request_token("task", 1, 0)
    stub.add_client_error("create_hit", "RequestError", "Insufficient funds", 400, expected_params=_create_params(token))
    with pytest.raises(MTurkError, match="mturk create_hit: RequestError: Insufficient funds") as exc:
        _create(backend, token)
    assert exc.value.operation == "create_hit" and exc.value.code == "RequestError"


def test_retries_give_up_after_max_retries(stubbed):
    backend, stub, sleeps = stubbed
    for _ in range(5):
        stub.add_client_error("get_account_balance", "ServiceFault", "down", 500)
    with pytest.raises(MTurkError, match="ServiceFault"):
        backend.balance()
    assert len(sleeps) == 4


def test_extend_and_expire(stubbed):
    backend, stub, _ = stubbed
    stub.add_response("create_additional_assignments_for_hit", {},
                      {"HITId": HIT_ID, "NumberOfAdditionalAssignments": 2, "UniqueRequestToken": "tok-ext"})
    stub.add_response("get_hit", {"HIT": _hit(expiration=NOW + timedelta(hours=1))}, {"HITId": HIT_ID})
    stub.add_response("update_expiration_for_hit", {},
                      {"HITId": HIT_ID, "ExpireAt": NOW + timedelta(hours=1, seconds=3600)})
    backend.extend_hit(HIT_ID, extra_assignments=2, extra_seconds=3600, request_token="tok-ext", now=NOW)
    stub.add_response("update_expiration_for_hit", {}, {"HITId": HIT_ID, "ExpireAt": datetime(2015, 1, 1, tzinfo=timezone.utc)})
    backend.expire_hit(HIT_ID)


def test_extend_twice_with_the_same_token_is_a_no_op(stubbed):
    backend, stub, _ = stubbed
    stub.add_client_error("create_additional_assignments_for_hit", "RequestError",
                          'The idempotency token "tok-ext-1" has already been processed. (1764400000000)', 400)
    backend.extend_hit(HIT_ID, extra_assignments=1, request_token="tok-ext-1")


def test_list_assignments_paginates_and_parses_answers(stubbed):
    backend, stub, _ = stubbed
    a1 = {"AssignmentId": "A1", "WorkerId": "W1", "HITId": HIT_ID, "AssignmentStatus": "Submitted", "Answer": ANSWER_XML}
    a2 = {"AssignmentId": "A2", "WorkerId": "W2", "HITId": HIT_ID, "AssignmentStatus": "Approved", "Answer": ""}
    params = {"HITId": HIT_ID, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]}
    stub.add_response("list_assignments_for_hit", {"Assignments": [a1], "NextToken": "n2", "NumResults": 1}, params)
    stub.add_response("list_assignments_for_hit", {"Assignments": [a2], "NumResults": 1}, {**params, "NextToken": "n2"})
    got = list(backend.list_assignments(HIT_ID))
    assert [a["AssignmentId"] for a in got] == ["A1", "A2"]
    assert got[0]["answers"] == {"unpooled_token": "tok-1"} and got[1]["answers"] == {}


def test_approve_is_idempotent_and_reject_needs_feedback(stubbed):
    backend, stub, _ = stubbed
    stub.add_response("approve_assignment", {}, {"AssignmentId": "A1", "RequesterFeedback": "thanks"})
    assert backend.approve("A1", "thanks") is True
    stub.add_client_error("approve_assignment", "RequestError",
                          "This operation can be called with a status of: Submitted (1764400000000)", 400)
    stub.add_response("get_assignment", {"Assignment": {"AssignmentId": "A1", "AssignmentStatus": "Approved"}},
                      {"AssignmentId": "A1"})
    assert backend.approve("A1") is False
    # a refusal whose words say "approved" is no approval: Amazon's status decides (the old code matched the word)
    stub.add_client_error("approve_assignment", "RequestError",
                          "This assignment cannot be approved: it was rejected (1764400000001)", 400)
    stub.add_response("get_assignment", {"Assignment": {"AssignmentId": "A4", "AssignmentStatus": "Rejected"}},
                      {"AssignmentId": "A4"})
    with pytest.raises(MTurkError, match="approve_assignment"):
        backend.approve("A4")
    stub.assert_no_pending_responses()
    stub.add_response("reject_assignment", {}, {"AssignmentId": "A2", "RequesterFeedback": "no answer recorded"})
    backend.reject("A2", "no answer recorded")
    with pytest.raises(ValueError, match="feedback"):
        backend.reject("A3", "")


def test_bonus_is_never_paid_twice(stubbed):
    backend, stub, _ = stubbed
    params = {"WorkerId": "W1", "AssignmentId": "A1", "BonusAmount": "0.10", "Reason": "good work",
              "UniqueRequestToken": "bonus-A1"}
    stub.add_response("send_bonus", {}, params)
    assert backend.bonus("W1", "A1", "0.10", "good work", "bonus-A1") is True
    stub.add_client_error("send_bonus", "RequestError",
                          'The idempotency token "bonus-A1" has already been processed. (1764400000000)', 400,
                          expected_params=params)
    assert backend.bonus("W1", "A1", "0.10", "good work", "bonus-A1") is False
    stub.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    assert backend.balance() == "10000.00"


def test_reconcile_adopts_lost_hits_reports_orphans_and_missing_and_collects_assignments(stubbed):
    backend, stub, _ = stubbed
    local = [LocalHit("unpooled:task:1", None, "tok1", 3),            # crash after create, before saving the id
             LocalHit("unpooled:task:2", "3" + "C" * 29, "tok2", 3)]  # the remote no longer has it
    stub.add_response("list_hits", {"HITs": [_hit(HIT_ID, "unpooled:task:1"), _hit(HIT_ID_2, "unpooled:task:9"),
                                             _hit("3" + "D" * 29, "someone else's")], "NumResults": 3},
                      {"MaxResults": 100})
    stub.add_response("list_assignments_for_hit",
                      {"Assignments": [{"AssignmentId": "A1", "WorkerId": "W1", "HITId": HIT_ID, "AssignmentStatus": "Submitted",
                                        "Answer": ANSWER_XML},
                                       {"AssignmentId": "A0", "WorkerId": "W0", "HITId": HIT_ID, "AssignmentStatus": "Submitted",
                                        "Answer": ""}], "NumResults": 2},
                      {"HITId": HIT_ID, "MaxResults": 100, "AssignmentStatuses": ["Submitted"]})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": HIT_ID_2, "ExpireAt": ANY})
    rep = reconcile(backend, local, known_assignments={"A0"}, expire_orphans=True)
    assert rep.adopted == {"unpooled:task:1": HIT_ID}
    assert rep.orphans == [HIT_ID_2] and rep.expired_orphans == [HIT_ID_2]
    assert rep.missing == ["3" + "C" * 29]
    assert [a["AssignmentId"] for a in rep.new_assignments] == ["A1"]
    assert rep.to_dict()["new_assignments"] == ["A1"]


def test_sandbox_unless_production_is_explicit():
    assert MTurkConfig.from_env({}).endpoint == SANDBOX_ENDPOINT
    assert MTurkConfig.from_env({"UNPOOLED_MTURK_PRODUCTION": "0"}).sandbox
    assert MTurkConfig.from_env({"UNPOOLED_MTURK_PRODUCTION": "1"}).endpoint == PRODUCTION_ENDPOINT
    assert MTurkConfig.from_env({"UNPOOLED_MTURK_PRODUCTION": "1", "UNPOOLED_MTURK_SANDBOX": "1"}).sandbox
    assert MTurkConfig.from_env({"UNPOOLED_MTURK_REWARD_VERIFY": "0.07"}).rewards["verify"] == "0.07"


def test_credentials_come_from_the_environment_only(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVONLY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-from-env")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = MTurkConfig.from_env({}).client()
    creds = client._request_signer._credentials
    assert creds.access_key == "AKIAENVONLY" and client.meta.endpoint_url == SANDBOX_ENDPOINT
    import inspect

    assert "access_key" not in inspect.signature(MTurkConfig.client).parameters


def test_parse_answer_xml():
    assert parse_answer_xml(ANSWER_XML) == {"unpooled_token": "tok-1"}
    assert parse_answer_xml("") == {}


def test_dollars_formats_a_reward_in_cents():
    from unpooled.service.crowd.mturk import dollars

    assert [dollars(c) for c in (0, 1, 5, 120, 135, 1000, 12345)] == ["0.00", "0.01", "0.05", "1.20", "1.35", "10.00",
                                                                       "123.45"]
    with pytest.raises(ValueError):
        dollars(-1)


def test_only_amazons_duplicate_token_error_counts_as_a_duplicate(stubbed):
    """Any RequestError whose message said "already been" was taken for a repeated UniqueRequestToken, so an
    extension or a bonus Amazon refused for another reason was recorded as done.  Only Amazon's documented answer to
    a repeated token counts: CreateHIT's TurkErrorCode AWS.MechanicalTurk.HitAlreadyExists, or a message naming the
    request's own token."""
    backend, stub, _ = stubbed
    stub.add_client_error("create_additional_assignments_for_hit", "RequestError",
                          f"HIT {HIT_ID} has already been disposed of. (1764400000000)", 400,
                          modeled_fields={"TurkErrorCode": "AWS.MechanicalTurk.HITDoesNotExist"})
    with pytest.raises(MTurkError, match="disposed"):
        backend.extend_hit(HIT_ID, extra_assignments=1, request_token="unpooled-ext")
    stub.add_client_error("send_bonus", "RequestError", "Assignment A1 has already been rejected. (1764400000000)", 400)
    with pytest.raises(MTurkError, match="rejected"):
        backend.bonus("W1", "A1", "0.10", "good work", "unpooled-bonus")
    token = request_token("task", 1, 0)
    stub.add_client_error("create_hit", "RequestError", "This HIT has already been reviewed. (1764400000000)", 400,
                          expected_params=_create_params(token))
    with pytest.raises(MTurkError, match="reviewed"):
        _create(backend, token)
    # Amazon's answer to the same token again: a no-op
    stub.add_client_error("create_additional_assignments_for_hit", "RequestError",
                          'The idempotency token "unpooled-ext" has already been processed. (1764400000000)', 400)
    backend.extend_hit(HIT_ID, extra_assignments=1, request_token="unpooled-ext")
