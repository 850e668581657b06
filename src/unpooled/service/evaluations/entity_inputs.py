"""What the entity scores read from the database, kept in process memory (:mod:`.entities` computes the scores;
:func:`.inputs.clear_cache` forgets these too, with the other inputs).

A re-scoring runs after every label batch, but the entity scores' document side changes far less often: a
submission's mentions never change once ingested, the exhaustive documents' layers only when their entity tasks
complete, the cross-document identity only with the clustering tasks.  Each part is checked against a cheap
fingerprint read on every call, so a change made by another process is never missed:

the exhaustive documents (per corpus, :func:`exhaustive_documents`)
    fingerprint: the sampled documents with their inclusion probabilities, the completed entity tasks of those
    documents (id and completion time: a task's layer is written when it completes), and (count, max id, sum of
    ids) of the answers counted on them (weight above 0, by an annotator not blocked).
the submissions' mentions in those documents (per submission, :func:`system_inputs`)
    read once per document per submission (immutable once ingested): a new exhaustive document reads every
    submission's mentions in it alone, a new submission its mentions in every document.
the cross-document identity of the NIL clusters (per corpus, :func:`nil_identity`)
    fingerprint: the completed clustering tasks (id and completion time).
the document terms (per corpus, :func:`document_terms`)
    the core's :func:`~unpooled.core.estimators.entities.document_terms` of the three above, kept under their
    fingerprints, the submissions' (id, creation time) and the settings they were computed with.  When they move,
    what did not is kept apart: the documents' side (per corpus, :func:`document_side`: the core's
    :func:`~unpooled.core.estimators.entities.document_side`, under the documents' fingerprint and the settings)
    and every submission's part (per submission, :func:`system_parts`: the core's
    :func:`~unpooled.core.estimators.entities.system_part`, under the same and the identity's fingerprint), so a
    new submission computes its own part alone, then the crowd's rates (every submission's spans) and what they move.
the argument spans of the relation universe (per corpus, :func:`argument_spans`)
    the span of every universe instance's arguments; the universe only grows (new submissions append to it):
    the instances appended since are read alone.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Count, Max, Sum

from unpooled.core.estimators.entities import ExhaustiveDocument, Mention
from unpooled.service.annotation.models import Answer, ExhaustiveDocument as ExDoc, Kind, Task
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import RelationInstance, SubmissionMention

from .rates import corpus_key

lock = threading.RLock()
_docs: dict = {}      # corpus -> (fingerprint, [ExhaustiveDocument])
_systems: dict = {}   # (submission pk, created) -> _SystemMentions
_counts: dict = {}    # (submission pk, created) -> (|M_i|, |A_i|)
_identity: dict = {}  # corpus -> (fingerprint, identity)
_terms: dict = {}     # corpus -> (key, terms)
_side: dict = {}      # corpus -> (key, DocumentSide)
_parts: dict = {}     # (submission pk, created) -> (key, SystemPart)
_spans: dict = {}     # corpus -> _Spans
_arguments: dict = {}  # corpus -> _ArgumentAnswers (:func:`argument_answers`)
_argument_precision: dict = {}  # corpus -> (key, (precision, notes)) (:func:`arguments`)


def _id_fingerprint(qs) -> tuple:
    """(count, max id, sum of ids) of ``qs``'s rows: moves when a row is added or one leaves the set."""
    a = qs.aggregate(n=Count("id"), mx=Max("id"), s=Sum("id"))
    return a["n"], a["mx"], a["s"]


def _mentions(value) -> tuple:
    return tuple(Mention(int(m["start"]), int(m["end"]), m.get("type"), m.get("cluster"), m.get("link") or "")
                 for m in (value or {}).get("mentions", []))


