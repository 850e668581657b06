"""The cross-document clustering task on a corpus whose backend is Mechanical Turk, end to end: the HIT is posted
(its reward, title, frame and lifetime checked against the request botocore's Stubber validates), its id is lost
in a fault and adopted by reconciliation, three workers answer through the external page (Django's client with
CSRF checks on, no session: as in MTurk's frame), a forger answers too, the sync lists, confirms, approves and
rejects assignments, and the three confirmed answers are aggregated into clusters with agreement figures that
feed the NIL clustering scores across documents.  Real database; only Amazon is stubbed."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import parse_qsl

import boto3
import pytest
from botocore.stub import ANY, Stubber
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from unpooled.service.annotation import actions, clustering, hits
from unpooled.service.annotation.models import Answer, Assignment, Hit, Kind, Task
from unpooled.service.crowd.mturk import (
    SANDBOX_ENDPOINT, MTurkBackend, MTurkConfig, external_question, request_token,
)
from unpooled.service.crowd.mturk_sync import collect, item_token, publish, question_url, reconcile_corpus
from unpooled.service.crowd.simulated import SimulatedCrowd

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db

BASE = "https://unpooled.example"
HIT = "3" + "K" * 29
SANDBOX, PRODUCTION = "https://workersandbox.mturk.com", "https://www.mturk.com"
W = ["A1CLUSTERONE", "A2CLUSTERTWO", "A3CLUSTERTHREE"]
AS = ["3" + c * 29 for c in "LMN"]
FORGER, FORGED_AS = "A9MADEUPWORKER", "3" + "F" * 29       # never listed by Amazon
THIEF, THIEF_AS = "A8LISTEDTHIEF", "3" + "T" * 29           # listed by Amazon, with another worker's token


@pytest.fixture
def corpus(shared_data, tmp_path):
    """Three Re-DocRED documents sampled for exhaustive annotation, their entity and relation layers made by the
    simulated crowd (the gold layer); the clustering task over their unlinked entities is then open, alone, on
    a corpus whose backend is now MTurk."""
    corpus, _, _ = load_redocred_subset(shared_data, tmp_path, 3, "turkclu")
    actions.request_exhaustive(corpus, SimpleNamespace(indices=[0, 1, 2], inclusion=[1.0] * 3, stage=[1] * 3,
                                                       scheme="uniform"))
    SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0).run(kinds=[Kind.ENTITIES, Kind.RELATIONS])
    st = actions.settings_for(corpus)
    st.backend = "mturk"
    st.reward_clusters_cents = 135   # the organiser's reward, not the adapter's default of 1.20
    st.save()
    assert list(Task.objects.filter(corpus=corpus, status=Task.Status.OPEN).values_list("kind", flat=True)) == [
        Kind.CLUSTERS]
    return corpus


@pytest.fixture
def stubbed():
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=SANDBOX_ENDPOINT,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    with Stubber(client) as stub:
        yield MTurkBackend(client, MTurkConfig(max_retries=1), sleep=lambda s: None), stub
        stub.assert_no_pending_responses()


def _answer_xml(token: str) -> str:
    """A QuestionFormAnswers document as MTurk keeps an ExternalQuestion's posted fields."""
    return ('<?xml version="1.0" encoding="ASCII"?><QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/'
            'AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd"><Answer><QuestionIdentifier>'
            f'unpooled_token</QuestionIdentifier><FreeText>{token}</FreeText></Answer></QuestionFormAnswers>')


def _groups(n: int, *together) -> dict:
    """An answer: the ``together`` groups, every other item alone."""
    placed = {i for g in together for i in g}
    return {"groups": [sorted(g) for g in together] + [[i] for i in range(n) if i not in placed]}


def _frame_headers(r, *, finish: bool = False) -> None:
    """A page Mechanical Turk may frame (and nobody else); the last page may post to its two hosts only."""
    csp = r["Content-Security-Policy"]
    assert "X-Frame-Options" not in r.headers
    assert f"frame-ancestors {PRODUCTION} {SANDBOX}" in csp
    assert (f"form-action 'self' {PRODUCTION} {SANDBOX}" in csp) == finish


