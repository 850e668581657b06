"""Annotation data: annotators, tasks, leases, answers, labels, budgets, exhaustive samples.

A *task* is one item that needs ``k`` independent answers: the verification of one
canonical relation instance (``kind='verify'``, identified by the instance key shared by
every submission that predicted it), or the exhaustive annotation of one document's
entities (``'entities'``) or of its relations (``'relations'``, created once the entity
layer of that document is final).  An *assignment* leases a task to one annotator
until ``expires``; the pair (task, annotator) is unique, so nobody answers an item twice.
*Labels* are append-only: the current label of an instance key is its newest row.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from unpooled.core.names import PROTOCOL_LABELS, RECALL_PROTOCOLS
from unpooled.service.corpora.models import Corpus, Document
from unpooled.service.fields import JSONField
from unpooled.service.submissions.models import Submission


class Kind(models.TextChoices):
    VERIFY = "verify", "verify an instance"
    ENTITIES = "entities", "annotate a document's entities"
    RELATIONS = "relations", "annotate a document's relations"
    CLUSTERS = "clusters", "group unlinked entities across documents"


class Backend(models.TextChoices):
    INHOUSE = "inhouse", "in-house annotators"
    MTURK = "mturk", "Amazon Mechanical Turk"
    SIMULATED = "simulated", "simulated crowd"


class AnnotationSettings(models.Model):
    """A corpus's annotation policy: backend, redundancy, leases, prices, budget, quality rules."""

    corpus = models.OneToOneField(Corpus, on_delete=models.CASCADE, related_name="annotation_settings")
    backend = models.CharField(max_length=20, choices=Backend.choices, default=Backend.SIMULATED)
    answers_per_item = models.PositiveSmallIntegerField(default=3)
    answers_weak_relation = models.PositiveSmallIntegerField(
        default=5, help_text="answers per verification item of a relation the crowd judges weakly (its "
                             "sensitivity minus false-positive rate below 0.4 on the console); 0: answers per item")
    relation_groups = models.TextField(
        blank=True, default="", help_text="groups of relations the crowd judges alike, one a line: 'name: R1, R2'; "
        "a group shares one set of annotator error rates (empty: every relation has its own)")
    lease_seconds = models.PositiveIntegerField(default=900)
    reward_verify_cents = models.PositiveIntegerField(default=5)
    reward_entities_cents = models.PositiveIntegerField(default=260)
    reward_relations_cents = models.PositiveIntegerField(default=225)
    reward_clusters_cents = models.PositiveIntegerField(default=120, help_text="cross-document clustering task")
    budget_cents = models.PositiveIntegerField(null=True, blank=True, help_text="cap for the whole corpus")
    submission_budget_cents = models.PositiveIntegerField(
        null=True, blank=True, help_text="default cap per submission (verification)")
    control_share = models.FloatField(default=0.1, help_text="share of an annotator's items that are gold controls")
    block_below_accuracy = models.FloatField(default=0.6)
    block_min_controls = models.PositiveIntegerField(default=5)
    aggregation = models.CharField(max_length=20, default="dawid-skene",
                                   choices=[("majority", "majority vote"), ("dawid-skene", "Dawid–Skene")])
    # how a new submission is evaluated (service/evaluations/lifecycle.py)
    target_halfwidth = models.FloatField(
        default=0.05, help_text="half-width of the 90% precision interval a new submission's sample aims at")
    min_draws = models.PositiveIntegerField(default=20, help_text="fewest draws per level and submission")
    max_draws = models.PositiveIntegerField(default=500, help_text="most draws per level and submission")
    exhaustive_documents = models.PositiveIntegerField(
        default=40, help_text="documents sampled for exhaustive annotation (recall) when the corpus has none "
                              "(below 15, recall's 90% intervals were measured wide or too short: `unpooled simulate "
                              "documents`)")
    levels = models.CharField(max_length=60, default="instance,relation,entity",
                              help_text="comma-separated levels a new submission is sampled and scored at")
    open_signup = models.BooleanField(
        default=False, help_text="annotators who signed up without an organiser's invite may annotate this corpus")
    recall_protocol = models.CharField(
        max_length=20, default="sentence", choices=[(p, PROTOCOL_LABELS[p]) for p in RECALL_PROTOCOLS],
        help_text="which true facts recall counts: within-sentence (the exhaustive annotation pairs mentions within "
                  "a sentence) or document-level (every pair of entity clusters of a document, cross-sentence facts "
                  "included; needs the corpus's entity clusters, e.g. DocRED's)")
    gold_public = models.BooleanField(
        default=True, help_text="everyone sees the corpus's gold layer (document pages, the schema's examples, the "
                                "sample file); off: organisers only, so that the gold controls are drawn from a layer "
                                "annotators cannot read")

    class Meta:
        verbose_name = verbose_name_plural = "annotation settings"

    @staticmethod
    def groups_of(corpus) -> dict[str, str]:
        """``relation -> group`` the organiser set for ``corpus`` (a corpus or its id) in :attr:`relation_groups`
        (validated when saved through the console); empty without settings or groups."""
        st = AnnotationSettings.objects.filter(corpus=corpus).only("relation_groups").first()
        return st.group_of_relation() if st is not None else {}

    def group_of_relation(self) -> dict[str, str]:
        """``relation -> group`` of these settings' :attr:`relation_groups`."""
        from unpooled.core.annotation.relation_groups import parse_relation_groups

        return parse_relation_groups(self.relation_groups)

    def reward_cents(self, kind: str) -> int:
        return {Kind.VERIFY: self.reward_verify_cents, Kind.ENTITIES: self.reward_entities_cents,
                Kind.RELATIONS: self.reward_relations_cents, Kind.CLUSTERS: self.reward_clusters_cents}[kind]

    def answer_cost_cents(self, kind: str, assignments: int) -> int:
        """What one answer of ``kind`` asked of the corpus's backend costs: its reward and, on Mechanical Turk,
        Amazon's fee on an assignment of a HIT of ``assignments`` (:mod:`unpooled.core.annotation.mturk_fees`)."""
        from unpooled.core.annotation.mturk_fees import assignment_cost_cents

        reward = self.reward_cents(kind)
        return assignment_cost_cents(reward, assignments) if self.backend == Backend.MTURK else reward