def exhaustive_documents(corpus: Corpus) -> tuple[tuple, list[ExhaustiveDocument]]:
    """``(fingerprint, documents)``: the sampled documents whose entity layer is final, with their inclusion
    probabilities, aggregated layers and the answers counted (weight above 0, by an annotator not blocked: those
    the layer was aggregated from, :func:`~unpooled.service.annotation.actions.complete_task`), which the core
    corrects the labels with; read again only when the fingerprint (module docs) moves."""
    incl = tuple(ExDoc.objects.filter(corpus=corpus).order_by("document_id").values_list("document_id", "inclusion"))
    tasks = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, key="", status=Task.Status.COMPLETE,
                                document_id__in=[d for d, _ in incl])
    done = tuple(tasks.order_by("document_id").values_list("id", "completed"))
    counted = Answer.objects.filter(task_id__in=[t for t, _ in done], weight__gt=0, annotator__blocked=False)
    fp = (incl, done, _id_fingerprint(counted))
    with lock:
        held = _docs.get(corpus_key(corpus))
        if held is not None and held[0] == fp:
            return held
    inclusion = dict(incl)
    rows = list(tasks.filter(id__in=[t for t, _ in done]).order_by("document_id")
                .values_list("id", "document_id", "document__doc_id", "result"))
    answers: dict = defaultdict(list)
    for task_id, value in (counted.order_by("task_id", "id").values_list("task_id", "value")
                           .iterator(chunk_size=2000)):
        if isinstance(value, dict):
            answers[task_id].append(_mentions(value))
    docs = [ExhaustiveDocument(doc_id, float(inclusion[doc_pk]), _mentions(result), tuple(answers.get(task_id, ())))
            for task_id, doc_pk, doc_id, result in rows]
    with lock:
        _docs[corpus_key(corpus)] = (fp, docs)
    return fp, docs


@dataclass
class _SystemMentions:
    """One submission's mentions in the exhaustive documents read so far."""

    docs: set = field(default_factory=set)          # document ids read
    mentions: dict = field(default_factory=dict)    # doc id -> [Mention] (its mentions, then its arguments')
    args: dict = field(default_factory=dict)        # doc id -> {(start, end)} of its argument mentions


def _counts_of(subs) -> None:
    """(|M_i|, |A_i|) of the submissions not yet counted: all their mentions and their argument mentions."""
    new = [s for s in subs if (s.pk, s.created) not in _counts]
    if not new:
        return
    pos = {s.pk: i for i, s in enumerate(new)}
    spans: list[set] = [set() for _ in new]
    args: list[set] = [set() for _ in new]
    for sid, doc, s, e in (SubmissionMention.objects.filter(submission_id__in=list(pos))
                           .values_list("submission_id", "document_id", "start", "end").iterator(chunk_size=20000)):
        spans[pos[sid]].add((doc, s, e))
    for sid, doc, ss, se, os_, oe, obj in (RelationInstance.objects.filter(submission_id__in=list(pos))
                                           .values_list("submission_id", "document_id", "subject_start", "subject_end",
                                                        "object_start", "object_end", "object_id")
                                           .iterator(chunk_size=20000)):
        args[pos[sid]].add((doc, ss, se))
        if obj is not None:
            args[pos[sid]].add((doc, os_, oe))
    for i, s in enumerate(new):
        _counts[(s.pk, s.created)] = (len(spans[i] | args[i]), len(args[i]))


def _read_mentions(held: dict, sub_ids: list[int], doc_ids: list[str]) -> None:
    """The mentions of the submissions ``sub_ids`` in the documents ``doc_ids`` into ``held`` (pk ->
    :class:`_SystemMentions`): each its mentions by id, then its instances' arguments not among them."""
    seen: dict = {sid: set() for sid in sub_ids}
    qs = (SubmissionMention.objects.filter(submission_id__in=sub_ids, document__doc_id__in=doc_ids).order_by("pk")
          .values_list("submission_id", "document__doc_id", "start", "end", "entity_id", "entity__type",
                       "entity__links"))
    for sid, doc, s, e, ent, typ, links in qs.iterator(chunk_size=20000):
        if (doc, s, e) in seen[sid]:
            continue
        seen[sid].add((doc, s, e))
        held[sid].mentions.setdefault(doc, []).append(Mention(s, e, typ, ent, (links or [""])[0] or ""))
    # argument spans (and arguments that are not listed as mentions: they are mentions of the KB too)
    qs = (RelationInstance.objects.filter(submission_id__in=sub_ids, document__doc_id__in=doc_ids).order_by("pk")
          .values_list("submission_id", "document__doc_id", "subject_start", "subject_end", "subject_id",
                       "subject__type", "subject__links", "object_start", "object_end", "object_id",
                       "object__type", "object__links"))
    for sid, doc, ss, se, sj, st, sl, os_, oe, oj, ot, ol in qs.iterator(chunk_size=20000):
        for a, b, ent, typ, links in ((ss, se, sj, st, sl), (os_, oe, oj, ot, ol)):
            if ent is None:
                continue
            held[sid].args.setdefault(doc, set()).add((a, b))
            if (doc, a, b) not in seen[sid]:
                seen[sid].add((doc, a, b))
                held[sid].mentions.setdefault(doc, []).append(Mention(a, b, typ, ent, (links or [""])[0] or ""))
    for sid in sub_ids:
        held[sid].docs.update(doc_ids)