def test_clustering_hit_end_to_end_on_mturk(corpus, stubbed):
    backend, stub = stubbed
    task = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS)
    items = task.payload["items"]
    n = len(items)
    docs = {it["doc"] for it in items}
    assert n >= 10 and len(docs) == 3

    # ---- the HIT, as CreateHIT is asked for it (reward, title, frame, lifetime); the request reaches Amazon but
    # its answer is lost (two service faults, the retry included)
    st = actions.settings_for(corpus)
    token = request_token("task", task.pk, 0)
    expected = {"MaxAssignments": 3, "Title": "Which of these names are the same entity?",
                "Description": f"Group {n} names, each shown with its sentence, that refer to the same person, "
                               "organisation or place (keyboard: a letter puts a name in a group).",
                "Keywords": ANY, "Reward": "1.35", "AssignmentDurationInSeconds": 1800,
                "LifetimeInSeconds": 7 * 24 * 3600, "AutoApprovalDelayInSeconds": 3 * 24 * 3600,
                "Question": external_question(question_url(BASE, task, Hit(task=task, request_token=token))),
                "RequesterAnnotation": item_token(task), "UniqueRequestToken": token,
                "QualificationRequirements": ANY}
    assert "<FrameHeight>0</FrameHeight>" in expected["Question"]  # 0: MTurk fits the frame to the window
    for _ in range(2):
        stub.add_client_error("create_hit", "ServiceFault", "timeout", 500, expected_params=expected)
    rep = publish(corpus, backend, BASE)
    assert rep.created == 0 and "ServiceFault" in rep.errors[0]
    hit = Hit.objects.get(task=task)
    assert hit.hit_id == "" and hit.status == "pending" and hit.max_assignments == st.answers_per_item == 3

    # the page is reachable by the signed link while the id is unknown; the preview shows the instructions only
    signed = dict(parse_qsl(hits.task_query(task, hit)))
    anon = Client(enforce_csrf_checks=True)  # in MTurk's frame: no cookie of ours, so no CSRF token either
    entry = reverse("annotation:mturk")
    r = anon.get(entry, {**signed, "assignmentId": hits.PREVIEW, "hitId": HIT})
    body = r.content.decode()
    assert r.status_code == 200 and "Put the lines that name the same real-world entity in one group" in body
    assert items[0]["text"] not in body and not task.assignments.exists()
    _frame_headers(r)

    def enter(worker: str, assignment: str, submit_to: str = SANDBOX, hit_id: str = HIT):
        r = anon.get(entry, {**signed, "hitId": hit_id, "assignmentId": assignment, "workerId": worker,
                             "turkSubmitTo": submit_to})
        assert r.status_code == 302, r.content.decode()[:500]
        return r["Location"]

    def answer(page: str, value, expect: int = 200):
        r = anon.post(page, {"answer": value if isinstance(value, str) else json.dumps(value), "seconds": "95.5"})
        assert r.status_code == expect, r.content.decode()[:2000]
        return r

    # worker 1 accepts the HIT while our row has no id: the task page, framed by MTurk only, every item on it
    page1 = enter(W[0], AS[0], PRODUCTION)
    r = anon.get(page1)
    html = r.content.decode()
    assert r.status_code == 200 and 'data-kind="clusters"' in html
    assert html.count('class="cluster-item"') == n and 'id="skip"' not in html and 'id="progress"' not in html
    _frame_headers(r)

    # the answer is validated and bounded like the in-house one: nothing is stored for a bad one
    canadian = [i for i, it in enumerate(items) if it["text"] == "Canadian"]
    canada = [i for i, it in enumerate(items) if it["text"] == "Canada"]
    assert len(canadian) == 2 and len(canada) == 2
    assert items[canadian[0]]["doc"] != items[canadian[1]]["doc"] and items[canada[0]]["doc"] != items[canada[1]]["doc"]
    alone = [i for i in range(n) if i not in canadian + canada]
    x, y = alone[0], alone[-1]
    good = [_groups(n, canadian, canada), _groups(n, canadian + [x]), _groups(n, canada, [x, y])]
    bad = [({"groups": [[i] for i in range(n - 1)]}, f"item {n - 1} is in no group"),
           ({"groups": [[i] for i in range(n)] + [[n]]}, f"expected item numbers 0-{n - 1}"),
           ({"groups": [[0, 1], [1]] + [[i] for i in range(2, n)]}, "item 1 is already in groups[0]"),
           ({"groups": [[i] for i in range(n)], "note": "hi"}, "unknown field"),
           ({"groups": [[True]] + [[i] for i in range(1, n)]}, "expected item numbers"),
           ("[" * 10 + "]" * 10, "expected an object with a list"),
           ("x" * (600 * 1024), "at most")]
    for value, says in bad:
        r = answer(page1, value, 400)
        assert says in r.content.decode(), says
    assert not task.answers.exists()
    r = answer(page1, good[0])
    html = r.content.decode()
    assert f'action="{PRODUCTION}/mturk/externalSubmit"' in html and f'name="assignmentId" value="{AS[0]}"' in html
    lease1 = Assignment.objects.get(annotator__external_id=W[0])
    assert f'name="unpooled_token" value="{lease1.token}"' in html
    _frame_headers(r, finish=True)
    a1 = Answer.objects.get(assignment=lease1)
    assert a1.quarantined and a1.weight == 0 and a1.cost_cents == 0 and a1.seconds == 95.5

    # ---- reconciliation finds the HIT by its RequesterAnnotation, adopts it and confirms worker 1's answer
    stub.add_response("list_hits", {"HITs": [{"HITId": HIT, "RequesterAnnotation": item_token(task)}],
                                    "NumResults": 1}, {"MaxResults": 100})
    listed1 = {"AssignmentId": AS[0], "WorkerId": W[0], "HITId": HIT, "AssignmentStatus": "Submitted",
               "Answer": _answer_xml(lease1.token)}
    stub.add_response("list_assignments_for_hit", {"Assignments": [listed1], "NumResults": 1},
                      {"HITId": HIT, "MaxResults": 100, "AssignmentStatuses": ["Submitted"]})
    out = reconcile_corpus(corpus, backend)
    assert out["adopted"] == {item_token(task): HIT} and out["confirmed"] == 1
    hit.refresh_from_db()
    assert hit.hit_id == HIT and hit.status == "posted"
    a1.refresh_from_db()
    assert not a1.quarantined and a1.weight == 1 and a1.cost_cents == 135 + 27  # the reward and Amazon's 20% fee
    rep = publish(corpus, backend, BASE)
    assert (rep.created, rep.errors) == (0, [])  # nothing is posted twice (nor tried: the stub has no answer)
    # ---- once the id is known, another HIT id is refused; workers 2 and 3 answer
    r = anon.get(entry, {**signed, "hitId": "3" + "Z" * 29, "assignmentId": AS[1], "workerId": W[1],
                         "turkSubmitTo": SANDBOX})
    assert r.status_code == 403 and not Assignment.objects.filter(annotator__external_id=W[1]).exists()
    page2 = enter(W[1], AS[1])
    answer(page2, good[1])
    # worker 3 takes longer than the service's lease: MTurk's assignment is still theirs, and a reload of the HIT
    # (MTurk's frame loads the entry link again) shows the task, not "time ran out"
    page3 = enter(W[2], AS[2])
    Assignment.objects.filter(annotator__external_id=W[2]).update(expires=timezone.now() - timedelta(minutes=1))
    r = anon.get(page3)  # the page itself, reloaded alone: back to the HIT, not to the in-house queue
    html = r.content.decode()
    assert r.status_code == 410 and 'id="reopen"' in html and "/annotate/next/" not in html
    _frame_headers(r)
    assert enter(W[2], AS[2]) == page3
    r = anon.get(page3)
    assert r.status_code == 200 and 'data-kind="clusters"' in r.content.decode()
    answer(page3, good[2])
    # the forger: made-up worker and assignment ids, an answer that would merge everything
    forged_page = enter(FORGER, FORGED_AS)
    answer(forged_page, {"groups": [list(range(n))]})
    # the thief: a real worker on MTurk whose assignment carries worker 1's token, without an answer of their own
    leases = {lease.annotator.external_id: lease for lease in task.assignments.select_related("annotator")}
    assert task.answers.filter(quarantined=True).count() == 3   # workers 2, 3 and the forger: nothing counts yet
    assert Task.objects.get(pk=task.pk).status == Task.Status.OPEN

    # ---- the sync: what Amazon lists is confirmed and approved; the thief's assignment is rejected
    listed = [{**listed1, "AssignmentStatus": "Submitted"}] + [
        {"AssignmentId": AS[i], "WorkerId": W[i], "HITId": HIT, "AssignmentStatus": "Submitted",
         "Answer": _answer_xml(leases[W[i]].token)} for i in (1, 2)] + [
        {"AssignmentId": THIEF_AS, "WorkerId": THIEF, "HITId": HIT, "AssignmentStatus": "Submitted",
         "Answer": _answer_xml(lease1.token)}]
    stub.add_response("list_assignments_for_hit", {"Assignments": listed, "NumResults": 4},
                      {"HITId": HIT, "MaxResults": 100,
                       "AssignmentStatuses": ["Submitted", "Approved"]})
    for aid in AS:
        stub.add_response("approve_assignment", {}, {"AssignmentId": aid})
    stub.add_response("reject_assignment", {}, {"AssignmentId": THIEF_AS, "RequesterFeedback": ANY})
    stub.add_response("update_expiration_for_hit", {}, {"HITId": HIT, "ExpireAt": ANY})  # complete: expired
    rep = collect(corpus, backend)
    assert (rep.confirmed, rep.approved, rep.rejected) == (3, 3, 1), rep.to_dict()
    hit.refresh_from_db()
    assert hit.approved == sorted(AS) and hit.rejected == [THIEF_AS] and hit.status == "expired"
    counted = Answer.objects.filter(task=task, weight__gt=0)
    assert sorted(counted.values_list("annotator__external_id", flat=True)) == sorted(W)
    assert [a.cost_cents for a in counted] == [135 + 27] * 3  # what the HIT paid each, with the fee
    forged = Answer.objects.get(annotator__external_id=FORGER)
    assert forged.quarantined and forged.weight == 0 and forged.cost_cents == 0  # never counts, never paid

    # ---- aggregation: a pair is together when two of the three answers say so
    task.refresh_from_db()
    assert task.status == Task.Status.COMPLETE and task.result["answers"] == 3
    together = sorted([sorted(canadian), sorted(canada)])
    assert [c for c in task.result["clusters"] if len(c) > 1] == together
    assert sorted(i for c in task.result["clusters"] for i in c) == list(range(n))
    pairs = n * (n - 1) // 2
    # pairs some answer decides differently: the two majority pairs, worker 2's x with each Canadian, x-y
    split = 2 + 2 + 1
    agr = task.result["agreement"]
    assert agr["pairs"] == pairs and agr["unanimous"] == pytest.approx(1 - split / pairs)
    # answers 1-2 differ on canada and x-canadians (3 pairs), 1-3 on canadian and x-y (2), 2-3 on all 5
    assert agr["rand"] == pytest.approx(1 - (3 + 2 + 5) / (3 * pairs))
    assert agr["support"] == [pytest.approx(2 / 3, abs=1e-4)] * 2
    assert agr["kappa"] is not None and 0 < agr["kappa"] < 1

    # ---- the clusters are the entity-level truth across documents: NIL clustering scores use them
    identity = clustering.nil_identity(corpus)
    key = lambda i: (items[i]["doc"], items[i]["cluster"])  # noqa: E731
    assert identity[key(canadian[0])] == identity[key(canadian[1])] != identity[key(canada[0])]
    assert identity[key(canada[0])] == identity[key(canada[1])] and identity[key(x)] != identity[key(canadian[0])]
    from unpooled.service.evaluations import entities
    from unpooled.service.evaluations.models import EntityScore

    entities.compute(corpus)
    es = EntityScore.objects.order_by("-id").first()
    assert es.details["nil_across_documents"] is True
    r = es.details["metrics"]["nil_b3_r"]
    # the submission (the documents' own labels) keeps each document's entities apart: it misses the two merges
    assert r["value"] is not None and r["value"] < 1 and r["lo"] <= r["value"] <= r["hi"]


