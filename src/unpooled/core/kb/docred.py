"""DocRED-style relation labels as a submission (JSONL instances).

A DocRED file (e.g. the original DocRED labels in ``docred_hwe/dev_keys_new.json``)
states relations between entity clusters: ``(h, r, t, evidence sentences)``.
A submission states instances between mentions.  Each labelled triple becomes
one instance: the subject and object mentions are the pair closest together
(preferring a pair inside the evidence sentences), the provenance is the
sentence(s) holding both, and the entity ids are the document's cluster ids
(``<doc>/<index>``), so entity-level scores group by cluster.
"""

from __future__ import annotations

import json
from typing import Callable, Iterable, TextIO

from ..corpus.model import Document, GoldEntity


def _best_pair(h: GoldEntity, t: GoldEntity, evidence: set[int]):
    best = None
    for a in h.mentions:
        for b in t.mentions:
            if (a.start, a.end) == (b.start, b.end):
                continue
            in_ev = (a.sentence in evidence) + (b.sentence in evidence)
            score = (-in_ev, abs(a.sentence - b.sentence), abs(a.start - b.start), a.start, b.start)
            if best is None or score < best[0]:
                best = (score, a, b)
    return None if best is None else (best[1], best[2])


def docred_to_jsonl(
    documents: Iterable[Document], out: TextIO, *, corpus_text: Callable[[str], str | None] | None = None,
) -> dict[str, int]:
    """Write each document's relations as JSONL instances; returns counts.

    ``corpus_text(doc_id)`` gives the corpus's text for the document (None when
    the corpus lacks it); documents the corpus lacks, or whose text differs from
    the corpus's (their offsets would not resolve), are skipped and counted.
    """
    counts = {"documents": 0, "instances": 0, "not_in_corpus": 0, "text_differs": 0, "skipped_relations": 0}
    for doc in documents:
        if corpus_text is not None:
            text = corpus_text(doc.id)
            if text is None or text != doc.text:
                counts["not_in_corpus" if text is None else "text_differs"] += 1
                continue
        counts["documents"] += 1
        seen = set()
        for rel in doc.relations:
            h, t = doc.entities[rel.subject], doc.entities[rel.object]
            pair = _best_pair(h, t, set(rel.evidence))
            if pair is None or (rel.subject, rel.predicate, rel.object) in seen:
                counts["skipped_relations"] += 1
                continue
            seen.add((rel.subject, rel.predicate, rel.object))
            a, b = pair
            lo_s, hi_s = min(a.sentence, b.sentence), max(a.sentence, b.sentence)
            prov = [{"start": doc.sentences[i][0], "end": doc.sentences[i][1]} for i in range(lo_s, hi_s + 1)]
            row = {
                "doc": doc.id,
                "subject": {"start": a.start, "end": a.end, "entity": f"{doc.id}/{rel.subject}", "type": h.type},
                "predicate": rel.predicate,
                "object": {"start": b.start, "end": b.end, "entity": f"{doc.id}/{rel.object}", "type": t.type},
                "provenance": prov,
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            counts["instances"] += 1
    return counts
