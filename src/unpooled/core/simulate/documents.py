r"""Simulation of recall under the document-sampling schemes: is it unbiased, do its intervals cover?

A *document world* is a corpus (each document's text and named entities) with, per document,
the number of true instances :math:`y_d` and the number a fixed system finds :math:`x_d`.  Its
recall :math:`r = \sum_d x_d / \sum_d y_d` is fixed; only the document sample is random.  Each
trial draws a sample with a scheme (stage-1 entities from the world's entity layer, standing in
for the crowd's annotation), and estimates recall by the Hájek ratio of Horvitz–Thompson totals

.. math:: \hat r = \frac{\sum_{d\in S} x_d/\pi_d}{\sum_{d\in S} y_d/\pi_d}

with the service's variance over documents, the delete-one-document jackknife
(:func:`unpooled.core.estimators.exhaustive.theta_variance` with shares:
:math:`\frac{N-1}{N}\sum_d (\delta_d - \bar\delta)^2`, :math:`\delta_d = z_d/(1-h_d)`,
:math:`z_d = (x_d - \hat r y_d)/(\pi_d \sum_S y/\pi)`, :math:`h_d = (y_d/\pi_d)/\sum_S y/\pi`) times Student's
:math:`(t_{N-1}/z)^2`, and the service's interval (Wilson's at the effective sample size,
:func:`unpooled.core.estimators.intervals.wilson`).  The linearisation :math:`\frac{N}{N-1}\sum_d z_d^2` it replaced
covered 0.81-0.87 with 15 documents (pooled by scheme; 0.88-0.90 now).
The table reports the bias (and its Monte Carlo standard error), the standard deviation,
the interval's coverage and mean width, and the bias of the *naive* ratio that ignores
:math:`\pi_d` (what the paper computed).

Worlds: the documents of a corpus with a gold layer (Re-DocRED: :math:`y_d` its gold
relations; the system finds each with a per-document recall drawn around ``recall``, higher in
documents about frequent entities when ``tilt`` > 0, so that the schemes' preference for
entity-sharing documents matters), or :func:`synthetic_world` (power-law entity frequencies).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..errors import InvalidInputError
from ..estimators.exhaustive import t_factor, theta_variance
from ..estimators.intervals import wilson
from ..sampling.documents import (
    TFIDF_DEFENSIVE, TWO_STAGE_DEFENSIVE, DocumentSample, sample_tfidf, sample_two_stage, sample_uniform, tokenize,
)
from ..sampling.seed import DEFENSIVE, MIN_DEFENSIVE, NAMED_TYPES, REPLICATES, mention_index, sample_seed_second_stage



@dataclass
class DocumentWorld:
    """A corpus for the document-sampling simulation (see the module docstring)."""

    name: str
    texts: list[str]
    entities: list[list[str]]          # per document: the names of its named entities (one per entity)
    y: np.ndarray                      # true instances per document
    x: np.ndarray                      # found by the system per document
    _index: dict = field(default_factory=dict, repr=False)
    _tokens: list = field(default_factory=list, repr=False)

    @property
    def recall(self) -> float:
        return float(self.x.sum() / self.y.sum())

    @property
    def tokens(self) -> list[list[str]]:
        """Each document's tokens (:func:`~unpooled.core.sampling.documents.tokenize`), computed once."""
        if not self._tokens and self.texts:
            self._tokens.extend(tokenize(t) for t in self.texts)
        return self._tokens

    def mentions(self, names: Sequence[str]) -> list[np.ndarray]:
        """Documents mentioning each name (exact token-sequence match), cached per world."""
        missing = [n for n in dict.fromkeys(names) if n not in self._index]
        if missing:
            for n, docs in zip(missing, mention_index(self.texts, missing, tokens=self.tokens)):
                self._index[n] = docs
        return [self._index[n] for n in names]


def _system(y: np.ndarray, recall: float, tilt: np.ndarray, rng, concentration: float = 8.0) -> np.ndarray:
    z = np.log(recall / (1 - recall)) + tilt
    mu = 1 / (1 + np.exp(-z))
    r_d = rng.beta(mu * concentration, (1 - mu) * concentration)
    return rng.binomial(y.astype(np.int64), r_d).astype(float)


def world_from_documents(name: str, documents: Sequence, *, recall: float = 0.5, tilt: float = 1.0,
                         rng=None) -> DocumentWorld:
    """A world from core :class:`~unpooled.core.corpus.model.Document` objects with a gold layer."""
    rng = np.random.default_rng(rng)
    texts = [d.text for d in documents]
    ents = [sorted({e.name for e in d.entities if e.type in NAMED_TYPES and e.name.strip()}) for d in documents]
    y = np.array([len(d.relations) for d in documents], dtype=float)
    if y.sum() == 0:
        raise InvalidInputError(f"{name}: the documents have no gold relations to recall")
    w = DocumentWorld(name, texts, ents, y, np.zeros_like(y))
    # documents about entities that appear in many documents are easier for the system (tilt > 0)
    allnames = sorted({n for e in ents for n in e})
    df = {n: len(docs) for n, docs in zip(allnames, w.mentions(allnames))}
    fr = np.array([np.mean([math.log(max(df[n], 1)) for n in e]) if e else 0.0 for e in ents])
    sd = fr.std() or 1.0
    w.x = _system(y, recall, tilt * (fr - fr.mean()) / sd, rng)
    return w


