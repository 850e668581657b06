"""The service-level coverage harness (`unpooled evaluate --coverage-trials`), small and deterministic: every trial
runs the whole evaluation on the real corpus and rolls it back, the report is the same for the same seed, and a
crowd too small for the items a weak relation asks more answers of still finishes them (a closed pool)."""

from __future__ import annotations

import pytest

from unpooled.core.annotation.crowd import parse_relation_accuracy
from unpooled.bench.coverage import run_coverage

from ..conftest import load_redocred_subset
from .test_annotation_e2e import _system_jsonl

pytestmark = pytest.mark.django_db

SPEC = "P17,P131=0.97/0.07; *=0.7/0.5"


def test_coverage_trials_roll_back_and_reproduce(shared_data, tmp_path, monkeypatch):
    from unpooled.service.annotation import actions
    from unpooled.service.annotation.models import Answer, Task
    from unpooled.service.evaluations import rates
    from unpooled.service.evaluations.models import Draw, Score
    from unpooled.service.submissions.actions import do_ingest_submission

    corpus, _, path = load_redocred_subset(shared_data, tmp_path, 12, "harness", team="DocRED-original", run="hwe")
    _system_jsonl(path, tmp_path / "noisy.jsonl", rng=3, keep=0.4)
    do_ingest_submission(tmp_path / "noisy.jsonl", "harness", "noisy", "run-1", "jsonl")
    before = (Task.objects.count(), Answer.objects.count(), Draw.objects.count(), Score.objects.count())
    short = []
    complete = actions.complete_task

    def completing(task, **kw):
        got = task.answers.filter(weight__gt=0, annotator__blocked=False).count()
        short.append(got < task.answers_needed)
        return complete(task, **kw)

    monkeypatch.setattr(actions, "complete_task", completing)
    monkeypatch.setattr(rates, "WEAK_MIN_ITEMS", 3)  # a small world: relations with a few items count as weak

    def table():
        # 3 annotators: an item of a weak relation asks 5 answers, more than the crowd has
        rep = run_coverage(corpus, 2, annotators=3, labels=60, documents=4, controls=30, control_share=0.2,
                           replicates=20, seed=4, relation_rates=parse_relation_accuracy(SPEC))
        return {(r["method"], r["system"], r["metric"]): r for r in rep.table()}

    first = table()
    assert any(short) and not all(short)  # some items closed with the answers the pool could give
    assert (Task.objects.count(), Answer.objects.count(), Draw.objects.count(), Score.objects.count()) == before
    current = {k: r for k, r in first.items() if k[0] == "current"}
    assert {k[1] for k in current} == {"DocRED-original/hwe", "noisy/run-1"}
    assert {k[2] for k in current} == {"p", "r", "f1"}
    for r in current.values():  # each trial published every figure (none stuck in annotation)
        assert r["trials"] == 2 and 0 <= r["coverage"] <= 1 and 0 < r["width"] <= 1, r
    assert first["current", "noisy/run-1", "p"]["truth"] < first["current", "DocRED-original/hwe", "p"]["truth"]
    second = table()
    assert second.keys() == first.keys()
    for k, r in first.items():
        assert second[k]["bias"] == pytest.approx(r["bias"], abs=1e-9) and second[k]["coverage"] == r["coverage"], k
    # the comparison methods fit the core's model of their source: the service's own source (semi: controls of
    # both classes, and the items agree with them) gives the published point estimates (a copy of the answers'
    # keying that ignored the strata read each answer's rates from the wrong row: P -3.8 points at 48 runs)
    for system in ("DocRED-original/hwe", "noisy/run-1"):
        assert first["votes/semi", system, "p"]["bias"] == pytest.approx(first["current", system, "p"]["bias"],
                                                                         abs=1e-9), system
