r"""Offline scoring: precision, recall and F1 from files, for users who already have labels.

Three inputs, all JSONL (one JSON object a line, UTF-8, optionally gzip; blank lines
are skipped; offsets are end-exclusive character offsets):

**Submissions** -- a folder with one file per system, ``NAME.jsonl`` (or
``NAME.jsonl.gz``); the system is called ``NAME``.  Each line is an instance in the
JSONL submission format (:mod:`unpooled.core.kb.jsonl`), read leniently, without a
corpus or schema: only ``doc``, ``predicate``, ``subject`` ``{start, end, entity}`` and
``object`` ``{start, end, entity}`` or ``{value}`` (a string filler; its ``start``/``end``
optional) are read; other keys are ignored.  Instances must be in the schema's
canonical direction (there is no schema here to rewrite inverses).  A repeated
instance (same :func:`~unpooled.core.kb.model.instance_key`) is a warning and counts once::

    {"doc": "D1", "subject": {"start": 0, "end": 5, "entity": "e1"}, "predicate": "per:spouse",
     "object": {"start": 20, "end": 29, "entity": "e2"}}

**Labels** ``L.jsonl`` -- one labelled draw a line.  ``system`` is the system whose
sampling distribution :math:`p_i` drew it; the instance is given by its fields (as in a
submission; entity ids optional) or by ``"key"`` (its instance key); ``label`` is 0, 1
or a probability.  Repeated lines are repeated draws (i.i.d. sampling with
replacement)::

    {"system": "sysA", "doc": "D1", "subject": {"start": 0, "end": 5}, "predicate": "per:spouse",
     "object": {"start": 20, "end": 29}, "label": 1}

**Exhaustive** ``E.jsonl`` -- one true instance a line, found by exhaustively
annotating sampled documents (the :math:`p_0` sample :math:`\hat Y_0`).  Same instance
fields (or ``key``), plus optional ``weight`` (the :math:`p_0` weight, default 1) and
``inclusion`` (the document's inclusion probability :math:`\pi_d`, default 1); the
estimators weight the instance by ``weight / inclusion``::

    {"doc": "D1", "subject": {"start": 0, "end": 5}, "predicate": "per:title",
     "object": {"start": 40, "end": 47, "value": "senator"}, "inclusion": 0.1}

**Exhaustive documents.**  :math:`\hat Y_0` is a sample of *documents*, so the variance of every
recall term from it is that of a cluster sample: document totals of the linearised Hájek ratio
(:mod:`unpooled.core.estimators.exhaustive`).  The documents are those of the exhaustive
instances; ``documents=N`` (``--exhaustive-documents N``) gives how many were annotated,
counting those without any true instance (default: the number of distinct documents present,
with a warning).

**The current corpus** (optional, ``corpus=PATH`` of :func:`load`, ``--corpus``; any format of
:mod:`unpooled.core.corpus`, the sentences of a ``jsonl`` corpus as given, else split): the
documents the exhaustive sample was drawn from, and their sentence split.  The exhaustive
protocol pairs mentions *within one sentence*, so :math:`p_0` is 0 for a pooled instance whose
subject and object lie in different sentences (the joint recall's :math:`\hat\nu_i`); an
instance of the exhaustive file is inside by definition, and its document must be in the corpus
(``UP201``).  A labelled draw on a document outside the corpus (a label kept from an earlier
corpus) gets :math:`p_0 = 0` too and counts for precision only, with a warning naming it
(:func:`~unpooled.core.estimators.exhaustive.p0_support`).  Without a corpus the population
is unknown and :math:`p_0` stays 1 everywhere, with a warning.

The universe is the union of the submitted instances by instance key; :math:`p_i` is the
sampling distribution of ``level`` (:mod:`unpooled.core.estimators.sampling`) computed
from the system's own entity ids (``entity`` level: the subject entity id as the system
gives it; ``fill``: subject entity, predicate, object entity or normalised value).

Errors in the files are located diagnostics (``path:line``, field, code) collected in a
:class:`~unpooled.core.diagnostics.Report` per file; :func:`score_files` raises
:class:`InputFindings` carrying them.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .diagnostics import Report
from .errors import InvalidInputError, check_choice, LocatedError, UnpooledError
from .estimators import LEVELS, Scores, estimate, make_design, sampling_distribution
from .estimators.exhaustive import Sentences, outside_population, p0_support, sentence_index, within_sentence
from .estimators.joint import ESTIMATORS, WEIGHTS, Design, WeightDegeneracyWarning
from .kb.lines import Limits, read_lines
from .kb.model import normalise_value
from .matching import InstanceRef, match_matrix, match_multiplicity, match_universe

#: matching policies available offline (``cluster`` needs a corpus with gold clusters)
MATCHES = ("exact", "overlap")


ESS_WARN = 10.0
SUFFIXES = (".jsonl", ".jsonl.gz")


class InputFindings(UnpooledError):
    """Input files have located errors; ``reports`` holds one :class:`Report` per file."""

    def __init__(self, reports: list[Report]) -> None:
        self.reports = reports
        n = sum(r.n_errors for r in reports)
        first = next(d for r in reports for d in r.errors)
        super().__init__(f"{n} error(s) in the input files; first: {first.format().splitlines()[0]}")


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


@dataclass(frozen=True)
class OfflineData:
    """Everything read from the three inputs, with the report of every file.

    ``sentences``: the sentence split of the corpus given to :func:`load` (``doc id -> (starts,
    ends)``, the documents of the draws and of the exhaustive file), or None; ``corpus`` its path;
    ``population``: the documents of the draws and of the exhaustive file that the corpus holds (the
    current documents recall's pool follows, :func:`score`'s ``population``), or None.
    """

    submissions: tuple[Submission, ...]
    labels: tuple[LabelledDraw, ...]
    exhaustive: tuple[TrueInstance, ...]
    reports: tuple[Report, ...]
    sentences: Sentences | None = None
    corpus: str | None = None
    population: frozenset[str] | None = None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports)


@dataclass(frozen=True)
class SystemScore:
    """Estimates for one system.  ``p`` (and ``f1``) is NaN when it is undefined."""

    system: str
    p: float
    p_lo: float
    p_hi: float
    r: float
    r_lo: float
    r_hi: float
    f1: float
    f1_lo: float
    f1_hi: float
    labels: int
    ess: float
    estimator: str
    warnings: tuple[str, ...] = ()
    boot: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON row: system, P/R/F1 with bounds, labels, estimator (+ ``*_boot_lo/hi``); NaN -> None."""
        out: dict = {"system": self.system}
        for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi"):
            v = getattr(self, k)
            out[k] = None if math.isnan(v) else v
        out["labels"] = self.labels
        out["estimator"] = self.estimator
        for k, (lo, hi) in self.boot.items():
            out[f"{k}_boot_lo"] = None if math.isnan(lo) else lo
            out[f"{k}_boot_hi"] = None if math.isnan(hi) else hi
        return out