def synthetic_world(n_documents: int = 1000, *, n_entities: int = 3000, per_document: int = 8, zipf: float = 1.1,
                    recall: float = 0.5, tilt: float = 1.0, rng=None) -> DocumentWorld:
    """Documents naming ``per_document`` entities drawn from a Zipf(``zipf``) popularity; the number of true
    instances grows with how popular a document's entities are (so entity-driven sampling is biased)."""
    rng = np.random.default_rng(rng)
    p = 1.0 / np.arange(1, n_entities + 1) ** zipf
    p /= p.sum()
    texts, ents, pop = [], [], []
    for _ in range(n_documents):
        k = max(1, int(rng.poisson(per_document)))
        e = np.unique(rng.choice(n_entities, size=k, p=p))
        names = [f"entity{i:05d}" for i in e]
        texts.append(" . ".join(f"{n} did something" for n in names))
        ents.append(names)
        pop.append(float(np.mean(np.log(p[e] * n_entities))))
    pop = np.array(pop)
    z = (pop - pop.mean()) / (pop.std() or 1.0)
    y = rng.poisson(np.exp(1.2 + 0.4 * z)).astype(float)
    w = DocumentWorld(f"synthetic-zipf{zipf:g}", texts, ents, y, np.zeros_like(y))
    w.x = _system(y, recall, tilt * z, rng)
    return w


SCHEMES = ("uniform", "two-stage", "tfidf", "seed")


def default_defensive(scheme: str) -> float:
    """The scheme's defensive uniform share as the service uses it (0 for ``uniform``)."""
    return {"uniform": 0.0, "two-stage": TWO_STAGE_DEFENSIVE, "tfidf": TFIDF_DEFENSIVE, "seed": DEFENSIVE}[scheme]


def draw(world: DocumentWorld, scheme: str, size: int, rng, *, defensive: float | None = None,
         min_defensive: int = MIN_DEFENSIVE, replicates: int = REPLICATES, first_fraction: float = 0.2) -> DocumentSample:
    """One document sample of ``scheme`` (``uniform``, ``two-stage``, ``tfidf``, ``seed``) from the world.

    ``defensive``: the defensive uniform share (the Poisson smoothing of ``two-stage`` and ``tfidf``, the seed
    scheme's share); None: the scheme's default (:func:`default_defensive`).  ``tfidf`` scores against the entities
    of a uniform pilot of ``first_fraction · size`` documents (standing in for the entities annotated so far; the
    pilot is not part of the sample, so the probabilities are fixed before the draw)."""
    n = len(world.texts)
    if scheme not in SCHEMES:
        raise InvalidInputError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    share = default_defensive(scheme) if defensive is None else defensive
    if scheme == "uniform":
        return sample_uniform(n, size, rng=rng)
    if scheme == "two-stage":
        return sample_two_stage(world.texts, lambda s1: [nm for i in s1 for nm in world.entities[i]], size=size,
                                first_fraction=first_fraction, smoothing=share, rng=rng, tokens=world.tokens)
    n1 = max(1, int(round(first_fraction * size)))
    s1 = np.sort(rng.choice(n, size=n1, replace=False))
    names = sorted({nm for i in s1 for nm in world.entities[i]})
    if scheme == "tfidf":
        return sample_tfidf(world.texts, names, size=size, smoothing=share, rng=rng, tokens=world.tokens)
    s2 = sample_seed_second_stage(world.texts, s1, names, size=size - n1, defensive=share,
                                  min_defensive=min_defensive, replicates=replicates, rng=rng,
                                  mentions=world.mentions(names))
    return DocumentSample(np.concatenate([s1, s2.indices]), np.concatenate([np.ones(n1), s2.inclusion]),
                          np.concatenate([np.ones(n1, np.int64), s2.stage]), "seed")


def recall_with_interval(x, y, inclusion, *, confidence: float = 0.90) -> tuple[float, float, float, float]:
    """Hájek recall, its standard error and the service's interval: the delete-one-document jackknife variance
    (:func:`unpooled.core.estimators.exhaustive.theta_variance` with the documents' shares of the weighted true
    instances) inflated by Student's *t* with :math:`N-1` degrees of freedom
    (:func:`~unpooled.core.estimators.exhaustive.t_factor`), as the service's relation recall treats its exhaustive
    documents, and Wilson's interval at the effective sample size (:func:`unpooled.core.estimators.intervals.wilson`,
    with the number of true instances as the fallback size).  The standard error includes the inflation."""
    w = 1.0 / np.asarray(inclusion, dtype=float)
    x, y = np.asarray(x, float), np.asarray(y, float)
    V = (w * y).sum()
    if V <= 0:
        return math.nan, math.nan, math.nan, math.nan
    r = (w * x).sum() / V
    z = w * (x - r * y) / V
    var = max(float(theta_variance(z[None, :], shares=w * y / V)[0]), 0.0) * t_factor(len(x), confidence)
    lo, hi = wilson(np.array([r]), np.array([var]), confidence, np.array([max(float(y.sum()), 1.0)]))
    return r, math.sqrt(var), float(lo[0]), float(hi[0])


