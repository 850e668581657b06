"""The human reference: the corpus's exhaustive annotation scored as a submission of its own (seed 002: "the
evaluation should allow comparisons against human effort").

:func:`build` turns the completely annotated sampled documents (their aggregated mentions, clusters, links and
relations: :func:`~unpooled.service.evaluations.inputs.exhaustive_truth`'s source) into a flagged submission
(``is_reference``) of the reserved team :data:`~unpooled.service.submissions.models.REFERENCE_TEAM`, rebuilt when
the annotation changes.  It is no team's run: it takes no rank on the leaderboard (a marked row), counts against
no quota and belongs to no period.

**Precision** comes from a uniform sample of its instances (:data:`PRECISION_DRAWS` draws, level ``instance``)
verified like any system's -- by annotators other than those who made it: a verification item the reference asks
for is never routed to an annotator who answered that document's exhaustive tasks
(:func:`unpooled.service.annotation.leasing.not_own_exhaustive`), and such an annotator's answers to an open item
it joins are discounted.  (A key already labelled before the reference asked, for a system, keeps its label.)

Its instances are nearly all correct, so the crowd's error rates behind that precision must be anchored by gold
controls: the items alone do not identify them (:func:`unpooled.core.annotation.confusion.control_mismatch`), and
without controls the interval is wide (a warning in the score's details).  ``unpooled simulate reference``
measures the interval beside a system's of as many draws.

**Recall** cannot come from the exhaustive sample (it *is* that sample: recall 1 by construction).  It comes from
the systems' instances in the same documents, within one sentence (the protocol's support), verified by the
crowd: the share of the correct ones the reference finds (:mod:`unpooled.core.estimators.reference`, a
capture--recapture estimate; the estimators and intervals are the core's, the service only reads the data).  At
most :data:`RECALL_SAMPLE` of them are verified, a uniform sample fixed by a hash of their keys.

**Why it stays out of the systems' pool** (scoring.py leaves ``is_reference`` submissions out): its instances
*are* the exhaustive truth.  In the pool its draws would enter every system's pooled recall
:math:`\\hat\\nu_i` as instances already certain to be in :math:`\\hat Y_0`, tying the two recall factors
(:math:`\\hat\\theta_i` and :math:`\\hat\\nu_i`) together, and its heavy overlap with the truth would make the
mixture proposals of the systems' precision lean on labels drawn for a reason unrelated to any system (unbiased,
but their variance and the systems' label budgets would then depend on when the exhaustive annotation finished).
Kept out, the systems' scores are exactly what they were without it; the reference's labels still join the label
pool, where they are reused by key like any label.
"""

from __future__ import annotations

import hashlib
import logging
import math
from bisect import bisect_right

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from unpooled.core.estimators.reference import f1_independent, found_by_reference, recall_by_capture
from unpooled.core.estimators.results import Estimate
from unpooled.core.kb.model import KB, Entity, Instance, Mention
from unpooled.core.matching import InstanceRef
from unpooled.core.offline import LabelledDraw, OfflineData
from unpooled.core.offline import Submission as CoreSubmission
from unpooled.core.offline import score as offline_score
from unpooled.service.annotation.actions import current_labels, request_verification
from unpooled.service.annotation.models import Answer, ExhaustiveDocument, Kind, Task
from unpooled.service.corpora.corpus_view import DbCorpusView
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.actions import store_kb
from unpooled.service.submissions.models import (
    REFERENCE_TEAM,
    RelationInstance,
    Submission,
    SubmissionMention,
    Team,
)

from . import rates
from .models import Draw, Score
from .policy import CONFIDENCE, LABEL_METHOD

log = logging.getLogger(__name__)

REFERENCE_RUN = "exhaustive-annotation"
#: draws from the reference's instances for its precision
PRECISION_DRAWS = 200
#: most system instances of the exhaustive documents verified for its recall
RECALL_SAMPLE = 400
ESTIMATOR = "reference/capture"


def reference_of(corpus: Corpus) -> Submission | None:
    return Submission.objects.filter(corpus=corpus, is_reference=True).first()


def _complete_documents(corpus: Corpus) -> dict[int, float]:
    """Document pk -> inclusion probability, of the sampled documents whose relations are annotated."""
    inclusion = dict(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("document_id", "inclusion"))
    done = Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.COMPLETE,
                               document_id__in=list(inclusion)).values_list("document_id", flat=True)
    return {d: inclusion[d] for d in done}


