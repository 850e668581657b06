"""Annotation actions: create tasks, take answers, aggregate them into labels.

``check_*`` functions validate, ``do_*`` / plain verbs write.  Every write that spans
several rows runs in one transaction, so a failure leaves the database as it was.

Who may label what and the leases that hand tasks out are in :mod:`.leasing`; the cross-document
clustering of unlinked entities is in :mod:`.clustering`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from django.db import transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from unpooled.core.annotation import answers as fmt
from unpooled.core.annotation import clustering as clu
from unpooled.core.annotation.aggregation import strict_majority
from unpooled.core.errors import UnpooledError
from unpooled.service.accounts.models import Profile
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions.models import RelationInstance, Submission

from .clustering import request_clustering
from .guidelines import VERSIONS
from .leasing import may_label, own_exhaustive
from .payloads import sentences_of, verify_payload
from .signals import labels_written
from .models import (
    AnnotationSettings, Annotator, Answer, Assignment, Backend, ExhaustiveDocument, Hit, Kind, Label,
    SubmissionBudget, Task, TaskRequest, settings_for, settings_of,
)

#: the longest time an answer may say it took (a day): the page's clock, sent by the browser
MAX_ANSWER_SECONDS = 86400.0
#: an entity answer marks at most one mention per this many characters of the document (Re-DocRED's 1,000
#: documents: at least 18.8 characters per mention, median 40) ...
CHARS_PER_MENTION = 10
#: ... and never fewer than this many mentions (short documents), nor more than MAX_MENTIONS
MIN_MENTIONS_ALLOWED = 40
MAX_MENTIONS = 2000
#: candidate pairs one entity answer may imply (Re-DocRED's gold mentions: median 40, at most 291 per document)
MAX_PAIRS_PER_ANSWER = 600
#: pairs a relations task shows at most; more (majority mentions from answers that each had fewer) are cut,
#: and the task says how many (payload ``pairs_dropped``)
MAX_PAIRS_PER_TASK = 1000
#: longest KB link an entity answer may give a mention
MAX_LINK_CHARS = 300


class AnnotationError(UnpooledError):
    """A request the annotation layer refuses; the message says why."""


# --------------------------------------------------------------------------- task creation

@dataclass
class RequestResult:
    """What :func:`request_verification` did with a submission's sampled instances."""

    keys: int = 0
    reused: int = 0          # a final label exists: no task
    joined: int = 0          # an open task exists: this submission joins it
    created: int = 0         # new tasks
    over_budget: int = 0     # not created: the budget is spent
    committed_cents: int = 0
    more_answers: int = 0    # new tasks of weak relations, with answers_weak_relation answers
    more_answers_cents: int = 0  # what their answers beyond answers_per_item commit
    over_budget_keys: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.pop("over_budget_keys")
        return d


def _chunks(values: list, n: int = 500):
    """``values`` in runs of ``n`` (an ``IN (...)`` list per query that every database takes)."""
    return (values[i:i + n] for i in range(0, len(values), n))


def labelled_keys(corpus: Corpus, insts) -> set[str]:
    """The keys of ``insts`` (relation instances) that have a label in ``corpus``, one query per 500 keys."""
    want = {i.key_hash for i in insts}
    keys = {i.key for i in insts}
    got: set[str] = set()
    for part in _chunks(sorted(want)):
        got.update(k for k in Label.objects.filter(corpus=corpus, key_hash__in=part)
                   .values_list("key", flat=True).distinct() if k in keys)
    return got


def _verify_tasks(corpus: Corpus, insts) -> dict[tuple[int, str], Task]:
    """The verification tasks of ``corpus`` for these instances' keys, by ``(document id, key)``: one query per
    500 keys (through the key's hash)."""
    want = {(i.document_id, i.key) for i in insts}
    out: dict[tuple[int, str], Task] = {}
    for part in _chunks(sorted({i.key_hash for i in insts})):
        for task in Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, key_hash__in=part):
            if (task.document_id, task.key) in want:
                out[(task.document_id, task.key)] = task
    return out


def submission_committed_cents(sub: Submission) -> int:
    return TaskRequest.objects.filter(submission=sub).aggregate(s=Sum("committed_cents"))["s"] or 0


def corpus_committed_cents(corpus: Corpus) -> int:
    """Cost of every answer received plus the expected cost of the answers still missing."""
    spent = Answer.objects.filter(task__corpus=corpus).aggregate(s=Sum("cost_cents"))["s"] or 0
    st = settings_for(corpus)
    missing = 0
    for kind in Kind.values:
        open_ = Task.objects.filter(corpus=corpus, kind=kind, status=Task.Status.OPEN, is_control=False).annotate(
            got=Count("answers", filter=Q(answers__weight__gt=0))).aggregate(
            need=Sum(F("answers_needed") - F("got")))["need"] or 0
        missing += max(0, open_) * st.answer_cost_cents(kind, st.answers_per_item)
    return spent + missing