@dataclass(frozen=True)
class OfflineResult:
    """Per-system rows, the raw :class:`Scores` and :class:`Design`, and warnings."""

    rows: tuple[SystemScore, ...]
    scores: Scores
    design: Design
    systems: tuple[str, ...]
    warnings: tuple[str, ...]
    reports: tuple[Report, ...]
    options: Mapping[str, object]


# -- line parsing -----------------------------------------------------------------------
def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _json_line(rep: Report, lineno: int, line: str) -> dict | None:
    try:
        obj = json.loads(line)
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
    refs, keys, subs, objs = [], [], [], []
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
    if not refs and rep.ok:
        rep.add(0, "UP112", "the submission has no instances")
    rep.counts.update(lines=n_lines, instances=len(refs))
    sub = Submission(name or system_name(path) or path.stem, str(path), tuple(refs), tuple(keys), tuple(subs),
                     tuple(objs))
    return sub, rep


def read_submissions(folder: str | Path, *, limits: Limits = Limits()) -> tuple[list[Submission], list[Report]]:
    """Read every ``*.jsonl`` / ``*.jsonl.gz`` of a folder (sorted by system name).

    Raises
    ------
    LocatedError
        If the folder is missing, holds no submission, or two files give one name.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise LocatedError(str(folder), 0, "not a folder (expected a folder of NAME.jsonl submissions)")
    files: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        name = system_name(p)
        if name is None or name.startswith(".") or not p.is_file():
            continue
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


def read_answers(path: str | Path, *, limits: Limits = Limits(), relation_strata: dict | None = None):
    """Read verification answers, one a line, as a dataset release's ``answers.jsonl`` holds them.

    A line: ``task`` (the item answered: a number or string), ``annotator`` (who answered), ``correct`` (the
    answer says the instance is correct), ``key`` (the instance; not needed for a gold ``control``, whose
    ``gold.correct`` is its known answer); optional ``kind`` (lines of another kind than ``verify`` are passed
    over), ``counted`` (false: passed over, as the service does) and ``relation`` (the item's relation: the crowd's
    rates are then fitted per relation, :mod:`unpooled.core.estimators.strata`; ``relation_strata`` numbers
    them, default in name order).  Items and annotators are numbered in
    order of first appearance (the service's order when the file lists answers by id).

    Returns ``(VerifyAnswers, Report)``.
    """
    from .annotation.confusion import VerifyAnswers, relation_stratum_codes

    path = Path(path)
    if not path.is_file():
        raise LocatedError(str(path), 0, "no such file (the answers file)")
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
        task, ann, correct = obj.get("task"), obj.get("annotator"), obj.get("correct")
        if not isinstance(task, (int, str)) or isinstance(task, bool) or task == "":
            rep.add(lineno, "UP107", f"'task' (the item answered) must be a number or a non-empty string, got "
                                     f"{task!r}", field="task", text=line)
            continue
        if not isinstance(ann, (int, str)) or isinstance(ann, bool) or ann == "":
            rep.add(lineno, "UP107", f"'annotator' must be a number or a non-empty string, got {ann!r}",
                    field="annotator", text=line)
            continue
        if not isinstance(correct, bool):
            rep.add(lineno, "UP107", f"'correct' must be true or false, got {correct!r}", field="correct", text=line)
            continue
        is_control = obj.get("control", False) is True
        if is_control:
            gold = obj.get("gold")
            truth = gold.get("correct") if isinstance(gold, dict) else None
            if not isinstance(truth, bool):
                rep.add(lineno, "UP107", "a gold control's 'gold' must hold its known answer {\"correct\": true|false}",
                        field="gold", text=line)
                continue
            key, cls = f"control:{task}", int(truth)
        else:
            key = obj.get("key")
            if not isinstance(key, str) or not key:
                rep.add(lineno, "UP107", "'key' (the instance answered about) must be a non-empty string",
                        field="key", text=line)
                continue
            cls = -1
        relation = obj.get("relation")
        if relation is not None and not isinstance(relation, str):
            rep.add(lineno, "UP107", f"'relation' (the item's relation: its stratum of the crowd model) must be a "
                                     f"string, got {relation!r}", field="relation", text=line)
            continue
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


def _check_exhaustive_documents(true, sentences, rep: Report, corpus: str) -> list[TrueInstance]:
    """True instances whose document the corpus has; the others are ``UP201`` errors of the exhaustive file."""
    keep = []
    for t in true:
        if t.ref.doc in sentences:
            keep.append(t)
            continue
        rep.add(t.line, "UP201", f"document {t.ref.doc!r} of this true instance is not in the corpus {corpus}, "
                                 "the documents the exhaustive sample was drawn from", field="doc",
                help="give the current corpus (--corpus), or leave it out")
    return keep


def load(labels: str | Path, submissions: str | Path, exhaustive: str | Path, *,
         corpus: str | Path | None = None, corpus_format: str | None = None,
         limits: Limits = Limits()) -> OfflineData:
    """Read the three inputs; problems are in ``.reports`` (check ``.ok``).

    ``corpus`` (optional): the current corpus, a file or folder (``corpus_format``, detected when
    None): its documents are the population recall's pool follows, and its sentence split restricts
    :math:`p_0` to instances within one sentence (module docs); a true instance of the exhaustive
    file in a document the corpus lacks is a located error (``UP201``).

    Raises
    ------
    LocatedError
        A missing file or folder; a corpus error (:class:`~unpooled.core.errors.CorpusError`).
    """
    for p, what in ((labels, "labels"), (exhaustive, "exhaustive")):
        if not Path(p).is_file():
            raise LocatedError(str(p), 0, f"no such file (the {what} file)")
    if corpus is not None and not Path(corpus).exists():
        raise LocatedError(str(corpus), 0, "no such file or folder (the corpus)")
    subs, sub_reps = read_submissions(submissions, limits=limits)
    clean = {s.name for s, r in zip(subs, sub_reps) if r.ok}
    draws, lab_rep = read_labels(labels, subs, checked=clean, limits=limits)
    true, ex_rep = read_exhaustive(exhaustive, limits=limits)
    sentences = None
    if corpus is not None:
        wanted = {InstanceRef.from_key(d.key).doc for d in draws} | {t.ref.doc for t in true}
        sentences = read_sentences(corpus, corpus_format, docs=wanted)
        true = _check_exhaustive_documents(true, sentences, ex_rep, str(corpus))
    return OfflineData(tuple(subs), tuple(draws), tuple(true), (*sub_reps, lab_rep, ex_rep), sentences,
                       None if corpus is None else str(corpus), None if corpus is None else frozenset(sentences))


# -- scoring --------------------------------------------------------------------------------
def _codes(values) -> np.ndarray:
    ids: dict = {}
    return np.fromiter((ids.setdefault(v, len(ids)) for v in values), dtype=np.int64, count=len(values))


def system_distribution(sub: Submission, level: str) -> np.ndarray:
    """:math:`p_i` over the system's instances (file order) at ``level``, from its own entity ids."""
    pred = _codes([r.predicate for r in sub.instances])
    subj = _codes(sub.subjects)
    fill = _codes(list(zip(sub.subjects, (r.predicate for r in sub.instances), sub.objects)))
    return sampling_distribution(len(sub.instances), level=level, predicate=pred, subject=subj, fill=fill)


def build_design(data: OfflineData, *, level: str = "instance", match: str = "exact",
                 corrected_labels: bool = False, documents: int | None = None,
                 sentences: Sentences | None = None, population=None) -> tuple[Design, list[InstanceRef]]:
    """The estimators' :class:`Design` and the universe (union of submissions by key).

    The design knows the document of every exhaustive instance (``documents``: how many were
    annotated, at least the number present; default that number).  :math:`p_0 = 0` for a drawn
    instance outside the support of :math:`p_0` (:func:`~unpooled.core.estimators.exhaustive.p0_support`):
    across sentences of ``sentences`` (default ``data.sentences``) and not in the exhaustive file, or
    on a document outside ``population`` (default ``data.population``, the current corpus); None: no
    restriction.
    """
    check_choice("level", level, LEVELS)
    check_choice("match", match, MATCHES)
    index: dict[str, int] = {}
    universe: list[InstanceRef] = []
    rows, cols, vals = [], [], []
    for i, sub in enumerate(data.submissions):
        xs = np.empty(len(sub.keys), dtype=np.int64)
        for k, (key, ref) in enumerate(zip(sub.keys, sub.instances)):
            u = index.get(key)
            if u is None:
                u = index[key] = len(universe)
                universe.append(ref)
            xs[k] = u
        if len(xs):
            rows.append(np.full(len(xs), i))
            cols.append(xs)
            vals.append(system_distribution(sub, level))
    m, U = len(data.submissions), len(universe)
    if not rows:
        raise InvalidInputError("submissions: expected at least one submission with instances, got none")
    P = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(m, U))
    names = {s.name: i for i, s in enumerate(data.submissions)}
    src = np.array([names[d.system] for d in data.labels], dtype=np.int64)
    xs = np.array([index[d.key] for d in data.labels], dtype=np.int64)
    f = np.array([d.label for d in data.labels], dtype=float)
    g0 = match_matrix([s.instances for s in data.submissions], [t.ref for t in data.exhaustive], policy=match)
    v0 = np.array([t.weight / t.inclusion for t in data.exhaustive], dtype=float)
    p0 = np.ones(U)
    for t in data.exhaustive:
        u = index.get(t.key)
        if u is not None:
            p0[u] = t.weight
    gs = None
    if match != "exact":
        # nu-hat must see the draws through the same policy as theta-hat sees Y0, and one true fact
        # present as several pooled instances must count once (unpooled.core.matching)
        members = [np.asarray(P[i].indices) for i in range(m)]
        gs = match_universe(universe, members, targets=xs, policy=match).toarray().astype(bool) if len(xs) else None
        p0 = p0 / match_multiplicity(universe, policy=match)
    sentences = data.sentences if sentences is None else sentences
    population = data.population if population is None else population
    inside = None
    if sentences is not None or population is not None:
        inside = p0_support([universe[u] for u in xs.tolist()], found={t.key for t in data.exhaustive},
                            sentences=sentences, population=population)
    design = make_design(P, src, xs, f, g0, v0, p0, gs=gs, corrected_labels=corrected_labels,
                         y0_docs=[t.ref.doc for t in data.exhaustive], documents=documents, inside=inside)
    return design, universe


