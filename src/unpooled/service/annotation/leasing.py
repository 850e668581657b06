"""Who may label what, and the leases that hand tasks out: an annotator's queue, its progress, why it is empty.

An annotator never labels the instances of their own team or of the teams they declared conflicts with
(:class:`Scope`), nor a human reference's verification item in a document whose exhaustive annotation they
answered (:func:`not_own_exhaustive`).  A *lease* (:class:`~unpooled.service.annotation.models.Assignment`)
gives one task to one annotator until it expires; nobody is given a task twice.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, F, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from unpooled.service import locks
from unpooled.service.accounts.models import Profile, Role
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import RelationInstance

from .models import (
    AnnotationSettings, Annotator, Answer, Assignment, Backend, Kind, Task, TaskRequest, settings_for, settings_of,
)


# --------------------------------------------------------------------------- who may label what

@dataclass(frozen=True)
class Scope:
    """What one annotator may label: never the instances of ``teams`` (their own team and declared
    conflicts); only corpora open to sign-up when ``open_only`` (an account made without an invite)."""

    teams: frozenset = frozenset()
    open_only: bool = False


def scope_of(annotator: Annotator) -> Scope:
    """The annotator's :class:`Scope`, read once per annotator object.

    In-house accounts only: simulated workers and MTurk workers belong to no team. An account without a
    profile was made by an operator (``createsuperuser``, the admin) and counts as invited.
    """
    got = getattr(annotator, "_unpooled_scope", None)
    if got is not None:
        return got
    scope = Scope()
    if annotator.backend == Backend.INHOUSE and annotator.user_id is not None:
        prof = Profile.objects.filter(user_id=annotator.user_id).select_related("user").first()
        if prof is not None:
            teams = set(prof.conflicts.values_list("pk", flat=True))
            if prof.team_id is not None:
                teams.add(prof.team_id)
            staff = prof.user.is_staff or prof.user.is_superuser
            scope = Scope(frozenset(teams), prof.role == Role.ANNOTATOR and not prof.invited and not staff)
    annotator._unpooled_scope = scope
    return scope


def _in_scope(qs, scope: Scope):
    """``qs`` (tasks) without those ``scope`` forbids: a verification item that one of ``scope.teams``'
    submissions asked for or predicted (the same instance key), and, for ``open_only``, closed corpora."""
    if scope.open_only:
        qs = qs.filter(corpus__annotation_settings__open_signup=True)
    if scope.teams:
        teams = list(scope.teams)
        qs = qs.exclude(pk__in=TaskRequest.objects.filter(submission__team_id__in=teams).values("task_id"))
        qs = qs.exclude(Q(kind=Kind.VERIFY) & Exists(RelationInstance.objects.filter(
            submission__team_id__in=teams, submission__corpus_id=OuterRef("corpus_id"), key_hash=OuterRef("key_hash"),
            key=OuterRef("key"))))
    return qs


def not_own_exhaustive(qs, annotator_id):
    """``qs`` (tasks) without the verification items the human reference asked for in a document whose exhaustive
    annotation (entities or relations) this annotator answered: the reference's precision must come from others
    (:mod:`unpooled.service.evaluations.reference`)."""
    return qs.exclude(Q(kind=Kind.VERIFY) & _own_exhaustive(annotator_id))


def _own_exhaustive(annotator_id, task: str = "pk", document: str = "document_id") -> Q:
    """Whether the human reference asked for the task (``task``: the path to its id from the rows queried) and
    this annotator answered the exhaustive annotation of its document (``document``: the path to the document's
    id)."""
    made = Answer.objects.filter(annotator_id=annotator_id, task__kind__in=[Kind.ENTITIES, Kind.RELATIONS],
                                 task__document_id=OuterRef(document))
    ref = TaskRequest.objects.filter(task_id=OuterRef(task), submission__is_reference=True)
    return Exists(ref) & Exists(made)


def own_exhaustive(annotator_id, task: str = "pk", document: str = "document_id") -> dict:
    """``{"own_exhaustive": expression}``: an annotation of a query of tasks (or of rows with a task: ``task`` and
    ``document`` the paths to its id and its document's) whose value :func:`may_label` takes for this annotator
    instead of asking (the query that locks a task reads it too)."""
    return {"own_exhaustive": ExpressionWrapper(_own_exhaustive(annotator_id, task, document),
                                                output_field=BooleanField())}


def may_label(annotator: Annotator, task: Task, *, own_exhaustive: bool | None = None) -> bool:
    """Whether ``annotator`` may answer ``task`` (see :class:`Scope`, and :func:`not_own_exhaustive`).
    ``own_exhaustive``: the value of :func:`own_exhaustive`'s annotation for this annotator and task, read with the
    task (else asked here)."""
    if task.kind == Kind.VERIFY:
        # asked of a gold control too (which passes): an answer's work does not tell a control from an item
        own = own_exhaustive
        if own is None:
            own = Task.objects.filter(pk=task.pk).filter(_own_exhaustive(annotator.pk)).exists()
        if own and not task.is_control:
            return False
    scope = scope_of(annotator)
    if not scope.teams and not scope.open_only:
        return True
    return _in_scope(Task.objects.filter(pk=task.pk), scope).exists()


def available_tasks(annotator: Annotator):
    """Open tasks this annotator may be offered (before the per-annotator rules of :func:`lease_next`)."""
    return not_own_exhaustive(_in_scope(Task.objects.filter(status=Task.Status.OPEN), scope_of(annotator)),
                              annotator.pk)


def unreachable_items(corpus: Corpus, live: list[int], kinds=None):
    """Open items (not controls) of ``corpus`` that every annotator of ``live`` (their pks) has answered or holds,
    with at least one counted answer and fewer than they ask for: nobody in that pool can give them another answer
    (they asked for more answers than the pool has unblocked annotators, after a block or a weak relation's raise).
    Oldest first; none when ``live`` is empty."""
    if not live:
        return Task.objects.none()
    mine = Q(assignments__annotator_id__in=live) & ~Q(assignments__status=Assignment.Status.EXPIRED)
    counted = Q(answers__weight__gt=0, answers__annotator__blocked=False)
    return (Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False)
            .filter(kind__in=[k for k in (kinds or []) if k] or Kind.values)
            .annotate(reached=Count("assignments__annotator", filter=mine, distinct=True),
                      got=Count("answers", filter=counted, distinct=True))
            .filter(reached__gte=len(live), got__gte=1, got__lt=F("answers_needed")).order_by("pk"))


def active_annotators(corpus: Corpus, backend: str) -> list[int]:
    """The unblocked annotators of ``backend`` who have given ``corpus`` a counted answer (pks, ordered)."""
    return list(Annotator.objects.filter(backend=backend, blocked=False, answers__task__corpus=corpus,
                                         answers__weight__gt=0).distinct().order_by("pk").values_list("pk", flat=True))


# --------------------------------------------------------------------------- leasing

def annotator_for_user(user) -> Annotator:
    ann, _ = Annotator.objects.get_or_create(backend="inhouse", external_id=user.get_username(), defaults={"user": user})
    if ann.user_id is None:
        ann.user = user
        ann.save(update_fields=["user"])
    return ann


def expire_leases(now=None) -> int:
    """Return abandoned work: leases past their expiry become ``expired``."""
    now = now or timezone.now()
    return Assignment.objects.filter(status=Assignment.Status.LEASED, expires__lt=now).update(
        status=Assignment.Status.EXPIRED)


def _live(now=None) -> Q:
    """The leases that hold one of a task's slots: a lease not yet expired (``now``; any lease still marked leased
    without it), or an answer that counts.  An MTurk lease holds none until its answer is confirmed: anyone who saw a HIT's link can make up workers (security review
    N4), and those must not take in-house annotators' slots."""
    leased = Q(status=Assignment.Status.LEASED, external_ref="")
    if now is not None:
        leased &= Q(expires__gte=now)
    return leased | Q(status=Assignment.Status.SUBMITTED, answer__weight__gt=0)