def _team_users(team_id: int):
    """The users who must never label team ``team_id``'s instances: its members and those conflicted with it."""
    return Profile.objects.filter(Q(team_id=team_id) | Q(conflicts=team_id)).values("user_id")


def request_verification(sub: Submission, instance_ids, *, now=None, of_corpus: bool = False,
                         weak_relations=frozenset(), priority=None) -> RequestResult:
    """Ask for verification labels of these instances of ``sub`` (``of_corpus``: of any submission of its corpus,
    asked for by ``sub``: the human reference's recall sample is other systems' instances).

    An instance whose canonical key already has a label creates nothing (label reuse); one
    whose key has an open task joins it; the rest create tasks while the submission's and
    the corpus's budgets allow (each new task commits ``k`` answers' cost, :meth:`AnnotationSettings.
    answer_cost_cents`: the reward, and Amazon's fee on Mechanical Turk; ``k`` is the settings'
    ``answers_weak_relation`` for an instance of one of ``weak_relations``, where the crowd's answers say
    little and more of them narrow the intervals), in the instances' order.  New tasks queue at ``priority``
    (default: the submission's upload time, so that older submissions are served first).

    A few queries whatever the number of instances (the labels, the tasks and the requests of all keys at once;
    the new tasks and their requests in bulk), under the corpus's lock (:func:`lock_corpus`): another request
    cannot create the same task (``task_unique_item``) or spend the same budget meanwhile.
    """
    corpus = sub.corpus
    st = settings_for(corpus)
    now = now or timezone.now()
    owner = {"submission__corpus_id": sub.corpus_id} if of_corpus else {"submission": sub}
    insts = list(RelationInstance.objects.filter(pk__in=list(instance_ids), **owner).select_related("document"))
    by_key: dict[str, RelationInstance] = {}
    for inst in sorted(insts, key=lambda i: i.pk):
        by_key.setdefault(inst.key, inst)
    res = RequestResult(keys=len(by_key))
    k_weak = max(st.answers_per_item, st.answers_weak_relation)
    with transaction.atomic():
        lock_corpus(corpus)
        done = labelled_keys(corpus, by_key.values())
        tasks = _verify_tasks(corpus, [i for k, i in by_key.items() if k not in done])
        sub_left, corpus_left = _budget_left(sub, st)
        joined, new = [], []
        for key, inst in by_key.items():
            if key in done:
                res.reused += 1
                continue
            task = tasks.get((inst.document_id, key))
            if task is not None:
                joined.append(task)
                continue
            k = k_weak if inst.predicate in weak_relations else st.answers_per_item
            cost = k * st.answer_cost_cents(Kind.VERIFY, k)
            if (sub_left is not None and sub_left < cost) or (corpus_left is not None and corpus_left < cost):
                res.over_budget += 1
                res.over_budget_keys.append(key)
                continue
            new.append((inst, k, cost))
            res.created += 1
            res.committed_cents += cost
            if k > st.answers_per_item:
                res.more_answers += 1
                res.more_answers_cents += (k - st.answers_per_item) * st.answer_cost_cents(Kind.VERIFY, k)
            if sub_left is not None:
                sub_left -= cost
            if corpus_left is not None:
                corpus_left -= cost
        res.joined = _join_tasks(sub, joined)
        _create_verify_tasks(sub, new, priority or sub.created or now)
    return res


def _join_tasks(sub: Submission, tasks: list[Task]) -> int:
    """``sub`` asks for these existing tasks too (one request each, idempotent); the answers to those still open
    by members of its team (or of teams conflicted with it), given before it asked, no longer count.  Returns the
    number of requests made."""
    have: set[int] = set()
    for part in _chunks([t.pk for t in tasks]):
        have.update(TaskRequest.objects.filter(submission=sub, task_id__in=part).values_list("task_id", flat=True))
    fresh = [t for t in tasks if t.pk not in have]
    TaskRequest.objects.bulk_create([TaskRequest(task=t, submission=sub) for t in fresh], batch_size=500)
    for part in _chunks([t.pk for t in fresh if t.status == Task.Status.OPEN]):
        Answer.objects.filter(task_id__in=part, weight__gt=0,
                              annotator__user__in=_team_users(sub.team_id)).update(weight=0.0)
    return len(fresh)


def _create_verify_tasks(sub: Submission, new, priority) -> None:
    """One verification task per ``(instance, answers needed, cost)`` of ``new``, in that order, each with
    ``sub``'s request committing the cost."""
    if not new:
        return
    schema = sub.corpus.schema.schema()
    sentences = sentences_of(inst.document_id for inst, _, _ in new)
    made = Task.objects.bulk_create([Task(
        corpus=sub.corpus, kind=Kind.VERIFY, document=inst.document, key=inst.key, key_hash=inst.key_hash,
        payload=verify_payload(inst, inst.document, schema, sentences[inst.document_id]), group=inst.predicate,
        answers_needed=k, priority=priority, guideline_version=VERSIONS["verify"]) for inst, k, _ in new],
        batch_size=500)
    TaskRequest.objects.bulk_create([TaskRequest(task=task, submission=sub, committed_cents=cost)
                                     for task, (_, _, cost) in zip(made, new)], batch_size=500)


