"""The human reference: the exhaustive annotation scored as a submission of its own, on the simulated crowd
(unpooled.service.evaluations.reference, unpooled.core.estimators.reference)."""

from __future__ import annotations

import math

import pytest

from unpooled.core.estimators.reference import f1_independent, found_by_reference, recall_by_capture
from unpooled.core.estimators.results import Estimate
from unpooled.core.errors import InvalidInputError
from unpooled.service.annotation import actions as ann
from unpooled.service.annotation import leasing
from unpooled.service.annotation.models import Answer, Backend, Kind
from unpooled.service.crowd.simulated import SimulatedCrowd
from unpooled.service.evaluations import lifecycle, reference
from unpooled.service.evaluations.leaderboard import leaderboard
from unpooled.service.evaluations.models import Score
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import Submission

from ..conftest import load_redocred_subset, scratch
from .test_annotation_e2e import _system_jsonl

S = Submission.Status


# ---------------------------------------------------------------------------- the core's pieces

def test_recall_by_capture_by_hand():
    # 80 found at 0.9 correct, 20 missed at 0.5: 72 / (72 + 10)
    e = recall_by_capture(80, 0.9, 0.0, 20, 0.5, 0.0)
    assert e.value == pytest.approx(72 / 82) and e.lo <= e.value <= e.hi
    # a share's standard error is at least the plus-two binomial one: sqrt(t(1-t)/(n+2)), t = (n p + 1)/(n + 2)
    t1, t0 = (72 + 1) / 82, (10 + 1) / 22
    s1, s0 = math.sqrt(t1 * (1 - t1) / 82), math.sqrt(t0 * (1 - t0) / 22)
    assert e.se == pytest.approx(math.hypot(80 * 10 / 82 ** 2 * s1, 20 * 72 / 82 ** 2 * s0))
    assert recall_by_capture(10, 1.0, 0.0, 0, math.nan, math.nan).value == 1.0  # nothing missed
    assert math.isnan(recall_by_capture(0, math.nan, math.nan, 0, math.nan, math.nan).value)
    wide = recall_by_capture(80, 0.9, 0.05, 20, 0.5, 0.2)  # above the floors: the delta method as given
    assert wide.se == pytest.approx(math.hypot(80 * 10 / 82 ** 2 * 0.05, 20 * 72 / 82 ** 2 * 0.2))
    # nothing of the missed group judged correct: the interval is not a point
    edge = recall_by_capture(150, 1.0, 0.0, 30, 0.0, 0.0)
    assert edge.value == 1.0 and 0.95 < edge.lo < 0.99
    with pytest.raises(InvalidInputError, match=r"p_found: expected a number in \[0, 1\], got 1.5"):
        recall_by_capture(1, 1.5, 0, 1, 0.5, 0)
    with pytest.raises(InvalidInputError, match=r"confidence: expected a number in \(0, 1\), got 1"):
        recall_by_capture(1, 0.5, 0, 1, 0.5, 0, confidence=1)
    f = f1_independent(e, e)
    assert f.value == pytest.approx(e.value)
    # F1's interval lies within what P's and R's allow: F1(p_lo, r_lo) <= lo, hi <= F1(p_hi, r_hi)
    P = Estimate.of(1.0, 0.15, 0.807, 1.0, level=0.9, interval="wilson", n=40, method="simple")
    R = Estimate.of(0.96, 0.03, 0.887, 0.987, level=0.9, interval="wilson", n=60, method="capture")
    f = f1_independent(P, R)
    assert (f.method, f.interval.method, f.interval.level, f.n) == ("independent", "f1-region", 0.9, 40)
    assert 2 * 0.807 * 0.887 / (0.807 + 0.887) - 1e-9 <= f.lo < f.value < f.hi <= 2 * 0.987 / 1.987 + 1e-9
    # P's interval reaches 0: so does F1's
    zero = f1_independent(Estimate.of(0.1, 0.05, 0.0, 0.3, level=0.9, interval="wilson", n=40, method="simple"), R)
    assert zero.lo == 0.0 and zero.hi < 1


def test_found_by_reference_needs_the_fact_in_the_same_sentence():
    facts = [("d", 0, "p", 1, 2), ("d", 3, "q", 1, 2)]
    cands = [("d", 0, "p", {1}, {2}), ("d", 1, "p", {1}, {2}), ("d", 0, "p", {2}, {1}), ("d", 3, "q", {5, 1}, {2}),
             ("e", 0, "p", {1}, {2})]
    assert found_by_reference(facts, cands).tolist() == [True, False, False, True, False]


# ---------------------------------------------------------------------------- the service, end to end

