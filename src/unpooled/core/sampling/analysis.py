r"""What a document sample holds: the figures of seed 000 (method.md §5.1), per sampling scheme.

For a corpus whose documents carry entity names (the gold layer, or names found by string
match) and relation types, and for a document sample:

1. **Entity frequency.**  Each entity's *document frequency* :math:`df_e` is the number of
   documents mentioning it.  Seed 000 bins entities at the corpus's 50th and 90th percentiles
   of :math:`df` (3 and 154 documents in TAC KBP 2016): *low* :math:`df \le q_{50}`, *medium*
   :math:`q_{50} < df \le q_{90}`, *high* :math:`df > q_{90}`.  The histogram counts entities
   per power-of-two bucket of :math:`df`, in the corpus and among the entities the sample
   mentions.
2. **Clusters.**  Per bin, the entities mentioned in more than one sampled document: the
   cross-document links the sample lets an evaluation test (seed 000, Fig. "exhaustive entity
   cross").
3. **Relation types.**  The share of each relation type among the sample's relations against
   the corpus's, raw and weighted by :math:`1/\pi_d` (the weighted share estimates the corpus's).

Entities are identified across documents by their case-folded token sequence (:func:`entity_key`):
without knowledge-base links, two documents mention the same entity when they use the same name.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import InvalidInputError
from .documents import tokenize

BINS = ("low", "medium", "high")


def entity_key(name: str) -> str:
    """The cross-document identity of an entity name: its case-folded tokens joined by spaces."""
    return " ".join(tokenize(name))


@dataclass(frozen=True)
class CorpusEntities:
    """Per document, the keys of the entities it mentions; per entity key, its document frequency."""

    doc_keys: list[frozenset]
    df: dict
    thresholds: tuple[float, float]
    relations: list[Counter]          # per document: relation type -> count

    @property
    def n_documents(self) -> int:
        return len(self.doc_keys)

    def bin_of(self, df: int) -> str:
        lo, hi = self.thresholds
        return "low" if df <= lo else ("high" if df > hi else "medium")


def frequency_thresholds(df: Sequence[int]) -> tuple[float, float]:
    r"""The seed's bins: low :math:`\le q_{50}`, high :math:`> q_{90}` of the document frequencies.

    When :math:`q_{90} = q_{50}` (Re-DocRED: 92% of entities appear in one document) the medium bin
    would be empty; then high starts above the 90th percentile of the frequencies *above* :math:`q_{50}`.
    """
    v = np.asarray(df, dtype=float)
    if len(v) == 0:
        return math.nan, math.nan
    lo = float(np.quantile(v, 0.5, method="inverted_cdf"))
    hi = float(np.quantile(v, 0.9, method="inverted_cdf"))
    if hi <= lo and np.any(v > lo):
        hi = float(np.quantile(v[v > lo], 0.9, method="inverted_cdf"))
        if hi <= lo + 1 and np.any(v > hi):
            hi = max(hi, lo + 1)
    return lo, hi


def _thresholds_iv(th) -> tuple[float, float]:
    try:
        lo, hi = (float(t) for t in th)
    except (TypeError, ValueError):
        raise InvalidInputError(f"thresholds: expected (low, high) document counts, got {th!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 1 <= lo < hi):
        raise InvalidInputError(f"thresholds: expected 1 <= low < high, got {th!r}")
    return lo, hi


def corpus_entities(doc_names: Sequence[Sequence[str]], doc_relations: Sequence[Sequence[str]] | None = None, *,
                    thresholds=None) -> CorpusEntities:
    """Build the corpus side: ``doc_names`` per document its entity names, ``doc_relations`` per document the
    relation type of each of its relations (optional); ``thresholds`` (low, high) document counts, default
    :func:`frequency_thresholds`."""
    if doc_relations is not None and len(doc_relations) != len(doc_names):
        raise InvalidInputError(f"doc_relations: expected one list per document ({len(doc_names)}), "
                                f"got {len(doc_relations)}")
    keys = [frozenset(k for k in (entity_key(n) for n in names) if k) for names in doc_names]
    df: Counter = Counter(k for ks in keys for k in ks)
    th = frequency_thresholds(list(df.values())) if thresholds is None else _thresholds_iv(thresholds)
    rels = [Counter(r) for r in doc_relations] if doc_relations is not None else [Counter() for _ in keys]
    return CorpusEntities(keys, dict(df), th, rels)


def buckets(max_df: int) -> list[tuple[int, int]]:
    """Power-of-two buckets of document frequency: 1, 2, 3–4, 5–8, … up to ``max_df``."""
    out, lo = [(1, 1)], 2
    while lo <= max(max_df, 1):
        hi = 2 * lo - 2 if lo > 2 else 2
        out.append((lo, hi))
        lo = hi + 1
    return out


def bucket_label(b: tuple[int, int]) -> str:
    return str(b[0]) if b[0] == b[1] else f"{b[0]}–{b[1]}"


@dataclass(frozen=True)
class SampleAnalysis:
    """The figures for one sample (or the corpus itself, ``label='corpus'``)."""

    label: str
    documents: int
    entities: int
    by_bin: dict                       # bin -> entities mentioned in the sample
    clusters: dict                     # bin -> entities mentioned in more than one sampled document
    histogram: list                    # per bucket: entities mentioned
    relations: dict                    # type -> raw share among the sample's relations
    relations_weighted: dict = field(default_factory=dict)   # type -> share weighted by 1/π
    n_relations: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def analyse_sample(corpus: CorpusEntities, indices, inclusion=None, *, label: str = "sample") -> SampleAnalysis:
    """The figures of the documents ``indices`` (with their inclusion probabilities, for the weighted shares)."""
    idx = np.asarray(indices, dtype=np.int64)
    if len(idx) and (idx.min() < 0 or idx.max() >= corpus.n_documents):
        raise InvalidInputError(f"indices: expected document indices in 0..{corpus.n_documents - 1}")
    w = np.ones(len(idx)) if inclusion is None else 1.0 / np.asarray(inclusion, dtype=float)
    if len(w) != len(idx):
        raise InvalidInputError(f"inclusion: expected one probability per sampled document ({len(idx)})")
    seen: Counter = Counter(k for i in idx.tolist() for k in corpus.doc_keys[i])
    by_bin = {b: 0 for b in BINS}
    clusters = {b: 0 for b in BINS}
    bks = buckets(max(corpus.df.values(), default=1))
    hist = [0] * len(bks)
    for k, c in seen.items():
        d = corpus.df[k]
        b = corpus.bin_of(d)
        by_bin[b] += 1
        if c > 1:
            clusters[b] += 1
        hist[_bucket_index(bks, d)] += 1
    raw: Counter = Counter()
    wt: Counter = Counter()
    for i, wi in zip(idx.tolist(), w.tolist()):
        for r, c in corpus.relations[i].items():
            raw[r] += c
            wt[r] += c * wi
    nr, nw = sum(raw.values()), sum(wt.values())
    return SampleAnalysis(label, len(idx), len(seen), by_bin, clusters, hist,
                          {r: c / nr for r, c in raw.most_common()} if nr else {},
                          {r: c / nw for r, c in wt.most_common()} if nw else {}, int(nr))


def _bucket_index(bks, d: int) -> int:
    for j, (lo, hi) in enumerate(bks):
        if lo <= d <= hi:
            return j
    return len(bks) - 1


def analyse_corpus(corpus: CorpusEntities) -> SampleAnalysis:
    """The corpus's own figures (every document, weight 1)."""
    return analyse_sample(corpus, np.arange(corpus.n_documents), label="corpus")


