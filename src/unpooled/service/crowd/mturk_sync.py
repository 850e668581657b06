"""Mechanical Turk as an annotation backend: publish open tasks as HITs, pay for answers, reconcile.

Workers open our own task page inside the HIT (ExternalQuestion: ``/annotate/mturk/?hit=…``, a
link signed by the service: :mod:`unpooled.service.annotation.hits`); their answers are stored by the
page like an in-house annotator's, but *quarantined*: nothing in the page's request proves that the
worker and assignment are real.  This module moves HITs and money, and confirms answers:

* :func:`publish` writes the :class:`~unpooled.service.annotation.models.Hit` row with its
  request token *before* calling ``CreateHIT``; a crash in between is repaired by
  :func:`reconcile_corpus` (the HIT is found by its ``RequesterAnnotation`` and adopted).
* :func:`collect` asks Mechanical Turk for the HIT's submitted (and auto-approved) assignments: an
  answer whose lease matches one (same HIT, assignment and worker, and the lease's token in the
  assignment's answer) is confirmed (it now counts and costs) and the assignment approved; a submitted
  assignment without such an answer is rejected, with a reason.  Answers no assignment confirms stay
  quarantined: they never reach a label and nothing is paid for them.  :func:`reconcile_corpus` also
  confirms what it finds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from unpooled.core.annotation.mturk_fees import (LARGE_HIT_ASSIGNMENTS, assignment_cost_cents, fee_cents,
                                                  hit_cost_cents)
from unpooled.service.annotation import actions, hits
from unpooled.service.annotation.models import Annotator, Answer, Assignment, Backend, Hit, Kind, Task, link_handle
from unpooled.service.corpora.models import Corpus

from .mturk import LocalHit, MTurkBackend, MTurkError, dollars, reconcile, request_token, trouble

log = logging.getLogger(__name__)

#: what a call to Amazon raises when it fails (a refusal, a fault, no connection, no credentials): reported, and the
#: sync goes on; anything else (the database's errors) goes up
AMAZON_FAILED = (MTurkError, BotoCoreError)

#: a lease is discarded this long after an assignment's duration, if Mechanical Turk has not listed its assignment
DISCARD_AFTER_SECONDS = 3600

TITLES = {Kind.VERIFY: "Does this sentence state the relation?", Kind.ENTITIES: "Mark the names in a short text",
          Kind.RELATIONS: "Which relations does each sentence state?",
          Kind.CLUSTERS: "Which of these names are the same entity?"}


def hit_description(task: Task) -> str:
    """What a worker reads in the HIT list before accepting: what the task asks and how big this one is (Amazon
    shows the description beside the title; a size lets a worker judge the reward)."""
    p = task.payload or {}
    if task.kind == Kind.VERIFY:
        return ("Read one sentence from a document and say whether it states the given relation between the two "
                "highlighted names. A few seconds; some items are checked against known answers.")
    if task.kind == Kind.ENTITIES:
        words = len((task.document.text or "").split()) if task.document_id else 0
        return (f"Mark every name of a person, organisation, place or other entity in a text of about {words:,} words, "
                "give its type and group the names that refer to the same entity.")
    if task.kind == Kind.RELATIONS:
        return (f"For {len(p.get('pairs', [])):,} pairs of names in the sentences of a document, choose the relations "
                "each sentence states between them (or none).")
    return (f"Group {len(p.get('items', [])):,} names, each shown with its sentence, that refer to the same "
            "person, organisation or place (keyboard: a letter puts a name in a group).")


def item_token(task: Task | int) -> str:
    """The HIT's ``RequesterAnnotation``: which task (or task id) it is for."""
    return f"unpooled:task:{task if isinstance(task, int) else task.pk}"


def annotations(hit: Hit) -> list[str]:
    """The ``RequesterAnnotation`` of each HIT posted for ``hit``'s task, the current one last: the first is
    :func:`item_token`, a HIT that took over from a settled one (:func:`_replace`) adds ``/2``, ``/3``…, so that a
    lookup by annotation never finds the one before."""
    base = item_token(hit.task_id)
    return [base] + [f"{base}/{k}" for k in range(2, len(hit.earlier or []) + 2)]


