"""The life of a submission after it is accepted: sample → annotate → score → publish.

=============  ==============================================================================
stage          what happens (each step is idempotent: run it twice and nothing changes)
=============  ==============================================================================
``ingested``   the upload was validated and stored (:func:`unpooled.service.submissions.actions.do_ingest_submission`)
``sampling``   the number of draws per level is planned from the labels already pooled (adaptive
               size, :func:`unpooled.core.estimators.adaptive.plan_labels`), the draws are made
               and stored in order, and verification is requested for the drawn instances whose
               key has no label yet (the others reuse the pool's labels); the corpus gets a
               document sample for exhaustive annotation if it has none
``annotating`` the corpus's backend publishes the open tasks; the stage ends when no
               verification task that this submission asked for is open
``scoring``    every submission of the corpus is re-scored jointly at every level with draws
``published``  the scores are on the leaderboard (public submissions) and the status page
``failed``     a stage raised: ``failed_stage`` and ``error`` say which and why; an organiser's
               retry resumes that stage
=============  ==============================================================================

A label batch (:func:`on_labels`) re-scores every submission with draws, or wakes the submissions whose labels
are all in (their own :func:`advance` scores and publishes them: one orchestration moves a submission).  One
process at a time advances a submission, and one at a time re-scores a corpus (:mod:`unpooled.service.locks`).
A crashed worker's task is requeued when the worker restarts (:mod:`unpooled.service.workers`); since every stage
is idempotent, the requeued task resumes where the dead one stopped.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
from datetime import timedelta

import numpy as np
from scipy.stats import norm
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import Count, F, Max, Q, Subquery, Sum
from django.utils import timezone

from unpooled.core.errors import UnpooledError
from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import Answer, Backend, ExhaustiveDocument, Kind, Label, Task, TaskRequest
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import Submission

from .models import Draw, Score
from .policy import CONFIDENCE, SAMPLING_ROUNDS, SERVICE_LEVELS as LEVELS

log = logging.getLogger(__name__)
Status = Submission.Status
STAGES = [Status.INGESTED, Status.SAMPLING, Status.ANNOTATING, Status.SCORING, Status.PUBLISHED]


_quiet = contextvars.ContextVar("unpooled_quiet_labels", default=False)


@contextlib.contextmanager
def quiet():
    """Labels written inside do not enqueue a re-scoring (the caller scores by itself)."""
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)


class LifecycleError(Exception):
    """A stage cannot go on; the message says why (shown on the status page)."""


def levels_for(corpus: Corpus) -> list[str]:
    got = [x.strip() for x in settings_for(corpus).levels.split(",") if x.strip()]
    bad = [x for x in got if x not in LEVELS]
    if bad:
        raise LifecycleError(f"annotation settings of {corpus.name}: levels: expected some of {', '.join(LEVELS)}, "
                             f"got {', '.join(bad)}")
    return got or ["instance"]


def set_status(sub: Submission, status: str, **fields) -> None:
    now = timezone.now()
    Submission.objects.filter(pk=sub.pk).update(status=status, status_changed=now, **fields)
    sub.status, sub.status_changed = status, now
    for k, v in fields.items():
        setattr(sub, k, v)
    if status == Status.PUBLISHED and sub.period_id is not None:
        from .periods import freeze_pending

        freeze_pending(sub.corpus)  # published after its period closed: frozen now


# ---------------------------------------------------------------------------- planning

def plan_draws(sub: Submission, level: str, *, rounds_left: int = SAMPLING_ROUNDS) -> dict:
    """How many draws ``sub`` needs at ``level`` for the corpus's target half-width, given the pool.

    The variance of the joint precision estimate is predicted from the labels already collected
    (method.md §2.7) by the core's sequential rule (:func:`unpooled.core.estimators.adaptive.next_draws`):
    with rounds to come and no own labels yet, a pilot of half the plan; then the rest, planned with the
    pilot's labels.  ``draws`` is the total for the level (own labelled draws plus what is missing), clipped
    to ``[min_draws, max_draws]``.
    """
    from unpooled.core.estimators.adaptive import next_draws
    from unpooled.core.offline import build_design

    from .actions import offline_data, system_name

    st = settings_for(sub.corpus)
    out = {"target_halfwidth": st.target_halfwidth, "min": st.min_draws, "max": st.max_draws,
           "round": SAMPLING_ROUNDS - rounds_left + 1}
    data, by_name, _ = offline_data(sub.corpus, level=level)
    names = [s.name for s in data.submissions]
    name = system_name(sub)
    if name not in names:
        out.update(draws=0, reason="no instances")
        return out
    design, _ = build_design(data, level=level, match="overlap", corrected_labels=True)
    i = names.index(name)
    more, plan = next_draws(design, i, rounds_left=rounds_left, epsilon=st.target_halfwidth,
                            confidence=CONFIDENCE, n_max=max(st.max_draws, 1))
    labelled_own = int(np.count_nonzero(design.src == i))
    n = int(min(max(labelled_own + more, st.min_draws), st.max_draws))
    out.update(draws=n, planned=int(plan.draws), expected_new_labels=round(plan.expected_new_labels, 1),
               predicted_halfwidth=round(float(plan.predicted_halfwidth) * float(norm.ppf(0.5 + CONFIDENCE / 2)), 4),
               prior=round(plan.prior, 3))
    return out


# ---------------------------------------------------------------------------- stages

def stage_sampling(sub: Submission) -> None:
    from unpooled.service.annotation.actions import lock_corpus
    from unpooled.service.annotation.sampling import sample_documents

    corpus = sub.corpus
    st = settings_for(corpus)
    if st.exhaustive_documents and not ExhaustiveDocument.objects.filter(corpus=corpus).exists():
        with transaction.atomic():
            lock_corpus(corpus)  # two first submissions at once: one sample
            if not ExhaustiveDocument.objects.filter(corpus=corpus).exists():
                sample_documents(corpus, "uniform", min(st.exhaustive_documents, corpus.n_documents),
                                 seed=sampling_key())
    plan = dict(sub.plan or {})
    for level in levels_for(corpus):
        if level not in plan:
            plan[level] = plan_draws(sub, level)
            Submission.objects.filter(pk=sub.pk).update(plan=plan)
            sub.plan = plan
        _draw_up_to(sub, level, plan[level].get("draws", 0))
    _request(sub, first=True)


def sampling_key() -> int:
    """The installation's sampling secret (``settings.SAMPLING_SECRET``) as a seed: a 62-bit digest of it.

    The lifecycle's samples are seeded by it (the exhaustive documents: by it alone; a submission's draws: by it,
    the submission's id, the level and the draws so far), so a submitter who knows the code and can guess the id
    of their next submission still cannot tell which of its lines will be drawn; the same secret reproduces
    every sample (``unpooled corpus audit`` prints it)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(settings.SAMPLING_SECRET.encode(), digest_size=8).digest(), "big") >> 2