def mean_analysis(items: Sequence[SampleAnalysis], label: str) -> SampleAnalysis:
    """The figures averaged over several draws of one scheme (counts become means)."""
    if not items:
        raise InvalidInputError("items: expected at least one analysis")
    n = len(items)
    keys = sorted({r for a in items for r in a.relations})
    return SampleAnalysis(
        label, round(sum(a.documents for a in items) / n, 1), round(sum(a.entities for a in items) / n, 1),
        {b: sum(a.by_bin[b] for a in items) / n for b in BINS}, {b: sum(a.clusters[b] for a in items) / n for b in BINS},
        [sum(col) / n for col in zip(*(a.histogram for a in items))],
        {r: sum(a.relations.get(r, 0.0) for a in items) / n for r in keys},
        {r: sum(a.relations_weighted.get(r, 0.0) for a in items) / n for r in keys},
        round(sum(a.n_relations for a in items) / n))


def figures_svg(corpus: CorpusEntities, analyses: Sequence[SampleAnalysis], *, top: int = 15,
                width: int = 720) -> dict[str, str]:
    """The three figures as SVG (``histogram``, ``clusters``, ``relations``), one series per analysis."""
    from ..plots.svg import PALETTE, bar_chart

    base = analyse_corpus(corpus)
    colours = {name: PALETTE[j % len(PALETTE)] for j, name in enumerate(["corpus"] + [a.label for a in analyses])}
    lo, hi = corpus.thresholds
    bks = buckets(max(corpus.df.values(), default=1))
    series = {"corpus": base.histogram}
    series.update({a.label: a.histogram for a in analyses})
    th = f"low ≤ {_n(lo)} < medium ≤ {_n(hi)} < high documents"
    hist = bar_chart([bucket_label(b) for b in bks], series, log=True, width=width,
                     title="Entities by the number of documents mentioning them",
                     xlabel=f"documents mentioning the entity ({th})", ylabel="entities (log scale)", colours=colours)
    clusters = bar_chart(list(BINS), {a.label: [a.clusters[b] for b in BINS] for a in analyses}, width=width,
                         title="Entities in more than one sampled document, by frequency bin",
                         xlabel=th, ylabel="entities", colours=colours)
    rels = [r for r, _ in sorted(base.relations.items(), key=lambda kv: -kv[1])[:top]]
    rseries = {"corpus": [base.relations.get(r, 0.0) for r in rels]}
    rseries.update({a.label: [a.relations.get(r, 0.0) for r in rels] for a in analyses})
    relations = bar_chart(rels, rseries, horizontal=True, width=width,
                          title=f"Relation types: share of the sample's relations against the corpus (top {len(rels)})",
                          ylabel="share of relations", colours=colours)
    return {"histogram": hist, "clusters": clusters, "relations": relations}