@dataclass
class SyncReport:
    created: int = 0
    approved: int = 0
    rejected: int = 0
    adopted: int = 0
    confirmed: int = 0
    extended: int = 0       # HITs given more assignments (their task asked for more answers)
    discarded: int = 0      # leases no assignment can vouch for any more (made up, or abandoned), deleted
    over_budget: int = 0    # HITs not posted, or not given more assignments: the corpus budget would not bear them
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def question_url(base_url: str, task: Task, hit: Hit) -> str:
    """The ExternalQuestion URL of ``task``'s HIT: the entry page with the signed task link."""
    return f"{base_url.rstrip('/')}/annotate/mturk/?{hits.task_query(task, hit)}"


def _lease_of(hit: Hit, assignment: dict) -> Assignment | None:
    """Our lease matching an assignment Mechanical Turk listed for ``hit``: same task, worker and assignment
    id, the HIT id recorded at entry equal to the HIT's, and the lease's token in the assignment's answer."""
    aid, token = assignment["AssignmentId"], (assignment.get("answers") or {}).get("unpooled_token", "")
    lease = Assignment.objects.filter(task=hit.task, annotator__backend=Backend.MTURK,
                                      annotator__external_id=assignment.get("WorkerId", ""),
                                      external_ref=f"{hit.hit_id}/{aid}").first()
    if lease is None or not token or token != lease.token or assignment.get("HITId", hit.hit_id) != hit.hit_id:
        return None
    return lease


def confirm(hit: Hit, assignment: dict) -> Assignment | None:
    """Confirm the quarantined answer an assignment listed by Mechanical Turk vouches for (see
    :func:`_lease_of`); returns the lease whose answer is stored (confirmed now or before), else None."""
    lease = _lease_of(hit, assignment)
    if lease is None or not hasattr(lease, "answer"):
        return None
    actions.confirm_mturk_answer(lease)
    return lease


def publish(corpus: Corpus, backend: MTurkBackend, base_url: str, *, limit: int | None = None) -> SyncReport:
    """Post one HIT per open task of ``corpus`` that has none (controls included, with as many assignments as an
    item's), and post again a HIT whose CreateHIT failed (its row has no HIT id yet; same request token, so never
    twice).

    A HIT pays the corpus's reward for its kind (:class:`~unpooled.service.annotation.models.AnnotationSettings`),
    recorded on its row: the one its confirmed answers cost.  A HIT is posted (or given more assignments) only while
    what Amazon may charge for all the corpus's HITs, fees included (:mod:`unpooled.core.annotation.mturk_fees`),
    stays within the corpus budget; the others wait (``over_budget``)."""
    from unpooled.service.locks import exclusive

    rep = SyncReport()
    st = actions.settings_for(corpus)
    with exclusive("mturk-publish", corpus.pk):   # two publishers would both see the same budget left
        budget = _Budget(corpus, st)
        tasks = _unposted(corpus)
        known: dict[str, dict] | None = None   # Amazon's HITs by RequesterAnnotation, listed once if needed
        unlisted = False
        if not base_url and tasks.exists():   # the HITs' link has no host: nothing is posted, the rest goes on
            rep.errors.append(NO_PUBLIC_URL)
            tasks = tasks.none()
        for task in tasks[:limit] if limit else tasks:
            hit = getattr(task, "hit", None)
            if hit is None:
                n, reward = _new_hit(task, st)
                if not budget.take(hit_cost_cents(reward, n)):
                    rep.over_budget += 1
                    continue
                with transaction.atomic():
                    hit, _ = Hit.objects.get_or_create(task=task, defaults={
                        "request_token": request_token("task", task.pk, 0), "max_assignments": n,
                        "reward_cents": reward})
            elif hit.created < timezone.now() - timedelta(hours=TOKEN_HOURS):
                # Amazon forgets a request token after a day: a HIT posted then is found by its annotation
                if known is None:   # listed once; {} with an error reported when Amazon could not list them
                    known, unlisted = _amazon_hits(backend, rep)
                if unlisted:
                    continue
                if annotations(hit)[-1] in known:
                    _posted(hit, known[annotations(hit)[-1]], backend, rep)
                    continue
            _post(task, hit, backend, base_url, st, rep)
        _extend(corpus, backend, rep, budget, base_url)
    if rep.over_budget:
        rep.errors.append(f"{rep.over_budget} HIT(s) not posted or given more assignments: what Amazon may charge "
                          f"for them, its fee included, would pass the corpus budget of ${dollars(budget.limit)} "
                          f"(${dollars(budget.used)} requested already)")
    return rep


