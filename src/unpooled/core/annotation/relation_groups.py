"""What makes verification items hard to judge, as strata of the crowd model: the relation, or groups of relations
an organiser says the crowd judges alike (:mod:`.confusion` fits rates per worker and stratum;
:mod:`unpooled.core.estimators.strata` fits prevalences per target and stratum)."""

from __future__ import annotations

import difflib

import numpy as np

from ..errors import InvalidInputError


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
        where = f"relation groups: group {n} ({name!r})"
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
                raise InvalidInputError(f"{where}: {r!r} is not a relation of the schema"
                                        + (f" (did you mean {close[0]!r}?)" if close else ""))
            if r in out:
                raise InvalidInputError(f"{where}: {r!r} is already in group {out[r]!r}")
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


__all__ = ["grouped_strata", "parse_relation_groups", "relation_stratum_codes"]
