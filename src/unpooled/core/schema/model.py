"""Relation schemas as data.

A schema lists entity types, value types (for string-valued slots) and
relations.  Each relation is either *canonical* or the inverse of exactly one
canonical relation (``inverse_of``); symmetric relations are canonical and
their own inverse.  This is the one place where direction is decided: every
stored instance is rewritten into canonical direction by
:meth:`Schema.canonicalize`, so a relation and its inverse share one label.

File format (JSON)::

    {"name": "tac-kbp-coldstart-2017", "version": "2017", "title": "...",
     "type_check": "error",                 # error | warning | off
     "entity_types": {"PER": "person", ...},
     "value_types": {"STRING": "free text", "DATE": "a date", ...},
     "aliases": {"per:sibling": "per:siblings"},
     "relations": [
        {"name": "per:children", "subject": ["PER"], "object": ["PER"],
         "cardinality": "list", "description": "..."},
        {"name": "per:parents", "subject": ["PER"], "object": ["PER"],
         "cardinality": "list", "inverse_of": "per:children"},
        {"name": "per:spouse", "subject": ["PER"], "object": ["PER"], "symmetric": true},
        {"name": "per:title", "subject": ["PER"], "object": ["STRING"], "string_valued": true}]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .. import json_text
from ..errors import SchemaError

TYPE_CHECK_POLICIES = ("error", "warning", "off")
CARDINALITIES = ("single", "list")


@dataclass(frozen=True)
class RelationType:
    """One predicate of a schema."""

    name: str
    subject_types: frozenset[str]
    object_types: frozenset[str]
    string_valued: bool = False
    cardinality: str = "list"
    symmetric: bool = False
    inverse_of: str | None = None
    description: str = ""
    #: the (subject type, object type) pairs the relation usually takes (offered first to annotators); None:
    #: every pair of its types.  A schema whose types were observed in noisy data admits a type after a single
    #: triple; the usual pairs leave such types out of what annotators are offered, never out of validation
    usual_pairs: frozenset[tuple[str, str]] | None = None

    @property
    def pairs(self) -> frozenset[tuple[str, str]]:
        """:attr:`usual_pairs`, or every (subject type, object type) pair of the relation."""
        if self.usual_pairs is not None:
            return self.usual_pairs
        return frozenset((a, b) for a in self.subject_types for b in self.object_types)

    @property
    def canonical(self) -> bool:
        return self.inverse_of is None

    @property
    def single_valued(self) -> bool:
        return self.cardinality == "single"

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "name": self.name,
            "subject": sorted(self.subject_types),
            "object": sorted(self.object_types),
        }
        if self.string_valued:
            out["string_valued"] = True
        out["cardinality"] = self.cardinality
        if self.symmetric:
            out["symmetric"] = True
        if self.inverse_of:
            out["inverse_of"] = self.inverse_of
        if self.description:
            out["description"] = self.description
        if self.usual_pairs is not None:
            out["usual_pairs"] = [list(p) for p in sorted(self.usual_pairs)]
        return out


@dataclass(frozen=True)
class Schema:
    """A relation schema: types, relations, inverses, aliases."""

    name: str
    relations: Mapping[str, RelationType]
    entity_types: Mapping[str, str]
    value_types: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    version: str = ""
    title: str = ""
    type_check: str = "error"

    # -- look-up -----------------------------------------------------------
    def resolve(self, predicate: str) -> RelationType | None:
        """The relation named ``predicate`` (or one of its aliases), else None."""
        rel = self.relations.get(predicate)
        if rel is None and predicate in self.aliases:
            rel = self.relations.get(self.aliases[predicate])
        return rel

    def __contains__(self, predicate: str) -> bool:
        return self.resolve(predicate) is not None

    def canonical_of(self, predicate: str) -> tuple[str, bool]:
        """``(canonical predicate, swap)``: swap is True when the arguments must be exchanged.

        Symmetric relations return ``swap=False``; their argument order is
        fixed by the instance key (see :func:`unpooled.core.kb.model.canonical_instance`).
        """
        rel = self.resolve(predicate)
        if rel is None:
            raise KeyError(predicate)
        if rel.inverse_of is None:
            return rel.name, False
        return rel.inverse_of, True

    def canonical_arguments(self, predicate: str, a, b):
        """``(canonical predicate, subject, object)`` of a relation ``predicate(a, b)`` between two mentions
        (mappings with ``start`` and ``end``): an inverse predicate exchanges them, and a symmetric relation's
        arguments are put in :func:`unpooled.core.kb.model.canonical_instance`'s order (the earlier span first),
        so one fact has one instance key however it was annotated.  Raises ``KeyError`` for an unknown predicate.
        """
        canon, inverted = self.canonical_of(predicate)
        s, o = (b, a) if inverted else (a, b)
        rel = self.relations.get(canon)
        if not inverted and rel is not None and rel.symmetric and (o["start"], o["end"]) < (s["start"], s["end"]):
            s, o = o, s
        return canon, s, o

    def inverses(self, canonical: str) -> list[RelationType]:
        """The non-canonical relations whose canonical form is ``canonical``."""
        return [r for r in self.relations.values() if r.inverse_of == canonical]

    def inverse_for(self, canonical: str, subject_type: str) -> RelationType | None:
        """The inverse relation to use when writing ``canonical`` from the object's side."""
        rel = self.relations[canonical]
        if rel.symmetric:
            return rel
        for inv in self.inverses(canonical):
            if subject_type in inv.subject_types:
                return inv
        return None

    @property
    def canonical_relations(self) -> list[RelationType]:
        return [r for r in self.relations.values() if r.canonical]

    def allows_types(self, predicate: str, subject_type: str | None, object_type: str | None) -> bool:
        """Whether ``predicate`` accepts these argument types (None: type unknown, accepted)."""
        rel = self.resolve(predicate)
        if rel is None:
            return False
        if self.type_check == "off":
            return True
        if subject_type is not None and subject_type not in rel.subject_types:
            return False
        if object_type is not None and object_type not in rel.object_types:
            return False
        return True

    # -- (de)serialisation ---------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "title": self.title,
            "type_check": self.type_check,
            "entity_types": dict(self.entity_types),
            "value_types": dict(self.value_types),
            "aliases": dict(self.aliases),
            "relations": [r.to_dict() for r in self.relations.values()],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    @classmethod
    def from_dict(cls, data: Any, *, path: str = "<schema>") -> "Schema":
        """Build and check a schema; every problem raises :class:`SchemaError` naming the field."""
        return _schema_from_dict(data, path)

    @classmethod
    def from_file(cls, path: str | Path) -> "Schema":
        return _schema_from_dict(read_json_file(path, "schema"), str(path))