def _unposted(corpus: Corpus):
    """The open tasks publishing posts a HIT for (none yet, or its CreateHIT not answered), items first: controls get
    what the items leave of the budget."""
    return (Task.objects.filter(corpus=corpus, status=Task.Status.OPEN)
            .filter(Q(hit__isnull=True) | Q(hit__hit_id="")).select_related("document", "hit")
            .order_by("is_control", "priority", "id"))


def _new_hit(task: Task, st) -> tuple[int, int]:
    """The assignments and reward (cents) of a new HIT for ``task``: a control's HIT takes as many assignments as an
    item's (its capacity does not tell it apart)."""
    return (st.answers_per_item if task.is_control else task.answers_needed or 1), st.reward_cents(task.kind)


def held_back(corpus: Corpus, st=None) -> dict:
    """What publishing leaves waiting for the budget now, as it would post (items first, then more assignments):
    ``hits``, how many HITs are not posted or not given their assignments, and ``raise_cents``, by how much raising
    the corpus budget (``budget_cents``) would post them all, rewards and Amazon's fee (core mturk_fees)."""
    st = st or actions.settings_for(corpus)
    if st.budget_cents is None:
        return {"hits": 0, "raise_cents": 0, "budget_cents": None}
    budget = _Budget(corpus, st)
    costs = [hit_cost_cents(reward, n) for n, reward in
             (_new_hit(t, st) for t in _unposted(corpus) if getattr(t, "hit", None) is None)]
    costs += [cost for _, _, _, cost in _shortfalls(corpus, st)]
    waiting = [c for c in costs if not budget.take(c)]
    return {"hits": len(waiting), "raise_cents": max(0, budget.used + sum(waiting) - budget.limit) if waiting else 0,
            "budget_cents": budget.limit}


def held_back_sentence(held: dict) -> str:
    """What :func:`held_back` found, in a sentence for the organiser ("" when nothing waits)."""
    n = held["hits"]
    if not n:
        return ""
    return (f"{n} HIT{' waits' if n == 1 else 's wait'} for the budget: raising the corpus budget by "
            f"${dollars(held['raise_cents'])} (to ${dollars(held['budget_cents'] + held['raise_cents'])}) would post "
            f"{'it' if n == 1 else 'them'} (rewards and Amazon's fee)")


NO_PUBLIC_URL = ("no HIT posted: UNPOOLED_PUBLIC_URL, the public URL of this service that HITs send workers to, is "
                 "not set in the environment of the server's processes")

#: Amazon keeps a CreateHIT's UniqueRequestToken for 24 hours; a row pending longer is looked up before a retry
TOKEN_HOURS = 23


def requested(corpus: Corpus, st=None) -> dict:
    """What the corpus's HITs asked of Amazon (posted, or being posted), every assignment approved: ``assignments``,
    ``reward_cents`` (their rewards), ``fee_cents`` (Amazon's fee on them) and ``requested_cents`` (the sum); and
    ``rejected_cents``, what the assignments rejected would have cost (Amazon pays nothing for them)."""
    st = st or actions.settings_for(corpus)
    hits = Hit.objects.filter(task__corpus=corpus)
    n = reward = fee = rejected = 0

    def add(k: int, m: int, r: int, nos: int) -> None:  # k HITs of m assignments at r cents, nos rejected in all
        nonlocal n, reward, fee, rejected
        n, reward, fee = n + k * m, reward + k * m * r, fee + k * m * fee_cents(r, m)
        rejected += nos * assignment_cost_cents(r, m)

    # the HITs as they stand, grouped in the database (a page view reads a row per reward and size, not per HIT);
    # their rejections and earlier HITs (extensions past Amazon's limit: few) from the rows that have them
    for r, m, kind, k in (hits.values("reward_cents", "max_assignments", "task__kind").annotate(k=Count("id"))
                          .values_list("reward_cents", "max_assignments", "task__kind", "k")):
        add(k, m, st.reward_cents(kind) if r is None else r, 0)
    for hit in hits.exclude(rejected=[], earlier=[]).select_related("task").only(
            "reward_cents", "max_assignments", "rejected", "earlier", "task__kind"):
        add(0, hit.max_assignments, hit.reward(st), len(hit.rejected or []))
        for e in hit.earlier or []:
            add(1, e["assignments"], e["reward_cents"], len(e["rejected"]))
    return {"assignments": n, "reward_cents": reward, "fee_cents": fee, "requested_cents": reward + fee,
            "rejected_cents": rejected}


