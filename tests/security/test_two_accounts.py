"""A team with two accounts tries to raise its own precision (security review 2026-11-26, N17; issue 23, build 2).

Two accounts the team controls join a crowd of eight honest annotators (accuracy 0.85, three answers per item) and
say "correct" to every item of the team's run, honestly to the rest.  The service's whole path runs: sampling,
the leases, the vote model, the published scores.  The published precision moves by less than its interval's
half-width, and the organiser's console names both accounts and the team; once they are blocked, the precision is
the honest crowd's again.
"""

from __future__ import annotations

import json

import pytest

from unpooled.service.annotation import actions
from unpooled.service.annotation.models import Annotator, Backend
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.crowd.base import SimulatedBackend
from unpooled.service.crowd.simulated import SimulatedCrowd, SimulatedWorker
from unpooled.service.evaluations.models import Score
from unpooled.service.evaluations.publish import score_corpus
from unpooled.service.evaluations.run import evaluate
from unpooled.service.organiser import console
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import RelationInstance

from ..service.test_annotation_e2e import _system_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.engine_neutral]

HONEST, ALTS, ACCURACY = 8, 2, 0.85


class Partisan(SimulatedBackend):
    """Eight honest simulated annotators and ``alts`` accounts of team ``team`` who say "holds" to its items."""

    def __init__(self, team: str, alts: int, *, seed: int):
        super().__init__(seed=seed)
        self.team, self.alts = team, alts

    def collect(self, corpus):
        hashes = set(RelationInstance.objects.filter(submission__corpus=corpus, submission__team__name=self.team)
                     .values_list("key_hash", flat=True))
        workers = ([SimulatedWorker(f"honest-{i}", ACCURACY) for i in range(HONEST)]
                   + [SimulatedWorker(f"alt-{i}", ACCURACY) for i in range(self.alts)])
        crowd = SimulatedCrowd(corpus, workers, rng=self.seed)
        honest_answer = crowd.answer_verify

        def answer_verify(w, task):
            if w.name.startswith("alt-") and not task.is_control and task.key_hash in hashes:
                return {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}
            return honest_answer(w, task)

        crowd.answer_verify = answer_verify
        return crowd.run().to_dict()


def _world(shared_data, tmp_path, name: str):
    data = json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:60]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    corpus = do_load_corpus(path, "docred", name)
    st = actions.settings_for(corpus)
    st.answers_per_item, st.control_share = 3, 0.0
    st.save()
    for team, seed in (("TeamA", 1), ("TeamB", 2), ("TeamC", 3)):
        out = tmp_path / f"{name}-{team}.jsonl"
        _system_jsonl(path, out, rng=seed)
        assert do_ingest_submission(out, name, team, "run-1", "jsonl").ok
    return corpus


def _precision(corpus, team: str) -> Score:
    return Score.objects.filter(submission__corpus=corpus, submission__team__name=team).order_by("-id").first()


def test_two_accounts_move_their_teams_precision_less_than_half_its_interval_and_are_flagged(shared_data, tmp_path):
    honest = _world(shared_data, tmp_path, "honest")
    evaluate(honest, crowd=Partisan("TeamA", 0, seed=5), labels=150, documents=4)
    attacked = _world(shared_data, tmp_path, "attacked")
    evaluate(attacked, crowd=Partisan("TeamA", ALTS, seed=5), labels=150, documents=4)
    base, hit = _precision(honest, "TeamA"), _precision(attacked, "TeamA")
    half = (base.p_hi - base.p_lo) / 2
    print(f"\nTeamA precision: honest crowd {base.p:.3f} [{base.p_lo:.3f}, {base.p_hi:.3f}], with two accounts "
          f"{hit.p:.3f} [{hit.p_lo:.3f}, {hit.p_hi:.3f}]: moved {hit.p - base.p:+.3f}, half-width {half:.3f}")
    assert abs(hit.p - base.p) < half
    # the console names both accounts and the team, and nobody else
    flagged = [a for a in console.alerts(attacked) if a.code == "partial_annotator"]
    named = {(a.message.split()[1], a.message.split(" team ")[1].split()[0]) for a in flagged}
    assert named == {("simulated:alt-0", "TeamA"), ("simulated:alt-1", "TeamA")}, [a.message for a in flagged]
    assert not [a for a in console.alerts(honest) if a.code == "partial_annotator"]
    # blocked, their answers stop counting: the precision is the honest crowd's again (within the run's noise)
    for ann in Annotator.objects.filter(backend=Backend.SIMULATED, external_id__startswith="alt-"):
        actions.block_annotator(ann, reason="answers take TeamA's side")
    assert "partial_annotator" not in {a.code for a in console.alerts(attacked)}  # dealt with
    after = next(s for s in score_corpus(attacked) if s.submission.team.name == "TeamA")
    print(f"after blocking them: {after.p:.3f} [{after.p_lo:.3f}, {after.p_hi:.3f}]")
    assert abs(after.p - base.p) < half and after.p < hit.p
