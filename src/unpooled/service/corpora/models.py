"""Corpora, their documents and sentences, relation schemas and the gold annotation layer."""

from __future__ import annotations

from django.db import models

from unpooled.core.schema import Schema
from unpooled.service.fields import JSONField


class RelationSchema(models.Model):
    """A relation schema stored as data (the JSON of :class:`unpooled.core.schema.Schema`)."""

    name = models.CharField(max_length=100, unique=True)
    title = models.CharField(max_length=300, blank=True)
    version = models.CharField(max_length=50, blank=True)
    definition = JSONField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def schema(self) -> Schema:
        cached = getattr(self, "_schema", None)
        if cached is None:
            cached = self._schema = Schema.from_dict(self.definition, path=f"schema {self.name}")
        return cached


class Corpus(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=300, blank=True)
    schema = models.ForeignKey(RelationSchema, on_delete=models.PROTECT, related_name="corpora")
    source_format = models.CharField(max_length=20)
    source = models.TextField(blank=True, help_text="where the documents were loaded from")
    n_documents = models.PositiveIntegerField(default=0)
    n_sentences = models.PositiveIntegerField(default=0)
    n_gold_relations = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "corpora"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_gold(self) -> bool:
        return self.n_gold_relations > 0


class Period(models.Model):
    """An evaluation period of a corpus: submissions made while it is open belong to it.

    At most one period of a corpus is open (``closed`` empty).  Closing a period freezes the scores of its
    submissions (:mod:`unpooled.service.evaluations.periods`); its annotated data can then be released and the
    next period started, on this corpus or a new one (``follows``).
    """

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="periods")
    number = models.PositiveIntegerField(help_text="1, 2, ... per corpus")
    title = models.CharField(max_length=200, blank=True)
    opened = models.DateTimeField()
    opened_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    closed = models.DateTimeField(null=True, blank=True, help_text="empty while the period is open")
    closed_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    released = models.DateTimeField(null=True, blank=True, help_text="when its annotated data was last released")
    follows = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="next",
                                help_text="the period (of any corpus) this one continues")

    class Meta:
        ordering = ["corpus", "number"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "number"], name="period_unique_number"),
            models.UniqueConstraint(fields=["corpus"], condition=models.Q(closed__isnull=True),
                                    name="period_one_open_per_corpus"),
        ]

    def __str__(self) -> str:
        return f"{self.corpus.name} period {self.number}"

    @property
    def is_open(self) -> bool:
        return self.closed is None


class Document(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="documents")
    doc_id = models.CharField(max_length=255)
    title = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    length = models.PositiveIntegerField()
    source = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["corpus", "doc_id"], name="document_unique_id")]
        ordering = ["id"]

    def __str__(self) -> str:
        return self.doc_id


class Sentence(models.Model):
    """A sentence of a document: ``document.text[start:end]``."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="sentences")
    index = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "index"], name="sentence_unique_index")]
        ordering = ["document", "index"]


class GoldEntity(models.Model):
    """An entity cluster of the corpus's gold annotation layer (e.g. a Re-DocRED vertexSet entry)."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="gold_entities")
    index = models.PositiveIntegerField()
    type = models.CharField(max_length=20)
    name = models.CharField(max_length=500)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "index"], name="gold_entity_unique_index")]
        verbose_name_plural = "gold entities"


class GoldMention(models.Model):
    entity = models.ForeignKey(GoldEntity, on_delete=models.CASCADE, related_name="mentions")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="gold_mentions")
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    type = models.CharField(max_length=20)
    sentence = models.IntegerField()


class GoldRelation(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="gold_relations")
    subject = models.ForeignKey(GoldEntity, on_delete=models.CASCADE, related_name="+")
    predicate = models.CharField(max_length=100)
    object = models.ForeignKey(GoldEntity, on_delete=models.CASCADE, related_name="+")
    evidence = JSONField(default=list)

    class Meta:
        indexes = [models.Index(fields=["document", "predicate"], name="gold_relation_doc_pred")]
