r"""Offline scoring: precision, recall and F1 from files, for users who already have labels.

Three inputs, all JSONL (one JSON object a line, UTF-8, optionally gzip; blank lines
are skipped; offsets are end-exclusive character offsets):

**Submissions** -- a folder with one file per system, ``NAME.jsonl`` (or
``NAME.jsonl.gz``); the system is called ``NAME``.  Each line is an instance in the
JSONL submission format (:mod:`unpooled.core.kb.jsonl`), read leniently, without a
corpus or schema: only ``doc``, ``predicate``, ``subject`` ``{start, end, entity}`` and
``object`` ``{start, end, entity}`` or ``{value}`` (a string filler; its ``start``/``end``
optional) are read, and ``confidence`` (in (0, 1], default 1); other keys are ignored.  Instances must be in the schema's
canonical direction (there is no schema here to rewrite inverses).  A repeated
instance (same :func:`~unpooled.core.kb.model.instance_key`) is a warning and counts once::

    {"doc": "D1", "subject": {"start": 0, "end": 5, "entity": "e1"}, "predicate": "per:spouse",
     "object": {"start": 20, "end": 29, "entity": "e2"}}

**Labels** ``L.jsonl`` -- one labelled draw a line.  ``system`` is the system whose
sampling distribution :math:`p_i` drew it; the instance is given by its fields (as in a
submission; entity ids optional) or by ``"key"`` (its instance key); ``label`` is 0, 1
or a probability.  Repeated lines are repeated draws (i.i.d. sampling with
replacement)::

    {"system": "sysA", "doc": "D1", "subject": {"start": 0, "end": 5}, "predicate": "per:spouse",
     "object": {"start": 20, "end": 29}, "label": 1}

**Exhaustive** ``E.jsonl`` -- one true instance a line, found by exhaustively
annotating sampled documents (the :math:`p_0` sample :math:`\hat Y_0`).  Same instance
fields (or ``key``), plus optional ``weight`` (the :math:`p_0` weight, default 1) and
``inclusion`` (the document's inclusion probability :math:`\pi_d`, default 1); the
estimators weight the instance by ``weight / inclusion``::

    {"doc": "D1", "subject": {"start": 0, "end": 5}, "predicate": "per:title",
     "object": {"start": 40, "end": 47, "value": "senator"}, "inclusion": 0.1}

**Exhaustive documents.**  :math:`\hat Y_0` is a sample of *documents*, so the variance of every
recall term from it is that of a cluster sample: document totals of the linearised Hájek ratio
(:mod:`unpooled.core.estimators.exhaustive`).  The documents are those of the exhaustive
instances; ``documents=N`` (``--exhaustive-documents N``) gives how many were annotated,
counting those without any true instance (default: the number of distinct documents present,
with a warning).

**The current corpus** (optional, ``corpus=PATH`` of :func:`load`, ``--corpus``; any format of
:mod:`unpooled.core.corpus`, the sentences of a ``jsonl`` corpus as given, else split): the
documents the exhaustive sample was drawn from, and their sentence split.  The exhaustive
protocol pairs mentions *within one sentence*, so :math:`p_0` is 0 for a pooled instance whose
subject and object lie in different sentences (the joint recall's :math:`\hat\nu_i`); an
instance of the exhaustive file is inside by definition, and its document must be in the corpus
(``UP201``).  A labelled draw on a document outside the corpus (a label kept from an earlier
corpus) gets :math:`p_0 = 0` too and counts for precision only, with a warning naming it
(:func:`~unpooled.core.estimators.exhaustive.p0_support`).  Without a corpus the population
is unknown and :math:`p_0` stays 1 everywhere, with a warning.

The universe is the union of the submitted instances by instance key; :math:`p_i` is the
sampling distribution of ``level`` (:mod:`unpooled.core.estimators.sampling`) computed
from the system's own entity ids (``entity`` level: the subject entity id as the system
gives it; ``fill``: subject entity, predicate, object entity or normalised value).

Errors in the files are located diagnostics (``path:line``, field, code) collected in a
:class:`~unpooled.core.diagnostics.Report` per file; :func:`score_files` raises
:class:`InputFindings` carrying them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .diagnostics import Report
from .errors import InvalidInputError, check_choice, file_problem, LocatedError, UnpooledError
from .estimators import LEVELS, Scores, estimate, make_design, sampling_distribution
from .estimators.exhaustive import (
    RECALL_PROTOCOLS, EntityMentions, Sentences, crossing_share, fact_level, outside_population,
    p0_support, within_sentence,
)
from .estimators.joint import ESTIMATORS, WEIGHTS, Design, WeightDegeneracyWarning
from .estimators.ppi import PPIPrecision, confidence_matrix, ppi_precision
from .estimators.results import ConfidenceInterval, Estimate
from .kb.lines import Limits
from .matching import InstanceRef, match_matrix, match_multiplicity, match_universe
from .offline_files import (
    LabelledDraw, Submission, TrueInstance, check_offsets, read_answers, read_corpus_index, read_exhaustive,
    read_labels, read_sentences, read_submission, read_submissions, system_name,
)

#: matching policies available offline (``cluster`` needs a corpus with gold clusters)
MATCHES = ("exact", "overlap")


ESS_WARN = 10.0


class InputFindings(UnpooledError):
    """Input files have located errors; ``reports`` holds one :class:`Report` per file."""

    def __init__(self, reports: list[Report]) -> None:
        self.reports = reports
        n = sum(r.n_errors for r in reports)
        first = next(d for r in reports for d in r.errors)
        super().__init__(f"{n} error(s) in the input files; first: {first.format().splitlines()[0]}")


@dataclass(frozen=True)
class OfflineData:
    """Everything read from the three inputs, with the report of every file.

    ``sentences``: the sentence split of the corpus given to :func:`load` (``doc id -> (starts,
    ends)``, the documents of the submissions, the draws and the exhaustive file), or None; ``entities`` the
    mentions of its entity clusters on those documents (the document recall protocol's fact identity); ``corpus``
    its path; ``population``: the documents of the submissions, draws and exhaustive file that the corpus holds (the
    current documents recall's pool follows, :func:`score`'s ``population``), or None.
    """

    submissions: tuple[Submission, ...]
    labels: tuple[LabelledDraw, ...]
    exhaustive: tuple[TrueInstance, ...]
    reports: tuple[Report, ...]
    sentences: Sentences | None = None
    corpus: str | None = None
    population: frozenset[str] | None = None
    #: the corpus's entity clusters (``doc id -> [(start, end, cluster)]``; empty when it has none), or None
    entities: EntityMentions | None = None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports)


@dataclass(frozen=True)
class SystemScore:
    """One system's ``precision``, ``recall`` and ``f1`` (:class:`~.estimators.results.Estimate`, with the
    estimator in their ``method``; precision and F1 undefined, NaN with the reason, when the simple estimator has no
    draw of the system), its own labelled draws, the effective sample size of its weights, warnings and the
    bootstrap's intervals."""

    system: str
    precision: Estimate
    recall: Estimate
    f1: Estimate
    labels: int
    ess: float
    warnings: tuple[str, ...] = ()
    #: metric -> the bootstrap's percentile interval (:class:`~.estimators.results.ConfidenceInterval`)
    boot: Mapping[str, ConfidenceInterval] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON row: system, P/R/F1 with bounds (``p``, ``p_lo``, ``p_hi``, ...), labels, estimator (+
        ``*_boot_lo/hi``); NaN -> None."""
        out: dict = {"system": self.system}
        for k, e in (("p", self.precision), ("r", self.recall), ("f1", self.f1)):
            for key, v in ((k, e.value), (f"{k}_lo", e.lo), (f"{k}_hi", e.hi)):
                out[key] = None if math.isnan(v) else float(v)
        out["labels"] = self.labels
        out["estimator"] = self.precision.method
        for k, c in self.boot.items():
            out[f"{k}_boot_lo"] = None if math.isnan(c.lo) else c.lo
            out[f"{k}_boot_hi"] = None if math.isnan(c.hi) else c.hi
        return out


@dataclass(frozen=True)
class OfflineResult:
    """Per-system rows, the raw :class:`Scores` and :class:`Design`, and warnings; ``ppi``: the prediction-powered
    precision from the submitted confidences (:mod:`~unpooled.core.estimators.ppi`), beside the label-only one,
    when some submission gives a confidence other than 1."""

    rows: tuple[SystemScore, ...]
    scores: Scores
    design: Design
    systems: tuple[str, ...]
    warnings: tuple[str, ...]
    reports: tuple[Report, ...]
    options: Mapping[str, object]
    ppi: PPIPrecision | None = None


# -- line parsing -----------------------------------------------------------------------
def _check_exhaustive_documents(true, sentences, rep: Report, corpus: str) -> list[TrueInstance]:
    """True instances whose document the corpus has; the others are ``UP201`` errors of the exhaustive file."""
    keep = []
    for t in true:
        if t.ref.doc in sentences:
            keep.append(t)
            continue
        rep.add(t.line, "UP201", f"document {t.ref.doc!r} of this true instance is not in the corpus {corpus}, "
                                 "the documents the exhaustive sample was drawn from", field="doc",
                help="give the current corpus (--corpus), or leave it out")
    return keep


def load(labels: str | Path, submissions: str | Path, exhaustive: str | Path, *,
         corpus: str | Path | None = None, corpus_format: str | None = None,
         limits: Limits = Limits()) -> OfflineData:
    """Read the three inputs; problems are in ``.reports`` (check ``.ok``).

    ``corpus`` (optional): the current corpus, a file or folder (``corpus_format``, detected when
    None): its documents are the population recall's pool follows, and its sentence split restricts
    :math:`p_0` to instances within one sentence (module docs); a true instance of the exhaustive
    file in a document the corpus lacks is a located error (``UP201``), and so is a span of a submission or of the
    exhaustive file outside its corpus document (``UP202``).

    Raises
    ------
    LocatedError
        A missing file or folder; a corpus error (:class:`~unpooled.core.errors.CorpusError`).
    """
    for p, what in ((labels, "labels"), (exhaustive, "exhaustive")):
        if problem := file_problem(p):
            raise LocatedError(str(p), 0, f"{problem} (the {what} file)")
    if corpus is not None and not Path(corpus).exists():
        raise LocatedError(str(corpus), 0, "no such file or folder (the corpus)")
    subs, sub_reps = read_submissions(submissions, limits=limits)
    clean = {s.name for s, r in zip(subs, sub_reps) if r.ok}
    draws, lab_rep = read_labels(labels, subs, checked=clean, limits=limits)
    true, ex_rep = read_exhaustive(exhaustive, limits=limits)
    sentences = entities = None
    if corpus is not None:
        wanted = ({InstanceRef.from_key(d.key).doc for d in draws} | {t.ref.doc for t in true}
                  | {r.doc for sub in subs for r in sub.instances})
        sentences, entities, lengths = read_corpus_index(corpus, corpus_format, docs=wanted)
        true = _check_exhaustive_documents(true, sentences, ex_rep, str(corpus))
        check_offsets([*((r, list(zip(s.lines, s.instances))) for s, r in zip(subs, sub_reps)),
                       (ex_rep, [(t.line, t.ref) for t in true])], lengths, str(corpus))
    return OfflineData(tuple(subs), tuple(draws), tuple(true), (*sub_reps, lab_rep, ex_rep), sentences,
                       None if corpus is None else str(corpus), None if corpus is None else frozenset(sentences),
                       entities)


# -- scoring --------------------------------------------------------------------------------
def _codes(values) -> np.ndarray:
    ids: dict = {}
    return np.fromiter((ids.setdefault(v, len(ids)) for v in values), dtype=np.int64, count=len(values))


def system_distribution(sub: Submission, level: str) -> np.ndarray:
    """:math:`p_i` over the system's instances (file order) at ``level``, from its own entity ids."""
    pred = _codes([r.predicate for r in sub.instances])
    subj = _codes(sub.subjects)
    fill = _codes(list(zip(sub.subjects, (r.predicate for r in sub.instances), sub.objects)))
    return sampling_distribution(len(sub.instances), level=level, predicate=pred, subject=subj, fill=fill)