SCHEMES = ("uniform", "two-stage", "tfidf", "seed")


def draw_scheme(scheme: str, texts: Sequence[str], doc_names: Sequence[Sequence[str]], size: int, *, rng=None,
                tokens: Sequence[list[str]] | None = None, replicates: int = 100, first_fraction: float = 0.2):
    """One hypothetical sample of ``scheme`` whose first-stage entities are ``doc_names`` of the first-stage
    documents (standing in for their annotation).  ``tfidf`` scores against the entities of a uniform
    pilot of ``first_fraction · size`` documents, as the service scores against those annotated so far."""
    from .documents import DocumentSample, sample_tfidf, sample_two_stage, sample_uniform
    from .seed import mention_index, sample_seed_second_stage

    rng = np.random.default_rng(rng)
    n = len(texts)
    if scheme == "uniform":
        return sample_uniform(n, size, rng=rng)
    if scheme == "two-stage":
        return sample_two_stage(texts, lambda s1: sorted({m for i in s1 for m in doc_names[i]}), size=size,
                                first_fraction=first_fraction, rng=rng)
    n1 = max(1, int(round(first_fraction * size)))
    s1 = np.sort(rng.choice(n, size=min(n1, n), replace=False))
    names = sorted({m for i in s1 for m in doc_names[i]})
    if scheme == "tfidf":
        return sample_tfidf(texts, names, size=size, rng=rng)
    if scheme == "seed":
        if n1 >= size:
            return DocumentSample(s1, np.ones(len(s1)), np.ones(len(s1), np.int64), "seed")
        s2 = sample_seed_second_stage(texts, s1, names, size=size - len(s1), replicates=replicates, rng=rng,
                                      mentions=mention_index(texts, names, tokens=tokens))
        idx = np.concatenate([s1, s2.indices])
        return DocumentSample(idx, np.concatenate([np.ones(len(s1)), s2.inclusion]),
                              np.concatenate([np.ones(len(s1), np.int64), s2.stage]), "seed")
    raise InvalidInputError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")