def exhaustive_kb(corpus: Corpus) -> KB:
    """The exhaustive annotation of the completely annotated sampled documents as a knowledge base: one entity
    per annotated cluster of a document, its mentions, its relations in canonical direction (once per key)."""
    schema = corpus.schema.schema()
    kb = KB(run_id=REFERENCE_RUN, format="exhaustive")
    docs = _complete_documents(corpus)
    for task in (Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", document_id__in=list(docs))
                 .select_related("document").order_by("document__doc_id")):
        doc = task.document.doc_id
        ms = task.payload.get("mentions", [])

        def name(m):
            return f"{doc}#{m['cluster']}"

        for m in ms:
            first = name(m) not in kb.entities  # a cluster's first mention is its canonical one
            if first:
                kb.entities[name(m)] = Entity(name(m), m.get("type"), [m["link"]] if m.get("link") else [])
            kb.mentions.append(Mention(name(m), doc, m["start"], m["end"], canonical=first))
        seen = set()
        for a, pred, b in (task.result or {}).get("relations", []):
            canon, s, o = schema.canonical_arguments(pred, ms[a], ms[b])
            inst = Instance(doc, name(s), s["start"], s["end"], canon, name(o), o["start"], o["end"], None,
                            ((min(s["start"], o["start"]), max(s["end"], o["end"])),))
            if inst.key not in seen:
                seen.add(inst.key)
                kb.instances.append(inst)
    return kb


def build(corpus: Corpus) -> Submission | None:
    """The corpus's reference submission, (re)built from the exhaustive annotation when it changed; None while no
    sampled document is completely annotated."""
    kb = exhaustive_kb(corpus)
    old = reference_of(corpus)
    if not kb.instances and not kb.mentions:
        return old
    digest = hashlib.sha256("\n".join(sorted(i.key for i in kb.instances)).encode()
                            + "\n".join(sorted(f"{m.doc}:{m.start}:{m.end}:{m.entity}" for m in kb.mentions)).encode()
                            ).hexdigest()
    if old is not None and old.file_sha256 == digest:
        return old
    with transaction.atomic():
        if old is not None:
            old.delete()  # its draws, scores and requests go with it; the labels stay in the pool
        team, _ = Team.objects.get_or_create(name=REFERENCE_TEAM)
        sub = Submission.objects.create(
            corpus=corpus, team=team, run_id=REFERENCE_RUN, format="exhaustive", is_reference=True,
            file_name="the exhaustive annotation", file_sha256=digest, counts=kb.counts(),
            status=Submission.Status.INGESTED, status_changed=timezone.now(),
            description="the human reference: the exhaustive annotation of the sampled documents, scored as a "
                        "submission (precision from other annotators' verification, recall from the systems' "
                        "verified instances in the same documents)")
        store_kb(sub, kb, DbCorpusView(corpus))
    return sub


# ---------------------------------------------------------------------------- the recall sample

def _sentence_of(sentences, doc: str, start: int) -> int:
    got = sentences.get(doc)
    if not got:
        return 0
    return bisect_right(got[0], start) - 1


def recall_candidates(corpus: Corpus, ref: Submission) -> list[dict]:
    """The recall sample: distinct system instances (keys) in the reference's documents with both arguments in
    one sentence, at most :data:`RECALL_SAMPLE` (the smallest hashes of their keys: a uniform sample that stays
    put as systems arrive), each with whether the reference finds it."""
    from unpooled.core.estimators.exhaustive import within_sentence

    docs = list(_complete_documents(corpus))
    sentences = rates.sentences(corpus)
    rows = (RelationInstance.objects.filter(submission__corpus=corpus, submission__is_reference=False,
                                            document_id__in=docs).order_by("pk")
            .values_list("pk", "key", "document__doc_id", "subject_start", "subject_end", "predicate",
                         "object_start", "object_end", "value"))
    by_key: dict[str, tuple] = {}
    for r in rows.iterator(chunk_size=5000):
        if r[1] not in by_key and within_sentence(InstanceRef(r[2], r[3], r[4], r[5], r[6], r[7], r[8]), sentences):
            by_key[r[1]] = r
    order = sorted(by_key, key=lambda k: hashlib.blake2b(f"{corpus.pk}:{k}".encode(), digest_size=8).digest())
    chosen = [by_key[k] for k in order[:RECALL_SAMPLE]]
    # the reference's facts: (doc, sentence, predicate, subject entity, object entity); its mentions per document
    facts = [(d, _sentence_of(sentences, d, ss), p, s, o) for d, ss, p, s, o in RelationInstance.objects.filter(
        submission=ref).order_by("pk").values_list("document__doc_id", "subject_start", "predicate", "subject_id", "object_id")]
    mentions: dict[str, list] = {}
    for d, st, en, ent in SubmissionMention.objects.filter(submission=ref).order_by("pk").values_list(
            "document__doc_id", "start", "end", "entity_id"):
        mentions.setdefault(d, []).append((st, en, ent))

    def ents(doc, start, end):
        return {e for s, t, e in mentions.get(doc, ()) if s < end and start < t}

    cands = [(r[2], _sentence_of(sentences, r[2], r[3]), r[5], ents(r[2], r[3], r[4]), ents(r[2], r[6], r[7]))
             for r in chosen]
    found = found_by_reference(facts, cands)
    return [{"pk": r[0], "key": r[1], "found": bool(f)} for r, f in zip(chosen, found.tolist())]