def build_design(data: OfflineData, *, level: str = "instance", match: str = "exact",
                 corrected_labels: bool = False, documents: int | None = None,
                 sentences: Sentences | None = None, population=None,
                 recall_protocol: str = "sentence") -> tuple[Design, list[InstanceRef]]:
    """The estimators' :class:`Design` and the universe (union of submissions by key).

    The design knows the document of every exhaustive instance (``documents``: how many were
    annotated, at least the number present; default that number).  :math:`p_0 = 0` for a drawn
    instance outside the support of :math:`p_0` (:func:`~unpooled.core.estimators.exhaustive.p0_support`):
    under the ``sentence`` recall protocol, across sentences of ``sentences`` (default ``data.sentences``) and
    not in the exhaustive file; under either, on a document outside ``population`` (default
    ``data.population``, the current corpus); None: no restriction.  Under the ``document`` protocol recall
    counts facts between the corpus's entity clusters (``data.entities``;
    :func:`~unpooled.core.estimators.exhaustive.fact_level`): the design's exhaustive columns are facts.
    """
    check_choice("level", level, LEVELS)
    check_choice("match", match, MATCHES)
    check_choice("recall_protocol", recall_protocol, RECALL_PROTOCOLS)
    index: dict[str, int] = {}
    universe: list[InstanceRef] = []
    rows, cols, vals = [], [], []
    for i, sub in enumerate(data.submissions):
        xs = np.empty(len(sub.keys), dtype=np.int64)
        for k, (key, ref) in enumerate(zip(sub.keys, sub.instances)):
            u = index.get(key)
            if u is None:
                u = index[key] = len(universe)
                universe.append(ref)
            xs[k] = u
        if len(xs):
            rows.append(np.full(len(xs), i))
            cols.append(xs)
            vals.append(system_distribution(sub, level))
    m, U = len(data.submissions), len(universe)
    if not rows:
        raise InvalidInputError("submissions: expected at least one submission with instances, got none")
    P = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(m, U))
    names = {s.name: i for i, s in enumerate(data.submissions)}
    src = np.array([names[d.system] for d in data.labels], dtype=np.int64)
    xs = np.array([index[d.key] for d in data.labels], dtype=np.int64)
    f = np.array([d.label for d in data.labels], dtype=float)
    truth, g0, gs, p0 = _recall_parts(data, P, universe, index, xs, match, recall_protocol)
    sentences = data.sentences if sentences is None else sentences
    population = data.population if population is None else population
    inside = None
    if sentences is not None or population is not None:
        inside = p0_support([universe[u] for u in xs.tolist()], found={t.key for t in data.exhaustive},
                            sentences=sentences, population=population, protocol=recall_protocol)
    v0 = np.array([t.weight / t.inclusion for t in truth], dtype=float)
    design = make_design(P, src, xs, f, g0, v0, p0, gs=gs, corrected_labels=corrected_labels,
                         y0_docs=[t.ref.doc for t in truth], documents=documents, inside=inside)
    return design, universe


