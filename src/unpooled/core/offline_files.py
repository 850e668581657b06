r"""Offline scoring's input files (:mod:`unpooled.core.offline` describes them): submissions, labelled draws,
exhaustive true instances, verification answers and the corpus's sentences, read into records with located
diagnostics (``path:line``, field, code) in a :class:`~unpooled.core.diagnostics.Report` per file."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import json_text
from .diagnostics import Report
from .errors import InvalidInputError, LocatedError, file_problem
from .estimators.exhaustive import sentence_index
from .kb.lines import Limits, read_lines
from .kb.model import normalise_value
from .matching import InstanceRef

SUFFIXES = (".jsonl", ".jsonl.gz")


# -- records --------------------------------------------------------------------------
@dataclass(frozen=True)
class Submission:
    """One system's instances (distinct by key, in file order) and its entity ids."""

    name: str
    path: str
    instances: tuple[InstanceRef, ...]
    keys: tuple[str, ...]
    subjects: tuple[str, ...]
    objects: tuple[str, ...]  # object entity id, or "=" + normalised value
    confidences: tuple[float, ...] = ()  # per instance, in (0, 1] (1 where the line gives none); () = all 1
    lines: tuple[int, ...] = ()  # per instance, its line in the file; () = unknown

    def confidence_of(self) -> tuple[float, ...]:
        """Each instance's confidence (file order)."""
        return self.confidences or (1.0,) * len(self.instances)


@dataclass(frozen=True)
class LabelledDraw:
    """One line of the labels file."""

    system: str
    key: str
    label: float
    line: int


@dataclass(frozen=True)
class TrueInstance:
    """One line of the exhaustive file."""

    ref: InstanceRef
    key: str
    weight: float = 1.0
    inclusion: float = 1.0
    line: int = 0


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _json_line(rep: Report, lineno: int, line: str) -> dict | None:
    try:
        obj = json_text.loads(line)
    except json.JSONDecodeError as exc:
        rep.add(lineno, "UP106", f"invalid JSON: {exc.msg}", col=exc.colno, text=line)
        return None
    if not isinstance(obj, dict):
        rep.add(lineno, "UP106", f"each line must be a JSON object, got {type(obj).__name__}", text=line)
        return None
    return obj


def _instance(obj: dict, rep: Report, lineno: int, line: str, *, entities: bool):
    """``(InstanceRef, subject entity, object entity or '=value')`` from a line, or None (reported).

    ``entities``: entity ids are required (a submission) rather than ignored.
    """

    def bad(fld: str, msg: str, code: str = "UP107") -> None:
        rep.add(lineno, code, msg, field=fld, text=line)

    doc = obj.get("doc")
    if not isinstance(doc, str) or not doc:
        return bad("doc", "'doc' must be a non-empty string (a document id)")
    pred = obj.get("predicate")
    if not isinstance(pred, str) or not pred:
        return bad("predicate", "'predicate' must be a non-empty string")
    spans, names = {}, {}
    value = None
    for role in ("subject", "object"):
        a = obj.get(role)
        if not isinstance(a, dict):
            what = "start, end" + (" and entity" if entities else "")
            return bad(role, f"'{role}' must be an object with {what}" + (" (or a value)" if role == "object" else ""))
        is_value = role == "object" and "value" in a
        if is_value:
            value = a["value"]
            if not isinstance(value, str) or not value.strip():
                return bad("object.value", "'object.value' must be a non-empty string")
            if "entity" in a and entities:
                return bad("object", "'object' needs exactly one of 'entity' or 'value'")
        for k in ("start", "end"):
            if is_value and k not in a:
                continue
            if not _int(a.get(k)):
                return bad(f"{role}.{k}", f"'{role}.{k}' must be an integer character offset")
        if "start" in a and "end" in a and (a["start"] < 0 or a["end"] <= a["start"]):
            return bad(role, f"'{role}' span {a['start']}-{a['end']} is empty or negative "
                             "(offsets are end-exclusive: end > start >= 0)", "UP108")
        if is_value and ("start" in a) != ("end" in a):
            return bad(f"{role}.{'end' if 'start' in a else 'start'}", "give both 'start' and 'end' of the filler, "
                                                                        "or neither")
        spans[role] = (a.get("start", -1), a.get("end", -1))
        if entities and not is_value:
            ent = a.get("entity")
            if not isinstance(ent, str) or not ent.strip():
                return bad(f"{role}.entity", f"'{role}.entity' must be a non-empty string (the system's entity id)")
            names[role] = ent
    ref = InstanceRef(doc, spans["subject"][0], spans["subject"][1], pred, spans["object"][0], spans["object"][1],
                      value)
    obj_name = "=" + normalise_value(value) if value is not None else names.get("object", "")
    return ref, names.get("subject", ""), obj_name