def analyse_schemes(texts: Sequence[str], doc_names: Sequence[Sequence[str]], doc_relations=None, *,
                    schemes: Sequence[str] = SCHEMES, size: int = 100, draws: int = 3, rng=None,
                    replicates: int = 100, thresholds=None, progress=None) -> tuple[CorpusEntities, list[SampleAnalysis]]:
    """The corpus side and, per scheme, the figures averaged over ``draws`` hypothetical samples of ``size``."""
    n = len(texts)
    if len(doc_names) != n:
        raise InvalidInputError(f"doc_names: expected one list per document ({n}), got {len(doc_names)}")
    if not 1 <= size <= n:
        raise InvalidInputError(f"size: expected 1..{n} (the number of documents), got {size}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or not 1 <= draws <= 100:
        raise InvalidInputError(f"draws: expected an integer in 1..100, got {draws!r}")
    for s in schemes:
        if s not in SCHEMES:
            raise InvalidInputError(f"scheme: expected one of {', '.join(SCHEMES)}, got {s!r}")
    corpus = corpus_entities(doc_names, doc_relations, thresholds=thresholds)
    rng = np.random.default_rng(rng)
    tokens = [tokenize(t) for t in texts] if "seed" in schemes else None
    out = []
    for s in schemes:
        items = []
        for _ in range(draws):
            sample = draw_scheme(s, texts, doc_names, size, rng=rng, tokens=tokens, replicates=replicates)
            items.append(analyse_sample(corpus, sample.indices, sample.inclusion, label=s))
            if progress:
                progress(1)
        out.append(mean_analysis(items, s))
    return corpus, out


def _n(v: float) -> str:
    return "–" if not math.isfinite(v) else (str(int(v)) if float(v).is_integer() else f"{v:g}")


def format_tables(corpus: CorpusEntities, analyses: Sequence[SampleAnalysis], *, top: int = 10) -> str:
    """The figures as text tables (what ``unpooled corpus analyse`` prints)."""
    base = analyse_corpus(corpus)
    lo, hi = corpus.thresholds
    out = [f"{corpus.n_documents:,} documents, {len(corpus.df):,} entities; bins at the 50th and 90th percentiles "
           f"of documents per entity: low ≤ {_n(lo)}, medium {_n(lo)}–{_n(hi)}, high > {_n(hi)}", ""]
    rows = [base] + list(analyses)
    w = max(12, max(len(a.label) for a in rows) + 1)
    out.append("Entities mentioned, by frequency bin (in more than one sampled document)")
    out.append(f"{'':<{w}}{'documents':>10}{'entities':>10}" + "".join(f"{b:>18}" for b in BINS))
    for a in rows:
        cells = "".join(f"{_c(a.by_bin[b]):>9} ({_c(a.clusters[b]):>6})" for b in BINS)
        out.append(f"{a.label:<{w}}{_c(a.documents):>10}{_c(a.entities):>10}{cells}")
    out += ["", "Entity-frequency histogram (entities per bucket of documents mentioning them)"]
    bks = buckets(max(corpus.df.values(), default=1))
    out.append(f"{'documents':<10}" + "".join(f"{a.label[:w - 1]:>{w}}" for a in rows))
    for j, b in enumerate(bks):
        out.append(f"{bucket_label(b):<10}" + "".join(f"{_c(a.histogram[j]):>{w}}" for a in rows))
    rels = [r for r, _ in sorted(base.relations.items(), key=lambda kv: -kv[1])[:top]]
    if rels:
        out += ["", f"Relation types: % of relations (raw / weighted by 1/π), top {len(rels)} in the corpus"]
        rw = max(len(r) for r in rels) + 2
        out.append(f"{'relation':<{rw}}{'corpus':>8}" + "".join(f"{a.label[:15]:>16}" for a in analyses))
        for r in rels:
            cells = "".join(f"{100 * a.relations.get(r, 0):>7.1f} / {100 * a.relations_weighted.get(r, 0):>5.1f}"
                            for a in analyses)
            out.append(f"{r:<{rw}}{100 * base.relations.get(r, 0):>8.1f}{cells}")
    return "\n".join(out)


def _c(v) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


__all__ = ["BINS", "SCHEMES", "CorpusEntities", "analyse_schemes", "draw_scheme", "SampleAnalysis", "analyse_corpus", "analyse_sample", "bucket_label", "buckets",
           "corpus_entities", "entity_key", "frequency_thresholds", "figures_svg", "format_tables", "mean_analysis"]
