"""The batch run (``unpooled evaluate``, the demo's loader, the coverage harness): every pending submission of a
corpus drawn, annotated by the corpus's crowd and scored together, in rounds until the intervals are narrow enough.

It draws *up to* its targets and asks only for what is not asked yet, so a run again after a crash draws and asks
only what is missing; it publishes through the lifecycle's :func:`~.lifecycle.set_status`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils import timezone

from unpooled.core.errors import InvalidInputError, check_choice

from unpooled.service.annotation.actions import reaggregate
from unpooled.service.annotation.models import ExhaustiveDocument, Task
from unpooled.service.annotation.sampling import sample_documents
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import Submission

from .lifecycle import ask_more_answers, draw_up_to, exchange, request_labels, set_status
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
             progress=None, width_of: str = "anytime") -> EvaluationReport:
    """Run every pending submission (no score yet) to a score and re-score every submission.

    ``crowd`` is a backend (:mod:`unpooled.service.crowd.base`); the simulated one answers at
    once, the others leave tasks open (their labels count once they arrive).  With
    ``target_width``, pending submissions draw ``step`` more labels per round until their
    F1 interval is at most that wide (or ``max_labels`` draws): the anytime-valid interval by default, which the
    loop may look at after every round (``width_of='fixed-n'``: the fixed-n one, whose coverage stopping on width
    costs little, ``unpooled simulate stopping``; it stops sooner).
    """
    check_choice("width_of", width_of, WIDTH_OF)
    report = EvaluationReport(width_of=width_of)
    if not ExhaustiveDocument.objects.filter(corpus=corpus).exists() and documents:
        sample_documents(corpus, "uniform", min(documents, corpus.n_documents), seed=seed)
    # in an order of their contents, each drawn from a seed of its own contents: the numbers do not depend on the
    # order the files were uploaded in (nor on their ids)
    pending = sorted((s for s in Submission.objects.filter(corpus=corpus, is_reference=False).select_related("team")
                      if not s.scores.filter(level=level).exists() and s.instances.exists()),
                     key=lambda s: (s.file_sha256, s.team.name, s.run_id, s.pk))
    queued = timezone.now()  # one batch: its tasks queue in the order they are made, not the uploads'

    def ask(sub, target):
        # the lifecycle's steps with this run's plan: up to ``target`` draws, seeded by the run's seed and the
        # submission's contents, and verification of every drawn key without a label: a run again after a crash
        # (or of a submission whose earlier run stopped) draws and asks only what is missing
        draw_up_to(sub, level, target, seed=[seed, _content_key(sub, level)])
        request_labels(sub, priority=queued)

    def answer():
        _answer(corpus, crowd, pending)

    for sub in pending:
        ask(sub, labels)
    answer()
    report.rounds = 1
    scores = score_corpus(corpus, level=level)
    while target_width is not None and report.rounds < 50:
        wide = [s.submission for s in scores if s.submission_id in {p.pk for p in pending}
                and ((w := f1_width(s, width_of)) is None or w > target_width)
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
    _finish(corpus, level, scores, publish=not report.open_tasks)
    return report


def _answer(corpus: Corpus, crowd, subs) -> None:
    """One exchange with the crowd (or a re-aggregation without one), again while the answers show relations the
    crowd judges weakly among ``subs``' items (more answers on those)."""
    for _ in range(10):
        if crowd is not None:
            exchange(corpus, crowd)
        else:
            reaggregate(corpus)
        if not [sub for sub in subs if ask_more_answers(sub)]:
            break


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
             max_labels: int = 1000, seed: int = 0) -> SeparationReport:
    """Annotate the pair ``a``, ``b`` in rounds of ``step`` more draws each until their anytime-valid F1 intervals
    (:mod:`unpooled.core.estimators.anytime`, valid however often they are looked at) are disjoint, or both have
    ``max_labels`` draws; every round re-scores the corpus jointly.  Returns a :class:`SeparationReport`."""
    from unpooled.core.estimators.anytime import separated

    if a.pk == b.pk or a.corpus_id != corpus.pk or b.corpus_id != corpus.pk:
        raise InvalidInputError(f"a, b: expected two different submissions of corpus {corpus.name}")
    if step < 1 or max_labels < 1:
        raise InvalidInputError(f"step, max_labels: expected positive numbers of draws, got {step}, {max_labels}")
    pair, queued, rounds, made = (a, b), timezone.now(), 0, []
    while True:
        scores = score_corpus(corpus, level=level)
        Score.objects.filter(pk__in=made).delete()  # superseded within this run
        made = [s.pk for s in scores]
        rounds += 1
        by = {s.submission_id: (s.details.get("anytime") or {}) for s in scores}
        bounds = {x.pk: (by.get(x.pk, {}).get("f1_cs_lo"), by.get(x.pk, {}).get("f1_cs_hi")) for x in pair}
        n = {x.pk: Draw.objects.filter(submission=x, level=level).count() for x in pair}
        known = all(None not in v for v in bounds.values())
        apart = known and bool(separated(*(([lo], [hi]) for lo, hi in bounds.values()))[0])
        if apart or all(v >= max_labels for v in n.values()):
            break
        for x in pair:
            draw_up_to(x, level, min(n[x.pk] + step, max_labels), seed=[seed, _content_key(x, level)])
            request_labels(x, priority=queued)
        _answer(corpus, crowd, pair)
    better = max(pair, key=lambda x: bounds[x.pk][0]).pk if apart else None
    return SeparationReport((a.pk, b.pk), apart, better, rounds, n, max_labels,
                            sum(max(max_labels - v, 0) for v in n.values()), bounds)


def _finish(corpus: Corpus, level: str, scores, *, publish: bool) -> None:
    """After :func:`evaluate`'s last scores: the breakdowns and entity scores are computed, and, when every label
    is in (``publish``), the scored submissions are published."""
    breakdowns(corpus, level)
    entities(corpus)
    if publish:  # the scores are final
        for sub in Submission.objects.filter(pk__in=[s.submission_id for s in scores]).exclude(
                status__in=[Submission.Status.FAILED, Submission.Status.PUBLISHED]).select_related("corpus"):
            set_status(sub, Submission.Status.PUBLISHED)