def _draw_up_to(sub: Submission, level: str, need: int) -> bool:
    """Draw until ``sub`` has ``need`` draws at ``level``; True when something was drawn."""
    from .actions import draw

    with transaction.atomic():
        Submission.objects.select_for_update().filter(pk=sub.pk).first()  # counted and drawn by one process
        have = Draw.objects.filter(submission=sub, level=level).count()
        if have >= need:
            return False
        # a seed fixed by the sampling secret, submission, level and draws so far: a resumed stage draws what the
        # dead one would have
        draw(sub, need - have, level=level,
             rng=np.random.default_rng([sampling_key(), sub.pk, LEVELS.index(level), have]))
    return True


def _request(sub: Submission, *, first: bool) -> None:
    """Ask for verification of every drawn instance without a label (idempotent), and count what it did."""
    from unpooled.service.annotation.actions import request_verification

    from . import rates

    ids = sorted(set(Draw.objects.filter(submission=sub).values_list("instance_id", flat=True)))
    res = request_verification(sub, ids, weak_relations=rates.weak_relations(sub.corpus))
    plan = dict(sub.plan or {})
    labels = dict(plan.get("labels") or {})
    # what this request did; a repeated request finds its own tasks and adds nothing new
    labels["new"] = TaskRequest.objects.filter(submission=sub, committed_cents__gt=0).count()
    if first and "reused" not in labels:
        # counted on the first request only: later, its own tasks' labels would count
        labels["reused"] = res.reused
    labels["joined"] = TaskRequest.objects.filter(submission=sub, committed_cents=0).count()
    labels["over_budget"] = res.over_budget
    plan["labels"] = labels
    Submission.objects.filter(pk=sub.pk).update(plan=plan)
    sub.plan = plan
    _note_more_answers(sub, res)