def system_inputs(subs: list, docs: list[ExhaustiveDocument]) -> tuple[list[dict], list[dict], list[tuple]]:
    """Per submission: its mentions in the exhaustive documents ``docs`` (``doc id -> [Mention]``), their argument
    spans (``doc id -> {(start, end)}``), and (|M_i|, |A_i|); only what was never read is read (module docs)."""
    ex_ids = [d.doc for d in docs]
    with lock:
        _counts_of(subs)
        held = {s.pk: _systems.setdefault((s.pk, s.created), _SystemMentions()) for s in subs}
        missing: dict = defaultdict(list)  # the documents a submission lacks -> those submissions
        for s in subs:
            lack = tuple(d for d in ex_ids if d not in held[s.pk].docs)
            if lack:
                missing[lack].append(s.pk)
        for lack, sub_ids in missing.items():
            _read_mentions(held, sub_ids, list(lack))
        wanted = set(ex_ids)
        systems = [{d: list(ms) for d, ms in held[s.pk].mentions.items() if d in wanted} for s in subs]
        args = [{d: set(a) for d, a in held[s.pk].args.items() if d in wanted} for s in subs]
        return systems, args, [_counts[(s.pk, s.created)] for s in subs]


def nil_identity(corpus: Corpus) -> tuple[tuple, dict]:
    """``(fingerprint, identity)``: :func:`~unpooled.service.annotation.clustering.nil_identity`, read again only
    when the completed clustering tasks change."""
    from unpooled.service.annotation.clustering import nil_identity as read

    fp = tuple(Task.objects.filter(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.COMPLETE)
               .order_by("id").values_list("id", "completed"))
    with lock:
        held = _identity.get(corpus_key(corpus))
        if held is not None and held[0] == fp:
            return held
    got = (fp, read(corpus))
    with lock:
        _identity[corpus_key(corpus)] = got
    return got


def _kept(store: dict, corpus: Corpus, key: tuple, compute):
    """``store``'s entry of ``corpus`` when it was kept under ``key``, else ``compute()``'s, kept there."""
    with lock:
        held = store.get(corpus_key(corpus))
        if held is not None and held[0] == key:
            return held[1]
    value = compute()
    with lock:
        store[corpus_key(corpus)] = (key, value)
    return value


def document_terms(corpus: Corpus, key: tuple, compute):
    """The document terms kept under ``key`` (every fingerprint and setting they depend on), else ``compute()``'s,
    kept (one entry per corpus)."""
    return _kept(_terms, corpus, key, compute)


def arguments(corpus: Corpus, key: tuple, compute):
    """The argument mentions' precision kept under ``key`` (the relation inputs' and the argument answers'
    fingerprints, the level and the submissions), else ``compute()``'s, kept (one per corpus): a re-scoring with
    nothing new computes it again from nothing."""
    return _kept(_argument_precision, corpus, key, compute)


def document_side(corpus: Corpus, key: tuple, compute):
    """The documents' side of the document terms kept under ``key``, else ``compute()``'s, kept (one per corpus)."""
    return _kept(_side, corpus, key, compute)


def system_parts(subs: list, key: tuple, compute) -> list:
    """Per submission of ``subs``, its part of the document terms kept under ``key``, else ``compute(i)``'s (``i``
    its index in ``subs``), kept (one per submission)."""
    with lock:
        held = [_parts.get((s.pk, s.created)) for s in subs]
    out = []
    for i, (s, h) in enumerate(zip(subs, held)):
        if h is None or h[0] != key:
            h = (key, compute(i))
            with lock:
                _parts[(s.pk, s.created)] = h
        out.append(h[1])
    return out


@dataclass
class _Spans:
    refs: list = field(default_factory=list)          # the universe's instances read (it only grows)
    span_id: dict = field(default_factory=dict)       # (doc, start, end) -> argument mention, in order of appearance
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # universe index of each entry
    cols: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # its argument mention


