"""Evaluate submissions: draw from p_i, ask for the labels not yet in the pool, score everyone jointly.

The estimation is the pure core's (:func:`unpooled.core.offline.score`) on data read from the
database: every submission of the corpus, every draw with a label (soft: the label's
probability of being correct), and the true instances of the exhaustively annotated
documents, each weighted by its document's inclusion probability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from unpooled.core.estimators.sampling import sampling_distribution
from unpooled.core.matching import InstanceRef
from unpooled.core.offline import LabelledDraw, OfflineData, TrueInstance
from unpooled.core.offline import Submission as CoreSubmission
from unpooled.service.annotation.actions import current_labels, labelled_keys, reaggregate, request_verification
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Task
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import RelationInstance, Submission

from . import rates
from .models import Draw, Score
from .periods import freeze_pending, frozen_levels
from .policy import LABEL_METHOD


def system_name(sub: Submission) -> str:
    return f"{sub.team.name}/{sub.run_id}"


def _codes(values) -> np.ndarray:
    index: dict = {}
    return np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64)


def draw(sub: Submission, n: int, *, level: str = "instance", rng=None) -> list[int]:
    """``n`` draws with replacement from the submission's sampling distribution; stored in order.

    Returns the drawn instance ids (repeats included).
    """
    rows = list(RelationInstance.objects.filter(submission=sub).order_by("pk")
                .values_list("pk", "predicate", "subject_id", "object_id", "value", "key", "key_hash"))
    if not rows:
        return []
    p = sampling_distribution(len(rows), level=level, predicate=_codes(r[1] for r in rows),
                              subject=_codes(r[2] for r in rows),
                              fill=_codes((r[2], r[1], r[3] if r[3] is not None else "=" + (r[4] or "")) for r in rows))
    picks = np.random.default_rng(rng).choice(len(rows), size=n, replace=True, p=p)
    with transaction.atomic():
        start = (Draw.objects.filter(submission=sub, level=level).aggregate(m=Max("seq"))["m"] or 0) + 1
        Draw.objects.bulk_create([Draw(submission=sub, level=level, seq=start + j, instance_id=rows[k][0],
                                       key=rows[k][5], key_hash=rows[k][6]) for j, k in enumerate(picks.tolist())])
    return [rows[k][0] for k in picks.tolist()]


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


@dataclass
class EvaluationReport:
    rows: list[dict] = field(default_factory=list)
    rounds: int = 0
    open_tasks: int = 0
    warnings: list[str] = field(default_factory=list)


def label_provenance(corpus: Corpus, level: str) -> dict[int, dict[str, int]]:
    """Per submission, where the labels of its draws at ``level`` come from (one query).

    ``drawn``: distinct instance keys among its draws at the level; ``new``: those whose verification task this
    submission created (and paid for); ``reused``: the other drawn keys that have a label -- labelled before it
    asked, or by a task another submission created (it joined that task).  ``new + reused <= drawn``, and each
    level counts its own draws (a submission drawn at three levels has three sets of counts).
    """
    from django.db.models import Count, Exists, OuterRef, Q

    from unpooled.service.annotation.models import Label, TaskRequest

    paid = TaskRequest.objects.filter(submission_id=OuterRef("submission_id"), committed_cents__gt=0,
                                      task__kind=Kind.VERIFY, task__key_hash=OuterRef("key_hash"),
                                      task__key=OuterRef("key"))
    labelled = Label.objects.filter(corpus=corpus, key_hash=OuterRef("key_hash"), key=OuterRef("key"))
    rows = (Draw.objects.filter(submission__corpus=corpus, level=level)
            .annotate(paid=Exists(paid), labelled=Exists(labelled)).order_by()
            .values("submission_id")
            .annotate(drawn=Count("key", distinct=True), new=Count("key", distinct=True, filter=Q(paid=True)),
                      reused=Count("key", distinct=True, filter=Q(paid=False, labelled=True))))
    return {r["submission_id"]: {"drawn": r["drawn"], "new": r["new"], "reused": r["reused"]} for r in rows}


def score_corpus(corpus: Corpus, *, level: str = "instance", match: str = "overlap",
                 weights: str = "balance") -> list[Score]:
    """Score every submission of the corpus jointly with all labels so far; store one Score each.

    The estimates are :func:`offline_data` + the core's ``score`` with the crowd's answers (the from-scratch
    path), computed incrementally: :mod:`.scoring` keeps the label-free parts in memory and re-reads only what
    changed.  ``details`` keeps the labelled-sample figures (majority labels taken as certain) beside the
    published ones, the crowd's mean rates, and the variance by source.  ``labels_new`` and ``labels_reused``
    (and ``details['provenance']``) are this level's own: :func:`label_provenance`.
    """
    from . import scoring

    got = scoring.score(corpus, level=level, match=match, weights=weights)
    res, by_name, docs = got.result, got.by_name, got.docs
    if res is None:
        return []
    sc = res.scores
    out = []
    prov = label_provenance(corpus, level)
    for i, row in enumerate(res.rows):
        sub = by_name[row.system]
        pv = prov.get(sub.pk, {"drawn": 0, "new": 0, "reused": 0})
        new, reused = pv["new"], pv["reused"]

        def num(x):
            # the joint estimator is unbiased but not self-normalised: a point estimate can leave [0, 1]
            # by a little; what is published is clipped (the raw value is kept in details)
            return None if x is None or math.isnan(x) else min(1.0, max(0.0, float(x)))

        out.append(Score(
            submission=sub, level=level, estimator=f"joint/{weights}/{match}",
            p=num(row.p), p_lo=num(row.p_lo), p_hi=num(row.p_hi), r=num(row.r), r_lo=num(row.r_lo), r_hi=num(row.r_hi),
            f1=num(row.f1), f1_lo=num(row.f1_lo), f1_hi=num(row.f1_hi), draws=row.labels, labels_new=new,
            labels_reused=reused, exhaustive_documents=docs,
            details={"ess": row.ess, "warnings": list(row.warnings) + list(res.warnings), "provenance": pv,
                     "raw": {"p": row.p, "r": row.r, "f1": row.f1}, **_crowd_details(sc, i)}))
    # a submission of a closed period keeps the score it was frozen with (periods.py): its draws and labels still
    # take part in the others' joint estimates above, but no new score of its own is written
    frozen = frozen_levels(corpus)
    out = [s for s in out if (s.submission.pk, level) not in frozen]
    with transaction.atomic():
        made = Score.objects.bulk_create(out)
        freeze_pending(corpus)  # published submissions of a closed period not frozen yet
    return made


def _crowd_details(sc, i: int) -> dict:
    """The labelled-sample figures, the crowd's rates and the variance by source of system ``i``, when the
    scores come from the crowd's votes."""
    if sc.raw is None:
        return {}

    def num(x):
        x = float(x)
        return None if math.isnan(x) else x

    return {"sample": {k: num(v[i]) for k, v in sc.raw.items()},
            "crowd_rates": {k: num(v) for k, v in sc.rates.items()},
            "variance": {src: {k: num(v[i]) for k, v in parts.items()} for src, parts in sc.var_parts.items()}}


