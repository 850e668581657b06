"""Mechanical Turk as an annotation backend: publish open tasks as HITs, pay for answers, reconcile.

Workers open our own task page inside the HIT (ExternalQuestion: ``/annotate/mturk/?task=ID``);
their answers are stored by the page exactly like an in-house annotator's.  This module only
moves HITs and money:

* :func:`publish` writes the :class:`~unpooled.service.annotation.models.Hit` row with its
  request token *before* calling ``CreateHIT``; a crash in between is repaired by
  :func:`reconcile_corpus` (the HIT is found by its ``RequesterAnnotation`` and adopted).
* :func:`collect` approves submitted assignments whose answer we stored and rejects, with a
  reason, those that reached Mechanical Turk without an answer on our side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from unpooled.service.annotation.models import Answer, Assignment, Backend, Hit, Kind, Task
from unpooled.service.corpora.models import Corpus

from .mturk import LocalHit, MTurkBackend, reconcile, request_token

TITLES = {Kind.VERIFY: "Does this sentence state the relation?", Kind.ENTITIES: "Mark the names in a short text",
          Kind.RELATIONS: "Which relations does each sentence state?"}


def item_token(task: Task) -> str:
    return f"unpooled:task:{task.pk}"


@dataclass
class SyncReport:
    created: int = 0
    approved: int = 0
    rejected: int = 0
    adopted: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def publish(corpus: Corpus, backend: MTurkBackend, base_url: str, *, limit: int | None = None) -> SyncReport:
    """Post one HIT per open task of ``corpus`` that has none (controls included, one assignment each)."""
    rep = SyncReport()
    tasks = Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, hit__isnull=True).order_by("priority", "id")
    for task in tasks[:limit] if limit else tasks:
        n = task.answers_needed or 1
        with transaction.atomic():
            hit, _ = Hit.objects.get_or_create(task=task, defaults={"request_token": request_token("task", task.pk, 0),
                                                                    "max_assignments": n})
        try:
            got = backend.create_hit(item_token(task), f"{base_url.rstrip('/')}/annotate/mturk/?task={task.pk}",
                                     task_type=task.kind, max_assignments=n, title=TITLES[task.kind],
                                     description=TITLES[task.kind], request_token=hit.request_token)
        except Exception as exc:  # recorded; the row stays pending and reconcile or the next publish repairs it
            rep.errors.append(f"task {task.pk}: {exc}")
            continue
        Hit.objects.filter(pk=hit.pk).update(hit_id=got["HITId"], status="posted")
        rep.created += 1
    return rep


def collect(corpus: Corpus, backend: MTurkBackend) -> SyncReport:
    """Approve assignments whose answers we stored; reject those without an answer; expire finished HITs."""
    rep = SyncReport()
    for hit in Hit.objects.filter(task__corpus=corpus).exclude(hit_id="").select_related("task"):
        approved, rejected = set(hit.approved), set(hit.rejected)
        for a in backend.list_assignments(hit.hit_id, statuses=("Submitted",)):
            aid = a["AssignmentId"]
            if aid in approved or aid in rejected:
                continue
            ours = Assignment.objects.filter(task=hit.task, annotator__backend=Backend.MTURK,
                                             annotator__external_id=a["WorkerId"],
                                             external_ref__endswith=f"/{aid}").first()
            if ours is not None and Answer.objects.filter(assignment=ours).exists():
                backend.approve(aid)
                approved.add(aid)
                rep.approved += 1
            else:
                backend.reject(aid, "No answer was recorded for this assignment on the task page.")
                rejected.add(aid)
                rep.rejected += 1
        status = hit.status
        if hit.task.status != Task.Status.OPEN and status != "expired":
            backend.expire_hit(hit.hit_id)
            status = "expired"
        Hit.objects.filter(pk=hit.pk).update(approved=sorted(approved), rejected=sorted(rejected), status=status)
    return rep


def reconcile_corpus(corpus: Corpus, backend: MTurkBackend, *, expire_orphans: bool = False) -> dict:
    """Compare the local HIT rows with Mechanical Turk and repair lost HIT ids."""
    hits = list(Hit.objects.filter(task__corpus=corpus).select_related("task"))
    local = [LocalHit(item_token(h.task), h.hit_id or None, h.request_token, h.max_assignments) for h in hits]
    known = {aid for h in hits for aid in h.approved + h.rejected}
    rep = reconcile(backend, local, known_assignments=known, expire_orphans=expire_orphans)
    by_token = {item_token(h.task): h for h in hits}
    for token, hid in rep.adopted.items():
        Hit.objects.filter(pk=by_token[token].pk).update(hit_id=hid, status="posted")
    return rep.to_dict()
