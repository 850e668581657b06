"""The background work of evaluations (django-tasks; the db worker runs it), and how it is queued: a submission's
lifecycle (:func:`advance_submission`, enqueued when it is stored, retried or woken), a label batch
(:func:`labels_arrived`: one re-scoring per batch, enqueued once) and the batch run (:func:`evaluate_corpus`).
Every task is idempotent: a crashed worker's task runs again from where it stopped."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import Backend
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import Submission

from .leaderboard import warm
from .lifecycle import LifecycleError, advance, is_quiet, open_requests, set_status
from .publish import rescore_all

Status = Submission.Status


@task()
def evaluate_corpus(corpus: str, accuracy: float = 0.8, labels: int = 300, documents: int = 40, seed: int = 0,
                    controls: int = 100, levels: tuple[str, ...] | list[str] = ("instance", "relation", "entity")
                    ) -> dict:
    """Evaluate every pending submission of ``corpus`` through the simulated crowd, at each of ``levels``.

    With a gold layer: ``controls`` gold control items are created first (if the corpus has none)
    to calibrate the crowd's error rates, and each row carries the system's true P, R and F1
    (``p_true``, ``r_true``, ``f1_true``; :mod:`.truth`) beside the estimate, also kept in the
    score's ``details['truth']``; ``truth_inside`` is (K, N): the truth is inside the 90% interval
    for K of the N (system, metric, level) triples.
    """
    from unpooled.service.crowd.base import SimulatedBackend

    from .run import evaluate
    from .truth import attach_truth

    c = Corpus.objects.get(name=corpus)
    keys = ("submission", "team", "run", "level", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi",
            "labels_new", "labels_reused")
    out: dict = {"warnings": [], "rows": []}
    inside = total = 0
    for level in levels:
        rep = evaluate(c, crowd=SimulatedBackend(accuracy=accuracy, seed=seed), labels=labels, documents=documents,
                       seed=seed, level=level, controls=controls)
        out["warnings"] += rep.warnings
        lk = keys
        if c.has_gold and rep.rows:
            k, n = attach_truth(c, rep.rows, level=level)
            inside, total = inside + k, total + n
            lk = keys + ("p_true", "r_true", "f1_true")
        out["rows"] += [{k: r.get(k) for k in lk} for r in rep.rows]
    if c.has_gold and total:
        out["truth_inside"] = (inside, total)
    return out


@task()
def advance_submission(submission_id: int) -> str:
    """Run a submission's lifecycle as far as it can go now (idempotent); returns the stage reached."""
    sub = Submission.objects.filter(pk=submission_id).select_related("corpus", "team").first()
    if sub is None:
        return "gone"
    stage = advance(sub)
    if stage == Status.PUBLISHED:
        warm(sub.corpus)  # the re-scoring that published it changed every board: build them before a reader asks
    if stage == Status.ANNOTATING and settings_for(sub.corpus).backend == Backend.MTURK:
        schedule_poll(sub)  # a remote crowd answers later: look again
    else:
        keep_settling(sub.corpus)   # HITs of a corpus no submission polls any more (or that left MTurk)
    return stage


@task()
def settle_mturk(corpus_id: int) -> dict:
    """Collect and settle the corpus's Mechanical Turk HITs while any is unsettled, whatever backend the corpus
    uses now (:func:`unpooled.service.crowd.mturk_sync.collect`: it also expires the HITs of a corpus that left
    Mechanical Turk); runs again a minute later until they are settled.  Without it, assignments submitted after
    the corpus left Mechanical Turk (or after its last submission stopped polling) went unreviewed, and Amazon's
    auto-approval paid them, made-up answers included."""
    from unpooled.service.crowd.mturk import MTurkBackend
    from unpooled.service.crowd.mturk_sync import collect, unsettled

    corpus = Corpus.objects.filter(pk=corpus_id).first()
    if corpus is None or not unsettled(corpus).exists():
        return {}
    out = collect(corpus, MTurkBackend.from_env()).to_dict()
    if settle_mturk.get_backend().supports_defer:   # an immediate backend would run it again at once, for ever
        keep_settling(corpus, delay=60.0)
    return out


