"""JSONL submissions: one relation instance per line.

::

    {"doc": "D1",
     "subject": {"start": 0, "end": 12, "entity": "e1", "type": "PER", "link": "Q76"},
     "predicate": "per:spouse",
     "object": {"start": 40, "end": 57, "entity": "e2", "type": "PER"},
     "provenance": [{"start": 0, "end": 80}],
     "confidence": 0.9}

Offsets are character offsets into the corpus document text, end-exclusive.
``entity`` is the system's own cluster id (entity-level scores use it); a
string-valued object carries ``"value"`` instead of ``"entity"`` (its offsets
locate the filler).  Optional: ``type`` (checked against the schema; one type
per entity), ``link``, ``text`` (checked against the document text),
``provenance`` (default: the sentence(s) holding both mentions) and
``confidence`` (default 1).  Blank lines are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import BinaryIO, Iterable, TextIO

from .. import json_text
from ..diagnostics import Report
from ..schema import Schema
from .builder import KBBuilder, PendingRelation
from .lines import Limits, read_lines
from .model import KB, CorpusView, Entity, Instance

_ARG_KEYS = {"start", "end", "entity", "value", "type", "link", "text"}


def read_jsonl(
    source: str | Path | BinaryIO,
    corpus: CorpusView,
    schema: Schema,
    *,
    path: str | None = None,
    limits: Limits = Limits(),
    report: Report | None = None,
) -> tuple[KB | None, Report]:
    """Parse and validate a JSONL submission; ``(KB or None, report)``."""
    report = report or Report(path=path or str(source))
    b = KBBuilder(corpus, schema, report, fmt="jsonl")
    for lineno, line in read_lines(source, report, limits=limits):
        b.lines = lineno
        if not line.strip():
            continue
        _read_line(b, lineno, line)
    if report.code_counts.get("UP100") or report.code_counts.get("UP110"):
        report.counts.update(lines=b.lines)
        return None, report
    return b.finish(""), report


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def field_column(line: str, fld: str) -> int:
    """The 1-based column of field ``fld`` (``"subject.end"``: the key ``"end"`` after the key ``"subject"``) in a
    JSON ``line``, or 0 when a key is not found: a diagnostic points at the field, not at the line's start."""
    pos, col = 0, 0
    for part in fld.split("."):
        at = line.find(f'"{part}"', pos)
        if at < 0:
            break
        pos, col = at + 1, at + 1
    return col