# ---------------------------------------------------------------------------- requests and scores

def request(corpus: Corpus, *, draws: int = PRECISION_DRAWS, rng=None) -> dict:
    """Build the reference, draw its precision sample and ask for the labels of both samples.  Returns counts."""
    from .draws import draw

    ref = build(corpus)
    if ref is None or not ref.instances.exists():
        return {"reference": None}
    have = Draw.objects.filter(submission=ref, level="instance").count()
    if have < draws:
        draw(ref, draws - have, level="instance", rng=rng)
    ids = sorted(set(Draw.objects.filter(submission=ref).values_list("instance_id", flat=True)))
    own = request_verification(ref, ids)
    cands = recall_candidates(corpus, ref)
    other = request_verification(ref, [c["pk"] for c in cands], of_corpus=True)
    # an open item the reference joined: answers by the document's exhaustive annotators no longer count
    made = Answer.objects.filter(annotator_id=OuterRef("annotator_id"), task__kind__in=[Kind.ENTITIES, Kind.RELATIONS],
                                 task__document_id=OuterRef("task__document_id"))
    Answer.objects.filter(task__requests__submission=ref, task__status=Task.Status.OPEN, weight__gt=0).filter(
        Exists(made)).update(weight=0.0)
    Submission.objects.filter(pk=ref.pk).update(status=Submission.Status.ANNOTATING, status_changed=timezone.now())
    return {"reference": ref.pk, "draws": len(ids), "recall_sample": len(cands),
            "tasks_created": own.created + other.created, "labels_reused": own.reused + other.reused}


def estimate(corpus: Corpus, ref: Submission | None = None) -> dict | None:
    """The reference's P, R, F1 with intervals from the labels so far (the core's estimators); None without one."""
    ref = ref or reference_of(corpus)
    if ref is None:
        return None
    labels = current_labels(corpus, method=LABEL_METHOD)
    rows = list(RelationInstance.objects.filter(submission=ref).order_by("pk").values_list(
        "document__doc_id", "subject_start", "subject_end", "predicate", "object_start", "object_end", "value",
        "key", "subject_id", "object_id"))
    cands = recall_candidates(corpus, ref)
    cand_rows = {r[0]: r for r in RelationInstance.objects.filter(pk__in=[c["pk"] for c in cands]).values_list(
        "pk", "document__doc_id", "subject_start", "subject_end", "predicate", "object_start", "object_end", "value",
        "key", "subject_id", "object_id")}

    def core_sub(name, rs):
        return CoreSubmission(name, "", tuple(InstanceRef(*r[:7]) for r in rs), tuple(r[7] for r in rs),
                              tuple(str(r[8]) for r in rs),
                              tuple(str(r[9]) if r[9] is not None else "=" + (r[6] or "") for r in rs))

    groups = {"human": rows,
              "sample:found": [cand_rows[c["pk"]][1:] for c in cands if c["found"]],
              "sample:missed": [cand_rows[c["pk"]][1:] for c in cands if not c["found"]]}
    subs = tuple(core_sub(n, rs) for n, rs in groups.items() if rs)
    draws = []

    def add(name, keys):
        for seq, key in enumerate(keys, 1):
            lab = labels.get(key)
            if lab is not None:
                draws.append(LabelledDraw(name, key, float(lab.correct), seq))

    add("human", Draw.objects.filter(submission=ref, level="instance").order_by("seq").values_list("key", flat=True))
    for name in ("sample:found", "sample:missed"):
        add(name, [r[7] for r in groups[name]])
    labelled = {d.system for d in draws}
    subs = tuple(s for s in subs if s.name in labelled)
    nan = Estimate.undefined("no verified draw yet", "simple", CONFIDENCE)
    p = {"human": nan}
    n_labels = {}
    if subs:
        res = offline_score(OfflineData(subs, tuple(draws), (), ()), level="instance", estimator="simple",
                            corrected_labels=True, confidence=CONFIDENCE, votes=rates.keyed_answers(corpus))
        precision = res.scores.p
        for i, row in enumerate(res.rows):
            p[row.system] = precision[i]
            n_labels[row.system] = row.labels
    n1, n0 = len(groups["sample:found"]), len(groups["sample:missed"])
    pf, pm = p.get("sample:found", nan), p.get("sample:missed", nan)
    r = recall_by_capture(n1, pf.value, pf.se, n0, pm.value, pm.se, confidence=CONFIDENCE,
                          labelled_found=n_labels.get("sample:found", 0), labelled_missed=n_labels.get("sample:missed", 0))
    f1 = f1_independent(p["human"], r)
    return {"p": p["human"], "r": r, "f1": f1, "draws": n_labels.get("human", 0), "documents": len(
        _complete_documents(corpus)), "sample": {"found": n1, "missed": n0, "p_found": pf.to_dict(),
                                                 "p_missed": pm.to_dict(),
                                                 "labelled": {k: v for k, v in n_labels.items() if k != "human"}}}