def _live_count(now):
    """A task's live leases (:func:`_live`), counted in a subquery per task (an expression of a query of tasks), not
    by grouping the tasks: ordered by an index and cut (``[:64]``), such a query reads the open tasks in the index's
    order and counts only those it reads, so its cost does not grow with the open tasks (issue 22 item 7)."""
    live = (Assignment.objects.filter(_live(now), task=OuterRef("pk")).order_by().values("task")
            .annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(live), 0)


#: a person's next item is one of the oldest this many, at random (not from the caller's ``rng``, which a seeded
#: simulation passes): annotators who work together do not meet on the same items in the same order, and nobody can
#: tell which item comes next (security review N17)
OFFER_WINDOW = 64


def lease_next(annotator: Annotator, *, kind: str | None = None, corpus: Corpus | None = None,
               now=None, rng=None) -> Assignment | None:
    """Lease the next task to ``annotator``: one of the :data:`OFFER_WINDOW` oldest requests at random, never an item
    twice.

    A task is available while its active leases plus its counted answers are fewer than
    its ``answers_needed``.  With probability ``control_share`` a gold control the
    annotator has not seen comes first (the neediest: :func:`needed_controls`).  Returns the annotator's current unexpired lease
    if there is one (a reload does not take a second item).
    """
    now = now or timezone.now()
    if annotator.blocked:
        return None
    expire_leases(now)
    current = (Assignment.objects.filter(annotator=annotator, status=Assignment.Status.LEASED, expires__gte=now)
               .select_related("task").order_by("leased"))
    if kind:
        current = current.filter(task__kind=kind)
    if corpus is not None:
        current = current.filter(task__corpus=corpus)
    got = current.first()
    if got is not None:
        return _with_corpus(got, corpus)
    base = available_tasks(annotator)
    if kind:
        base = base.filter(kind=kind)
    if corpus is not None:
        base = base.filter(corpus=corpus)
    mine = Assignment.objects.filter(annotator=annotator).exclude(status=Assignment.Status.EXPIRED).values("task_id")
    base = base.exclude(pk__in=mine)
    rng = np.random.default_rng(rng)
    candidates = []
    if kind in (None, Kind.VERIFY):
        st = settings_for(corpus) if corpus is not None else None
        st_share = st.control_share if st is not None else _control_share(base.filter(is_control=False))
        if st_share > 0 and rng.random() < st_share:
            candidates.append(needed_controls(base.filter(is_control=True), rng, st=st))
    oldest = list(base.filter(is_control=False).alias(active=_live_count(now))
                  .filter(active__lt=F("answers_needed")).order_by("priority", "id")
                  .values_list("pk", flat=True)[:OFFER_WINDOW])
    if annotator.backend != Backend.SIMULATED:  # a simulated worker steers nothing: its seeded runs stay as they were
        oldest = [oldest[i] for i in np.random.default_rng().permutation(len(oldest))]
    candidates.append(oldest)
    for ids in candidates:
        for task_id in ids:
            got = _try_lease(task_id, annotator, now)
            if got is not None:
                return _with_corpus(got, corpus)
    return None