def run_reference(shared_data, tmp_path, monkeypatch, *, seed: int, docs: int = 30, exhaustive: int = 8,
                  name: str = "human"):
    """Re-DocRED subset; DocRED-original and a noisy system evaluated by the simulated crowd (5 annotators); then
    the human reference's samples verified by a crowd of 8 (the makers of a document's annotation excluded)."""
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, docs, name, team="DocRED-original", run="hwe")
    st = ann.settings_for(corpus)
    st.backend, st.exhaustive_documents, st.min_draws, st.max_draws = Backend.SIMULATED, exhaustive, 20, 40
    st.levels = "instance"
    st.save()
    noisy = tmp_path / f"noisy{seed}.jsonl"
    _system_jsonl(path, noisy, rng=seed, keep=0.6)
    other = do_ingest_submission(noisy, name, "noisy", "r1", "jsonl").submission
    from unpooled.service.crowd import base

    # the lifecycle's simulated crowd (5 annotators) answers with this run's seed
    monkeypatch.setitem(base.SimulatedBackend.__init__.__kwdefaults__, "seed", seed)
    assert lifecycle.advance(hwe) == S.PUBLISHED and lifecycle.advance(other) == S.PUBLISHED
    reference.request(corpus, rng=seed)
    SimulatedCrowd.uniform(corpus, 8, rng=seed + 100).run()
    ann.reaggregate(corpus)
    score = reference.score(corpus)
    return corpus, score, hwe, other


@pytest.mark.engine_neutral
@pytest.mark.django_db(transaction=True, reset_sequences=True)
def test_human_reference_end_to_end(shared_data, tmp_path, monkeypatch):
    """The whole flow (30 Re-DocRED documents, 8 annotated exhaustively, DocRED-original and a noisy system, crowd
    accuracy 0.8), one seed: the reference is scored apart, on the leaderboard and the pages, and its 90% intervals
    hold its truth (its P over its instances, its R over the protocol's within-sentence facts of the annotated
    documents, from the gold layer) at this seed.  How often they do is measured by ``unpooled simulate reference``
    (a Monte Carlo): one seed here is a deterministic check that fails when an estimate goes wrong (the recall
    without its missed facts misses the truth), not a coverage claim (seeds 2 and 3 of this world miss F1's truth,
    with 20 refits of the rates as with 100: the reference's recall under-covers, issue 21's notes).  The rows' ids
    start afresh (the draws' seeds include the submission's id), so the world is the same whatever ran before."""
    corpus, score, hwe, other = run_reference(shared_data, tmp_path, monkeypatch, seed=0)
    assert score.details["truth"]["covered"] == {"p": True, "r": True, "f1": True}, (
        [(getattr(score, k + "_lo"), getattr(score, k), getattr(score, k + "_hi")) for k in ("p", "r", "f1")],
        score.details["truth"])
    ref = reference.reference_of(corpus)
    assert ref.is_reference and ref.team.name == "[human reference]" and ref.period is None
    assert ref.status == S.PUBLISHED
    # no answer to an item the reference asked for comes from a maker of that document's exhaustive annotation
    counted = Answer.objects.filter(task__requests__submission=ref, task__kind=Kind.VERIFY, weight__gt=0)
    assert counted.exists()
    for a in counted.select_related("task"):
        assert not Answer.objects.filter(annotator_id=a.annotator_id, task__document_id=a.task.document_id,
                                         task__kind__in=[Kind.ENTITIES, Kind.RELATIONS]).exists()
    # it is scored apart: the systems' pool has two systems, the reference has its own estimator
    assert score.estimator == "reference/capture" and 0 <= score.p_lo <= score.p <= score.p_hi <= 1
    assert 0 <= score.r_lo <= score.r <= score.r_hi <= 1 and 0 <= score.f1_lo <= score.f1 <= score.f1_hi <= 1
    assert not Score.objects.filter(submission=ref).exclude(estimator="reference/capture").exists()
    sample = score.details["sample"]
    # no gold controls in this corpus: the rates come from Dawid-Skene alone, and the score says so
    assert any("no gold controls" in w for w in score.details["warnings"])
    assert sample["found"] > 0 and sample["missed"] >= 0 and score.details["truth"]["gold"] > 0
    # the leaderboard: a marked row without a rank, placed by its F1
    rows = leaderboard(corpus)["rows"]
    marked = [r for r in rows if r["reference"]]
    assert len(marked) == 1 and marked[0]["rank"] is None and marked[0]["name"].startswith("human reference")
    assert sorted(r["rank"] for r in rows if not r["reference"]) == [1, 2] or len(rows) == 3
    from django.test import Client

    page = Client().get(f"/corpora/{corpus.name}/leaderboard/").content.decode()
    assert 'class="reference"' in page and "human reference (exhaustive annotation)" in page
    sub_page = Client().get(f"/submissions/{ref.pk}/")
    assert sub_page.status_code == 200 and "reference/capture" in sub_page.content.decode()
    assert Client().get(f"/api/submissions/{ref.pk}").json()["reference"] is True
    api = Client().get(f"/api/corpora/{corpus.name}/leaderboard").json()["rows"]
    assert [r["reference"] for r in api].count(True) == 1
    assert next(r for r in api if r["reference"])["rank"] is None
    # a team cannot take the reserved name
    from unpooled.service.corpora.actions import ActionError

    with pytest.raises(ActionError, match="reserved for the human reference"):
        do_ingest_submission(tmp_path / "noisy1.jsonl", corpus.name, "[human reference]", "x", "jsonl")


