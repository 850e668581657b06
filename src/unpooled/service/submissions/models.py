"""Teams, submissions and the submitted knowledge base (entities, mentions, relation instances)."""

from __future__ import annotations

from django.db import models

from unpooled.service.corpora.models import Corpus, Document
from unpooled.service.fields import JSONField

#: the team of the human reference submissions (:mod:`unpooled.service.evaluations.reference`); no one can sign up
#: or upload under it (:func:`unpooled.service.accounts.actions.check_team_name`)
REFERENCE_TEAM = "[human reference]"


def _invite_code() -> str:
    import secrets

    return secrets.token_urlsafe(9)


class Team(models.Model):
    """A team submits runs. Organisers set its quotas (``None``: the site default, see ``quota_limits``)."""

    name = models.CharField(max_length=100, unique=True)
    quota_per_day = models.PositiveIntegerField(null=True, blank=True,
                                                help_text="accepted submissions per 24 hours (empty: site default)")
    quota_total = models.PositiveIntegerField(null=True, blank=True,
                                              help_text="accepted submissions in all (empty: site default)")
    invite_code = models.CharField(max_length=20, default=_invite_code, help_text="lets a new user join the team")
    approved = models.BooleanField(default=True, help_text="may submit; a team made by sign-up waits for an "
                                   "organiser's approval while UNPOOLED_TEAM_APPROVAL is on")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Submission(models.Model):
    class Status(models.TextChoices):
        """The lifecycle stage (before ingestion, the upload is a background task; see web.upload_status)."""

        INGESTED = "ingested", "validated and stored"
        SAMPLING = "sampling", "sampling instances"
        ANNOTATING = "annotating", "waiting for labels"
        SCORING = "scoring", "scoring"
        PUBLISHED = "published", "scored and published"
        FAILED = "failed", "failed"

    class Visibility(models.TextChoices):
        PUBLIC = "public", "public: everyone sees it on the leaderboard"
        PRIVATE = "private", "private: only the team and the organisers see it"

    corpus = models.ForeignKey(Corpus, on_delete=models.PROTECT, related_name="submissions")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="submissions")
    period = models.ForeignKey("corpora.Period", null=True, blank=True, on_delete=models.PROTECT,
                               related_name="submissions", help_text="the evaluation period it was made in (set "
                                                                     "at upload; empty: the corpus had no periods)")
    is_reference = models.BooleanField(
        default=False, help_text="the human reference: the corpus's exhaustive annotation scored as a submission "
                                 "(unpooled.service.evaluations.reference), not a team's run")
    run_id = models.CharField(max_length=200)
    format = models.CharField(max_length=10)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.INGESTED)
    status_changed = models.DateTimeField(null=True, blank=True)
    failed_stage = models.CharField(max_length=20, blank=True, help_text="the stage that failed (retry resumes it)")
    error = models.TextField(blank=True, help_text="why the failed stage failed")
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.PUBLIC)
    submitted_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="submissions")
    description = models.TextField(blank=True)
    link = models.URLField(max_length=500, blank=True, help_text="the method's paper or code (http or https)")
    plan = JSONField(default=dict, help_text="the sampling plan per level, and label reuse (lifecycle)")
    file_name = models.CharField(max_length=500, blank=True)
    file_sha256 = models.CharField(max_length=64)
    file_size = models.BigIntegerField(default=0)
    counts = JSONField(default=dict)
    warnings = JSONField(default=dict, help_text="the validation report of the accepted file")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            # the same file is recognised within a team only: another team's identical file is its own run
            # (a duplicate check across teams told a rival team's private submission id and counts)
            models.UniqueConstraint(fields=["corpus", "team", "file_sha256"], name="submission_unique_team_file"),
            models.UniqueConstraint(fields=["corpus", "team", "run_id"], name="submission_unique_run"),
        ]

    def __str__(self) -> str:
        return f"{self.team.name}/{self.run_id}"