def _with_corpus(lease: Assignment, corpus: Corpus | None) -> Assignment:
    """``lease`` with its task's corpus the caller's object, when it is that corpus: its schema, read and parsed
    once by the caller (the simulated crowd), then checks the answers (:func:`~.actions.check_answer`)."""
    if corpus is not None and lease.task.corpus_id == corpus.pk:
        lease.task.corpus = corpus
    return lease


def needed_controls(unseen, rng, limit: int = 20, *, st: AnnotationSettings | None = None) -> list[int]:
    """Up to ``limit`` of the controls ``unseen`` (those an annotator may be offered), neediest first: the ones
    whose relation's (or organiser's group's) answered controls fall furthest short of its share of the item answers
    asked for, of the class they lack, the least answered first, ties in a random order
    (:func:`unpooled.core.annotation.controls.control_order`).  Each relation's rates are then anchored in
    proportion to its items, whatever the mix the controls were made in.  Several corpora: one of them at random
    (in proportion to its unseen controls).  ``st``: the corpus's annotation settings, when the caller read
    them (their relation groups are not read again)."""
    from unpooled.core.annotation.controls import control_order

    mine = list(unseen.order_by("pk").values_list("pk", "corpus_id"))
    if not mine:
        return []
    corpus_id = mine[int(rng.integers(len(mine)))][1]
    free = {pk for pk, c in mine if c == corpus_id}
    ctl = list(Task.objects.filter(corpus_id=corpus_id, kind=Kind.VERIFY, is_control=True).order_by("pk")
               .annotate(n=Count("answers", filter=Q(answers__weight__gt=0)))
               .values_list("pk", "group", "control_answer", "n"))
    demand = dict(Task.objects.filter(corpus_id=corpus_id, kind=Kind.VERIFY, is_control=False).order_by()
                  .values("group").annotate(d=Sum("answers_needed")).values_list("group", "d"))
    groups = st.group_of_relation() if st is not None and st.corpus_id == corpus_id else \
        AnnotationSettings.groups_of(corpus_id)
    code: dict = {}
    for g in sorted(set(demand) | {c[1] for c in ctl}):
        code.setdefault(groups.get(g, g), len(code))
    need = np.zeros(len(code))
    for g, d in demand.items():
        need[code[groups.get(g, g)]] += d or 0
    order = control_order(need, [code[groups.get(g, g)] for _, g, _, _ in ctl],
                          [bool((c or {}).get("correct")) for _, _, c, _ in ctl], [n for *_, n in ctl],
                          [pk in free for pk, *_ in ctl], rng)
    return [ctl[i][0] for i in order[:limit].tolist()]


