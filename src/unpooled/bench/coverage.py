r"""Coverage of the published intervals: the evaluation pipeline re-run over many seeds against the truth.

``unpooled evaluate --corpus NAME --coverage-trials N`` (corpus with a gold layer) runs, per
trial and inside a transaction that is rolled back (the database is left as it was; the
corpus's earlier draws, tasks, labels and scores are set aside for the trial):

1. :func:`~unpooled.service.evaluations.run.evaluate` itself -- draws from each
   :math:`p_i`, verification requests with label reuse, a uniform document sample for exhaustive
   annotation, the crowd, majority labels, :func:`~unpooled.service.evaluations.publish.score_corpus` -- with
   :class:`BulkSimulatedCrowd` as the crowd;
2. the scores of every compared method (:func:`method_name`: plain majority labels, or the crowd's votes
   with confusions from each source) from the same answers, by the core's
   :func:`unpooled.core.offline.score`;
3. whether each interval holds the truth (:func:`unpooled.service.evaluations.truth.true_scores`).

:class:`BulkSimulatedCrowd` answers as :class:`unpooled.service.crowd.simulated.SimulatedCrowd` does
(its answer code, so the same per-answer accuracy; gold controls before an item with probability
``control_share`` per lease, the neediest first (:func:`~unpooled.service.annotation.leasing.needed_controls`);
blocking by the service's rule; an item no unblocked annotator is left to answer completes with what it has) and
completes each task through the service's aggregation (:func:`unpooled.service.annotation.actions.complete_task`).
It skips the lease queue, which took ~90 % of a trial's time: each item's *k* annotators are a uniformly random
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

from unpooled.core.annotation.confusion import fit_confusions, keyed_answers
from unpooled.core.estimators.noisy import KeyedAnswers
from unpooled.core.offline import score as offline_score

from unpooled.service.evaluations import scoring
from unpooled.service.evaluations.rates import sentence_index, verify_answers
from unpooled.service.evaluations.truth import covered

#: compared confusion sources (None: plain majority labels, no crowd-noise model)
SOURCES: tuple = (None, "dawid-skene", "controls", "semi")
METRICS = ("p", "r", "f1")


class BulkSimulatedCrowd:
    """A simulated crowd backend that answers every open task at once (see the module docs)."""

    name = "simulated"

    def __init__(self, *, annotators: int = 5, accuracy: float = 0.8, bias: float = 0.0, seed: int = 0,
                 control_share: float | None = None, relation_rates: tuple = ()) -> None:
        self.annotators, self.accuracy, self.bias = annotators, accuracy, bias
        self.relation_rates = relation_rates
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
        from unpooled.service.annotation.leasing import needed_controls
        from unpooled.service.annotation.models import Answer, Assignment, Kind, Task
        from unpooled.service.crowd.simulated import SimulatedCrowd

        crowd = SimulatedCrowd.uniform(corpus, self.annotators, accuracy=self.accuracy, bias=self.bias, rng=self.rng,
                                       relation_rates=self.relation_rates)
        st = settings_for(corpus)
        share = st.control_share if self.control_share is None else self.control_share
        controls = Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=True, status=Task.Status.OPEN)
        control_ids = set(controls.values_list("pk", flat=True))
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
                _score_control(ann, task, ans, st, now, a)

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
                for i in self.rng.permutation(free)[:need].tolist():
                    ann = crowd.annotators[i]
                    # a lease is a control with probability `share` (while unseen controls remain)
                    while share > 0 and self.rng.random() < share:
                        # the neediest control, as the lease queue offers them
                        c = needed_controls(controls.exclude(pk__in=seen[ann.pk] & control_ids), self.rng, limit=1)
                        if not c:
                            break
                        give(i, Task.objects.get(pk=c[0]))
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
            if not progressed and not crowd.close_unreachable():  # a closed pool, as SimulatedCrowd's
                break
        return {"answers": self.answers - before}


def reset_evaluation_state(corpus) -> None:
    """Delete the corpus's draws, scores, tasks, labels and exhaustive sample (callers roll back)."""
    from unpooled.service.annotation.models import Annotator, ExhaustiveDocument, Label, Task

    from unpooled.service.evaluations.models import Breakdown, Draw, MissedInstances, Score

    Score.objects.filter(submission__corpus=corpus).delete()
    Breakdown.objects.filter(submission__corpus=corpus).delete()
    MissedInstances.objects.filter(submission__corpus=corpus).delete()
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


def method_name(source: str | None) -> str:
    return "majority" if source is None else f"votes/{source}"


@dataclass
class TrialInputs:
    """What every method scores from: the draws, the answers, the exhaustive truth."""

    data: object                 # unpooled.core.offline.OfflineData (hard majority labels)
    y: np.ndarray                # hard majority label of each draw of data.labels
    answers: object              # unpooled.core.annotation.confusion.VerifyAnswers
    documents: int               # exhaustively annotated documents
    sentences: dict              # rates.sentence_index
    level: str = "instance"


