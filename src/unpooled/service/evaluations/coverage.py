r"""Coverage of the published intervals: the evaluation pipeline re-run over many seeds against the truth.

``unpooled evaluate --corpus NAME --coverage-trials N`` (corpus with a gold layer) runs, per
trial and inside a transaction that is rolled back (the database is left as it was; the
corpus's earlier draws, tasks, labels and scores are set aside for the trial):

1. :func:`~unpooled.service.evaluations.actions.evaluate` itself -- draws from each
   :math:`p_i`, verification requests with label reuse, a uniform document sample for exhaustive
   annotation, the crowd, majority labels, :func:`~.actions.score_corpus` -- with
   :class:`BulkSimulatedCrowd` as the crowd;
2. the scores of every compared method (:func:`method_name`: label correction, recall treatment,
   interval) from the same answers;
3. whether each interval holds the truth (:func:`unpooled.service.evaluations.truth.true_scores`).

:class:`BulkSimulatedCrowd` answers as :class:`unpooled.service.crowd.simulated.SimulatedCrowd` does
(its answer code, so the same per-answer accuracy; gold controls before an item with probability
``control_share`` per lease; blocking by the service's rule) and completes each task through the
service's aggregation (:func:`unpooled.service.annotation.actions.complete_task`).  It skips the
lease queue, which took ~90 % of a trial's time: each item's *k* annotators are a uniformly random
set of distinct annotators instead of whoever the queue's rounds (random order each round) hand it
to.  With it, a trial on Re-DocRED dev (two systems, 300 draws each, 30 documents) takes ~30 s.
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass, field

import numpy as np
from django.db import transaction
from django.utils import timezone

from .correction import INTERVALS, error_rates, score_data, sentence_index, verify_answers

#: compared label corrections (None: plain majority labels) and recall treatments; every one is scored
#: with each interval of :data:`~.correction.INTERVALS`, with and without the error rates' variance
SOURCES: tuple = (None, "dawid-skene", "controls", "semi")
RECALL_FIXES: tuple = (False, True)
METRICS = ("p", "r", "f1")


class BulkSimulatedCrowd:
    """A simulated crowd backend that answers every open task at once (see the module docs)."""

    name = "simulated"

    def __init__(self, *, annotators: int = 5, accuracy: float = 0.8, bias: float = 0.0, seed: int = 0,
                 control_share: float | None = None) -> None:
        self.annotators, self.accuracy, self.bias = annotators, accuracy, bias
        self.rng = np.random.default_rng(seed)
        self.control_share = control_share
        self.answers = 0

    def publish(self, corpus) -> dict:
        return {}

    def collect(self, corpus) -> dict:
        from unpooled.core.annotation import answers as fmt
        from unpooled.service.annotation.actions import (
            _score_control, complete_task, settings_for,
        )
        from unpooled.service.annotation.models import Answer, Assignment, Kind, Task
        from unpooled.service.crowd.simulated import SimulatedCrowd

        crowd = SimulatedCrowd.uniform(corpus, self.annotators, accuracy=self.accuracy, bias=self.bias, rng=self.rng)
        st = settings_for(corpus)
        share = st.control_share if self.control_share is None else self.control_share
        controls = list(Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=True, status=Task.Status.OPEN)
                        .order_by("id"))
        seen = {a.pk: set(Assignment.objects.filter(annotator=a).values_list("task_id", flat=True))
                for a in crowd.annotators}
        now = timezone.now()
        before = self.answers

        def give(i: int, task) -> None:
            ann, w = crowd.annotators[i], crowd.workers[i]
            value = crowd.answer(w, task)
            a = Assignment.objects.create(task=task, annotator=ann, token=secrets.token_urlsafe(24), leased=now,
                                          expires=now, status=Assignment.Status.SUBMITTED)
            ans = Answer.objects.create(
                assignment=a, task=task, annotator=ann, value=value,
                correct=fmt.verify_correct(value) if task.kind == Kind.VERIFY else None, weight=1.0,
                seconds=float(self.rng.lognormal(np.log(w.latency), 0.5)), cost_cents=st.reward_cents(task.kind),
                guideline_version=task.guideline_version)
            seen[ann.pk].add(task.pk)
            self.answers += 1
            if task.is_control:
                _score_control(ann, task, ans, st, now)

        while True:
            tasks = list(Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False)
                         .order_by("priority", "id"))
            if not tasks:
                break
            progressed = False
            for task in tasks:
                have = task.answers.filter(weight__gt=0).count()
                free = [i for i, a in enumerate(crowd.annotators) if not a.blocked and task.pk not in seen[a.pk]]
                need = max(0, task.answers_needed - have)
                if len(free) < need:
                    continue
                for i in self.rng.permutation(free)[:need].tolist():
                    ann = crowd.annotators[i]
                    # a lease is a control with probability `share` (while unseen controls remain)
                    while share > 0 and self.rng.random() < share:
                        c = next((c for c in controls if c.pk not in seen[ann.pk]), None)
                        if c is None:
                            break
                        give(i, c)
                        ann.refresh_from_db(fields=["blocked"])
                        if ann.blocked:
                            break
                    if ann.blocked:
                        break
                    give(i, task)
                    progressed = True
                task.refresh_from_db()
                if task.status == Task.Status.OPEN and task.answers.filter(weight__gt=0).count() >= task.answers_needed:
                    complete_task(task)
            if not progressed:
                break
        return {"answers": self.answers - before}


def reset_evaluation_state(corpus) -> None:
    """Delete the corpus's draws, scores, tasks, labels and exhaustive sample (callers roll back)."""
    from unpooled.service.annotation.models import Annotator, ExhaustiveDocument, Label, Task

    from .models import Draw, Score

    Score.objects.filter(submission__corpus=corpus).delete()
    Draw.objects.filter(submission__corpus=corpus).delete()
    Label.objects.filter(corpus=corpus).delete()
    Task.objects.filter(corpus=corpus).delete()
    ExhaustiveDocument.objects.filter(corpus=corpus).delete()
    Annotator.objects.filter(backend="simulated").update(blocked=False, controls_answered=0, controls_correct=0)