def _content_key(sub: Submission, level: str) -> int:
    """A 62-bit digest of what identifies ``sub`` whatever its id (its file's digest, its team and run) and the
    ``level`` of its draws."""
    import hashlib

    text = "\0".join((sub.file_sha256, sub.team.name, sub.run_id, level))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") >> 2


def evaluate(corpus: Corpus, *, crowd=None, labels: int = 150, documents: int = 40, target_width: float | None = None,
             level: str = "instance", max_labels: int = 1000, step: int = 50, seed: int = 0,
             progress=None) -> EvaluationReport:
    """Run every pending submission (no score yet) to a score and re-score every submission.

    ``crowd`` is a backend (:mod:`unpooled.service.crowd.base`); the simulated one answers at
    once, the others leave tasks open (their labels count once they arrive).  With
    ``target_width``, pending submissions draw ``step`` more labels per round until their
    F1 interval is at most that wide (or ``max_labels`` draws).
    """
    from unpooled.service.annotation.sampling import sample_documents

    report = EvaluationReport()
    if not ExhaustiveDocument.objects.filter(corpus=corpus).exists() and documents:
        sample_documents(corpus, "uniform", min(documents, corpus.n_documents), seed=seed)
    # in an order of their contents, each drawn from a seed of its own contents: the numbers do not depend on the
    # order the files were uploaded in (nor on their ids)
    pending = sorted((s for s in Submission.objects.filter(corpus=corpus, is_reference=False).select_related("team")
                      if not s.scores.filter(level=level).exists() and s.instances.exists()),
                     key=lambda s: (s.file_sha256, s.team.name, s.run_id, s.pk))
    reuse: dict[int, list[int]] = {s.pk: [0, 0] for s in pending}
    queued = timezone.now()  # one batch: its tasks queue in the order they are made, not the uploads'

    def ask(sub, target):
        # up to ``target`` draws, and verification of every drawn key not asked for yet: a run again after a crash
        # (or of a submission whose earlier run stopped) draws and asks only what is missing
        have = Draw.objects.filter(submission=sub, level=level).count()
        if have < target:
            draw(sub, target - have, level=level, rng=np.random.default_rng([seed, _content_key(sub, level), have]))
        ids = _not_asked(sub, level)
        if not ids:
            return
        res = request_verification(sub, ids, weak_relations=rates.weak_relations(corpus), priority=queued)
        reuse[sub.pk][0] += res.created
        reuse[sub.pk][1] += res.reused + res.joined

    def answer():
        from .lifecycle import ask_more_answers, quiet

        with quiet():  # this run scores by itself: no separate re-scoring per label batch
            for _ in range(10):  # the answers may show relations the crowd judges weakly: more answers on those
                if crowd is not None:
                    crowd.publish(corpus)
                    crowd.collect(corpus)
                reaggregate(corpus)
                if not [sub for sub in pending if ask_more_answers(sub)]:
                    break

    for sub in pending:
        ask(sub, labels)
    answer()
    report.rounds = 1
    scores = score_corpus(corpus, level=level)
    while target_width is not None and report.rounds < 50:
        wide = [s.submission for s in scores if s.submission_id in reuse
                and (s.f1_lo is None or s.f1_hi is None or s.f1_hi - s.f1_lo > target_width)
                and Draw.objects.filter(submission_id=s.submission_id, level=level).count() < max_labels]
        if not wide:
            break
        for sub in wide:
            ask(sub, Draw.objects.filter(submission=sub, level=level).count() + step)
        answer()
        report.rounds += 1
        Score.objects.filter(pk__in=[s.pk for s in scores]).delete()  # superseded within this run
        scores = score_corpus(corpus, level=level)
    report.open_tasks = Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False).count()
    if report.open_tasks:
        report.warnings.append(f"{report.open_tasks} annotation tasks are still open: the scores use the labels "
                               "received so far")
    report.rows = [leaderboard_row(s) for s in sorted(scores, key=lambda s: -(s.f1 or 0))]
    _finish(corpus, level, pending, reuse, scores, publish=not report.open_tasks)
    return report