def lock_corpus(corpus: Corpus) -> None:
    """Inside a transaction: one request for tasks at a time per corpus, until it commits.  Two workers asking for
    the same item would both find no task and both create one; two spending one budget would both see it unspent.
    (On SQLite the transaction is IMMEDIATE: it holds the write lock already.)"""
    Corpus.objects.select_for_update().filter(pk=corpus.pk).first()


def _budget_left(sub: Submission, st: AnnotationSettings) -> tuple[int | None, int | None]:
    """What the submission's and the corpus's budgets still allow (None: no limit)."""
    limit = getattr(SubmissionBudget.objects.filter(submission=sub).first(), "limit_cents", None)
    if limit is None:
        limit = st.submission_budget_cents
    sub_left = None if limit is None else limit - submission_committed_cents(sub)
    corpus_left = None if st.budget_cents is None else st.budget_cents - corpus_committed_cents(sub.corpus)
    return sub_left, corpus_left


def request_more_answers(sub: Submission, weak_relations) -> RequestResult:
    """Ask for ``answers_weak_relation`` answers on the verification tasks ``sub`` created for instances of
    ``weak_relations`` that were asked with fewer (before the crowd's answers showed the relation weak): an item
    already answered reopens for the missing answers.  Idempotent; within the budgets like
    :func:`request_verification`, whose ``more_answers`` and ``more_answers_cents`` it fills.  Tasks that ``sub``
    joined or whose labels it reused are left to the submissions that asked for them."""
    st = settings_for(sub.corpus)
    k_weak = st.answers_weak_relation
    res = RequestResult()
    if not weak_relations or k_weak <= st.answers_per_item:
        return res
    mine = (TaskRequest.objects.filter(submission=sub, committed_cents__gt=0, task__kind=Kind.VERIFY,
                                       task__is_control=False, task__group__in=sorted(weak_relations),
                                       task__answers_needed__lt=k_weak)
            .exclude(task__status=Task.Status.CANCELLED).select_related("task").order_by("task_id"))
    with transaction.atomic():
        lock_corpus(sub.corpus)
        sub_left, corpus_left = _budget_left(sub, st)
        for req in mine:
            task = req.task
            cost = (k_weak - task.answers_needed) * st.answer_cost_cents(Kind.VERIFY, k_weak)
            if (sub_left is not None and sub_left < cost) or (corpus_left is not None and corpus_left < cost):
                res.over_budget += 1
                res.over_budget_keys.append(task.key)
                continue
            if not Task.objects.filter(pk=task.pk, answers_needed=task.answers_needed).update(
                    answers_needed=k_weak, status=Task.Status.OPEN, completed=None):
                continue  # raised meanwhile by another request
            TaskRequest.objects.filter(pk=req.pk).update(committed_cents=F("committed_cents") + cost)
            res.more_answers += 1
            res.more_answers_cents += cost
            res.committed_cents += cost
            sub_left = None if sub_left is None else sub_left - cost
            corpus_left = None if corpus_left is None else corpus_left - cost
    return res


def request_exhaustive(corpus: Corpus, sample, *, seed: int | None = None, now=None) -> int:
    """Record a document sample (``sample.indices`` into the corpus's documents by id order,
    ``sample.inclusion``, ``sample.stage``, ``sample.scheme``) and create one entity task per
    new document.  Returns the number of new documents."""
    st = settings_for(corpus)
    now = now or timezone.now()
    doc_ids = list(corpus.documents.order_by("id").values_list("id", flat=True))
    made = 0
    with transaction.atomic():
        for idx, inc, stage in zip(np.asarray(sample.indices).tolist(), np.asarray(sample.inclusion).tolist(),
                                   np.asarray(sample.stage).tolist()):
            doc_id = doc_ids[idx]
            _, new = ExhaustiveDocument.objects.get_or_create(
                corpus=corpus, document_id=doc_id,
                defaults={"scheme": sample.scheme, "stage": stage, "inclusion": inc, "sample_seed": seed})
            if new:
                Task.objects.create(corpus=corpus, kind=Kind.ENTITIES, document_id=doc_id, key="",
                                    payload={}, answers_needed=st.answers_per_item, priority=now,
                                    guideline_version=VERSIONS["entities"])
                made += 1
    return made


# --------------------------------------------------------------------------- answers