class _Budget:
    """What Amazon may charge for the corpus's HITs (every assignment not rejected approved, its fee included) and
    the other backends' answers cost, against the corpus budget (None: no limit)."""

    def __init__(self, corpus: Corpus, st) -> None:
        self.limit, self.st = st.budget_cents, st
        others = Answer.objects.filter(task__corpus=corpus).exclude(annotator__backend=Backend.MTURK)
        asked = requested(corpus, st)   # a rejected assignment costs nothing: its slot may be posted again
        self.used = (asked["requested_cents"] - asked["rejected_cents"]
                     + (others.aggregate(s=Sum("cost_cents"))["s"] or 0))

    def take(self, cents: int) -> bool:
        """Count ``cents`` more if the budget allows them."""
        if self.limit is not None and self.used + cents > self.limit:
            return False
        self.used += cents
        return True


def _amazon_hits(backend: MTurkBackend, rep: SyncReport) -> tuple[dict[str, dict], bool]:
    """The account's HITs by ``RequesterAnnotation``, and whether listing them failed (reported in ``rep``)."""
    try:
        return {h.get("RequesterAnnotation") or "": h for h in backend.list_hits()}, False
    except AMAZON_FAILED as exc:  # reported; the next publish looks again
        rep.errors.append(_failed("HITs", "listing them", exc, backend))
        return {}, True


def _post(task: Task, hit: Hit, backend: MTurkBackend, base_url: str, st, rep: SyncReport) -> None:
    reward = hit.reward(st)
    try:
        got = backend.create_hit(annotations(hit)[-1], question_url(base_url, task, hit),
                                 task_type=task.kind, max_assignments=hit.max_assignments, title=TITLES[task.kind],
                                 description=hit_description(task), request_token=hit.request_token,
                                 reward=dollars(reward))
    except Exception as exc:  # noqa: BLE001 - recorded; the row stays pending and the next publish posts it again
        rep.errors.append(_failed(f"task {task.pk}", "CreateHIT", exc, backend))
        return
    _posted(hit, got, backend, rep, reward)


def _posted(hit: Hit, got: dict, backend: MTurkBackend, rep: SyncReport, reward: int | None = None) -> None:
    """Record HIT ``got`` (Amazon's) on ``hit``'s row."""
    Hit.objects.filter(pk=hit.pk).update(hit_id=got["HITId"], status="posted",
                                         expires=_link_expiry(backend, got.get("Expiration")),
                                         reward_cents=hit.reward_cents if reward is None else reward)
    rep.created += 1


def _link_expiry(backend: MTurkBackend, expiration) -> datetime:
    """When a HIT's link stops taking new workers (:attr:`Hit.expires`): the HIT's expiration (Amazon's, else a
    lifetime from now), plus the time a worker who accepted it just before then has to finish."""
    if not isinstance(expiration, datetime):
        expiration = timezone.now() + timedelta(seconds=backend.config.lifetime_seconds)
    return expiration + timedelta(seconds=backend.config.assignment_seconds)