def _recall_parts(data: OfflineData, P, universe, index, xs, match: str, protocol: str):
    """``(truth, g0, gs, p0)``: the exhaustive sample's columns (true instances; under the document protocol one
    per fact), which system found each, :math:`g_i` of the draws (None: key identity) and :math:`p_0` of the
    universe (each true instance's weight, divided by the pooled instances matching it)."""
    m, U = P.shape
    p0 = np.ones(U)
    for t in data.exhaustive:
        u = index.get(t.key)
        if u is not None:
            p0[u] = t.weight
    members = [np.asarray(P[i].indices) for i in range(m)]
    if protocol == "document":
        if match != "exact":
            raise InvalidInputError(f"match: the document recall protocol matches facts between the corpus's entity "
                                    f"clusters (any mention of each); expected the default 'exact', got {match!r}")
        if data.entities is None:
            raise InvalidInputError("recall_protocol: 'document' needs the corpus (--corpus, a format with entity "
                                    "clusters such as docred): recall counts facts between its entity clusters")
        fl = fact_level(universe, members, xs, [t.ref for t in data.exhaustive], data.entities)
        return [data.exhaustive[k] for k in fl.first], fl.g0, fl.gs, fl.p0(p0)
    g0 = match_matrix([s.instances for s in data.submissions], [t.ref for t in data.exhaustive], policy=match)
    if match == "exact":
        return list(data.exhaustive), g0, None, p0
    # nu-hat must see the draws through the same policy as theta-hat sees Y0, and one true fact
    # present as several pooled instances must count once (unpooled.core.matching)
    gs = match_universe(universe, members, targets=xs, policy=match).toarray().astype(bool) if len(xs) else None
    return list(data.exhaustive), g0, gs, p0 / match_multiplicity(universe, policy=match)