def _note_more_answers(sub: Submission, res) -> None:
    """Count in ``sub``'s plan the items of relations the crowd judges weakly asked with more answers each."""
    if not res.more_answers:
        return
    plan = dict(sub.plan or {})
    labels = dict(plan.get("labels") or {})
    labels["more_answers"] = labels.get("more_answers", 0) + res.more_answers
    labels["more_answers_cents"] = labels.get("more_answers_cents", 0) + res.more_answers_cents
    plan["labels"] = labels
    Submission.objects.filter(pk=sub.pk).update(plan=plan)
    sub.plan = plan


def ask_more_answers(sub: Submission) -> bool:
    """``sub``'s items of relations its answers so far show the crowd judging weakly, asked before that was
    known, get ``answers_weak_relation`` answers each (:func:`~unpooled.service.annotation.actions.
    request_more_answers`); True when some were asked (their tasks are open again)."""
    from unpooled.service.annotation.actions import request_more_answers

    from . import rates

    res = request_more_answers(sub, rates.weak_relations(sub.corpus))
    _note_more_answers(sub, res)
    return res.more_answers > 0


def top_up(sub: Submission) -> bool:
    """The pilot's labels are in: plan each level again with them and draw what is missing, and ask for more
    answers on items of relations the crowd turned out to judge weakly (:func:`ask_more_answers`).

    Each level's plan records its ``round``; a level past :data:`SAMPLING_ROUNDS` (or planned
    before rounds existed) is left alone.  True when new draws were made (their verification is
    requested, so the submission stays in ``annotating``).
    """
    plan = dict(sub.plan or {})
    added = False
    for level in levels_for(sub.corpus):
        lp = plan.get(level)
        if not lp or int(lp.get("round", SAMPLING_ROUNDS)) >= SAMPLING_ROUNDS:
            continue
        r = int(lp["round"])
        again = plan_draws(sub, level, rounds_left=SAMPLING_ROUNDS - r)
        again["pilot"] = int(lp.get("draws", 0))
        again["draws"] = max(int(again.get("draws", 0)), again["pilot"])
        plan[level] = again
        Submission.objects.filter(pk=sub.pk).update(plan=plan)
        sub.plan = plan
        added |= _draw_up_to(sub, level, again["draws"])
    more = ask_more_answers(sub)
    if added:
        _request(sub, first=False)
    return added or more


def stage_annotating(sub: Submission) -> bool:
    """Publish through the backend; True when this submission's labels are all in."""
    from unpooled.service.annotation.actions import reaggregate
    from unpooled.service.crowd.base import backend_for

    corpus = sub.corpus
    backend = backend_for(corpus)
    for _ in range(SAMPLING_ROUNDS + 1):
        # all in: the pilot's labels may ask for more draws (top_up), whose tasks are then published
        if not open_requests(sub).exists() and not top_up(sub):
            return True
        with quiet():  # this stage scores by itself: no separate re-scoring per label
            backend.publish(corpus)
            got = backend.collect(corpus)
            if got:
                reaggregate(corpus)
        if open_requests(sub).exists():
            return False
    return not open_requests(sub).exists()


