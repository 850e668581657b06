"""Validation shared by every submission format.

Format readers (:mod:`.tac`, :mod:`.jsonl`) feed a :class:`KBBuilder` with
entity types, links, mentions and relation assertions, each tagged with its
line.  The builder checks them against the corpus and the schema, resolves
arguments, rewrites instances into canonical direction, drops duplicates and
returns a :class:`~.model.KB` -- or, when any error was found, nothing: a file
with errors is rejected whole.
"""

from __future__ import annotations

import difflib
import html
import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable, Union

from ..corpus.model import covering_sentences
from ..diagnostics import ERROR, WARNING, Report
from ..schema import Schema
from .model import KB, CorpusView, Entity, Instance, Mention, canonical_instance, key_hash, normalise_value

_WS = re.compile(r"\s+")

#: a diagnostic's column, or a function giving it (see :meth:`KBBuilder.err`)
Col = Union[int, Callable[[], int]]


def _squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def text_matches(actual: str, given: str) -> bool:
    """Whether a mention's stated text matches the document text at its offsets.

    Tolerates differences in whitespace (newlines in the source) and XML
    character entities (``AT&amp;T`` in the raw source, ``AT&T`` in the KB).
    """
    if actual == given:
        return True
    a, g = _squash(actual), _squash(given)
    return a == g or _squash(html.unescape(actual)) == g or a == _squash(html.unescape(given))


@dataclass(slots=True)
class PendingRelation:
    """A relation assertion waiting for all entity lines to be read."""

    line: int
    subject: str
    predicate: str  # as asserted (may be an inverse or alias)
    object: str | None  # entity name, or None for a string filler
    value: str | None
    doc: str
    provenance: tuple[tuple[int, int], ...]
    confidence: float
    # spans already known (JSONL); -1 when they must be resolved (TAC)
    subject_span: tuple[int, int] = (-1, -1)
    object_span: tuple[int, int] = (-1, -1)
    object_type: str | None = None  # stated type of a string filler (JSONL)
    provenance_given: bool = True


