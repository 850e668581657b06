"""``evaluate``: draws, label reuse across submissions, joint scores with intervals, leaderboard rows."""

from __future__ import annotations

import json

import pytest

from unpooled.cli.main import main
from unpooled.service.evaluations import status
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset
from .test_annotation_e2e import _system_jsonl

pytestmark = pytest.mark.django_db


def _true_precision(corpus, sub) -> float:
    from unpooled.service.evaluations.truth import true_precision

    return true_precision(corpus, sub.pk)


@pytest.mark.engine_neutral
def test_evaluate_cli_scores_every_submission_with_intervals(shared_data, tmp_path, capsys):
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 40, "evalc", team="DocRED-original", run="hwe")
    noisy_path = tmp_path / "noisy.jsonl"
    _system_jsonl(path, noisy_path, rng=3, keep=0.4)
    noisy = do_ingest_submission(noisy_path, "evalc", "noisy", "run-1", "jsonl").submission
    # stored keys are the core's instance keys (labels join on them)
    from unpooled.core.matching import InstanceRef

    i = RelationInstance.objects.filter(submission=noisy).select_related("document").first()
    assert InstanceRef(i.document.doc_id, i.subject_start, i.subject_end, i.predicate, i.object_start, i.object_end,
                       i.value).key == i.key

    code = main(["evaluate", "--corpus", "evalc", "--accuracy", "0.9", "--labels", "150", "--documents", "8",
                 "--json"])
    got = capsys.readouterr()
    rows = json.loads(got.out)
    # 8 of 40 documents are below the measured minimum (FEW_DOCUMENTS): drawn, but warned about
    assert "warning: the planned exhaustive sample: 8 documents (uniform) are few for recall" in got.err
    assert code == 0 and len(rows) == 2
    assert set(rows[0]) == {"submission", "team", "run", "level", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1",
                            "f1_lo", "f1_hi", "labels_new", "labels_reused", "p_true", "r_true", "f1_true",
                            "p_cs_lo", "p_cs_hi", "r_cs_lo", "r_cs_hi", "f1_cs_lo", "f1_cs_hi"}
    for r in rows:  # the anytime-valid intervals hold the fixed-n ones
        for k in ("p", "r", "f1"):
            assert r[f"{k}_cs_lo"] <= r[f"{k}_lo"] + 1e-9 and r[f"{k}_hi"] <= r[f"{k}_cs_hi"] + 1e-9
    by = {r["team"]: r for r in rows}
    for team, sub in (("DocRED-original", hwe), ("noisy", noisy)):
        r = by[team]
        assert 0 <= r["p_lo"] <= r["p"] <= r["p_hi"] <= 1 and 0 <= r["r_lo"] <= r["r"] <= r["r_hi"] <= 1
        assert r["labels_new"] + r["labels_reused"] > 0
        truth = _true_precision(corpus, sub)
        with capsys.disabled():
            print(f"\n{team}: true precision {truth:.3f}, estimate {r['p']:.3f} [{r['p_lo']:.3f}, {r['p_hi']:.3f}], "
                  f"recall {r['r']:.3f} [{r['r_lo']:.3f}, {r['r_hi']:.3f}]; new {r['labels_new']}, "
                  f"reused {r['labels_reused']}")
        assert r["p_lo"] - 0.03 <= truth <= r["p_hi"] + 0.03
    assert by["DocRED-original"]["p"] > by["noisy"]["p"] + 0.2
    assert Draw.objects.filter(submission=noisy).count() == 150
    # a new submission overlapping the others reuses their labels
    again = tmp_path / "again.jsonl"
    again.write_text("".join(line for k, line in enumerate(noisy_path.read_text().splitlines(True)) if k % 2 == 0))
    copycat = do_ingest_submission(again, "evalc", "copycat", "run-1", "jsonl").submission
    from unpooled.service.annotation.models import Label

    labelled = set(Label.objects.filter(corpus=corpus).values_list("key", flat=True))
    code = main(["evaluate", "--corpus", "evalc", "--accuracy", "0.9", "--labels", "150", "--json"])
    got = capsys.readouterr()
    rows = json.loads(got.out)
    assert "warning: 8 documents (uniform) are few for recall" in got.err  # the sample drawn, not the default
    cc = next(r for r in rows if r["team"] == "copycat")
    drawn = set(Draw.objects.filter(submission=copycat).values_list("key", flat=True))
    assert cc["labels_reused"] == len(drawn & labelled) > 0
    assert cc["labels_new"] == len(drawn - labelled)
    assert Score.objects.filter(submission=noisy).count() == 2  # re-scored with the new labels

    code = main(["evaluate", "--corpus", "evalc"])
    out = capsys.readouterr().out
    assert code == 0 and "team/run" in out and "90% intervals" in out

    # the leaderboard page: newest score of each submission, tie groups, chart, provenance of the numbers
    from django.test import Client

    html = Client().get("/corpora/evalc/leaderboard/").content.decode()
    assert html.count("<tr data-submission=") == 3 and "labelled draws" in html and "exhaustive documents" in html
    assert 'id="f1-chart"' in html and 'id="pr-chart"' in html and html.count("<svg") == 2
    assert html.index('data-v="DocRED-original/hwe"') < html.index('data-v="noisy/run-1"')  # (hover texts name others)
    assert "No scores at this level yet" in Client().get("/corpora/evalc/leaderboard/?level=entity").content.decode()
    assert Client().get("/corpora/evalc/leaderboard/?level=bogus").status_code == 404


