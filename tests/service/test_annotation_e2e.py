"""End to end on Re-DocRED documents: verification and exhaustive annotation through the simulated crowd.

With annotator accuracy 0.8 and k = 3, the aggregated verification labels' accuracy against the
gold layer must match the binomial expectation (majority of three: 0.896) and Dawid–Skene must do
at least as well; the exhaustive entity and relation layers aggregate to the gold layer as well.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from django.db.models import Sum

from unpooled.core.corpus import iter_documents
from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.controls import create_verify_controls
from unpooled.service.annotation.models import Answer, Assignment, Kind, Label, Task, TaskRequest
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.crowd.simulated import SimulatedCrowd, exhaustive_accuracy, verification_accuracy
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import RelationInstance

pytestmark = pytest.mark.django_db

N_DOCS = 60


def _subset(shared_data, tmp_path, n=N_DOCS):
    data = json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:n]
    path = tmp_path / "redocred-subset.json"
    path.write_text(json.dumps(data))
    return path


def _system_jsonl(path_in, out_path, *, rng, keep=0.5):
    """A system's output: part of the gold relations (correct) and as many wrong ones (a gold entity
    pair of one sentence with a relation that does not hold between them)."""
    rng = np.random.default_rng(rng)
    n = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for doc in iter_documents(path_in, "docred"):
            ents = doc.entities
            preds = sorted({r.predicate for r in doc.relations})
            holds = {(r.subject, r.object): set() for r in doc.relations}
            for r in doc.relations:
                holds[(r.subject, r.object)].add(r.predicate)
            rows = []
            for r in doc.relations:
                if rng.random() < keep:
                    rows.append((ents[r.subject].mentions[0], r.predicate, ents[r.object].mentions[0], r.subject, r.object))
            for _ in range(len(rows)):
                h, t = rng.choice(len(ents), size=2, replace=False)
                wrong = [p for p in preds if p not in holds.get((int(h), int(t)), set())]
                if wrong:
                    rows.append((ents[h].mentions[0], wrong[int(rng.integers(len(wrong)))], ents[t].mentions[0], int(h), int(t)))
            for a, pred, b, h, t in rows:
                out.write(json.dumps({"doc": doc.id, "predicate": pred,
                                      "subject": {"start": a.start, "end": a.end, "entity": f"{doc.id}/{h}"},
                                      "object": {"start": b.start, "end": b.end, "entity": f"{doc.id}/{t}"}}) + "\n")
                n += 1
    return n


@pytest.fixture
def world(shared_data, tmp_path):
    path = _subset(shared_data, tmp_path)
    corpus = do_load_corpus(path, "docred", "redocred-e2e")
    sys_path = tmp_path / "system.jsonl"
    _system_jsonl(path, sys_path, rng=1)
    res = do_ingest_submission(sys_path, corpus.name, "team-a", "run-1", "jsonl")
    assert res.ok, res.report.to_dict()
    return corpus, res.submission, path


@pytest.mark.engine_neutral
def test_verification_and_exhaustive_annotation_match_binomial_expectation(world):
    """300 items verified and 4 documents annotated exhaustively by a crowd of accuracy 0.8, 3 answers each (a
    majority label wrong where that of every answer would be: 0.8 is outside the tolerance at this size)."""
    corpus, sub, _ = world
    st = actions.settings_for(corpus)
    st.control_share = 0.0  # accuracy here is about aggregation; controls are tested below
    st.save()
    ids = np.array(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))
    ids = np.random.default_rng(0).choice(ids, size=300, replace=False).tolist()
    res = actions.request_verification(sub, ids)
    assert res.created == res.keys > 280 and res.reused == 0
    assert res.committed_cents == res.created * 3 * st.reward_verify_cents

    # exhaustive annotation of 4 documents (uniform sample, inclusion 4/N)
    from unpooled.service.annotation.sampling import sample_documents

    sample, made = sample_documents(corpus, "uniform", 4, seed=3)
    assert made == 4
    crowd = SimulatedCrowd.uniform(corpus, 6, accuracy=0.8, rng=11)
    report = crowd.run()
    assert report.by_kind[Kind.VERIFY] == 3 * res.created
    assert report.by_kind[Kind.ENTITIES] == 3 * 4 and report.by_kind[Kind.RELATIONS] > 0
    assert not Task.objects.filter(corpus=corpus, status=Task.Status.OPEN).exists()

    # k distinct annotators per item, every answer costed
    per_task = Answer.objects.filter(task__corpus=corpus).values_list("task_id", "annotator_id")
    seen = {}
    for t, a in per_task:
        seen.setdefault(t, []).append(a)
    assert all(len(v) == 3 == len(set(v)) for v in seen.values())
    assert not Answer.objects.filter(task__corpus=corpus, cost_cents=0).exists()

    n = res.created
    maj = verification_accuracy(corpus, method="majority")
    assert maj["items"] == n
    expected = 0.8 ** 3 + 3 * 0.8 ** 2 * 0.2  # 0.896
    tol = 3.3 * math.sqrt(expected * (1 - expected) / n)
    assert abs(maj["accuracy"] - expected) <= tol, (maj, expected, tol)
    written = actions.reaggregate(corpus)
    assert written > 0
    ds = verification_accuracy(corpus, method="dawid-skene")
    assert ds["items"] == n
    assert ds["accuracy"] >= maj["accuracy"] - 4 / n, (ds, maj)  # at most 4 items fewer right (2 here)

    ex = exhaustive_accuracy(corpus)
    assert ex["documents"] == 4
    # a mention survives when at least 2 of 3 annotators marked it right: >= 0.896 in expectation
    assert ex["mention_recall"] >= 0.85 and ex["mention_precision"] >= 0.85
    assert ex["pair_accuracy"] >= 0.85
    print(f"\nverification: majority {maj['accuracy']:.4f}, Dawid-Skene {ds['accuracy']:.4f} on {n} items "
          f"(expected {expected:.3f} ± {tol:.3f}); exhaustive {ex}")


def test_label_reuse_and_budget(world, tmp_path):
    corpus, sub, path = world
    st = actions.settings_for(corpus)
    st.control_share = 0.0
    st.save()
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:40]
    first = actions.request_verification(sub, ids)
    assert first.created == first.keys
    SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=1).run()
    # a second system predicting the same instances: every label is reused, no task is created
    again = tmp_path / "again.jsonl"
    again.write_text("".join(
        json.dumps({"doc": i.document.doc_id, "predicate": i.predicate,
                    "subject": {"start": i.subject_start, "end": i.subject_end, "entity": "s%d" % i.pk},
                    "object": {"start": i.object_start, "end": i.object_end, "entity": "o%d" % i.pk}}) + "\n"
        for i in RelationInstance.objects.filter(pk__in=ids).select_related("document")))
    res2 = do_ingest_submission(again, corpus.name, "team-b", "run-1", "jsonl")
    assert res2.ok
    ids2 = list(RelationInstance.objects.filter(submission=res2.submission).values_list("pk", flat=True))
    before = Task.objects.count()
    second = actions.request_verification(res2.submission, ids2)
    assert second.reused == second.keys == first.keys and second.created == 0
    assert Task.objects.count() == before

    # budget: the submission may commit at most 10 tasks' worth
    from unpooled.service.annotation.models import SubmissionBudget

    rest = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[40:80]
    third_sub = sub
    SubmissionBudget.objects.create(submission=third_sub, limit_cents=first.committed_cents + 10 * 3 * st.reward_verify_cents)
    res3 = actions.request_verification(third_sub, rest)
    assert res3.created == 10 and res3.over_budget == res3.keys - 10
    assert TaskRequest.objects.filter(submission=third_sub).count() == first.keys + 10

    # the corpus budget caps every submission together: answers paid plus answers still expected
    SubmissionBudget.objects.filter(submission=third_sub).delete()
    committed = actions.corpus_committed_cents(corpus)
    assert committed == Answer.objects.filter(task__corpus=corpus).aggregate(s=Sum("cost_cents"))["s"] + 10 * 3 * 5
    st.budget_cents = committed + 4 * 3 * st.reward_verify_cents
    st.save()
    more = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[80:100]
    res4 = actions.request_verification(sub, more)
    assert res4.created == 4 and res4.over_budget == res4.keys - 4


def test_leases_expire_and_no_annotator_answers_twice(world):
    from datetime import timedelta

    from django.utils import timezone

    from unpooled.service.annotation.models import Annotator

    corpus, sub, _ = world
    st = actions.settings_for(corpus)
    st.control_share = 0.0
    st.save()
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:2]
    actions.request_verification(sub, ids)
    a, b, c, d = (Annotator.objects.create(backend="simulated", external_id=f"w{i}") for i in range(4))
    now = timezone.now()
    la = leasing.lease_next(a, now=now)
    assert leasing.lease_next(a, now=now) == la  # a reload does not take a second item
    actions.submit_answer(la, {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}, now=now)
    la2 = leasing.lease_next(a, now=now)
    assert la2.task_id != la.task_id  # never the same item twice
    lb, lc = leasing.lease_next(b, now=now), leasing.lease_next(c, now=now)
    assert lb.task_id == lc.task_id == la.task_id  # oldest first, up to k = 3 slots
    assert leasing.lease_next(d, now=now).task_id != la.task_id  # the first task's 3 slots are taken
    # c abandons its lease: after expiry the slot returns and d can take it
    later = now + timedelta(seconds=st.lease_seconds + 1)
    Assignment.objects.filter(annotator=d).update(status=Assignment.Status.EXPIRED)
    actions.submit_answer(lb, {"relation": "none", "subject_ok": True, "object_ok": True, "link_ok": None}, now=now)
    got = leasing.lease_next(d, now=later)
    assert got.task_id == la.task_id
    assert Assignment.objects.get(pk=lc.pk).status == Assignment.Status.EXPIRED


def test_controls_block_a_bad_annotator_and_discount_pending_answers(world):
    corpus, sub, _ = world
    st = actions.settings_for(corpus)
    st.control_share = 0.5
    st.block_min_controls = 5
    st.block_below_accuracy = 0.6
    st.save()
    assert create_verify_controls(corpus, 30, rng=2) == 30
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:60]
    actions.request_verification(sub, ids)
    from unpooled.service.crowd.simulated import SimulatedWorker

    crowd = SimulatedCrowd(corpus, [SimulatedWorker("good-1", 0.95), SimulatedWorker("good-2", 0.95),
                                    SimulatedWorker("good-3", 0.95), SimulatedWorker("good-4", 0.95),
                                    SimulatedWorker("spammer", 0.2)], rng=5)
    report = crowd.run()
    assert "spammer" in report.blocked
    from unpooled.service.annotation.models import Annotator

    spam = Annotator.objects.get(external_id="spammer")
    assert spam.blocked and "gold controls" in spam.blocked_reason
    # the spammer's answers to tasks still open when blocked were discounted; every task still
    # completed with 3 counted answers from others
    for t in Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False):
        assert t.status == Task.Status.COMPLETE
        assert t.answers.filter(weight__gt=0).count() == 3
    assert leasing.lease_next(spam) is None
    assert Label.objects.filter(corpus=corpus).exists()


def test_two_stage_document_sample_through_the_service(world):
    from unpooled.service.annotation.actions import AnnotationError
    from unpooled.service.annotation.models import ExhaustiveDocument
    from unpooled.service.annotation.sampling import inclusion_by_document, sample_documents

    corpus, _, _ = world
    s1, made = sample_documents(corpus, "two-stage", 20, seed=1)
    assert made == 4 and len(s1) == 4
    assert set(inclusion_by_document(corpus).values()) == {4 / N_DOCS}  # until stage 2 exists: a uniform sample
    with pytest.raises(AnnotationError, match="stage 1 is not annotated yet: 4 of 4 documents"):
        sample_documents(corpus, "two-stage", 20, seed=1)
    SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0).run(kinds=[Kind.ENTITIES])
    s2, made2 = sample_documents(corpus, "two-stage", 20, seed=1)
    assert made2 == len(s2) > 0
    rows = ExhaustiveDocument.objects.filter(corpus=corpus)
    assert all(r.inclusion == 1.0 for r in rows.filter(stage=1))
    assert all(0 < r.inclusion <= 1 for r in rows.filter(stage=2))
    assert abs(sum(1 for _ in rows.filter(stage=2)) - 16) <= 10  # Poisson: expected 16
    with pytest.raises(AnnotationError, match="both stages are already drawn"):
        sample_documents(corpus, "two-stage", 20, seed=1)
    with pytest.raises(AnnotationError, match="already has an exhaustive sample"):
        sample_documents(corpus, "uniform", 5)
