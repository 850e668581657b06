"""Writes for corpora and schemas: ``check_*`` validates, ``do_*`` writes."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from unpooled.core.corpus.model import Document as CoreDocument
from unpooled.core.errors import UnpooledError
from unpooled.core.schema import Schema, load_schema

from .models import Corpus, Document, GoldEntity, GoldMention, GoldRelation, RelationSchema, Sentence

DEFAULT_SCHEMA = {"docred": "docred", "tac": "tac-kbp", "text": "tac-kbp", "jsonl": "tac-kbp"}
BATCH = 500


class ActionError(UnpooledError):
    """A request that cannot be carried out, with a message for the user."""


def do_ensure_schema(name_or_path: str | Path) -> RelationSchema:
    """The stored schema for a built-in name or a schema file, creating it if new.

    A schema file whose name is already stored with a different definition is refused.
    """
    schema = load_schema(name_or_path)
    return _store_schema(schema)


def _store_schema(schema: Schema) -> RelationSchema:
    definition = schema.to_dict()
    row = RelationSchema.objects.filter(name=schema.name).first()
    if row is None:
        return RelationSchema.objects.create(
            name=schema.name, title=schema.title, version=schema.version, definition=definition
        )
    if row.definition != definition:
        raise ActionError(
            f"a different schema named {schema.name!r} is already stored; give your schema file another 'name'"
        )
    return row


def get_corpus(name: str) -> Corpus:
    try:
        return Corpus.objects.select_related("schema").get(name=name)
    except Corpus.DoesNotExist:
        known = ", ".join(Corpus.objects.values_list("name", flat=True)) or "none yet: `unpooled corpus load`"
        raise ActionError(f"unknown corpus {name!r} (corpora: {known})") from None


def do_load_corpus(
    path: str | Path, fmt: str, name: str, *, schema: str | None = None, title: str = "", progress=None
) -> Corpus:
    """Load documents (and any gold layer) from ``path`` into a new corpus, atomically."""
    from unpooled.core.corpus import iter_documents

    if Corpus.objects.filter(name=name).exists():
        raise ActionError(f"corpus {name!r} already exists; choose another --name")
    with transaction.atomic():
        schema_row = do_ensure_schema(schema or DEFAULT_SCHEMA.get(fmt, "tac-kbp"))
        corpus = Corpus.objects.create(
            name=name, title=title or name, schema=schema_row, source_format=fmt, source=str(path)
        )
        batch: list[CoreDocument] = []
        totals = {"documents": 0, "sentences": 0, "gold": 0}
        for doc in iter_documents(path, fmt):
            batch.append(doc)
            if len(batch) >= BATCH:
                _store_documents(corpus, batch, totals)
                if progress:
                    progress(len(batch))
                batch = []
        if batch:
            _store_documents(corpus, batch, totals)
            if progress:
                progress(len(batch))
        if totals["documents"] == 0:
            raise ActionError(f"{path}: no documents found for format {fmt!r}")
        corpus.n_documents = totals["documents"]
        corpus.n_sentences = totals["sentences"]
        corpus.n_gold_relations = totals["gold"]
        corpus.save(update_fields=["n_documents", "n_sentences", "n_gold_relations"])
    return corpus


def _store_documents(corpus: Corpus, docs: list[CoreDocument], totals: dict) -> None:
    rows = Document.objects.bulk_create(
        [Document(corpus=corpus, doc_id=d.id, title=d.title[:500], text=d.text, length=len(d.text), source=d.source)
         for d in docs]
    )
    if rows and rows[0].pk is None:  # backends without RETURNING
        ids = dict(Document.objects.filter(corpus=corpus, doc_id__in=[d.id for d in docs]).values_list("doc_id", "pk"))
        for r in rows:
            r.pk = ids[r.doc_id]
    sentences = [Sentence(document=row, index=i, start=s, end=e) for row, d in zip(rows, docs)
                 for i, (s, e) in enumerate(d.sentences)]
    Sentence.objects.bulk_create(sentences, batch_size=2000)
    totals["documents"] += len(rows)
    totals["sentences"] += len(sentences)
    ents = [GoldEntity(document=row, index=e.index, type=e.type, name=e.name[:500])
            for row, d in zip(rows, docs) for e in d.entities]
    if not ents:
        return
    ents = GoldEntity.objects.bulk_create(ents, batch_size=2000)
    by_key = {(e.document_id, e.index): e for e in ents}
    mentions, relations = [], []
    for row, d in zip(rows, docs):
        for e in d.entities:
            ge = by_key[(row.pk, e.index)]
            mentions += [GoldMention(entity=ge, document=row, start=m.start, end=m.end, type=m.type, sentence=m.sentence)
                         for m in e.mentions]
        relations += [GoldRelation(document=row, subject=by_key[(row.pk, r.subject)], predicate=r.predicate,
                                   object=by_key[(row.pk, r.object)], evidence=list(r.evidence)) for r in d.relations]
    GoldMention.objects.bulk_create(mentions, batch_size=2000)
    GoldRelation.objects.bulk_create(relations, batch_size=2000)
    totals["gold"] += len(relations)
