"""Corpus data model of the pure core.

A corpus is a stream of :class:`Document` objects.  A document carries its full
text (for TAC sources, the raw SGML/XML including markup, because TAC offsets
count markup characters), its sentences as character spans into that text
(end-exclusive), and optionally a gold annotation layer (Re-DocRED: mentions,
entity clusters, relations).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GoldMention:
    """A gold mention: ``text[start:end]`` of the document, in entity cluster ``entity``."""

    entity: int
    start: int
    end: int
    type: str
    sentence: int


@dataclass(frozen=True, slots=True)
class GoldEntity:
    """A gold entity cluster (DocRED ``vertexSet`` entry); ``index`` is its position in the document."""

    index: int
    type: str
    name: str
    mentions: tuple[GoldMention, ...]


@dataclass(frozen=True, slots=True)
class GoldRelation:
    """A gold relation between two entity clusters, with evidence sentence indices."""

    subject: int
    predicate: str
    object: int
    evidence: tuple[int, ...] = ()


@dataclass(slots=True)
class Document:
    """One corpus document.

    ``sentences`` are ``(start, end)`` character spans into ``text`` (end-exclusive),
    sorted and non-overlapping.  ``source`` records where the document came from
    (file path and format).
    """

    id: str
    text: str
    title: str = ""
    source: str = ""
    sentences: list[tuple[int, int]] = field(default_factory=list)
    entities: list[GoldEntity] = field(default_factory=list)
    relations: list[GoldRelation] = field(default_factory=list)

    @property
    def has_gold(self) -> bool:
        return bool(self.entities)

    def sentence_index(self, offset: int) -> int:
        """Index of the sentence holding character ``offset``; -1 if none does."""
        return sentence_at([s for s, _ in self.sentences], [e for _, e in self.sentences], offset)


def sentence_at(starts: list[int], ends: list[int], offset: int) -> int:
    """Index of the span ``[starts[i], ends[i])`` holding ``offset``, or -1."""
    i = bisect_right(starts, offset) - 1
    if i >= 0 and offset < ends[i]:
        return i
    return -1


def covering_sentences(starts: list[int], ends: list[int], start: int, end: int) -> tuple[int, int]:
    """The character span of the sentence(s) that hold ``[start, end)``.

    Falls back to ``(start, end)`` when an end point lies between sentences.
    """
    i = sentence_at(starts, ends, start)
    j = sentence_at(starts, ends, max(start, end - 1))
    lo = starts[i] if i >= 0 else start
    hi = ends[j] if j >= 0 else end
    return min(lo, start), max(hi, end)