def system_rows(sc: Scores, n_own, names, *, estimator: str = "joint") -> tuple[SystemScore, ...]:
    """One :class:`SystemScore` per system from the arrays of :func:`~unpooled.core.estimators.estimate`.

    ``n_own``: each system's own labelled draws. A system without any gets a warning (the joint estimate may be
    biased; with the simple estimator, precision and F1 are undefined: NaN); so does a joint estimate whose
    effective sample size is below :data:`ESS_WARN`. The one place rows are made, for ``unpooled score`` and
    the service alike.
    """
    rows = []
    nan = float("nan")
    for i, name in enumerate(names):
        w: list[str] = []
        undefined = False
        if n_own[i] == 0:
            if estimator == "simple":
                w.append("no labelled draws of its own: precision is undefined with the simple estimator")
                undefined = True
            else:
                w.append("no labelled draws of its own: q_i may not cover p_i, so the estimate may be biased")
        elif estimator == "joint" and sc.ess[i] < ESS_WARN:
            w.append(f"importance weights degenerate (effective sample size {sc.ess[i]:.1f} < {ESS_WARN:g}): "
                     "collect labels of its own")
        row = sc.row(i)
        for k in ("p", "p_lo", "p_hi", "f1", "f1_lo", "f1_hi") if undefined else ():
            row[k] = nan
        boot = {k: (nan, nan) if undefined and k in ("p", "f1") else (float(lo[i]), float(hi[i]))
                for k, (lo, hi) in sc.boot.items()}
        rows.append(SystemScore(name, *(float(row[k]) for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1",
                                                                   "f1_lo", "f1_hi")),
                                labels=int(n_own[i]), ess=float(sc.ess[i]), estimator=sc.method, warnings=tuple(w),
                                boot=boot))
    return tuple(rows)