def leasable(annotator: Annotator, *, kind: str | None = None, now=None, controls: bool = False):
    """The tasks :func:`lease_next` could give ``annotator`` now: open, in scope, never leased to them (an expired
    lease of theirs counts: it is offered again), with a free slot; with ``controls``, the gold controls they have
    not had too (a control has no slots: everyone answers it)."""
    now = now or timezone.now()
    qs = available_tasks(annotator)
    if not controls:
        qs = qs.filter(is_control=False)
    if kind:
        qs = qs.filter(kind=kind)
    mine = Assignment.objects.filter(annotator=annotator).exclude(status=Assignment.Status.EXPIRED).values("task_id")
    return qs.exclude(pk__in=mine).alias(active=_live_count(now)).filter(
        Q(is_control=True) | Q(active__lt=F("answers_needed")))


#: items left are counted up to this many ("1000+"): the count's cost stays bounded however long the queue
LEFT_COUNTED = 1000


def count_leasable(annotator: Annotator, *, kind: str | None = None, now=None) -> tuple[int, bool]:
    """``(n, more)``: how many items are left for ``annotator`` -- the tasks :func:`leasable` has and the gold
    controls they may still be offered -- counted up to :data:`LEFT_COUNTED` (``more``: there are more than that).
    Controls count as items do, so the count falls by one after any answer: it does not tell a control from an
    item (security review N3: it fell after an item and stayed after a control)."""
    n = leasable(annotator, kind=kind, now=now, controls=True).values("pk")[:LEFT_COUNTED + 1].count()
    return min(n, LEFT_COUNTED), n > LEFT_COUNTED


@dataclass
class Progress:
    """What a task page says of the annotator's work: answers given (of this kind), items left for them
    (``more``: at least that many)."""

    done: int
    left: int
    more: bool = False


#: seconds the count of items left for an annotator is kept (:func:`progress`); meanwhile it falls by one with each
#: item they take, answer or skip, and what others do shows at the next count
LEFT_SECONDS = 60