def _ref_or_key(obj: dict, rep: Report, lineno: int, line: str) -> tuple[InstanceRef, str] | None:
    """The instance of a labels/exhaustive line, given by fields or by ``key``."""
    if "key" in obj:
        clash = [k for k in ("doc", "subject", "predicate", "object") if k in obj]
        if clash:
            rep.add(lineno, "UP107", f"give the instance either as 'key' or by its fields, not both ({clash[0]!r})",
                    field="key", text=line)
            return None
        try:
            ref = InstanceRef.from_key(obj["key"])
        except InvalidInputError as exc:
            rep.add(lineno, "UP107", str(exc), field="key", text=line)
            return None
        return ref, ref.key
    got = _instance(obj, rep, lineno, line, entities=False)
    if got is None:
        return None
    return got[0], got[0].key


# -- readers ------------------------------------------------------------------------------
def system_name(path: Path) -> str | None:
    """``NAME`` of ``NAME.jsonl`` / ``NAME.jsonl.gz``; None for other files."""
    for suf in SUFFIXES:
        if path.name.endswith(suf) and len(path.name) > len(suf):
            return path.name[: -len(suf)]
    return None


def read_submission(path: str | Path, name: str | None = None, *, limits: Limits = Limits()
                    ) -> tuple[Submission, Report]:
    """Read one submission file leniently (no corpus, no schema)."""
    path = Path(path)
    rep = Report(path=str(path))
    refs, keys, subs, objs, confs, lines = [], [], [], [], [], []
    first: dict[str, int] = {}
    n_lines = 0
    for lineno, line in read_lines(path, rep, limits=limits):
        n_lines = lineno
        if not line.strip():
            continue
        obj = _json_line(rep, lineno, line)
        if obj is None:
            continue
        got = _instance(obj, rep, lineno, line, entities=True)
        if got is None:
            continue
        ref, s_name, o_name = got
        conf = obj.get("confidence", 1.0)
        if not isinstance(conf, (int, float)) or isinstance(conf, bool) or not 0.0 < conf <= 1.0:
            rep.add(lineno, "UP109", f"'confidence' must be a number in (0, 1], got {conf!r}", field="confidence",
                    text=line)
            continue
        key = ref.key
        if key in first:
            rep.add(lineno, "UP209", f"duplicate of the instance on line {first[key]}; this line is ignored",
                    text=line)
            continue
        first[key] = lineno
        refs.append(ref)
        keys.append(key)
        subs.append(s_name)
        objs.append(o_name)
        confs.append(float(conf))
        lines.append(lineno)
    if not refs and rep.ok:
        rep.add(0, "UP112", "the submission has no instances")
    rep.counts.update(lines=n_lines, instances=len(refs))
    sub = Submission(name or system_name(path) or path.stem, str(path), tuple(refs), tuple(keys), tuple(subs),
                     tuple(objs), tuple(confs), tuple(lines))
    return sub, rep


