"""Who may work through ``/annotate/mturk/``: a Mechanical Turk worker on a HIT this service posted.

Mechanical Turk opens the ExternalQuestion URL of a HIT with ``hitId``, ``assignmentId``, ``workerId`` and
``turkSubmitTo`` appended, none of them signed by Amazon.  So:

* The URL the service posts carries ``sig``, an HMAC (Django's signing, the secret key) of the task id and
  its :class:`~unpooled.service.annotation.models.Hit` row's request token: only tasks published as HITs
  of a corpus whose backend is MTurk are reachable, and nothing is read before the link checks out
  (the same 404 for an unknown task, a bad signature, another backend or no HIT).
* ``hitId`` must be the HIT the service created for the task (or the row's id is still unknown after a crash,
  until reconciliation adopts it); an ``assignmentId`` serves one worker only; ids look like Amazon's.
* ``turkSubmitTo`` is one of the two MTurk hosts, nothing else (it becomes a form's action).
* The answer is stored *quarantined*: it counts only once the MTurk API lists the assignment for the HIT,
  by the same worker, with the lease's token in its answer
  (:func:`unpooled.service.crowd.mturk_sync.collect`, :func:`.actions.confirm_mturk_answer`).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from django.core import signing
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from . import actions, leasing
from .models import Annotator, Assignment, Backend, Hit, Task

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
    """The query string of the task's ExternalQuestion URL: ``task=<id>&sig=<signature>``."""
    return f"task={task.pk}&sig={signature(task.pk, hit.request_token)}"


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
    task_id, sig = params.get("task", ""), params.get("sig", "")
    if not task_id.isdigit() or len(task_id) > 18:
        raise EntryRefused("task: missing or not a number", 400)
    hit = Hit.objects.filter(task_id=int(task_id)).select_related("task", "task__corpus").first()
    if (hit is None or not sig or not constant_time_compare(signature(int(task_id), hit.request_token), sig)
            or actions.settings_for(hit.task.corpus).backend != Backend.MTURK):
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
    if hit.hit_id and hit.hit_id != entry.hit_id:
        raise EntryRefused("hitId: not the HIT this service posted for this task", 403)
    submit_to = params.get("turkSubmitTo", "") or MTURK_SUBMIT_HOSTS[1]
    if submit_to.rstrip("/") not in MTURK_SUBMIT_HOSTS:
        raise EntryRefused(f"turkSubmitTo: expected {' or '.join(MTURK_SUBMIT_HOSTS)}, got {submit_to[:100]!r}", 400)
    entry.submit_to = submit_to.rstrip("/")
    return entry


def lease_for_entry(entry: Entry, *, now=None) -> Assignment:
    """The worker's lease of the entry's task, bound to its HIT and assignment; raises :class:`EntryRefused`.

    A reload returns the same lease.  A lease stays bound to its assignment while it is live or answered:
    another assignment id for the same worker and task is refused (a made-up entry cannot take over a real
    worker's lease, nor have a real worker finish a made-up answer); once the lease expired unanswered, a
    new assignment takes it over with a new token."""
    now = now or timezone.now()
    ref = f"{entry.hit_id}/{entry.assignment_id}"
    if entry.assignment_id in (entry.hit.rejected or []):
        raise EntryRefused("assignmentId: this assignment was rejected already", 409)
    other = (Assignment.objects.filter(annotator__backend=Backend.MTURK, external_ref__endswith=f"/{entry.assignment_id}")
             .exclude(task=entry.task, annotator__external_id=entry.worker_id))
    if other.exists():
        raise EntryRefused("assignmentId: this assignment is another worker's, or another task's", 409)
    ann, _ = Annotator.objects.get_or_create(backend=Backend.MTURK, external_id=entry.worker_id)
    if ann.blocked:
        raise EntryRefused("this worker is blocked: " + (ann.blocked_reason or "no reason recorded"), 403)
    lease = Assignment.objects.filter(task=entry.task, annotator=ann).first()
    if lease is not None and lease.external_ref not in ("", ref):
        live = lease.status == Assignment.Status.LEASED and lease.expires >= now
        if lease.status == Assignment.Status.SUBMITTED or live:
            raise EntryRefused("assignmentId: this worker holds this task under another assignment", 409)
        if lease.status == Assignment.Status.LEASED:
            Assignment.objects.filter(pk=lease.pk).update(status=Assignment.Status.EXPIRED)
            lease.status = Assignment.Status.EXPIRED
    elif lease is not None and lease.status == Assignment.Status.LEASED and lease.expires < now:
        # the same assignment back after the lease's time (Amazon's assignment may last longer, and Amazon says
        # whether it was submitted in time): renewed, as once the sweep has marked it expired
        Assignment.objects.filter(pk=lease.pk).update(status=Assignment.Status.EXPIRED)
        lease.status = Assignment.Status.EXPIRED
    if lease is None or lease.status == Assignment.Status.EXPIRED:
        rebound = lease is not None and lease.external_ref not in ("", ref)
        lease = leasing._try_lease(entry.task.pk, ann, now, capacity=False)
        if lease is None:
            raise EntryRefused("this item needs no more answers", 409)
        if rebound:
            lease.token = secrets.token_urlsafe(24)
    if lease.status == Assignment.Status.LEASED and (lease.external_ref, lease.submit_to) != (ref, entry.submit_to):
        lease.external_ref, lease.submit_to = ref, entry.submit_to
        lease.save(update_fields=["external_ref", "submit_to", "token"])
    return lease