@pytest.mark.engine_neutral
def test_evaluate_task_reports_true_precision(shared_data, tmp_path):
    from unpooled.service.evaluations.tasks import evaluate_corpus

    load_redocred_subset(shared_data, tmp_path, 20, "evtask")
    out = evaluate_corpus.call("evtask", accuracy=1.0, labels=60, documents=4, levels=["instance"])
    (row,) = out["rows"]
    assert row["p_true"] == pytest.approx(1.0, abs=0.02) and row["p_lo"] <= row["p_true"] + 0.02


def test_evaluate_errors(capsys):
    with pytest.raises(SystemExit) as exc:  # a usage error (cli.main.PROBABILITY)
        main(["evaluate", "--corpus", "x", "--accuracy", "2"])
    assert exc.value.code == 2 and "argument --accuracy: expected a number from 0 to 1" in capsys.readouterr().err


def test_evaluate_refuses_a_negative_document_count(shared_data, tmp_path, capsys):
    load_redocred_subset(shared_data, tmp_path, 5, "evneg")
    with pytest.raises(SystemExit) as exc:  # a usage error (cli.main.integer)
        main(["evaluate", "--corpus", "evneg", "--documents", "-1"])
    assert exc.value.code == 2 and "argument --documents: expected an integer from 0 to" in capsys.readouterr().err


@pytest.mark.engine_neutral
def test_evaluate_task_scores_every_level_and_keeps_the_truth(shared_data, tmp_path, client):
    from unpooled.service.evaluations.tasks import evaluate_corpus

    load_redocred_subset(shared_data, tmp_path, 15, "evlevels")
    out = evaluate_corpus.call("evlevels", accuracy=1.0, labels=40, documents=3, levels=["instance", "entity"])
    assert sorted(r["level"] for r in out["rows"]) == ["entity", "instance"]
    assert out["truth_inside"][1] == 6  # P, R, F1 at two levels
    for level in ("instance", "entity"):
        s = Score.objects.filter(level=level).latest("id")
        assert s.details["truth"]["p"] is not None and status.progress(s.submission)["labels_new"] > 0
        html = client.get(f"/corpora/evlevels/leaderboard/?level={level}").content.decode()
        assert f"{s.draws} labelled draws" in html and "true P" in html and ('class="in"' in html or 'class="out"' in html)
        # provenance of this level's own draws: new + reused labels never exceed the distinct drawn instances
        for sc in Score.objects.filter(level=level):
            pv = sc.details["provenance"]
            assert sc.labels_new == pv["new"] and sc.labels_reused == pv["reused"]
            assert 0 < pv["new"] + pv["reused"] <= pv["drawn"]
            assert pv["drawn"] == Draw.objects.filter(submission=sc.submission, level=level).values("key").distinct().count()


def test_evaluate_again_after_a_crash_draws_and_asks_only_what_is_missing(shared_data, tmp_path):
    """The batch ``evaluate`` killed in the middle (here: its crowd raises once the draws and requests are stored)
    and run again: every submission has the draws it was asked for, once (it drew ``labels`` more on every run:
    600 draws where 300 were planned), no key is asked for twice, and the submissions are published."""
    from unpooled.service.annotation.models import TaskRequest
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import SimulatedBackend
    from unpooled.service.evaluations.run import evaluate
    from unpooled.service.submissions.models import Submission

    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 12, "evalk", team="DocRED-original", run="hwe")
    noisy_path = tmp_path / "noisy.jsonl"
    _system_jsonl(path, noisy_path, rng=3, keep=0.4)
    noisy = do_ingest_submission(noisy_path, "evalk", "noisy", "run-1", "jsonl").submission

    class Dies(SimulatedBackend):
        def collect(self, corpus):
            super().collect(corpus)
            raise KeyboardInterrupt("killed")  # after the answers, before any score

    corpus = Corpus.objects.get(name="evalk")
    with pytest.raises(KeyboardInterrupt):
        evaluate(corpus, crowd=Dies(accuracy=0.9), labels=40, documents=4)
    assert Score.objects.filter(submission__corpus=corpus).count() == 0
    requests = TaskRequest.objects.filter(submission__in=[hwe, noisy]).count()
    evaluate(corpus, crowd=SimulatedBackend(accuracy=0.9), labels=40, documents=4)
    for sub in (hwe, noisy):
        assert Draw.objects.filter(submission=sub).count() == 40
        assert Submission.objects.get(pk=sub.pk).status == Submission.Status.PUBLISHED
    assert TaskRequest.objects.filter(submission__in=[hwe, noisy]).count() == requests  # nothing asked twice
    assert Score.objects.filter(submission__corpus=corpus).count() == 2


def test_a_crowd_that_answers_later_stops_the_rounds_until_its_labels_are_in(shared_data, tmp_path):
    """The batch run with a target width and an in-house crowd (nobody has answered yet): one round of draws, scored
    with the labels so far, the open tasks warned about and nothing published -- no round of more draws while the
    labels asked for are still outstanding (they would not narrow an interval)."""
    from unpooled.service.annotation.models import Task
    from unpooled.service.crowd.base import InHouseBackend
    from unpooled.service.evaluations.run import evaluate
    from unpooled.service.submissions.models import Submission

    corpus, hwe, _ = load_redocred_subset(shared_data, tmp_path, 12, "evlate", team="DocRED-original", run="hwe")
    rep = evaluate(corpus, crowd=InHouseBackend(), labels=20, documents=0, target_width=0.05, step=20,
                   max_labels=200)
    open_tasks = Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False).count()
    assert rep.rounds == 1 and rep.open_tasks == open_tasks > 0 and "still open" in rep.warnings[0]
    assert Draw.objects.filter(submission=hwe).count() == 20
    assert len(rep.rows) == 1 and Submission.objects.get(pk=hwe.pk).status != Submission.Status.PUBLISHED
