"""Who may work through ``/annotate/mturk/``: a Mechanical Turk worker on a HIT this service posted.

Mechanical Turk opens the ExternalQuestion URL of a HIT with ``hitId``, ``assignmentId``, ``workerId`` and
``turkSubmitTo`` appended, none of them signed by Amazon.  So:

* The URL the service posts names the HIT by ``hit``, its :class:`~unpooled.service.annotation.models.Hit` row's
  handle (an HMAC of its request token under the secret key: :func:`.models.link_handle`), never the task id
  (controls are made in one batch: their ids would form a block).  A link posted before carries ``task`` and
  ``sig`` (an HMAC of the task id and the request token), and still enters.  Only tasks published as HITs of a
  corpus whose backend is MTurk are reachable, and nothing is read before the link checks out (the same 404 for
  an unknown handle or task, a bad signature, another backend or no HIT).
* ``hitId`` must be the HIT the service created for the task (or the row's id is still unknown after a crash,
  until reconciliation adopts it); an ``assignmentId`` serves one worker only; ids look like Amazon's.
* A new lease needs the HIT live and its task open, and the HIT's live leases are capped
  (:data:`LIVE_LEASES_PER_ASSIGNMENT`); they never count against in-house annotators' slots.
* ``turkSubmitTo`` is one of the two MTurk hosts, nothing else (it becomes a form's action).
* The answer is stored *quarantined*: it counts only once the MTurk API lists the assignment for the HIT,
  by the same worker, with the lease's token in its answer
  (:func:`unpooled.service.crowd.mturk_sync.collect`, :func:`.actions.confirm_mturk_answer`).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from . import actions, leasing
from .models import Annotator, Answer, Assignment, Backend, Hit, Task, link_handle

#: where a worker's browser may finish an assignment (``turkSubmitTo``): production and the sandbox
MTURK_SUBMIT_HOSTS = ("https://www.mturk.com", "https://workersandbox.mturk.com")
PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
_SALT = "unpooled.annotation.mturk-task"
_ID = re.compile(r"^[A-Z0-9]{10,64}$")   # Amazon's HIT, assignment and worker ids: upper-case letters and digits


class EntryRefused(actions.AnnotationError):
    """An ``/annotate/mturk/`` request that is refused; ``status`` is the HTTP status, the message says why."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def signature(task_id: int, request_token: str) -> str:
    return signing.Signer(salt=_SALT).signature(f"{task_id}:{request_token}")


def task_query(task: Task, hit: Hit) -> str:
    """The query string of the task's ExternalQuestion URL: ``hit=<the HIT's handle>`` (nothing of the task)."""
    return f"hit={hit.link or link_handle(hit.request_token)}"


_LINK = re.compile(r"^[A-Za-z0-9_-]{43}$")

@dataclass
class Entry:
    task: Task
    hit: Hit
    preview: bool
    hit_id: str = ""
    assignment_id: str = ""
    worker_id: str = ""
    submit_to: str = MTURK_SUBMIT_HOSTS[1]


NOT_PUBLISHED = "no HIT of this service has this link (the task is unknown, not on Mechanical Turk, or the link " \
                "is not the one the service posted)"


def check_entry(params) -> Entry:
    """Check the query of an ``/annotate/mturk/`` request (a mapping of strings); raises :class:`EntryRefused`."""
    hit = _linked_hit(params)
    if hit is None or actions.settings_for(hit.task.corpus).backend != Backend.MTURK:
        raise EntryRefused(NOT_PUBLISHED, 404)
    entry = Entry(task=hit.task, hit=hit, preview=False)
    assignment_id = params.get("assignmentId", "")
    if not assignment_id or assignment_id == PREVIEW:
        entry.preview = True
        return entry
    for name in ("hitId", "assignmentId", "workerId"):
        v = params.get(name, "")
        if not _ID.match(v):
            raise EntryRefused(f"{name}: expected a Mechanical Turk id (10-64 upper-case letters and digits), "
                               f"got {v[:70]!r}", 400)
    entry.hit_id, entry.assignment_id, entry.worker_id = params["hitId"], assignment_id, params["workerId"]
    # a row without its id (CreateHIT reached Amazon, the process died before recording it) takes the entry's: only
    # the assignments Amazon lists under the id reconciliation adopts are ever confirmed, and the live leases are
    # capped as on any HIT
    if (hit.hit_id and hit.hit_id != entry.hit_id) or entry.hit_id in {e["hit_id"] for e in hit.earlier or []}:
        raise EntryRefused("hitId: not the HIT this service posted for this task", 403)
    submit_to = params.get("turkSubmitTo", "") or MTURK_SUBMIT_HOSTS[1]
    if submit_to.rstrip("/") not in MTURK_SUBMIT_HOSTS:
        raise EntryRefused(f"turkSubmitTo: expected {' or '.join(MTURK_SUBMIT_HOSTS)}, got {submit_to[:100]!r}", 400)
    entry.submit_to = submit_to.rstrip("/")
    return entry


