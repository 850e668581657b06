"""The batch run (``unpooled evaluate``, the demo's loader, the coverage harness): every pending submission of a
corpus drawn, annotated by the corpus's crowd and scored together, in rounds until the intervals are narrow enough.

It runs the lifecycle's steps (:func:`~.lifecycle.sample_documents_once`, :func:`~.lifecycle.ask`,
:func:`~.lifecycle.answer`, :func:`~.lifecycle.publish`) by a plan of its own, :class:`Rounds`: a fixed number of
draws per submission, seeded by the run's seed, and rounds of more draws decided from the corpus's joint scores.
It draws *up to* its targets and asks only for what is not asked yet, so a run again after a crash draws and asks
only what is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.db.models import Max
from django.utils import timezone

from unpooled.core.errors import InvalidInputError, check_choice

from unpooled.service.annotation.models import Task
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import Submission

from .lifecycle import answer, ask, ask_more_answers, publish, sample_documents_once
from .models import Draw, Score
from .publish import breakdowns, entities, leaderboard_row, score_corpus


#: which F1 interval ``target_width`` is met by: the anytime-valid one (:mod:`unpooled.core.estimators.anytime`,
#: valid however often the loop looks) or the fixed-n one
WIDTH_OF = ("anytime", "fixed-n")


@dataclass
class EvaluationReport:
    rows: list[dict] = field(default_factory=list)
    rounds: int = 0
    open_tasks: int = 0
    warnings: list[str] = field(default_factory=list)
    width_of: str = "anytime"


def f1_width(s: Score, width_of: str = "anytime") -> float | None:
    """The width of score ``s``'s F1 interval of kind ``width_of`` (:data:`WIDTH_OF`); None when undefined."""
    if width_of == "anytime":
        a = s.details.get("anytime") or {}
        lo, hi = a.get("f1_cs_lo"), a.get("f1_cs_hi")
    else:
        lo, hi = s.f1_lo, s.f1_hi
    return None if lo is None or hi is None else hi - lo


def _content_key(sub: Submission, level: str) -> int:
    """A 62-bit digest of what identifies ``sub`` whatever its id (its file's digest, its team and run) and the
    ``level`` of its draws."""
    import hashlib

    text = "\0".join((sub.file_sha256, sub.team.name, sub.run_id, level))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") >> 2


def evaluate(corpus: Corpus, *, crowd=None, labels: int = 150, documents: int = 40, target_width: float | None = None,
             level: str = "instance", max_labels: int = 1000, step: int = 50, seed: int = 0,
             width_of: str = "anytime", controls: int = 0) -> EvaluationReport:
    """Run every pending submission (no score yet) to a score and re-score every submission.

    ``crowd`` is a backend (:mod:`unpooled.service.crowd.base`); the simulated one answers at
    once, the others leave tasks open (their labels count once they arrive).  With
    ``target_width``, pending submissions draw ``step`` more labels per round until their
    F1 interval is at most that wide (or ``max_labels`` draws): the anytime-valid interval by default, which the
    loop may look at after every round (``width_of='fixed-n'``: the fixed-n one, whose coverage stopping on width
    costs little, ``unpooled simulate stopping``; it stops sooner).  ``controls``: gold control items made first
    (:func:`controls_once`).
    """
    check_choice("width_of", width_of, WIDTH_OF)
    report = EvaluationReport(width_of=width_of)
    controls_once(corpus, controls, seed=seed)
    sample_documents_once(corpus, documents, seed=seed)
    # in an order of their contents, each drawn from a seed of its own contents: the numbers do not depend on the
    # order the files were uploaded in (nor on their ids)
    pending = sorted((s for s in Submission.objects.filter(corpus=corpus, is_reference=False).select_related("team")
                      if not s.scores.filter(level=level).exists() and s.instances.exists()),
                     key=lambda s: (s.file_sha256, s.team.name, s.run_id, s.pk))

    pks = {s.pk for s in pending}

    def wide(scores) -> dict:
        # the pending submissions whose F1 interval is wider than the target: ``step`` more draws each
        if target_width is None:
            return {}
        n = {s.submission_id: Draw.objects.filter(submission_id=s.submission_id, level=level).count()
             for s in scores if s.submission_id in pks}
        return {s.submission: n[s.submission_id] + step for s in scores if s.submission_id in n
                and ((w := f1_width(s, width_of)) is None or w > target_width) and n[s.submission_id] < max_labels}

    plan = Rounds(corpus, level, pending, first=labels, seed=seed, more_for=wide, rounds=ROUNDS)
    for sub in pending:
        ask(sub, plan, priority=plan.priority)
    _run(plan, crowd)
    scores = plan.scores
    report.rounds = plan.rounds
    report.open_tasks = _open_tasks(corpus).count()
    if report.open_tasks:
        report.warnings.append(f"{report.open_tasks} annotation tasks are still open: the scores use the labels "
                               "received so far")
    report.rows = [leaderboard_row(s) for s in sorted(scores, key=lambda s: -(s.f1 or 0))]
    breakdowns(corpus, level)
    entities(corpus)
    if not report.open_tasks:  # the scores are final
        publish(Submission.objects.filter(pk__in=[s.submission_id for s in scores]).select_related("corpus"))
    return report


