"""The migration that stores breakdowns once (evaluations 0007): every ``details['breakdown']`` of the scores becomes
a :class:`~unpooled.service.evaluations.models.Breakdown` row, one per breakdown computed (the copies a re-scoring
carried over share it), holding what the score's copy held; and backwards each score gets its copy again.  (The
shape 0007 wrote, breakdown VERSION 2, is read no more: such rows are computed again, 0008.)"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("evaluations", "0006_recall_protocol")]
AFTER = [("evaluations", "0007_breakdowns")]
#: what a breakdown of 0007 kept in its columns (the rest is its ``data``)
COLUMNS = ("version", "estimator", "level", "inputs", "computed")
FIGURES = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return MigrationExecutor(connection).loader.project_state(target).apps


def _old_breakdown(score, *, computed: str, inputs: str, p17: float) -> dict:
    """A breakdown as the scores kept it before 0007 (breakdown.py, VERSION 2)."""
    return {"version": 2, "estimator": score.estimator, "method": "ratio", "confidence": 0.9, "score": score.pk,
            "labelled_draws": 9, "own_draws": 4, "exhaustive_instances": 3, "exhaustive_documents": 2,
            "all": {"group": "all", "instances": 7, "n_draws": 4, "n_true": 3,
                    **{k: getattr(score, k) for k in FIGURES}, "p_few": False, "r_few": False, "f1_few": False},
            "relation": [{"group": "P17", "p": p17}], "entity_type": [], "missed": [[1, "d1", 0, 2, "P17", 5, 7]],
            "missed_total": 1, "truth_total": 3, "level": score.level, "computed": computed, "inputs": inputs}


def test_breakdowns_move_to_their_rows_and_back():
    from unpooled.service.corpora.actions import do_load_corpus
    from datetime import datetime

    from unpooled.service.evaluations.models import Score
    from unpooled.service.submissions.models import Submission, Team

    apps = _migrate(BEFORE)
    OldScore = apps.get_model("evaluations", "Score")
    corpus = do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", "mig", schema="tac-kbp")
    sub = Submission.objects.create(corpus=corpus, team=Team.objects.create(name="t"), run_id="r", format="jsonl")
    made = [OldScore.objects.create(submission_id=sub.pk, level="instance", estimator="joint/balance/overlap",
                                    p=p, p_lo=p - 0.1, p_hi=p + 0.1, r=0.5, r_lo=0.4, r_hi=0.6, f1=0.5, f1_lo=0.4,
                                    f1_hi=0.6, details={"ess": 3.0}) for p in (0.5, 0.5, 0.6)]
    plain = OldScore.objects.create(submission_id=sub.pk, level="relation", estimator="joint", details={"ess": 1.0})
    # the second score carried the first one's breakdown over (the same computation); the third has its own
    old = [_old_breakdown(made[0], computed="2026-01-01T10:00:00+00:00", inputs="aa", p17=0.25),
           _old_breakdown(made[1], computed="2026-01-01T10:00:00+00:00", inputs="aa", p17=0.25),
           _old_breakdown(made[2], computed="2026-01-02T10:00:00+00:00", inputs="bb", p17=0.75)]
    for s, bd in zip(made, old):
        OldScore.objects.filter(pk=s.pk).update(details={"ess": 3.0, "breakdown": bd})

    apps = _migrate(AFTER)
    Breakdown = apps.get_model("evaluations", "Breakdown")
    assert Breakdown.objects.count() == 2
    scores = {s.pk: s for s in Score.objects.filter(submission=sub)}
    assert scores[made[0].pk].breakdown_id == scores[made[1].pk].breakdown_id != scores[made[2].pk].breakdown_id
    assert scores[plain.pk].breakdown_id is None and scores[plain.pk].details == {"ess": 1.0}
    for s, bd in zip(made, old):
        assert scores[s.pk].details == {"ess": 3.0}
        row = Breakdown.objects.get(pk=scores[s.pk].breakdown_id)
        assert {c: getattr(row, c) for c in COLUMNS} == {**{c: bd[c] for c in COLUMNS},
                                                        "computed": datetime.fromisoformat(bd["computed"])}
        counts = {c: bd["all"][c] for c in ("instances", "n_draws", "n_true")}
        assert row.data == {**{k: v for k, v in bd.items() if k not in COLUMNS + ("score", "all")},
                            "all_counts": counts}

    apps = _migrate(BEFORE)
    OldScore = apps.get_model("evaluations", "Score")
    for s, bd in zip(made, old):
        assert OldScore.objects.get(pk=s.pk).details == {"ess": 3.0, "breakdown": bd}
    assert OldScore.objects.get(pk=plain.pk).details == {"ess": 1.0}
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # the newest schema, for the tests after