@task()
def labels_arrived(corpus_id: int) -> dict:
    """A batch of labels arrived: re-score every submission of the corpus; publish those whose labels are in."""
    corpus = Corpus.objects.filter(pk=corpus_id).first()
    if corpus is None:
        return {}
    got = on_labels(corpus)
    if got["rescored"]:
        warm(corpus)
    return got


# ---------------------------------------------------------------------------- queueing

def retry(sub: Submission) -> None:
    """Resume a failed submission at the stage that failed (organisers)."""
    if sub.status != Status.FAILED:
        raise LifecycleError(f"submission {sub.pk} has not failed (it is {sub.status})")
    set_status(sub, sub.failed_stage or Status.INGESTED, failed_stage="", error="")
    enqueue_advance(sub)


def _enqueue(task, *args, delay: float | None = None):
    """Enqueue ``task``; ``delay`` seconds later where the backend can defer (the in-process one cannot)."""
    if delay and task.get_backend().supports_defer:
        task = task.using(run_after=timezone.now() + timedelta(seconds=delay))
    return task.enqueue(*args)


def enqueue_advance(sub: Submission, *, delay: float | None = None) -> None:
    """Enqueue :func:`advance` for ``sub`` once the current transaction commits."""
    transaction.on_commit(lambda: _enqueue(advance_submission, sub.pk, delay=delay))


def keep_settling(corpus: Corpus, *, delay: float | None = None) -> None:
    """Once the transaction commits, queue :func:`settle_mturk` for ``corpus`` if it has unsettled HITs and none is
    waiting already."""
    from unpooled.service.crowd.mturk_sync import unsettled

    def go():
        if unsettled(corpus).exists() and not _queued(settle_mturk, [corpus.pk]):
            _enqueue(settle_mturk, corpus.pk, delay=delay)

    transaction.on_commit(go)


def schedule_poll(sub: Submission, seconds: float = 60.0) -> None:
    """Remote crowds (MTurk) answer later: look again in a minute (only where the task backend can defer)."""
    if advance_submission.get_backend().supports_defer:
        enqueue_advance(sub, delay=seconds)


def on_labels(corpus: Corpus) -> dict:
    """A label batch arrived.  A submission in ``annotating`` whose requests are all answered is woken: its own
    lifecycle (:func:`advance`, enqueued) tops it up or scores and publishes it, so that only one orchestration
    ever moves a submission.  Otherwise every submission is re-scored with the new labels (a woken one re-scores
    the corpus itself)."""
    waiting = Submission.objects.filter(corpus=corpus, status=Status.ANNOTATING, is_reference=False).order_by("pk")
    woken = [s for s in waiting if not open_requests(s).exists()]
    for s in woken:
        if not _queued(advance_submission, [s.pk]):
            enqueue_advance(s)
    rescored = 0 if woken else rescore_all(corpus)
    return {"rescored": rescored, "woken": [s.pk for s in woken]}


def _queued(task, args: list) -> bool:
    """Whether ``task`` with ``args`` is already waiting in the database queue (not yet claimed)."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    waiting = DBTaskResult.objects.filter(status=TaskResultStatus.READY, task_path=task.module_path)
    return any((r.args_kwargs or {}).get("args") == args for r in waiting[:200])


def notify_labels(corpus_id: int) -> None:
    """After a label is written: enqueue one re-scoring of the corpus unless one is already waiting."""
    if is_quiet():
        return

    def go():
        if _queued(labels_arrived, [corpus_id]):
            return
        _enqueue(labels_arrived, corpus_id, delay=getattr(settings, "RESCORE_DELAY_SECONDS", 2.0))

    transaction.on_commit(go)