class SubmissionEntity(models.Model):
    """A system entity: the submission's own cluster id, its type and KB links."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="entities")
    name = models.CharField(max_length=300)
    type = models.CharField(max_length=20, null=True)
    links = JSONField(default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "name"], name="entity_unique_name")]
        verbose_name_plural = "submission entities"


class SubmissionMention(models.Model):
    # no index of its own: mention_sub_doc leads with it (one index less to keep up while a KB is stored)
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="mentions", db_index=False)
    entity = models.ForeignKey(SubmissionEntity, on_delete=models.CASCADE, related_name="mentions")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, default="mention")
    canonical = models.BooleanField(default=False)
    confidence = models.FloatField(default=1.0)

    class Meta:
        indexes = [models.Index(fields=["submission", "document"], name="mention_sub_doc")]


class RelationInstance(models.Model):
    """A relation instance in canonical direction.

    ``key`` is the canonical identity shared across submissions
    (:func:`unpooled.core.kb.instance_key`); ``key_hash`` its 64-bit digest, indexed,
    is what label look-ups join on.
    """

    # no index of its own (instance_sub_id and instance_sub_pred lead with it), and the document's is the foreign
    # key's: each index less is one less to keep up for every stored instance
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="instances", db_index=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    predicate = models.CharField(max_length=100)
    subject = models.ForeignKey(SubmissionEntity, on_delete=models.CASCADE, related_name="+")
    subject_start = models.PositiveIntegerField()
    subject_end = models.PositiveIntegerField()
    object = models.ForeignKey(SubmissionEntity, on_delete=models.CASCADE, null=True, related_name="+")
    object_start = models.PositiveIntegerField()
    object_end = models.PositiveIntegerField()
    value = models.TextField(null=True)
    provenance = models.TextField(help_text="justification spans, 'start-end;start-end' (end-exclusive)")
    confidence = models.FloatField(default=1.0)
    line = models.PositiveIntegerField(default=0)
    key = models.TextField()
    key_hash = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["submission", "predicate"], name="instance_sub_pred"),
            models.Index(fields=["submission", "subject"], name="instance_sub_subject"),
            models.Index(fields=["key_hash"], name="instance_key"),
            models.Index(fields=["submission", "id"], name="instance_sub_id"),
        ]


class UploadAttempt(models.Model):
    """One upload handed to validation (web form or API), whatever became of it.

    What bounds the work one caller can cause: rejected and failed uploads count against
    :data:`settings.UPLOAD_REJECTS_PER_DAY` per team and per user (and per address), uploads still
    waiting against :data:`settings.UPLOADS_PENDING`; see :mod:`unpooled.service.submissions.uploads`.
    Accepted ones count against the team's quota instead. Kept as long as upload results are.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "waiting or being validated"
        ACCEPTED = "accepted", "stored (or the team's same file found)"
        REJECTED = "rejected", "refused: invalid file, quota, run name taken"
        FAILED = "failed", "the validation crashed"

    task_id = models.CharField(max_length=64, blank=True, db_index=True, help_text="the validation task's result id")
    team_name = models.CharField(max_length=100)
    user = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    address = models.GenericIPAddressField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    corpus_name = models.CharField(max_length=100, blank=True)
    file_name = models.CharField(max_length=500, blank=True)
    outcome = JSONField(default=dict, blank=True, help_text="a rejected upload's message and diagnostics "
                                                                   "(at most HISTORY_DIAGNOSTICS), kept for its history")

    class Meta:
        indexes = [
            models.Index(fields=["team_name", "created"], name="attempt_team"),
            models.Index(fields=["user", "created"], name="attempt_user"),
            models.Index(fields=["address", "created"], name="attempt_address"),
            models.Index(fields=["created"], name="attempt_created"),
        ]

    def __str__(self) -> str:
        return f"upload {self.task_id or self.pk} by {self.team_name}: {self.state}"
