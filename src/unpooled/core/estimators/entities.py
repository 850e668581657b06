r"""Entity detection, typing, linking and NIL-clustering scores of a submitted KB, with intervals.

Two samples already collected for the relation scores are reused (method.md §1.3, §2; seed 002,
"Evaluating precision with pooled annotation" and "... recall with exhaustive annotation"):

* the **verification draws** :math:`\hat X_j` (i.i.d. from each system's :math:`p_j`): the annotators
  judge whether the subject and the object of a drawn instance are valid entity mentions, so every
  draw labels its *argument mentions* :math:`a \in \mathrm{args}(x)`, identified by document and span
  and shared by every system that uses that span;
* the **exhaustive documents** :math:`d = 1..N`, sampled with inclusion probabilities :math:`\pi_d`,
  whose aggregated entity layer gives every mention with its type, in-document coreference cluster and
  KB link (empty: NIL).

The module holds :func:`entity_scores`, which puts the parts together, and :func:`document_terms`, what it takes
from the exhaustive documents alone (every figure but mention precision and F1: unchanged while only the
verification draws' labels change, so a caller may keep it), and re-exports what the parts offer:

* :mod:`.entity_metrics`: :data:`METRICS`, :data:`LABELS`, :class:`EntityScores`, the document
  ratio (:func:`document_ratio`: Hájek, delete-one-document jackknife), F1 and the intervals;
* :mod:`.entity_documents`: :class:`Mention`, :class:`ExhaustiveDocument`, matching (:data:`MATCHES`), the
  per-document totals of every ratio and their labels corrected for the crowd's errors (:func:`span_weights`);
* :mod:`.entity_arguments`: the argument mentions' precision from the verification draws
  (:func:`argument_precision`) and their labels (:func:`validity_labels`, :func:`rate_variance`);
* :mod:`.entity_nil_b3`: NIL clustering's B-cubed across documents (:func:`cross_document_b3`).

**Mention precision, stratified.**  A system's mentions :math:`M_i` split into its argument mentions
:math:`A_i` (those an instance of its KB uses) and the rest; both sizes are known.  With
:math:`\alpha_i = |A_i|/|M_i|`,

.. math::

    \hat P^M_i = \alpha_i\,\hat P^A_i + (1-\alpha_i)\,\hat P^{\bar A}_i, \qquad
    \widehat{\mathrm{Var}} = \alpha_i^2\,\widehat{\mathrm{Var}}(\hat P^A_i)
                             + (1-\alpha_i)^2\,\widehat{\mathrm{Var}}(\hat P^{\bar A}_i)

(the two samples are independent).  :math:`\hat P^A_i` is the joint importance-sampling estimator of the
verification draws (:func:`argument_precision`).  :math:`\hat P^{\bar A}_i` is the
document ratio (:func:`document_ratio`) over the non-argument mentions of the exhaustive documents; a stratum
without a sample is bounded by [0, 1] in the interval (never guessed).

**What cannot be scored** gets NaN and a reason, never a number: no exhaustive document, a layer
without any KB link (linking), no gold-linked or no system-linked mention, no NIL mention found.

References
----------
W. J. Rogan, B. Gladen. Estimating prevalence from the results of a screening test. Am. J. Epidemiol. 107, 1978.
A. Bagga, B. Baldwin. Algorithms for scoring coreference chains. LREC 1998 workshop.
A. Chaganty, A. Paranjape, P. Liang, C. Manning. Importance sampling for unbiased on-demand evaluation of
knowledge base population. EMNLP 2017.
W. G. Cochran. *Sampling Techniques*, 3rd ed. Wiley, 1977.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import InvalidInputError
from .crowd_channels import fit_rates
from .entity_arguments import argument_precision, rate_variance, validity_labels
from .entity_documents import (CHANNEL, MATCHES, ExhaustiveDocument, Mention, _answer_doc, _best, _corrected_ratios,
                               _items, _layer_ratios, _matched, _sys_doc, _sys_stats, span_weights)  # noqa: F401
from .entity_metrics import (LABELS, METRICS, EntityScores, _f1_metric, _interval, _metric,
                             _undefined,
                             _pair_f1, document_ratio)
from .entity_nil_b3 import cross_document_b3
from .exhaustive import t_factor, theta_variance
from .intervals import _f1_partials
from .results import ConfidenceInterval, Estimate

#: the reason of every figure while no document is exhaustively annotated
NO_DOCUMENTS = "no exhaustively annotated document yet"


def _entity_scores_iv(docs, systems, arguments, confidence, match):
    if match not in MATCHES:
        raise InvalidInputError(f"match: expected one of {', '.join(MATCHES)}, got {match!r}")
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    for k, d in enumerate(docs):
        if not isinstance(d, ExhaustiveDocument):
            raise InvalidInputError(f"docs[{k}]: expected an ExhaustiveDocument, got {type(d).__name__}")
        if not 0 < d.inclusion <= 1:
            raise InvalidInputError(f"docs[{k}].inclusion: expected a probability in (0, 1], got {d.inclusion!r}")
        for j, ans in enumerate(d.answers):
            if isinstance(ans, (str, bytes, Mention)) or not all(isinstance(x, Mention) for x in ans):
                raise InvalidInputError(f"docs[{k}].answers[{j}]: expected a sequence of Mention")
    m = len(systems)
    if arguments is not None:
        for key in ("p", "var", "sizes", "draws"):
            if key not in arguments:
                raise InvalidInputError(f"arguments: missing {key!r}")
            if len(arguments[key]) != m:
                raise InvalidInputError(f"arguments[{key!r}]: expected {m} values, got {len(arguments[key])}")


@dataclass
class DocumentTerms:
    """One system's figures from the exhaustive documents alone (:func:`document_terms`): the document ratios and
    every metric but mention precision and F1, with their notes and the crowd's rates.  They do not depend on the
    verification draws: a caller may keep them while only the draws' labels change and pass them to
    :func:`entity_scores`."""

    ratios: dict
    metrics: dict
    crowd_notes: list
    nil_notes: list
    crowd: dict


def entity_scores(docs: Sequence[ExhaustiveDocument], systems: Sequence[Mapping], *, mention_counts=None,
                  argument_spans=None, arguments: Mapping | None = None, match: str = "overlap",
                  nil_identity: Mapping | None = None, confidence: float = 0.90,
                  types=None, terms: Sequence[DocumentTerms] | None = None) -> list[EntityScores]:
    r"""Entity metrics of every system (module docs).

    Parameters
    ----------
    docs : sequence of ExhaustiveDocument
        The exhaustive documents, each with its inclusion probability and aggregated entity layer.
    systems : sequence of mappings
        Per system, ``doc id -> sequence of Mention`` (its mentions in the exhaustive documents;
        ``cluster`` is the system's entity, ``link`` its KB link or '').
    mention_counts : sequence of (int, int), optional
        Per system, ``(|M_i|, |A_i|)``: all its mentions and its argument mentions (corpus-wide).
    argument_spans : sequence of mappings, optional
        Per system, ``doc id -> set of (start, end)`` of its argument mentions in the exhaustive documents.
    arguments : mapping, optional
        :func:`argument_precision`'s ``p``, ``var`` and ``sizes``, plus ``draws`` (labelled draws per system).
        Without it, mention precision comes from the exhaustive documents alone (all mentions).
    match : {'overlap', 'exact'}
        How a system mention matches a mention of the layer (:mod:`.entity_documents`).
    nil_identity : mapping, optional
        ``(doc id, layer cluster) -> cross-document entity`` of the unlinked clusters (the aggregated clustering
        task).  With it the NIL B-cubed figures are across documents (:func:`cross_document_b3`); without, within
        each document.
    confidence : float
        Level of the intervals.
    types : collection of str, optional
        The entity types of the schema (:math:`K` of the typing channel; a system type outside them is never
        right).  Default: the types the answers and the layer use.  Read only when documents carry answers.
    terms : sequence of DocumentTerms, optional
        :func:`document_terms` of these documents and systems (with these ``argument_spans``, ``match``,
        ``nil_identity``, ``confidence`` and ``types``), computed earlier; default: computed here.

    Returns
    -------
    list of EntityScores
    """
    _entity_scores_iv(docs, systems, arguments, confidence, match)
    if terms is None:
        terms = document_terms(docs, systems, argument_spans=argument_spans, match=match, nil_identity=nil_identity,
                               confidence=confidence, types=types)
    elif len(terms) != len(systems):
        raise InvalidInputError(f"terms: expected {len(systems)} (one per system), got {len(terms)}")
    tf = t_factor(len(docs), confidence)
    out = []
    for i, t in enumerate(terms):
        notes = list(t.crowd_notes)
        metrics: dict[str, Estimate] = {"mention_r": t.metrics["mention_r"]}
        alpha, n_draws, parts = _mention_precision(metrics, notes, i, docs, t.ratios, mention_counts, arguments, tf,
                                                   confidence)
        metrics["mention_f1"] = _mention_f1(metrics["mention_p"], metrics["mention_r"], i, docs, t.ratios, arguments,
                                            alpha, tf, confidence)
        metrics.update((k, v) for k, v in t.metrics.items() if k != "mention_r")
        out.append(EntityScores(metrics, len(docs), alpha, n_draws, notes + list(t.nil_notes), parts, dict(t.crowd)))
    return out


@dataclass
class DocumentSide:
    """What the exhaustive documents alone give the document terms (:func:`document_side`): computed once for a set
    of documents and settings, whatever the systems."""

    docs: Sequence[ExhaustiveDocument]
    match: str
    confidence: float
    pi: np.ndarray
    tf: float
    links_known: bool
    types: frozenset | None
    n_types: int
    answers: list | None  # per document, what its answers say (None: no document has answers)


def document_side(docs: Sequence[ExhaustiveDocument], *, match: str = "overlap", confidence: float = 0.90,
                  types=None) -> DocumentSide:
    """The documents' side of :func:`document_terms` (its parameters)."""
    _entity_scores_iv(docs, [], None, confidence, match)
    tset = frozenset(types) if types is not None else None
    ads = K = None
    if any(d.answers for d in docs):
        K = len(tset) if tset is not None else len({a.type for d in docs for ans in d.answers for a in ans if a.type}
                                                   | {g.type for d in docs for g in d.mentions if g.type})
        K = max(K, 2)
        ads = [_answer_doc(d, match) for d in docs]
    return DocumentSide(docs, match, confidence, np.array([d.inclusion for d in docs], dtype=float),
                        t_factor(len(docs), confidence), any(g.link for d in docs for g in d.mentions), tset, K, ads)


@dataclass
class SystemPart:
    """One system's part of its document terms that the other systems do not move (:func:`system_part`): its
    labels' sums per document (:mod:`.entity_documents`), or its layer ratios when no document has answers, the
    spans it gives the crowd's rates and its NIL B-cubed figures across documents."""

    stats: object | None
    layer_ratios: dict | None
    marks: np.ndarray  # (document index, start, end, answers marking it) of each of its spans
    nil: tuple | None


def system_part(side: DocumentSide, system: Mapping, argument_spans: Mapping | None = None, *,
                nil_identity: Mapping | None = None) -> SystemPart:
    """What one system's document terms take from the documents and its own mentions (:func:`document_terms`):
    everything but what the crowd's rates, fitted on every system's spans, move."""
    args = argument_spans or {}
    docs, match = side.docs, side.match
    if side.answers is None:
        stats, marks = None, np.zeros((0, 4), dtype=np.int64)
        layer = _layer_ratios(docs, system, args, side.links_known, match, side.pi)
    else:
        sds = [_sys_doc(d, ad, system.get(d.doc, ()), set(args.get(d.doc, ())), side.links_known, match, side.types)
               for d, ad in zip(docs, side.answers)]
        marks = np.array([(d, *span, x) for d, sd in enumerate(sds) for span, x in sd.marks.items()], dtype=np.int64)
        stats, marks, layer = _sys_stats(sds, side.answers), marks.reshape(-1, 4), None
    nil = None
    if nil_identity:
        metrics: dict[str, Estimate] = {}
        notes: list[str] = []
        _nil_across(metrics, notes, docs, system, nil_identity, match, side.tf, side.confidence)
        nil = (metrics, notes)
    return SystemPart(stats, layer, marks, nil)


def document_terms(docs: Sequence[ExhaustiveDocument], systems: Sequence[Mapping], *, argument_spans=None,
                   match: str = "overlap", nil_identity: Mapping | None = None, confidence: float = 0.90,
                   types=None, side: DocumentSide | None = None,
                   parts: Sequence[SystemPart | None] | None = None) -> list[DocumentTerms]:
    """Per system, what :func:`entity_scores` takes from the exhaustive documents alone (its parameters).

    ``side`` and ``parts`` (per system; None: computed here) are :func:`document_side` and :func:`system_part` of
    these documents, systems and settings, computed earlier: only the crowd's rates (every system's spans) and what
    they move are computed again, from the parts' sums."""
    _entity_scores_iv(docs, systems, None, confidence, match)
    if side is None:
        side = document_side(docs, match=match, confidence=confidence, types=types)
    parts = list(parts) if parts is not None else [None] * len(systems)
    if len(parts) != len(systems):
        raise InvalidInputError(f"parts: expected {len(systems)} (one per system), got {len(parts)}")
    for i, part in enumerate(parts):
        if part is None:
            parts[i] = system_part(side, systems[i], argument_spans[i] if argument_spans is not None else None,
                                   nil_identity=nil_identity)
    crowd = _fit_crowd(side, parts)
    return [_terms(side, part, crowd) for part in parts]


def _terms(side: DocumentSide, part: SystemPart, crowd) -> DocumentTerms:
    """One system's :class:`DocumentTerms` from its part and the crowd's ``(rates, free parameters)`` (or None)."""
    docs, tf, confidence = side.docs, side.tf, side.confidence
    notes: list[str] = []
    if crowd is None:
        ratios = part.layer_ratios
    else:
        rates, free = crowd
        ratios = _corrected_ratios(part.stats, rates, free, side.n_types, side.pi)
        if free:
            what = {"mark": "mention validity", "type": "types", "pair": "clusters"}
            done = [w for c, w in what.items() if rates.corrected[c]]
            left = [w for c, w in what.items() if not rates.corrected[c]]
            notes.append("the exhaustive documents' labels are corrected for the crowd's errors, estimated "
                         f"from the agreement of its answers: {', '.join(done)}"
                         + (f"; {', '.join(left)} from the aggregated layer (rates not identified)" if left else ""))
    metrics: dict[str, Estimate] = {}
    metrics["mention_r"] = _ratio_metric(docs, ratios, "mention_r", "the exhaustive documents have no mention",
                                         tf, confidence)
    metrics["typing"] = _ratio_metric(docs, ratios, "typing", "no typed valid mention of this submission in the "
                                      "exhaustive documents (a submission without entity types is not scored)",
                                      tf, confidence)
    _link_metrics(metrics, docs, ratios, side.links_known, tf, confidence)
    nil_notes: list[str] = []
    if part.nil is not None:
        metrics.update(part.nil[0])
        nil_notes.extend(part.nil[1])
    else:
        _nil_within(metrics, docs, ratios, tf, confidence)
    return DocumentTerms(ratios, metrics, notes, nil_notes, crowd[0].to_dict() if crowd is not None else {})


def _fit_crowd(side: DocumentSide, parts: Sequence[SystemPart]):
    """The crowd's rates fitted to the documents' answers and every system's spans (:mod:`.entity_documents`,
    "Labels from the answers"): ``(rates, free parameters)``, None without answers."""
    if side.answers is None:
        return None
    rows = np.concatenate([np.zeros((0, 4), dtype=np.int64)] + [part.marks for part in parts])
    rows = rows[np.unique(rows[:, :3], axis=0, return_index=True)[1]]  # each span once, by document
    marks = np.split(rows[:, 3], np.searchsorted(rows[:, 0], np.arange(1, len(side.docs))))
    rates = fit_rates([_items(ad, m) for ad, m in zip(side.answers, marks)], side.n_types)
    return rates, [p for p, channel in enumerate(CHANNEL) if rates.corrected[channel]]


def _ratio_metric(docs, ratios: Mapping, key: str, reason: str, tf: float, confidence: float) -> Estimate:
    """The metric of the document ratio ``key``, its variance inflated by ``tf``."""
    if not docs:
        return _undefined(NO_DOCUMENTS)
    est, var, _, _, n = ratios[key]
    return _metric(est, var * tf, n, confidence, reason)


def _mention_precision(metrics: dict, notes: list, i: int, docs, ratios: Mapping, mention_counts,
                       arguments: Mapping | None, tf: float, confidence: float) -> tuple[float, int, dict]:
    """``metrics['mention_p']``: stratified (argument mentions from the draws, the rest from the documents), or
    from the documents alone; returns ``(alpha, draws, parts)``."""
    alpha = float("nan")
    n_draws = 0
    parts: dict = {}
    if arguments is not None and mention_counts is not None and mention_counts[i][0] > 0:
        M, A = mention_counts[i]
        alpha = A / M
        pa, va = float(arguments["p"][i]), float(arguments["var"][i])
        n_draws = int(arguments["draws"][i])
        est_r, var_r, _, _, n_r = ratios["mention_p_rest"] if docs else (float("nan"),) * 3 + (0, 0)
        parts = {"arguments": {"value": pa, "se": math.sqrt(va) if va >= 0 else float("nan"), "n": n_draws},
                 "rest": {"value": est_r, "se": math.sqrt(var_r) if var_r >= 0 else float("nan"), "n": n_r}}
        if A > 0 and math.isnan(pa):
            metrics["mention_p"] = _undefined("no verified draw of this submission yet")
        elif alpha < 1 and math.isnan(est_r):
            # the rest has no sample: bound it by [0, 1]
            if A == 0:
                metrics["mention_p"] = _undefined(NO_DOCUMENTS if not docs else
                                                        "no mention of this submission in the exhaustive documents")
            else:
                lo_a, hi_a = _interval(pa, va, max(n_draws, 1), confidence)
                metrics["mention_p"] = Estimate(
                    float("nan"), float("nan"),
                    ConfidenceInterval(alpha * lo_a, alpha * hi_a + (1 - alpha), confidence, "bounds"), n_draws,
                    "stratified", "only bounds: the mentions outside relations have no exhaustively annotated sample")
                notes.append("mention precision is only bounded: none of the submission's mentions outside its "
                             "relations falls in an exhaustive document")
        else:
            pa_ = pa if A > 0 else 0.0
            va_ = va if A > 0 else 0.0
            pr_ = est_r if alpha < 1 else 0.0
            vr_ = var_r if alpha < 1 else 0.0
            est = alpha * pa_ + (1 - alpha) * pr_
            var = alpha ** 2 * va_ + (1 - alpha) ** 2 * vr_ * tf
            n = (n_draws if A > 0 else 0) + (n_r if alpha < 1 else 0)
            metrics["mention_p"] = _metric(est, var, n, confidence, "", "stratified")
    else:
        metrics["mention_p"] = _ratio_metric(docs, ratios, "mention_p_all", "no mention of this submission in the "
                                             "exhaustive documents", tf, confidence)
    return alpha, n_draws, parts


def _mention_f1(p: Estimate, r: Estimate, i: int, docs, ratios: Mapping, arguments: Mapping | None, alpha: float,
                tf: float, confidence: float) -> Estimate:
    """Mention F1: the argument part is independent of the documents; the document parts share them."""
    if p.defined and r.defined:
        dP, dR = _f1_partials(p.value, r.value)
        if arguments is not None and not math.isnan(alpha):
            z = (1 - alpha) * ratios["mention_p_rest"][2] if alpha < 1 and docs else 0.0
            va = float(arguments["var"][i]) if alpha > 0 and not math.isnan(float(arguments["var"][i])) else 0.0
            extra = (dP * alpha) ** 2 * va
        else:
            z = ratios["mention_p_all"][2]
            extra = 0.0
        zf = dP * z + dR * ratios["mention_r"][2]
        var_f = float(theta_variance(np.atleast_2d(zf))[0]) * tf + extra if len(docs) >= 2 else extra
        return _f1_metric(p, r, var_f, min(p.n or 1, r.n or 1), confidence, "")
    return _undefined(p.reason or r.reason)


def _link_metrics(metrics: dict, docs, ratios: Mapping, links_known: bool, tf: float, confidence: float) -> None:
    """``metrics['link_p']``, ``['link_r']`` and ``['link_f1']``."""
    if not docs:
        for k in ("link_p", "link_r"):
            metrics[k] = _undefined(NO_DOCUMENTS)
    elif not links_known:
        why = "the exhaustive annotation has no KB links (the corpus's gold layer has none): linking cannot be scored"
        metrics["link_p"] = _undefined(why)
        metrics["link_r"] = _undefined(why)
    else:
        metrics["link_p"] = _ratio_metric(docs, ratios, "link_p", "the submission links no mention of the exhaustive "
                                          "documents", tf, confidence)
        metrics["link_r"] = _ratio_metric(docs, ratios, "link_r", "the exhaustive documents have no linked mention",
                                          tf, confidence)
    metrics["link_f1"] = _pair_f1(metrics["link_p"], metrics["link_r"], ratios.get("link_p"),
                                  ratios.get("link_r"), confidence, tf)


def _nil_across(metrics: dict, notes: list, docs, system: Mapping, nil_identity: Mapping, match: str, tf: float,
                confidence: float) -> None:
    """``metrics['nil_b3_p']``, ``['nil_b3_r']`` and ``['nil_b3_f1']`` across documents, the unlinked clusters
    grouped by ``nil_identity`` (:func:`cross_document_b3`)."""
    per_doc = []
    for d in docs:
        rows = []
        ms = system.get(d.doc, ())
        for sm, g in zip(ms, _matched(ms, d.mentions, match)):
            if g is not None and not g.link:
                rows.append((sm.cluster, nil_identity.get((d.doc, g.cluster), ("doc", d.doc, g.cluster))))
        per_doc.append(rows)
    xb = cross_document_b3(per_doc)
    why = "the submission found no unlinked (NIL) gold mention"
    for k in ("p", "r"):
        val, var = xb[k]
        metrics[f"nil_b3_{k}"] = (_metric(val, var * tf, xb["n"], confidence, why) if xb["n"]
                                  else _undefined(why))
    metrics["nil_b3_f1"] = _f1_metric(metrics["nil_b3_p"], metrics["nil_b3_r"], xb["f1"][1] * tf, xb["n"],
                                      confidence, why)
    notes.append("NIL clustering: B-cubed across documents, the unlinked entities grouped by the "
                 "cross-document clustering task")


def _nil_within(metrics: dict, docs, ratios: Mapping, tf: float, confidence: float) -> None:
    """``metrics['nil_b3_p']``, ``['nil_b3_r']`` and ``['nil_b3_f1']`` from the document ratios (within each
    document)."""
    why = "the submission found no unlinked (NIL) gold mention"
    metrics["nil_b3_p"] = _ratio_metric(docs, ratios, "nil_b3_p", why, tf, confidence)
    metrics["nil_b3_r"] = _ratio_metric(docs, ratios, "nil_b3_r", why, tf, confidence)
    metrics["nil_b3_f1"] = _pair_f1(metrics["nil_b3_p"], metrics["nil_b3_r"], ratios.get("nil_b3_p"),
                                    ratios.get("nil_b3_r"), confidence, tf)


__all__ = ["DocumentSide", "DocumentTerms", "SystemPart", "document_side", "system_part", "ExhaustiveDocument", "EntityScores", "LABELS", "METRICS", "Mention", "argument_precision",
           "MATCHES", "cross_document_b3", "t_factor", "document_ratio", "document_terms", "entity_scores", "rate_variance", "validity_labels"]