def score(corpus: Corpus) -> Score | None:
    """Store the reference's newest score (and, with a gold layer, its truth); publish it once every label it asked
    for is in."""
    ref = reference_of(corpus)
    if ref is None:
        return None
    got = estimate(corpus, ref)

    def num(x):
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)

    e = {k: got[k] for k in ("p", "r", "f1")}
    details = {"sample": got["sample"], "method": (
        "precision: a uniform sample of the reference's instances verified by annotators other than its makers; "
        "recall: the share of the systems' verified instances in the same documents (within one sentence) it "
        "finds (unpooled.core.estimators.reference); 90% intervals"), "warnings": []}
    conf = rates.confusions(corpus)
    if conf is not None and conf.source == "dawid-skene":
        details["warnings"].append(
            "no gold controls of both classes answered: the crowd's error rates come from Dawid-Skene on items "
            "nearly all correct, which hardly identifies them, so the precision interval is wide (gold controls "
            "anchor them: unpooled annotate controls)")
    if got["sample"]["found"] + got["sample"]["missed"] == 0:
        details["warnings"].append("no system instance in the exhaustively annotated documents yet: recall needs "
                                   "some to be verified")
    if corpus.has_gold:
        from .truth import covered, protocol_gold, true_scores

        ts = true_scores(corpus, ref, level="instance", gold=protocol_gold(corpus, documents=list(
            _complete_documents(corpus))))
        details["truth"] = {**ts.to_dict(), "covered": {k: covered(getattr(ts, k), num(e[k].lo), num(e[k].hi))
                                                        for k in ("p", "r", "f1")},
                            "definition": "unpooled.service.evaluations.truth over the exhaustively annotated "
                                          "documents only (the reference annotates no other)"}
    s = Score.objects.create(
        submission=ref, level="instance", estimator=ESTIMATOR, p=num(e["p"].value), p_lo=num(e["p"].lo),
        p_hi=num(e["p"].hi), r=num(e["r"].value), r_lo=num(e["r"].lo), r_hi=num(e["r"].hi), f1=num(e["f1"].value),
        f1_lo=num(e["f1"].lo), f1_hi=num(e["f1"].hi), draws=got["draws"], exhaustive_documents=got["documents"],
        details=details)
    pending = Task.objects.filter(requests__submission=ref, status=Task.Status.OPEN).exists()
    if not pending and ref.status != Submission.Status.PUBLISHED:
        Submission.objects.filter(pk=ref.pk).update(status=Submission.Status.PUBLISHED, status_changed=timezone.now())
    return s


def on_labels(corpus: Corpus) -> Score | None:
    """After a label batch (:func:`unpooled.service.evaluations.tasks.on_labels`): re-score the reference."""
    try:
        return score(corpus)
    except Exception:  # noqa: BLE001 - the systems' scores stand without the reference's
        log.exception("human reference of %s: scoring failed", corpus.name)
        return None


__all__ = ["PRECISION_DRAWS", "RECALL_SAMPLE", "build", "estimate", "exhaustive_kb", "recall_candidates",
           "reference_of", "request", "score"]