class KBBuilder:
    """Accumulates one submission and validates it."""

    def __init__(self, corpus: CorpusView, schema: Schema, report: Report, *, fmt: str, offsets: str = "exclusive"):
        self.corpus, self.schema, self.report, self.fmt = corpus, schema, report, fmt
        self.inclusive = offsets == "inclusive"
        self.kb = KB(run_id="", format=fmt)
        self.pending: list[PendingRelation] = []
        # (doc, start, end) -> the first entity's mention there; another entity's mention of that span (UP219)
        # is kept under (entity, doc, start, end) in _other_mentions
        self._span_mention: dict[tuple[str, int, int], Mention] = {}
        self._other_mentions: dict[tuple[str, str, int, int], Mention] = {}
        self._type_line: dict[str, int] = {}
        self._canonical: dict[tuple[str, str], tuple[int, int, int]] = {}
        self.lines = 0

    # -- helpers ----------------------------------------------------------
    def err(self, line: int, code: str, msg: str, **kw) -> None:
        """Report a problem; ``col`` may be a function giving the column (a reader's column costs a sum over
        the line's fields: made only when there is something to report)."""
        if callable(kw.get("col")):
            kw["col"] = kw["col"]()
        self.report.add(line, code, msg, **kw)

    def fmt_span(self, doc: str, start: int, end: int) -> str:
        return f"{doc}:{start}-{end - 1}" if self.inclusive else f"{doc}:{start}-{end}"

    def entity(self, name: str, line: int) -> Entity:
        ent = self.kb.entities.get(name)
        if ent is None:
            ent = self.kb.entities[name] = Entity(name, line=line)
        return ent

    def check_doc(self, doc: str, line: int, *, field: str, text: str = "", col: Col = 0) -> bool:
        if doc in self.corpus:
            return True
        name = getattr(self.corpus, "name", None)
        where = f"the corpus {name!r}" if isinstance(name, str) and name else "the corpus"
        self.err(line, "UP201", f"unknown document {doc!r}: not in {where}", field=field, text=text, col=col)
        return False

    def check_span(
        self, doc: str, start: int, end: int, line: int, *, field: str, text: str = "", col: Col = 0,
        expect: str | None = None,
    ) -> bool:
        """Document known, ``0 <= start < end <= len``, and (if given) the text matches."""
        if not self.check_doc(doc, line, field=field, text=text, col=col):
            return False
        n = self.corpus.length(doc)
        if start < 0 or end > n:
            shown = self.fmt_span(doc, start, end)
            self.err(
                line, "UP202", f"offsets {shown} are outside document {doc!r} ({n:,} characters)",
                field=field, text=text, col=col,
                help="offsets count characters of the document text"
                + (" (TAC: of the raw source, markup included; ends are inclusive)" if self.inclusive else ""),
            )
            return False
        if expect is not None:
            actual = self.corpus.text(doc)[start:end]
            if not text_matches(actual, expect):
                self.err(
                    line, "UP203",
                    f"mention text {expect!r} does not match the document text {actual!r} at {self.fmt_span(doc, start, end)}",
                    field=field, text=text, col=col, help=self._offset_hint(doc, start, end, expect),
                )
                return False
        return True

    def _offset_hint(self, doc: str, start: int, end: int, expect: str) -> str:
        full = self.corpus.text(doc)
        lo = max(0, start - 200)
        window = full[lo : end + 200]
        pos = window.find(expect)
        if pos < 0:
            pos = window.casefold().find(expect.casefold())
        if pos >= 0:
            s = lo + pos
            return f"{expect!r} occurs at {self.fmt_span(doc, s, s + len(expect))}" + (
                " (TAC ends are inclusive: end = start + length - 1)" if self.inclusive else " (ends are exclusive)"
            )
        return "check the offsets, the document id and the character counting (characters, not bytes)"

    # -- entity-side input -------------------------------------------------
    def set_type(self, name: str, type_: str, line: int, *, text: str = "", col: int = 0) -> None:
        ent = self.entity(name, line)
        if type_ not in self.schema.entity_types:
            self.err(
                line, "UP217",
                f"entity type {type_!r} is not in schema {self.schema.name} ({', '.join(self.schema.entity_types)})",
                field="type", text=text, col=col,
            )
            return
        if ent.type is not None and ent.type != type_:
            self.err(
                line, "UP207",
                f"entity {name} is typed {type_} here but {ent.type} on line {self._type_line.get(name, '?')}",
                field="type", text=text, col=col, help="an entity has exactly one type",
            )
            return
        if ent.type is None:
            ent.type = type_
            self._type_line[name] = line

    def add_link(self, name: str, link: str, line: int) -> None:
        ent = self.entity(name, line)
        if link not in ent.links:
            ent.links.append(link)

    def add_mention(
        self, name: str, doc: str, start: int, end: int, kind: str, line: int, *,
        confidence: float = 1.0, text: str = "",
    ) -> None:
        """A validated mention (the caller has already checked the span)."""
        self.entity(name, line)
        span = (doc, start, end)
        m = first = self._span_mention.get(span)
        if first is not None and first.entity != name:
            m = self._other_mentions.get((name, *span))
        canonical = kind == "canonical_mention"
        if m is None:
            m = Mention(name, doc, start, end, "mention" if canonical else kind, canonical, confidence, line)
            self.kb.mentions.append(m)
            if first is None:
                self._span_mention[span] = m
            else:
                self._other_mentions[(name, *span)] = m
                self.err(
                    line, "UP219",
                    f"mention {self.fmt_span(doc, start, end)} of {name} is also a mention of {first.entity}",
                    text=text, help="a mention belongs to one entity; arguments are resolved by entity",
                )
        elif canonical:
            m.canonical = True
        elif m.canonical and m.kind == "mention" and kind != "mention":
            m.kind = kind
        if canonical:
            first = self._canonical.setdefault((name, doc), (start, end, line))
            if first[:2] != (start, end):
                self.err(
                    line, "UP216",
                    f"entity {name} has several canonical mentions in {doc} (first on line {first[2]})",
                    text=text, help="give one canonical_mention per entity and document",
                )

    # -- relations ---------------------------------------------------------
    def predicate_ok(self, predicate: str, line: int, *, text: str = "", col: Col = 0) -> bool:
        if self.schema.resolve(predicate) is not None:
            return True
        self.err(
            line, "UP204", f"unknown predicate {predicate!r} in schema {self.schema.name}",
            field="predicate", text=text, col=col, help=self._predicate_help(predicate),
        )
        return False

    def _predicate_help(self, predicate: str) -> str:
        """"did you mean" the relations whose name, or whose description, is close to ``predicate`` ('spouse' ->
        P26 (spouse): a schema of codes is searched by meaning too), else where the relations are listed."""
        rels = self.schema.relations
        close = difflib.get_close_matches(predicate, list(rels), n=3)
        if not close:
            said = predicate.strip().lower().replace("_", " ")
            by_meaning = {r.description.lower(): name for name, r in rels.items() if r.description}
            close = [by_meaning[d] for d in difflib.get_close_matches(said, list(by_meaning), n=3, cutoff=0.75)]
            close += [n for d, n in by_meaning.items() if said and said in d.split(" ") and n not in close][:3 - len(close)]
        if close:
            named = [f"{n} ({rels[n].description})" if rels[n].description else n for n in close]
            return f"did you mean {', '.join(named)}?"
        return (f"the relations of schema {self.schema.name} are listed on the corpus's Schema page "
                f"(or `unpooled schema show {self.schema.name}`)")

    def add_relation(self, rel: PendingRelation) -> None:
        self.pending.append(rel)

    def finish(self, run_id: str) -> KB | None:
        """Resolve pending relations, check consistency; the KB, or None if any error."""
        self.kb.run_id = run_id
        # what only the reading of mention lines needed: freed before the instances are made
        self._span_mention, self._other_mentions, self._canonical = {}, {}, {}
        self._check_entities()
        index = self._mention_index()
        seen: dict[int, tuple[int, str, bool]] = {}
        single: dict[tuple[str, str], set] = {}
        merged = dup = 0
        pending, self.pending = self.pending, []
        pending.reverse()
        while pending:  # each assertion freed once resolved
            rel = pending.pop()
            inst = self._resolve(rel, index)
            if inst is None:
                continue
            asserted = inst.predicate  # alias resolved, direction as asserted
            inst, swapped = canonical_instance(self.schema, inst, asserted)
            h = key_hash(inst.key)  # stable: Python's hash() of a string varies by process
            prev = seen.get(h)
            if prev is not None:
                prev_line, prev_pred, prev_swapped = prev
                if (prev_pred, prev_swapped) == (asserted, swapped):
                    dup += 1
                    self.err(
                        rel.line, "UP209", f"duplicate of the instance on line {prev_line}; this line is ignored",
                        help="the same subject, predicate, object and mentions in the same document",
                    )
                else:
                    merged += 1  # the inverse of an instance already present: one canonical instance
                continue
            seen[h] = (rel.line, asserted, swapped)
            self.kb.instances.append(inst)
            r = self.schema.relations[inst.predicate]
            if r.single_valued:
                vals = single.setdefault((inst.subject, inst.predicate), set())
                vals.add(normalise_value(inst.value) if inst.value is not None else inst.object)
                if len(vals) == 2:
                    self.err(
                        rel.line, "UP215",
                        f"{inst.predicate} is single-valued but {inst.subject} has several values",
                        help="keep only the best-supported value",
                    )
        self.report.counts.update(
            lines=self.lines, **self.kb.counts(), inverses_merged=merged, duplicates_dropped=dup,
        )
        if not self.kb.instances and self.report.ok:
            self.err(0, "UP112", "the submission holds no relation instance")
        return self.kb if self.report.ok else None

    def _check_entities(self) -> None:
        with_mentions = {m.entity for m in self.kb.mentions}
        for ent in self.kb.entities.values():
            if ent.type is None and self.fmt == "tac":
                self.err(ent.line, "UP211", f"entity {ent.name} has no type line",
                         help=f"add `{ent.name}\ttype\tPER` (or ORG, GPE, ...)")
            if ent.name not in with_mentions and self.fmt == "tac":
                self.err(ent.line, "UP221", f"entity {ent.name} has no mention")

    def _mention_index(self) -> dict[tuple[str, str], list[tuple[int, int]]]:
        index: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for m in self.kb.mentions:
            index.setdefault((m.entity, m.doc), []).append((m.start, m.end))
        for spans in index.values():
            spans.sort()
        return index

    def _pick(self, rel: PendingRelation, name: str, spans: list[tuple[int, int]] | None, role: str):
        if not spans:
            self.err(
                rel.line, "UP213", f"{role} {name} has no mention in document {rel.doc}",
                field=role, help=f"add a mention line for {name} in {rel.doc}",
            )
            return None
        for b, e in rel.provenance:
            i = bisect_left(spans, (b, -1))
            while i < len(spans) and spans[i][0] < e:
                if spans[i][1] <= e:
                    return spans[i]
                i += 1
        b0 = rel.provenance[0][0]
        best = min(spans, key=lambda s: abs(s[0] - b0))
        self.err(
            rel.line, "UP212",
            f"no mention of {role} {name} lies inside the justification; using the nearest one at "
            f"{self.fmt_span(rel.doc, *best)}",
            field=role,
        )
        return best

    def _resolve(self, rel: PendingRelation, index) -> Instance | None:
        r = self.schema.resolve(rel.predicate)
        if r is None:  # already reported
            return None
        ok = True
        if rel.subject not in self.kb.entities:
            self.err(rel.line, "UP210", f"subject {rel.subject} is never defined", field="subject",
                     help="define the entity with type and mention lines")
            ok = False
        if rel.object is not None and rel.object not in self.kb.entities:
            self.err(rel.line, "UP210", f"object {rel.object} is never defined", field="object",
                     help="define the entity with type and mention lines")
            ok = False
        if rel.object is not None and rel.object == rel.subject:
            self.err(rel.line, "UP206", f"self-relation: {rel.subject} {rel.predicate} {rel.object}",
                     field="object", help="subject and object must be different entities")
            return None
        if not ok:
            return None
        # -- argument types
        policy = self.schema.type_check
        if policy != "off":
            sev = ERROR if policy == "error" else WARNING
            st = self.kb.entities[rel.subject].type
            if st is not None and st not in r.subject_types:
                self.err(rel.line, "UP205",
                         f"{rel.predicate} takes a subject of type {'/'.join(sorted(r.subject_types))}, "
                         f"but {rel.subject} is {st}", field="subject", severity=sev)
                ok = ok and sev != ERROR
            ot = self.kb.entities[rel.object].type if rel.object is not None else rel.object_type
            if rel.object is None and ot == "STRING":
                ot = None  # Cold Start types every filler as a string: accepted for any string-valued slot
            if ot is not None and ot not in r.object_types:
                self.err(rel.line, "UP205",
                         f"{rel.predicate} takes an object of type {'/'.join(sorted(r.object_types))}, "
                         f"but {rel.object or repr(rel.value)} is {ot}", field="object", severity=sev)
                ok = ok and sev != ERROR
        if not ok:
            return None
        # -- argument spans
        if rel.subject_span[0] >= 0:
            s_span = rel.subject_span
        else:
            s_span = self._pick(rel, rel.subject, index.get((rel.subject, rel.doc)), "subject")
        if rel.object is None:
            o_span = rel.object_span
        elif rel.object_span[0] >= 0:
            o_span = rel.object_span
        else:
            o_span = self._pick(rel, rel.object, index.get((rel.object, rel.doc)), "object")
        if s_span is None or o_span is None:
            return None
        if rel.object is not None and s_span == o_span:
            self.err(rel.line, "UP206",
                     f"self-relation: subject and object are the same mention {self.fmt_span(rel.doc, *s_span)}",
                     field="object")
            return None
        prov = rel.provenance
        if not rel.provenance_given:
            starts, ends = self.corpus.sentences(rel.doc)
            lo, hi = min(s_span[0], o_span[0]), max(s_span[1], o_span[1])
            prov = (covering_sentences(starts, ends, lo, hi),)
        return Instance(
            rel.doc, rel.subject, s_span[0], s_span[1], r.name,
            rel.object, o_span[0], o_span[1], rel.value, prov, rel.confidence, rel.line,
        )