def controls_once(corpus: Corpus, n: int, *, seed: int) -> None:
    """``n`` gold control items to calibrate the crowd's error rates, when the corpus has a gold layer to make them
    from and no controls yet."""
    from unpooled.service.annotation.controls import create_verify_controls

    if n and corpus.has_gold and not Task.objects.filter(corpus=corpus, is_control=True).exists():
        create_verify_controls(corpus, n, rng=seed)


#: the batch run's bounds: rounds of draws, and requests for more answers within a round
ROUNDS, ANSWER_ROUNDS = 50, 10


class Rounds:
    """The batch run's plan (:class:`~.lifecycle.Plan`) for the submissions ``subs`` at ``level``: ``first`` draws
    each, seeded by the run's ``seed`` and each submission's contents (:func:`_content_key`), their tasks queued
    in one batch.  Once the labels asked for are in: more answers on the items of relations the crowd judges
    weakly; then the corpus is scored at ``level`` (the scoring before superseded: deleted) and ``more_for``
    (the scores -> the new draw targets by submission; empty when done) starts another round, up to ``rounds``
    scorings."""

    def __init__(self, corpus: Corpus, level: str, subs, *, first: int, seed: int, more_for, rounds: int) -> None:
        self.corpus, self.level, self.subs, self.run_seed = corpus, level, list(subs), seed
        self.more_for, self.max_rounds = more_for, rounds
        self.target = {s.pk: first for s in self.subs}
        self.priority = timezone.now()  # one batch: its tasks queue in the order they are made, not the uploads'
        self.exchanges = rounds * (ANSWER_ROUNDS + 1) + 1
        self.scores: list[Score] = []
        self.made: list[int] = []  # the ids of the scores written by this run's last scoring
        self.rounds = self._answer_rounds = 0
        self.stale = True  # something was asked since the last scoring

    def levels(self, sub: Submission) -> list[str]:
        return [self.level]

    def draws(self, sub: Submission, level: str) -> int:
        return self.target[sub.pk]

    def seed(self, sub: Submission, level: str) -> list[int]:
        return [self.run_seed, _content_key(sub, level)]

    def more(self) -> bool:
        if self._answer_rounds < ANSWER_ROUNDS and [sub for sub in self.subs if ask_more_answers(sub)]:
            self._answer_rounds += 1
            self.stale = True
            return True
        self._answer_rounds = 0
        self.score()
        grow = self.more_for(self.scores) if self.rounds < self.max_rounds else {}
        for sub, n in grow.items():
            self.target[sub.pk] = n
            ask(sub, self, priority=self.priority)
        self.stale = bool(grow)
        return bool(grow)

    def score(self) -> None:
        # superseded within this run; a score from before it that the scoring kept (it would have repeated it) stays
        Score.objects.filter(pk__in=self.made).delete()
        top = Score.objects.aggregate(m=Max("id"))["m"] or 0
        self.scores = score_corpus(self.corpus, level=self.level)
        self.made = [s.pk for s in self.scores if s.pk > top]
        self.rounds += 1
        self.stale = False