def _read_line(b: KBBuilder, lineno: int, line: str) -> None:
    rep = b.report
    try:
        obj = json_text.loads(line)
    except json.JSONDecodeError as exc:
        rep.add(lineno, "UP106", f"invalid JSON: {exc.msg}", col=exc.colno, text=line)
        return
    if not isinstance(obj, dict):
        rep.add(lineno, "UP106", f"each line must be a JSON object, got {type(obj).__name__}", text=line)
        return

    def bad(fld: str, msg: str, code: str = "UP107") -> None:
        rep.add(lineno, code, msg, field=fld, text=line, col=field_column(line, fld))

    doc = obj.get("doc")
    if not isinstance(doc, str) or not doc:
        return bad("doc", "'doc' must be a non-empty string (a document id of the corpus)")
    pred = obj.get("predicate")
    if not isinstance(pred, str) or not pred:
        return bad("predicate", "'predicate' must be a non-empty string")
    args = {}
    for role in ("subject", "object"):
        a = obj.get(role)
        if not isinstance(a, dict):
            return bad(role, f"'{role}' must be an object with start, end and entity" + (" or value" if role == "object" else ""))
        unknown = set(a) - _ARG_KEYS
        if unknown:
            return bad(f"{role}.{sorted(unknown)[0]}", f"unknown key(s) {sorted(unknown)} in '{role}'")
        for k in ("start", "end"):
            if not _int(a.get(k)):
                return bad(f"{role}.{k}", f"'{role}.{k}' must be an integer character offset")
        if a["start"] < 0 or a["end"] <= a["start"]:
            return bad(f"{role}", f"'{role}' span {a['start']}-{a['end']} is empty or negative "
                       "(offsets are end-exclusive: end > start >= 0)", "UP108")
        for k in ("type", "link", "text"):
            if k in a and (not isinstance(a[k], str) or not a[k]):
                return bad(f"{role}.{k}", f"'{role}.{k}' must be a non-empty string")
        has_ent, has_val = "entity" in a, "value" in a
        if role == "subject" and (not has_ent or has_val):
            return bad("subject.entity", "'subject' needs 'entity' (the system's entity id) and no 'value'")
        if role == "object" and has_ent == has_val:
            return bad("object", "'object' needs exactly one of 'entity' (an entity id) or 'value' (a string filler)")
        key = "entity" if has_ent else "value"
        if not isinstance(a[key], str) or not a[key].strip():
            return bad(f"{role}.{key}", f"'{role}.{key}' must be a non-empty string")
        args[role] = a
    conf = obj.get("confidence", 1.0)
    if not isinstance(conf, (int, float)) or isinstance(conf, bool) or not (0.0 < conf <= 1.0):
        rep.add(lineno, "UP109", f"'confidence' must be a number in (0, 1], got {conf!r}", field="confidence", text=line)
        return
    prov_raw = obj.get("provenance")
    prov: list[tuple[int, int]] = []
    if prov_raw is not None:
        if not isinstance(prov_raw, list) or not prov_raw:
            return bad("provenance", "'provenance' must be a non-empty list of {start, end} objects")
        for i, p in enumerate(prov_raw):
            if isinstance(p, dict) and _int(p.get("start")) and _int(p.get("end")):
                s, e = p["start"], p["end"]
            elif isinstance(p, list) and len(p) == 2 and _int(p[0]) and _int(p[1]):
                s, e = p
            else:
                return bad(f"provenance[{i}]", f"'provenance[{i}]' must be {{\"start\": int, \"end\": int}}")
            if s < 0 or e <= s:
                return bad(f"provenance[{i}]", f"provenance span {s}-{e} is empty or negative", "UP108")
            prov.append((s, e))

    if not b.check_doc(doc, lineno, field="doc", text=line):
        return
    ok = True
    for role, a in args.items():
        ok &= b.check_span(doc, a["start"], a["end"], lineno, field=role, text=line, expect=a.get("text"))
    for s, e in prov:
        ok &= b.check_span(doc, s, e, lineno, field="provenance", text=line)
    if not ok or not b.predicate_ok(pred, lineno, text=line):
        return
    rel = b.schema.resolve(pred)
    subj, o = args["subject"], args["object"]
    if rel.string_valued and "entity" in o:
        return bad("object", f"{pred} is string-valued: give the filler as 'value', not 'entity'", "UP218")
    if not rel.string_valued and "value" in o:
        return bad("object", f"{pred} relates two entities: give the object's 'entity', not a 'value'", "UP218")
    if "entity" in o and o["entity"] == subj["entity"]:
        rep.add(lineno, "UP206", f"self-relation: subject and object are both entity {subj['entity']!r}",
                field="object.entity", text=line, help="subject and object must be different entities")
        return
    n_err = rep.n_errors
    for a in (subj, o) if "entity" in o else (subj,):
        name = a["entity"]
        if "type" in a:
            b.set_type(name, a["type"], lineno, text=line)
        if "link" in a:
            b.add_link(name, a["link"], lineno)
        b.add_mention(name, doc, a["start"], a["end"], "mention", lineno, text=line)
    if rep.n_errors != n_err:
        return
    b.add_relation(PendingRelation(
        lineno, subj["entity"], pred, o.get("entity"), o.get("value"), doc, tuple(prov), float(conf),
        subject_span=(subj["start"], subj["end"]), object_span=(o["start"], o["end"]),
        object_type=o.get("type") if "value" in o else None, provenance_given=bool(prov),
    ))


def write_jsonl(out: TextIO, entities: dict[str, Entity] | None, instances: Iterable[Instance]) -> int:
    """Write instances as JSONL (canonical direction); returns lines written."""
    n = 0
    entities = entities or {}

    def arg(name: str | None, s: int, e: int, value: str | None = None) -> dict:
        d: dict = {"start": s, "end": e}
        if value is not None:
            d["value"] = value
            return d
        d["entity"] = name
        ent = entities.get(name)
        if ent is not None:
            if ent.type:
                d["type"] = ent.type
            if ent.links:
                d["link"] = ent.links[0]
        return d

    for i in instances:
        row = {
            "doc": i.doc,
            "subject": arg(i.subject, i.subject_start, i.subject_end),
            "predicate": i.predicate,
            "object": arg(i.object, i.object_start, i.object_end, i.value),
            "provenance": [{"start": s, "end": e} for s, e in i.provenance],
            "confidence": i.confidence,
        }
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        n += 1
    return n
