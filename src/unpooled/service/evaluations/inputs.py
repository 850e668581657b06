"""What the estimation reads from the database, built from scratch as the core's input.

:func:`offline_data` is the corpus's submissions, labelled draws and exhaustive truth as
:class:`unpooled.core.offline.OfflineData`: the oracle that the incremental :mod:`.scoring` (the one reader of the
service's estimates, the sampling planner's and the breakdowns') is checked against to float round-off
(:func:`.scoring.from_scratch`), and the coverage harness's input.
"""

from __future__ import annotations

from unpooled.core.matching import InstanceRef
from unpooled.core.offline import LabelledDraw, OfflineData, TrueInstance
from unpooled.core.offline import Submission as CoreSubmission
from unpooled.service.annotation.actions import current_labels
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Task
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import RelationInstance, Submission

from .models import Draw
from .policy import LABEL_METHOD


def system_name(sub: Submission) -> str:
    return f"{sub.team.name}/{sub.run_id}"


def exhaustive_truth(corpus: Corpus) -> tuple[list[TrueInstance], int]:
    """True instances of the completely annotated sampled documents, and how many documents that is."""
    schema = corpus.schema.schema()
    inclusion = dict(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("document_id", "inclusion"))
    out: list[TrueInstance] = []
    docs = 0
    for task in (Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.COMPLETE,
                                     document_id__in=list(inclusion)).select_related("document")
                 .order_by("document_id", "id")):
        docs += 1
        ms = task.payload.get("mentions", [])
        seen = set()
        for a, pred, b in task.result.get("relations", []):
            canon, s, o = schema.canonical_arguments(pred, ms[a], ms[b])
            ref = InstanceRef(task.document.doc_id, s["start"], s["end"], canon, o["start"], o["end"])
            if ref.key in seen:
                continue
            seen.add(ref.key)
            out.append(TrueInstance(ref, ref.key, 1.0, inclusion[task.document_id]))
    return out, docs


def offline_data(corpus: Corpus, *, level: str = "instance", label_method: str = LABEL_METHOD
                 ) -> tuple[OfflineData, dict[str, Submission], int]:
    """The corpus's submissions, labelled draws and exhaustive truth as the core's input.

    Labels are the hard majority-vote labels by default (the paper's rule): Dawid–Skene posteriors use one class
    prior for the whole pool, which pulls a system whose precision differs from the pool's
    towards it (measured: +9 points on a system of true precision 0.50 scored beside one of
    1.00, tests/service/test_evaluate.py); ``label_method='dawid-skene'`` uses them anyway.
    """
    subs = list(Submission.objects.filter(corpus=corpus, is_reference=False).select_related("team").order_by("id"))
    core_subs, by_name = [], {}
    for sub in subs:
        rows = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list(
            "document__doc_id", "subject_start", "subject_end", "predicate", "object_start", "object_end", "value",
            "key", "subject_id", "object_id"))
        if not rows:
            continue
        name = system_name(sub)
        by_name[name] = sub
        core_subs.append(CoreSubmission(
            name, "", tuple(InstanceRef(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows),
            tuple(r[7] for r in rows), tuple(str(r[8]) for r in rows),
            tuple(str(r[9]) if r[9] is not None else "=" + (r[6] or "") for r in rows)))
    labels = current_labels(corpus, method=label_method)
    draws = []
    for name, sub in by_name.items():
        for seq, key in Draw.objects.filter(submission=sub, level=level).order_by("seq").values_list("seq", "key"):
            lab = labels.get(key)
            if lab is not None:
                # majority: the hard label (the vote share is not a probability of being correct);
                # Dawid-Skene: the posterior probability
                value = float(lab.probability) if lab.method == "dawid-skene" else float(lab.correct)
                draws.append(LabelledDraw(name, key, value, seq))
    truth, docs = exhaustive_truth(corpus)
    return OfflineData(tuple(core_subs), tuple(draws), tuple(truth), ()), by_name, docs