def open_requests(sub: Submission):
    return Task.objects.filter(requests__submission=sub, kind=Kind.VERIFY, status=Task.Status.OPEN)


def rescore(corpus: Corpus) -> list[Score]:
    """Score every submission of the corpus at every level that has draws."""
    from .actions import score_corpus

    out: list[Score] = []
    levels = set(Draw.objects.filter(submission__corpus=corpus, submission__is_reference=False)
                 .values_list("level", flat=True).distinct())
    by_level = {}
    for level in [lv for lv in LEVELS if lv in levels]:
        by_level[level] = score_corpus(corpus, level=level)
        out += by_level[level]
    for level, scores in by_level.items():
        breakdowns(corpus, level)
        if corpus.has_gold:
            truth(corpus, level, scores)
    entities(corpus)
    return out


def entities(corpus: Corpus) -> None:
    """The entity scores (mentions, types, links, NIL clusters) beside the relation scores."""
    from .entities import compute

    try:
        compute(corpus)
    except Exception:  # noqa: BLE001 - the relation scores stand without the entity scores
        log.exception("entity scores of %s failed", corpus.name)


def truth(corpus: Corpus, level: str, scores: list[Score]) -> None:
    """With a gold layer (a demo, a validation corpus): each new score keeps the true P, R, F1 beside it."""
    from .actions import leaderboard_row
    from .truth import attach_truth

    try:
        attach_truth(corpus, [leaderboard_row(s) for s in scores], level=level)
    except Exception:  # noqa: BLE001 - the scores stand without their truth
        log.exception("truth of %s at level %s failed", corpus.name, level)


def breakdowns(corpus: Corpus, level: str) -> None:
    """Per-relation and per-type breakdowns of the new scores, computed here so that pages never compute them."""
    from .breakdown import compute_breakdowns

    try:
        compute_breakdowns(corpus, level)
    except Exception:  # noqa: BLE001 - the scores stand; the page computes the breakdown on demand instead
        log.exception("breakdown of %s at level %s failed", corpus.name, level)


def rescore_all(corpus: Corpus) -> int:
    """Re-score every submission of the corpus, and the human reference; one re-scoring at a time per corpus
    (a later one reads the labels the earlier one wrote its scores from, or newer: the newest score is never
    computed from older labels than the one before it).  Returns the number of scores written."""
    from unpooled.service.locks import exclusive

    with exclusive("rescore", corpus.pk):
        scores = rescore(corpus) if Draw.objects.filter(submission__corpus=corpus,
                                                        submission__is_reference=False).exists() else []
        if Submission.objects.filter(corpus=corpus, is_reference=True).exists():
            from . import reference

            reference.on_labels(corpus)  # the human reference, scored on its own (reference.py)
    return len(scores)


# ---------------------------------------------------------------------------- driver

def advance(sub: Submission) -> str:
    """Run the submission through as many stages as can run now; returns the stage reached.

    A stage that raises leaves the submission ``failed`` with the stage and the error
    recorded; :func:`retry` resumes it.  A database error (``OperationalError``, ``InterfaceError``) is
    raised instead: it says nothing about the submission, and the task is run again once the database answers.
    One process at a time advances a submission (:func:`unpooled.service.locks.exclusive`): a second one waits,
    then finds the stages done.
    """
    from unpooled.service.locks import exclusive

    with exclusive("advance", sub.pk):
        return _advance(sub)