def settings_for(corpus: Corpus) -> AnnotationSettings:
    """The corpus's annotation settings (a row with the defaults is made the first time)."""
    got, _ = AnnotationSettings.objects.get_or_create(corpus=corpus)
    return got


def settings_of(task: "Task") -> AnnotationSettings:
    """The settings of ``task``'s corpus: those read with it (``select_related("corpus__annotation_settings")``,
    no query), else :func:`settings_for`'s."""
    try:
        return task.corpus.annotation_settings
    except AnnotationSettings.DoesNotExist:
        return settings_for(task.corpus)


class Annotator(models.Model):
    """A person (or simulated worker) who answers tasks, on one backend."""

    backend = models.CharField(max_length=20, choices=Backend.choices)
    external_id = models.CharField(max_length=200, help_text="user name, MTurk WorkerId or simulated id")
    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="annotator")
    blocked = models.BooleanField(default=False)
    blocked_reason = models.TextField(blank=True)
    blocked_at = models.DateTimeField(null=True, blank=True)
    controls_answered = models.PositiveIntegerField(default=0)
    controls_correct = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["backend", "external_id"], name="annotator_unique_id")]

    def __str__(self) -> str:
        return f"{self.backend}:{self.external_id}"

    @property
    def control_accuracy(self) -> float | None:
        """Posterior-mean accuracy on gold controls under a Beta(1, 1) prior."""
        if not self.controls_answered:
            return None
        return (self.controls_correct + 1) / (self.controls_answered + 2)