@pytest.mark.django_db
def test_human_reference_on_a_tac_corpus_routes_its_items_away_from_the_documents_annotators(tmp_path):
    """The TAC-format fixture corpus (no gold layer: answers given here): one document annotated exhaustively by
    three annotators from the Cold Start submission's own mentions, one relation per compatible pair; the
    reference is built from it, asks for verification, and none of its items goes to those three."""
    from types import SimpleNamespace

    from unpooled.service.annotation.models import Annotator, Task
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.submissions.models import RelationInstance, SubmissionMention

    from ..conftest import FIXTURES
    from .test_api import kb_text

    corpus = do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "tacref", schema="tac-kbp")
    path = scratch("cs.kb")
    path.write_text(kb_text("cs"))
    sys_ = do_ingest_submission(path, "tacref", "red", "cs", "tac").submission
    inst = RelationInstance.objects.filter(submission=sys_, object__isnull=False).select_related("document").first()
    doc = inst.document
    rows = list(SubmissionMention.objects.filter(submission=sys_, document=doc).select_related("entity")
                .order_by("start", "-end"))
    mentions, last = [], -1
    for m in rows:  # no overlaps, as the entity task requires
        if m.start >= last and m.entity.type:
            mentions.append({"start": m.start, "end": m.end, "type": m.entity.type, "cluster": m.entity_id,
                             "link": ""})
            last = m.end
    idx = list(corpus.documents.order_by("id").values_list("id", flat=True)).index(doc.pk)
    ann.request_exhaustive(corpus, SimpleNamespace(indices=[idx], inclusion=[1.0], stage=[1], scheme="uniform"))
    makers = [Annotator.objects.create(backend="simulated", external_id=f"maker{i}") for i in range(3)]
    others = [Annotator.objects.create(backend="simulated", external_id=f"other{i}") for i in range(3)]
    for a in makers:
        lease = leasing.lease_next(a, kind=Kind.ENTITIES, corpus=corpus)
        ann.submit_answer(lease, {"mentions": mentions})
    schema = corpus.schema.schema()
    rel = Task.objects.get(corpus=corpus, kind=Kind.RELATIONS)
    ms, pairs = rel.payload["mentions"], rel.payload["pairs"]
    answer = {}
    for i, (x, y) in enumerate(pairs):
        ta, tb = ms[x]["type"], ms[y]["type"]
        fit = sorted(r.name for r in schema.canonical_relations if ta in r.subject_types and tb in r.object_types)
        answer[str(i)] = [f"ab:{fit[0]}"] if fit else []
    assert any(answer.values()), "the fixture document should have a pair some relation allows"
    for a in makers:
        ann.submit_answer(leasing.lease_next(a, kind=Kind.RELATIONS, corpus=corpus), {"pairs": answer})
    got = reference.request(corpus, draws=20, rng=0)
    ref = reference.reference_of(corpus)
    assert got["reference"] == ref.pk and ref.instances.count() == sum(bool(v) for v in answer.values())
    assert ref.mentions.count() == len(ms)
    asked = Task.objects.filter(requests__submission=ref, kind=Kind.VERIFY)
    assert asked.exists()
    for a in makers:  # the document's annotators are offered none of the reference's items
        lease = leasing.lease_next(a, kind=Kind.VERIFY, corpus=corpus)
        assert lease is None or not asked.filter(pk=lease.task_id).exists()
        if lease is not None:
            leasing.release(lease)
    lease = leasing.lease_next(others[0], kind=Kind.VERIFY, corpus=corpus)
    assert lease is not None and asked.filter(pk=lease.task_id).exists()
    # nor leased one when it is asked for by id (the lock's own check, past the queue's)
    from django.utils import timezone

    assert leasing._try_lease(lease.task_id, makers[0], timezone.now()) is None
    # an answer a maker sends anyway (a forged or stale lease) does not count
    from unpooled.service.annotation.models import Assignment

    forged = Assignment.objects.create(task=lease.task, annotator=makers[0], token="forged-token",
                                       leased=lease.leased, expires=lease.expires)
    a = ann.submit_answer(forged, {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None})
    assert a.weight == 0.0
    # scoring before any label: every number is missing, nothing crashes
    s = reference.score(corpus)
    assert s.p is None and s.r is None and ref.status != S.PUBLISHED