def max_mentions(text_length: int) -> int:
    """The most mentions one entity answer may mark in a document of ``text_length`` characters."""
    return min(MAX_MENTIONS, max(MIN_MENTIONS_ALLOWED, text_length // CHARS_PER_MENTION))


def _pair_finder(task: Task, protocol: str | None = None):
    """``pairs(mentions)``: the candidate pairs a relations task would show for these mentions of the task's
    document (within a sentence, or anywhere in the document under the corpus's document recall protocol; types
    some relation of the schema allows)."""
    protocol = protocol or settings_for(task.corpus).recall_protocol
    doc = task.document
    rows = list(doc.sentences.order_by("index").values_list("start", "end"))
    schema = task.corpus.schema.schema()
    rels = schema.canonical_relations

    def compatible(ta: str, tb: str) -> bool:
        if schema.type_check != "error":
            return True
        return any((ta in r.subject_types and tb in r.object_types) or (tb in r.subject_types and ta in r.object_types)
                   for r in rels)

    return lambda mentions: fmt.candidate_pairs(mentions, [s for s, _ in rows], [e for _, e in rows],
                                                compatible=compatible, protocol=protocol)


def check_answer(task: Task, value) -> dict:
    """Validate an answer for ``task``; raises :class:`unpooled.core.annotation.answers.AnswerError`.

    Bounded: an entity answer marks at most :func:`max_mentions` mentions, none with a link longer than
    :data:`MAX_LINK_CHARS`, and implies at most :data:`MAX_PAIRS_PER_ANSWER` candidate pairs (the
    relations task that follows shows each pair with its sentence)."""
    schema = task.corpus.schema.schema()
    if task.kind == Kind.VERIFY:
        return fmt.validate_verify(value, predicates=schema.relations.keys())
    if task.kind == Kind.ENTITIES:
        length = task.document.length
        clean = fmt.validate_entities(value, text_length=length, types=schema.entity_types.keys(),
                                      max_mentions=max_mentions(length), max_link=MAX_LINK_CHARS)
        n = len(_pair_finder(task)(clean["mentions"]))
        if n > MAX_PAIRS_PER_ANSWER:
            where = "within sentences" if settings_for(task.corpus).recall_protocol == "sentence" else "of the document"
            raise fmt.AnswerError("mentions", f"these {len(clean['mentions'])} mentions make {n:,} pairs of "
                                              f"mentions {where}; at most {MAX_PAIRS_PER_ANSWER} per document")
        return clean
    if task.kind == Kind.CLUSTERS:
        return clu.validate_clusters(value, n_items=len(task.payload.get("items", [])))
    return fmt.validate_relations(value, n_pairs=len(task.payload.get("pairs", [])), predicates=schema.relations.keys())


def check_seconds(seconds) -> float | None:
    """The time an answer took, as sent by the page: nothing, or a finite number from 0 to
    :data:`MAX_ANSWER_SECONDS` (raises :class:`unpooled.core.annotation.answers.AnswerError`)."""
    if seconds is None or seconds == "":
        return None
    try:
        x = float(seconds)
    except (TypeError, ValueError):
        raise fmt.AnswerError("seconds", f"expected a number of seconds, got {str(seconds)[:40]!r}") from None
    if not math.isfinite(x) or not 0 <= x <= MAX_ANSWER_SECONDS:
        raise fmt.AnswerError("seconds", f"expected a number of seconds from 0 to {MAX_ANSWER_SECONDS:.0f}, "
                                         f"got {str(seconds)[:40]}")
    return x


def _counted(task: Task) -> int:
    """Answers of ``task`` that count: weight above 0, by annotators not blocked."""
    return task.answers.filter(weight__gt=0, annotator__blocked=False).count()


def _slot_taken(a: Assignment, task: Task, now) -> bool:
    """Whether lease ``a``, past its expiry, lost its slot: the others' live leases and counted answers
    already give the task what it needs."""
    others = Assignment.objects.filter(task=task).exclude(pk=a.pk).filter(
        Q(status=Assignment.Status.LEASED, expires__gte=now)
        | Q(status=Assignment.Status.SUBMITTED, answer__weight__gt=0)).count()
    return others >= task.answers_needed


def submit_answer(assignment: Assignment, value, *, seconds: float | None = None, now=None) -> Answer:
    """Store an answer to a leased task; complete and aggregate the task when it has enough.

    Refused (:class:`AnnotationError`): a second answer with one lease, an answer after Skip (the lease
    was released, the slot may be someone else's), a late answer whose slot was given to someone else.
    A late answer whose slot is still free is accepted.  Stored with weight 0 (kept, never counted): an
    answer by a blocked annotator, by one who may not label the item (:func:`may_label`: their team's
    instances), or to a task already complete.  An MTurk answer is stored *quarantined* (weight 0, cost 0)
    until :func:`confirm_mturk_answer`.
    """
    now = now or timezone.now()
    clean = check_answer(assignment.task, value)
    seconds = check_seconds(seconds)
    annotator = assignment.annotator
    mturk = annotator.backend == Backend.MTURK
    with transaction.atomic():
        # the lease and its task locked, with the corpus's settings and what may_label asks, in one query
        a = (Assignment.objects.select_for_update(of=("self", "task")).select_related("task__corpus__annotation_settings")
             .annotate(**own_exhaustive(assignment.annotator_id, "task_id", "task__document_id")).get(pk=assignment.pk))
        if a.status == Assignment.Status.SUBMITTED:
            raise AnnotationError("this task was already answered with this lease")
        if a.status == Assignment.Status.SKIPPED:
            raise AnnotationError("this task was skipped: its lease was released, so the answer is not taken")
        task = a.task
        st = settings_of(task)
        late = a.status == Assignment.Status.EXPIRED or a.expires < now
        if late and not mturk and not task.is_control and task.status == Task.Status.OPEN and _slot_taken(a, task, now):
            raise AnnotationError("this lease expired and the item went to another annotator: the answer is not taken")
        correct = fmt.verify_correct(clean) if task.kind == Kind.VERIFY else None
        counts = not (annotator.blocked or task.status != Task.Status.OPEN or mturk
                    or not may_label(annotator, task, own_exhaustive=a.own_exhaustive))
        ans = Answer.objects.create(
            assignment=a, task=task, annotator=annotator, value=clean, correct=correct, weight=1.0 if counts else 0.0,
            seconds=seconds, quarantined=mturk, cost_cents=0 if mturk else st.reward_cents(task.kind),
            guideline_version=task.guideline_version)
        a.status = Assignment.Status.SUBMITTED
        a.save(update_fields=["status"])
        if mturk:
            return ans
        counted = _counted(task)  # of a control too: the same queries up to here for both (security review N3)
        if task.is_control:
            _score_control(annotator, task, ans, st, now, a)
        elif counts and counted >= task.answers_needed:
            complete_task(task, now=now)
    return ans


def confirm_mturk_answer(assignment: Assignment, *, now=None) -> bool:
    """Release the quarantined answer of MTurk lease ``assignment``: Mechanical Turk has listed its
    assignment among the HIT's, by the lease's worker, with the lease's token in the answer (the caller,
    :func:`unpooled.service.crowd.mturk_sync.collect`, checked that).  The answer then costs its reward and
    counts, unless its worker is blocked or the task was complete; the task completes when it has enough.
    Returns whether an answer was released (False when there was none, or it was released before)."""
    now = now or timezone.now()
    with transaction.atomic():
        ans = Answer.objects.select_for_update().filter(assignment=assignment, quarantined=True).first()
        if ans is None:
            return False
        task = Task.objects.select_for_update().get(pk=ans.task_id)
        annotator = Annotator.objects.get(pk=ans.annotator_id)
        st = settings_for(task.corpus)
        counts = not annotator.blocked and task.status == Task.Status.OPEN
        ans.quarantined, ans.weight, ans.cost_cents = False, 1.0 if counts else 0.0, _mturk_cost(task, st)
        ans.save(update_fields=["quarantined", "weight", "cost_cents"])
        if task.is_control:
            _score_control(annotator, task, ans, st, now, assignment)
        elif counts and _counted(task) >= task.answers_needed:
            complete_task(task, now=now)
    return True


def _mturk_cost(task: Task, st: AnnotationSettings) -> int:
    """What Amazon charges for an approved assignment of ``task``'s HIT: the reward the HIT was posted with (the
    corpus's reward now when the row predates it) and Amazon's fee."""
    from unpooled.core.annotation.mturk_fees import assignment_cost_cents

    hit = Hit.objects.filter(task=task).select_related("task").first()
    return assignment_cost_cents(hit.reward(st), hit.max_assignments) if hit else st.reward_cents(task.kind)


def _score_control(annotator: Annotator, task: Task, ans: Answer, st: AnnotationSettings, now,
                   lease: Assignment) -> None:
    """Count ``ans`` to control ``task`` in its annotator's score, once per ``lease`` (the first answer: one given
    again after an undo is not scored); block them when their accuracy is confidently below their bar
    (:func:`unpooled.core.annotation.controls.should_block`), relative to the crowd's on the same relations'
    controls and never above the corpus's ``block_below_accuracy``."""
    from unpooled.core.annotation.controls import BLOCK_MARGIN, should_block

    if not Assignment.objects.filter(pk=lease.pk, control_scored=False).update(control_scored=True):
        return  # scored before this lease's undo
    right = _control_right(ans.correct, task.control_answer)
    Annotator.objects.filter(pk=annotator.pk).update(
        controls_answered=F("controls_answered") + 1, controls_correct=F("controls_correct") + int(right))
    annotator.refresh_from_db()
    c, n, t = annotator.controls_correct, annotator.controls_answered, st.block_below_accuracy
    # the relative bar is never above t, so it is read only when the threshold itself would block
    if annotator.blocked or not should_block(c, n, bar=t, min_controls=st.block_min_controls):
        return
    bar = _blocking_bar(annotator, t)
    if should_block(c, n, bar=bar, min_controls=st.block_min_controls):
        block_annotator(annotator, reason=f"{c} of {n} gold controls right: accuracy below {bar:.2f} with 95% "
                                          f"confidence (the crowd's on the same relations' controls less "
                                          f"{BLOCK_MARGIN:.2f}, at most {t:.2f})", now=now)


def _control_right(correct, control_answer) -> bool:
    """Whether an answer saying ``correct`` to a gold control with answer ``control_answer`` is right."""
    return bool(correct) == bool((control_answer or {}).get("correct"))


def _blocking_bar(annotator: Annotator, threshold: float) -> float:
    """``annotator``'s blocking bar (:func:`unpooled.core.annotation.controls.blocking_bar`) from the answers to
    controls of the corpora they answered controls in, by relation (or the organiser's group of relations)."""
    from unpooled.core.annotation.controls import blocking_bar

    mine = Answer.objects.filter(annotator=annotator, task__is_control=True, quarantined=False)
    rows = (Answer.objects.filter(task__is_control=True, quarantined=False,
                                  task__corpus_id__in=mine.values("task__corpus_id"))
            .filter(Q(annotator=annotator) | Q(annotator__blocked=False))
            .values_list("annotator_id", "task__corpus_id", "task__group", "correct", "task__control_answer"))
    groups: dict[int, dict[str, str]] = {}
    code: dict = {}
    tally: list[list[float]] = []  # per stratum: own answers, crowd's right, crowd's answers
    for who, corpus_id, group, correct, control in rows.iterator():
        if corpus_id not in groups:
            groups[corpus_id] = AnnotationSettings.groups_of(corpus_id)
        h = code.setdefault((corpus_id, groups[corpus_id].get(group, group)), len(code))
        if h == len(tally):
            tally.append([0.0, 0.0, 0.0])
        if who == annotator.pk:
            tally[h][0] += 1
        else:
            tally[h][1] += _control_right(correct, control)
            tally[h][2] += 1
    own, right, answered = np.array(tally, float).reshape(-1, 3).T
    return blocking_bar(own, right, answered, threshold)


def decided(task: Task) -> bool:
    """Whether ``task``'s item is decided, so that its last answer can no longer be undone: a task no longer open,
    and a gold control (never closed) whenever an item in its place would be, its answers a multiple of the answers
    an item needs (always, with one answer per item): the undo acts alike for both and tells no control apart
    (security review N3).  The same statements for both: the page's time tells no control either."""
    answers, k = task.answers.count(), max(1, settings_of(task).answers_per_item)
    return task.status != Task.Status.OPEN or (task.is_control and answers % k == 0)


class UndoRefused(AnnotationError):
    """An undo the annotator may not make; the message says why."""


def undo_answer(assignment: Assignment, *, now=None) -> dict:
    """Withdraw the answer of in-house lease ``assignment`` and lease the task to its annotator again (the
    lease keeps its expiry); returns the withdrawn answer's value (the page puts it back to be corrected).

    Refused (:class:`UndoRefused`): a lease not in-house (an MTurk answer is handed to Mechanical Turk), one
    with no answer, an answer that is not the annotator's newest, a lease past its expiry, a blocked annotator,
    and a task no longer open (its answers were aggregated: the label is written).  The answer never counted
    towards a label, so deleting it leaves the labels as they were; a gold control's score stays (its first
    answer is the one scored).
    """
    now = now or timezone.now()
    with transaction.atomic():
        a = Assignment.objects.select_for_update().select_related("annotator").get(pk=assignment.pk)
        annotator = a.annotator
        if annotator.backend != Backend.INHOUSE:
            raise UndoRefused("only an in-house annotator's answer can be undone here")
        ans = Answer.objects.filter(assignment=a).first()
        if ans is None or a.status != Assignment.Status.SUBMITTED:
            raise UndoRefused("this task has no answer of yours to undo")
        newest = Answer.objects.filter(annotator=annotator).order_by("-id").values_list("pk", flat=True).first()
        if newest != ans.pk:
            raise UndoRefused("only your last answer can be undone")
        if annotator.blocked:
            raise UndoRefused("your account is blocked from annotating")
        if a.expires < now:
            raise UndoRefused("the time for this task is over (its lease expired), so its answer stays")
        task = Task.objects.select_for_update().get(pk=a.task_id)
        if decided(task):
            raise UndoRefused("the item was decided with your answer (its label is written), so the answer stays")
        value = ans.value
        # a gold control's score stays (the lease is marked scored): an undo that took it back let an annotator
        # erase every wrong control answer, so controls never blocked them (security review N3); the page acts
        # the same for every item, so the undo does not tell a control either
        ans.delete()
        a.status = Assignment.Status.LEASED
        a.save(update_fields=["status"])
    return value


def block_annotator(annotator: Annotator, *, reason: str, now=None) -> int:
    """Block an annotator: end their leases and discount their answers to tasks not yet complete.

    Returns the number of answers discounted; those tasks need new answers from others.
    """
    now = now or timezone.now()
    with transaction.atomic():
        Annotator.objects.filter(pk=annotator.pk).update(blocked=True, blocked_reason=reason, blocked_at=now)
        annotator.blocked, annotator.blocked_reason, annotator.blocked_at = True, reason, now
        Assignment.objects.filter(annotator=annotator, status=Assignment.Status.LEASED).update(
            status=Assignment.Status.EXPIRED)
        return Answer.objects.filter(annotator=annotator, task__status=Task.Status.OPEN, weight__gt=0).update(weight=0.0)


def complete_task(task: Task, *, now=None) -> None:
    """Aggregate a task's counted answers (strict majority) and act on the result."""
    now = now or timezone.now()
    answers = list(task.answers.filter(weight__gt=0, annotator__blocked=False).order_by("id"))
    if task.kind == Kind.VERIFY:
        votes = [a.correct for a in answers]
        yes = sum(votes)
        correct = bool(strict_majority(yes, len(votes)))
        task.result = {"correct": correct, "votes": [yes, len(votes) - yes]}
        Label.objects.create(
            corpus=task.corpus, key=task.key, key_hash=task.key_hash, task=task,
            probability=yes / len(votes), correct=correct, method="majority", n_answers=len(votes),
            annotators=[a.annotator_id for a in answers], guideline_version=task.guideline_version)
    elif task.kind == Kind.ENTITIES:
        mentions = fmt.aggregate_mentions([a.value for a in answers])
        task.result = {"mentions": mentions}
        _create_relations_task(task, mentions, now)
    elif task.kind == Kind.CLUSTERS:
        task.result = clu.aggregate_clusters([a.value for a in answers], len(task.payload.get("items", [])))
    else:
        labels = fmt.aggregate_relations([a.value for a in answers], len(task.payload["pairs"]))
        triples = fmt.relation_triples(task.payload["mentions"], task.payload["pairs"], labels)
        task.result = {"pairs": labels, "relations": [list(t) for t in triples]}
    task.status = Task.Status.COMPLETE
    task.completed = now
    task.save(update_fields=["result", "status", "completed"])
    if task.kind == Kind.ENTITIES and not Task.objects.filter(
            corpus_id=task.corpus_id, kind=Kind.ENTITIES, status=Task.Status.OPEN).exists():
        # every sampled document's entity layer is final: its unlinked entities are grouped across documents
        request_clustering(task.corpus, now=now)
    if task.kind != Kind.ENTITIES and not task.is_control:
        # the evaluations app re-scores the corpus once this label batch is committed (its apps.ready connects)
        labels_written.send(sender=Task, corpus_id=task.corpus_id)


def _create_relations_task(entity_task: Task, mentions: list[dict], now) -> Task:
    """The document's relations task over the aggregated ``mentions``: at most :data:`MAX_PAIRS_PER_TASK`
    pairs, in document order; ``pairs_dropped`` in its payload counts any cut (none for real documents:
    each answer implies at most :data:`MAX_PAIRS_PER_ANSWER`)."""
    st = settings_for(entity_task.corpus)
    pairs = _pair_finder(entity_task, st.recall_protocol)(mentions)
    dropped = max(0, len(pairs) - MAX_PAIRS_PER_TASK)
    pairs = pairs[:MAX_PAIRS_PER_TASK]
    # the recall protocol the pairs follow (exhaustive_truth reads only the corpus's current protocol's layers)
    payload = {"mentions": mentions, "pairs": [list(p) for p in pairs], "protocol": st.recall_protocol}
    if dropped:
        payload["pairs_dropped"] = dropped
    task, _ = Task.objects.get_or_create(
        corpus=entity_task.corpus, kind=Kind.RELATIONS, document=entity_task.document, key="",
        defaults={"payload": payload, "answers_needed": st.answers_per_item if pairs else 0,
                  "priority": entity_task.priority, "guideline_version": VERSIONS["relations"]})
    if not pairs and task.status == Task.Status.OPEN:
        task.status, task.completed, task.result = Task.Status.COMPLETE, now, {"pairs": {}, "relations": []}
        task.save(update_fields=["status", "completed", "result"])
    return task


def relations_protocol(task: Task) -> str:
    """The recall protocol a relations task's pairs follow (tasks made before protocols existed: ``sentence``)."""
    return (task.payload or {}).get("protocol", "sentence")


def do_set_recall_protocol(corpus: Corpus, protocol: str, *, now=None) -> int:
    """Set the corpus's recall protocol (:data:`unpooled.core.names.RECALL_PROTOCOLS`); the exhaustive relations
    tasks follow it, so that recall never mixes protocols.

    Each sampled document's relations task (key ``""``) asked under the other protocol is set aside under the key
    ``protocol:<old>`` (its answers and result kept; an open one is cancelled), and the task under ``protocol``
    takes key ``""``: the complete one set aside before, if there is one, else a new task over the document's
    entity layer (an incomplete one set aside before is retired, :func:`_retire`; no answer is ever deleted).  Recall then rests on the documents annotated under ``protocol`` alone until the new tasks are
    answered.  Returns the number of documents whose relations task changed.
    """
    from unpooled.core.names import RECALL_PROTOCOLS, check_choice

    check_choice("recall_protocol", protocol, RECALL_PROTOCOLS)
    now = now or timezone.now()
    with transaction.atomic():
        st = settings_for(corpus)
        st.recall_protocol = protocol
        st.save(update_fields=["recall_protocol"])
        n = 0
        for task in (Task.objects.select_for_update().filter(corpus=corpus, kind=Kind.RELATIONS, key="")
                     .order_by("id")):
            old = relations_protocol(task)
            if old == protocol:
                continue
            n += 1
            kept = Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, document_id=task.document_id,
                                       key=f"protocol:{protocol}").first()
            # an older set-aside layer of the old protocol is superseded: retired (its paid answers are kept)
            for gone in Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, document_id=task.document_id,
                                            key=f"protocol:{old}"):
                _retire(gone)
            task.key = f"protocol:{old}"
            if task.status == Task.Status.OPEN:
                task.status = Task.Status.CANCELLED
            task.save(update_fields=["key", "status"])
            if kept is not None and kept.status == Task.Status.COMPLETE:
                kept.key = ""
                kept.save(update_fields=["key"])
                continue
            if kept is not None:
                _retire(kept)
            ent = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, document_id=task.document_id, key="",
                                      status=Task.Status.COMPLETE).first()
            if ent is not None:
                _create_relations_task(ent, (ent.result or {}).get("mentions", []), now)
        if n:  # recall's exhaustive sample changed: the evaluations app re-scores the corpus
            labels_written.send(sender=Task, corpus_id=corpus.pk)
    return n