def _advance(sub: Submission) -> str:
    sub.refresh_from_db()
    races = 0
    while True:
        stage = sub.status
        try:
            if stage == Status.INGESTED:
                set_status(sub, Status.SAMPLING)
            elif stage == Status.SAMPLING:
                stage_sampling(sub)
                set_status(sub, Status.ANNOTATING)
            elif stage == Status.ANNOTATING:
                if not stage_annotating(sub):
                    if settings_for(sub.corpus).backend == Backend.MTURK:
                        schedule_poll(sub)
                    return stage
                set_status(sub, Status.SCORING)
            elif stage == Status.SCORING:
                rescore_all(sub.corpus)
                set_status(sub, Status.PUBLISHED)
            else:
                return stage
        except (OperationalError, InterfaceError):
            # the database failed (restarted, unreachable, locked, full), not the stage: the worker requeues the
            # task once the database answers, and the idempotent stage resumes (unpooled.service.workers)
            raise
        except IntegrityError:
            # another process created a row this stage meant to create: the stages are idempotent, so the stage
            # runs again and finds it (the locks make this rare; MAX_RACES bounds a stage that always collides)
            races += 1
            if races > MAX_RACES:
                set_status(sub, Status.FAILED, failed_stage=stage, error=_logged_failure(sub, stage))
                return Status.FAILED
            log.warning("submission %s: stage %s lost a race with another process; running it again", sub.pk, stage)
            sub.refresh_from_db()
        except Exception as exc:  # noqa: BLE001 - any failure is recorded on the submission
            set_status(sub, Status.FAILED, failed_stage=stage, error=_public_error(exc, sub, stage))
            return Status.FAILED


#: a stage that loses this many races in a row fails (with an error id; the log has the detail)
MAX_RACES = 5


def _public_error(exc: Exception, sub: Submission, stage: str) -> str:
    """What the submission's pages say about a failed stage: the message of an error written for its readers
    (:class:`~unpooled.core.errors.UnpooledError`, :class:`LifecycleError`), else a fixed sentence with an error id
    that finds the traceback in the log -- never the text of an internal exception (a query, a table's name)."""
    if isinstance(exc, (UnpooledError, LifecycleError)):
        log.warning("submission %s: stage %s failed: %s", sub.pk, stage, exc)
        return str(exc)
    return _logged_failure(sub, stage)


def _logged_failure(sub: Submission, stage: str) -> str:
    import secrets

    ref = secrets.token_hex(4)
    log.exception("submission %s: stage %s failed (error id %s)", sub.pk, stage, ref)
    return (f"an internal error stopped the {stage} stage (error id {ref}); the organisers have its details in "
            "the service's log and can retry the stage")


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
    from .tasks import advance_submission

    transaction.on_commit(lambda: _enqueue(advance_submission, sub.pk, delay=delay))


def schedule_poll(sub: Submission, seconds: float = 60.0) -> None:
    """Remote crowds (MTurk) answer later: look again in a minute (only where the task backend can defer)."""
    from .tasks import advance_submission

    if advance_submission.get_backend().supports_defer:
        enqueue_advance(sub, delay=seconds)


def on_labels(corpus: Corpus) -> dict:
    """A label batch arrived.  A submission in ``annotating`` whose requests are all answered is woken: its own
    lifecycle (:func:`advance`, enqueued) tops it up or scores and publishes it, so that only one orchestration
    ever moves a submission.  Otherwise every submission is re-scored with the new labels (a woken one re-scores
    the corpus itself)."""
    from .tasks import advance_submission

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
    from .tasks import labels_arrived

    if _quiet.get():
        return

    def go():
        if _queued(labels_arrived, [corpus_id]):
            return
        _enqueue(labels_arrived, corpus_id, delay=getattr(settings, "RESCORE_DELAY_SECONDS", 2.0))

    transaction.on_commit(go)


# ---------------------------------------------------------------------------- progress

LEVEL_STATE_LABELS = {"scored": "✓", "waiting": "waiting for labels", "none": "no instances at this level",
                      "todo": "not sampled yet", "failed": "failed"}