def prediction_powered(design: Design, submissions, universe: list[InstanceRef], sc: Scores
                       ) -> PPIPrecision | None:
    """The PPI++ precision of every system (rows of ``design.P``: ``submissions`` in order; columns: ``universe``)
    from its submitted confidences, at the weights and level of ``sc``; None when every confidence is 1 (it
    would be the label-only estimate exactly)."""
    if all(c == 1.0 for s in submissions for c in s.confidence_of()):
        return None
    index = {ref.key: u for u, ref in enumerate(universe)}
    rows, cols, vals = [], [], []
    for i, sub in enumerate(submissions):
        rows += [i] * len(sub.keys)
        cols += [index[k] for k in sub.keys]
        vals += list(sub.confidence_of())
    return ppi_precision(design, confidence_matrix(design.P, rows, cols, vals), W=sc.weights,
                         confidence=sc.confidence)


def system_rows(sc: Scores, n_own, names) -> tuple[SystemScore, ...]:
    """One :class:`SystemScore` per system from the arrays of :func:`~unpooled.core.estimators.estimate`.

    ``n_own``: each system's own labelled draws. A system without any gets a warning (its recall is the exhaustive
    sample's share of its output; its precision and F1 are undefined, NaN, unless other systems' draws weigh it, and
    then they may be biased); so does a joint estimate whose effective sample size is below :data:`ESS_WARN`. The one place rows are made, for ``unpooled score`` and
    the service alike.  The estimator is the one the scores record (``sc.method``).
    """
    rows = []
    nan = float("nan")
    simple = sc.method == "simple"
    est = {k: getattr(sc, k) for k in ("p", "r", "f1")}
    for i, name in enumerate(names):
        w: list[str] = []
        undefined = not np.isfinite(est["p"].value[i])
        if undefined:
            w.append("no labelled draw weighs it: precision and F1 are undefined" + ("" if simple else
                     "; recall is the exhaustive sample's share"))
        elif n_own[i] == 0:
            w.append("no labelled draws of its own: precision from other systems' draws may be biased (q_i may not "
                     "cover p_i); recall is the exhaustive sample's share")
        elif not simple and sc.ess[i] < ESS_WARN:
            w.append(f"importance weights degenerate (effective sample size {sc.ess[i]:.1f} < {ESS_WARN:g}): "
                     "collect labels of its own")
        p, r, f1 = (est[k][i] for k in ("p", "r", "f1"))
        if undefined:
            p = f1 = Estimate.undefined("no labelled draw weighs it", sc.method, sc.confidence)
        boot = {k: ConfidenceInterval(nan, nan, c.level, "none") if undefined and k in ("p", "f1") else c[i]
                for k, c in sc.boot.items()}
        rows.append(SystemScore(name, p, r, f1, labels=int(n_own[i]), ess=float(sc.ess[i]), warnings=tuple(w),
                                boot=boot))
    return tuple(rows)


