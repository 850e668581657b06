"""Cross-schema relation mappings as data (e.g. DocRED P-ids to TAC KBP slots).

A mapping file is a JSON object; each mapping is stored under a key (for example
``docred_pid_to_tac``) as an object from source relation to a list of *options*.
Each option is a short informal string::

    "per:schools_attended"                          the same fact, same direction
    "inverse org:students"                          the same fact with subject and object swapped
    "per:city_of_birth|per:country_of_birth"        alternatives: one of these, depending on the object
    "per:city/stateorprovince/country_of_birth"     shorthand for the three alternatives above
    "per:employee_or_member_of (PER head)"          only when the source subject (head) is a PER
    "org:member_of (ORG/GPE head)"                  ... is an ORG or a GPE
    "org:date_founded (ORG head only)"              same as "(ORG head)"
    "org:top_members_employees (subject=ORG, object=PER)"   head and tail types
    "per:countries_of_residence (loose)"            an approximation
    "per:employee_or_member_of (party membership)"  a free-text note, kept but not interpreted

The parenthesised notes are split at commas; ``loose`` sets :attr:`MappingTarget.loose`,
the rest is kept as :attr:`MappingTarget.condition`.  Of the condition, only the
forms ``T head``, ``T head only``, ``subject=T`` (source head type) and ``T tail``,
``object=T`` (source tail type), with ``T`` one or more ``/``-separated entity types
of the target schema, are interpreted; any other text (``GPE head of government``,
``sports team``) is a note for people and filters nothing.  Types are always those
of the *source* relation's arguments, written in the target schema's vocabulary.

Validation policy.  Every relation name is checked against the target schema
(aliases are resolved to the real name): an unknown name, a string that does not
parse, a type name the target schema lacks, or ``inverse`` of a string-valued
relation raises :class:`~unpooled.core.errors.SchemaError` naming the mapping key,
the source relation and the offending string.  These are errors rather than
warnings because a mistyped slot would silently drop facts from every
evaluation that uses the mapping.  A *type* condition that the named relation
cannot satisfy (``org:member_of (ORG/GPE head)``: ``org:member_of`` takes only ORG
subjects; a GPE head needs ``gpe:member_of``) is only recorded in
:attr:`SchemaMapping.warnings`: the rule is still right for the types it can take,
and :meth:`SchemaMapping.translate` filters the impossible combinations out by the
target schema's types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import SchemaError
from .model import Schema, read_json_file

_TARGET = re.compile(r"(?P<inverse>inverse\s+)?(?P<rels>[^\s()]+)\s*(?:\((?P<notes>[^()]*)\))?")
_SHORTHAND = re.compile(r"(?P<prefix>[a-z]+:)(?P<heads>[^/_\s]+(?:/[^/_\s]+)+)(?P<suffix>_\S+)")
_TYPES = r"[A-Za-z]+(?:\s*/\s*[A-Za-z]+)*"
_HEAD_FORMS = (re.compile(rf"(?P<types>{_TYPES})\s+head(?:\s+only)?", re.I),
               re.compile(rf"subject\s*=\s*(?P<types>{_TYPES})", re.I))
_TAIL_FORMS = (re.compile(rf"(?P<types>{_TYPES})\s+tail(?:\s+only)?", re.I),
               re.compile(rf"object\s*=\s*(?P<types>{_TYPES})", re.I))


def _condition_types(condition: str, forms) -> frozenset[str] | None:
    """Types named by the first condition item of one of ``forms``, else None."""
    for item in condition.split(","):
        item = item.strip()
        for form in forms:
            m = form.fullmatch(item)
            if m:
                return frozenset(t.strip() for t in m.group("types").split("/"))
    return None


@dataclass(frozen=True)
class MappingTarget:
    """One target relation of a mapping rule.

    Attributes
    ----------
    relation : str
        The target schema's relation name (aliases resolved).
    inverse : bool
        True when the target relation's subject is the source relation's object (tail).
    loose : bool
        The rule is marked as an approximation.
    condition : str
        The parenthesised notes other than ``loose``, comma-joined; ``""`` if none.
    """

    relation: str
    inverse: bool = False
    loose: bool = False
    condition: str = ""

    @property
    def head_types(self) -> frozenset[str] | None:
        """Source head types the rule is limited to (``(PER head)``, ``subject=ORG``), or None."""
        return _condition_types(self.condition, _HEAD_FORMS)

    @property
    def tail_types(self) -> frozenset[str] | None:
        """Source tail types the rule is limited to (``object=PER``), or None."""
        return _condition_types(self.condition, _TAIL_FORMS)

    def applies_to(self, subject_type: str | None, object_type: str | None) -> bool:
        """Whether the condition admits a source head/tail of these types (None: unknown, admitted)."""
        heads, tails = self.head_types, self.tail_types
        if subject_type is not None and heads is not None and subject_type not in heads:
            return False
        if object_type is not None and tails is not None and object_type not in tails:
            return False
        return True


@dataclass(frozen=True)
class SchemaMapping:
    """Rules translating relations of a source schema into relations of a target schema.

    Attributes
    ----------
    source : str
        Name of the source vocabulary (e.g. ``docred``).
    target : str
        Name of the target schema (:attr:`Schema.name`).
    rules : Mapping[str, tuple[tuple[MappingTarget, ...], ...]]
        Per source relation, its options; each option is a tuple of alternative targets
        (the ``|`` alternatives, or the expansion of a ``city/stateorprovince/country`` shorthand).
    schema : Schema
        The target schema the rules were checked against (used for type filtering).
    warnings : tuple[str, ...]
        Type conditions the named target relation cannot satisfy (see the module docstring).
    """

    source: str
    target: str
    rules: Mapping[str, tuple[tuple[MappingTarget, ...], ...]]
    schema: Schema | None = field(default=None, compare=False, repr=False)
    warnings: tuple[str, ...] = ()

    def __contains__(self, relation: str) -> bool:
        return relation in self.rules

    def targets(self, relation: str) -> list[MappingTarget]:
        """Every target of every option for ``relation`` (empty if it is not mapped)."""
        return [t for option in self.rules.get(relation, ()) for t in option]

    def translate(self, relation: str, subject_type: str | None = None,
                  object_type: str | None = None) -> list[tuple[str, bool]]:
        """Candidate target relations for a source fact ``relation(head, tail)``.

        Parameters
        ----------
        relation : str
            The source relation (e.g. ``P69``).
        subject_type, object_type : str, optional
            Types of the source head and tail in the *target* schema's vocabulary
            (e.g. ``PER``, ``GPE``); None means unknown and filters nothing.

        Returns
        -------
        list of (str, bool)
            ``(target relation, swap_arguments)`` in rule order, without duplicates;
            ``swap_arguments`` is True when the target's subject is the source's tail.
            A candidate is dropped when its head/tail condition excludes the given types,
            or when the target schema does not accept the types in the target's argument
            order (the object type of a string-valued target is only checked if it is one
            of the schema's value types: any entity's text can be a string filler).
            Unmapped relations give an empty list.
        """
        out: list[tuple[str, bool]] = []
        for t in self.targets(relation):
            if not t.applies_to(subject_type, object_type):
                continue
            if not self._types_fit(t, subject_type, object_type):
                continue
            cand = (t.relation, t.inverse)
            if cand not in out:
                out.append(cand)
        return out

    def translate_canonical(self, relation: str, subject_type: str | None = None,
                            object_type: str | None = None) -> list[tuple[str, bool]]:
        """Like :meth:`translate`, with every candidate rewritten to the target schema's canonical direction.

        ``P40`` (child) gives ``per:children`` and ``inverse per:parents``; both are the
        canonical ``per:children`` without a swap, so the result has one entry.
        """
        if self.schema is None:
            raise ValueError("this mapping has no target schema; build it with load_mapping()")
        out: list[tuple[str, bool]] = []
        for rel, swap in self.translate(relation, subject_type, object_type):
            canonical, flip = self.schema.canonical_of(rel)
            cand = (canonical, swap != flip)
            if cand not in out:
                out.append(cand)
        return out

    def _types_fit(self, t: MappingTarget, subject_type: str | None, object_type: str | None) -> bool:
        schema = self.schema
        if schema is None or (subject_type is None and object_type is None):
            return True
        rel = schema.relations[t.relation]
        subj, obj = (object_type, subject_type) if t.inverse else (subject_type, object_type)
        if rel.string_valued and obj is not None and obj not in schema.value_types:
            obj = None
        return schema.allows_types(t.relation, subj, obj)


def parse_target(text: str, schema: Schema) -> tuple[MappingTarget, ...]:
    """The alternative targets named by one option string.

    Parameters
    ----------
    text : str
        An option such as ``"inverse org:students"`` or ``"per:city/stateorprovince/country_of_birth"``.
    schema : Schema
        The target schema; names are resolved against it (aliases included).

    Returns
    -------
    tuple of MappingTarget
        One target per ``|`` alternative (a shorthand expands to several).

    Raises
    ------
    ValueError
        With a message saying what is wrong (the caller adds the location).
    """
    if not isinstance(text, str):
        raise ValueError(f"an option must be a string, got {type(text).__name__}")
    m = _TARGET.fullmatch(text.strip())
    if m is None or not m.group("rels"):
        raise ValueError("expected '[inverse ]relation[|relation...] [(notes)]'")
    inverse = m.group("inverse") is not None
    notes = [n.strip() for n in (m.group("notes") or "").split(",")]
    if m.group("notes") is not None and not any(notes):
        raise ValueError("empty parentheses")
    loose = any(n.lower() == "loose" for n in notes)
    condition = ", ".join(n for n in notes if n and n.lower() != "loose")
    for forms in (_HEAD_FORMS, _TAIL_FORMS):
        types = _condition_types(condition, forms)
        unknown = sorted((types or set()) - set(schema.entity_types))
        if unknown:
            raise ValueError(f"condition names types {unknown} that are not entity types of schema "
                             f"{schema.name} ({', '.join(schema.entity_types)})")
    names: list[str] = []
    for alt in m.group("rels").split("|"):
        if not alt:
            raise ValueError("empty alternative between '|'")
        names.extend(_expand(alt, schema))
    targets = []
    for name in names:
        rel = schema.resolve(name)
        if rel.string_valued and inverse:
            raise ValueError(f"{rel.name} is string-valued: it cannot be used with 'inverse'")
        t = MappingTarget(rel.name, inverse, loose, condition)
        if t not in targets:
            targets.append(t)
    return tuple(targets)


def _expand(name: str, schema: Schema) -> list[str]:
    """``name`` if the schema knows it, else the expansion of an ``a/b/c_suffix`` shorthand."""
    if name in schema:
        return [name]
    m = _SHORTHAND.fullmatch(name)
    if m is None:
        raise ValueError(f"unknown relation {name!r} in schema {schema.name}")
    expanded = [f"{m.group('prefix')}{head}{m.group('suffix')}" for head in m.group("heads").split("/")]
    missing = [n for n in expanded if n not in schema]
    if missing:
        raise ValueError(f"shorthand {name!r} expands to {', '.join(expanded)}, but "
                         f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in schema {schema.name}")
    return expanded


def _type_warnings(key: str, source_rel: str, text: str, targets: tuple[MappingTarget, ...],
                   schema: Schema) -> list[str]:
    out = []
    for t in targets:
        rel = schema.relations[t.relation]
        head_side, tail_side = ("object", "subject") if t.inverse else ("subject", "object")
        for role, types, side in (("head", t.head_types, head_side), ("tail", t.tail_types, tail_side)):
            if types is None or (side == "object" and rel.string_valued):
                continue
            allowed = rel.subject_types if side == "subject" else rel.object_types
            bad = sorted(types - allowed)
            if bad:
                out.append(f"{key}.{source_rel}: {text!r}: {rel.name} does not take a {'/'.join(bad)} {side} "
                           f"(the source {role}); translate() drops it for {'/'.join(bad)} {role}s")
    return out


def mapping_from_dict(rules: Any, *, source: str, target_schema: Schema, path: str = "<mapping>",
                      key: str = "", source_schema: Schema | None = None) -> SchemaMapping:
    """Parse and check one mapping (source relation -> list of option strings).

    Parameters
    ----------
    rules : object
        The mapping object read from JSON.
    source : str
        Name of the source vocabulary.
    target_schema : Schema
        Target relation names and types are checked against it.
    path, key : str
        Where the mapping came from, for error messages.
    source_schema : Schema, optional
        If given, every source relation must be one of its relations.

    Returns
    -------
    SchemaMapping

    Raises
    ------
    SchemaError
        ``path``, line 0, with ``field`` ``key.source_relation[i]``, naming the bad string.
    """
    where = key or "$"
    if not isinstance(rules, dict) or not rules:
        raise SchemaError(path, 0, f"mapping {where!r} must be a non-empty object of source relation -> "
                          "list of target strings", field=where)
    parsed: dict[str, tuple[tuple[MappingTarget, ...], ...]] = {}
    warnings: list[str] = []
    for src, options in rules.items():
        fld = f"{key}.{src}" if key else src
        if source_schema is not None and src not in source_schema:
            raise SchemaError(path, 0, f"mapping {where!r}: source relation {src!r} is not in schema "
                              f"{source_schema.name}", field=fld)
        if isinstance(options, str):
            options = [options]
        if not isinstance(options, list) or not options:
            raise SchemaError(path, 0, f"mapping {where!r}: {src!r} must map to a non-empty list of target "
                              "strings", field=fld)
        out = []
        for i, text in enumerate(options):
            try:
                targets = parse_target(text, target_schema)
            except ValueError as exc:
                raise SchemaError(path, 0, f"mapping {where!r}, {src!r}: cannot use {text!r}: {exc}",
                                  field=f"{fld}[{i}]") from None
            warnings.extend(_type_warnings(where, src, text, targets, target_schema))
            out.append(targets)
        parsed[src] = tuple(out)
    return SchemaMapping(source=source, target=target_schema.name, rules=MappingProxyType(parsed),
                         schema=target_schema, warnings=tuple(warnings))


def load_mapping(path: str | Path, key: str, *, target_schema: Schema | None = None,
                 source_schema: Schema | None = None, source: str | None = None) -> SchemaMapping:
    """Load the mapping stored under ``key`` in a mapping file.

    Parameters
    ----------
    path : str or Path
        A JSON file such as ``meta/kbp_slot_mapping.json``.
    key : str
        The mapping to read (``docred_pid_to_tac``, ``knowledgenet_property_to_tac``).
    target_schema : Schema, optional
        Defaults to the built-in ``tac-kbp`` schema.
    source_schema : Schema, optional
        If given, source relation names are checked against it.
    source : str, optional
        Name of the source vocabulary; defaults to ``key`` up to its first ``_`` (``docred``).

    Returns
    -------
    SchemaMapping

    Raises
    ------
    SchemaError
        When the file cannot be read or parsed, lacks ``key``, or a rule is invalid
        (see :func:`mapping_from_dict`).
    """
    if target_schema is None:
        from . import builtin_schema

        target_schema = builtin_schema("tac-kbp")
    path = Path(path)
    data = read_json_file(path, "mapping")
    if not isinstance(data, dict):
        raise SchemaError(str(path), 0, f"a mapping file is a JSON object, got {type(data).__name__}", field="$")
    if key not in data:
        keys = [k for k in data if not k.startswith("_")]
        raise SchemaError(str(path), 0, f"no mapping {key!r} in the file; it has {', '.join(keys) or 'none'}",
                          field=key)
    return mapping_from_dict(data[key], source=source or key.split("_", 1)[0], target_schema=target_schema,
                             path=str(path), key=key, source_schema=source_schema)


__all__ = ["MappingTarget", "SchemaMapping", "load_mapping", "mapping_from_dict", "parse_target"]