def _retire(task: Task) -> None:
    """Set a relations task aside for good (key ``retired:<id>``, cancelled if open): no protocol reads it."""
    task.key = f"retired:{task.pk}"
    if task.status == Task.Status.OPEN:
        task.status = Task.Status.CANCELLED
    task.save(update_fields=["key", "status"])


# --------------------------------------------------------------------------- labels

def current_labels(corpus: Corpus, *, method: str | None = None) -> dict[str, Label]:
    """The newest label of every labelled key (optionally of one aggregation method)."""
    qs = Label.objects.filter(corpus=corpus).order_by("id")
    if method:
        qs = qs.filter(method=method)
    out: dict[str, Label] = {}
    for lab in qs.iterator(chunk_size=2000):
        out[lab.key] = lab
    return out


#: a Dawid–Skene label whose item's answers and class are unchanged is appended again only when its probability
#: moved by more than this (:func:`reaggregate`)
RELABEL_TOLERANCE = 0.01


def reaggregate(corpus: Corpus, *, method: str = "dawid-skene") -> int:
    """Fit Dawid–Skene over every counted verification answer of the corpus (controls included,
    which anchor the annotators' confusion) and append a label where an item's label changed: its answers, its
    class, or its probability by more than :data:`RELABEL_TOLERANCE`.
    Counted: weight above 0 (not quarantined, not discounted) by an annotator not blocked now.

    Labels are history (appended, never updated), and every refit moves every item's probability a little: a
    label per item whose probability moved by 1e-6 appended one for nearly every labelled item on each exchange
    with the crowd, so the table grew with the square of the labels (a shared task of 20 submissions at 5,000
    documents: 18,828 label rows after 18 submissions of 100 draws each, about ten a drawn item).  Now an item gets a new label when its own answers
    change (its count), its class flips, or its probability drifts by more than the tolerance: one label per
    answer batch of the item, plus rare drifts.

    Returns the number of labels written.  One process at a time per corpus: two would both find a label changed
    and both append it.
    """
    from unpooled.service.locks import exclusive

    with exclusive("reaggregate", corpus.pk):
        return _reaggregate(corpus, method)