#: the largest schema or mapping file read (the largest built-in schema is 20 kB)
MAX_SCHEMA_BYTES = 16 * 1024 * 1024


def read_json_file(path: str | Path, what: str) -> Any:
    """Parse a JSON file (a UTF-8 byte-order mark is dropped); unreadable, too large, non-UTF-8 or invalid JSON
    raises a located :class:`SchemaError`."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SCHEMA_BYTES + 1)
        if len(data) > MAX_SCHEMA_BYTES:
            raise SchemaError(str(path), 0, f"{what} file is larger than {MAX_SCHEMA_BYTES:,} bytes")
        text = data.decode("utf-8").removeprefix("\ufeff")
    except OSError as exc:
        raise SchemaError(str(path), 0, f"cannot read {what} file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SchemaError(str(path), 0, f"{what} file is not UTF-8 (byte {exc.start})") from None
    try:
        return json_text.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(str(path), exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None


def _usual_pairs(raw, subj, obj, where: str, fail) -> frozenset[tuple[str, str]] | None:
    """A relation's ``usual_pairs`` (absent: None): a non-empty list of [subject type, object type] pairs, each
    of the relation's own types."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(t, str) for t in p) for p in raw):
        raise fail("'usual_pairs' must be a non-empty list of [subject type, object type] pairs",
                   f"{where}.usual_pairs")
    bad = [p for p in raw if p[0] not in subj or p[1] not in obj]
    if bad:
        raise fail(f"usual pairs {bad} are not pairs of the relation's subject and object types",
                   f"{where}.usual_pairs")
    return frozenset((a, b) for a, b in raw)