def test_a_new_exhaustive_layer_replaces_the_clustering_hit(shared_data, tmp_path, stubbed):
    """The clustering task is the one task a newer one replaces (another document's layer adds items): the old
    HIT stops at the next sync (its worker's answer is paid, and counts for nothing), the new task gets its own."""
    backend, stub = stubbed
    corpus, _, _ = load_redocred_subset(shared_data, tmp_path, 4, "turkclu2")
    sample = SimpleNamespace(indices=[0, 1], inclusion=[0.5] * 2, stage=[1] * 2, scheme="uniform")
    actions.request_exhaustive(corpus, sample)
    crowd = SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0)
    crowd.run(kinds=[Kind.ENTITIES, Kind.RELATIONS])
    st = actions.settings_for(corpus)
    st.backend = "mturk"
    st.save()
    old = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.OPEN)
    h_old, h_new = "3" + "O" * 29, "3" + "P" * 29
    stub.add_response("create_hit", {"HIT": {"HITId": h_old}},
                      {**_create(old), "Reward": "1.20", "MaxAssignments": 3})
    assert publish(corpus, backend, BASE).created == 1
    hit_old = Hit.objects.get(task=old)
    signed = dict(parse_qsl(hits.task_query(old, hit_old)))
    anon = Client(enforce_csrf_checks=True)
    r = anon.get(reverse("annotation:mturk"), {**signed, "hitId": h_old, "assignmentId": AS[0], "workerId": W[0],
                                               "turkSubmitTo": SANDBOX})
    lease = Assignment.objects.get(task=old, annotator__external_id=W[0])
    n_old = len(old.payload["items"])
    assert anon.post(r["Location"], {"answer": json.dumps(_groups(n_old))}).status_code == 200

    # a third document is sampled and annotated: a new clustering task over more items, the old one cancelled
    actions.request_exhaustive(corpus, SimpleNamespace(indices=[2], inclusion=[0.5], stage=[2], scheme="uniform"))
    crowd.run(kinds=[Kind.ENTITIES, Kind.RELATIONS])
    old.refresh_from_db()
    new = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.OPEN)
    assert old.status == Task.Status.CANCELLED and len(new.payload["items"]) > n_old
    # the old HIT's page takes nobody new
    r = anon.get(reverse("annotation:mturk"), {**signed, "hitId": h_old, "assignmentId": AS[1], "workerId": W[1],
                                               "turkSubmitTo": SANDBOX})
    assert r.status_code == 409 and "needs no more answers" in r.content.decode()

    stub.add_response("create_hit", {"HIT": {"HITId": h_new}}, {**_create(new), "Reward": "1.20", "MaxAssignments": 3})
    assert publish(corpus, backend, BASE).created == 1
    listed = [{"AssignmentId": AS[0], "WorkerId": W[0], "HITId": h_old, "AssignmentStatus": "Submitted",
               "Answer": _answer_xml(lease.token)}]
    for hid, got in ((h_old, listed), (h_new, [])):
        stub.add_response("list_assignments_for_hit", {"Assignments": got, "NumResults": len(got)},
                          {"HITId": hid, "MaxResults": 100, "AssignmentStatuses": ["Submitted", "Approved"]})
        if got:
            stub.add_response("approve_assignment", {}, {"AssignmentId": AS[0]})
            stub.add_response("update_expiration_for_hit", {}, {"HITId": h_old, "ExpireAt": ANY})
    rep = collect(corpus, backend)
    assert (rep.confirmed, rep.approved, rep.rejected) == (1, 1, 0)
    assert Hit.objects.get(task=old).status == "expired" and Hit.objects.get(task=new).status == "posted"
    ans = Answer.objects.get(assignment=lease)
    assert not ans.quarantined and ans.weight == 0 and ans.cost_cents == 120 + 24  # paid, with the fee
    assert Task.objects.get(pk=new.pk).status == Task.Status.OPEN and not new.answers.exists()


