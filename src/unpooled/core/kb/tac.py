"""TAC KBP Cold Start knowledge bases: streaming reader and writer.

Format (tab-separated; the first line is the run id)::

    my_run_1
    :e1   type               PER
    :e1   link               WIKI:Barack_Obama
    :e1   canonical_mention  "Barack Obama"   DOC1:0-11
    :e1   mention            "Obama"          DOC1:40-44   [conf]
    :e1   nominal_mention    "the president"  DOC1:60-72
    :e1   per:spouse         :e2              DOC1:0-80[,DOC1:90-120...]  [conf]
    :e1   per:title          "president"      DOC1:64-72,DOC1:0-80        [conf]

Offsets are TAC's: character offsets into the raw source document (markup
included) with *inclusive* ends.  Document ids may contain ``-``, ``.`` and
``:``; a provenance is split at its last ``:``.

For a string-valued slot the first provenance span is the filler's span and
the rest justify the relation.  With a single span, the span is the filler if
its text is the filler (the justification is then the sentence holding it), or
the justification if the filler occurs inside it; otherwise the filler cannot
be located and the line is an error (UP208).
"""

from __future__ import annotations

import re
from sys import intern
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, TextIO

from ..corpus.model import covering_sentences
from ..diagnostics import Report
from ..schema import Schema
from .builder import Col, KBBuilder, PendingRelation, text_matches
from .lines import Limits, read_lines
from .model import KB, MENTION_KINDS, CorpusView, Entity, Instance, Mention

PROVENANCE = re.compile(r"^(.+):(\d+)-(\d+)$")
_NONWS = re.compile(r"\S")


def _col(fields: list[str], i: int) -> int:
    """1-based column where field ``i`` starts."""
    return sum(map(len, fields[:i])) + i + 1


def unquote(field: str) -> str | None:
    r"""The content of a ``"quoted"`` field (``\"`` and ``\\`` unescaped), or None if not quoted."""
    if len(field) < 2 or field[0] != '"' or field[-1] != '"':
        return None
    inner = field[1:-1]
    if "\\" in inner:
        inner = re.sub(r'\\(["\\])', r"\1", inner)
    return inner


def tac_id(name: str) -> str:
    """An entity id in Cold Start form (``:name``, no whitespace)."""
    name = re.sub(r"\s+", "_", name)
    return name if name.startswith(":") else ":" + name