def read_submissions(folder: str | Path, *, limits: Limits = Limits()) -> tuple[list[Submission], list[Report]]:
    """Read every ``*.jsonl`` / ``*.jsonl.gz`` of a folder (sorted by system name).

    Raises
    ------
    LocatedError
        If the folder is missing, holds no submission, a file name is not UTF-8 text, or two files give one
        name.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise LocatedError(str(folder), 0, "not a folder (expected a folder of NAME.jsonl submissions)")
    files: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        name = system_name(p)
        if name is None or name.startswith(".") or not p.is_file():
            continue
        if not name.isprintable() or any("\ud800" <= c <= "\udfff" for c in name):
            raise LocatedError(ascii(str(p))[1:-1], 0,
                               "the file name is not printable UTF-8 text (a system is named by its file)")
        if name in files:
            raise LocatedError(str(p), 0, f"system name {name!r} is also given by {files[name].name}")
        files[name] = p
    if not files:
        raise LocatedError(str(folder), 0, "no submissions found (expected files NAME.jsonl or NAME.jsonl.gz)")
    subs, reps = [], []
    for name in sorted(files):
        s, r = read_submission(files[name], name, limits=limits)
        subs.append(s)
        reps.append(r)
    return subs, reps


def read_labels(path: str | Path, submissions: list[Submission], *, checked: set[str] | None = None,
                limits: Limits = Limits()) -> tuple[list[LabelledDraw], Report]:
    """Read the labels file; every draw is checked against its system's submission.

    ``checked``: names of systems whose submission read without error (default all);
    draws of other systems are not checked against it (that would only repeat its errors).
    """
    path = Path(path)
    rep = Report(path=str(path))
    by_name = {s.name: s for s in submissions}
    member = {s.name: set(s.keys) for s in submissions}
    everyone = set().union(*member.values()) if member else set()
    checked = set(by_name) if checked is None else checked
    known = ", ".join(sorted(by_name)[:10]) + (", ..." if len(by_name) > 10 else "")
    out: list[LabelledDraw] = []
    n_lines = 0
    for lineno, line in read_lines(path, rep, limits=limits):
        n_lines = lineno
        if not line.strip():
            continue
        obj = _json_line(rep, lineno, line)
        if obj is None:
            continue
        system = obj.get("system")
        if not isinstance(system, str) or not system:
            rep.add(lineno, "UP107", "'system' must be a non-empty string (the system whose p_i drew the instance)",
                    field="system", text=line)
            continue
        lab = obj.get("label")
        if not _number(lab) or not 0 <= lab <= 1:
            rep.add(lineno, "UP107", f"'label' must be 0, 1 or a probability in [0, 1], got {lab!r}", field="label",
                    text=line)
            continue
        got = _ref_or_key(obj, rep, lineno, line)
        if got is None:
            continue
        _, key = got
        if system not in by_name:
            rep.add(lineno, "UP230", f"unknown system {system!r}: no submission file {system}.jsonl",
                    field="system", text=line, help=f"known systems: {known}")
            continue
        if system in checked and key not in member[system]:
            where = ("it is in no submission" if key not in everyone
                     else "other systems submitted it, but a draw is attributed to the system whose p_i drew it")
            rep.add(lineno, "UP231", f"system {system!r} did not submit this instance, so p_{system} cannot have "
                                     f"drawn it ({where})", field="system", text=line)
            continue
        out.append(LabelledDraw(system, key, float(lab), lineno))
    rep.counts.update(lines=n_lines, draws=len(out))
    return out, rep


def read_exhaustive(path: str | Path, *, limits: Limits = Limits()) -> tuple[list[TrueInstance], Report]:
    """Read the exhaustive file (true instances found in exhaustively annotated documents)."""
    path = Path(path)
    rep = Report(path=str(path))
    out: list[TrueInstance] = []
    first: dict[str, int] = {}
    n_lines = 0
    for lineno, line in read_lines(path, rep, limits=limits):
        n_lines = lineno
        if not line.strip():
            continue
        obj = _json_line(rep, lineno, line)
        if obj is None:
            continue
        w = obj.get("weight", 1.0)
        if not _number(w) or w <= 0:
            rep.add(lineno, "UP107", f"'weight' (the p0 weight) must be a positive number, got {w!r}",
                    field="weight", text=line)
            continue
        inc = obj.get("inclusion", 1.0)
        if not _number(inc) or not 0 < inc <= 1:
            rep.add(lineno, "UP107", f"'inclusion' (the document inclusion probability) must be in (0, 1], "
                                     f"got {inc!r}", field="inclusion", text=line)
            continue
        got = _ref_or_key(obj, rep, lineno, line)
        if got is None:
            continue
        ref, key = got
        if key in first:
            rep.add(lineno, "UP209", f"the same true instance as line {first[key]}: it counts twice "
                                     "(correct only if its document was sampled twice)", text=line)
        else:
            first[key] = lineno
        out.append(TrueInstance(ref, key, float(w), float(inc), lineno))
    rep.counts.update(lines=n_lines, instances=len(out))
    return out, rep


def _answer_line(obj: dict, rep: Report, lineno: int, line: str):
    """One verification answer's fields checked (``UP107`` in ``rep`` and None when one is wrong):
    ``(task, annotator, correct, key, class: -1 or a control's known answer, stratum: its group or relation)``."""
    task, ann, correct = obj.get("task"), obj.get("annotator"), obj.get("correct")
    if not isinstance(task, (int, str)) or isinstance(task, bool) or task == "":
        rep.add(lineno, "UP107", f"'task' (the item answered) must be a number or a non-empty string, got "
                                 f"{task!r}", field="task", text=line)
        return None
    if not isinstance(ann, (int, str)) or isinstance(ann, bool) or ann == "":
        rep.add(lineno, "UP107", f"'annotator' must be a number or a non-empty string, got {ann!r}",
                field="annotator", text=line)
        return None
    if not isinstance(correct, bool):
        rep.add(lineno, "UP107", f"'correct' must be true or false, got {correct!r}", field="correct", text=line)
        return None
    is_control = obj.get("control", False) is True
    if is_control:
        gold = obj.get("gold")
        truth = gold.get("correct") if isinstance(gold, dict) else None
        if not isinstance(truth, bool):
            rep.add(lineno, "UP107", "a gold control's 'gold' must hold its known answer {\"correct\": true|false}",
                    field="gold", text=line)
            return None
        key, cls = f"control:{task}", int(truth)
    else:
        key = obj.get("key")
        if not isinstance(key, str) or not key:
            rep.add(lineno, "UP107", "'key' (the instance answered about) must be a non-empty string",
                    field="key", text=line)
            return None
        cls = -1
    relation = obj.get("relation")
    if relation is not None and not isinstance(relation, str):
        rep.add(lineno, "UP107", f"'relation' (the item's relation: its stratum of the crowd model) must be a "
                                 f"string, got {relation!r}", field="relation", text=line)
        return None
    group = obj.get("group")
    if group is not None and (not isinstance(group, str) or not group):
        rep.add(lineno, "UP107", f"'group' (the organiser's group of relations the crowd judges alike: the item's "
                                 f"stratum) must be a non-empty string, got {group!r}", field="group", text=line)
        return None
    return task, ann, correct, key, cls, group or relation


def read_answers(path: str | Path, *, limits: Limits = Limits(), relation_strata: dict | None = None):
    """Read verification answers, one a line, as a dataset release's ``answers.jsonl`` holds them.

    A line: ``task`` (the item answered: a number or string), ``annotator`` (who answered), ``correct`` (the
    answer says the instance is correct), ``key`` (the instance; not needed for a gold ``control``, whose
    ``gold.correct`` is its known answer); optional ``kind`` (lines of another kind than ``verify`` are passed
    over), ``counted`` (false: passed over, as the service does), ``relation`` (the item's relation: the crowd's
    rates are then fitted per relation, :mod:`unpooled.core.estimators.strata`; ``relation_strata`` numbers
    them, default in name order) and ``group`` (the organiser's group of relations judged alike the relation
    belongs to: the stratum is then the group's).  Items and annotators are numbered in
    order of first appearance (the service's order when the file lists answers by id).

    Returns ``(VerifyAnswers, Report)``.
    """
    from .annotation.confusion import VerifyAnswers
    from .annotation.relation_groups import relation_stratum_codes

    path = Path(path)
    if problem := file_problem(path):
        raise LocatedError(str(path), 0, f"{problem} (the answers file)")
    rep = Report(path=str(path))
    items: dict = {}
    workers: dict = {}
    keys: list = []
    control: list = []
    relations: list = []
    it, wk, yes = [], [], []
    n_lines = 0
    for lineno, line in read_lines(path, rep, limits=limits):
        n_lines = lineno
        if not line.strip():
            continue
        obj = _json_line(rep, lineno, line)
        if obj is None:
            continue
        if obj.get("kind", "verify") != "verify" or obj.get("counted", True) is False:
            continue
        got = _answer_line(obj, rep, lineno, line)
        if got is None:
            continue
        task, ann, correct, key, cls, relation = got
        i = items.get(task)
        if i is None:
            i = items[task] = len(keys)
            keys.append(key)
            control.append(cls)
            relations.append(relation or "")
        elif keys[i] != key:
            rep.add(lineno, "UP107", f"task {task!r} was about {keys[i]!r} on an earlier line, here {key!r}",
                    field="key", text=line)
            continue
        it.append(i)
        wk.append(workers.setdefault(ann, len(workers)))
        yes.append(int(correct))
    rep.counts.update(lines=n_lines, answers=len(it), items=len(keys), annotators=len(workers))
    strata = (None, None, None)
    if any(relations):  # the crowd model by relation (core.estimators.strata)
        strata = relation_stratum_codes(relations, relation_strata)
    return VerifyAnswers(np.array(it, np.int64), np.array(wk, np.int64), np.array(yes, np.int64), keys,
                         np.array(control, np.int64), len(workers), None, None, None, *strata), rep


def read_sentences(corpus: str | Path, fmt: str | None = None, *, docs=None) -> dict[str, tuple[list, list]]:
    """The sentence split of a corpus file or folder: ``doc id -> (sentence starts, sentence ends)``.

    ``fmt``: one of :data:`unpooled.core.corpus.FORMATS` (detected when None); ``docs``: keep only
    these documents.

    Raises
    ------
    CorpusError
        A located error (``path:line``, field) in the corpus, or a missing path.
    """
    from .corpus import detect_format, iter_documents

    fmt = fmt or detect_format(corpus)
    return sentence_index(iter_documents(corpus, fmt), docs=docs)


def read_corpus_index(corpus: str | Path, fmt: str | None = None, *, docs=None
                      ) -> tuple[dict[str, tuple[list, list]], dict[str, list[tuple[int, int, int]]], dict[str, int]]:
    """One pass over a corpus: its sentence split (as :func:`read_sentences`), the mentions of its entity
    clusters, ``doc id -> [(start, end, cluster index)]`` (:data:`~unpooled.core.estimators.exhaustive.EntityMentions`;
    only documents with a gold entity layer, e.g. DocRED's ``vertexSet``) and each document's length in characters.
    ``docs``: keep only these documents.

    Raises
    ------
    CorpusError
        A located error (``path:line``, field) in the corpus, or a missing path.
    """
    from .corpus import detect_format, iter_documents

    fmt = fmt or detect_format(corpus)
    keep = None if docs is None else set(docs)
    kept = []
    entities: dict[str, list[tuple[int, int, int]]] = {}
    for d in iter_documents(corpus, fmt):
        if keep is not None and d.id not in keep:
            continue
        kept.append(d)
        if d.entities:
            entities[d.id] = [(m.start, m.end, e.index) for e in d.entities for m in e.mentions]
    return sentence_index(kept), entities, {d.id: len(d.text) for d in kept}


def outside_document(ref: InstanceRef, lengths: dict[str, int]) -> tuple[str, str] | None:
    """``(field, message)`` when a span of the instance is not inside its document (``lengths``: doc id ->
    characters; a document not in it is not checked), else None."""
    n = lengths.get(ref.doc)
    if n is None:
        return None
    for role, (s, e) in (("subject", (ref.s_start, ref.s_end)), ("object", (ref.o_start, ref.o_end))):
        if s >= 0 and e > n:
            return (f"{role}.{'start' if s >= n else 'end'}",
                    f"'{role}' span {s}-{e} is outside document {ref.doc!r} ({n:,} characters)")
    return None


def check_offsets(reports: list[tuple[Report, list[tuple[int, InstanceRef]]]], lengths: dict[str, int],
                  corpus: str) -> None:
    """``UP202`` in each report for every ``(line, instance)`` of it with a span outside its corpus document."""
    for rep, located in reports:
        for line, ref in located:
            if got := outside_document(ref, lengths):
                rep.add(line, "UP202", f"{got[1]} of the corpus {corpus}", field=got[0],
                        help="the offsets are characters of the corpus document's text, end-exclusive")