def _extend(corpus: Corpus, backend: MTurkBackend, rep: SyncReport, budget: _Budget, base_url: str) -> None:
    """Open tasks whose HIT can no longer bring the answers they need get more assignments on the same HIT, open
    for another lifetime (an expired HIT takes workers again): a task asked for more answers (an item of a relation
    the crowd judges weakly: :func:`unpooled.service.annotation.actions.request_more_answers`), or one whose
    assignments were used up by answers that do not count (rejected assignments, a blocked worker's answers).  The
    assignments Amazon may still hand out or has not settled count as answers to come; a HIT that ended with
    assignments untaken is opened again with them first.  Amazon extends no HIT from
    fewer than 10 assignments to 10 or more: such a HIT gets 9, and once it is settled a new HIT takes the rest
    (:func:`_replace`)."""
    for hit, replace, n, cost in _shortfalls(corpus, budget.st):
        if replace and not base_url:   # a new HIT needs the public URL: publish reported it missing
            continue
        if not budget.take(cost):
            rep.over_budget += 1
            continue
        if replace:
            _replace(hit, n, backend, base_url, budget.st, rep)
            continue
        try:
            backend.extend_hit(hit.hit_id, extra_assignments=n - hit.max_assignments,
                               extra_seconds=backend.config.lifetime_seconds,
                               request_token=request_token("task", hit.task_id, n))
        except Exception as exc:  # recorded; the next publish tries again
            rep.errors.append(_failed(f"task {hit.task_id}", "extending its HIT", exc, backend))
            continue
        Hit.objects.filter(pk=hit.pk).update(max_assignments=n, status="posted",
                                             expires=max(filter(None, [hit.expires, _link_expiry(backend, None)])))
        rep.extended += 1


def _shortfalls(corpus: Corpus, st):
    """The HITs of open items that can no longer bring the answers they need (:func:`_extend`): ``(hit, replace,
    n, cost)``, the assignments the HIT should have (``replace``: those of a new HIT in place of the settled one),
    and what the added ones may cost (rewards and Amazon's fee)."""
    hits = (Hit.objects.filter(task__corpus=corpus, task__status=Task.Status.OPEN, task__is_control=False)
            .exclude(hit_id="").select_related("task").order_by("id")
            .annotate(counted=Count("task__answers", filter=Q(task__answers__weight__gt=0,
                                                              task__answers__annotator__blocked=False))))
    for hit in hits:
        untaken = max(0, hit.max_assignments - len(set(hit.approved) | set(hit.rejected)))
        # a settled HIT brings nothing more; opened again, its untaken assignments (ended unused) come first
        ended = hit.status == SETTLED
        need = hit.task.answers_needed - hit.counted - (0 if ended else untaken)
        if need <= 0:
            continue
        short = max(0, need - untaken) if ended else need   # the assignments to add
        m, reward = hit.max_assignments, hit.reward(st)
        if m < LARGE_HIT_ASSIGNMENTS <= m + short:   # Amazon refuses to extend a HIT across its large-HIT fee
            if m < LARGE_HIT_ASSIGNMENTS - 1:
                short = LARGE_HIT_ASSIGNMENTS - 1 - m   # what it takes; the rest once the HIT is settled
            elif ended:   # nothing more comes from it: a new HIT asks the answers still needed
                yield hit, True, need, hit_cost_cents(reward, need)
                continue
            else:
                continue
        yield hit, False, m + short, hit_cost_cents(reward, m + short) - hit_cost_cents(reward, m)


def _replace(hit: Hit, n: int, backend: MTurkBackend, base_url: str, st, rep: SyncReport) -> None:
    """Post a new HIT of ``n`` assignments for ``hit``'s task in place of its settled one: the old HIT's id, size,
    reward and settled assignments move to ``earlier`` (the budget still counts them), and the row, written before
    the call with a request token, link and annotation of its own, is posted as any pending row (a failed call is
    posted again by the next publish, never twice)."""
    token = request_token("task", hit.task_id, "hit", len(hit.earlier or []) + 2)
    with transaction.atomic():
        row = Hit.objects.select_for_update().get(pk=hit.pk)
        if row.hit_id != hit.hit_id or row.status != SETTLED:   # another sync changed it meanwhile
            return
        old = {"hit_id": row.hit_id, "assignments": row.max_assignments, "reward_cents": row.reward(st),
               "approved": row.approved, "rejected": row.rejected}
        Hit.objects.filter(pk=row.pk).update(
            earlier=(row.earlier or []) + [old], hit_id="", request_token=token, link=link_handle(token),
            max_assignments=n, approved=[], rejected=[], status="pending", expires=None, created=timezone.now())
    hit.refresh_from_db()
    _post(hit.task, hit, backend, base_url, st, rep)