def _schema_from_dict(data: Any, path: str) -> Schema:
    def fail(msg: str, fld: str) -> SchemaError:
        return SchemaError(path, 0, msg, field=fld)

    if not isinstance(data, dict):
        raise fail(f"a schema is a JSON object, got {type(data).__name__}", "$")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("'name' must be a non-empty string", "name")
    type_check = data.get("type_check", "error")
    if type_check not in TYPE_CHECK_POLICIES:
        raise fail(f"'type_check' must be one of {', '.join(TYPE_CHECK_POLICIES)}, got {type_check!r}", "type_check")

    def type_table(key: str) -> dict[str, str]:
        raw = data.get(key, {})
        if isinstance(raw, list):
            if not all(isinstance(t, str) and t for t in raw):
                raise fail(f"'{key}' must list type names (non-empty strings)", key)
            raw = {t: "" for t in raw}
        if not isinstance(raw, dict) or not all(isinstance(k, str) and k for k in raw):
            raise fail(f"'{key}' must be an object of type name -> description", key)
        return {k: str(v) for k, v in raw.items()}

    entity_types = type_table("entity_types")
    if not entity_types:
        raise fail("'entity_types' must name at least one type", "entity_types")
    value_types = type_table("value_types")
    clash = set(entity_types) & set(value_types)
    if clash:
        raise fail(f"types {sorted(clash)} are both entity and value types", "value_types")

    rels_raw = data.get("relations")
    if not isinstance(rels_raw, list) or not rels_raw:
        raise fail("'relations' must be a non-empty list", "relations")
    relations: dict[str, RelationType] = {}
    for i, r in enumerate(rels_raw):
        where = f"relations[{i}]"
        if not isinstance(r, dict):
            raise fail("each relation must be an object", where)
        rname = r.get("name")
        if not isinstance(rname, str) or not rname or any(c.isspace() for c in rname):
            raise fail("'name' must be a non-empty string without spaces", f"{where}.name")
        where = f"relations[{i}] ({rname})"
        if rname in relations:
            raise fail(f"relation {rname!r} is defined twice", where)
        unknown = set(r) - {"name", "subject", "object", "string_valued", "cardinality", "symmetric",
                            "inverse_of", "description", "usual_pairs"}
        if unknown:
            raise fail(f"unknown keys {sorted(unknown)}", where)
        subj = r.get("subject")
        obj = r.get("object")
        for key, val in (("subject", subj), ("object", obj)):
            if not isinstance(val, list) or not val or not all(isinstance(t, str) for t in val):
                raise fail(f"'{key}' must be a non-empty list of type names", f"{where}.{key}")
        bad = [t for t in subj if t not in entity_types]
        if bad:
            raise fail(f"subject types {bad} are not entity types ({', '.join(entity_types)})", f"{where}.subject")
        for flag in ("string_valued", "symmetric"):
            if not isinstance(r.get(flag, False), bool):
                raise fail(f"'{flag}' must be true or false, got {r[flag]!r}", f"{where}.{flag}")
        string_valued = r.get("string_valued", False)
        allowed_obj = value_types if string_valued else entity_types
        bad = [t for t in obj if t not in allowed_obj]
        if bad:
            kind = "value" if string_valued else "entity"
            raise fail(f"object types {bad} are not {kind} types ({', '.join(allowed_obj)})", f"{where}.object")
        card = r.get("cardinality", "list")
        if card not in CARDINALITIES:
            raise fail(f"'cardinality' must be single or list, got {card!r}", f"{where}.cardinality")
        symmetric = r.get("symmetric", False)
        inverse_of = r.get("inverse_of")
        if inverse_of is not None and not isinstance(inverse_of, str):
            raise fail("'inverse_of' must be a relation name", f"{where}.inverse_of")
        if symmetric and inverse_of:
            raise fail("a symmetric relation is its own inverse; drop 'inverse_of'", where)
        if symmetric and set(subj) != set(obj):
            raise fail("a symmetric relation needs equal subject and object types", where)
        if string_valued and (symmetric or inverse_of):
            raise fail("a string-valued relation has no inverse", where)
        relations[rname] = RelationType(
            rname, frozenset(subj), frozenset(obj), string_valued, card, symmetric, inverse_of,
            str(r.get("description") or ""), _usual_pairs(r.get("usual_pairs"), subj, obj, where, fail),
        )

    for rel in relations.values():
        if rel.inverse_of is None:
            continue
        target = relations.get(rel.inverse_of)
        where = f"relations ({rel.name}).inverse_of"
        if target is None:
            raise fail(f"inverse_of names {rel.inverse_of!r}, which is not defined", where)
        if target.inverse_of is not None:
            raise fail(f"{rel.inverse_of!r} is itself an inverse; inverse_of must name a canonical relation", where)
        if target.string_valued or target.symmetric:
            raise fail(f"{rel.inverse_of!r} cannot have an inverse (string-valued or symmetric)", where)
        if not rel.subject_types <= target.object_types or not rel.object_types <= target.subject_types:
            raise fail(
                f"types do not mirror {rel.inverse_of!r}: subject {sorted(rel.subject_types)} must be within its "
                f"object types {sorted(target.object_types)}, object {sorted(rel.object_types)} within its "
                f"subject types {sorted(target.subject_types)}",
                where,
            )

    aliases = data.get("aliases", {})
    if not isinstance(aliases, dict):
        raise fail("'aliases' must be an object of alias -> relation name", "aliases")
    for alias, target in aliases.items():
        if not isinstance(target, str) or not alias:
            raise fail(f"alias {alias!r} must map to a relation name (a string), got {target!r}", f"aliases.{alias}")
        if target not in relations:
            raise fail(f"alias {alias!r} points to undefined relation {target!r}", f"aliases.{alias}")
        if alias in relations:
            raise fail(f"alias {alias!r} is also a relation name", f"aliases.{alias}")

    return Schema(
        name=name.strip(),
        relations=MappingProxyType(relations),
        entity_types=MappingProxyType(entity_types),
        value_types=MappingProxyType(value_types),
        aliases=MappingProxyType(dict(aliases)),
        version=str(data.get("version") or ""),
        title=str(data.get("title") or ""),
        type_check=type_check,
    )