def score(data: OfflineData, *, level: str = "instance", estimator: str = "joint", weights: str = "balance",
          match: str = "exact", bootstrap: int = 0, confidence: float = 0.90, rng=None,
          corrected_labels: bool = False, documents: int | None = None,
          sentences: Sentences | None = None, population=None, votes=None,
          recall_protocol: str = "sentence") -> OfflineResult:
    r"""Estimate P, R and F1 of every submitted system.

    Parameters
    ----------
    data : OfflineData
        From :func:`load`; it must be free of errors.
    level : {'instance', 'relation', 'entity', 'subj-rel', 'fill'}
        Sampling distribution :math:`p_i` the labelled draws were drawn from.
    estimator : {'joint', 'simple'}
    weights : {'balance', 'heuristic', 'minvar'}
    match : {'exact', 'overlap'}
        Recall matching policy (:mod:`unpooled.core.matching`). With ``overlap`` the joint
        estimator matches the draws by the same policy and counts each fact once; formerly the joint recall estimator
        matches sampled instances by key identity.
    bootstrap : int
        Bootstrap replicates (0: none).
    confidence : float
        Interval level in (0, 1).
    rng : seed or Generator, optional
        For the bootstrap.
    corrected_labels : bool
        Labels already corrected for annotation error may leave [0, 1] (they stay unbiased).
    documents : int, optional
        Number of exhaustively annotated documents, counting those without a true instance
        (``--exhaustive-documents``); at least the number of documents of the exhaustive file,
        which is the default (with a warning).  The variance of recall's exhaustive term is
        that of a cluster sample of these :math:`N` documents,
        :math:`\widehat{\mathrm{Var}}(\hat\theta_i)=\frac{N}{N-1}\sum_d (z_{id}-\bar z_i)^2`
        with :math:`z_{id}` the document totals of the linearised Hájek ratio
        (:mod:`unpooled.core.estimators.exhaustive`).
    sentences : mapping, optional
        ``doc id -> (sentence starts, sentence ends)`` (default ``data.sentences``, from the
        corpus given to :func:`load`): :math:`p_0(x) = 0` in the joint :math:`\hat\nu_i` for a
        drawn instance whose arguments lie in different sentences, which the exhaustive protocol
        cannot find.  None: :math:`p_0 = 1` for every pooled instance (a warning with ``joint``).
    population : collection of str, optional
        The documents of the current corpus, which the exhaustive sample was drawn from (default
        ``data.population``, from the corpus given to :func:`load`): a labelled draw on another
        document (a label kept from an earlier corpus) gets :math:`p_0 = 0` and counts for precision
        only, with a warning naming it; every exhaustive instance must lie in it.  None: unknown, no
        restriction.
    votes : KeyedAnswers, optional
        The verification answers behind the labels, by instance key, with the workers' confusions
        (:class:`~unpooled.core.estimators.noisy.KeyedAnswers`): the estimates then come from the votes, not
        from ``data.labels``' values (:mod:`unpooled.core.estimators.noisy`).
    recall_protocol : {'sentence', 'document'}
        Which true instances recall counts (:mod:`unpooled.core.estimators.exhaustive`, 4): ``sentence``, the
        instances within one sentence (``sentences`` restricts :math:`p_0`); ``document``, every true fact
        between two entity clusters of a document (it needs the corpus's clusters, ``data.entities``, and an
        exhaustive file annotated over whole documents; ``sentences`` is then not read).  Stated in the
        result's ``options`` and every report.
    """
    if not data.ok:
        raise InputFindings([r for r in data.reports if not r.ok])
    check_choice("estimator", estimator, ESTIMATORS)
    check_choice("weights", weights, WEIGHTS)
    check_choice("recall_protocol", recall_protocol, RECALL_PROTOCOLS)
    if not isinstance(bootstrap, int) or bootstrap < 0:
        raise InvalidInputError(f"bootstrap: expected a non-negative integer, got {bootstrap!r}")
    if not (isinstance(confidence, (int, float)) and not isinstance(confidence, bool) and 0 < confidence < 1):
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    present = len({t.ref.doc for t in data.exhaustive})
    if documents is not None and (not isinstance(documents, (int, np.integer)) or isinstance(documents, bool)
                                  or documents < max(present, 1)):
        raise InvalidInputError(
            f"documents: expected the number of exhaustively annotated documents, an integer >= {max(present, 1)}"
            + (f" (the exhaustive file has true instances in {present} documents)" if present else "")
            + f", got {documents!r}")
    sentences = data.sentences if sentences is None else sentences
    population = data.population if population is None else frozenset(population)
    stray = sorted({t.ref.doc for t in data.exhaustive} - population) if population is not None else []
    if stray:
        raise InvalidInputError(f"population: expected the documents the exhaustive sample was drawn from, but the "
                                f"exhaustive file has true instances in {len(stray)} other(s), e.g. {stray[0]!r}")
    design, universe = build_design(data, level=level, match=match, corrected_labels=corrected_labels,
                                    documents=documents, sentences=sentences, population=population,
                                    recall_protocol=recall_protocol)
    crowd = None
    if votes is not None:
        index: dict[str, int] = {}
        for sub in data.submissions:
            for key in sub.keys:
                index.setdefault(key, len(index))
        crowd = votes.on(index, len(universe), [x.predicate for x in universe])
    names = tuple(s.name for s in data.submissions)
    glob: list[str] = []
    if design.n0 == 0:
        glob.append("the exhaustive file has no true instances: recall and F1 are undefined")
    elif documents is None:
        glob.append(f"the number of exhaustively annotated documents is not given (--exhaustive-documents, "
                    f"documents=): recall's variance treats the {present} documents with a true instance as the "
                    "sample; documents without true instances are then not counted")
    outside = int((design.p0[design.xs] == 0).sum())  # labelled draws outside p0's support
    left_out = outside_population([universe[u] for u in design.xs.tolist()], population) if outside else None
    if estimator == "joint" and left_out:
        glob.append(left_out)
    glob += _support_warnings(data, sentences, population, universe, estimator, recall_protocol)
    if estimator == "joint" and any(t.weight != 1.0 for t in data.exhaustive):
        glob.append("p0 weights of the exhaustive file are known only for its instances; other pooled instances "
                    "get weight 1 in the joint recall estimate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightDegeneracyWarning)
        sc = estimate(design, estimator=estimator, weights=weights, confidence=confidence, bootstrap=bootstrap,
                      rng=rng, votes=crowd)
    rows = system_rows(sc, design.n, names)
    ppi = prediction_powered(design, data.submissions, universe, sc)
    opts = {"level": level, "estimator": estimator, "weights": weights, "bootstrap": bootstrap,
            "confidence": confidence, "documents": design.n_groups, "documents_given": documents is not None,
            "sentences": sentences is not None and recall_protocol == "sentence", "outside_p0": outside,
            "recall_protocol": recall_protocol, "match": "cluster" if recall_protocol == "document" else match}
    return OfflineResult(rows, sc, design, names, tuple(glob), data.reports, opts, ppi)


def _support_warnings(data: OfflineData, sentences, population, universe, estimator: str, recall_protocol: str
                      ) -> list[str]:
    """What :func:`score` warns about p0's support: under the document protocol :func:`_document_warnings`; under
    the sentence protocol a missing sentence split, or true instances of the exhaustive file across sentences."""
    glob: list[str] = []
    if recall_protocol == "document":
        glob += _document_warnings(data, sentences, universe)
    elif sentences is None:
        if estimator == "joint":
            glob.append("no sentence split (--corpus, sentences=): p0 = 1 for every pooled true instance, also "
                        "those whose subject and object lie in different sentences, which the exhaustive protocol "
                        "(mention pairs within one sentence) cannot find; they dilute every system's recall. Give "
                        "--corpus to restrict p0 to instances within one sentence"
                        + ("" if population is not None else " of the current corpus's documents (without it, labels "
                           "kept from documents no longer in the corpus also count in recall's pool)"))
    else:
        crossing = [t.line for t in data.exhaustive if not within_sentence(t.ref, sentences)]
        if crossing:
            lines = ", ".join(map(str, crossing[:10])) + (", ..." if len(crossing) > 10 else "")
            glob.append(f"{len(crossing)} true instance(s) of the exhaustive file (line {lines}) have arguments in "
                        "different sentences of the corpus, although the exhaustive protocol pairs mentions "
                        "within one sentence: check the sentence split (they are kept in p0's support), or score "
                        "with the document recall protocol (--recall-protocol document) if the sample was annotated "
                        "over whole documents")
    return glob


def _document_warnings(data: OfflineData, sentences, universe) -> list[str]:
    """What the document recall protocol warns about: an exhaustive file without a cross-sentence fact (it may
    have been annotated within sentences: module docs of :mod:`~unpooled.core.estimators.exhaustive`, 4 (a)), and
    pooled documents without entity clusters (their instances are facts of their own spans)."""
    out = []
    across, known = crossing_share([t.ref for t in data.exhaustive], sentences or {})
    if known >= 10 and not across:
        out.append(f"none of the {known} true instances of the exhaustive file has arguments in different sentences: "
                   "the document recall protocol needs every true fact of each sampled document, cross-sentence ones "
                   "included; an exhaustive sample annotated within sentences makes recall too high")
    bare = sorted({x.doc for x in universe} - set(data.entities or {}))
    if bare:
        out.append(f"{len(bare)} pooled document(s) have no entity clusters in the corpus (e.g. {bare[0]!r}): their "
                   "instances count as facts of their own spans")
    return out


def score_files(labels: str | Path, submissions: str | Path, exhaustive: str | Path, *,
                corpus: str | Path | None = None, corpus_format: str | None = None,
                limits: Limits = Limits(), **options) -> OfflineResult:
    """:func:`load` then :func:`score`; raises :class:`InputFindings` when a file has errors.

    ``corpus``, ``corpus_format`` are those of :func:`load`, ``options`` those of :func:`score`.
    """
    data = load(labels, submissions, exhaustive, corpus=corpus, corpus_format=corpus_format, limits=limits)
    if not data.ok:
        raise InputFindings([r for r in data.reports if not r.ok])
    return score(data, **options)


__all__ = [
    "MATCHES", "InputFindings", "LabelledDraw", "OfflineData", "OfflineResult", "Submission", "SystemScore",
    "TrueInstance", "build_design", "load", "read_answers", "read_exhaustive", "read_labels",
    "read_sentences",
    "prediction_powered", "read_submission", "read_submissions", "score", "score_files", "system_distribution",
    "system_name", "system_rows",
]
