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

The steps are one set for every way a submission is evaluated (:func:`sample_documents_once`, :func:`ask`,
:func:`answer`, :func:`publish`): the stages above run them by the adaptive :class:`Adaptive` plan, one submission
at a time; the batch run (:func:`unpooled.service.evaluations.run.evaluate`, the CLI's and the demo's) runs them by
its fixed-count plan over every pending submission of a corpus at once.

A label batch (:func:`.tasks.on_labels`) re-scores every submission with draws, or wakes the submissions whose labels
are all in (their own :func:`advance` scores and publishes them: one orchestration moves a submission).  One
process at a time advances a submission, and one at a time re-scores a corpus (:mod:`unpooled.service.locks`).
A crashed worker's task is requeued when the worker restarts (:mod:`unpooled.service.workers`); since every stage
is idempotent, the requeued task resumes where the dead one stopped.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from typing import Protocol

import numpy as np
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.utils import timezone
from scipy.stats import norm

from unpooled.core.errors import UnpooledError
from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Task
from unpooled.service.corpora.models import Corpus
from unpooled.service.locks import exclusive
from unpooled.service.submissions.models import Submission

from . import inputs, rates
from .draws import draw
from .inputs import system_name
from .models import Draw
from .periods import freeze_pending
from .policy import CONFIDENCE, SAMPLING_ROUNDS, SERVICE_LEVELS as LEVELS
from .publish import rescore_all

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


def is_quiet() -> bool:
    """Inside :func:`quiet`: labels written now are scored by the code that writes them."""
    return _quiet.get()


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
            freeze_pending(sub.corpus)  # published after its period closed: frozen now


# ---------------------------------------------------------------------------- evaluating submissions: the steps

class Plan(Protocol):
    """What a run of the steps below decides for itself: the levels a submission is drawn at, how many draws each
    level wants, their seed, and what to ask for once the labels asked so far are in.  The lifecycle's plan is
    :class:`Adaptive`; the batch run's is :class:`unpooled.service.evaluations.run.Rounds`."""

    #: at most this many exchanges with the crowd in one :func:`answer`
    exchanges: int

    def levels(self, sub: Submission) -> list[str]: ...

    def draws(self, sub: Submission, level: str) -> int: ...

    def seed(self, sub: Submission, level: str) -> list[int] | None: ...

    def more(self) -> bool:
        """The labels asked for are in: ask for more (draws, answers) where the plan wants them; True when some
        were asked."""


def sample_documents_once(corpus: Corpus, n: int, *, seed: int) -> None:
    """The corpus's uniform sample of ``n`` documents (at most all) for exhaustive annotation, unless it has one
    (two first submissions at once: one sample)."""
    from unpooled.service.annotation.actions import lock_corpus
    from unpooled.service.annotation.sampling import sample_documents

    if not n or ExhaustiveDocument.objects.filter(corpus=corpus).exists():
        return
    with transaction.atomic():
        lock_corpus(corpus)
        if not ExhaustiveDocument.objects.filter(corpus=corpus).exists():
            sample_documents(corpus, "uniform", min(n, corpus.n_documents), seed=seed)


def ask(sub: Submission, plan: Plan, *, priority=None) -> bool:
    """Draw ``sub`` up to ``plan``'s number at each of its levels and ask for the labels of what is drawn and
    unlabelled (idempotent: a resumed stage or run draws and asks only what is missing); True when something was
    drawn."""
    added = False
    for level in plan.levels(sub):
        added |= draw_up_to(sub, level, plan.draws(sub, level), seed=plan.seed(sub, level))
    request_labels(sub, priority=priority)
    return added


def answer(corpus: Corpus, crowd, plan: Plan, waiting) -> bool:
    """Exchange with ``crowd`` (:func:`exchange`) until none of the tasks ``waiting`` for (a query of open tasks)
    is open and ``plan`` asks for nothing more; False when some are still open after an exchange (a remote crowd
    answers later: the caller looks again, or scores with the labels so far)."""
    for _ in range(plan.exchanges):
        if not waiting.exists() and not plan.more():
            return True
        exchange(corpus, crowd)
        if waiting.exists():
            return False
    return not waiting.exists()


def publish(subs) -> None:
    """Publish the scored submissions ``subs`` (those not failed, nor published already)."""
    for sub in subs:
        if sub.status not in (Status.FAILED, Status.PUBLISHED):
            set_status(sub, Status.PUBLISHED)