def _run(plan: Rounds, crowd) -> None:
    """:func:`~.lifecycle.answer` by ``plan`` with ``crowd`` (None: no crowd, the answers so far aggregated
    again), waiting for every open task of the corpus but its gold controls (the crowd answers those among the
    items, as long as there are items to answer); then scored, if anything was asked since (a remote crowd
    answers later: the scores use the labels received so far)."""
    answer(plan.corpus, crowd, plan, _open_tasks(plan.corpus))
    if plan.stale:
        plan.score()


def _open_tasks(corpus: Corpus):
    return Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False)


@dataclass(frozen=True)
class SeparationReport:
    """What :func:`separate` did: whether the pair's anytime-valid F1 intervals came apart, after how many rounds
    and draws, the draws it did not make against annotating both to ``planned`` (``labels_saved``: an upper
    bound on the labels saved, as a draw of an instance labelled already costs none), and the bounds."""

    submissions: tuple[int, int]
    separated: bool
    better: int | None
    rounds: int
    draws: dict
    planned: int
    labels_saved: int
    f1_cs: dict


def separate(corpus: Corpus, a: Submission, b: Submission, *, crowd=None, level: str = "instance", step: int = 50,
             max_labels: int = 1000, seed: int = 0, documents: int = 0, controls: int = 0) -> SeparationReport:
    """Annotate the pair ``a``, ``b`` in rounds of ``step`` more draws each until their anytime-valid F1 intervals
    (:mod:`unpooled.core.estimators.anytime`, valid however often they are looked at) are disjoint, or both have
    ``max_labels`` draws; every round re-scores the corpus jointly.  ``controls`` and ``documents`` as in
    :func:`evaluate`.  Returns a :class:`SeparationReport`."""
    from unpooled.core.estimators.anytime import separated

    if a.pk == b.pk or a.corpus_id != corpus.pk or b.corpus_id != corpus.pk:
        raise InvalidInputError(f"a, b: expected two different submissions of corpus {corpus.name}")
    if step < 1 or max_labels < 1:
        raise InvalidInputError(f"step, max_labels: expected positive numbers of draws, got {step}, {max_labels}")
    controls_once(corpus, controls, seed=seed)
    sample_documents_once(corpus, documents, seed=seed)
    pair, seen = (a, b), {}

    def apart_yet(scores) -> dict:
        # the pair's bounds and draws now; ``step`` more draws each (at most ``max_labels``) until they are apart
        by = {s.submission_id: (s.details.get("anytime") or {}) for s in scores}
        seen["bounds"] = bounds = {x.pk: (by.get(x.pk, {}).get("f1_cs_lo"), by.get(x.pk, {}).get("f1_cs_hi"))
                                   for x in pair}
        seen["n"] = n = {x.pk: Draw.objects.filter(submission=x, level=level).count() for x in pair}
        known = all(None not in v for v in bounds.values())
        seen["apart"] = known and bool(separated(*(([lo], [hi]) for lo, hi in bounds.values()))[0])
        if seen["apart"] or all(v >= max_labels for v in n.values()):
            return {}
        return {x: min(n[x.pk] + step, max_labels) for x in pair}

    plan = Rounds(corpus, level, pair, first=0, seed=seed, more_for=apart_yet,
                  rounds=math.ceil(max_labels / step) + 1)
    if plan.more():  # scored first: the pair may be apart already
        _run(plan, crowd)
    bounds, n, apart = seen["bounds"], seen["n"], seen["apart"]
    better = max(pair, key=lambda x: bounds[x.pk][0]).pk if apart else None
    return SeparationReport((a.pk, b.pk), apart, better, plan.rounds, n, max_labels,
                            sum(max(max_labels - v, 0) for v in n.values()), bounds)