class _Rollback(Exception):
    pass


def hard_labels(corpus, data) -> np.ndarray:
    """The majority label of each draw of ``data`` (in order)."""
    from unpooled.service.annotation.actions import current_labels

    labels = current_labels(corpus, method="majority")
    return np.array([float(labels[d.key].correct) for d in data.labels])


def method_name(source: str | None, recall: bool, kind: str, rates: bool) -> str:
    return f"{source or 'none'}{'+recall' if recall else ''}/{kind}{'+rates' if rates else ''}"


@dataclass
class TrialInputs:
    """What every method scores from: the draws, their hard labels, the answers, the exhaustive truth."""

    data: object                 # unpooled.core.offline.OfflineData (labels as score_corpus corrected them)
    y: np.ndarray                # hard majority label of each draw of data.labels
    answers: object              # correction.VerifyAnswers
    documents: int               # exhaustively annotated documents
    sentences: dict              # correction.sentence_index
    level: str = "instance"


def trial_inputs(corpus, *, level: str = "instance", sentences=None) -> TrialInputs | None:
    from .actions import offline_data

    data, _, docs = offline_data(corpus, level=level)
    if not data.submissions:
        return None
    return TrialInputs(data, hard_labels(corpus, data), verify_answers(corpus), docs,
                       sentences if sentences is not None else sentence_index(corpus), level)


def method_estimates(inputs: TrialInputs, *, sources=SOURCES, recall_fixes=RECALL_FIXES, kinds=INTERVALS,
                     replicates: int = 100, seed: int = 0) -> dict[str, dict[str, dict]]:
    """Scores of every system under each method (:func:`method_name`) from one trial's inputs.

    Returns ``{method: {system: row}}`` (rows of :meth:`~.correction.Estimates.row`).
    """
    data, y = inputs.data, inputs.y
    out: dict[str, dict[str, dict]] = {}
    for source in sources:
        if source is None:
            rates = _NoCorrection(data)
        else:
            rates = error_rates(None, source=source, replicates=replicates, rng=seed, answers=inputs.answers)
            if rates is None:
                continue
        for recall in recall_fixes:
            est = score_data(data, y=y, rates=rates, level=inputs.level,
                             sentences=inputs.sentences if recall else None, cluster_docs=recall,
                             documents=inputs.documents)
            for kind in kinds:
                for with_rates in ((False, True) if source else (False,)):
                    name = method_name(source, recall, kind, with_rates)
                    out[name] = {s: est.row(i, kind, rates=with_rates) for i, s in enumerate(est.systems)}
    return out


class _NoCorrection:
    """Rates that leave every label as it is."""

    def __init__(self, data) -> None:
        self.keys = sorted({d.key for d in data.labels})
        self.t = np.ones(len(self.keys))
        self.f = np.zeros(len(self.keys))
        self.min_gap = 0.0
        self.t_rep = None
        self.f_rep = None


