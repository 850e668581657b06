"""Entity scores in the service: computed with the evaluation from the verification answers and the exhaustive
layer, stored, shown on the submission page, the API and the leaderboard tab; what cannot be scored says why."""

from __future__ import annotations

import json
import math

import pytest

from unpooled.cli.main import main
from unpooled.service.evaluations.models import EntityScore

from ..conftest import load_redocred_subset
from .test_annotation_e2e import _system_jsonl

pytestmark = pytest.mark.django_db


def _metrics(es):
    return es.details["metrics"]


def test_redocred_entity_scores_with_intervals_and_no_linking(shared_data, tmp_path, capsys):
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 40, "entc", team="DocRED-original", run="hwe")
    noisy_path = tmp_path / "noisy.jsonl"
    _system_jsonl(path, noisy_path, rng=3, keep=0.4)
    from unpooled.service.submissions.actions import do_ingest_submission

    noisy = do_ingest_submission(noisy_path, "entc", "noisy", "run-1", "jsonl").submission
    code = main(["evaluate", "--corpus", "entc", "--accuracy", "0.9", "--labels", "150", "--documents", "10",
                 "--json"])
    capsys.readouterr()
    assert code == 0
    for sub in (hwe, noisy):
        es = EntityScore.objects.filter(submission=sub).order_by("-id").first()
        assert es is not None and es.documents == 10
        m = _metrics(es)
        with capsys.disabled():
            print("\n", sub, {k: (v["value"], v["lo"], v["hi"], v.get("reason", "")[:30]) for k, v in m.items()},
                  es.details["verification"], es.details["parts"], es.details["argument_share"])
        for k in ("mention_p", "mention_r", "mention_f1", "nil_b3_p", "nil_b3_r", "nil_b3_f1"):
            v = m[k]
            assert v["value"] is not None and 0 <= v["lo"] <= v["value"] <= v["hi"] <= 1, (k, v)
        # the noisy system gives no entity types: typing is not scored, and says why
        if sub == noisy:
            assert m["typing"]["value"] is None and "without entity types" in m["typing"]["reason"]
        else:
            assert m["typing"]["lo"] <= m["typing"]["value"] <= m["typing"]["hi"] and m["typing"]["value"] > 0.9
        for k in ("link_p", "link_r", "link_f1"):
            assert m[k]["value"] is None and "no KB links" in m[k]["reason"]