class Task(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", "open"
        COMPLETE = "complete", "complete"
        CANCELLED = "cancelled", "cancelled"

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="annotation_tasks")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="annotation_tasks")
    key = models.TextField(blank=True, help_text="canonical instance key (verify tasks)")
    key_hash = models.BigIntegerField(default=0)
    payload = JSONField(default=dict, help_text="what the page shows; never the submitting system")
    group = models.CharField(max_length=100, blank=True, help_text="relation type, for agreement per group")
    answers_needed = models.PositiveSmallIntegerField(default=3)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    priority = models.DateTimeField(help_text="age of the oldest request; older first")
    is_control = models.BooleanField(default=False)
    control_answer = JSONField(null=True, blank=True)
    result = JSONField(null=True, blank=True, help_text="the aggregated answer")
    guideline_version = models.CharField(max_length=20)
    created = models.DateTimeField(auto_now_add=True)
    completed = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["corpus", "kind", "status", "priority"], name="task_queue"),
            models.Index(fields=["key_hash"], name="task_key"),
            # the web queue's oldest open items of a kind, whatever the corpus (leasing.lease_next): read in this
            # order, only the first are counted, however many items are open
            models.Index(fields=["kind", "priority", "id"], condition=models.Q(status="open", is_control=False),
                         name="task_open_queue"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "kind", "document", "key"], name="task_unique_item"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"


class TaskRequest(models.Model):
    """Which submission asked for a task (for priority and budgets; never shown to annotators)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="requests")
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="task_requests")
    committed_cents = models.PositiveIntegerField(default=0, help_text="expected cost when this request created the task")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "submission"], name="request_unique")]


class Assignment(models.Model):
    """A lease of one task to one annotator; at most one per (task, annotator)."""

    class Status(models.TextChoices):
        LEASED = "leased", "leased"
        SUBMITTED = "submitted", "submitted"
        EXPIRED = "expired", "expired"
        SKIPPED = "skipped", "skipped (not offered to this annotator again)"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="assignments")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.LEASED)
    token = models.CharField(max_length=64, unique=True, help_text="opaque id used in page URLs")
    leased = models.DateTimeField()
    expires = models.DateTimeField()
    external_ref = models.CharField(max_length=200, blank=True, help_text="e.g. MTurk HITId/AssignmentId")
    control_scored = models.BooleanField(default=False, help_text="a gold control's first answer under this lease "
                                         "was scored: an undo keeps that score, and the answer given again is not "
                                         "scored (an annotator cannot erase a wrong control answer)")
    submit_to = models.CharField(max_length=40, blank=True,
                                 help_text="MTurk: where the worker's browser finishes the assignment (one of two hosts)")

    class Meta:
        # one lease per (task, annotator); an MTurk worker's leases are per assignment (``external_ref``), since a
        # made-up assignment under a real worker's id must not keep the real one out (security review N4): only
        # the assignment Mechanical Turk lists for that worker is ever confirmed
        constraints = [models.UniqueConstraint(fields=["task", "annotator", "external_ref"], name="assignment_unique")]
        indexes = [models.Index(fields=["status", "expires"], name="assignment_lease")]


class Answer(models.Model):
    """One annotator's answer to one task. Append-only; ``weight`` 0 discounts it.  The one exception: an in-house
    annotator's undo of their own last answer while its lease is live and the task still open
    (:func:`~unpooled.service.annotation.actions.undo_answer`) deletes it; it never counted towards a label.

    An answer through Mechanical Turk arrives ``quarantined`` (weight 0, nothing owed): the page cannot tell a
    real assignment from a made-up one. It counts once :func:`~unpooled.service.crowd.mturk_sync.collect`
    has found the assignment among the HIT's submitted assignments, by the same worker, carrying this lease's
    token (:func:`~unpooled.service.annotation.actions.confirm_mturk_answer`).
    """

    assignment = models.OneToOneField(Assignment, on_delete=models.CASCADE, related_name="answer")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="answers")
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="answers")
    value = JSONField()
    correct = models.BooleanField(null=True, help_text="verify: the answer says the instance is correct")
    weight = models.FloatField(default=1.0)
    seconds = models.FloatField(null=True, blank=True)
    quarantined = models.BooleanField(default=False, help_text="MTurk: not yet confirmed by the MTurk API")
    cost_cents = models.PositiveIntegerField(default=0)
    guideline_version = models.CharField(max_length=20)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["task", "weight"], name="answer_task")]


class Label(models.Model):
    """A final verification label of a canonical instance key. Append-only: newest row wins."""

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="labels")
    key = models.TextField()
    key_hash = models.BigIntegerField()
    task = models.ForeignKey(Task, null=True, on_delete=models.SET_NULL, related_name="labels")
    probability = models.FloatField(help_text="Dawid-Skene: posterior probability of being correct; "
                                              "majority: the share of answers saying correct")
    correct = models.BooleanField(help_text="the hard label")
    method = models.CharField(max_length=20)
    n_answers = models.PositiveSmallIntegerField()
    annotators = JSONField(default=list, help_text="annotator ids whose answers were used")
    guideline_version = models.CharField(max_length=20)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["corpus", "key_hash", "-id"], name="label_key")]


class SubmissionBudget(models.Model):
    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="annotation_budget")
    limit_cents = models.PositiveIntegerField()


class ExhaustiveDocument(models.Model):
    """A document chosen for exhaustive annotation, with its (conditional) inclusion probability."""

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="exhaustive_documents")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    scheme = models.CharField(max_length=20)
    stage = models.PositiveSmallIntegerField(default=1)
    inclusion = models.FloatField()
    sample_seed = models.BigIntegerField(null=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["corpus", "document"], name="exhaustive_unique_doc")]

    @property
    def weight(self) -> float:
        return 1.0 / self.inclusion


def link_handle(request_token: str) -> str:
    """The handle a HIT's link names it by (``/annotate/mturk/?hit=…``): an HMAC of its request token under the
    service's key (43 characters), so nothing a worker sees tells one HIT's task from another's."""
    from django.core import signing

    return signing.Signer(salt="unpooled.annotation.mturk-link").signature(request_token)