def argument_spans(corpus: Corpus, universe: list, U: int) -> tuple[dict, np.ndarray, np.ndarray, int]:
    """``(span id, rows, cols, K)``: the argument spans of the first ``U`` instances of the relation universe
    ``universe`` (a subject, and an object without a value), numbered in order of appearance (``K`` of them: a
    span id from ``K`` on is not theirs), and the incidence entries (universe index, span).  Kept per corpus: the
    instances appended to the universe since the last call are read alone (the ones read before are checked to be
    its beginning)."""
    with lock:
        held = _spans.get(corpus_key(corpus))
        n = len(held.refs) if held is not None else 0
        if held is None or len(universe) < n or universe[:n] != held.refs:
            held = _spans[corpus_key(corpus)] = _Spans()
            n = 0
        span_id, rows, cols = held.span_id, [], []
        for u in range(n, len(universe)):
            ref = universe[u]
            rows.append(u)
            cols.append(span_id.setdefault((ref.doc, ref.s_start, ref.s_end), len(span_id)))
            if ref.value is None and ref.o_start >= 0:
                rows.append(u)
                cols.append(span_id.setdefault((ref.doc, ref.o_start, ref.o_end), len(span_id)))
        if rows:
            held.refs.extend(universe[n:])
            held.rows = np.concatenate([held.rows, np.asarray(rows, np.int64)])
            held.cols = np.concatenate([held.cols, np.asarray(cols, np.int64)])
        cut = int(np.searchsorted(held.rows, U))
        return span_id, held.rows[:cut], held.cols[:cut], int(held.cols[:cut].max()) + 1 if cut else 0


# -- the verification answers on the drawn instances' arguments (the entity scores') ---------------------------------
@dataclass
class _ArgumentAnswers:
    fp: tuple = (0, None, None)                   # (count, max id, sum of ids) of the answers held
    rows: list = field(default_factory=list)      # (task, key, doc, subject span, object span, annotator, ok, ok)


def _argument_answers_qs(corpus: Corpus):
    return Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, task__is_control=False, weight__gt=0,
                                 quarantined=False, annotator__blocked=False)


def _argument_rows(qs) -> list:
    """The answers of ``qs`` by id, each as what the argument judgements need of it (its task's document, key and
    argument spans; an object with a value has no span; the answer's ``subject_ok`` and ``object_ok``)."""
    out = []
    for task_id, key, doc, payload, ann, value in (
            qs.order_by("id").values_list("task_id", "task__key", "task__document__doc_id", "task__payload",
                                          "annotator_id", "value").iterator(chunk_size=5000)):
        if not isinstance(value, dict):
            continue
        spans = []
        for role in ("subject", "object"):
            arg = (payload or {}).get(role) or {}
            ok = (role == "subject" or arg.get("value") is None) and arg.get("start") is not None
            spans.append((arg["start"], arg["end"]) if ok else None)
        out.append((task_id, key, doc, spans[0], spans[1], ann, value.get("subject_ok"), value.get("object_ok")))
    return out


def argument_answers(corpus: Corpus) -> tuple[tuple, list]:
    """The counted answers to the corpus's verification tasks (not controls, not quarantined, weight above 0, by an
    annotator not blocked), by id, as :func:`_argument_rows` gives them: read once and appended to (answers are
    append-only), checked against the fingerprint (count, max id, sum of ids) of the answers counted on every call:
    one whose new ids do not account for it (an answer quarantined, an annotator blocked) re-reads them all.
    Returns the fingerprint and the rows."""
    qs = _argument_answers_qs(corpus)
    fp = _id_fingerprint(qs)
    with lock:
        held = _arguments.get(corpus_key(corpus))
        if held is not None and held.fp == fp:
            return fp, held.rows
        rows = None
        if held is not None and held.fp[1] is not None and fp[1] is not None and fp[1] > held.fp[1]:
            new = qs.filter(id__gt=held.fp[1], id__lte=fp[1])
            ids = list(new.values_list("id", flat=True))
            if held.fp[0] + len(ids) == fp[0] and held.fp[2] + sum(ids) == fp[2]:
                rows = held.rows + _argument_rows(new)
        if rows is None:
            rows = _argument_rows(qs.filter(id__lte=fp[1]) if fp[1] is not None else qs.none())
        _arguments[corpus_key(corpus)] = _ArgumentAnswers(fp, rows)
        return fp, rows



def clear_cache() -> None:
    with lock:
        for memo in (_docs, _systems, _counts, _identity, _terms, _side, _parts, _spans, _arguments,
                     _argument_precision):
            memo.clear()