@dataclass(frozen=True)
class SchemeRow:
    world: str
    scheme: str
    size: int
    trials: int
    recall: float
    bias: float
    bias_se: float
    sd: float
    coverage: float
    width: float
    naive_bias: float
    mean_size: float
    defensive: float = 0.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_scheme(world: DocumentWorld, scheme: str, size: int, *, trials: int = 200, confidence: float = 0.90,
               defensive: float | None = None, min_defensive: int = MIN_DEFENSIVE, replicates: int = REPLICATES,
               rng=None, progress: Callable | None = None) -> SchemeRow:
    """``trials`` independent samples of ``scheme``; bias, coverage and width of the recall interval."""
    rng = np.random.default_rng(rng)
    est, cov, wid, naive, sizes = [], [], [], [], []
    truth = world.recall
    for _ in range(trials):
        s = draw(world, scheme, size, rng, defensive=defensive, min_defensive=min_defensive, replicates=replicates)
        r, se, lo, hi = recall_with_interval(world.x[s.indices], world.y[s.indices], s.inclusion, confidence=confidence)
        if not math.isfinite(r):
            continue
        est.append(r)
        cov.append(lo <= truth <= hi)
        wid.append(hi - lo)
        ys = world.y[s.indices].sum()
        naive.append(world.x[s.indices].sum() / ys if ys else math.nan)
        sizes.append(len(s))
        if progress:
            progress(1)
    est = np.array(est)
    return SchemeRow(world.name, scheme, size, len(est), truth, float(est.mean() - truth),
                     float(est.std(ddof=1) / math.sqrt(len(est))), float(est.std(ddof=1)), float(np.mean(cov)),
                     float(np.mean(wid)), float(np.nanmean(naive) - truth), float(np.mean(sizes)),
                     default_defensive(scheme) if defensive is None else float(defensive))


def format_table(rows: Sequence[SchemeRow], confidence: float = 0.90) -> str:
    """The simulation table: one row per (world, scheme, size), figures in recall points."""
    head = (f"{'world':<24} {'scheme':<9} {'share':>5} {'size':>4} {'trials':>6} {'recall':>6} {'bias':>12} {'sd':>5} "
            f"{'cover':>12} {'width':>5} {'naive bias':>10}")
    out = [head, "-" * len(head)]
    for r in rows:
        cse = math.sqrt(max(r.coverage * (1 - r.coverage), 1e-12) / max(r.trials, 1))
        out.append(f"{r.world:<24} {r.scheme:<9} {r.defensive:>5.2g} {r.size:>4} {r.trials:>6} {100 * r.recall:>6.1f} "
                   f"{100 * r.bias:>+5.2f} ±{100 * r.bias_se:>4.2f} {100 * r.sd:>5.1f} {r.coverage:>5.3f} ±{cse:.3f} "
                   f"{100 * r.width:>5.1f} {100 * r.naive_bias:>+10.2f}")
    out.append(f"(recall, bias ± its Monte Carlo s.e., sd, {confidence:.0%} interval width and naive bias in points; "
               "cover ± its s.e.: share of intervals holding the true recall; share: the defensive uniform share)")
    return "\n".join(out)


def format_summary(rows: Sequence[SchemeRow]) -> str:
    """Per (scheme, size): the coverage pooled over the worlds (with its s.e.), its lowest and highest row, and
    the largest |bias| in Monte Carlo standard errors — a row near a threshold is mostly Monte Carlo noise when the
    pooled figure is not."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.scheme, r.size, r.defensive), []).append(r)
    out = [f"{'scheme':<9} {'share':>5} {'size':>4} {'rows':>4} {'pooled cover':>14} {'lowest':>6} {'highest':>7} "
           f"{'max |bias|/se':>13}"]
    for (scheme, size, share), rs in groups.items():
        n = sum(r.trials for r in rs)
        c = sum(r.coverage * r.trials for r in rs) / n
        out.append(f"{scheme:<9} {share:>5.2g} {size:>4} {len(rs):>4} {c:>7.3f} ±{math.sqrt(c * (1 - c) / n):.3f} "
                   f"{min(r.coverage for r in rs):>6.3f} {max(r.coverage for r in rs):>7.3f} "
                   f"{max(abs(r.bias) / r.bias_se if r.bias_se > 0 else 0.0 for r in rs):>13.1f}")
    return "\n".join(out)


__all__ = ["DocumentWorld", "NAMED_TYPES", "SCHEMES", "SchemeRow", "default_defensive", "draw", "format_summary",
           "format_table", "recall_with_interval", "run_scheme", "synthetic_world", "world_from_documents"]