def quote(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def read_tac(
    source: str | Path | BinaryIO,
    corpus: CorpusView,
    schema: Schema,
    *,
    path: str | None = None,
    limits: Limits = Limits(),
    report: Report | None = None,
) -> tuple[KB | None, Report]:
    """Parse and validate a TAC Cold Start KB; ``(KB or None, report)``.

    The KB is None when the report holds any error: a file is accepted whole
    or not at all.
    """
    report = report or Report(path=path or str(source))
    b = KBBuilder(corpus, schema, report, fmt="tac", offsets="inclusive")
    run_id = ""
    for lineno, line in read_lines(source, report, limits=limits):
        b.lines = lineno
        if lineno == 1:
            head = line.strip()
            if not head or "\t" in head or " " in head:
                report.add(
                    1, "UP104",
                    "the first line must be the run id (one token)" if head else "the first line (run id) is empty",
                    text=line, help="start the file with a line holding only your run id",
                )
                if "\t" not in head:
                    continue
            else:
                run_id = head
                continue
        line = line.rstrip(" \t")
        if not _NONWS.search(line):
            continue
        _read_line(b, lineno, line)
    if report.code_counts.get("UP100") or report.code_counts.get("UP110"):
        b.report.counts.update(lines=b.lines)
        return None, report
    kb = b.finish(run_id)
    return kb, report


def _read_line(b: KBBuilder, lineno: int, line: str) -> None:
    rep = b.report
    fields = line.split("\t")
    n = len(fields)
    if n < 3:
        rep.add(lineno, "UP103", f"expected at least 3 tab-separated columns, found {n}", text=line,
                help="columns are separated by TAB characters")
        return
    # entity ids, predicates and (in _provenance) document ids recur on many lines: one string each
    subj, pred = intern(fields[0]), intern(fields[1])
    if not subj.startswith(":") or len(subj) < 2 or " " in subj:
        rep.add(lineno, "UP103", f"entity id {subj!r} must start with ':' and contain no space", field="subject",
                text=line, col=1)
        return
    if pred == "type":
        if n != 3:
            rep.add(lineno, "UP103", f"a type line has 3 columns, found {n}", text=line)
            return
        b.set_type(subj, fields[2].strip(), lineno, text=line, col=_col(fields, 2))
        return
    if pred == "link":
        if n not in (3, 4) or not fields[2].strip():
            rep.add(lineno, "UP103", f"a link line has 3 or 4 columns and a link id, found {n}", text=line)
            return
        if n == 4 and _confidence(b, lineno, fields, 3, line) is None:
            return
        b.add_link(subj, fields[2].strip(), lineno)
        return
    if pred in MENTION_KINDS:
        _read_mention(b, lineno, line, fields, subj, pred)
    else:
        _read_relation(b, lineno, line, fields, subj, pred)


def _read_mention(b: KBBuilder, lineno: int, line: str, fields: list[str], subj: str, pred: str) -> None:
    """A mention line: ``:e  mention|canonical_mention|...  "text"  DOC:b-e  [confidence]``."""
    rep, n = b.report, len(fields)
    if n not in (4, 5):
        rep.add(lineno, "UP103", f"a {pred} line has 4 or 5 columns, found {n}", text=line)
        return
    text = unquote(fields[2])
    if text is None:
        rep.add(lineno, "UP111", f"the mention string must be in double quotes, got {fields[2]!r}",
                field="mention", text=line, col=_col(fields, 2))
        return
    col = lambda: _col(fields, 3)  # noqa: E731 (only a diagnostic needs it)
    span = _provenance(b, lineno, fields[3], line, col, single=True)
    conf = _confidence(b, lineno, fields, 4, line) if n == 5 else 1.0
    if span is None or conf is None:
        return
    doc, spans = span
    (s, e), = spans
    if b.check_span(doc, s, e, lineno, field="provenance", text=line, col=col, expect=text):
        b.add_mention(subj, doc, s, e, pred, lineno, confidence=conf, text=line)


def _read_relation(b: KBBuilder, lineno: int, line: str, fields: list[str], subj: str, pred: str) -> None:
    """A relation line: ``:e1  predicate  :e2|"string"  DOC:b-e[,DOC:b-e...]  [confidence]``."""
    rep, n = b.report, len(fields)
    if n not in (4, 5):
        rep.add(lineno, "UP103", f"a relation line has 4 or 5 columns, found {n}", text=line,
                help="subject, predicate, object, provenance[, confidence]")
        return
    if not b.predicate_ok(pred, lineno, text=line, col=lambda: _col(fields, 1)):
        return
    rel = b.schema.resolve(pred)
    obj = fields[2]
    value = None
    if obj.startswith(":"):
        obj = intern(obj)
        if rel.string_valued:
            rep.add(lineno, "UP218", f"{pred} is string-valued: its object is a quoted string, not an entity",
                    field="object", text=line, col=_col(fields, 2))
            return
    elif obj.startswith('"'):
        value = unquote(obj)
        if value is None or not value.strip():
            rep.add(lineno, "UP111", f"malformed quoted string {obj!r}", field="object", text=line,
                    col=_col(fields, 2))
            return
        if not rel.string_valued:
            rep.add(lineno, "UP218", f"{pred} relates two entities: its object is an entity id (:e), not a string",
                    field="object", text=line, col=_col(fields, 2))
            return
    else:
        rep.add(lineno, "UP103", f"the object {obj!r} must be an entity id (':e2') or a quoted string",
                field="object", text=line, col=_col(fields, 2))
        return
    col = lambda: _col(fields, 3)  # noqa: E731
    prov = _provenance(b, lineno, fields[3], line, col)
    conf = _confidence(b, lineno, fields, 4, line) if n == 5 else 1.0
    if prov is None or conf is None:
        return
    doc, spans = prov
    if not all(b.check_span(doc, s, e, lineno, field="provenance", text=line, col=col) for s, e in spans):
        return
    if subj == obj:
        rep.add(lineno, "UP206", f"self-relation: {subj} {pred} {obj}", field="object", text=line,
                col=_col(fields, 2), help="subject and object must be different entities")
        return
    if value is None:
        b.add_relation(PendingRelation(lineno, subj, pred, obj, None, doc, tuple(spans), conf))
        return
    located = _locate_filler(b, doc, spans, value)
    if located is None:
        b.err(
            lineno, "UP208",
            f"cannot find the filler {value!r} of string-valued slot {pred} in its provenance",
            field="provenance", text=line, col=col,
            help="give the filler's own span first, then the justification: DOC:b-e,DOC:b-e",
        )
        return
    filler, just = located
    b.add_relation(PendingRelation(lineno, subj, pred, None, value, doc, just, conf, object_span=filler))


def _locate_filler(b: KBBuilder, doc: str, spans: list[tuple[int, int]], value: str):
    text = b.corpus.text(doc)
    if len(spans) >= 2:
        # Cold Start convention: the first span is the filler (dates may be normalised
        # in the filler string, so its text is not compared).
        return spans[0], tuple(spans[1:])
    (s, e), = spans
    if text_matches(text[s:e], value):
        starts, ends = b.corpus.sentences(doc)
        return (s, e), (covering_sentences(starts, ends, s, e),)
    pos = text[s:e].casefold().find(value.casefold())
    if pos >= 0:
        return (s + pos, s + pos + len(value)), ((s, e),)
    return None


def _provenance(b: KBBuilder, lineno: int, field: str, line: str, col: Col, *, single: bool = False):
    """``(doc, [(start, end_exclusive), ...])`` or None (reported)."""
    parts = field.split(",")
    if single and len(parts) != 1:
        b.err(lineno, "UP105", f"a mention has one provenance span, found {len(parts)}",
              field="provenance", text=line, col=col)
        return None
    doc = None
    spans = []
    for p in map(str.strip, parts):
        m = PROVENANCE.match(p)
        if m is None:
            b.err(lineno, "UP105", f"malformed provenance {p!r}", field="provenance", text=line, col=col,
                  help="write DOCID:start-end with inclusive character offsets, comma-separated")
            return None
        d, s, e = m.groups()
        s, e = int(s), int(e)
        if e < s:
            b.err(lineno, "UP108", f"provenance {p!r} ends before it starts", field="provenance",
                  text=line, col=col, help="TAC offsets are start-end with an inclusive end")
            return None
        if doc is None:
            doc = intern(d)
        elif d != doc:
            b.err(lineno, "UP214", f"provenance spans two documents ({doc!r} and {d!r})", field="provenance",
                  text=line, col=col, help="a relation instance is justified within one document")
            return None
        spans.append((s, e + 1))
    return doc, spans


def _confidence(b: KBBuilder, lineno: int, fields: list[str], i: int, line: str) -> float | None:
    raw = fields[i].strip()
    try:
        conf = float(raw)
    except ValueError:
        conf = float("nan")
    if not (0.0 < conf <= 1.0):
        b.report.add(lineno, "UP109", f"confidence {raw!r} must be a number in (0, 1]", field="confidence",
                     text=line, col=_col(fields, i))
        return None
    return conf


# ---------------------------------------------------------------------------
def write_tac(
    out: TextIO,
    run_id: str,
    entities: Iterable[Entity],
    mentions: Iterable[Mention],
    instances: Iterable[Instance],
    text_of: Callable[[str, int, int], str],
) -> int:
    """Write a KB in Cold Start format (canonical direction only); returns lines written.

    ``text_of(doc, start, end)`` gives the document text of a span (for
    mention strings).  Entities without a type are written without a type line.
    """
    n = 1
    out.write(f"{run_id}\n")
    for ent in entities:
        if ent.type:
            out.write(f"{tac_id(ent.name)}\ttype\t{ent.type}\n")
            n += 1
        for link in ent.links:
            out.write(f"{tac_id(ent.name)}\tlink\t{link}\n")
            n += 1
    for m in mentions:
        q = quote(text_of(m.doc, m.start, m.end))
        conf = "" if m.confidence == 1.0 else f"\t{m.confidence!r}"
        span = f"{m.doc}:{m.start}-{m.end - 1}"
        if m.canonical:
            out.write(f"{tac_id(m.entity)}\tcanonical_mention\t{q}\t{span}{conf}\n")
            n += 1
        out.write(f"{tac_id(m.entity)}\t{m.kind}\t{q}\t{span}{conf}\n")
        n += 1
    for i in instances:
        prov = ",".join(f"{i.doc}:{s}-{e - 1}" for s, e in i.provenance)
        if i.value is not None:
            obj = quote(i.value)
            prov = f"{i.doc}:{i.object_start}-{i.object_end - 1}" + ("," + prov if prov else "")
        else:
            obj = tac_id(i.object)
        out.write(f"{tac_id(i.subject)}\t{i.predicate}\t{obj}\t{prov}\t{i.confidence!r}\n")
        n += 1
    return n
