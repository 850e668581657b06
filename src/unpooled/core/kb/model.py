"""In-memory model of a submitted knowledge base, and the canonical instance key.

A submission is a set of *relation instances* (subject mention, predicate,
object mention or string value, provenance) over *entities* (the system's own
clusters, with a type and optional KB links) and their *mentions*.

Offsets here are always end-exclusive character offsets into the corpus
document text (TAC's inclusive ends are converted on reading and writing).

Every instance is stored in the schema's canonical direction exactly once
(:func:`canonical_instance`): a relation and its inverse, or the two orders
of a symmetric relation, give the same :func:`instance_key`, so identical
predictions of different systems share one label.
"""

from __future__ import annotations

import re
from hashlib import blake2b
from dataclasses import dataclass, field
from typing import Iterable, Protocol

from ..schema import Schema

MENTION_KINDS = ("mention", "canonical_mention", "nominal_mention", "pronominal_mention")

_WS = re.compile(r"\s+")


def normalise_value(value: str) -> str:
    """The comparison form of a string filler: case-folded, whitespace collapsed."""
    return _WS.sub(" ", value).strip().casefold()


@dataclass(slots=True)
class Entity:
    """A system entity (cluster): its id in the submission, type and KB links."""

    name: str
    type: str | None = None
    links: list[str] = field(default_factory=list)
    line: int = 0


@dataclass(slots=True)
class Mention:
    """A mention of ``entity`` in document ``doc`` at ``[start, end)``."""

    entity: str
    doc: str
    start: int
    end: int
    kind: str = "mention"
    canonical: bool = False
    confidence: float = 1.0
    line: int = 0


@dataclass(slots=True)
class Instance:
    """A relation instance in canonical direction.

    ``object`` is the object entity's name, or None for a string-valued slot,
    whose filler is ``value`` at ``[object_start, object_end)``.
    ``provenance`` holds the justification spans (end-exclusive) in ``doc``.
    """

    doc: str
    subject: str
    subject_start: int
    subject_end: int
    predicate: str
    object: str | None
    object_start: int
    object_end: int
    value: str | None
    provenance: tuple[tuple[int, int], ...]
    confidence: float = 1.0
    line: int = 0

    @property
    def key(self) -> str:
        return instance_key(
            self.doc, self.subject_start, self.subject_end, self.predicate,
            self.object_start, self.object_end, self.value,
        )


def instance_key(
    doc: str, s_start: int, s_end: int, predicate: str, o_start: int, o_end: int, value: str | None = None
) -> str:
    """The canonical identity of an instance across systems.

    ``document, subject span, canonical predicate, object span`` -- or, for a
    string-valued slot, the normalised filler instead of its span, so that two
    systems that give the same filler with slightly different spans share a label.
    The arguments must already be in canonical direction (:func:`canonical_instance`).
    """
    obj = f"={normalise_value(value)}" if value is not None else f"{o_start}-{o_end}"
    return f"{doc}\t{s_start}-{s_end}\t{predicate}\t{obj}"


def key_hash(key: str) -> int:
    """A signed 64-bit digest of an instance key (what databases index and join on)."""
    return int.from_bytes(blake2b(key.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


def canonical_instance(schema: Schema, inst: Instance, predicate: str) -> tuple[Instance, bool]:
    """Rewrite ``inst`` (asserted with ``predicate``) into canonical direction.

    Returns the instance and whether its arguments were exchanged.  An inverse
    relation is rewritten to its canonical relation with subject and object
    exchanged; a symmetric relation puts the argument with the smaller
    ``(start, end)`` first.
    """
    canonical, swap = schema.canonical_of(predicate)
    inst.predicate = canonical
    if not swap and inst.object is not None and schema.relations[canonical].symmetric:
        swap = (inst.object_start, inst.object_end) < (inst.subject_start, inst.subject_end)
    if swap:
        inst.subject, inst.object = inst.object, inst.subject  # type: ignore[assignment]
        inst.subject_start, inst.object_start = inst.object_start, inst.subject_start
        inst.subject_end, inst.object_end = inst.object_end, inst.subject_end
    return inst, swap


class CorpusView(Protocol):
    """What validation needs to know about a corpus."""

    def __contains__(self, doc_id: str) -> bool: ...

    def length(self, doc_id: str) -> int: ...

    def text(self, doc_id: str) -> str: ...

    def sentences(self, doc_id: str) -> tuple[list[int], list[int]]: ...


class InMemoryCorpus:
    """A :class:`CorpusView` over documents held in memory."""

    def __init__(self, documents: Iterable) -> None:
        self._docs = {d.id: d for d in documents}
        self._sent: dict[str, tuple[list[int], list[int]]] = {}

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self._docs

    def __len__(self) -> int:
        return len(self._docs)

    def length(self, doc_id: str) -> int:
        return len(self._docs[doc_id].text)

    def text(self, doc_id: str) -> str:
        return self._docs[doc_id].text

    def sentences(self, doc_id: str) -> tuple[list[int], list[int]]:
        got = self._sent.get(doc_id)
        if got is None:
            spans = self._docs[doc_id].sentences
            got = self._sent[doc_id] = ([s for s, _ in spans], [e for _, e in spans])
        return got

    @property
    def ids(self) -> list[str]:
        return list(self._docs)


@dataclass
class KB:
    """A parsed, validated submission: entities, mentions and canonical instances."""

    run_id: str
    format: str
    entities: dict[str, Entity] = field(default_factory=dict)
    mentions: list[Mention] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "entities": len(self.entities),
            "mentions": len(self.mentions),
            "instances": len(self.instances),
            "string_instances": sum(1 for i in self.instances if i.value is not None),
            "documents": len({i.doc for i in self.instances}),
            "predicates": len({i.predicate for i in self.instances}),
        }

    def instance_set(self) -> dict[str, tuple]:
        """key -> comparable content, for round-trip checks."""
        return {
            i.key: (i.subject, i.object, i.value, tuple(sorted(i.provenance)), round(i.confidence, 6))
            for i in self.instances
        }
