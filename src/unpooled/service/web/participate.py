"""What a newcomer needs to take part in a corpus's evaluation: its schema as rows to browse (names, argument
types, a gold example each) and a small sample submission built from the corpus's gold layer.

Plain functions over the stored corpus; the views in :mod:`.views.participate` render them.  Bounded: one
example per relation (one query for all of them), at most :data:`SAMPLE_LINES` sample lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db.models import Count, Min

from unpooled.service.corpora.models import Corpus, Document, GoldMention, GoldRelation

#: lines in the downloadable sample file
SAMPLE_LINES = 8
#: characters of context shown either side of an example's mentions, when its sentence is longer
EXAMPLE_CONTEXT = 160


@dataclass
class RelationRow:
    """One relation of a schema as the schema page shows it."""

    name: str
    description: str
    subject_types: list[str]
    object_types: list[str]
    string_valued: bool
    cardinality: str
    symmetric: bool
    inverse_of: str | None
    inverses: list[str]
    gold: int = 0
    example: dict | None = None    # {"pieces": [(text, css class)], "document": {pk, doc_id}, "subject", "object"}


def _pair(subject_mentions, object_mentions):
    """The closest (subject mention, object mention) pair: same sentence first, then nearest."""
    best = None
    for a in subject_mentions:
        for b in object_mentions:
            k = (abs(a.sentence - b.sentence), abs(a.start - b.start))
            if best is None or k < best[0]:
                best = (k, a, b)
    return (best[1], best[2]) if best else None


def _sentence_bounds(doc: Document, a: GoldMention, b: GoldMention) -> tuple[int, int]:
    lo, hi = min(a.sentence, b.sentence), max(a.sentence, b.sentence)
    rows = list(doc.sentences.filter(index__gte=lo, index__lte=hi).order_by("index").values_list("start", "end"))
    if not rows:
        return max(0, min(a.start, b.start) - EXAMPLE_CONTEXT), min(len(doc.text), max(a.end, b.end) + EXAMPLE_CONTEXT)
    return rows[0][0], rows[-1][1]


def _example_pieces(text: str, c0: int, c1: int, a: GoldMention, b: GoldMention) -> list[tuple[str, str]]:
    from unpooled.service.annotation.views import segments

    c0 = max(c0, min(a.start, b.start) - EXAMPLE_CONTEXT)
    c1 = min(c1, max(a.end, b.end) + EXAMPLE_CONTEXT)
    pieces = segments(text, c0, c1, [(a.start, a.end, "subj"), (b.start, b.end, "obj")])
    if pieces and c0 > 0:
        pieces.insert(0, ("… ", ""))
    if c1 < len(text):
        pieces.append((" …", ""))
    return pieces


def gold_examples(corpus: Corpus) -> dict[str, tuple[int, GoldRelation | None]]:
    """Per predicate: how many gold relations the corpus has, and the first of them (by id) with its pair of
    mentions; two queries plus one per predicate that has gold relations."""
    firsts = {p: (n, first) for p, n, first in GoldRelation.objects.filter(document__corpus=corpus)
              .values("predicate").annotate(n=Count("id"), first=Min("id")).values_list("predicate", "n", "first")}
    rels = {r.pk: r for r in GoldRelation.objects.filter(pk__in=[f for _, f in firsts.values()])
            .select_related("document", "subject", "object")}
    return {p: (n, rels.get(first)) for p, (n, first) in firsts.items()}


#: how long the schema page's rows stay in the cache (they change only when the corpus or its schema does)
ROWS_SECONDS = 600


def schema_rows(corpus: Corpus, *, examples: bool = True) -> list[RelationRow]:
    """The corpus's schema, one row per relation (canonical ones first, in the schema's order), each with its
    gold count and, with ``examples``, one gold example in its sentence.  Kept in the cache for
    :data:`ROWS_SECONDS` (two queries per relation with gold relations: the page would cost a few hundred)."""
    from django.core.cache import cache

    key = f"unpooled.schema-rows:v1:{corpus.pk}:{corpus.schema_id}:{corpus.n_gold_relations}:{int(examples)}"
    rows = cache.get(key)
    if rows is None:
        rows = _schema_rows(corpus, examples=examples)
        cache.set(key, rows, ROWS_SECONDS)
    return rows


def _schema_rows(corpus: Corpus, *, examples: bool) -> list[RelationRow]:
    schema = corpus.schema.schema()
    gold = gold_examples(corpus) if examples else {}
    rows = []
    for r in sorted(schema.relations.values(), key=lambda r: r.inverse_of is not None):
        row = RelationRow(name=r.name, description=r.description, subject_types=sorted(r.subject_types),
                          object_types=sorted(r.object_types), string_valued=r.string_valued,
                          cardinality=r.cardinality, symmetric=r.symmetric, inverse_of=r.inverse_of,
                          inverses=[i.name for i in schema.inverses(r.name)])
        n, rel = gold.get(r.name, (0, None))
        row.gold = n
        if rel is not None:
            ms = list(GoldMention.objects.filter(entity__in=[rel.subject_id, rel.object_id]).order_by("start"))
            pair = _pair([m for m in ms if m.entity_id == rel.subject_id], [m for m in ms if m.entity_id == rel.object_id])
            if pair is not None:
                a, b = pair
                doc = rel.document
                c0, c1 = _sentence_bounds(doc, a, b)
                row.example = {"pieces": _example_pieces(doc.text, c0, c1, a, b),
                               "document": {"pk": doc.pk, "doc_id": doc.doc_id},
                               "subject": doc.text[a.start:a.end], "object": doc.text[b.start:b.end]}
        rows.append(row)
    return rows


def sample_instances(corpus: Corpus, n: int = SAMPLE_LINES) -> list[dict]:
    """Up to ``n`` JSONL instances (dicts) the corpus's validation accepts: gold relations of different
    predicates, each between the closest mentions of its two gold entities, with their gold types and the
    sentences holding both as provenance.  A corpus without gold relations gets none (the page then shows
    the format only)."""
    out: list[dict] = []
    seen: set[str] = set()
    qs = (GoldRelation.objects.filter(document__corpus=corpus).select_related("document", "subject", "object")
          .order_by("document_id", "id"))
    schema = corpus.schema.schema()
    for rel in qs[:400]:  # bounded: enough to find n distinct predicates in any real corpus
        if len(out) >= n:
            break
        if rel.predicate in seen or rel.predicate not in schema:
            continue
        ms = list(GoldMention.objects.filter(entity__in=[rel.subject_id, rel.object_id]).order_by("start"))
        pair = _pair([m for m in ms if m.entity_id == rel.subject_id], [m for m in ms if m.entity_id == rel.object_id])
        if pair is None:
            continue
        a, b = pair
        doc = rel.document
        # the gold types, when the schema takes them for this relation (else no type: nothing to check)
        typed = (rel.subject.type in schema.entity_types and rel.object.type in schema.entity_types
                 and schema.allows_types(rel.predicate, rel.subject.type, rel.object.type))
        if schema.relations[schema.canonical_of(rel.predicate)[0]].string_valued:
            continue  # a gold relation is between two entities
        c0, c1 = _sentence_bounds(doc, a, b)
        seen.add(rel.predicate)
        subj = {"start": a.start, "end": a.end, "entity": f"{doc.doc_id}/e{rel.subject.index}"}
        obj = {"start": b.start, "end": b.end, "entity": f"{doc.doc_id}/e{rel.object.index}"}
        if typed:
            subj["type"], obj["type"] = rel.subject.type, rel.object.type
        subj["text"], obj["text"] = doc.text[a.start:a.end], doc.text[b.start:b.end]
        out.append({"doc": doc.doc_id, "subject": subj, "predicate": rel.predicate, "object": obj,
                    "provenance": [{"start": c0, "end": c1}], "confidence": 0.9})
    return out


def sample_tac(line: dict, run: str = "my_run_1") -> str:
    """One sample instance (a line of :func:`sample_instances`) as a TAC Cold Start KB the corpus's validation accepts,
    or "" when its entities have no type (a TAC KB types every entity)."""
    import io

    from unpooled.core.kb.model import Entity, Instance, Mention
    from unpooled.core.kb.tac import write_tac

    subj, obj = line["subject"], line["object"]
    if "type" not in subj or "type" not in obj:
        return ""
    doc = line["doc"]
    texts = {(subj["start"], subj["end"]): subj["text"], (obj["start"], obj["end"]): obj["text"]}
    out = io.StringIO()
    write_tac(out, run, [Entity("e1", subj["type"]), Entity("e2", obj["type"])],
              [Mention("e1", doc, subj["start"], subj["end"]), Mention("e2", doc, obj["start"], obj["end"])],
              [Instance(doc, "e1", subj["start"], subj["end"], line["predicate"], "e2", obj["start"], obj["end"], None,
                        tuple((p["start"], p["end"]) for p in line["provenance"]), line["confidence"])],
              lambda _doc, start, end: texts[(start, end)])
    return out.getvalue().rstrip("\n")


def sample_jsonl(corpus: Corpus, n: int = SAMPLE_LINES) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in sample_instances(corpus, n))