class Hit(models.Model):
    """An MTurk HIT posted for a task. The row (with its request token) is written *before* the
    call, so a crash between the two is repaired by reconciliation: the HIT is found by its
    RequesterAnnotation and adopted, never posted twice."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="hit")
    request_token = models.CharField(max_length=64, unique=True)
    link = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False,
                            help_text="the handle the HIT's link names it by (link_handle of the request token)")
    hit_id = models.CharField(max_length=100, blank=True)
    max_assignments = models.PositiveSmallIntegerField()
    reward_cents = models.PositiveIntegerField(null=True, blank=True, help_text="the reward the HIT was posted with "
                                               "(what Amazon pays an assignment, before its fee); unknown on older rows")
    status = models.CharField(max_length=20, default="pending")
    approved = JSONField(default=list, help_text="AssignmentIds approved")
    rejected = JSONField(default=list, help_text="AssignmentIds rejected")
    earlier = JSONField(default=list, help_text="the task's HITs before this one, settled (Amazon extends no HIT "
                        "across 10 assignments: a new one took the rest): hit_id, assignments, reward_cents, "
                        "approved, rejected")
    expires = models.DateTimeField(null=True, blank=True, help_text="the last moment a worker may hold an assignment "
                                   "of the HIT (its expiration plus an assignment's duration): its link takes no new "
                                   "worker afterwards")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name, verbose_name_plural = "HIT", "HITs"

    def save(self, *args, **kwargs) -> None:
        if not self.link:
            self.link = link_handle(self.request_token)
        super().save(*args, **kwargs)

    def reward(self, st: AnnotationSettings) -> int:
        """The reward the HIT was posted with (cents); on a row older than that record, the corpus's now (``st``:
        its settings)."""
        return st.reward_cents(self.task.kind) if self.reward_cents is None else self.reward_cents
