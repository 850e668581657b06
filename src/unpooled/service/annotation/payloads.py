"""What a verification page shows of a relation instance: the claim and the passage around it, never the system.

One instance at a time (:func:`verify_payload`) from the corpus's parsed schema and its document's sentences, which
:func:`sentences_of` reads for many documents at once; the gold controls (:mod:`.controls`) show the same fields.
"""

from __future__ import annotations

from unpooled.service.corpora.models import Document, Sentence
from unpooled.service.submissions.actions import parse_provenance
from unpooled.service.submissions.models import RelationInstance


def sentence_span(doc: Document, start: int, end: int) -> tuple[int, int]:
    """The smallest run of whole sentences that covers ``[start, end)``."""
    rows = list(doc.sentences.filter(end__gt=start, start__lt=end).order_by("index").values_list("start", "end"))
    return span_of(rows, len(doc.text), start, end)


def span_of(sentences, length: int, start: int, end: int) -> tuple[int, int]:
    """The smallest run of ``sentences`` (``(start, end)`` in document order) that covers ``[start, end)`` of a
    document of ``length`` characters; 200 characters either side when none does."""
    rows = [(s, e) for s, e in sentences if e > start and s < end]
    if not rows:
        return max(0, start - 200), min(length, end + 200)
    return rows[0][0], rows[-1][1]


def verify_payload(inst: RelationInstance, doc: Document, schema, sentences) -> dict:
    """What the verification page shows for one instance: the claim (the two spans of the document, the
    relation of the schema, the value of a value object) and the passage around it, and no more.
    ``schema``: the corpus's (:class:`unpooled.core.schema.Schema`); ``sentences``: the document's sentences,
    ``(start, end)`` in order (:func:`sentences_of`).

    Never which system predicted it, nor anything only a system wrote: its KB links and entity types
    would let a team recognise (or signal) its own output, and the method judges the relation in the
    passage, not them.  The system's provenance only widens the passage to the sentences it names.
    """
    rel = schema.resolve(inst.predicate)
    spans = list(parse_provenance(inst.provenance)) if inst.provenance else []
    lo = min([inst.subject_start, inst.object_start] + [s for s, _ in spans])
    hi = max([inst.subject_end, inst.object_end] + [e for _, e in spans])
    c0, c1 = span_of(sentences, len(doc.text), lo, hi)
    return {
        "predicate": inst.predicate,
        "description": rel.description if rel else "",
        "context": [c0, c1],
        "subject": {"start": inst.subject_start, "end": inst.subject_end,
                    "text": doc.text[inst.subject_start:inst.subject_end]},
        "object": {"start": inst.object_start, "end": inst.object_end,
                   "text": doc.text[inst.object_start:inst.object_end], "value": inst.value},
    }


def sentences_of(doc_ids) -> dict[int, list[tuple[int, int]]]:
    """The sentences of these documents, ``(start, end)`` in order, in one query per 500 documents."""
    doc_ids = sorted(set(doc_ids))
    out: dict[int, list[tuple[int, int]]] = {d: [] for d in doc_ids}
    for i in range(0, len(doc_ids), 500):
        for d, s, e in (Sentence.objects.filter(document_id__in=doc_ids[i:i + 500]).order_by("document_id", "index")
                        .values_list("document_id", "start", "end")):
            out[d].append((s, e))
    return out
