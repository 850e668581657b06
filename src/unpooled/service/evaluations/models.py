"""Draws (i.i.d. from a submission's sampling distribution p_i) and estimated scores."""

from __future__ import annotations

from django.db import models

from unpooled.service.fields import JSONField
from unpooled.service.submissions.models import RelationInstance, Submission


class Draw(models.Model):
    """One draw, with replacement, from ``submission``'s sampling distribution at ``level``.

    Draws are kept in order (``seq``); repeated instances are repeated draws.  Their labels
    come from the label pool by canonical key, so a draw never needs its own answer.
    """

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="draws")
    level = models.CharField(max_length=20)
    seq = models.PositiveIntegerField()
    instance = models.ForeignKey(RelationInstance, on_delete=models.CASCADE, related_name="+")
    key = models.TextField()
    key_hash = models.BigIntegerField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "level", "seq"], name="draw_unique_seq")]


class MissedInstances(models.Model):
    """The true instances of the exhaustive documents that a submission does not match at a level, as its breakdown
    lists them (:mod:`.breakdown`; at most :data:`.breakdown.MISSED_CAP`, ``total`` of ``truth_total``).  They move
    with the truth and the matching only, not with the labels, so the breakdowns of one submission share a row
    (``digest``: of the listed entries and the truth's): a label batch stores no copy of them."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="missed_instances")
    level = models.CharField(max_length=20)
    digest = models.CharField(max_length=32)
    total = models.PositiveIntegerField()
    truth_total = models.PositiveIntegerField()
    entries = JSONField(default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "level", "digest"], name="missed_unique_digest")]


class Breakdown(models.Model):
    """A submission's score at a level broken down by relation and by subject entity type (:mod:`.breakdown`):
    computed once from the scoring's inputs (``inputs``: the digest of their fingerprint, :func:`.inputs.digest`) and
    stored once; every score estimated from the same inputs with the same ``estimator`` points to this row
    (:attr:`Score.breakdown`).  ``data`` holds the tables, ``missed`` the missed true instances (a row shared by the
    submission's breakdowns of the same truth); the ``all`` row is the score's own figures (:func:`.breakdown.stored`
    puts them in), so a row never copies one."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="breakdowns")
    level = models.CharField(max_length=20)
    estimator = models.CharField(max_length=40)
    inputs = models.CharField(max_length=64, blank=True)
    #: the shape of ``data`` (:data:`.breakdown.VERSION`): a row of another version is computed again
    version = models.PositiveSmallIntegerField()
    computed = models.DateTimeField()
    data = JSONField(default=dict)
    missed = models.ForeignKey(MissedInstances, null=True, on_delete=models.CASCADE, related_name="breakdowns")

    class Meta:
        indexes = [models.Index(fields=["submission", "level", "id"], name="breakdown_sub_level")]


class Score(models.Model):
    """Estimated precision, recall and F1 of a submission with their intervals, and how they were obtained."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="scores")
    level = models.CharField(max_length=20)
    estimator = models.CharField(max_length=40)
    p = models.FloatField(null=True)
    p_lo = models.FloatField(null=True)
    p_hi = models.FloatField(null=True)
    r = models.FloatField(null=True)
    r_lo = models.FloatField(null=True)
    r_hi = models.FloatField(null=True)
    f1 = models.FloatField(null=True)
    f1_lo = models.FloatField(null=True)
    f1_hi = models.FloatField(null=True)
    draws = models.PositiveIntegerField(default=0)
    labels_new = models.PositiveIntegerField(default=0)
    labels_reused = models.PositiveIntegerField(default=0)
    exhaustive_documents = models.PositiveIntegerField(default=0)
    #: the recall protocol recall and F1 follow (:data:`unpooled.core.names.RECALL_PROTOCOLS`)
    recall_protocol = models.CharField(max_length=20, default="sentence")
    details = JSONField(default=dict)
    #: its breakdown (:mod:`.breakdown`), shared with the scores of the submission estimated from the same inputs
    breakdown = models.ForeignKey(Breakdown, null=True, blank=True, on_delete=models.SET_NULL, related_name="scores")
    #: the covariances with the submissions scored with it (:func:`.publish.paired_details`): names other
    #: submissions, private ones too, so it is never shown as is (the leaderboard reads the visible pairs)
    paired = JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["submission", "level", "id"], name="score_sub_level")]

    @property
    def recall_label(self) -> str:
        """The recall protocol in words (``within-sentence``, ``document-level``), for the pages."""
        from unpooled.core.names import PROTOCOL_LABELS

        return PROTOCOL_LABELS.get(self.recall_protocol, self.recall_protocol)


#: the level of a submission's entity scores among its frozen scores (:class:`ScoreSnapshot`): no relation level
ENTITY_SCORES = "entities"


class ScoreSnapshot(models.Model):
    """A frozen published score: the score of ``submission`` at ``level`` when its period closed (or when it was
    published, for a submission of a period that closed before it was).  Later labels never move it: the
    re-scoring writes no new score for a submission with a snapshot (:mod:`.periods`).  Its entity scores are
    frozen alike, at level :data:`ENTITY_SCORES` (``entity_score`` set, ``score`` empty)."""

    period = models.ForeignKey("corpora.Period", on_delete=models.CASCADE, related_name="snapshots")
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="snapshots")
    level = models.CharField(max_length=20)
    score = models.ForeignKey(Score, null=True, on_delete=models.CASCADE, related_name="+")
    entity_score = models.ForeignKey("EntityScore", null=True, on_delete=models.CASCADE, related_name="+")
    frozen = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["submission", "level"], name="snapshot_unique_level"),
            models.CheckConstraint(
                condition=(models.Q(level=ENTITY_SCORES, score__isnull=True, entity_score__isnull=False)
                           | (~models.Q(level=ENTITY_SCORES) & models.Q(score__isnull=False,
                                                                        entity_score__isnull=True))),
                name="snapshot_one_score"),
        ]


class EntityScore(models.Model):
    """A submission's entity scores (:mod:`unpooled.core.estimators.entities`): mention detection P/R/F1,
    typing accuracy, linking P/R/F1 and NIL clustering B-cubed, each with its interval or the reason it cannot
    be given (``details['metrics']``), and what they rest on (documents, verified argument mentions)."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="entity_scores")
    level = models.CharField(max_length=20, help_text="the sampling level whose draws gave the verified mentions")
    documents = models.PositiveIntegerField(default=0, help_text="exhaustively annotated documents used")
    details = JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["submission", "id"], name="entity_score_sub")]