def score(data: OfflineData, *, level: str = "instance", estimator: str = "joint", weights: str = "balance",
          match: str = "exact", bootstrap: int = 0, confidence: float = 0.90, rng=None,
          corrected_labels: bool = False, documents: int | None = None,
          sentences: Sentences | None = None, population=None, votes=None) -> OfflineResult:
    r"""Estimate P, R and F1 of every submitted system.

    Parameters
    ----------
    data : OfflineData
        From :func:`load`; it must be free of errors.
    level : {'instance', 'relation', 'entity', 'subj-rel', 'fill'}
        Sampling distribution :math:`p_i` the labelled draws were drawn from.
    estimator : {'joint', 'simple'}
    weights : {'balance', 'heuristic', 'minvar'}
    match : {'exact', 'overlap'}
        Recall matching policy (:mod:`unpooled.core.matching`). With ``overlap`` the joint
        estimator matches the draws by the same policy and counts each fact once; formerly the joint recall estimator
        matches sampled instances by key identity.
    bootstrap : int
        Bootstrap replicates (0: none).
    confidence : float
        Interval level in (0, 1).
    rng : seed or Generator, optional
        For the bootstrap.
    corrected_labels : bool
        Labels already corrected for annotation error may leave [0, 1] (they stay unbiased).
    documents : int, optional
        Number of exhaustively annotated documents, counting those without a true instance
        (``--exhaustive-documents``); at least the number of documents of the exhaustive file,
        which is the default (with a warning).  The variance of recall's exhaustive term is
        that of a cluster sample of these :math:`N` documents,
        :math:`\widehat{\mathrm{Var}}(\hat\theta_i)=\frac{N}{N-1}\sum_d (z_{id}-\bar z_i)^2`
        with :math:`z_{id}` the document totals of the linearised Hájek ratio
        (:mod:`unpooled.core.estimators.exhaustive`).
    sentences : mapping, optional
        ``doc id -> (sentence starts, sentence ends)`` (default ``data.sentences``, from the
        corpus given to :func:`load`): :math:`p_0(x) = 0` in the joint :math:`\hat\nu_i` for a
        drawn instance whose arguments lie in different sentences, which the exhaustive protocol
        cannot find.  None: :math:`p_0 = 1` for every pooled instance (a warning with ``joint``).
    population : collection of str, optional
        The documents of the current corpus, which the exhaustive sample was drawn from (default
        ``data.population``, from the corpus given to :func:`load`): a labelled draw on another
        document (a label kept from an earlier corpus) gets :math:`p_0 = 0` and counts for precision
        only, with a warning naming it; every exhaustive instance must lie in it.  None: unknown, no
        restriction.
    votes : KeyedAnswers, optional
        The verification answers behind the labels, by instance key, with the workers' confusions
        (:class:`~unpooled.core.estimators.noisy.KeyedAnswers`): the estimates then come from the votes, not
        from ``data.labels``' values (:mod:`unpooled.core.estimators.noisy`).
    """
    if not data.ok:
        raise InputFindings([r for r in data.reports if not r.ok])
    check_choice("estimator", estimator, ESTIMATORS)
    check_choice("weights", weights, WEIGHTS)
    if not isinstance(bootstrap, int) or bootstrap < 0:
        raise InvalidInputError(f"bootstrap: expected a non-negative integer, got {bootstrap!r}")
    if not (_number(confidence) and 0 < confidence < 1):
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    present = len({t.ref.doc for t in data.exhaustive})
    if documents is not None and (not isinstance(documents, (int, np.integer)) or isinstance(documents, bool)
                                  or documents < max(present, 1)):
        raise InvalidInputError(
            f"documents: expected the number of exhaustively annotated documents, an integer >= {max(present, 1)}"
            + (f" (the exhaustive file has true instances in {present} documents)" if present else "")
            + f", got {documents!r}")
    sentences = data.sentences if sentences is None else sentences
    population = data.population if population is None else frozenset(population)
    stray = sorted({t.ref.doc for t in data.exhaustive} - population) if population is not None else []
    if stray:
        raise InvalidInputError(f"population: expected the documents the exhaustive sample was drawn from, but the "
                                f"exhaustive file has true instances in {len(stray)} other(s), e.g. {stray[0]!r}")
    design, universe = build_design(data, level=level, match=match, corrected_labels=corrected_labels,
                                    documents=documents, sentences=sentences, population=population)
    crowd = None
    if votes is not None:
        index: dict[str, int] = {}
        for sub in data.submissions:
            for key in sub.keys:
                index.setdefault(key, len(index))
        crowd = votes.on(index, len(universe), [x.predicate for x in universe])
    names = tuple(s.name for s in data.submissions)
    glob: list[str] = []
    if design.n0 == 0:
        glob.append("the exhaustive file has no true instances: recall is 0 by construction")
    elif documents is None:
        glob.append(f"the number of exhaustively annotated documents is not given (--exhaustive-documents, "
                    f"documents=): recall's variance treats the {present} documents with a true instance as the "
                    "sample; documents without true instances are then not counted")
    outside = int((design.p0[design.xs] == 0).sum())  # labelled draws outside p0's support
    left_out = outside_population([universe[u] for u in design.xs.tolist()], population) if outside else None
    if estimator == "joint" and left_out:
        glob.append(left_out)
    if sentences is None:
        if estimator == "joint":
            glob.append("no sentence split (--corpus, sentences=): p0 = 1 for every pooled true instance, also "
                        "those whose subject and object lie in different sentences, which the exhaustive protocol "
                        "(mention pairs within one sentence) cannot find; they dilute every system's recall. Give "
                        "--corpus to restrict p0 to instances within one sentence"
                        + ("" if population is not None else " of the current corpus's documents (without it, labels "
                           "kept from documents no longer in the corpus also count in recall's pool)"))
    else:
        crossing = [t.line for t in data.exhaustive if not within_sentence(t.ref, sentences)]
        if crossing:
            lines = ", ".join(map(str, crossing[:10])) + (", ..." if len(crossing) > 10 else "")
            glob.append(f"{len(crossing)} true instance(s) of the exhaustive file (line {lines}) have arguments in "
                        "different sentences of the corpus, although the exhaustive protocol pairs mentions "
                        "within one sentence: check the sentence split (they are kept in p0's support)")
    if estimator == "joint" and any(t.weight != 1.0 for t in data.exhaustive):
        glob.append("p0 weights of the exhaustive file are known only for its instances; other pooled instances "
                    "get weight 1 in the joint recall estimate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightDegeneracyWarning)
        sc = estimate(design, estimator=estimator, weights=weights, confidence=confidence, bootstrap=bootstrap,
                      rng=rng, votes=crowd)
    rows = system_rows(sc, design.n, names, estimator=estimator)
    opts = {"level": level, "estimator": estimator, "weights": weights, "match": match, "bootstrap": bootstrap,
            "confidence": confidence, "documents": design.n_groups, "documents_given": documents is not None,
            "sentences": sentences is not None, "outside_p0": outside}
    return OfflineResult(rows, sc, design, names, tuple(glob), data.reports, opts)


def score_files(labels: str | Path, submissions: str | Path, exhaustive: str | Path, *,
                corpus: str | Path | None = None, corpus_format: str | None = None,
                limits: Limits = Limits(), **options) -> OfflineResult:
    """:func:`load` then :func:`score`; raises :class:`InputFindings` when a file has errors.

    ``corpus``, ``corpus_format`` are those of :func:`load`, ``options`` those of :func:`score`.
    """
    data = load(labels, submissions, exhaustive, corpus=corpus, corpus_format=corpus_format, limits=limits)
    if not data.ok:
        raise InputFindings([r for r in data.reports if not r.ok])
    return score(data, **options)


__all__ = [
    "MATCHES", "InputFindings", "LabelledDraw", "OfflineData", "OfflineResult", "Submission", "SystemScore",
    "TrueInstance", "build_design", "load", "read_answers", "read_exhaustive", "read_labels",
    "read_sentences",
    "read_submission", "read_submissions", "score", "score_files", "system_distribution", "system_name",
    "system_rows",
]