def trial_inputs(corpus, *, level: str = "instance", sentences=None) -> TrialInputs | None:
    from unpooled.service.evaluations.inputs import offline_data

    data, _, docs = offline_data(corpus, level=level)
    if not data.submissions:
        return None
    return TrialInputs(data, hard_labels(corpus, data), verify_answers(corpus), docs,
                       sentences if sentences is not None else sentence_index(corpus), level)


def keyed(answers, source: str, *, replicates: int = 100, seed: int = 0) -> KeyedAnswers | None:
    """The answers (controls left out) with confusions fitted from ``source``, as the core's model of that source
    sees them (:func:`~unpooled.core.annotation.confusion.keyed_answers`); None where it is not available."""
    got = fit_confusions(answers, source, replicates=replicates, rng=seed)
    if got is None:
        return None
    point, reps = got
    return keyed_answers(answers, point, reps or [])


def method_estimates(inputs: TrialInputs, *, sources=SOURCES, replicates: int = 100, seed: int = 0
                     ) -> dict[str, dict[str, dict]]:
    """Scores of every system under each method (:func:`method_name`) from one trial's inputs.

    Returns ``{method: {system: row}}`` (rows of :meth:`unpooled.core.estimators.joint.Scores.row`).
    """
    out: dict[str, dict[str, dict]] = {}
    for source in sources:
        votes = None
        if source is not None:
            votes = keyed(inputs.answers, source, replicates=replicates, seed=seed)
            if votes is None:
                continue
        res = offline_score(inputs.data, level=inputs.level, estimator="joint", weights="balance", match="overlap",
                            corrected_labels=True, documents=inputs.documents or None, sentences=inputs.sentences,
                            votes=votes)
        out[method_name(source)] = {s: res.scores.row(i) for i, s in enumerate(res.systems)}
    return out


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
            self.hits.setdefault(key, []).append(bool(covered(truth, lo, hi)))
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
                 seed: int = 0, level: str = "instance", sources=SOURCES, keep=None, progress=None,
                 relation_rates: tuple = ()) -> CoverageReport:
    """``trials`` runs of the pipeline with seeds ``seed .. seed + trials - 1`` (module docs).

    ``keep(seed, inputs, rows)``, if given, receives each trial's :class:`TrialInputs` and the
    stored leaderboard rows (to save them and compare methods later without re-running).

    The method ``current`` is the scoring path as it is (the stored scores of the run).
    ``controls`` gold controls are created per trial (by :func:`~unpooled.service.evaluations.run.evaluate`) and
    offered with probability ``control_share`` per lease.
    """
    from unpooled.service.annotation.actions import settings_for
    from unpooled.service.evaluations.inputs import system_name

    from unpooled.service.evaluations.run import evaluate
    from unpooled.service.evaluations.truth import true_scores_all

    t0 = time.time()
    truth_by_pk = true_scores_all(corpus, level=level)
    from unpooled.service.submissions.models import Submission

    names = {s.pk: system_name(s) for s in Submission.objects.filter(pk__in=list(truth_by_pk)).select_related("team")}
    truth = {names[pk]: {"p": ts.p, "r": ts.r, "f1": ts.f1} for pk, ts in truth_by_pk.items()}
    report = CoverageReport(trials, truth, settings={
        "accuracy": accuracy, "annotators": annotators, "labels": labels, "documents": documents,
        "controls": controls, "control_share": control_share, "replicates": replicates, "seed": seed, "level": level,
        "relation_rates": [[sorted(n) if n else "*", a, b] for n, a, b in relation_rates]})
    sentences = sentence_index(corpus)
    for k in range(trials):
        s = seed + k
        scoring.clear_cache()  # rolled-back ids are reused: a cache keyed on (count, max id) would see the last trial
        try:
            with transaction.atomic():
                reset_evaluation_state(corpus)
                st = settings_for(corpus)
                st.control_share = control_share if controls else 0.0
                st.save()
                crowd = BulkSimulatedCrowd(annotators=annotators, accuracy=accuracy, seed=s,
                                           relation_rates=relation_rates)
                rep = evaluate(corpus, crowd=crowd, labels=labels, documents=documents, level=level, seed=s,
                               controls=controls)
                for row in rep.rows:
                    report.add("current", f"{row['team']}/{row['run']}", row)
                inputs = trial_inputs(corpus, level=level, sentences=sentences)
                if keep is not None:
                    keep(s, inputs, rep.rows)
                if inputs is not None:
                    for method, rows in method_estimates(inputs, sources=sources, replicates=replicates,
                                                         seed=s).items():
                        for system, row in rows.items():
                            report.add(method, system, row)
                raise _Rollback
        except _Rollback:
            pass
        if progress is not None:
            progress(k + 1)
    scoring.clear_cache()
    report.seconds = time.time() - t0
    return report


__all__ = ["BulkSimulatedCrowd", "CoverageReport", "SOURCES", "keyed", "TrialInputs", "hard_labels",
           "method_estimates", "method_name", "trial_inputs",
           "reset_evaluation_state", "run_coverage"]