def _failed(what: str, doing: str, exc: Exception, backend: MTurkBackend) -> str:
    """The report's line on a call to Amazon that failed (:func:`~.mturk.trouble`: a fixed sentence); the
    exception's text goes to the log only."""
    log.warning("mturk %s: %s failed: %s", what, doing, exc)
    tries = backend.config.max_retries + 1 if isinstance(exc, MTurkError) else 1
    return f"{what}: {doing}: {trouble(exc, tries)}"


def unsettled(corpus: Corpus):
    """The corpus's HITs posted at Amazon and not settled: workers may still submit to them, and what they submit
    must be reviewed before Amazon's auto-approval pays it, whatever backend the corpus uses now."""
    return Hit.objects.filter(task__corpus=corpus).exclude(hit_id="").exclude(status=SETTLED)


def collect(corpus: Corpus, backend: MTurkBackend) -> SyncReport:
    """Confirm and approve assignments whose answers we stored; reject submitted ones without an answer;
    expire finished HITs, and every HIT once the corpus has left Mechanical Turk (its entry page turns workers
    away).  A call Amazon fails (busy, unreachable, an assignment it no longer knows) is
    reported in ``errors`` and the sync goes on: what it did is recorded, the next one tries the rest again."""
    rep = SyncReport()
    left = actions.settings_for(corpus).backend != Backend.MTURK
    for hit in unsettled(corpus).select_related("task").order_by("id"):
        try:  # all of them first: a HIT listed in part would have its unlisted answers discarded
            listed = list(backend.list_assignments(hit.hit_id, statuses=("Submitted", "Approved")))
        except AMAZON_FAILED as exc:  # reported; the next sync lists it again
            rep.errors.append(_failed(f"HIT {hit.hit_id}", "listing its assignments", exc, backend))
            continue
        approved, rejected = set(hit.approved), set(hit.rejected)
        for a in listed:
            try:
                _settle(hit, a, backend, rep, approved, rejected)
            except AMAZON_FAILED as exc:  # reported; the next sync settles it
                rep.errors.append(_failed(f"HIT {hit.hit_id}", f"assignment {a['AssignmentId']}", exc, backend))
        rep.discarded += _discard_made_up(hit, {a["AssignmentId"] for a in listed}, backend)
        status, expires, now = hit.status, hit.expires, timezone.now()
        hit.task.refresh_from_db(fields=["status"])
        if (left or hit.task.status != Task.Status.OPEN) and status != "expired":
            try:
                backend.expire_hit(hit.hit_id)
                # a worker who accepted it just before may still submit, for an assignment's duration
                status, expires = "expired", min(filter(None, [expires, now + timedelta(
                    seconds=backend.config.assignment_seconds)]))
            except AMAZON_FAILED as exc:  # reported; the next sync expires it
                rep.errors.append(_failed(f"HIT {hit.hit_id}", "expiring it", exc, backend))
        waiting = any(a.get("AssignmentStatus") == "Submitted" and a["AssignmentId"] not in approved | rejected
                      for a in listed)
        if (not waiting and (len(approved | rejected) >= hit.max_assignments or (expires is not None and expires < now))
                and not _unconfirmed(hit)):
            status = SETTLED   # nothing more can come: not listed again, unless it is given more assignments
        _record(hit, approved, rejected, status, expires)
    return rep


def _record(hit: Hit, approved: set, rejected: set, status: str, expires) -> None:
    """Write what a collect settled on ``hit``'s row, merged with what another sync of the corpus (each submission
    annotating on it polls it) wrote meanwhile: no assignment id is lost, and a HIT given more assignments
    meanwhile keeps its status (posted: it is listed again)."""
    with transaction.atomic():
        row = Hit.objects.select_for_update().get(pk=hit.pk)
        if row.max_assignments != hit.max_assignments or (row.status != hit.status and status == hit.status):
            status, expires = row.status, row.expires   # changed meanwhile by the other: its word stands
        Hit.objects.filter(pk=hit.pk).update(approved=sorted(approved | set(row.approved)),
                                             rejected=sorted(rejected | set(row.rejected)), status=status,
                                             expires=expires)