def level_states(subs) -> dict[int, list[dict]]:
    """Each submission of ``subs``: every level it is evaluated at, with its state.

    A level is ``scored`` once a score row exists for it, ``none`` when its plan drew nothing (the system has no
    instances there), ``waiting`` (for labels) once it has draws, ``failed`` when the submission failed before its
    score, and ``todo`` before its draws.  The levels are those of the submission's sampling plan plus any scored
    one.  Two queries, whatever the number of submissions (the lists and the status page share this)."""
    subs = list(subs)
    ids = [s.pk for s in subs]
    scored = set(Score.objects.filter(submission_id__in=ids).order_by().values_list("submission_id", "level").distinct())
    drawn = set(Draw.objects.filter(submission_id__in=ids).order_by().values_list("submission_id", "level").distinct())
    out = {}
    for s in subs:
        plan = s.plan or {}
        levels = [lv for lv in LEVELS if lv in plan or (s.pk, lv) in scored]
        rows = []
        for lv in levels:
            if (s.pk, lv) in scored:
                state = "scored"
            elif isinstance(plan.get(lv), dict) and not plan[lv].get("draws"):
                state = "none"
            elif s.status == Status.FAILED:
                state = "failed"
            elif (s.pk, lv) in drawn:
                state = "waiting"
            else:
                state = "todo"
            rows.append({"level": lv, "state": state, "label": LEVEL_STATE_LABELS[state]})
        out[s.pk] = rows
    return out


def stage_summary(sub: Submission, levels: list[dict]) -> str:
    """The stage in a few words: "scored and published" only when every level of the plan has its score."""
    if sub.status == Status.PUBLISHED and any(r["state"] not in ("scored", "none") for r in levels):
        return "published, partly scored"
    return Status(sub.status).label


def attach_level_states(subs) -> list:
    """Set ``levels`` (see :func:`level_states`) and ``stage_summary`` on each submission of a list page."""
    subs = list(subs)
    states = level_states(subs)
    for s in subs:
        s.levels = states[s.pk]
        s.stage_summary = stage_summary(s, s.levels)
    return subs


#: no verification answer for this long: the time left is unknown, not the last hour's pace
IDLE_MINUTES = 10


def progress(sub: Submission, *, now=None) -> dict:
    """What the status page shows: stage, labels received / needed, cost so far, time left."""
    now = now or timezone.now()
    from unpooled.service.annotation.models import SubmissionBudget

    corpus = sub.corpus
    st = settings_for(corpus)
    own = SubmissionBudget.objects.filter(submission=sub).first()
    budget = own.limit_cents if own is not None else st.submission_budget_cents
    draws = Draw.objects.filter(submission=sub)
    keys = draws.values("key_hash").distinct()
    needed = keys.count()
    received = (Label.objects.filter(corpus=corpus, key_hash__in=Subquery(draws.values("key_hash")))
                .values("key_hash").distinct().count())
    open_tasks = open_requests(sub).annotate(got=Count("answers", filter=Q(answers__weight__gt=0)))
    outstanding = max(0, open_tasks.aggregate(n=Sum(F("answers_needed") - F("got")))["n"] or 0)
    cost = (Answer.objects.filter(task__requests__submission=sub, task__requests__committed_cents__gt=0)
            .aggregate(s=Sum("cost_cents"))["s"] or 0)
    answers = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, created__gte=now - timedelta(hours=1))
    recent = answers.count()
    rate = recent / 3600.0
    eta = None
    if outstanding == 0:
        eta = 0.0
    elif rate > 0 and answers.filter(created__gte=now - timedelta(minutes=IDLE_MINUTES)).exists():
        # the last hour's pace, while somebody is still answering (an in-house queue nobody works on has no ETA)
        eta = outstanding / rate
    ex = ExhaustiveDocument.objects.filter(corpus=corpus)
    ex_done = Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, status=Task.Status.COMPLETE,
                                  document_id__in=Subquery(ex.values("document_id"))).count()
    order = [s.value for s in STAGES]
    at = sub.failed_stage if sub.status == Status.FAILED else sub.status
    steps = [{"stage": s.value, "label": s.label,
              "state": ("failed" if sub.status == Status.FAILED and s.value == at else
                        "done" if at in order and order.index(s.value) < order.index(at) or sub.status == Status.PUBLISHED
                        else "current" if s.value == at else "todo")} for s in STAGES]
    plan = sub.plan or {}
    levels = level_states([sub])[sub.pk]
    return {
        "submission": sub.pk, "status": sub.status, "status_label": stage_summary(sub, levels), "levels": levels,
        "failed_stage": sub.failed_stage, "error": sub.error, "steps": steps,
        "status_changed": sub.status_changed.isoformat() if sub.status_changed else None,
        "draws": {lv: draws.filter(level=lv).count() for lv in LEVELS if lv in st.levels},
        "plan": {k: v for k, v in plan.items() if k in LEVELS},
        "labels_needed": needed, "labels_received": received,
        "labels_new": (plan.get("labels") or {}).get("new", 0),
        "labels_reused": (plan.get("labels") or {}).get("reused", 0) + (plan.get("labels") or {}).get("joined", 0),
        "over_budget": (plan.get("labels") or {}).get("over_budget", 0),
        "more_answers": (plan.get("labels") or {}).get("more_answers", 0),
        "more_answers_cost": f"${(plan.get('labels') or {}).get('more_answers_cents', 0) / 100:,.2f}",
        "answers_outstanding": outstanding, "cost_cents": int(cost), "cost": f"${cost / 100:,.2f}",
        "budget_cents": budget, "budget": None if budget is None else f"${budget / 100:,.2f}",
        "eta_seconds": None if eta is None or math.isinf(eta) else round(eta),
        "backend": st.backend,
        "exhaustive_documents": ex.count(), "exhaustive_done": ex_done,
        "done": sub.status in (Status.PUBLISHED, Status.FAILED),
    }


