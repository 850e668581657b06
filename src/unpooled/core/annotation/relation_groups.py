"""What makes verification items hard to judge, as strata of the crowd model: the relation, or groups of relations
an organiser says the crowd judges alike (:mod:`.confusion` fits rates per worker and stratum;
:mod:`unpooled.core.estimators.strata` fits prevalences per target and stratum)."""

from __future__ import annotations

import difflib
import math
from dataclasses import replace

import numpy as np

from ..errors import InvalidInputError


def _quoted(name: str, most: int = 60) -> str:
    """``name`` quoted for an error message, at most ``most`` characters of it."""
    return repr(name if len(name) <= most else name[:most - 1] + "…")


def parse_relation_groups(text: str, relations=None) -> dict[str, str]:
    """An organiser's groups of relations the crowd judges alike: ``relation -> group name``.

    One group a line (or separated by ``;``): ``name: R1, R2 …`` (relations separated by commas or spaces; the
    name is optional, default the group's relations joined by ``+``).  A group shares one stratum of the crowd
    model (:mod:`unpooled.core.estimators.strata`): its rates are fitted on all its relations' answers, so rare
    relations judged alike borrow each other's answers.  ``relations`` (optional): the schema's relation names;
    a relation it does not hold is refused, naming the closest.  Raises :class:`InvalidInputError` saying which
    group and relation is wrong (in two groups, unknown, a group named like a relation, an empty group)."""
    known = None if relations is None else set(relations)
    out: dict[str, str] = {}
    names: set = set()
    for n, part in enumerate([p for line in (text or "").splitlines() for p in line.split(";")], start=1):
        if not part.strip():
            continue
        name, sep, members = part.partition(":")
        if not sep:
            name, members = "", part
        rels = [r for r in members.replace(",", " ").split() if r]
        name = name.strip() or "+".join(rels)
        where = f"relation groups: group {n} ({_quoted(name)})"
        if not rels:
            raise InvalidInputError(f"{where}: no relations after the ':'")
        if name in names:
            raise InvalidInputError(f"{where}: a second group of this name")
        if known is not None and name in known and rels != [name]:
            raise InvalidInputError(f"{where}: named like a relation of the schema; name it otherwise")
        names.add(name)
        for r in rels:
            if known is not None and r not in known:
                close = difflib.get_close_matches(r, sorted(known), n=1)
                raise InvalidInputError(f"{where}: {_quoted(r)} is not a relation of the schema"
                                        + (f" (did you mean {close[0]!r}?)" if close else ""))
            if r in out:
                raise InvalidInputError(f"{where}: {_quoted(r)} is already in group {_quoted(out[r])}")
            out[r] = name
    return out


def grouped_strata(relations, groups: dict | None = None) -> dict[str, int]:
    """``relation -> stratum`` for :func:`relation_stratum_codes`: the relations of a group (``groups``, from
    :func:`parse_relation_groups`) share one, every other relation has its own; numbered by the strata's names
    (a group's name, else the relation's) in order."""
    groups = groups or {}
    label = {r: groups.get(r, r) for r in relations}
    code = {name: i for i, name in enumerate(sorted(set(label.values())))}
    return {r: code[name] for r, name in label.items()}


def relation_stratum_codes(relations: list, strata: dict | None = None) -> tuple[np.ndarray, int, dict]:
    """Per item its stratum from its relation: ``(codes, number of strata, relation -> stratum)``, by ``strata``
    (a relation it does not name, or None: the last stratum) or, without it, the relations in name order."""
    if strata is None:
        strata = {r: i for i, r in enumerate(sorted({r for r in relations if r}))}
    other = max(strata.values()) + 1 if strata else 0  # a group shares one code: not len(strata)
    return np.array([strata.get(r, other) for r in relations], np.int64), other + 1, strata


# -- learned groups: strata with too few gold controls judged with the rates of others -----------------------
#: a stratum has rates of its own only with at least this many answered gold controls of each class; one with
#: fewer joins a learned group (:func:`pool_thin_strata`)
MIN_STRATUM_CONTROLS = 3


