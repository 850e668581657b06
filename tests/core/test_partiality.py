"""Annotators who take one team's side (core.annotation.partiality): found when they do, rarely flagged when not."""

from __future__ import annotations

import numpy as np
import pytest

from unpooled.core.annotation.partiality import partiality


def _world(seed: int, *, colluders=(), favour_team=0, n_items=600, n_teams=5, honest=8, accuracy=0.85, k=3,
           opposes=False):
    """Items of ``n_teams`` teams (an item is in 1-2 teams' runs), each with its truth (60% correct); every item
    answered by ``k`` annotators drawn from ``honest`` honest ones of ``accuracy`` and the ``colluders``, who answer
    ``favour_team``'s items "correct" (or, ``opposes``, that team's items "wrong": a rival's) and the rest honestly."""
    rng = np.random.default_rng(seed)
    people = [f"h{i}" for i in range(honest)] + list(colluders)
    teams_of, answers = {}, []
    for item in range(n_items):
        teams = sorted(set(rng.choice(n_teams, size=int(rng.integers(1, 3)))))
        teams_of[item] = teams
        truth = rng.random() < 0.6
        for who in rng.choice(len(people), size=k, replace=False):
            name = people[who]
            if name in colluders and not opposes and favour_team in teams:
                said = True
            elif name in colluders and opposes and favour_team in teams:
                said = False
            else:
                said = truth if rng.random() < accuracy else not truth
            answers.append((item, name, said))
    return answers, teams_of


@pytest.mark.parametrize("seed", range(6))
def test_a_colluder_is_flagged_for_their_team_and_only_them(seed):
    answers, teams_of = _world(seed, colluders=("alt",))
    flags = [f for f in partiality(answers, teams_of) if f.flagged]
    assert {(f.annotator, f.team, f.direction) for f in flags} == {("alt", 0, "favours")}, flags


def test_a_saboteur_of_a_rival_is_flagged_as_opposing_it():
    """(Saying wrong to every team but one's own fails the gold controls, which are indistinguishable from items.)"""
    answers, teams_of = _world(1, colluders=("alt",), favour_team=2, opposes=True)
    flags = {(f.annotator, f.team, f.direction) for f in partiality(answers, teams_of) if f.flagged}
    assert flags == {("alt", 2, "opposes")}


def test_honest_crowds_are_rarely_flagged():
    """40 honest worlds (8 annotators of accuracy 0.7-0.95, 5 teams): at most one false flag in all (the family-wise
    rate is 0.001 per world)."""
    false = 0
    for seed in range(40):
        answers, teams_of = _world(100 + seed, accuracy=0.7 + 0.25 * (seed % 5) / 4)
        false += sum(f.flagged for f in partiality(answers, teams_of))
    assert false <= 1


def test_small_inputs():
    assert partiality([], {}) == []
    # two annotators disagree: each is the other's only "others", a tie never counts
    assert partiality([(1, "a", True), (1, "b", False)], {1: ["T"]}) == []
    # a repeated answer of one annotator counts once
    got = partiality([(i, "a", True) for i in range(5)] + [(i, "a", False) for i in range(5)]
                     + [(i, w, False) for i in range(5) for w in ("b", "c")], {i: ["T"] for i in range(5)},
                     min_against=1)
    mine = [f for f in got if f.annotator == "a"]
    assert len(mine) == 1 and mine[0].against == 5 and mine[0].chances == 5
