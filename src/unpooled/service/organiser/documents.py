"""The document-sample analysis of a corpus (seed 000's figures, per scheme): read the DB into core
inputs, call :mod:`unpooled.core.sampling.analysis`, cache what it returns.

Bounded work: the result is cached under a key that changes when what it reads changes (documents,
exhaustive sample, completed entity tasks, options).  A corpus of at most :data:`INLINE_DOCUMENTS`
documents is analysed inside the request (about a second); a larger one only by a background task
the organiser starts (:func:`request_analysis`; one at a time per key, marked pending in the cache).
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
from django.core.cache import cache

from unpooled.core.sampling.analysis import (
    SCHEMES, analyse_corpus, analyse_sample, analyse_schemes, figures_svg, format_tables,
)
from unpooled.core.sampling.seed import NAMED_TYPES, mention_index
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Task
from unpooled.service.annotation.sampling import annotated_entities
from unpooled.service.corpora.models import Corpus, GoldEntity, GoldRelation

INLINE_DOCUMENTS = 600       # analysed within the request up to this many documents (`unpooled bench documents`:
                             # Re-DocRED's 1,000 take about 2 s of CPU, 5-7 s on a loaded machine: background)
MAX_DOCUMENTS = 200_000      # refused above (the background task would hold every text in memory)
TIMEOUT = 7 * 24 * 3600
PENDING_TIMEOUT = 3600
DEFAULTS = {"size": 100, "draws": 3, "seed": 0}


class AnalysisError(ValueError):
    pass


def options_iv(size, draws, seed, n_documents: int) -> dict:
    """The analysis options, checked: ``size`` 1..documents, ``draws`` 1..20, ``seed`` ≥ 0."""
    out = {}
    for name, v, lo, hi in (("size", size, 1, max(1, n_documents)), ("draws", draws, 1, 20), ("seed", seed, 0, 2 ** 31)):
        try:
            iv = int(v)
        except (TypeError, ValueError):
            raise AnalysisError(f"{name}: expected a whole number, got {v!r}") from None
        if not lo <= iv <= hi:
            raise AnalysisError(f"{name}: expected {lo}..{hi}, got {iv}")
        out[name] = iv
    return out


def fingerprint(corpus: Corpus, opts: dict) -> str:
    ex = ExhaustiveDocument.objects.filter(corpus=corpus)
    ent = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, status=Task.Status.COMPLETE)
    last = ex.order_by("-id").values_list("id", flat=True).first() or 0
    return (f"docsample:{corpus.pk}:{corpus.n_documents}:{ex.count()}:{last}:{ent.count()}:"
            f"{opts['size']}:{opts['draws']}:{opts['seed']}")


def corpus_inputs(corpus: Corpus) -> dict:
    """Texts, per-document entity names and relation types, and the entity source, from the DB.

    Entities come from the gold layer when the corpus has one (named types only); else from the named
    entities annotated so far, found in every document by exact string match.
    """
    rows = list(corpus.documents.order_by("id").values_list("id", "text"))
    ids = [r[0] for r in rows]
    texts = [r[1] for r in rows]
    pos = {d: i for i, d in enumerate(ids)}
    names: list[list[str]] = [[] for _ in ids]
    gold = GoldEntity.objects.filter(document__corpus=corpus)
    source = "gold"
    if gold.exists():
        for doc_id, typ, name in gold.values_list("document_id", "type", "name").iterator(chunk_size=5000):
            if typ.upper() in NAMED_TYPES and name.strip():
                names[pos[doc_id]].append(name)
    else:
        annotated = ExhaustiveDocument.objects.filter(corpus=corpus).values_list("document_id", flat=True)
        found = annotated_entities(corpus, list(annotated))
        source = "annotated" if found else "none"
        for name, docs in zip(found, mention_index(texts, found)):
            for d in docs.tolist():
                names[d].append(name)
    rels: list[list[str]] | None = None
    if corpus.n_gold_relations:
        rels = [[] for _ in ids]
        for doc_id, pred in GoldRelation.objects.filter(document__corpus=corpus).values_list(
                "document_id", "predicate").iterator(chunk_size=5000):
            rels[pos[doc_id]].append(pred)
    return {"ids": ids, "texts": texts, "names": names, "relations": rels, "source": source}


def compute(corpus: Corpus, opts: dict) -> dict:
    """Run the analysis (no cache): tables, SVGs and timings."""
    if corpus.n_documents > MAX_DOCUMENTS:
        raise AnalysisError(f"corpus {corpus.name} has {corpus.n_documents:,} documents; the analysis reads at most "
                            f"{MAX_DOCUMENTS:,}")
    t0 = time.perf_counter()
    inp = corpus_inputs(corpus)
    t1 = time.perf_counter()
    if not inp["texts"]:
        raise AnalysisError(f"corpus {corpus.name} has no documents")
    size = min(opts["size"], len(inp["texts"]))
    ent_corpus, analyses = analyse_schemes(inp["texts"], inp["names"], inp["relations"], schemes=SCHEMES, size=size,
                                           draws=opts["draws"], rng=opts["seed"])
    current = _current_sample(corpus, inp["ids"], ent_corpus)
    if current is not None:
        analyses.append(current)
    t2 = time.perf_counter()
    svgs = figures_svg(ent_corpus, analyses)
    return {
        "corpus": corpus.name, "options": dict(opts, size=size), "source": inp["source"],
        "has_relations": inp["relations"] is not None, "documents": ent_corpus.n_documents,
        "entities": len(ent_corpus.df), "thresholds": list(ent_corpus.thresholds),
        "corpus_row": analyse_corpus(ent_corpus).to_dict(),
        "analyses": [a.to_dict() for a in analyses], "table": format_tables(ent_corpus, analyses), "svgs": svgs,
        "seconds": {"read": round(t1 - t0, 2), "analyse": round(t2 - t1, 2),
                    "total": round(time.perf_counter() - t0, 2)},
    }


def _current_sample(corpus: Corpus, ids: list[int], ent_corpus):
    rows = list(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("document_id", "inclusion", "scheme"))
    if not rows:
        return None
    pos = {d: i for i, d in enumerate(ids)}
    schemes = defaultdict(int)
    for _, _, s in rows:
        schemes[s] += 1
    label = "drawn sample (" + ", ".join(sorted(schemes)) + ")"
    return analyse_sample(ent_corpus, np.array([pos[d] for d, _, _ in rows]), np.array([r[1] for r in rows]),
                          label=label)


def cached(corpus: Corpus, opts: dict) -> tuple[dict | None, bool]:
    """``(result, pending)``: the cached analysis for these options, and whether a task is computing it."""
    key = fingerprint(corpus, opts)
    return cache.get(key), bool(cache.get(key + ":pending"))


def analysis_for_page(corpus: Corpus, opts: dict) -> tuple[dict | None, bool]:
    """The analysis, computed inside the request only for a small corpus; else from the cache."""
    got, pending = cached(corpus, opts)
    if got is None and not pending and corpus.n_documents <= INLINE_DOCUMENTS:
        got = compute(corpus, opts)
        cache.set(fingerprint(corpus, opts), got, TIMEOUT)
    return got, pending


def run_and_store(corpus: Corpus, opts: dict) -> dict:
    key = fingerprint(corpus, opts)
    try:
        got = compute(corpus, opts)
        cache.set(key, got, TIMEOUT)
        return got
    finally:
        cache.delete(key + ":pending")


def request_analysis(corpus: Corpus, opts: dict) -> bool:
    """Start the background analysis unless it is cached or already pending; True if one was started."""
    key = fingerprint(corpus, opts)
    if cache.get(key) is not None or not cache.add(key + ":pending", 1, PENDING_TIMEOUT):
        return False
    from .tasks import analyse_documents

    analyse_documents.enqueue(corpus.pk, opts["size"], opts["draws"], opts["seed"])
    return True


__all__ = ["AnalysisError", "DEFAULTS", "INLINE_DOCUMENTS", "analysis_for_page", "cached", "compute",
           "corpus_inputs", "options_iv", "request_analysis", "run_and_store"]


def draw_cost(st) -> dict:
    """What one newly drawn document costs at the corpus's settings ``st``: its entity-marking task, then its
    relation-marking task, each of ``answers_per_item`` answers (an answer's cost as the corpus's backend pays
    it: :meth:`~unpooled.service.annotation.models.AnnotationSettings.answer_cost_cents`)."""
    from unpooled.service.annotation.models import Kind

    k = st.answers_per_item
    entities, relations = st.answer_cost_cents(Kind.ENTITIES, k), st.answer_cost_cents(Kind.RELATIONS, k)
    return {"answers": k, "entities": entities, "relations": relations, "document": k * (entities + relations)}