def _finish(corpus: Corpus, level: str, pending, reuse: dict, scores, *, publish: bool) -> None:
    """After :func:`evaluate`'s last scores: each pending submission keeps its label counts (later re-scorings
    report them too), the breakdowns and entity scores are computed, and, when every label is in (``publish``),
    the scored submissions are published."""
    from .lifecycle import breakdowns, entities, set_status

    for sub in pending:
        plan = dict(sub.plan or {})
        plan["labels"] = {**(plan.get("labels") or {}), "new": reuse[sub.pk][0], "reused": reuse[sub.pk][1]}
        Submission.objects.filter(pk=sub.pk).update(plan=plan)
    breakdowns(corpus, level)
    entities(corpus)
    if publish:  # the scores are final
        for sub in Submission.objects.filter(pk__in=[s.submission_id for s in scores]).exclude(
                status__in=[Submission.Status.FAILED, Submission.Status.PUBLISHED]).select_related("corpus"):
            set_status(sub, Submission.Status.PUBLISHED)


def _not_asked(sub: Submission, level: str) -> list[int]:
    """The instances drawn for ``sub`` at ``level`` whose key has no label and no task ``sub`` asked for."""
    from unpooled.service.annotation.models import TaskRequest

    asked = set(TaskRequest.objects.filter(submission=sub, task__kind=Kind.VERIFY).values_list("task__key", flat=True))
    rows = list(Draw.objects.filter(submission=sub, level=level).values_list("instance_id", "key", "key_hash"))
    labelled = labelled_keys(sub.corpus, [h for _, _, h in rows])  # by hash, in chunks
    return sorted({i for i, key, h in rows if key not in asked and h not in labelled})


def leaderboard_row(s: Score) -> dict:
    sub = s.submission
    return {"submission": sub.pk, "team": sub.team.name, "run": sub.run_id, "level": s.level,
            "p": s.p, "p_lo": s.p_lo, "p_hi": s.p_hi, "r": s.r, "r_lo": s.r_lo, "r_hi": s.r_hi,
            "f1": s.f1, "f1_lo": s.f1_lo, "f1_hi": s.f1_hi, "labels_new": s.labels_new,
            "labels_reused": s.labels_reused, "draws": s.draws, "exhaustive_documents": s.exhaustive_documents,
            "estimator": s.estimator, "warnings": s.details.get("warnings", [])}


def true_precision(corpus: Corpus, submission_id: int, *, level: str = "instance") -> float:
    """The submission's true precision from the gold layer (demo and checks only): :mod:`.truth`."""
    from .truth import true_precision as _true_precision

    return _true_precision(corpus, submission_id, level=level)