class Adaptive:
    """The lifecycle's plan for one submission: each level's draws planned from the labels pooled so far
    (:func:`plan_draws`, kept in ``sub.plan``), seeded by the sampling secret; once the pilot's labels are in,
    planned again with them (:func:`top_up`)."""

    exchanges = SAMPLING_ROUNDS + 1

    def __init__(self, sub: Submission) -> None:
        self.sub = sub

    def levels(self, sub: Submission) -> list[str]:
        return levels_for(sub.corpus)

    def draws(self, sub: Submission, level: str) -> int:
        if level not in (sub.plan or {}):
            plan = {**(sub.plan or {}), level: plan_draws(sub, level)}
            Submission.objects.filter(pk=sub.pk).update(plan=plan)
            sub.plan = plan
        return sub.plan[level].get("draws", 0)

    def seed(self, sub: Submission, level: str) -> None:
        return None  # draw_up_to's default: the sampling secret, the submission and the level

    def more(self) -> bool:
        return top_up(self.sub)


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

    st = settings_for(sub.corpus)
    out = {"target_halfwidth": st.target_halfwidth, "min": st.min_draws, "max": st.max_draws,
           "round": SAMPLING_ROUNDS - rounds_left + 1}
    got = inputs.read(sub.corpus, level=level)
    name = system_name(sub)
    if got is None or name not in got.names:
        out.update(draws=0, reason="no instances")
        return out
    design = got.design
    i = got.names.index(name)
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
    """The corpus's exhaustive documents (once), then :func:`ask` for ``sub``'s draws by the adaptive plan."""
    st = settings_for(sub.corpus)
    sample_documents_once(sub.corpus, st.exhaustive_documents, seed=sampling_key())
    ask(sub, Adaptive(sub))


def sampling_key() -> int:
    """The installation's sampling secret (``settings.SAMPLING_SECRET``) as a seed: a 62-bit digest of it.

    The lifecycle's samples are seeded by it (the exhaustive documents: by it alone; a submission's draws: by it,
    the submission's id, the level and the draws so far), so a submitter who knows the code and can guess the id
    of their next submission still cannot tell which of its lines will be drawn; the same secret reproduces
    every sample (``unpooled corpus audit`` prints it)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(settings.SAMPLING_SECRET.encode(), digest_size=8).digest(), "big") >> 2


def draw_up_to(sub: Submission, level: str, need: int, *, seed: list[int] | None = None) -> bool:
    """Draw until ``sub`` has ``need`` draws at ``level``; True when something was drawn.

    The draws are seeded by ``seed`` and the number of draws so far, so that a resumed stage (or run) draws what
    the dead one would have; by default ``seed`` is the sampling secret, the submission and the level."""
    with transaction.atomic():
        Submission.objects.select_for_update().filter(pk=sub.pk).first()  # counted and drawn by one process
        have = Draw.objects.filter(submission=sub, level=level).count()
        if have >= need:
            return False
        if seed is None:
            seed = [sampling_key(), sub.pk, LEVELS.index(level)]
        draw(sub, need - have, level=level, rng=np.random.default_rng([*seed, have]))
    return True


def request_labels(sub: Submission, *, priority=None) -> None:
    """Ask for verification of every drawn instance without a label (idempotent: what ``sub`` asked for already
    is found, not asked again; ``priority``: the tasks' place in the queue, default now).  Where each drawn key's
    label comes from is read live (:func:`unpooled.service.evaluations.status.label_origins`); the plan keeps the
    items of weakly judged relations asked with more answers."""
    from unpooled.service.annotation.actions import request_verification

    ids = sorted(set(Draw.objects.filter(submission=sub).values_list("instance_id", flat=True)))
    res = request_verification(sub, ids, weak_relations=rates.weak_relations(sub.corpus), priority=priority)
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
        added |= draw_up_to(sub, level, again["draws"])
    more = ask_more_answers(sub)
    if added:
        request_labels(sub)
    return added or more


def exchange(corpus: Corpus, backend) -> int:
    """One exchange with the corpus's crowd: publish the open tasks, collect what was answered, aggregate the new
    labels (no ``backend``: aggregate the answers so far again); quietly (the caller scores: no separate
    re-scoring per label batch).  Returns what was collected."""
    from unpooled.service.annotation.actions import reaggregate

    with quiet():
        if backend is None:  # no crowd: the answers given so far, aggregated again
            reaggregate(corpus)
            return 0
        backend.publish(corpus)
        got = backend.collect(corpus)
        if got:
            reaggregate(corpus)
    return got


def stage_annotating(sub: Submission) -> bool:
    """:func:`answer` through the corpus's backend by the adaptive plan; True when ``sub``'s labels are all in."""
    from unpooled.service.crowd.base import backend_for

    return answer(sub.corpus, backend_for(sub.corpus), Adaptive(sub), open_requests(sub))


def open_requests(sub: Submission):
    return Task.objects.filter(requests__submission=sub, kind=Kind.VERIFY, status=Task.Status.OPEN)


# ---------------------------------------------------------------------------- driver

def advance(sub: Submission) -> str:
    """Run the submission through as many stages as can run now; returns the stage reached.

    A stage that raises leaves the submission ``failed`` with the stage and the error
    recorded; :func:`retry` resumes it.  A database error (``OperationalError``, ``InterfaceError``) is
    raised instead: it says nothing about the submission, and the task is run again once the database answers.
    One process at a time advances a submission (:func:`unpooled.service.locks.exclusive`): a second one waits,
    then finds the stages done.
    """
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
                    return stage  # the task that runs this schedules a poll of a remote crowd (tasks.py)
                set_status(sub, Status.SCORING)
            elif stage == Status.SCORING:
                rescore_all(sub.corpus)
                publish([sub])
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


# ---------------------------------------------------------------------------- progress