def _reaggregate(corpus: Corpus, method: str) -> int:
    from unpooled.core.annotation import Answers, dawid_skene

    rows = list(Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, weight__gt=0,
                                      annotator__blocked=False)
                .order_by("id").values_list("task_id", "annotator_id", "correct"))
    if not rows:
        return 0
    answers = Answers.from_records((t, w, int(bool(c))) for t, w, c in rows)
    fit = dawid_skene(answers, n_classes=2)
    col = list(answers.classes).index(1) if 1 in answers.classes else None
    tasks = {t.pk: t for t in Task.objects.filter(pk__in=set(answers.item_keys), is_control=False,
                                                   status=Task.Status.COMPLETE)}
    latest = current_labels(corpus, method=method)
    annotators_by_task: dict[int, list[int]] = {}
    for t, w, _ in rows:
        annotators_by_task.setdefault(t, []).append(w)
    new = []
    for i, tid in enumerate(answers.item_keys):
        task = tasks.get(tid)
        if task is None:
            continue
        p = float(fit.probas[i, col]) if col is not None else 0.0
        old = latest.get(task.key)
        if (old is not None and old.n_answers == len(annotators_by_task[tid]) and old.correct == (p >= 0.5)
                and abs(old.probability - p) <= RELABEL_TOLERANCE):
            continue
        new.append(Label(corpus=corpus, key=task.key, key_hash=task.key_hash, task=task, probability=p,
                         correct=p >= 0.5, method=method, n_answers=len(annotators_by_task[tid]),
                         annotators=annotators_by_task[tid], guideline_version=task.guideline_version))
    Label.objects.bulk_create(new, batch_size=1000)
    return len(new)