def _create(task) -> dict:
    token = request_token("task", task.pk, 0)
    return {"Title": "Which of these names are the same entity?", "Description": ANY, "Keywords": ANY,
            "AssignmentDurationInSeconds": 1800, "LifetimeInSeconds": ANY, "AutoApprovalDelayInSeconds": ANY,
            "Question": external_question(question_url(BASE, task, Hit(task=task, request_token=token))),
            "RequesterAnnotation": item_token(task), "UniqueRequestToken": token, "QualificationRequirements": ANY}


def test_hit_descriptions_say_what_and_how_big(corpus):
    """The description a worker reads before accepting names the task and its size (it was the title again)."""
    from unpooled.service.crowd.mturk_sync import TITLES, hit_description

    for task in Task.objects.filter(corpus=corpus).select_related("document"):
        got = hit_description(task)
        assert got != TITLES[task.kind] and len(got) <= 2000  # Amazon's limit
        if task.kind == Kind.ENTITIES:
            assert f"a text of about {len(task.document.text.split()):,} words" in got
        elif task.kind == Kind.RELATIONS:
            assert got.startswith(f"For {len(task.payload['pairs']):,} pairs of names")
        elif task.kind == Kind.CLUSTERS:
            assert got.startswith(f"Group {len(task.payload['items']):,} names")