def progress(annotator: Annotator, kind: str, *, now=None) -> Progress:
    """``done``: the annotator's answers to tasks of ``kind``; ``left``: the items of ``kind`` they could still
    be given now plus those they hold a live lease of.

    The items they could be given (:func:`count_leasable`, the costliest query of a task page) are counted at most
    every :data:`LEFT_SECONDS` per annotator and kind; in between, each item the annotator has taken since (leased,
    answered or skipped: ``seen``) is taken off that count, which is exactly how their own work moves it.  So the
    count still falls by one after any answer, a control's as an item's (security review N3)."""
    now = now or timezone.now()
    got = _own_counts(annotator, kind, now)
    key = f"unpooled.left:v1:{annotator.pk}:{kind}"
    kept = cache.get(key)
    if kept is not None and kept[2] <= got["seen"]:
        n, more = max(0, kept[0] - (got["seen"] - kept[2])), kept[1]
    else:
        n, more = count_leasable(annotator, kind=kind, now=now)
        cache.set(key, (n, more, got["seen"]), LEFT_SECONDS)
    return Progress(done=got["done"], left=n + got["held"], more=more)


def _own_counts(annotator: Annotator, kind: str, now) -> dict[str, int]:
    """The annotator's leases of ``kind``: ``done`` (answered), ``seen`` (all but the expired), ``held`` (live
    leases of open tasks), in one plain query over their leases (the ORM's compiling of this aggregate was a
    fifth of a task page's cost; every task page reads it)."""
    from django.db import connection

    a, t = Assignment._meta.db_table, Task._meta.db_table
    sql = (f"SELECT COUNT(CASE WHEN a.status = %s THEN 1 END), COUNT(CASE WHEN a.status <> %s THEN 1 END), "
           f"COUNT(CASE WHEN a.status = %s AND a.expires >= %s AND t.status = %s THEN 1 END) "
           f'FROM "{a}" a JOIN "{t}" t ON t.id = a.task_id WHERE a.annotator_id = %s AND t.kind = %s')
    with connection.cursor() as cur:
        cur.execute(sql, [Assignment.Status.SUBMITTED, Assignment.Status.EXPIRED, Assignment.Status.LEASED,
                          connection.ops.adapt_datetimefield_value(now), Task.Status.OPEN, annotator.pk, kind])
        done, seen, held = cur.fetchone()
    return {"done": done, "seen": seen, "held": held}