#: a HIT's status once every assignment it can take is approved or rejected, or it ended and no worker can still
#: submit (:func:`collect` lists it no more; :func:`_extend` posts it again when its task asks for more answers)
SETTLED = "settled"


def _settle(hit: Hit, a: dict, backend: MTurkBackend, rep: SyncReport, approved: set, rejected: set) -> None:
    """Confirm and approve one assignment Amazon listed for ``hit``, or reject it when no answer of ours is its
    (``approved`` and ``rejected``: the HIT's assignment ids, updated)."""
    aid = a["AssignmentId"]
    if aid in rejected:
        return
    lease = confirm(hit, a)
    if lease is not None:
        rep.confirmed += 1
        if aid not in approved:
            if a.get("AssignmentStatus") != "Approved":
                backend.approve(aid)
                rep.approved += 1
            approved.add(aid)
    elif a.get("AssignmentStatus") == "Submitted" and aid not in approved:
        backend.reject(aid, "No answer was recorded for this assignment on the task page.")
        rejected.add(aid)
        rep.rejected += 1


def _unconfirmed(hit: Hit) -> bool:
    """Whether ``hit``'s task has MTurk leases no assignment confirmed yet (:func:`_discard_made_up` deletes them
    in time: the HIT is listed until then)."""
    return (Assignment.objects.filter(task=hit.task, annotator__backend=Backend.MTURK)
            .exclude(answer__quarantined=False).exists())


def _discard_made_up(hit: Hit, listed: set[str], backend: MTurkBackend, *, now=None) -> int:
    """Delete the leases of ``hit`` (and their quarantined answers) that no assignment Mechanical Turk listed
    (``listed``: its ids) can still vouch for: leased longer ago than an assignment lasts, and not listed, so made up
    or abandoned.  Anyone who saw the HIT's link can make such rows up (security review N4): they live an
    assignment's duration, not for ever.  Returns how many were deleted."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=backend.config.assignment_seconds + DISCARD_AFTER_SECONDS)
    rows = (Assignment.objects.filter(task=hit.task, annotator__backend=Backend.MTURK, leased__lt=cutoff)
            .exclude(answer__quarantined=False).values_list("pk", "external_ref", "annotator_id"))
    stale = [(pk, ann) for pk, ref, ann in rows if ref.rsplit("/", 1)[-1] not in listed]
    if not stale:
        return 0
    with transaction.atomic():
        Assignment.objects.filter(pk__in=[pk for pk, _ in stale]).delete()
        # the workers made up with them (no other lease, never blocked: a block is kept)
        Annotator.objects.filter(pk__in={ann for _, ann in stale}, blocked=False, assignments__isnull=True,
                                 answers__isnull=True).delete()
    return len(stale)


def reconcile_corpus(corpus: Corpus, backend: MTurkBackend, *, expire_orphans: bool = False) -> dict:
    """Compare the local HIT rows with Mechanical Turk and repair lost HIT ids."""
    rows = list(Hit.objects.filter(task__corpus=corpus).select_related("task"))
    local = [LocalHit(annotations(h)[-1], h.hit_id or None, h.request_token, h.max_assignments) for h in rows]
    known = {aid for h in rows for aid in h.approved + h.rejected}
    # the account's HITs of the other corpora are theirs, and this corpus's settled earlier ones known: no orphans
    foreign = {a for h in Hit.objects.exclude(task__corpus=corpus).only("task_id", "earlier") for a in annotations(h)}
    foreign |= {a for h in rows for a in annotations(h)[:-1]}
    rep = reconcile(backend, local, known_assignments=known, expire_orphans=expire_orphans, foreign=foreign)
    by_token = {annotations(h)[-1]: h for h in rows}
    for token, hid in rep.adopted.items():
        Hit.objects.filter(pk=by_token[token].pk).update(hit_id=hid, status="posted")
        by_token[token].hit_id = hid
    out = rep.to_dict()
    # the submitted assignments Mechanical Turk listed vouch for our quarantined answers (collect pays them)
    out["confirmed"] = sum(confirm(by_token[a["item_token"]], a) is not None for a in rep.new_assignments
                           if a.get("item_token") in by_token)
    return out
