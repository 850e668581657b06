"""The organiser's option to stop annotating a pair once their anytime-valid F1 intervals are separated
(``unpooled evaluate --separate A B``, service/evaluations/run.py ``separate``): it stops, says which is better and
reports the draws it did not make."""

from __future__ import annotations

import json

import pytest

from unpooled.cli.main import main
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.actions import do_ingest_submission

from ..conftest import load_redocred_subset
from .test_annotation_e2e import _system_jsonl

pytestmark = pytest.mark.django_db


@pytest.mark.engine_neutral
def test_a_clearly_different_pair_is_separated_early_and_the_savings_reported(shared_data, tmp_path, capsys):
    corpus, good, path = load_redocred_subset(shared_data, tmp_path, 30, "evsep", team="DocRED-original", run="hwe")
    poor_path = tmp_path / "poor.jsonl"
    _system_jsonl(path, poor_path, rng=3, keep=0.3)
    poor = do_ingest_submission(poor_path, "evsep", "poor", "run-1", "jsonl").submission
    code = main(["evaluate", "--corpus", "evsep", "--accuracy", "1.0", "--documents", "10", "--separate",
                 str(good.pk), str(poor.pk), "--max-labels", "400", "--json"])
    got = json.loads(capsys.readouterr().out)
    with capsys.disabled():
        print(f"\nseparate: {got}")
    assert code == 0 and got["separated"] and got["better"] == good.pk
    draws = {int(k): v for k, v in got["draws"].items()}
    assert draws == {s.pk: Draw.objects.filter(submission=s).count() for s in (good, poor)}
    assert got["labels_saved"] == 800 - sum(draws.values()) > 0
    lo_good, _ = got["f1_cs"][str(good.pk)]
    _, hi_poor = got["f1_cs"][str(poor.pk)]
    assert hi_poor < lo_good
    # the newest scores are those of the last round (the earlier rounds' are superseded)
    s = Score.objects.filter(submission=good).latest("id")
    assert s.details["anytime"]["f1_cs_lo"] == lo_good


def test_separate_errors(shared_data, tmp_path, capsys):
    _, sub, _ = load_redocred_subset(shared_data, tmp_path, 5, "evsep2")
    assert main(["evaluate", "--corpus", "evsep2", "--separate", str(sub.pk), str(sub.pk)]) == 3
    assert "--separate" in capsys.readouterr().err
    assert main(["evaluate", "--corpus", "evsep2", "--separate", str(sub.pk), "99999"]) == 3
    assert "no submission 99999" in capsys.readouterr().err
