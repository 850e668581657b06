"""Synthetic corpora and valid TAC Cold Start KBs over them (benchmarks and tests).

Documents are built from sentence templates whose entity mentions and
relations are known, so the generated KB is valid by construction: every
mention's text matches its offsets, every relation's arguments lie inside its
justification, types fit the TAC schema, and inverse and symmetric relations
appear in both directions as Cold Start KBs have them.
"""

from __future__ import annotations

import zlib
from typing import Iterator, TextIO

import numpy as np

from ..corpus.model import Document

FIRST = ["Ana", "Bruno", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jana", "Kofi", "Lena", "Mato",
         "Nia", "Omar", "Pia", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wim", "Xia", "Yuri", "Zoe"]
LAST = ["Adler", "Barros", "Costa", "Dunn", "Eklund", "Ferreira", "Gallo", "Horvat", "Ibsen", "Jovanovic",
        "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quist", "Rossi", "Sato", "Tanaka"]
ORG_A = ["Acme", "Borealis", "Cobalt", "Delta", "Ember", "Fjord", "Granite", "Helix", "Iris", "Juniper"]
ORG_B = ["Systems", "Bank", "University", "Records", "Foundation", "Labs", "Airlines", "Press"]
CITIES = ["Lisbon", "Oslo", "Kyoto", "Lagos", "Quito", "Perth", "Tartu", "Split", "Leeds", "Davao", "Graz", "Turku"]
TITLES = ["engineer", "director", "professor", "singer", "pilot", "editor", "architect", "chemist"]
YEARS = [str(y) for y in range(1931, 2001)]

# template, slots (type per slot), relations (subject slot, predicate, object slot or quoted string slot)
TEMPLATES: list[tuple[str, tuple[str, ...], tuple[tuple[int, str, int], ...]]] = [
    ("{0} works for {1} in {2}.", ("PER", "ORG", "GPE"),
     ((0, "per:employee_or_member_of", 1), (1, "org:employees_or_members", 0), (1, "org:city_of_headquarters", 2),
      (2, "gpe:headquarters_in_city", 1))),
    ("{0} was born in {1} in {2}.", ("PER", "GPE", "DATE"),
     ((0, "per:city_of_birth", 1), (1, "gpe:births_in_city", 0), (0, "per:date_of_birth", 2))),
    ("{0} married {1} last spring.", ("PER", "PER"), ((0, "per:spouse", 1), (1, "per:spouse", 0))),
    ("{0}, the {1}, spoke to reporters.", ("PER", "TITLE"), ((0, "per:title", 1),)),
    ("{0} is the daughter of {1}.", ("PER", "PER"), ((0, "per:parents", 1), (1, "per:children", 0))),
    ("{0} founded {1} with friends.", ("PER", "ORG"), ((1, "org:founded_by", 0), (0, "per:organizations_founded", 1))),
    ("{0} studied at {1}.", ("PER", "ORG"), ((0, "per:schools_attended", 1), (1, "org:students", 0))),
    ("It rained in {0} all week.", ("GPE",), ()),
]


def _fixed(options: list[str], key: str) -> str:
    return options[zlib.crc32(key.encode()) % len(options)]


def _names(rng: np.random.Generator, n_per: int, n_org: int, n_gpe: int) -> dict[str, list[str]]:
    per = sorted({f"{FIRST[i % len(FIRST)]} {LAST[(i // len(FIRST)) % len(LAST)]}" + (f" {i // 520}" if i >= 520 else "")
                  for i in range(n_per)})
    org = sorted({f"{ORG_A[i % len(ORG_A)]} {ORG_B[(i // len(ORG_A)) % len(ORG_B)]}" + (f" {i // 80}" if i >= 80 else "")
                  for i in range(n_org)})
    gpe = sorted({CITIES[i % len(CITIES)] + (f" {i // len(CITIES)}" if i >= len(CITIES) else "") for i in range(n_gpe)})
    return {"PER": per, "ORG": org, "GPE": gpe}


def synthetic_corpus(
    n_docs: int, *, sentences_per_doc: int = 20, rng: np.random.Generator | int | None = 0, n_entities: int = 2000,
) -> Iterator[tuple[Document, list[tuple[int, tuple[tuple[str, str, int, int], ...]]]]]:
    """Yield ``(document, annotations)``; annotations list, per sentence, its template and filled slots.

    Each slot is ``(type, text, start, end)`` with end-exclusive offsets into the document text.
    Entities are drawn from a Zipf-like popularity so some recur across many documents.
    """
    rng = np.random.default_rng(rng)
    names = _names(rng, n_entities // 2, n_entities // 4, max(12, n_entities // 4))
    weights = {t: 1.0 / np.arange(1, len(v) + 1) ** 0.8 for t, v in names.items()}
    weights = {t: w / w.sum() for t, w in weights.items()}
    for d in range(n_docs):
        doc_id = f"SYN_ENG_{d:07d}"
        text_parts: list[str] = []
        pos = 0
        sents: list[tuple[int, int]] = []
        ann = []
        t_idx = rng.integers(0, len(TEMPLATES), size=sentences_per_doc)
        for k in t_idx:
            template, slots, _ = TEMPLATES[k]
            fills = []
            used: set[str] = set()
            for typ in slots:
                if typ == "DATE":
                    fills.append(("DATE", YEARS[rng.integers(len(YEARS))]))
                elif typ == "TITLE":
                    fills.append(("TITLE", TITLES[rng.integers(len(TITLES))]))
                else:
                    while True:
                        name = names[typ][rng.choice(len(names[typ]), p=weights[typ])]
                        if name not in used:
                            used.add(name)
                            break
                    fills.append((typ, name))
            # single-valued slots get one value per subject (a valid KB has no UP215)
            if k == 0:
                fills[2] = ("GPE", _fixed(names["GPE"], fills[1][1]))
            elif k == 1:
                fills[1] = ("GPE", _fixed(names["GPE"], fills[0][1]))
                fills[2] = ("DATE", _fixed(YEARS, fills[0][1]))
            # lay the sentence out, recording each slot's span
            out = []
            spans = []
            cursor = pos
            rest = template
            for i, (typ, val) in enumerate(fills):
                before, rest = rest.split("{%d}" % i, 1)
                out.append(before)
                cursor += len(before)
                spans.append((typ, val, cursor, cursor + len(val)))
                out.append(val)
                cursor += len(val)
            out.append(rest)
            sentence = "".join(out)
            sents.append((pos, pos + len(sentence)))
            ann.append((int(k), tuple(spans)))
            text_parts.append(sentence)
            pos += len(sentence) + 1
        text = " ".join(text_parts)
        yield Document(doc_id, text, title=f"Synthetic document {d}", source="synthetic", sentences=sents), ann


def entity_id(typ: str, name: str) -> str:
    return ":" + typ + "_" + name.replace(" ", "_")


def write_synthetic_tac(
    out: TextIO, n_lines: int, *, rng: np.random.Generator | int | None = 0, sentences_per_doc: int = 20,
    run_id: str = "synthetic_run", docs_out: list | None = None,
) -> tuple[int, int]:
    """Write a valid Cold Start KB of about ``n_lines`` lines; returns ``(lines, documents)``.

    The documents it is written over are appended to ``docs_out`` (or must be
    regenerated with the same ``rng`` and sizes by :func:`synthetic_corpus`).
    """
    out.write(run_id + "\n")
    lines = 1
    typed: set[str] = set()
    n_docs = 0
    for doc, ann in synthetic_corpus(10**9, sentences_per_doc=sentences_per_doc, rng=rng):
        if lines >= n_lines:
            break
        n_docs += 1
        if docs_out is not None:
            docs_out.append(doc)
        seen_mentions: set[tuple[str, int]] = set()
        canon: set[str] = set()
        buf: list[str] = []
        for (k, slots), (s_start, s_end) in zip(ann, doc.sentences):
            ids = []
            for typ, val, b, e in slots:
                if typ in ("DATE", "TITLE"):
                    ids.append(None)
                    continue
                eid = entity_id(typ, val)
                ids.append(eid)
                if eid not in typed:
                    typed.add(eid)
                    buf.append(f"{eid}\ttype\t{typ}")
                if (eid, b) not in seen_mentions:
                    seen_mentions.add((eid, b))
                    kind = "canonical_mention" if eid not in canon else "mention"
                    if eid not in canon:
                        canon.add(eid)
                        buf.append(f'{eid}\tmention\t"{val}"\t{doc.id}:{b}-{e - 1}')
                    buf.append(f'{eid}\t{kind}\t"{val}"\t{doc.id}:{b}-{e - 1}')
            just = f"{doc.id}:{s_start}-{s_end - 1}"
            for subj, pred, obj in TEMPLATES[k][2]:
                typ, val, b, e = slots[obj]
                if ids[obj] is None:
                    buf.append(f'{ids[subj]}\t{pred}\t"{val}"\t{doc.id}:{b}-{e - 1},{just}\t0.9')
                else:
                    buf.append(f"{ids[subj]}\t{pred}\t{ids[obj]}\t{just}\t0.8")
        out.write("\n".join(buf) + "\n")
        lines += len(buf)
    return lines, n_docs