def explain_empty(annotator: Annotator, kind: str, *, now=None) -> list[str]:
    """Why :func:`lease_next` has nothing of ``kind`` for ``annotator``: sentences for the empty queue page,
    from a few counting queries (open items of the kind, those out of the annotator's scope, those they
    answered or skipped, those whose slots others hold)."""
    now = now or timezone.now()
    scope = scope_of(annotator)
    open_ = Task.objects.filter(status=Task.Status.OPEN, kind=kind, is_control=False)
    n_open = open_.count()
    out: list[str] = []
    if n_open == 0:
        if kind == Kind.VERIFY:
            out.append("No verification item is open. Items appear when a new submission's sampled instances need "
                       "labels the label pool does not have yet.")
        elif kind == Kind.ENTITIES:
            out.append("No document is waiting for entity annotation. Documents appear when an organiser samples "
                       "a corpus's documents for exhaustive annotation (unpooled annotate documents).")
        else:
            waiting = Task.objects.filter(status=Task.Status.OPEN, kind=Kind.ENTITIES, is_control=False).count()
            still = f" ({waiting} entity task{'s' if waiting != 1 else ''} still open)" if waiting else ""
            if kind == Kind.CLUSTERS:
                out.append("No clustering task is open. A corpus's clustering task (grouping the entities that have "
                           "no knowledge-base link across its exhaustively annotated documents) appears once every "
                           f"sampled document's entity task has all its answers{still}, when two or more such "
                           "entities are found.")
            else:
                out.append("No document is waiting for relation annotation. A document's relations task appears "
                           f"once its entity task has all its answers{still}.")
    else:
        in_scope = _in_scope(open_, scope)
        n_scope = in_scope.count()
        if n_open > n_scope:
            why = []
            if scope.open_only:
                why.append("of corpora that take only invited annotators (an organiser's invite code, entered on "
                           "your account page, opens them)")
            if scope.teams:
                why.append("about your own team's submissions, which you may not judge")
            out.append(f"{n_open - n_scope} of the {n_open} open items are not for you: they are "
                       + " or ".join(why or ["outside what you may annotate"]) + ".")
        mine = Assignment.objects.filter(annotator=annotator, task__in=in_scope)
        answered = mine.filter(status=Assignment.Status.SUBMITTED).count()
        skipped = mine.filter(status=Assignment.Status.SKIPPED).count()
        if answered or skipped:
            parts = [f"answered {answered}"] if answered else []
            if skipped:
                parts.append(f"skipped {skipped}")
            out.append(f"You {' and '.join(parts)} of the open items; each needs its other answers from other "
                       "annotators, and nobody answers an item twice.")
        busy = n_scope - answered - skipped
        if busy > 0:
            minutes = max(1, round(min([settings_for(c).lease_seconds for c in Corpus.objects.filter(
                pk__in=in_scope.values("corpus_id"))] or [900]) / 60))
            out.append(f"{busy} open item{'s have' if busy != 1 else ' has'} all the annotators {'they' if busy != 1 else 'it'} "
                       f"need{'' if busy != 1 else 's'} working on {'them' if busy != 1 else 'it'} now; an unanswered "
                       f"lease returns after {minutes} minute{'s' if minutes != 1 else ''}: look again later.")
    crowds = {}
    for name, backend in AnnotationSettings.objects.exclude(backend=Backend.INHOUSE).values_list("corpus__name", "backend"):
        crowds.setdefault({Backend.SIMULATED: "a simulated crowd", Backend.MTURK: "Mechanical Turk workers"}.get(
            backend, Backend(backend).label), []).append(name)
    for label, names in sorted(crowds.items()):
        out.append(f"Corpus{'es' if len(names) > 1 else ''} {', '.join(sorted(names))} "
                   f"{'are' if len(names) > 1 else 'is'} answered by {label}: {'their' if len(names) > 1 else 'its'} "
                   "items are rarely open for long.")
    return out


def _control_share(offered) -> float:
    """The organisers' share of gold controls for the web queue, which takes any corpus's work: the mean of the
    corpora whose items are ``offered`` (a corpus without settings has the default), else the default.  Asked per
    corpus whether it offers one (a few corpora, each found at its first item), not by reading every item offered."""
    default = AnnotationSettings._meta.get_field("control_share").default
    ids = set(Corpus.objects.order_by().filter(Exists(offered.filter(corpus_id=OuterRef("pk"))))
              .values_list("pk", flat=True))
    if not ids:
        return default
    shares = dict(AnnotationSettings.objects.filter(corpus_id__in=ids).values_list("corpus_id", "control_share"))
    return float(np.mean([shares.get(i, default) for i in ids]))


def renew(lease: Assignment, *, now=None) -> Assignment | None:
    """``lease`` past its expiry, leased again to its annotator while the item is still theirs to take
    (:func:`_try_lease`: open, a slot free, not skipped): the same lease and token with a fresh expiry, as an answer
    posted late would be taken; else None."""
    now = now or timezone.now()
    Assignment.objects.filter(pk=lease.pk, status=Assignment.Status.LEASED, expires__lt=now).update(
        status=Assignment.Status.EXPIRED)
    return _try_lease(lease.task_id, lease.annotator, now)


