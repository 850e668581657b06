r"""Annotators who take one team's side: answers that agree with a team's output unusually often.

A team member's second account (or an annotator paid by a team) can say "correct" to that team's wrong
instances, or "wrong" to a rival's right ones.  Any single disagreement with the other annotators is ordinary;
disagreeing *in one team's favour* far more often than one does elsewhere, and than the others do on that team's
items, is not.

For an answer :math:`j` by annotator :math:`a` on item :math:`i`, the *others' verdict* is the majority of the
other counted answers on :math:`i` (none on a tie, or with no other answer).  For a team :math:`T` (the item is in
one of its runs), the *favouring* answers are those that say correct where the others' verdict is wrong:

.. math::
    n_{aT} = \#\{j : \text{others say wrong}\},\quad x_{aT} = \#\{j \in n_{aT} : a \text{ says correct}\}.

The rate :math:`a` is compared with is the larger of two (each with one success and one failure added, so that
few answers cannot make it 0): :math:`a`'s own favouring rate on the items of other teams, and the other
annotators' favouring rate on :math:`T`'s items (a team whose wrong instances are plausible is agreed with more by
everyone).  The one-sided binomial tail :math:`P(X \ge x_{aT})`, :math:`X \sim \mathrm{Bin}(n_{aT}, p_0)`, is
compared with ``alpha`` divided by the number of (annotator, team, direction) pairs tested (Bonferroni); the
*opposing* direction (saying wrong where the others say correct, on a rival's items) is tested the same way.
A flag is a reason to look, not proof: the annotator may simply know the team's domain.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence

from scipy import stats

#: fewer answers against the others than this on one team's items are never flagged
MIN_AGAINST = 3
#: family-wise false-flag rate over every (annotator, team, direction) tested
ALPHA = 0.001


@dataclass(frozen=True)
class Partiality:
    """One annotator's answers on one team's items, against the other annotators' verdicts.

    ``direction``: ``"favours"`` (said correct where the others said wrong) or ``"opposes"`` (said wrong where the
    others said correct); ``against`` of ``chances`` such answers; ``rate_elsewhere`` (the annotator's on other
    teams' items) and ``rate_others`` (the other annotators' on this team's items); ``p_value``: the binomial tail
    against the larger; ``flagged``: below ``alpha`` over the number of tests."""

    annotator: Hashable
    team: Hashable
    direction: str
    against: int
    chances: int
    rate_elsewhere: float
    rate_others: float
    p_value: float
    flagged: bool


def partiality(answers: Iterable[tuple[Hashable, Hashable, bool]], teams_of: dict[Hashable, Sequence[Hashable]], *,
               alpha: float = ALPHA, min_against: int = MIN_AGAINST) -> list[Partiality]:
    """Every (annotator, team, direction) with at least ``min_against`` answers against the others' verdict on the
    team's items, most significant first (see the module's text).

    ``answers``: ``(item, annotator, correct)``, counted answers only (one per annotator and item; a repeat is
    ignored); ``teams_of``: item -> the teams whose runs hold it (items of no team are context only)."""
    by_item: dict[Hashable, dict[Hashable, bool]] = defaultdict(dict)
    for item, ann, correct in answers:
        by_item[item].setdefault(ann, bool(correct))
    # per (annotator, team, direction): [chances, against]; per (annotator, direction) over all items; per
    # (team, direction) over all annotators
    cell: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    mine: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    team_all: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for item, said in by_item.items():
        yes = sum(said.values())
        no = len(said) - yes
        teams = tuple(dict.fromkeys(teams_of.get(item, ())))
        for ann, correct in said.items():
            o_yes, o_no = yes - correct, no - (not correct)
            if o_yes == o_no:
                continue
            direction = "favours" if o_no > o_yes else "opposes"
            against = int(correct if direction == "favours" else not correct)
            mine[(ann, direction)][0] += 1
            mine[(ann, direction)][1] += against
            for team in teams:
                for store, key in ((cell, (ann, team, direction)), (team_all, (team, direction))):
                    store[key][0] += 1
                    store[key][1] += against
    tested = [(k, v) for k, v in cell.items() if v[1] >= min_against]
    out = []
    for (ann, team, direction), (n, x) in tested:
        n_else, x_else = (a - b for a, b in zip(mine[(ann, direction)], (n, x)))
        n_oth, x_oth = (a - b for a, b in zip(team_all[(team, direction)], (n, x)))
        rate_else, rate_oth = (x_else + 1) / (n_else + 2), (x_oth + 1) / (n_oth + 2)
        p = float(stats.binom.sf(x - 1, n, max(rate_else, rate_oth)))
        out.append(Partiality(ann, team, direction, x, n, rate_else, rate_oth, p, p < alpha / max(len(tested), 1)))
    out.sort(key=lambda f: (f.p_value, str(f.annotator), str(f.team), f.direction))
    return out
