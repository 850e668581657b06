"""The MTurk signed link in hostile hands (security review 2026-11-26, N4): anyone who previewed a HIT holds its
link.  Made-up workers do not fill the HIT, do not take in-house annotators' slots, cannot lock a real worker out,
leave no rows for ever, and the link takes nobody once the HIT has ended.  Amazon's API through botocore's Stubber
(test_crowd_integrity.py has the fixtures)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from botocore.stub import ANY
from django.utils import timezone

from unpooled.service.annotation import leasing
from unpooled.service.annotation.hits import LIVE_LEASES_PER_ASSIGNMENT
from unpooled.service.annotation.models import Annotator, Answer, Assignment, Hit, Kind, Task
from unpooled.service.crowd.mturk_sync import collect

from .test_crowd_integrity import HOLDS, NONE, _answer_xml, _entry

pytestmark = pytest.mark.django_db


def _one_hit(corpus) -> Task:
    t = Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False).order_by("id").first()
    Hit.objects.filter(task__corpus=corpus).exclude(task=t).delete()
    t.refresh_from_db()
    return t


def test_made_up_workers_hold_at_most_twice_the_hits_assignments_and_no_in_house_slot(client, turk):
    """The review leased one HIT (MaxAssignments 3) to 25 made-up workers.  Now 6 live leases at most; the rest
    are told to come back; an in-house annotator still finds all 3 slots free; once the leases expire, others may
    enter again."""
    corpus, _, _ = turk
    t = _one_hit(corpus)
    cap = LIVE_LEASES_PER_ASSIGNMENT * t.hit.max_assignments
    codes = [_entry(client, t, worker=f"AFORGED{i:06d}", assignment=f"3FORGED{i:023d}").status_code
             for i in range(25)]
    assert codes == [302] * cap + [409] * (25 - cap)
    assert Assignment.objects.filter(task=t).count() == cap and Annotator.objects.filter(backend="mturk").count() == cap
    r = _entry(client, t, worker="ALATECOMER01", assignment="3" + "L" * 29)
    assert r.status_code == 409 and "as many workers on it as it takes" in r.content.decode()
    inhouse = Annotator.objects.create(backend="inhouse", external_id="colleague")
    assert leasing.leasable(inhouse).filter(pk=t.pk).exists()
    assert leasing._try_lease(t.pk, inhouse, timezone.now()) is not None
    Assignment.objects.filter(task=t, annotator__backend="mturk").update(expires=timezone.now() - timedelta(seconds=1))
    assert _entry(client, t, worker="ALATECOMER01", assignment="3" + "L" * 29).status_code == 302


def test_a_made_up_assignment_under_a_real_workers_id_does_not_lock_them_out(client, turk, stubbed):
    """The review bound a victim's WorkerId to a made-up assignment and answered it; the real worker's assignment
    was then refused (409).  Now it gets a lease of its own; Amazon lists the real assignment, which is confirmed
    and counts; the made-up one stays quarantined, and once an assignment's time is over it is deleted."""
    backend, stub = stubbed
    corpus, _, _ = turk
    t = _one_hit(corpus)
    r = _entry(client, t, worker="AVICTIMWORKER1", assignment="3" + "X" * 29)
    assert client.post(r["Location"], {"answer": json.dumps(NONE)}).status_code == 200
    r = _entry(client, t, worker="AVICTIMWORKER1", assignment="3" + "V" * 29)
    assert r.status_code == 302
    assert client.post(r["Location"], {"answer": json.dumps(HOLDS)}).status_code == 200
    real = Assignment.objects.get(task=t, external_ref=f"{t.hit.hit_id}/3{'V' * 29}")
    fake = Assignment.objects.get(task=t, external_ref=f"{t.hit.hit_id}/3{'X' * 29}")
    assert real.token != fake.token and real.annotator_id == fake.annotator_id
    # a day later Amazon lists the real assignment only: it is confirmed; the made-up lease is deleted
    Assignment.objects.filter(task=t).update(leased=timezone.now() - timedelta(days=1))
    stub.add_response("list_assignments_for_hit", {"Assignments": [
        {"AssignmentId": "3" + "V" * 29, "WorkerId": "AVICTIMWORKER1", "HITId": t.hit.hit_id,
         "AssignmentStatus": "Submitted", "Answer": _answer_xml(real.token)}], "NumResults": 1},
        {"HITId": t.hit.hit_id, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved"]})
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3" + "V" * 29})
    rep = collect(corpus, backend)
    assert (rep.confirmed, rep.approved, rep.rejected, rep.discarded) == (1, 1, 0, 1)
    assert Answer.objects.get(assignment=real).weight == 1.0 and not Answer.objects.get(assignment=real).quarantined
    assert not Assignment.objects.filter(pk=fake.pk).exists()
    # the worker now has a confirmed answer to this task: no further assignment of theirs is taken
    r = _entry(client, t, worker="AVICTIMWORKER1", assignment="3" + "W" * 29)
    assert r.status_code == 409 and "answered this task already" in r.content.decode()


def test_the_link_takes_nobody_once_the_hit_has_ended(client, turk, stubbed):
    """Expired by the service (its task complete), or past its expiration plus an assignment's duration: no new
    worker; a worker who entered before still reaches their own lease."""
    corpus, _, _ = turk
    t = _one_hit(corpus)
    r = _entry(client, t, worker="AEARLYWORKER1", assignment="3" + "E" * 29)
    assert r.status_code == 302
    Hit.objects.filter(task=t).update(expires=timezone.now() - timedelta(seconds=1))
    t.refresh_from_db()
    r = _entry(client, t, worker="ALATEWORKER01", assignment="3" + "Z" * 29)
    assert r.status_code == 410 and "this HIT has ended" in r.content.decode()
    assert _entry(client, t, worker="AEARLYWORKER1", assignment="3" + "E" * 29).status_code == 302
    Hit.objects.filter(task=t).update(expires=None, status="expired")
    t.refresh_from_db()
    assert _entry(client, t, worker="ALATEWORKER01", assignment="3" + "Z" * 29).status_code == 410
    assert not Annotator.objects.filter(external_id="ALATEWORKER01").exists()


def test_publish_records_when_the_link_expires(turk, stubbed):
    backend, stub = stubbed
    corpus, _, _ = turk
    t = _one_hit(corpus)
    Hit.objects.filter(task=t).delete()
    from unpooled.service.crowd.mturk_sync import publish

    expiration = timezone.now() + timedelta(days=7)
    stub.add_response("create_hit", {"HIT": {"HITId": "3" + "H" * 29, "Expiration": expiration}}, {
        "MaxAssignments": ANY, "Title": ANY, "Description": ANY, "Keywords": ANY, "Reward": ANY,
        "AssignmentDurationInSeconds": ANY, "LifetimeInSeconds": ANY, "AutoApprovalDelayInSeconds": ANY,
        "Question": ANY, "RequesterAnnotation": ANY, "UniqueRequestToken": ANY, "QualificationRequirements": ANY})
    assert publish(corpus, backend, "https://unpooled.example", limit=1).created == 1
    hit = Hit.objects.get(task=t)
    assert hit.expires == expiration + timedelta(seconds=backend.config.assignment_seconds)