def pool_thin_strata(a, min_controls: int = MIN_STRATUM_CONTROLS):
    """``a`` (:class:`~.confusion.VerifyAnswers`) with the strata that have fewer than ``min_controls`` answered gold controls of either class judged
    with the rates of others (:attr:`~.confusion.VerifyAnswers.rate_group`; each keeps its own class prior and, in the
    estimator, its own prevalence): learned groups of relations.

    A stratum's rates need anchors: without controls Dawid--Skene on its items alone can trade a crowd that errs
    for items of the other class, and with a stratum per relation every thin relation is such a ridge -- a
    Re-DocRED run with 97 relation strata and 13 answered controls had several optima, and bootstrap refits
    settled in others than the point fit's (rates 0.6 apart).  So thin strata join others until every group has
    its anchors, each the group whose answers agree as often as its own (:func:`_merge_thin`): how often two
    answers about one item agree is observed without the truth and is high where the crowd judges well (0.94 on
    a correct item of a 0.97/0.07 relation, 0.63 of a 0.75/0.45 one), so a rare hard relation borrows from the
    hard ones and a rare easy one from the easy ones.  One set of rates for every thin relation instead mixed
    them: 100 coverage runs on Re-DocRED with 16 relations judged at 0.75/0.45 and the others at 0.97/0.07,
    precision coverage 0.22 and 0.31 for the two systems (0.84 and 0.82 with the learned groups).  Groups are
    numbered in order of their first stratum; applying it twice changes nothing."""
    if a.stratum is None:
        return a
    H = a.n_strata
    st = np.asarray(a.stratum, np.int64)
    ctrl = np.asarray(a.control)
    answered = np.zeros(a.n_items, bool)
    answered[np.asarray(a.item, np.int64)] = True
    if a.rate_group is not None:  # pooled already: count by the groups
        st = np.asarray(a.rate_group, np.int64)[st]
        H = a.n_rate_groups
    pos = np.bincount(st[answered & (ctrl == 1)], minlength=H)
    neg = np.bincount(st[answered & (ctrl == 0)], minlength=H)
    full = (pos >= min_controls) & (neg >= min_controls)
    if full.all() and a.rate_group is None:
        return a
    group = _merge_thin(pos, neg, *_pair_counts(a, st, H), *_control_counts(a, st, H), min_controls)
    base = np.arange(a.n_strata) if a.rate_group is None else np.asarray(a.rate_group, np.int64)
    return replace(a, rate_group=group[base])


def _merge_thin(pos, neg, same, pairs, ctrl_ok, ctrl_n, min_controls: int) -> np.ndarray:
    """Per stratum its group: strata without ``min_controls`` controls of each class, the smallest first (fewest
    pairs of answers), join the group whose answers agree most like theirs (the share of agreeing pairs of answers
    about one item: high where the crowd judges well, low where it does not).  A stratum without two answers about
    one item (a rare relation seen only in gold controls, each answered once) joins the group under whose share of
    right control answers its own (``ctrl_ok`` right of ``ctrl_n``) are likeliest (joining the group with the most
    pairs instead put every such relation, easy ones too, with the hard relation that had the most items, and
    diluted its anchors); without either, the group with the most pairs.  Groups numbered in order of their first
    stratum."""
    H = len(pos)
    members = {h: [h] for h in range(H)}
    stats = {h: np.array([pos[h], neg[h], same[h], pairs[h], ctrl_ok[h], ctrl_n[h]], float) for h in range(H)}

    def thin(g):
        return stats[g][0] < min_controls or stats[g][1] < min_controls

    def agree(g):
        return stats[g][2] / stats[g][3] if stats[g][3] > 0 else math.nan

    def loglik(g, o):  # g's control answers under o's (Jeffreys-smoothed) share of right ones
        q = (stats[o][4] + 0.5) / (stats[o][5] + 1)
        return stats[g][4] * math.log(q) + (stats[g][5] - stats[g][4]) * math.log1p(-q)

    while len(members) > 1:
        weak = [g for g in members if thin(g)]
        if not weak:
            break
        g = min(weak, key=lambda x: (stats[x][3], x))
        others = [o for o in members if o != g]
        if not math.isnan(agree(g)):
            to = min(others, key=lambda o: (abs(agree(o) - agree(g)) if not math.isnan(agree(o)) else 2.0, o))
        elif stats[g][5] > 0:
            to = max(others, key=lambda o: (loglik(g, o), -o))
        else:
            to = max(others, key=lambda o: (stats[o][3], -o))
        members[to] += members.pop(g)
        stats[to] = stats[to] + stats.pop(g)
    out = np.zeros(H, np.int64)
    for code, g in enumerate(sorted(members, key=lambda x: min(members[x]))):
        out[members[g]] = code
    return out


def _control_counts(a, st: np.ndarray, H: int) -> tuple[np.ndarray, np.ndarray]:
    """Per stratum, the answers about gold controls that were right, and all of them."""
    item = np.asarray(a.item, np.int64)
    ctrl = np.asarray(a.control)[item]
    on = ctrl >= 0
    right = np.asarray(a.yes)[on] == ctrl[on]
    s = st[item][on]
    return np.bincount(s, weights=right.astype(float), minlength=H), np.bincount(s, minlength=H).astype(float)


def _pair_counts(a, st: np.ndarray, H: int) -> tuple[np.ndarray, np.ndarray]:
    """Per stratum, the pairs of answers about one item that agree, and all such pairs."""
    item = np.asarray(a.item, np.int64)
    k = np.bincount(item, minlength=a.n_items).astype(float)
    y = np.bincount(item, weights=np.asarray(a.yes, float), minlength=a.n_items)
    same = y * (y - 1) / 2 + (k - y) * (k - y - 1) / 2
    return np.bincount(st, weights=same, minlength=H), np.bincount(st, weights=k * (k - 1) / 2, minlength=H)


__all__ = ["MIN_STRATUM_CONTROLS", "grouped_strata", "parse_relation_groups", "pool_thin_strata",
           "relation_stratum_codes"]