@dataclass
class CoverageReport:
    """Per method, system and metric: how often the interval held the truth, the mean error and width."""

    trials: int
    truth: dict                                   # system -> {p, r, f1}
    hits: dict = field(default_factory=dict)      # (method, system, metric) -> list of bool
    errors: dict = field(default_factory=dict)    # ... -> list of estimate - truth
    widths: dict = field(default_factory=dict)    # ... -> list of hi - lo
    seconds: float = 0.0
    settings: dict = field(default_factory=dict)

    def add(self, method: str, system: str, row: dict) -> None:
        for k in METRICS:
            truth = self.truth[system][k]
            key = (method, system, k)
            lo, hi, est = row[f"{k}_lo"], row[f"{k}_hi"], row[k]
            if any(v is None or math.isnan(v) for v in (lo, hi, est, truth)):
                continue
            self.hits.setdefault(key, []).append(lo <= truth <= hi)
            self.errors.setdefault(key, []).append(est - truth)
            self.widths.setdefault(key, []).append(hi - lo)

    def table(self) -> list[dict]:
        rows = []
        for (method, system, metric), hits in self.hits.items():
            e = np.array(self.errors[(method, system, metric)])
            n = len(hits)
            rows.append({"method": method, "system": system, "metric": metric, "trials": n,
                         "truth": self.truth[system][metric], "coverage": float(np.mean(hits)),
                         "bias": float(e.mean()), "bias_se": float(e.std(ddof=1) / math.sqrt(n)) if n > 1 else None,
                         "rmse": float(np.sqrt((e ** 2).mean())),
                         "width": float(np.mean(self.widths[(method, system, metric)]))})
        return rows

    def summary(self) -> dict[str, tuple[int, int]]:
        """Per method: (pairs whose coverage is at least 80 %, pairs)."""
        out: dict[str, list[int]] = {}
        for r in self.table():
            got = out.setdefault(r["method"], [0, 0])
            got[0] += r["coverage"] >= 0.8
            got[1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}


def run_coverage(corpus, trials: int, *, accuracy: float = 0.8, annotators: int = 5, labels: int = 300,
                 documents: int = 30, controls: int = 100, control_share: float = 0.1, replicates: int = 100,
                 seed: int = 0, level: str = "instance", sources=SOURCES, recall_fixes=RECALL_FIXES,
                 kinds=INTERVALS, keep=None, progress=None) -> CoverageReport:
    """``trials`` runs of the pipeline with seeds ``seed .. seed + trials - 1`` (module docs).

    ``keep(seed, inputs, rows)``, if given, receives each trial's :class:`TrialInputs` and the
    stored leaderboard rows (to save them and compare methods later without re-running).

    The method ``current`` is the scoring path as it is (the stored scores of the run).
    ``controls`` gold controls are created per trial (:func:`create_verify_controls`) and
    offered with probability ``control_share`` per lease.
    """
    from unpooled.service.annotation.actions import create_verify_controls, settings_for

    from .actions import evaluate, system_name
    from .truth import true_scores_all

    t0 = time.time()
    truth_by_pk = true_scores_all(corpus, level=level)
    from unpooled.service.submissions.models import Submission

    names = {s.pk: system_name(s) for s in Submission.objects.filter(pk__in=list(truth_by_pk)).select_related("team")}
    truth = {names[pk]: {"p": ts.p, "r": ts.r, "f1": ts.f1} for pk, ts in truth_by_pk.items()}
    report = CoverageReport(trials, truth, settings={
        "accuracy": accuracy, "annotators": annotators, "labels": labels, "documents": documents,
        "controls": controls, "control_share": control_share, "replicates": replicates, "seed": seed, "level": level})
    sentences = sentence_index(corpus)
    for k in range(trials):
        s = seed + k
        _clear_caches()  # rolled-back ids are reused: a cache keyed on (count, max id) would see the last trial
        try:
            with transaction.atomic():
                reset_evaluation_state(corpus)
                st = settings_for(corpus)
                st.control_share = control_share if controls else 0.0
                st.save()
                if controls:
                    create_verify_controls(corpus, controls, rng=s)
                crowd = BulkSimulatedCrowd(annotators=annotators, accuracy=accuracy, seed=s)
                rep = evaluate(corpus, crowd=crowd, labels=labels, documents=documents, level=level, seed=s)
                for row in rep.rows:
                    report.add("current", f"{row['team']}/{row['run']}", row)
                inputs = trial_inputs(corpus, level=level, sentences=sentences)
                if keep is not None:
                    keep(s, inputs, rep.rows)
                if inputs is not None:
                    for method, rows in method_estimates(inputs, sources=sources, recall_fixes=recall_fixes,
                                                         kinds=kinds, replicates=replicates, seed=s).items():
                        for system, row in rows.items():
                            report.add(method, system, row)
                raise _Rollback
        except _Rollback:
            pass
        if progress is not None:
            progress(k + 1)
    _clear_caches()
    report.seconds = time.time() - t0
    return report


def _clear_caches() -> None:
    """Forget the in-process caches of the scoring path (fingerprints of rows that a rollback un-made)."""
    from . import correction

    correction.clear_cache()
    try:
        from . import scoring
    except ImportError:  # the from-scratch scoring path keeps no cache
        return
    clear = getattr(scoring, "clear_cache", None)
    if clear is not None:
        clear()


__all__ = ["BulkSimulatedCrowd", "CoverageReport", "RECALL_FIXES", "SOURCES", "TrialInputs", "hard_labels",
           "method_estimates", "method_name", "trial_inputs",
           "reset_evaluation_state", "run_coverage"]
