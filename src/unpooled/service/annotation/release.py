"""A corpus's label pool and exhaustive annotations as a dataset release (JSONL files and a README).

:func:`export_release` writes into a folder:

=============================  ==========================================================================
file                           one line per
=============================  ==========================================================================
``labels.jsonl``               verification label row (append-only history; ``superseded`` marks the rows
                               a newer row of the same instance key replaced)
``answers.jsonl``              individual answer (verification, entities, relations; gold controls too)
``exhaustive.jsonl``           document sampled for exhaustive annotation (mentions, groups, links, relations)
``exhaustive_instances.jsonl`` true relation instance of a completely annotated sampled document, in the
                               format ``unpooled score --exhaustive`` reads (:mod:`unpooled.core.offline`)
``clusters.jsonl``             cross-document clustering task: its items (the canonical mentions of the
                               unlinked entities of the exhaustive layers), its answers, the aggregated
                               clusters with their agreement figures
``documents.jsonl``            corpus document: id, title, length and SHA-256 of its text -- not the text
``README.md``                  counts, formats, how to score with it, licence, generation time
=============================  ==========================================================================

Annotators appear only as pseudonyms, :func:`pseudonym`: an HMAC-SHA256 of the annotator's
database id keyed with the service's secret key.  User names and Mechanical Turk WorkerIds are
never written, nor are the submissions (systems) that asked for a label: the pool is the
union of what every system predicted.

Documents are listed without their text: the text belongs to the corpus's source and stays
under its licence (TAC KBP newswire, for instance, may not be redistributed); every offset in
the release is a character offset into exactly that text, and ``sha256`` lets a user check
they have the same version.  Mention and argument ``text`` fields quote the few words of a
span, for readability.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

from django.db.models import Count, Q
from django.utils import timezone
from django.utils.crypto import salted_hmac

from unpooled.core.matching import InstanceRef

from .actions import relations_protocol
from .models import AnnotationSettings, Answer, ExhaustiveDocument, Kind, Label, Task

RELEASE_FILES = ("labels.jsonl", "answers.jsonl", "exhaustive.jsonl", "exhaustive_instances.jsonl",
                 "clusters.jsonl", "documents.jsonl", "README.md")
DEFAULT_LICENCE = "CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/)"
_PSEUDONYM_SALT = "unpooled.release.annotator"


def pseudonym(annotator_id: int, *, secret: str | None = None) -> str:
    """The annotator's name in a release: ``a`` + 16 hex digits of HMAC-SHA256(secret, id).

    ``secret`` defaults to the service's ``SECRET_KEY``; the same annotator gets the same
    pseudonym in every release of every corpus made with that key, and nobody without the key
    can tell who it is or test a guess.
    """
    return "a" + salted_hmac(_PSEUDONYM_SALT, str(int(annotator_id)), secret=secret,
                             algorithm="sha256").hexdigest()[:16]


@dataclass
class ReleaseCounts:
    """What a release holds (also written into its README)."""

    corpus: str
    generated: str
    label_rows: int = 0
    label_keys: int = 0
    labels_correct: int = 0
    labels_by_method: dict = field(default_factory=dict)
    answers: int = 0
    answers_counted: int = 0
    answers_by_kind: dict = field(default_factory=dict)
    control_answers: int = 0
    annotators: int = 0
    annotators_by_backend: dict = field(default_factory=dict)
    documents: int = 0
    labelled_documents: int = 0
    exhaustive_documents: int = 0
    exhaustive_complete: int = 0
    exhaustive_mentions: int = 0
    exhaustive_relations: int = 0
    cluster_tasks: int = 0
    cluster_tasks_complete: int = 0
    cluster_answers: int = 0
    cluster_items: int = 0  # of the clustering the scores use (clustering.clustering_tasks)
    cross_document_clusters: int = 0  # its clusters, singletons included
    predicates: dict = field(default_factory=dict)  # predicate -> {labelled, correct, exhaustive}
    files: dict = field(default_factory=dict)  # file name -> lines
    period: int | None = None  # an evaluation period's release (export_release's scope)
    as_of: str | None = None  # a period's release: the moment its data is cut at (scope's ``cut``)

    @property
    def correct_share(self) -> float | None:
        return self.labels_correct / self.label_keys if self.label_keys else None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["correct_share"] = self.correct_share
        return d


class _Writer:
    """Writes ``name.part`` and renames it on success, so a crash leaves no half file under the real name."""

    def __init__(self, out_dir: Path, name: str, counts: ReleaseCounts) -> None:
        self.path = out_dir / name
        self.tmp = out_dir / (name + ".part")
        self.name, self.counts, self.n = name, counts, 0

    def __enter__(self):
        self.fh = open(self.tmp, "w", encoding="utf-8", newline="\n")
        return self

    def write(self, obj: dict) -> None:
        self.fh.write(json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n")
        self.n += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        self.fh.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
            self.counts.files[self.name] = self.n
        else:
            self.tmp.unlink(missing_ok=True)


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def _canonical(schema, ms: list[dict], a: int, pred: str, b: int) -> tuple[int, str, int]:
    """Mention indices and predicate in canonical direction (inverse relations swapped; the arguments of
    a symmetric relation ordered by span, as :func:`unpooled.core.kb.model.canonical_instance` does)."""
    canon, s, _ = schema.canonical_arguments(pred, ms[a], ms[b])
    return (a, canon, b) if s is ms[a] else (b, canon, a)


def export_release(corpus, out_dir: str | Path, *, licence: str = DEFAULT_LICENCE, now: datetime | None = None,
                   secret: str | None = None, scope: dict | None = None) -> ReleaseCounts:
    """Write the release of ``corpus`` into ``out_dir`` (created if missing; release files replaced).

    Parameters
    ----------
    corpus : Corpus
    out_dir : path
        The folder; the files are :data:`RELEASE_FILES`.
    licence : str
        The licence of the annotations, stated in the README (the documents keep theirs).
    now : datetime, optional
        The generation time written into the README (default: now).
    secret : str, optional
        The key of the annotator pseudonyms (default: the service's ``SECRET_KEY``).
    scope : dict, optional
        An evaluation period's release (:func:`unpooled.service.evaluations.periods.release_scope`): ``period``
        (its number), ``key_hashes`` (the instance key hashes its submissions drew, a set or a ``values()``
        queryset), ``opened``, ``closed`` and ``cut``.  Labels and verification answers are then those of these
        keys; gold-control answers those given during the period; the exhaustive annotation (the corpus's recall
        sample, which every period's scores use) and its cross-document clustering (every period's NIL
        clustering scores use it) are released whole -- everything as it stood at ``cut`` (the period's last
        frozen score): label rows, answers, sampled documents and tasks made after it are left out, a layer or a
        clustering completed after it is released as it was then (not complete), so the release holds what the
        frozen scores were computed from, however long after the close it is made.  None: the whole corpus, now.

    Returns
    -------
    ReleaseCounts
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = now or timezone.now()
    counts = ReleaseCounts(corpus=corpus.name, generated=now.isoformat(timespec="seconds"))
    labels_qs = Label.objects.filter(corpus=corpus)
    answer_q = Q()
    cut = None
    if scope is not None:
        counts.period, cut = int(scope["period"]), scope["cut"]
        counts.as_of = cut.isoformat(timespec="seconds")
        labels_qs = labels_qs.filter(key_hash__in=scope["key_hashes"], created__lte=cut)
        answer_q = (Q(task__kind=Kind.VERIFY, task__is_control=False, task__key_hash__in=scope["key_hashes"])
                    | Q(task__is_control=True, created__gte=scope["opened"], created__lte=scope["closed"])
                    | Q(task__kind__in=[Kind.ENTITIES, Kind.RELATIONS, Kind.CLUSTERS])) & Q(created__lte=cut)
    per_pred: dict[str, Counter] = defaultdict(Counter)
    labelled_docs = _write_labels(corpus, labels_qs, out, counts, per_pred, secret)
    _write_answers(corpus, answer_q, out, counts, secret)
    sampled = _write_exhaustive(corpus, out, counts, per_pred, cut)
    _write_clusters(corpus, out, counts, answer_q, secret, cut)
    _write_documents(corpus, out, counts, labelled_docs, sampled)
    counts.predicates = {p: {"labelled": c["labelled"], "correct": c["correct"], "exhaustive": c["exhaustive"]}
                         for p, c in sorted(per_pred.items())}
    readme = out / "README.md"
    tmp = out / "README.md.part"
    tmp.write_text(readme_text(corpus, counts, licence=licence), encoding="utf-8")
    os.replace(tmp, readme)
    counts.files["README.md"] = 1
    return counts


def _write_labels(corpus, labels_qs, out: Path, counts: ReleaseCounts, per_pred: dict, secret: str | None) -> Counter:
    """``labels.jsonl``: every label row of ``labels_qs``, oldest first (the newest row of a key is its current
    label, the others ``superseded``); counts the current labels per predicate into ``per_pred``.  Returns the
    current labels per document."""
    newest: dict[str, int] = {}
    for pk, key in labels_qs.order_by("id").values_list("id", "key").iterator(chunk_size=5000):
        newest[key] = pk
    texts: dict[str, str] = {}

    def text_of(doc: str) -> str:
        if doc not in texts:
            texts[doc] = corpus.documents.filter(doc_id=doc).values_list("text", flat=True).first() or ""
        return texts[doc]

    def span(p: dict, start: int, end: int, doc: str) -> str:  # the task's text when it is of this span
        return p.get("text") if p.get("start") == start and p.get("end") == end else text_of(doc)[start:end]

    methods: Counter = Counter()
    labelled_docs: Counter = Counter()
    with _Writer(out, "labels.jsonl", counts) as w:
        for lab in labels_qs.select_related("task").order_by("id").iterator(chunk_size=2000):
            ref = InstanceRef.from_key(lab.key)
            payload = lab.task.payload if lab.task is not None else {}
            ps, po = payload.get("subject") or {}, payload.get("object") or {}
            subj = {"start": ref.s_start, "end": ref.s_end, "text": span(ps, ref.s_start, ref.s_end, ref.doc)}
            if ref.value is None:
                obj = {"start": ref.o_start, "end": ref.o_end, "text": span(po, ref.o_start, ref.o_end, ref.doc)}
            else:
                obj = {"value": ref.value}
                if "start" in po and "end" in po:
                    obj.update(start=po["start"], end=po["end"], text=po.get("text", ""))
            current = newest[lab.key] == lab.pk
            w.write({"key": lab.key, "doc": ref.doc, "subject": subj, "predicate": ref.predicate, "object": obj,
                     "correct": lab.correct, "probability": round(float(lab.probability), 6), "method": lab.method,
                     "n_answers": lab.n_answers, "annotators": [pseudonym(a, secret=secret) for a in lab.annotators],
                     "guideline_version": lab.guideline_version, "created": _iso(lab.created),
                     "superseded": not current})
            methods[lab.method] += 1
            if current:
                counts.label_keys += 1
                counts.labels_correct += int(lab.correct)
                per_pred[ref.predicate]["labelled"] += 1
                per_pred[ref.predicate]["correct"] += int(lab.correct)
                labelled_docs[ref.doc] += 1
    counts.label_rows = sum(methods.values())
    counts.labels_by_method = dict(sorted(methods.items()))
    counts.labelled_documents = len(labelled_docs)
    return labelled_docs


def _write_answers(corpus, answer_q: Q, out: Path, counts: ReleaseCounts, secret: str | None) -> None:
    """``answers.jsonl``: the answers ``answer_q`` releases, oldest first, with pseudonymous annotators; an MTurk
    answer Amazon never confirmed (quarantined) is nobody's work we can vouch for and is not released."""
    kinds: Counter = Counter()
    annotators: dict[int, str] = {}
    groups = AnnotationSettings.groups_of(corpus)
    doc_ids = dict(corpus.documents.values_list("pk", "doc_id"))
    with _Writer(out, "answers.jsonl", counts) as w:
        rows = (Answer.objects.filter(answer_q, task__corpus=corpus, quarantined=False).order_by("id").values_list(
            "id", "task_id", "task__kind", "task__is_control", "task__control_answer", "task__key",
            "task__document_id", "annotator_id", "annotator__backend", "value", "correct", "weight", "seconds",
            "guideline_version", "created", "task__group").iterator(chunk_size=5000))
        for (pk, task, kind, control, gold, key, doc, ann, backend, value, correct, weight, seconds, gv,
             created, relation) in rows:
            row = {"id": pk, "task": task, "kind": kind, "control": control, "doc": doc_ids.get(doc),
                   "annotator": pseudonym(ann, secret=secret), "backend": backend, "value": value}
            if kind == Kind.VERIFY:
                row.update(correct=correct, relation=relation,
                           **({"group": groups[relation]} if relation in groups else {}))
                if control:
                    row["gold"] = gold
                else:
                    row["key"] = key
            row.update(counted=weight > 0, seconds=seconds, guideline_version=gv, created=_iso(created))
            w.write(row)
            kinds[kind] += 1
            counts.answers_counted += int(weight > 0)
            counts.control_answers += int(control)
            annotators[ann] = backend
    counts.answers = sum(kinds.values())
    counts.answers_by_kind = {k: kinds.get(k, 0) for k in Kind.values}
    counts.annotators = len(annotators)
    counts.annotators_by_backend = dict(sorted(Counter(annotators.values()).items()))


def _exhaustive_status(ent, rel, cut: datetime | None) -> str:
    """An exhaustively sampled document's annotation status from its entity and relation tasks at ``cut``."""
    if _complete(rel, cut):
        return "complete"
    if ent is None or ent.status == Task.Status.CANCELLED or (rel is not None and rel.status == Task.Status.CANCELLED):
        return "cancelled"
    return "annotating relations" if _complete(ent, cut) else "annotating entities"


def _as_of(qs, cut: datetime | None):
    """``qs`` without the rows made after ``cut`` (None: all)."""
    return qs if cut is None else qs.filter(created__lte=cut)


def _complete(task, cut: datetime | None) -> bool:
    """``task`` was complete at ``cut`` (None: now)."""
    return task is not None and task.status == Task.Status.COMPLETE and (cut is None or task.completed <= cut)


def _write_exhaustive(corpus, out: Path, counts: ReleaseCounts, per_pred: dict, cut: datetime | None) -> set:
    """``exhaustive.jsonl`` (one line per sampled document: status, mentions, relations) and
    ``exhaustive_instances.jsonl`` (its true instances), as they stood at ``cut`` (None: now); counts the
    instances per predicate into ``per_pred``.  Returns the sampled documents' ids."""
    schema = corpus.schema.schema()
    layer = {(t.kind, t.document_id): t for t in _as_of(Task.objects.filter(
        corpus=corpus, kind__in=[Kind.ENTITIES, Kind.RELATIONS], key="", is_control=False), cut)}
    n_answers = dict(_as_of(Answer.objects.filter(task__corpus=corpus, task__kind__in=[Kind.ENTITIES, Kind.RELATIONS],
                                                  task__key=""), cut)
                     .values("task_id").annotate(n=Count("id", filter=Q(weight__gt=0))).values_list("task_id", "n"))
    sample = list(_as_of(ExhaustiveDocument.objects.filter(corpus=corpus), cut).select_related("document")
                  .order_by("document__doc_id"))
    with _Writer(out, "exhaustive.jsonl", counts) as w, _Writer(out, "exhaustive_instances.jsonl", counts) as wi:
        for ex in sample:
            doc = ex.document
            ent, rel = layer.get((Kind.ENTITIES, doc.pk)), layer.get((Kind.RELATIONS, doc.pk))
            ent_done, rel_done = _complete(ent, cut), _complete(rel, cut)
            ms = (rel.payload.get("mentions") if rel is not None else None) or \
                ((ent.result or {}).get("mentions", []) if ent_done else [])
            mentions = [{"index": i, "start": m["start"], "end": m["end"], "text": doc.text[m["start"]:m["end"]],
                         "type": m["type"], "group": m["cluster"], "link": m.get("link") or ""}
                        for i, m in enumerate(ms)] if (ent_done or rel_done) else []
            relations = []
            if rel_done:
                seen = set()
                for a, pred, b in (rel.result or {}).get("relations", []):
                    s, canon, o = _canonical(schema, ms, a, pred, b)
                    ref = InstanceRef(doc.doc_id, ms[s]["start"], ms[s]["end"], canon, ms[o]["start"], ms[o]["end"])
                    if ref.key in seen:
                        continue
                    seen.add(ref.key)
                    relations.append({"subject": s, "predicate": canon, "object": o, "key": ref.key})
                    wi.write({"doc": doc.doc_id,
                              "subject": {"start": ref.s_start, "end": ref.s_end, "text": mentions[s]["text"]},
                              "predicate": canon,
                              "object": {"start": ref.o_start, "end": ref.o_end, "text": mentions[o]["text"]},
                              "inclusion": ex.inclusion})
                    per_pred[canon]["exhaustive"] += 1
                counts.exhaustive_complete += 1
                counts.exhaustive_mentions += len(mentions)
                counts.exhaustive_relations += len(relations)
            w.write({"doc": doc.doc_id, "title": doc.title, "scheme": ex.scheme, "stage": ex.stage,
                     "inclusion": ex.inclusion, "weight": ex.weight, "status": _exhaustive_status(ent, rel, cut),
                     "answers": {"entities": n_answers.get(ent.pk, 0) if ent else 0,
                                 "relations": n_answers.get(rel.pk, 0) if rel else 0},
                     "guideline_versions": {"entities": ent.guideline_version if ent else None,
                                            "relations": rel.guideline_version if rel else None},
                     # which pairs the relations were asked for: within sentences, or every cluster pair
                     "recall_protocol": relations_protocol(rel) if rel else None,
                     "mentions": mentions, "relations": relations})
    counts.exhaustive_documents = len(sample)
    return {ex.document_id for ex in sample}


def _write_documents(corpus, out: Path, counts: ReleaseCounts, labelled_docs: Counter, sampled: set) -> None:
    """``documents.jsonl``: ids, titles, lengths and checksums (never the text)."""
    with _Writer(out, "documents.jsonl", counts) as w:
        for pk, doc, title, length, text in (corpus.documents.order_by("id")
                                             .values_list("pk", "doc_id", "title", "length", "text")
                                             .iterator(chunk_size=200)):
            w.write({"doc": doc, "title": title, "length": length,
                     "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                     "labelled_keys": labelled_docs.get(doc, 0), "exhaustive": pk in sampled})
    counts.documents = counts.files["documents.jsonl"]


def _write_clusters(corpus, out: Path, counts: ReleaseCounts, answer_q: Q, secret: str | None,
                    cut: datetime | None) -> None:
    """``clusters.jsonl``: every clustering task of ``corpus``, oldest first, with the items it showed (the
    stored canonical mentions, without the text around them), the answers ``answer_q`` releases (not
    quarantined; the same answers as ``answers.jsonl``) and, once complete, the clusters and agreement figures
    the service aggregated (:func:`unpooled.core.annotation.clustering.aggregate_clusters`, stored when the task
    completed); ``current`` marks the tasks whose clusters the scores use (:func:`.clustering.clustering_tasks`: one,
    or one per block of a large corpus); ``block`` is ``[i, n]``, the task's block among its generation's.  All as
    it stood at ``cut`` (None: now): a task made after it is left out, one completed after it is listed open."""
    from .clustering import clustering_generation, clustering_tasks

    current = {t.pk for t in clustering_tasks(corpus, as_of=cut)}
    tasks = list(_as_of(Task.objects.filter(corpus=corpus, kind=Kind.CLUSTERS), cut).order_by("id"))
    answers: dict[int, list[dict]] = defaultdict(list)
    for pk, task, ann, backend, value, weight, seconds, gv, created in (
            Answer.objects.filter(answer_q, task__in=tasks, quarantined=False).order_by("id").values_list(
                "id", "task_id", "annotator_id", "annotator__backend", "value", "weight", "seconds",
                "guideline_version", "created")):
        answers[task].append({"id": pk, "annotator": pseudonym(ann, secret=secret), "backend": backend,
                              "groups": value.get("groups"), "counted": weight > 0, "seconds": seconds,
                              "guideline_version": gv, "created": _iso(created)})
    with _Writer(out, "clusters.jsonl", counts) as w:
        for t in tasks:
            items = [{"index": i, "doc": it["doc"], "group": it["cluster"], "type": it["type"], "start": it["start"],
                      "end": it["end"], "text": it["text"], "context": it.get("context")}
                     for i, it in enumerate((t.payload or {}).get("items", []))]
            done = _complete(t, cut)
            is_current = t.pk in current
            res = (t.result or {}) if done else {}  # an open or cancelled task has no clusters
            status = t.status if done or t.status != Task.Status.COMPLETE else Task.Status.OPEN  # open at the cut
            w.write({"task": t.pk, "status": status, "current": is_current,
                     "block": list(clustering_generation(t)[1:]),
                     "guideline_version": t.guideline_version, "created": _iso(t.created),
                     "completed": _iso(t.completed) if done else None, "items": items,
                     "items_dropped": (t.payload or {}).get("items_dropped", 0), "answers": answers[t.pk],
                     "clusters": res.get("clusters"), "agreement": res.get("agreement"),
                     "aggregated_answers": res.get("answers")})
            counts.cluster_tasks_complete += int(done)
            counts.cluster_answers += len(answers[t.pk])
            if is_current:
                counts.cluster_items += len(items)
                counts.cross_document_clusters += len(res.get("clusters", []))
    counts.cluster_tasks = len(tasks)


def release_name(corpus, now: datetime | None = None, *, period: int | None = None) -> str:
    """``unpooled-release-<corpus>-<YYYYMMDD>`` (``-period<N>`` before the date for a period's release): the
    folder inside the zip, and the zip's name."""
    now = now or timezone.now()
    return f"unpooled-release-{corpus.name}-{f'period{int(period)}-' if period is not None else ''}{now:%Y%m%d}"


def write_release_zip(corpus, fileobj: IO[bytes], *, licence: str = DEFAULT_LICENCE, now: datetime | None = None,
                      secret: str | None = None, scope: dict | None = None) -> ReleaseCounts:
    """The release as a zip archive (one folder, :func:`release_name`) written to ``fileobj``."""
    import tempfile

    now = now or timezone.now()
    top = release_name(corpus, now, period=scope["period"] if scope else None)
    with tempfile.TemporaryDirectory(prefix="unpooled-release-") as tmp:
        counts = export_release(corpus, tmp, licence=licence, now=now, secret=secret, scope=scope)
        with zipfile.ZipFile(fileobj, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name in RELEASE_FILES:
                zf.write(Path(tmp) / name, f"{top}/{name}")
    return counts


# ---------------------------------------------------------------------------- README

def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def readme_text(corpus, c: ReleaseCounts, *, licence: str = DEFAULT_LICENCE) -> str:
    """The release's README (``annotation/release_README.md``, a Markdown template) for ``c``."""
    from django.template.loader import render_to_string

    from unpooled import __version__

    n = {k: f"{v:,}" for k, v in asdict(c).items() if isinstance(v, int) and not isinstance(v, bool)}
    incomplete = c.exhaustive_documents - c.exhaustive_complete
    n["incomplete"] = f"{incomplete:,}"
    period = (f"\nThis is the release of **evaluation period {c.period}**: the labels of the instances its "
              "public submissions drew (an instance only private submissions drew is not released), their "
              "verification answers, the gold-control answers given during the period, and "
              "the corpus's exhaustive annotation (the recall sample every period's scores use) with its "
              f"cross-document clustering, as they stood at {c.as_of} (the period's last frozen score): "
              "what the corpus gathered later is left out (the corpus's own release has it).\n"
              if c.period is not None else "")
    return render_to_string("annotation/release_README.md", {
        "corpus": corpus, "c": c, "n": n, "schema": corpus.schema, "version": __version__, "licence": licence,
        "title": corpus.title or corpus.name, "period": period, "correct_share": _pct(c.correct_share),
        "incomplete": incomplete,
        "by_kind": ", ".join(f"{k} {v:,}" for k, v in c.answers_by_kind.items()),
        "backends": ", ".join(f"{k} {v:,}" for k, v in c.annotators_by_backend.items()) or "none",
        "methods": ", ".join(f"{k} {v:,}" for k, v in c.labels_by_method.items()) or "none",
        "pred_rows": "\n".join(f"| `{p}` | {d['labelled']:,} | {d['correct']:,} | {d['exhaustive']:,} |"
                               for p, d in c.predicates.items()) or "| (none) | 0 | 0 | 0 |"})
