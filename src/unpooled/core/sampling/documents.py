r"""Choosing documents for exhaustive annotation, with known inclusion probabilities.

Recall needs the true instances of a sample of documents.  Uniform samples rarely share
entities (method.md §5.1), so the paper added documents found through the first sample's
entities — and then never corrected for that choice (§5.2, §7).  Here every chosen
document records its inclusion probability :math:`\pi_d` (conditional on earlier stages
for a sequential design), and any corpus total :math:`T = \sum_d y_d` is estimated by

.. math:: \hat T = \sum_{d \in S} y_d / \pi_d

which is exactly unbiased; recall is the ratio of two such totals (found / true).

Two-stage design (the paper's, corrected).  Stage 1: a uniform sample :math:`S_1` without
replacement.  Its annotated entities become queries; stage 2 draws among the other
documents by **Poisson sampling** (each independently) with

.. math:: \pi_d = \min\{1,\; c\,(\lambda / N_2 + (1 - \lambda)\, s_d / \textstyle\sum s)\}

where :math:`s_d` is the document's score against the queries, :math:`\lambda` a
defensive uniform share that bounds the weights, and *c* is solved so that
:math:`\sum \pi_d` is the stage-2 size.  Conditional on :math:`S_1`,
:math:`T = \sum_{S_1} y_d + \sum_{d \notin S_1} y_d`; the first sum is observed exactly
(weight 1) and the second is estimated by Horvitz–Thompson over stage 2 (weight
:math:`1/\pi_d`), so :math:`E[\hat T \mid S_1] = T` for every :math:`S_1`, hence unbiased.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..errors import InvalidInputError

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class DocumentSample:
    """Chosen documents (indices into the corpus's document list) and their inclusion probabilities."""

    indices: np.ndarray
    inclusion: np.ndarray
    stage: np.ndarray
    scheme: str

    @property
    def weights(self) -> np.ndarray:
        return 1.0 / self.inclusion

    def __len__(self) -> int:
        return len(self.indices)

    def to_dict(self) -> dict:
        return {"scheme": self.scheme, "indices": self.indices.tolist(), "inclusion": self.inclusion.tolist(),
                "stage": self.stage.tolist()}


def first_stage(n: int, size: int, first_fraction: float, rng):
    """The uniform first stage of a two-stage scheme: ``(rng, n1, s1)``, ``n1 = max(1, round(first_fraction x
    size))`` documents of ``n`` drawn without replacement (sorted), after checking ``size`` and
    ``first_fraction``."""
    _size_iv(n, size)
    if not 0 < first_fraction <= 1:
        raise InvalidInputError(f"first_fraction: expected a share in (0, 1], got {first_fraction}")
    rng = np.random.default_rng(rng)
    n1 = max(1, int(round(first_fraction * size)))
    return rng, n1, np.sort(rng.choice(n, size=n1, replace=False))


def _size_iv(n_documents: int, size: int) -> None:
    if n_documents < 1:
        raise InvalidInputError(f"n_documents: expected at least 1, got {n_documents}")
    if not 1 <= size <= n_documents:
        raise InvalidInputError(f"size: expected 1..{n_documents} (the number of documents), got {size}")


def sample_uniform(n_documents: int, size: int, *, rng=None) -> DocumentSample:
    """Simple random sampling without replacement: :math:`\\pi_d = n / N`."""
    _size_iv(n_documents, size)
    rng = np.random.default_rng(rng)
    idx = np.sort(rng.choice(n_documents, size=size, replace=False))
    return DocumentSample(idx, np.full(size, size / n_documents), np.ones(size, dtype=np.int64), "uniform")


def tokenize(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def query_scores(texts: Sequence[str], queries: Sequence[str], *, method: str = "tfidf",
                 tokens: Sequence[list[str]] | None = None) -> np.ndarray:
    r"""Each document's score against query strings (entity names).

    A query *occurs* in a document when its token sequence does.  ``'exact-match'``: the
    number of distinct queries occurring (the seeds' rule); ``'tfidf'``: :math:`\sum_q
    \text{tf}_{qd} \log(N / \text{df}_q)` over occurring queries.  ``tokens`` (optional): the
    documents already tokenized (``tokenize(text)`` each, aligned with ``texts``), to reuse.
    """
    if method not in ("tfidf", "exact-match"):
        raise InvalidInputError(f"method: expected 'tfidf' or 'exact-match', got {method!r}")
    qtoks = [tuple(tokenize(q)) for q in dict.fromkeys(queries)]
    qtoks = [q for q in qtoks if q]
    by_first: dict[str, list[tuple]] = {}
    for q in qtoks:
        by_first.setdefault(q[0], []).append(q)
    tf = []
    if tokens is not None and len(tokens) != len(texts):
        raise InvalidInputError(f"tokens: expected one token list per document ({len(texts)}), got {len(tokens)}")
    for d, text in enumerate(texts):
        toks = tokens[d] if tokens is not None else tokenize(text)
        c: Counter = Counter()
        for i, t in enumerate(toks):
            for q in by_first.get(t, ()):
                if tuple(toks[i:i + len(q)]) == q:
                    c[q] += 1
        tf.append(c)
    n = len(texts)
    df = Counter(q for c in tf for q in c)
    out = np.zeros(n)
    for d, c in enumerate(tf):
        if method == "exact-match":
            out[d] = len(c)
        else:
            out[d] = sum(k * math.log(n / df[q]) for q, k in c.items())
    return out


#: the defensive uniform share of the two-stage scheme's second stage.  ``unpooled simulate documents --shares
#: --rows 2,3 --trials 300`` (Re-DocRED, 100 documents, recall 0.48; normal intervals then): 90% recall intervals
#: covered 0.837 with 0.1, 0.853 with 0.2, 0.877 with 0.3 and 0.883 with 0.5 (bias +0.2, +0.1, -0.0, -0.0 points;
#: widths 14.7, 12.7, 11.6, 10.5): the uniform share bounds the weights 1/pi that make the ratio's sampling
#: distribution skewed.  The regimes table (``unpooled simulate documents``) has the coverage across worlds.
TWO_STAGE_DEFENSIVE = 0.5

#: the defensive uniform share of the single-stage ``tfidf`` scheme (:func:`sample_tfidf`), the two-stage one's.
#: ``unpooled simulate documents`` (Re-DocRED and a power-law corpus, systems of recall 0.3 and 0.8, tilt 0 and
#: +1, 300 samples a row): with 0.1 the 90% recall intervals of 100 documents covered 0.860 pooled (0.83 to 0.91;
#: 15 documents: 0.66, 0.53 to 0.78, bias up to +3.5 points); with 0.5, 0.907 (0.86 to 0.93; 15 documents: 0.84)
#: (the weights 1/pi of documents no query scores are at most 2N/n instead of 10N/n).
TFIDF_DEFENSIVE = TWO_STAGE_DEFENSIVE


#: per scheme, the fewest documents of an exhaustive sample (all stages) whose recall intervals
#: ``unpooled simulate documents`` found adequate: 90% intervals holding the true recall at least 0.88 of the time,
#: pooled over its regimes (Re-DocRED and a power-law corpus, systems of recall 0.3 and 0.8, tilt 0 and +1, 300
#: samples each, seed 0), among 15, 20 (``--size 20`` on the 15-document rows), 40 and 100 documents.  With the
#: variance recall uses (the delete-one-document jackknife with Student's t, :mod:`unpooled.core.estimators.exhaustive`)
#: 15 documents covered 0.897 (uniform), 0.887 (tfidf), 0.903 (seed) and 0.879 (two-stage; 0.882 at 20), 40
#: documents 0.890 to 0.915, 100 documents 0.902 to 0.921.  (With the linearised variance it replaced, 15 documents
#: covered 0.81 to 0.87 and two-stage and tfidf needed 100.)  Uniform and seed also covered at least 0.88 with 10
#: and 5 documents (0.909, 0.885; 0.892, 0.880) with intervals 27 to 43 points wide: 15, the table's smallest size,
#: stays their floor.  :func:`small_sample_warning` warns below it.
FEW_DOCUMENTS = {"uniform": 15, "two-stage": 20, "tfidf": 15, "seed": 15}

#: per scheme, the measured size just below :data:`FEW_DOCUMENTS` (``--size 10`` or the 15-document rows):
#: (documents, pooled coverage of the 90% recall intervals, lowest and highest over the 8 regimes, mean width in
#: points)
COVERAGE_BELOW = {"uniform": (10, 0.909, 0.873, 0.927, 27.1), "two-stage": (15, 0.879, 0.840, 0.913, 27.7),
                  "tfidf": (10, 0.876, 0.837, 0.917, 31.4), "seed": (10, 0.885, 0.863, 0.923, 29.9)}


def small_sample_warning(scheme: str, size: int, n_documents: int | None = None) -> str | None:
    """A warning when ``size`` documents of ``scheme`` are too few for recall's 90% interval
    (:data:`FEW_DOCUMENTS`); None otherwise, and when the sample is the whole corpus (recall is then exact)."""
    if scheme not in FEW_DOCUMENTS:
        raise InvalidInputError(f"scheme: expected one of {', '.join(FEW_DOCUMENTS)}, got {scheme!r}")
    least = FEW_DOCUMENTS[scheme]
    if size >= least or (n_documents is not None and size >= n_documents):
        return None
    docs, pooled, lo, hi, width = COVERAGE_BELOW[scheme]
    return (f"{size} documents ({scheme}) are few for recall: below {least} documents its 90% intervals are wide or "
            f"too short (`unpooled simulate documents`: with {docs} documents they held the true recall {pooled:.1%} "
            f"of the time, {lo:.0%} to {hi:.0%} by regime, {width:.0f} points wide on average); sample at least "
            f"{least} documents")


def poisson_probabilities(scores, expected_size: float, *, smoothing: float = 0.1) -> np.ndarray:
    r"""Inclusion probabilities :math:`\min(1, c(\lambda/N + (1-\lambda) s_d/\sum s))` summing to ``expected_size``."""
    s = np.asarray(scores, dtype=float)
    n = len(s)
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise InvalidInputError("scores: expected finite non-negative scores")
    if not 0 < expected_size <= n:
        raise InvalidInputError(f"expected_size: expected a value in (0, {n}], got {expected_size}")
    if not 0 <= smoothing <= 1:
        raise InvalidInputError(f"smoothing: expected a share in [0, 1], got {smoothing}")
    base = np.full(n, 1.0 / n) if s.sum() == 0 else smoothing / n + (1 - smoothing) * s / s.sum()
    if np.any(base == 0):
        raise InvalidInputError("smoothing: 0 leaves documents with no chance of selection; use > 0")
    pi = np.zeros(n)
    capped = np.zeros(n, bool)
    for _ in range(n + 1):   # iterate the caps at 1
        free = ~capped
        if not free.any():  # every document capped: the expected size is the whole set
            pi[:] = 1.0
            break
        c = (expected_size - capped.sum()) / base[free].sum()
        pi[free] = c * base[free]
        pi[capped] = 1.0
        over = free & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return np.clip(pi, 0.0, 1.0)


def _poisson_stage(candidates: np.ndarray, scores: np.ndarray, size: float, smoothing: float, rng):
    pi = poisson_probabilities(scores, size, smoothing=smoothing)
    take = rng.random(len(candidates)) < pi
    return candidates[take], pi[take]


def sample_two_stage(texts: Sequence[str], entities_of: Callable[[np.ndarray], Sequence[str]], *, size: int,
                     first_fraction: float = 0.2, stage2: str = "tfidf", smoothing: float = TWO_STAGE_DEFENSIVE,
                     rng=None, tokens: Sequence[list[str]] | None = None) -> DocumentSample:
    """Stage 1 uniform (``first_fraction · size`` documents), stage 2 Poisson by score against the
    entities ``entities_of(stage-1 indices)`` returns (the service passes the stage-1 annotations).

    Stage-1 documents get inclusion 1 (their contribution is observed exactly, conditional on
    stage 1), stage-2 documents their Poisson probability; see the module docstring.
    Stage 2's size is random with expectation ``size − n₁``; its defensive uniform share is
    :data:`TWO_STAGE_DEFENSIVE` (0.5: with 0.1 the 90% recall intervals covered 0.84).
    """
    n = len(texts)
    rng, n1, s1 = first_stage(n, size, first_fraction, rng)
    if n1 == size or n1 == n:
        return DocumentSample(s1, np.ones(n1), np.ones(n1, dtype=np.int64), "two-stage")
    rest = np.setdiff1d(np.arange(n), s1)
    scores = query_scores([texts[i] for i in rest], list(entities_of(s1)), method=stage2,
                          tokens=None if tokens is None else [tokens[i] for i in rest])
    s2, pi2 = _poisson_stage(rest, scores, float(size - n1), smoothing, rng)
    return DocumentSample(np.concatenate([s1, s2]), np.concatenate([np.ones(n1), pi2]),
                          np.concatenate([np.ones(n1, dtype=np.int64), np.full(len(s2), 2)]), "two-stage")


def sample_second_stage(texts: Sequence[str], first: Sequence[int], queries: Sequence[str], *, size: int,
                        stage2: str = "tfidf", smoothing: float = TWO_STAGE_DEFENSIVE, rng=None,
                        tokens: Sequence[list[str]] | None = None) -> DocumentSample:
    """Stage 2 alone, after stage 1 (``first``) was annotated: Poisson among the other documents.

    Returns only the stage-2 documents; stage-1 documents keep inclusion 1 (see the module docstring).
    """
    n = len(texts)
    rest = np.setdiff1d(np.arange(n), np.asarray(first, dtype=np.int64))
    if len(rest) == 0:
        return DocumentSample(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), "two-stage")
    if not 1 <= size <= len(rest):
        raise InvalidInputError(f"size: expected 1..{len(rest)} (documents outside stage 1), got {size}")
    rng = np.random.default_rng(rng)
    scores = query_scores([texts[i] for i in rest], queries, method=stage2,
                          tokens=None if tokens is None else [tokens[i] for i in rest])
    s2, pi2 = _poisson_stage(rest, scores, float(size), smoothing, rng)
    return DocumentSample(s2, pi2, np.full(len(s2), 2), "two-stage")


def sample_tfidf(texts: Sequence[str], queries: Sequence[str], *, size: int, smoothing: float = TFIDF_DEFENSIVE,
                 rng=None, tokens: Sequence[list[str]] | None = None) -> DocumentSample:
    """Single-stage Poisson sampling with probability by TF-IDF score against ``queries``, with a defensive
    uniform share ``smoothing`` (:data:`TFIDF_DEFENSIVE`)."""
    n = len(texts)
    _size_iv(n, size)
    rng = np.random.default_rng(rng)
    scores = query_scores(texts, queries, method="tfidf", tokens=tokens)
    idx, pi = _poisson_stage(np.arange(n), scores, float(size), smoothing, rng)
    return DocumentSample(idx, pi, np.ones(len(idx), dtype=np.int64), "tfidf")


def horvitz_thompson_total(values, sample: DocumentSample) -> float:
    r""":math:`\hat T = \sum_{d \in S} y_d / \pi_d` (``values`` aligned with ``sample.indices``)."""
    v = np.asarray(values, dtype=float)
    if v.shape != sample.indices.shape:
        raise InvalidInputError(f"values: expected one value per sampled document ({len(sample)})")
    return float((v / sample.inclusion).sum())


def recall_estimate(found, true, sample: DocumentSample) -> float:
    """Ratio of Horvitz–Thompson totals: found true instances / all true instances (NaN if none)."""
    den = horvitz_thompson_total(true, sample)
    return horvitz_thompson_total(found, sample) / den if den > 0 else math.nan