def _linked_hit(params) -> Hit | None:
    """The HIT row the entry's link names (``hit``: its handle; a link posted before: ``task`` and ``sig``), else
    None; raises :class:`EntryRefused` on a malformed link."""
    rows = Hit.objects.select_related("task", "task__corpus")
    if "hit" in params:
        link = params.get("hit", "")
        if not _LINK.match(link):
            raise EntryRefused("hit: not the link of a HIT of this service", 400)
        return rows.filter(link=link).first()
    task_id, sig = params.get("task", ""), params.get("sig", "")
    if not task_id.isdigit() or len(task_id) > 18:
        raise EntryRefused("hit: missing (the link names no HIT)", 400)
    hit = rows.filter(task_id=int(task_id)).first()
    if hit is None or not sig or not constant_time_compare(signature(int(task_id), hit.request_token), sig):
        return None
    return hit


#: live (unanswered, unexpired) leases one HIT may have at once, per assignment it takes: a made-up worker takes a
#: lease for its lifetime only, and real workers finish on Amazon's side whatever the count (security review N4)
LIVE_LEASES_PER_ASSIGNMENT = 2


def lease_for_entry(entry: Entry, *, now=None) -> Assignment:
    """The lease of the entry's task for its worker and assignment; raises :class:`EntryRefused`.

    A reload (the same assignment) returns the same lease, renewed if it expired unanswered.  Each assignment has
    a lease of its own, bound to it: an entry never takes over another assignment's lease or answer, and a
    made-up assignment under a real worker's id does not keep the real one out (only the assignment Mechanical Turk
    lists for that worker is ever confirmed).  A new lease needs the HIT live (not expired), its task open and
    fewer than :data:`LIVE_LEASES_PER_ASSIGNMENT` live leases per assignment of the HIT; a worker with a
    confirmed answer to the task takes no second."""
    now = now or timezone.now()
    ref = f"{entry.hit_id}/{entry.assignment_id}"
    if entry.assignment_id in (entry.hit.rejected or []):
        raise EntryRefused("assignmentId: this assignment was rejected already", 409)
    other = (Assignment.objects.filter(annotator__backend=Backend.MTURK, external_ref__endswith=f"/{entry.assignment_id}")
             .exclude(task=entry.task, annotator__external_id=entry.worker_id))
    if other.exists():
        raise EntryRefused("assignmentId: this assignment is another worker's, or another task's", 409)
    ann = Annotator.objects.filter(backend=Backend.MTURK, external_id=entry.worker_id).first()
    if ann is not None and ann.blocked:
        raise EntryRefused("this worker is blocked: " + (ann.blocked_reason or "no reason recorded"), 403)
    lease = Assignment.objects.filter(task=entry.task, annotator=ann, external_ref=ref).first() if ann else None
    if lease is not None:
        changed = []
        if lease.status != Assignment.Status.SUBMITTED and (lease.status != Assignment.Status.LEASED
                                                            or lease.expires < now):
            # the same assignment back after the lease's time (Amazon's assignment may last longer, and Amazon
            # says whether it was submitted in time): renewed
            lease.status, lease.leased = Assignment.Status.LEASED, now
            lease.expires = now + timedelta(seconds=actions.settings_for(entry.task.corpus).lease_seconds)
            changed += ["status", "leased", "expires"]
        if lease.submit_to != entry.submit_to:
            lease.submit_to = entry.submit_to
            changed.append("submit_to")
        if changed:  # a plain reload writes nothing
            lease.save(update_fields=changed)
        return lease
    return _new_lease(entry, ann, ref, now)


def _new_lease(entry: Entry, ann: Annotator | None, ref: str, now) -> Assignment:
    """A lease for an assignment the service has not seen (:func:`lease_for_entry`'s rules)."""
    hit = entry.hit
    if hit.status in ("expired", "settled") or (hit.expires is not None and hit.expires < now):
        raise EntryRefused("this HIT has ended: it takes no new worker", 410)
    if ann is not None and Answer.objects.filter(task=entry.task, annotator=ann, quarantined=False).exists():
        raise EntryRefused("this worker has answered this task already", 409)
    lease_seconds = actions.settings_for(entry.task.corpus).lease_seconds
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=entry.task.pk)
        if task.status != Task.Status.OPEN:
            raise EntryRefused("this item needs no more answers", 409)
        live = Assignment.objects.filter(task=task, annotator__backend=Backend.MTURK, status=Assignment.Status.LEASED,
                                         expires__gte=now).count()
        if live >= LIVE_LEASES_PER_ASSIGNMENT * max(hit.max_assignments, 1):
            raise EntryRefused(f"this HIT has as many workers on it as it takes; try again in "
                               f"{max(1, lease_seconds // 60)} minutes", 409)
        if ann is None:
            ann, _ = Annotator.objects.get_or_create(backend=Backend.MTURK, external_id=entry.worker_id)
        if not leasing.may_label(ann, task):
            raise EntryRefused("this worker may not answer this item", 403)
        try:
            with transaction.atomic():
                return Assignment.objects.create(
                    task=task, annotator=ann, external_ref=ref, submit_to=entry.submit_to,
                    token=secrets.token_urlsafe(24), leased=now, expires=now + timedelta(seconds=lease_seconds))
        except IntegrityError:  # the same assignment entered twice at once: the other request's lease
            return Assignment.objects.get(task=task, annotator=ann, external_ref=ref)