def _try_lease(task_id: int, annotator: Annotator, now) -> Assignment | None:
    """Lease task ``task_id`` to ``annotator`` if it is open, the annotator may label it and has not had it, and its
    live leases and counted answers are fewer than it needs (:func:`_live`).  MTurk workers are leased through
    :func:`unpooled.service.annotation.hits.lease_for_entry`.

    The task is locked and read with its corpus's settings and whether the annotator answered its document's
    exhaustive annotation (:func:`own_exhaustive`) in one query; its live leases and the annotator's own are read
    after the lock, in one more, so that a lease committed meanwhile is seen (PostgreSQL: a later statement's
    snapshot).  A lease taken meanwhile by the same annotator (another page of theirs) trips the unique
    constraint, and the transaction is rolled back whole."""
    try:
        with transaction.atomic():
            task = (Task.objects.select_for_update(of=("self",)).select_related("corpus__annotation_settings")
                    .annotate(**own_exhaustive(annotator.pk)).get(pk=task_id))
            if (task.status != Task.Status.OPEN or annotator.blocked
                    or not may_label(annotator, task, own_exhaustive=task.own_exhaustive)):
                return None
            # the annotator's own lease of it and (not for a control: it has no slots) the live ones, in one query
            rows = Assignment.objects.filter(task=task).order_by("pk")
            if task.is_control:
                rows = list(rows.filter(annotator=annotator))
            else:
                rows = list(rows.filter(Q(annotator=annotator) | _live(now))
                            .annotate(live=ExpressionWrapper(_live(now), output_field=BooleanField())))
                if sum(bool(r.live) for r in rows) >= task.answers_needed:
                    return None
            lease = settings_of(task).lease_seconds
            old = next((r for r in rows if r.annotator_id == annotator.pk), None)
            if old is not None:
                if old.status != Assignment.Status.EXPIRED:
                    return None
                old.status, old.leased, old.expires = Assignment.Status.LEASED, now, now + timedelta(seconds=lease)
                old.save(update_fields=["status", "leased", "expires"])
                return old
            return Assignment.objects.create(task=task, annotator=annotator, token=secrets.token_urlsafe(24),
                                             leased=now, expires=now + timedelta(seconds=lease))
    except IntegrityError:
        return None


#: Skips one annotator may make in an hour (``settings.SKIPS_PER_HOUR``, ``UNPOOLED_SKIPS_PER_HOUR``): Skip is for
#: the item one cannot decide, not a way to walk the queue to chosen items (security review N17: 74 skips reached a
#: rival's items)
SKIPS_PER_HOUR = 20


class SkipRefused(Exception):
    """The annotator skipped :data:`SKIPS_PER_HOUR` items in the last hour; ``until``: when the next skip is taken."""

    def __init__(self, message: str, until):
        super().__init__(message)
        self.until = until


def release(assignment: Assignment, *, now=None) -> None:
    """Give a leased task back at once (the annotator skipped it): others may take the slot, this annotator is not
    offered the task again.  The skip's time is kept in ``expires``; more than :data:`SKIPS_PER_HOUR` in an hour are
    refused (:class:`SkipRefused`), counted under a lock per annotator so that skips at once cannot pass it."""
    now = now or timezone.now()
    limit = int(getattr(settings, "SKIPS_PER_HOUR", SKIPS_PER_HOUR))
    with locks.exclusive("skips", assignment.annotator_id):
        recent = list(Assignment.objects.filter(annotator_id=assignment.annotator_id, status=Assignment.Status.SKIPPED,
                                                expires__gt=now - timedelta(hours=1))
                      .order_by("expires").values_list("expires", flat=True)[:max(limit, 1)])
        if len(recent) >= limit:
            until = recent[0] + timedelta(hours=1) if recent else now + timedelta(hours=1)
            raise SkipRefused(f"You skipped {limit} items in the last hour, the most an hour allows: answer this one "
                              f"as best you can (the guidelines say how to decide an unclear case), or come back "
                              f"after {timezone.localtime(until):%H:%M}.", until)
        Assignment.objects.filter(pk=assignment.pk, status=Assignment.Status.LEASED).update(
            status=Assignment.Status.SKIPPED, expires=now)
