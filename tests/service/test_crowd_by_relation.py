"""A crowd whose accuracy depends on the relation, through the service: the simulated crowd follows
``--relation-accuracy``, the confusions are fitted per relation, and the organiser console shows the fit per
relation with the weak ones named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from unpooled.cli.main import main
from unpooled.service.annotation.models import Answer, Kind
from unpooled.service.evaluations import rates

from ..conftest import load_redocred_subset
from .test_annotation_e2e import _system_jsonl

pytestmark = pytest.mark.django_db

SPEC = "P17,P131=0.97/0.07; *=0.7/0.5"


@pytest.mark.engine_neutral
def test_relation_dependent_crowd_through_the_service(shared_data, tmp_path, capsys, client):
    from unpooled.service.submissions.actions import do_ingest_submission

    corpus, _, path = load_redocred_subset(shared_data, tmp_path, 20, "crowdrel", team="DocRED-original", run="hwe",
                                           control_share=0.25)
    _system_jsonl(path, tmp_path / "noisy.jsonl", rng=3, keep=0.4)  # a system with wrong instances too
    do_ingest_submission(tmp_path / "noisy.jsonl", "crowdrel", "noisy", "run-1", "jsonl")
    assert main(["evaluate", "--corpus", "crowdrel", "--relation-accuracy", SPEC, "--labels", "160",
                 "--documents", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 and 0 <= rows[0]["p_lo"] <= rows[0]["p"] <= rows[0]["p_hi"] <= 1
    # the simulated crowd answered each relation at its own rates (the gold layer's truth)
    from unpooled.service.crowd.simulated import GoldOracle

    oracle = GoldOracle(corpus)
    said, truth, easy = [], [], []
    for a in Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY).select_related("task"):
        said.append(bool(a.correct))
        truth.append(oracle.verify(a.task))
        easy.append(a.task.group in ("P17", "P131"))
    said, truth, easy = map(np.array, (said, truth, easy))
    assert easy.sum() > 50 and (~easy).sum() > 50
    assert np.mean(said[easy & truth]) > 0.9 and np.mean(said[~easy & ~truth]) > 0.3
    # the confusions are per (annotator, relation); the console names the weak relations
    answers = rates.verify_answers(corpus)
    assert answers.n_strata > 2 and answers.relation_strata["P17"] != answers.relation_strata["P131"]
    fit = {f["relation"]: f for f in rates.crowd_fit(corpus)}
    hard = [f for r, f in fit.items() if r not in ("P17", "P131") and f["items"] >= 10]
    # (a hard relation's rates are weakly identified by 3 answers an item: its sensitivity is pulled up along the
    # likelihood's ridge; the false-positive rates, far apart, are not)
    assert hard and not fit["P17"]["weak"] and not fit["P131"]["weak"]
    # relations with few controls share the rates of those whose answers agree alike (relation_groups.pool_thin_strata):
    # P17 and P131 with the easy ones, the others in groups of their own; a group of weak relations anchored by
    # about ten controls drifts along the ridge too (P27's group: 0.82 / 0.34 against a true 0.7 / 0.5)
    assert fit["P27"]["pooled"] and fit["P150"]["pooled"]
    assert (fit["P17"]["sens"], fit["P17"]["fpr"]) == pytest.approx((fit["P131"]["sens"], fit["P131"]["fpr"]),
                                                                     abs=0.01)  # one group, workers' mixes apart
    # (true 0.07; the group's controls weighted to its items' mix of relations anchor it with fewer answers' worth)
    assert max(fit["P17"]["fpr"], fit["P131"]["fpr"]) < 0.15 < 0.3 < min(f["fpr"] for f in hard)
    assert min(fit["P17"]["separation"], fit["P131"]["separation"]) > max(f["separation"] for f in hard) + 0.2
    User.objects.create_user("org", password="pw-org-123", is_staff=True)
    client.login(username="org", password="pw-org-123")
    html = client.get(reverse("organiser:annotation"), {"corpus": corpus.name}).content.decode()
    assert 'id="crowd-by-relation"' in html and "<code>P17</code>" in html and "<code>P150</code>" in html
    # relations the crowd judges weakly are asked with more answers per item, and the request says what it costs
    from unpooled.service.annotation.actions import request_verification, settings_for
    from unpooled.service.annotation.models import Task

    weak = rates.weak_relations(corpus)
    assert weak and not weak & {"P17", "P131"}
    # evaluate asked those relations' items for more answers once the first answers showed them weak (reopening the
    # answered ones), and each submission's plan says how many and what they cost
    from django.db.models import Count, Q

    from unpooled.service.submissions.models import Submission

    st = settings_for(corpus)
    more = (Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False,
                                answers_needed=st.answers_weak_relation)
            .annotate(got=Count("answers", filter=Q(answers__weight__gt=0))))
    assert more.filter(group__in=weak).exists() and not more.filter(group__in=["P17", "P131"]).exists()
    assert {(t.status, t.got) for t in more} == {(Task.Status.COMPLETE, st.answers_weak_relation)}
    plans = [(s.plan or {}).get("labels", {}) for s in Submission.objects.filter(corpus=corpus)]
    assert sum(p.get("more_answers", 0) for p in plans) == more.count()
    assert sum(p.get("more_answers_cents", 0) for p in plans) == more.count() * (
        st.answers_weak_relation - st.answers_per_item) * st.reward_verify_cents
    _system_jsonl(path, tmp_path / "other.jsonl", rng=9, keep=0.6)
    other = do_ingest_submission(tmp_path / "other.jsonl", "crowdrel", "other", "run-1", "jsonl").submission
    res = request_verification(other, list(other.instances.values_list("pk", flat=True)), weak_relations=weak)
    made = Task.objects.filter(requests__submission=other, requests__committed_cents__gt=0)
    assert res.more_answers == made.filter(group__in=weak).count() > 0
    assert set(made.filter(group__in=weak).values_list("answers_needed", flat=True)) == {st.answers_weak_relation}
    assert set(made.exclude(group__in=weak).values_list("answers_needed", flat=True)) == {st.answers_per_item}
    assert res.more_answers_cents == res.more_answers * (st.answers_weak_relation - st.answers_per_item) * \
        st.reward_verify_cents
    # the organiser groups (up to) three hard relations the crowd judges alike: they share one stratum, named on the
    # console with its relations; weak groups ask more answers for each of their relations; the release says which
    # group each answer's relation is in, and the core reads the same strata back from it
    from unpooled.core.offline import read_answers
    from unpooled.service.annotation.release import export_release

    hard_rels = sorted(f["relation"] for f in hard if f["relation"] != "(other)")[:3]
    assert len(hard_rels) >= 2
    st.relation_groups = "hard: " + ", ".join(hard_rels)
    st.save()
    n_before = answers.n_strata
    answers = rates.verify_answers(corpus)
    assert len({answers.relation_strata[r] for r in hard_rels}) == 1 and answers.n_strata == n_before - len(hard_rels) + 1
    fit = {f["relation"]: f for f in rates.crowd_fit(corpus)}
    label = f"hard ({', '.join(hard_rels)})"
    assert label in fit and fit[label]["relations"] == hard_rels
    assert fit[label]["items"] == sum(f["items"] for f in hard if f["relation"] in hard_rels)
    if fit[label]["weak"]:
        assert set(hard_rels) <= rates.weak_relations(corpus)
    export_release(corpus, tmp_path / "release")
    lines = [json.loads(x) for x in (tmp_path / "release" / "answers.jsonl").read_text().splitlines()]
    grouped = [x for x in lines if x.get("relation") in hard_rels]
    assert grouped and all(x["group"] == "hard" for x in grouped)
    assert not any("group" in x for x in lines if x.get("relation") not in hard_rels)
    back, rep = read_answers(tmp_path / "release" / "answers.jsonl")
    # (numbered over the relations the file holds, not the schema's: the same partition of the items)
    assert rep.ok and "hard" in back.relation_strata and not set(hard_rels) & set(back.relation_strata)
    assert len(set(back.stratum.tolist())) == len(set(answers.stratum.tolist()))


@pytest.mark.engine_neutral
def test_the_lifecycle_asks_weak_relations_for_more_answers(shared_data, tmp_path, monkeypatch):
    """On demand (upload -> sample -> annotate -> publish), the items asked before the answers showed their relation
    weak get the missing answers once the pilot's labels are in; the status page's plan counts them and their cost."""
    from django.db.models import Count, Q

    from unpooled.core.annotation.crowd import parse_relation_accuracy
    from unpooled.service.annotation.actions import settings_for
    from unpooled.service.annotation.controls import create_verify_controls
    from unpooled.service.annotation.models import Task
    from unpooled.service.crowd import base
    from unpooled.service.evaluations import lifecycle, status
    from unpooled.service.submissions.actions import do_ingest_submission
    from unpooled.service.submissions.models import Submission

    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 15, "liferel", team="DocRED-original", run="hwe",
                                             control_share=0.25)
    _system_jsonl(path, tmp_path / "noisy.jsonl", rng=3, keep=0.4)
    noisy = do_ingest_submission(tmp_path / "noisy.jsonl", "liferel", "noisy", "run-1", "jsonl").submission
    st = settings_for(corpus)
    st.backend, st.exhaustive_documents, st.min_draws, st.max_draws = "simulated", 2, 50, 60
    st.save()
    create_verify_controls(corpus, 50, rng=1)
    # hard relations at 0.7 / 0.5, accuracy 0.6 on their controls, which are offered where the items need them and
    # so are mostly of hard relations: against the fixed bar (0.6) the crowd was blocked to the last and the items
    # asking for 5 answers never completed; the bar follows the crowd's accuracy on the same relations' controls
    crowd = base.SimulatedBackend(seed=1, relation_rates=parse_relation_accuracy("P17,P131=0.97/0.07; *=0.7/0.5"))
    monkeypatch.setattr(base, "backend_for", lambda corpus, **kw: crowd)  # the corpus's crowd judges by relation
    for sub in (hwe, noisy):
        assert lifecycle.advance(sub) == Submission.Status.PUBLISHED, sub.error
    from unpooled.service.annotation.models import Annotator

    assert Annotator.objects.filter(backend="simulated", blocked=True).count() <= 1  # of 5 (all, at a fixed 0.6)
    # raised to 5 answers; an item every unblocked simulated annotator answered completes with what it has
    more = (Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False,
                                answers_needed__gt=st.answers_per_item)
            .annotate(got=Count("answers", filter=Q(answers__weight__gt=0, answers__annotator__blocked=False))))
    assert more.exists() and not more.filter(group__in=["P17", "P131"]).exists()
    assert {t.status for t in more} == {Task.Status.COMPLETE}
    assert all(st.answers_per_item < t.got <= t.answers_needed == st.answers_weak_relation for t in more)
    plans = [Submission.objects.get(pk=s.pk).plan.get("labels", {}) for s in (hwe, noisy)]
    assert sum(p.get("more_answers", 0) for p in plans) == more.count()
    assert status.progress(Submission.objects.get(pk=hwe.pk))["more_answers"] == plans[0].get("more_answers", 0)


def test_controls_are_offered_where_the_items_need_them(shared_data, tmp_path):
    """The lease queue offers the control whose relation's answered controls fall furthest short of its items'
    share (core/annotation/controls.py): controls made in the mix of the whole submission, items of one relation
    asked for, so every control leased is of that relation, the classes alternating, each control once."""
    from collections import Counter

    from unpooled.service.annotation import leasing
    from unpooled.service.annotation.actions import request_verification, submit_answer
    from unpooled.service.annotation.controls import create_verify_controls
    from unpooled.service.annotation.models import Annotator, Task
    from unpooled.service.submissions.models import RelationInstance

    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 20, "needy", control_share=1.0)
    create_verify_controls(corpus, 60, rng=0)
    groups = Counter(Task.objects.filter(corpus=corpus, is_control=True).values_list("group", flat=True))
    # the relation asked for: one with controls of both classes, not the controls' most common one
    both = [g for g in groups if Task.objects.filter(corpus=corpus, is_control=True, group=g,
                                                     control_answer__correct=True).exists()
            and Task.objects.filter(corpus=corpus, is_control=True, group=g, control_answer__correct=False).exists()]
    want = min(both, key=lambda g: (groups[g], g))
    assert groups[want] < max(groups.values())
    ids = list(RelationInstance.objects.filter(submission=sub, predicate=want).values_list("pk", flat=True))
    assert request_verification(sub, ids).created
    seen, classes = [], []
    for i in range(groups[want]):
        ann = Annotator.objects.create(backend="simulated", external_id=f"w{i % 3}-{i}")
        lease = leasing.lease_next(ann, kind=Kind.VERIFY, corpus=corpus, rng=i)
        assert lease.task.is_control and lease.task.group == want
        seen.append(lease.task_id)
        classes.append(lease.task.control_answer["correct"])
        submit_answer(lease, {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None})
    assert len(set(seen)) == len(seen)  # the least answered first: each of the relation's controls once
    assert abs(sum(classes) - (len(classes) - sum(classes))) <= 1 + abs(
        2 * Task.objects.filter(corpus=corpus, is_control=True, group=want, control_answer__correct=True).count()
        - groups[want])