#: the published figures of a score, as every page rounds them (3 decimals)
SHOWN = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")
#: how far back :func:`score_change` looks for the previous figures (re-scoring writes a score per label batch)
CHANGE_LOOKBACK = 500


def score_change(score: Score) -> dict | None:
    """What ``score``'s figures replaced: the newest earlier score of the same submission and level whose shown
    figures (:data:`SHOWN`, to 3 decimals) differ, as ``{"previous": {figure: value}, "previous_created",
    "changed"}``, ``changed`` being when the current figures appeared (the first later score that has them);
    None when no earlier score (of the last :data:`CHANGE_LOOKBACK`) differs."""
    def shown(row):
        return tuple(None if row[k] is None else round(row[k], 3) for k in SHOWN)

    now = shown({k: getattr(score, k) for k in SHOWN})
    changed = score.created
    for row in (Score.objects.filter(submission_id=score.submission_id, level=score.level, id__lt=score.pk)
                .order_by("-id").values("created", *SHOWN)[:CHANGE_LOOKBACK]):
        if shown(row) != now:
            return {"previous": {k: row[k] for k in SHOWN}, "previous_created": row["created"], "changed": changed}
        changed = row["created"]
    return None


def newest_scores(sub: Submission) -> dict[str, Score]:
    """The newest score per level; a frozen level's snapshot (its period closed: :mod:`.periods`), with
    ``frozen`` (the time) set on it (``None`` on the others)."""
    from .models import ScoreSnapshot

    # a GROUP BY over the (submission, level, id) index: a correlated subquery per score row cost 4 ms on PostgreSQL
    newest = Score.objects.filter(id__in=Score.objects.filter(submission=sub).order_by().values("level")
                                  .annotate(m=Max("id")).values("m"))
    out = {s.level: s for s in newest}
    for s in out.values():
        s.frozen = None
    for snap in ScoreSnapshot.objects.filter(submission=sub).select_related("score"):
        out[snap.level] = snap.score
        snap.score.frozen = snap.frozen
    # in the levels' order (instance, relation, entity), as everywhere else
    return {lv: out[lv] for lv in sorted(out, key=lambda lv: (LEVELS.index(lv) if lv in LEVELS else len(LEVELS), lv))}