@pytest.mark.engine_neutral
@pytest.mark.django_db
def test_evaluate_cli_scores_the_human_reference(shared_data, tmp_path, capsys):
    """``unpooled evaluate --reference`` on a Re-DocRED subset: the systems' rows, then the reference's, with its
    truth from the gold layer; in the table, a row of its own after the systems'."""
    import json

    from unpooled.cli.main import main

    load_redocred_subset(shared_data, tmp_path, 10, "evref", team="DocRED-original", run="hwe")
    code = main(["evaluate", "--corpus", "evref", "--documents", "3", "--labels", "30", "--reference", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and [r.get("reference", False) for r in rows] == [False, True]
    human = rows[1]
    assert 0 <= human["p_lo"] <= human["p"] <= human["p_hi"] <= 1 and human["draws"] > 0
    assert 0 <= human["r_lo"] <= human["r"] <= human["r_hi"] <= 1 and human["truth"]["gold"] > 0
    assert main(["evaluate", "--corpus", "evref", "--reference"]) == 0
    out = capsys.readouterr().out
    assert any(line.lstrip().startswith("- human reference (exhaustive annotation)") for line in out.splitlines())


@pytest.mark.engine_neutral
@pytest.mark.django_db
def test_the_references_precision_interval_is_informative_with_gold_controls(shared_data, tmp_path, capsys):
    """``unpooled evaluate --reference`` as the demo runs it (a simulated crowd of accuracy 0.8, 100 gold controls
    offered at the default share, 8 documents annotated exhaustively, the reference's 200 draws), on 30 Re-DocRED
    documents whose DocRED-original run is as good as the reference (true precision 1 for both): every verified
    item is nearly always correct.  The reference's 90% precision interval is at most 0.45 wide and holds the
    truth (0.3 while the rates' bootstrap refits started from the point fit's posteriors: started afresh, as the
    point fit is, seed 2's false-positive rate, anchored by 6 wrong controls, ranges 0.19-0.61 over the refits and
    its interval is [0.60, 1]; ``unpooled simulate reference``, 60 trials, crowd 0.75: width 0.25 -> 0.28 at 60
    instances, 0.15 -> 0.17 at 1,500, coverage 0.98 -> 1.00 and 0.97 -> 0.97).  Before, the rates were taken from Dawid-Skene on those items alone (which cannot identify them) and
    the reference's precision was 0 in [0, 1] at both seeds; with the rates anchored by the controls
    (confusion.ITEMS_MIN_LR) seed 2's estimate of 1 still had [0.716, 1] (the votes' variance at the bound); now
    0.995 in [0.900, 1] and 1 in [0.817, 1].  Seed 2 (the harder of the two) here; ``unpooled simulate reference``
    measures the width and coverage over many worlds."""
    import json

    from unpooled.cli.main import main

    seed = 2
    name = f"refci{seed}"
    load_redocred_subset(shared_data, tmp_path, 30, name, team="DocRED-original", run="hwe", control_share=0.1)
    code = main(["evaluate", "--corpus", name, "--documents", "8", "--labels", "60", "--reference", "--json",
                 "--seed", str(seed)])
    rows = json.loads(capsys.readouterr().out)
    human = rows[-1]
    assert code == 0 and human["run"] == "human reference" and human["draws"] == 200
    width = human["p_hi"] - human["p_lo"]
    assert width < 0.45, {k: human[k] for k in ("p", "p_lo", "p_hi", "r", "truth")}
    details = Score.objects.filter(submission_id=human["submission"]).order_by("-id").first().details
    assert not any("no gold controls" in w for w in details["warnings"])
    # whether one run's interval holds the truth is a coin of 90%: that is what ``unpooled simulate reference``
    # counts (seed 0 here: 0.965 [0.825, 0.994] once the reference's 200 draws count over its ~150 distinct
    # instances, estimators/finite.py; truth 1)
    assert human["p_hi"] > 0.95 and human["p_lo"] < human["p"], human
