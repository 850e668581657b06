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

**Matching.**  A system mention is *valid* when its span overlaps a mention of the exhaustive layer
(``match='overlap'``, as relation instances are matched; it then stands for the mention it overlaps most) or
equals one (``'exact'``); the annotators' "valid mention" answers judge the same thing on the draws.  A gold
mention is *found* when a system mention matches it.

**Mention precision, stratified.**  A system's mentions :math:`M_i` split into its argument mentions
:math:`A_i` (those an instance of its KB uses) and the rest; both sizes are known.  With
:math:`\alpha_i = |A_i|/|M_i|`,

.. math::

    \hat P^M_i = \alpha_i\,\hat P^A_i + (1-\alpha_i)\,\hat P^{\bar A}_i, \qquad
    \widehat{\mathrm{Var}} = \alpha_i^2\,\widehat{\mathrm{Var}}(\hat P^A_i)
                             + (1-\alpha_i)^2\,\widehat{\mathrm{Var}}(\hat P^{\bar A}_i)

(the two samples are independent).  :math:`\hat P^A_i` is the joint importance-sampling estimator of
:mod:`.joint` with a target-specific label: with :math:`c_i(a) = \sum_{x \ni a} p_i(x)` the mass of
:math:`p_i` on instances using :math:`a`,

.. math::

    \varphi_i(x) = \sum_{a \in \mathrm{args}(x)} \frac{v(a)}{|A_i|\,c_i(a)}, \qquad
    \hat P^A_i = \frac{\sum_j \frac{w_{ij}}{n_j}\sum_{x \in \hat X_j} p_i(x)\,\varphi_i(x)/q_i(x)}
                     {\sum_j \frac{w_{ij}}{n_j}\sum_{x \in \hat X_j} p_i(x)\,\varphi^1_i(x)/q_i(x)},

whose numerator is unbiased because :math:`\mathbb E_{p_i}[\varphi_i] = \sum_x p_i(x) \sum_{a \in x}
v(a)/(|A_i| c_i(a)) = \frac{1}{|A_i|}\sum_{a \in A_i} v(a)`; it is divided by the same sum with
:math:`v \equiv 1` (whose expectation is 1): self-normalised, consistent with an :math:`O(1/n)` bias, and far
less variable when a few mentions carry most of the instances (the plain sum had a standard error of 0.06 at
precision 0.99 from 150 draws on Re-DocRED) (:math:`v(a)` the label: the answers saying valid, corrected for the annotators' error rates by
:func:`validity_labels`).
(:math:`\varphi^1_i` is :math:`\varphi_i` with every :math:`v(a) = 1`).  Its variance is the stratified one
(:func:`~.joint.strata_var`) of the linearised values :math:`(N_s - \hat P^A_i D_s)/\sum_s D_s` of the
numerator and denominator terms.  :math:`\hat P^{\bar A}_i` is the
document ratio below over the non-argument mentions of the exhaustive documents; a stratum without a
sample is bounded by [0, 1] in the interval (never guessed).

**Everything else is a ratio over the exhaustive documents** (Hájek):

.. math::

    \hat R = \frac{\sum_d a_d/\pi_d}{\sum_d b_d/\pi_d}, \qquad
    z_d = \frac{(a_d - \hat R\, b_d)/\pi_d}{\sum_{d'} b_{d'}/\pi_{d'}}, \qquad
    \widehat{\mathrm{Var}}(\hat R) = \frac{N-1}{N}\sum_d \Bigl(\frac{z_d}{1-h_d} - \overline{\frac{z}{1-h}}\Bigr)^2,
    \quad h_d = \frac{b_d/\pi_d}{\sum_{d'} b_{d'}/\pi_{d'}}

the delete-one-document jackknife (Efron & Stein 1981; :func:`~.exhaustive.jackknife_values`: deleting document
:math:`d` moves :math:`\hat R` by :math:`-z_d/(1-h_d)`; the linearisation :math:`\frac{N}{N-1}\sum_d z_d^2`,
Cochran 1977 §6.7, understates it when a document holds a large share :math:`h_d`), with per document :math:`d`:

=========================  =============================================  ===========================================
metric                     :math:`a_d`                                    :math:`b_d`
=========================  =============================================  ===========================================
mention recall             gold mentions the system has (same span)        gold mentions
mention precision (rest)   valid non-argument system mentions              non-argument system mentions
typing accuracy            typed valid system mentions of the gold type    typed valid system mentions
link precision             system-linked mentions, valid, same link        system-linked mentions
link recall                gold-linked mentions the system links the same  gold-linked mentions
NIL B-cubed precision      :math:`\sum_m |S(m)\cap G(m)|/|S(m)|`            gold NIL mentions the system has
NIL B-cubed recall         :math:`\sum_m |S(m)\cap G(m)|/|G(m)|`            gold NIL mentions the system has
=========================  =============================================  ===========================================

For B-cubed (Bagga & Baldwin 1998), :math:`m` runs over the gold NIL mentions the system found in the
document, :math:`G(m)` is the gold (exhaustive layer) cluster of :math:`m` and :math:`S(m)` the system
entity of :math:`m`, both restricted to those mentions: clustering is scored apart from detection.
The exhaustive layer's clusters are in-document coreference, so the B-cubed figures measure the
in-document clustering of unlinked mentions (a cross-document identity is not known to the layer).

**Labels from the answers.**  The aggregated layer is not the truth: with a poor crowd its majority type is
wrong, its clusters split and it misses mentions, and figures read against it inherit those errors (measured with
``unpooled simulate entities``, accuracy 0.75 and 3 answers a document: typing −2.9 points, NIL B-cubed precision
−4.4, the precision of mentions outside relations −1.8).  When the documents carry the answers the layer was
aggregated from (:attr:`ExhaustiveDocument.answers`), the labels of the table are instead corrected per item for
the crowd's error rates, themselves estimated from the answers' agreement (:mod:`.crowd_channels`: marking
:math:`s_1, s_0`, typing :math:`c` over :math:`K` types with :math:`e = (1-c)/(K-1)`, clustering :math:`f_1, f_0`).
With :math:`k_d` answers in document :math:`d`, for a system mention :math:`s` and a pair of layer mentions:

=======================  =========================================================  ==================================
label                    read from the answers                                      corrected, :math:`\mathbb E` = truth
=======================  =========================================================  ==================================
:math:`s` valid          :math:`y_v`: share of the :math:`k_d` answers with a        :math:`\tilde v = (y_v - s_0)/(s_1 - s_0)`
                         mention matching :math:`s`
type of :math:`s` right  :math:`y_t`: share of the answers marking :math:`s` that     :math:`(y_t - e)/(c - e)`; 0 for a type
                         give its type                                               outside the schema
link of :math:`s` right  the plurality link of the answers marking :math:`s` is       :math:`\tilde v \cdot \mathbb 1[\cdot]`
                         the system's
:math:`m, m'` together   :math:`h`: share of the answers marking both that put        :math:`\tilde\rho = (h - f_0)/(f_1 - f_0)`
                         them in one cluster                                         (1 for one layer mention)
=======================  =========================================================  ==================================

Mention precision (all mentions, or those outside relations), the numerators of typing accuracy and linking
precision, and NIL B-cubed precision :math:`\sum_m \frac{1}{|S(m)|}\sum_{m' \in S(m)} \tilde\rho(m, m')` are linear
in these labels, hence unbiased given the rates.  Which system mentions are typed and valid (typing's denominator)
and which are NIL mentions found (B-cubed's) still come from the layer: the layer's misses are independent of the
system's type and clustering, so these ratios keep no bias from them.  Mention and linking recall count, instead
of the layer's mentions, every span some answer marked (the layer's, then the answers' other mentions), each
weighted by :func:`span_weights` :math:`\omega(x)`, the marking channel's label given that the span was marked
at all (:math:`x \ge 1` of :math:`k` answers): the true mentions the system has, over the true mentions,
:math:`\sum \omega\,\mathbb 1[\text{found}] / \sum \omega` (linking: over the spans the answers link, found with
that link), unbiased given the rates whichever non-mentions the answers marked (from the layer, a non-mention a
majority marks counted as a gold mention missed: −1.0 point of mention recall, coverage 0.89, when each answer
marks one a document on average; with the weights −0.02, coverage 0.95; a document with one answer, or
marking rates not identified, keeps the layer's mentions).  B-cubed recall divides by the
estimated gold cluster size, :math:`\sum_{m' \in S(m)} \tilde\rho / \max(\sum_{m'} \tilde\rho, \cdot)` clipped to
[0, 1]: a ratio of noisy sums, *not* exactly unbiased (``unpooled simulate entities``, 200 trials: +0.6 and +0.7
point at accuracy 0.75 with 3 answers, −0.75 with a crowd that also merges clusters; from the layer +1.6, +1.4
and +2.4).  The link label trusts the answers' links (their errors are not
modelled).  Answers are pooled per document; a document without answers keeps its layer labels.  The rates'
error enters every variance through the delete-one-document differences :math:`\Delta_d` of the refitted rates
(:func:`~.crowd_channels.fit_rates`): the linearised values become
:math:`u_d = z_d + \frac{N-1}{N}\,\nabla_\theta\hat R\cdot\Delta_d` (gradient by finite differences), so their
covariance with the labels is kept.

F1 is the harmonic mean of the point estimates; its variance is the delta method on the joint
influence values (precision and recall share the documents).  Intervals are Wilson's at the effective
sample size :math:`\hat e(1-\hat e)/\widehat{\mathrm{Var}}` (:func:`~.joint.wilson`), F1's derived from its
precision's and recall's (:func:`~.joint.f1_interval`); the variances over the
documents are first inflated by :func:`t_factor` (Student's :math:`t`, :math:`N-1` degrees of freedom).

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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from .crowd_channels import PARAMS, DocumentItems, fit_rates, type_channel
from .exhaustive import jackknife_values, t_factor, theta_variance
from .joint import Design, _terms, f1_interval, strata_var, wilson

#: every metric, in display order
METRICS = ("mention_p", "mention_r", "mention_f1", "typing", "link_p", "link_r", "link_f1",
           "nil_b3_p", "nil_b3_r", "nil_b3_f1")

LABELS = {
    "mention_p": "mention precision", "mention_r": "mention recall", "mention_f1": "mention F1",
    "typing": "typing accuracy", "link_p": "linking precision", "link_r": "linking recall", "link_f1": "linking F1",
    "nil_b3_p": "NIL clustering B³ precision", "nil_b3_r": "NIL clustering B³ recall",
    "nil_b3_f1": "NIL clustering B³ F1",
}


@dataclass(frozen=True)
class Mention:
    """A mention of an exhaustive document: span, type, cluster (gold) or entity (system), KB link ('' = none)."""

    start: int
    end: int
    type: str | None
    cluster: object
    link: str = ""


@dataclass(frozen=True)
class ExhaustiveDocument:
    """One exhaustively annotated document: its inclusion probability, its aggregated entity layer and (optional)
    the crowd answers it was aggregated from, each a tuple of :class:`Mention` (``cluster``: the answer's own
    cluster numbers).  With answers the labels are corrected for the crowd's errors (module docs)."""

    doc: str
    inclusion: float
    mentions: tuple
    answers: tuple = ()


@dataclass
class Metric:
    """One estimate: value, standard error, interval, the sample size behind it, or why it cannot be given."""

    value: float
    se: float
    lo: float
    hi: float
    n: int
    reason: str = ""

    @classmethod
    def undefined(cls, reason: str) -> "Metric":
        nan = float("nan")
        return cls(nan, nan, nan, nan, 0, reason)

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)

    def to_dict(self) -> dict:
        def num(x):
            return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)

        out = {"value": num(self.value), "se": num(self.se), "lo": num(self.lo), "hi": num(self.hi), "n": int(self.n)}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class EntityScores:
    """The entity metrics of one system (:data:`METRICS` -> :class:`Metric`) and what they rest on."""

    metrics: dict
    documents: int
    argument_share: float
    argument_draws: int
    notes: list = field(default_factory=list)
    #: mention precision's strata: ``arguments`` (verification draws) and ``rest`` (exhaustive documents), each
    #: ``{value, se, n}``
    parts: dict = field(default_factory=dict)
    #: the crowd's rates the labels of the exhaustive documents were corrected with (empty: the aggregated layer)
    crowd: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        def num(x):
            return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else round(float(x), 6)

        return {"metrics": {k: self.metrics[k].to_dict() for k in METRICS}, "documents": self.documents,
                "argument_share": num(self.argument_share), "argument_draws": self.argument_draws,
                "notes": list(self.notes),
                "parts": {k: {kk: num(vv) if kk != "n" else int(vv) for kk, vv in v.items()}
                          for k, v in self.parts.items()},
                **({"crowd": self.crowd} if self.crowd else {})}


# -- the document ratio ----------------------------------------------------------------------------
def document_ratio(a, b, inclusion, *, confidence: float = 0.90) -> tuple[float, float, np.ndarray, float]:
    r"""Hájek ratio :math:`\sum_d a_d/\pi_d \,/\, \sum_d b_d/\pi_d` over the sampled documents.

    Returns ``(estimate, variance, z, B)``: ``z`` the per-document jackknife values
    :math:`\frac{N-1}{N} z_d/(1-h_d)`, :math:`h_d = (b_d/\pi_d)/B` the document's share of the weighted
    denominator ``B`` (:func:`~.exhaustive.jackknife_values`), and the variance their cluster-sample variance:
    the delete-one-document jackknife of the ratio (module docs).  NaN estimate when :math:`\sum_d b_d = 0`.

    Examples
    --------
    >>> est, var, z, B = document_ratio([1, 2, 0], [2, 2, 1], [0.5, 0.5, 0.5])
    >>> round(est, 4)
    0.6
    >>> deleted = np.array([2 / 3, 1 / 3, 0.75])  # the ratio without each document
    >>> bool(np.isclose(var, 2 / 3 * ((deleted - deleted.mean()) ** 2).sum()))
    True
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    pi = np.asarray(inclusion, dtype=float)
    if not (a.shape == b.shape == pi.shape) or a.ndim != 1:
        raise InvalidInputError(f"a, b, inclusion: expected equal 1-d shapes, got {a.shape}, {b.shape}, {pi.shape}")
    if np.any(pi <= 0) or np.any(pi > 1):
        raise InvalidInputError("inclusion: expected probabilities in (0, 1]")
    B = float((b / pi).sum())
    if B <= 0:
        return float("nan"), float("nan"), np.zeros_like(a), 0.0
    est = float((a / pi).sum() / B)
    z = jackknife_values(((a - est * b) / pi / B)[None, :], b / pi / B)[0]
    var = float(theta_variance(z[None, :])[0]) if len(z) >= 2 else 0.0
    return est, var, z, B


def _interval(est: float, var: float, n: float, confidence: float) -> tuple[float, float]:
    lo, hi = wilson(np.array([est]), np.array([var]), confidence, np.array([max(float(n), 1.0)]))
    return float(lo[0]), float(hi[0])


def _metric(est: float, var: float, n: int, confidence: float, reason: str) -> Metric:
    if math.isnan(est):
        return Metric.undefined(reason)
    raw = est
    est = min(max(est, 0.0), 1.0)  # error-corrected labels can carry an estimate past a bound
    lo, hi = _interval(est, var, n, confidence)
    if var > 0:
        # near a bound Wilson's interval stops short of it, while an estimate from error-corrected labels is
        # spread around the truth on both sides: the interval also holds the normal one (measured: a precision
        # of 1 estimated 0.992 [0.950, 0.999] on Re-DocRED)
        from scipy.stats import norm

        z = norm.ppf(0.5 + confidence / 2) * math.sqrt(var)
        lo, hi = min(lo, max(0.0, raw - z)), max(hi, min(1.0, raw + z))
    return Metric(est, math.sqrt(max(var, 0.0)), lo, hi, int(n))


def _f1_metric(p: Metric, r: Metric, var: float, n: int, confidence: float, reason: str) -> Metric:
    """F1 of two metrics, its interval derived from theirs (:func:`~.joint.f1_interval`); ``var``: its
    delta-method variance (it carries their covariance)."""
    if not (p.defined and r.defined):
        return Metric.undefined(p.reason or r.reason or reason)
    f = 2 * p.value * r.value / (p.value + r.value) if p.value + r.value > 0 else 0.0
    lo, hi = f1_interval(p.value, r.value, (p.lo, p.hi), (r.lo, r.hi), p.se ** 2, r.se ** 2, var)
    return Metric(f, math.sqrt(max(var, 0.0)), float(lo[0]), float(hi[0]), int(n))


def _f1_partials(p: float, r: float) -> tuple[float, float]:
    s = p + r
    if s <= 0:
        return 0.0, 0.0
    return 2 * r * r / (s * s), 2 * p * p / (s * s)


# -- the argument mentions (verification draws) ----------------------------------------------------
def argument_precision(d: Design, W: np.ndarray, args: sp.spmatrix, valid: np.ndarray, *,
                       rates: Mapping | None = None, confidence: float = 0.90) -> dict:
    r"""Joint importance-sampling estimate of every system's argument-mention precision :math:`P^A_i`.

    Parameters
    ----------
    d : Design
        The relation evaluation's design (draws ``d.src``, ``d.xs`` from the rows of ``d.P``).
    W : ndarray, shape (m, m)
        Its weights (``Scores.weights``).
    args : sparse matrix, shape (U, K)
        Incidence of instances (the universe of ``d.P``) and argument mentions (``K`` distinct spans):
        1 where the instance uses the mention as subject or object.
    valid : ndarray, shape (K,)
        Per argument mention, the share of answers saying it is a valid mention; NaN where it has no answer
        (allowed only for mentions no draw uses).
    rates : mapping, optional
        :func:`validity_labels`' rates when ``valid`` was corrected with them: the variance then carries the
        estimated accuracy's (:func:`rate_variance`).

    Returns
    -------
    dict
        ``p``, ``var``, ``lo``, ``hi``, ``ess`` (arrays of length m) and ``sizes`` (:math:`|A_i|`).
    """
    m, U = d.P.shape
    args = sp.csr_matrix(args, dtype=float)
    if args.shape[0] != U:
        raise InvalidInputError(f"args: expected {U} rows (one per instance of the universe), got {args.shape[0]}")
    K = args.shape[1]
    valid = np.asarray(valid, dtype=float)
    if valid.shape != (K,):
        raise InvalidInputError(f"valid: expected {K} labels (one per argument mention), got shape {valid.shape}")
    args.data[:] = 1.0
    C = (d.P @ args).tocsr()  # c_i(a) = sum_{x uses a} p_i(x)
    sizes = np.diff(C.indptr)  # |A_i|
    S = len(d.xs)
    if S == 0:
        nan = np.full(m, np.nan)
        return {"p": nan, "var": nan, "lo": nan, "hi": nan, "ess": np.zeros(m), "sizes": sizes}
    drawn = args[d.xs]  # (S, K): the argument mentions of each draw
    used = np.unique(drawn.indices)
    if np.any(np.isnan(valid[used])):
        k = int(used[np.isnan(valid[used])][0])
        raise InvalidInputError(f"valid: argument mention {k} is used by a draw but has no label")
    t = _terms(d, W)
    wimp = t.ratio * d.P[:, d.xs].toarray()  # (m, S)
    # phi_i(x_s) = sum_{a in args(x_s)} v(a) / (|A_i| c_i(a)), where c_i(a) > 0
    phi = np.zeros((m, S))
    one = np.zeros((m, S))
    dr = drawn.tocoo()
    Cd = C[:, dr.col].toarray()  # (m, nnz): c_i(a) for each (draw, argument) entry
    with np.errstate(divide="ignore", invalid="ignore"):
        base = np.where(Cd > 0, 1.0 / (np.maximum(sizes, 1)[:, None] * Cd), 0.0)
    np.add.at(phi.T, dr.row, (base * valid[dr.col][None, :]).T)
    np.add.at(one.T, dr.row, base.T)
    num, den = wimp * phi, wimp * one
    Ds = den.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(Ds > 0, num.sum(1) / Ds, np.nan)
        U_ = np.where(Ds[:, None] > 0, (num - np.nan_to_num(p)[:, None] * den) / Ds[:, None], 0.0)
    var = strata_var(U_, d)
    if rates is not None:
        var = var + rate_variance(p, rates)
    ess = np.nan_to_num(t.ess)
    lo, hi = wilson(np.nan_to_num(p), var, confidence, np.maximum(ess, 1))
    none = (sizes == 0) | ~np.isfinite(p)
    p = np.where(none, np.nan, p)
    return {"p": p, "var": np.where(none, np.nan, var), "lo": np.where(none, np.nan, lo),
            "hi": np.where(none, np.nan, hi), "ess": ess, "sizes": sizes}


# -- the labels of argument mentions ------------------------------------------------------------------
def validity_labels(items, workers, says_valid, *, n_items: int | None = None, min_gap: float = 0.2,
                    weights=None) -> tuple[np.ndarray, dict]:
    r"""Per argument mention, a label corrected for the annotators' errors (Rogan & Gladen 1978).

    Each answer on item :math:`i` says valid (:math:`y = 1`) or not.  Under the one-coin model (every answer
    right with the crowd's accuracy :math:`a`, whatever the truth), two answers on one item agree with
    probability :math:`a^2 + (1-a)^2` whatever the item's truth, so the pooled share :math:`\bar g` of agreeing
    answer pairs gives :math:`\hat a = \tfrac12\bigl(1 + \sqrt{2\bar g - 1}\bigr)` without any gold item;
    then, with :math:`\bar y_i` the item's share of "valid" answers,

    .. math:: \tilde v(i) = \frac{\bar y_i - (1 - \hat a)}{2\hat a - 1}, \qquad
              \mathbb E[\tilde v(i)] = v(i),

    so precision estimated from :math:`\tilde v` keeps no bias from the crowd's errors (a majority label is
    wrong for :math:`3(1-a)^2 a + (1-a)^3` of the items: 0.16 at accuracy 0.75).  Dawid–Skene's EM is not used:
    with three answers an item and no gold item its rates are poorly determined (measured: accuracy 0.75 fitted as
    sensitivity 0.79, false-positive rate 0.37).  Labels may leave [0, 1].  With
    :math:`2\hat a - 1 <` ``min_gap`` (a crowd near chance) the raw share is returned, ``corrected`` False.

    Returns
    -------
    labels : ndarray, shape (n_items,)
        NaN for items without answers.
    rates : dict
        ``accuracy`` (:math:`\hat a`), ``pairs`` (answer pairs behind it), ``corrected``, ``answers``.
    """
    items = np.asarray(items, dtype=np.int64)
    y = np.asarray(says_valid, dtype=float)
    if items.shape != y.shape or items.ndim != 1:
        raise InvalidInputError("items, says_valid: expected 1-d arrays of one length")
    if len(items) and (items.min() < 0):
        raise InvalidInputError("items: indices must be non-negative")
    n = int(n_items if n_items is not None else (items.max() + 1 if len(items) else 0))
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != y.shape:
        raise InvalidInputError("weights: expected one weight per answer")
    keep = w > 0
    items, y = items[keep], y[keep]
    k = np.bincount(items, minlength=n).astype(float)
    yes = np.bincount(items, weights=y, minlength=n)
    pairs = k * (k - 1) / 2
    agree = yes * (yes - 1) / 2 + (k - yes) * (k - yes - 1) / 2
    P = float(pairs.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(k > 0, yes / k, np.nan)
    if P <= 0:
        return share, {"accuracy": float("nan"), "pairs": 0, "corrected": False, "answers": int(len(y))}
    g = float(agree.sum() / P)
    acc = type_channel(agree, pairs, 2)  # the symmetric channel at K = 2: (1 + sqrt(2g - 1)) / 2
    # Var(g) over items (a ratio of item totals), then Var(a) = Var(g) / (4a - 2)^2 (delta method)
    has = pairs > 0
    z = (agree[has] - g * pairs[has]) / P
    nz = int(has.sum())
    var_g = nz / (nz - 1) * float((z * z).sum()) if nz > 1 else float("nan")
    rates = {"accuracy": acc, "pairs": int(P), "answers": int(len(y)), "items": nz,
             "accuracy_var": var_g / (4 * acc - 2) ** 2 if acc > 0.5 else float("nan")}
    if 2 * acc - 1 < min_gap:
        return share, {**rates, "corrected": False}
    return (share - (1 - acc)) / (2 * acc - 1), {**rates, "corrected": True}


def rate_variance(p, rates: Mapping) -> np.ndarray:
    r"""The variance a precision from :func:`validity_labels` owes to the estimated accuracy :math:`\hat a`.

    :math:`\hat P = (\hat S - (1-\hat a))/(2\hat a - 1)` with :math:`\hat S` the precision of the raw shares,
    so :math:`\partial\hat P/\partial\hat a = (1 - 2\hat S)/(2\hat a - 1)^2` and the term is its square times
    :math:`\widehat{\mathrm{Var}}(\hat a)` (0 when the labels were not corrected).
    """
    p = np.asarray(p, dtype=float)
    if not rates.get("corrected") or not np.isfinite(rates.get("accuracy_var", float("nan"))):
        return np.zeros_like(p)
    a = rates["accuracy"]
    S = p * (2 * a - 1) + (1 - a)
    return ((1 - 2 * S) / (2 * a - 1) ** 2) ** 2 * rates["accuracy_var"]


# -- per-document totals -------------------------------------------------------------------------------
def _best(m: Mention, gold: Sequence[Mention], match: str) -> Mention | None:
    """The gold mention ``m`` matches: the same span, or (``overlap``) the one it overlaps most (first on ties)."""
    if match == "exact":
        for g in gold:
            if g.start == m.start and g.end == m.end:
                return g
        return None
    best, size = None, 0
    for g in gold:
        ov = min(g.end, m.end) - max(g.start, m.start)
        if ov > size:
            best, size = g, ov
    return best


def _doc_totals(gold: Sequence[Mention], system: Sequence[Mention], arg_spans: set, links_known: bool,
                match: str) -> dict:
    """The :math:`(a_d, b_d)` of every ratio for one document (module table)."""
    out = {}
    found = [(s, _best(s, gold, match)) for s in system]
    valid = [(s, g) for s, g in found if g is not None]
    rev = [_best(g, system, match) for g in gold]  # the system mention matching each gold mention
    out["mention_r"] = (sum(x is not None for x in rev), len(gold))
    out["mention_p_all"] = (len(valid), len(system))
    rest = [(s, g) for s, g in found if (s.start, s.end) not in arg_spans]
    out["mention_p_rest"] = (sum(g is not None for _, g in rest), len(rest))
    typed = [(s, g) for s, g in valid if s.type]
    out["typing"] = (sum(s.type == g.type for s, g in typed), len(typed))
    if links_known:
        linked = [(s, g) for s, g in found if s.link]
        out["link_p"] = (sum(g is not None and g.link == s.link for s, g in linked), len(linked))
        out["link_r"] = (sum(x is not None and x.link == g.link for g, x in zip(gold, rev) if g.link),
                         sum(1 for g in gold if g.link))
    # B-cubed over the system mentions matched to gold NIL mentions
    nil = [(s, g) for s, g in valid if not g.link]
    gsets: dict = defaultdict(set)
    ssets: dict = defaultdict(set)
    for k, (s, g) in enumerate(nil):
        gsets[id(g) if g.cluster is None else g.cluster].add(k)
        ssets[s.cluster].add(k)
    bp = br = 0.0
    for k, (s, g) in enumerate(nil):
        G, S = gsets[id(g) if g.cluster is None else g.cluster], ssets[s.cluster]
        both = len(G & S)
        bp += both / len(S)
        br += both / len(G)
    out["nil_b3_p"] = (bp, len(nil))
    out["nil_b3_r"] = (br, len(nil))
    return out



# -- per-document terms from the crowd's answers (module docs, "Labels from the answers") -------------------
@dataclass
class _AnswerDoc:
    """What a document's answers say, computed once: per layer mention the answers' mention matching it, and
    per pair of layer mentions the answers putting them together among those marking both."""

    k: int
    marks: list        # per layer mention: {answer index: the answer's mention}
    pair_x: np.ndarray  # (L, L) answers putting both in one cluster
    pair_k: np.ndarray  # (L, L) answers marking both
    spans: list = field(default_factory=list)  # every span some answer marked: the layer's, then the others
    span_x: np.ndarray = field(default_factory=lambda: np.zeros(0))  # answers marking each
    span_link: list = field(default_factory=list)  # the plurality link of the answers marking it ('' for none)


def _plurality_link(marks) -> str:
    """The link most of ``marks`` (answers' mentions) give, '' for none; ties: the first in alphabetical order."""
    votes = Counter(a.link or "" for a in marks)
    return min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _marked_spans(d: ExhaustiveDocument, marks: list, match: str) -> tuple[list, np.ndarray, list]:
    """Every span some answer marked (recall's items): the layer's mentions with their answers, then the answers'
    mentions that match none of them, grouped (an answer's mention joins the first group it matches): the spans,
    the answers marking each, and each one's link (the layer's; the others' plurality link)."""
    extra: list = []    # a representative mention per group of the answers' other mentions
    by: list = []       # per group: answer index -> that answer's mention
    for j, ans in enumerate(d.answers):
        for a in ans:
            if _best(a, d.mentions, match) is not None:
                continue
            e = _best(a, extra, match)
            at = len(extra) if e is None else next(i for i, m in enumerate(extra) if m is e)
            if e is None:
                extra.append(a)
                by.append({})
            by[at].setdefault(j, a)
    x = [len(mk) for mk in marks] + [len(b) for b in by]
    links = [g.link or "" for g in d.mentions] + [_plurality_link(b.values()) for b in by]
    return list(d.mentions) + extra, np.array(x, dtype=float), links


def _answer_doc(d: ExhaustiveDocument, match: str) -> _AnswerDoc:
    L = len(d.mentions)
    marks = [{j: a for j, ans in enumerate(d.answers) if (a := _best(g, ans, match)) is not None}
             for g in d.mentions]
    px = np.zeros((L, L))
    pk = np.zeros((L, L))
    for x in range(L):
        for y in range(x + 1, L):
            both = marks[x].keys() & marks[y].keys()
            pk[x, y] = pk[y, x] = len(both)
            px[x, y] = px[y, x] = sum(marks[x][j] is marks[y][j] or marks[x][j].cluster == marks[y][j].cluster
                                      for j in both)
    return _AnswerDoc(len(d.answers), marks, px, pk, *(_marked_spans(d, marks, match) if d.answers else
                                                      ([], np.zeros(0), [])))


def _items(d: ExhaustiveDocument, ad: _AnswerDoc, candidates: Sequence[Mention], match: str):
    """The document's items for :func:`~.crowd_channels.fit_rates`: the candidate (system) spans' marks, the layer
    mentions' type agreement, the layer pairs' clustering."""
    if not ad.k:
        return DocumentItems()
    seen: dict = {}
    for c in candidates:
        seen.setdefault((c.start, c.end), c)
    mx = [sum(_best(c, ans, match) is not None for ans in d.answers) for c in seen.values()]
    agree, pairs = [], []
    for mk in ad.marks:
        types = [a.type for a in mk.values()]
        n = len(types)
        counts: dict = defaultdict(int)
        for t in types:
            counts[t] += 1
        agree.append(sum(c * (c - 1) // 2 for c in counts.values()))
        pairs.append(n * (n - 1) // 2)
    iu = np.triu_indices(len(d.mentions), 1)
    k = ad.pair_k[iu]
    has = k > 0
    return DocumentItems(mx, [ad.k] * len(mx), agree, pairs, ad.pair_x[iu][has].astype(int), k[has].astype(int))


@dataclass
class _SysDoc:
    """One system's mentions in one document, as arrays the labels are computed from for any rates."""

    layer: dict         # key -> (a, b) that do not depend on the rates
    yv: np.ndarray      # share of the answers marking each system mention (NaN: no answers)
    lv: np.ndarray      # the layer's validity
    rest: np.ndarray    # outside the system's relations
    typed: np.ndarray   # typed and valid in the layer
    yt: np.ndarray      # share of the answers marking it that give the system's type (NaN: none marks it)
    lt: np.ndarray      # the layer's type is the system's
    oos: np.ndarray     # the system's type is outside the schema: never right
    linked: np.ndarray  # the system links it
    ll: np.ndarray      # the answers' plurality link (among those marking it) is the system's
    lay_link: np.ndarray  # the layer's link is the system's
    nil_g: np.ndarray   # per NIL mention found: its layer mention
    nil_s: list         # and its system entity
    lay_same: np.ndarray  # (n, n) the layer's clusters agree
    px: np.ndarray      # (n, n) answers putting the two together
    pk: np.ndarray      # (n, n) answers marking both
    k: int = 0          # the document's answers
    span_x: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per marked span: answers marking it
    span_found: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # the system has it
    span_linked: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # the answers link it
    span_link_ok: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # and the system the same


def _sys_doc(d: ExhaustiveDocument, ad: _AnswerDoc, system: Sequence[Mention], arg_spans: set, links_known: bool,
             match: str, types) -> _SysDoc:
    gold = d.mentions
    index = {id(g): x for x, g in enumerate(gold)}
    found = [(s, _best(s, gold, match)) for s in system]
    n = len(found)
    layer = {}
    rev = [_best(g, system, match) for g in gold]
    layer["mention_r"] = (sum(x is not None for x in rev), len(gold))
    if links_known:
        layer["link_r"] = (sum(x is not None and x.link == g.link for g, x in zip(gold, rev) if g.link),
                           sum(1 for g in gold if g.link))
    yv = np.full(n, np.nan)
    yt = np.full(n, np.nan)
    ll = np.zeros(n, dtype=bool)
    for x, (s, _) in enumerate(found):
        if not ad.k:
            continue
        ms = [a for ans in d.answers if (a := _best(s, ans, match)) is not None]
        yv[x] = len(ms) / ad.k
        if ms:
            if s.type:
                yt[x] = sum(a.type == s.type for a in ms) / len(ms)
            ll[x] = bool(s.link) and _plurality_link(ms) == s.link
    lv = np.array([g is not None for _, g in found], dtype=bool)
    hits = [_best(m, system, match) for m in ad.spans]  # the system mention matching each marked span
    nil = [(s, g) for s, g in found if g is not None and not g.link]
    gi = np.array([index[id(g)] for _, g in nil], dtype=np.int64)
    key = [id(g) if g.cluster is None else g.cluster for _, g in nil]
    same = np.array([[a == b for b in key] for a in key], dtype=bool).reshape(len(nil), len(nil))
    return _SysDoc(
        layer, yv, lv, np.array([(s.start, s.end) not in arg_spans for s, _ in found], dtype=bool),
        np.array([bool(s.type) and g is not None for s, g in found], dtype=bool), yt,
        np.array([g is not None and s.type == g.type for s, g in found], dtype=bool),
        np.array([types is not None and bool(s.type) and s.type not in types for s, _ in found], dtype=bool),
        np.array([bool(s.link) for s, _ in found], dtype=bool), ll,
        np.array([g is not None and g.link == s.link for s, g in found], dtype=bool),
        gi, [s.cluster for s, _ in nil], same,
        ad.pair_x[np.ix_(gi, gi)] if ad.k else np.zeros((len(nil), len(nil))),
        ad.pair_k[np.ix_(gi, gi)] if ad.k else np.zeros((len(nil), len(nil))),
        ad.k, ad.span_x, np.array([h is not None for h in hits], dtype=bool),
        np.array([bool(lk) for lk in ad.span_link], dtype=bool),
        np.array([bool(lk) and h is not None and h.link == lk for h, lk in zip(hits, ad.span_link)], dtype=bool))


def span_weights(x, k: int, s1: float, s0: float) -> np.ndarray:
    r"""Recall's weight of each span marked by :math:`x \ge 1` of :math:`k` answers (module docs): the
    Rogan–Gladen label of the marking channel *given that the span was marked at all*,

    .. math:: \omega(x) = \frac{x/k - m(s_0)}{m(s_1) - m(s_0)} \Big/ \left(1 - (1-s_1)^k\right), \qquad
              m(s) = \mathbb E[X/k \mid X \ge 1] = \frac{s}{1 - (1-s)^k},

    so that :math:`\mathbb E[\omega(X)\,\mathbb 1[X \ge 1] \mid T] = T`: a sum over the marked spans is
    unbiased for the number of true mentions, whichever non-mentions the answers marked (a span nobody marked
    weighs 0, as its expectation :math:`\omega(0)` would weigh an unbounded set of spans).

    >>> np.round(span_weights([1, 2, 3], 3, 0.9, 0.0), 3)  # no false marks: a lone mark says nothing
    array([0.   , 0.588, 1.176])
    >>> np.round(span_weights([1, 2, 3], 3, 0.9, 0.08), 3)  # a lone mark is more likely a false one
    array([-0.052,  0.566,  1.185])
    """
    x = np.asarray(x, dtype=float)
    if k < 2:
        raise InvalidInputError(f"k: one answer cannot tell a mention from a false mark (got k = {k})")

    def marked(s: float) -> float:  # 1 - (1 - s)^k, exact for tiny s
        return -math.expm1(k * math.log1p(-s)) if s < 1 else 1.0

    def m(s: float) -> float:
        return s / marked(s) if s > 1e-12 else 1.0 / k

    return (x / k - m(s0)) / (m(s1) - m(s0)) / marked(s1)


def _sys_doc_totals(sd: _SysDoc, theta: np.ndarray, corrected: Mapping, n_types: int) -> dict:
    """The :math:`(a_d, b_d)` of every ratio for one system and document with the labels of rates ``theta``."""
    out = dict(sd.layer)
    has = ~np.isnan(sd.yv)
    if corrected.get("mark") and has.any():
        s1, s0 = theta[0], theta[1]
        v = np.where(has, (np.nan_to_num(sd.yv) - s0) / (s1 - s0), sd.lv)
        lk = np.where(has, v * sd.ll, sd.lay_link)
    else:
        v = sd.lv.astype(float)
        lk = sd.lay_link.astype(float)
    out["mention_p_all"] = (float(v.sum()), len(v))
    out["mention_p_rest"] = (float(v[sd.rest].sum()), int(sd.rest.sum()))
    if corrected.get("mark") and sd.k >= 2 and len(sd.span_x):  # one answer cannot weigh its marks
        w = span_weights(sd.span_x, sd.k, theta[0], theta[1])
        out["mention_r"] = (float(w[sd.span_found].sum()), float(w.sum()))
        if "link_r" in out:
            out["link_r"] = (float(w[sd.span_link_ok].sum()), float(w[sd.span_linked].sum()))
    if corrected.get("type"):
        c = theta[2]
        e = (1 - c) / (n_types - 1)
        t = np.where(np.isnan(sd.yt), sd.lt, (np.nan_to_num(sd.yt) - e) / (c - e))
    else:
        t = sd.lt.astype(float)
    t = np.where(sd.oos, 0.0, t)
    out["typing"] = (float(t[sd.typed].sum()), int(sd.typed.sum()))
    if "link_r" in out:
        out["link_p"] = (float(lk[sd.linked].sum()), int(sd.linked.sum()))
    n = len(sd.nil_g)
    if corrected.get("pair") and n:
        f1, f0 = theta[3], theta[4]
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.where(sd.pk > 0, (sd.px / np.maximum(sd.pk, 1) - f0) / (f1 - f0), sd.lay_same)
        rho[sd.nil_g[:, None] == sd.nil_g[None, :]] = 1.0  # one layer mention
    else:
        rho = sd.lay_same.astype(float)
    sys_same = np.array([[a == b for b in sd.nil_s] for a in sd.nil_s], dtype=bool).reshape(n, n)
    size_s = sys_same.sum(1)
    num = (rho * sys_same).sum(1)
    bp = float((num / np.maximum(size_s, 1)).sum())
    # recall's denominator |G(m)| is itself estimated: a ratio per mention (module docs: not exactly unbiased)
    den = np.maximum(rho.sum(1), np.maximum(num, 1e-12))
    br = float(np.clip(num / den, 0.0, 1.0).sum()) if n else 0.0
    out["nil_b3_p"] = (bp, n)
    out["nil_b3_r"] = (br, n)
    return out


MATCHES = ("overlap", "exact")


def _b3_counts(cells: Mapping) -> tuple[float, float, int]:
    r"""B-cubed P and R from the contingency counts ``(system cluster, gold cluster) -> c``:
    :math:`P = \frac1n\sum_{s,g} c_{sg}^2/c_s`, :math:`R = \frac1n\sum_{s,g} c_{sg}^2/c_g`."""
    cs: dict = defaultdict(int)
    cg: dict = defaultdict(int)
    n = 0
    for (a, b), c in cells.items():
        cs[a] += c
        cg[b] += c
        n += c
    if n == 0:
        return float("nan"), float("nan"), 0
    p = sum(c * c / cs[a] for (a, b), c in cells.items() if c) / n
    r = sum(c * c / cg[b] for (a, b), c in cells.items() if c) / n
    return p, r, n


def cross_document_b3(per_doc: Sequence[Sequence[tuple]]) -> dict:
    r"""B-cubed of the NIL mentions of all exhaustive documents together, gold clusters across documents.

    ``per_doc``: per document, ``(system entity, gold cross-document entity)`` of each gold NIL mention the system
    found.  The figure is over the exhaustive documents' NIL mentions (a system entity and a gold entity both span
    documents, so it is not a sum over documents); its variance is the delete-one-document jackknife
    :math:`\frac{N-1}{N}\sum_d (\hat\theta_{(d)} - \bar\theta)^2` (Efron & Stein 1981).

    Returns ``{'p': (value, var), 'r': ..., 'f1': ..., 'n': mentions}``.

    >>> out = cross_document_b3([[("e1", "g")], [("e1", "g")], [("e2", "g")]])
    >>> round(out["p"][0], 3), round(out["r"][0], 3)
    (1.0, 0.556)
    """
    cells: dict = defaultdict(int)
    docs = []
    for rows in per_doc:
        mine: dict = defaultdict(int)
        for a, b in rows:
            mine[(a, b)] += 1
            cells[(a, b)] += 1
        docs.append(mine)
    p, r, n = _b3_counts(cells)

    def f1(x, y):
        return 2 * x * y / (x + y) if x + y > 0 else 0.0

    out = {"n": n}
    full = {"p": p, "r": r, "f1": f1(p, r) if n else float("nan")}
    N = len(docs)
    reps = {"p": [], "r": [], "f1": []}
    if n and N >= 2:
        for mine in docs:
            less = {k: c - mine.get(k, 0) for k, c in cells.items()}
            pp, rr, nn = _b3_counts(less)
            if nn == 0:
                pp = rr = float("nan")
            reps["p"].append(pp)
            reps["r"].append(rr)
            reps["f1"].append(f1(pp, rr) if nn else float("nan"))
    for k in ("p", "r", "f1"):
        v = np.array([x for x in reps[k] if not math.isnan(x)])
        var = (len(v) - 1) / len(v) * float(((v - v.mean()) ** 2).sum()) if len(v) >= 2 else float("nan")
        out[k] = (full[k], var)
    return out


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


def entity_scores(docs: Sequence[ExhaustiveDocument], systems: Sequence[Mapping], *, mention_counts=None,
                  argument_spans=None, arguments: Mapping | None = None, match: str = "overlap",
                  nil_identity: Mapping | None = None, confidence: float = 0.90,
                  types=None) -> list[EntityScores]:
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
        How a system mention matches a mention of the layer (module docs).
    nil_identity : mapping, optional
        ``(doc id, layer cluster) -> cross-document entity`` of the unlinked clusters (the aggregated clustering
        task).  With it the NIL B-cubed figures are across documents (:func:`cross_document_b3`); without, within
        each document.
    confidence : float
        Level of the intervals.
    types : collection of str, optional
        The entity types of the schema (:math:`K` of the typing channel; a system type outside them is never
        right).  Default: the types the answers and the layer use.  Read only when documents carry answers.

    Returns
    -------
    list of EntityScores
    """
    _entity_scores_iv(docs, systems, arguments, confidence, match)
    m = len(systems)
    pi = np.array([d.inclusion for d in docs], dtype=float)
    tf = t_factor(len(docs), confidence)
    links_known = any(g.link for d in docs for g in d.mentions)
    rates = None
    if any(d.answers for d in docs):
        tset = frozenset(types) if types is not None else None
        K = len(tset) if tset is not None else len({a.type for d in docs for ans in d.answers for a in ans if a.type}
                                                   | {g.type for d in docs for g in d.mentions if g.type})
        K = max(K, 2)
        ads = [_answer_doc(d, match) for d in docs]
        rates = fit_rates([_items(d, ad, [s for sm in systems for s in sm.get(d.doc, ())], match)
                           for d, ad in zip(docs, ads)], K)
        channel = {"s1": "mark", "s0": "mark", "c": "type", "f1": "pair", "f0": "pair"}
        free = [p for p, name in enumerate(PARAMS) if rates.corrected[channel[name]]]
    out = []
    for i in range(m):
        args_i = argument_spans[i] if argument_spans is not None else {}
        notes: list[str] = []
        ratios: dict[str, tuple] = {}
        if rates is None:
            totals: dict[str, list] = defaultdict(list)
            for d in docs:
                got = _doc_totals(d.mentions, systems[i].get(d.doc, ()), set(args_i.get(d.doc, ())), links_known,
                                  match)
                for k, v in got.items():
                    totals[k].append(v)
            for k, ab in totals.items():
                a = np.array([x for x, _ in ab], dtype=float)
                b = np.array([y for _, y in ab], dtype=float)
                ratios[k] = (*document_ratio(a, b, pi), int(b.sum()))
        else:
            sds = [_sys_doc(d, ad, systems[i].get(d.doc, ()), set(args_i.get(d.doc, ())), links_known, match, tset)
                   for d, ad in zip(docs, ads)]
            ratios = _corrected_ratios(sds, rates, free, K, pi)
            if free:
                what = {"mark": "mention validity", "type": "types", "pair": "clusters"}
                done = [w for c, w in what.items() if rates.corrected[c]]
                left = [w for c, w in what.items() if not rates.corrected[c]]
                notes.append("the exhaustive documents' labels are corrected for the crowd's errors, estimated "
                             f"from the agreement of its answers: {', '.join(done)}"
                             + (f"; {', '.join(left)} from the aggregated layer (rates not identified)" if left else ""))
        metrics: dict[str, Metric] = {}
        nodocs = "no exhaustively annotated document yet"

        def ratio_metric(key: str, reason: str) -> Metric:
            if not docs:
                return Metric.undefined(nodocs)
            est, var, _, _, n = ratios[key]
            return _metric(est, var * tf, n, confidence, reason)

        # mention recall
        metrics["mention_r"] = ratio_metric("mention_r", "the exhaustive documents have no mention")
        # mention precision: stratified (argument mentions from the draws, the rest from the documents)
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
                metrics["mention_p"] = Metric.undefined("no verified draw of this submission yet")
            elif alpha < 1 and math.isnan(est_r):
                # the rest has no sample: bound it by [0, 1]
                if A == 0:
                    metrics["mention_p"] = Metric.undefined(nodocs if not docs else
                                                            "no mention of this submission in the exhaustive documents")
                else:
                    lo_a, hi_a = _interval(pa, va, max(n_draws, 1), confidence)
                    metrics["mention_p"] = Metric(float("nan"), float("nan"), alpha * lo_a, alpha * hi_a + (1 - alpha),
                                                  n_draws, "only bounds: the mentions outside relations have no "
                                                  "exhaustively annotated sample")
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
                metrics["mention_p"] = _metric(est, var, n, confidence, "")
        else:
            metrics["mention_p"] = ratio_metric("mention_p_all", "no mention of this submission in the exhaustive "
                                                                 "documents")
        # F1: the argument part is independent of the documents; the document parts share them
        p, r = metrics["mention_p"], metrics["mention_r"]
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
            metrics["mention_f1"] = _f1_metric(p, r, var_f, min(p.n or 1, r.n or 1), confidence, "")
        else:
            metrics["mention_f1"] = Metric.undefined(p.reason or r.reason)
        metrics["typing"] = ratio_metric("typing", "no typed valid mention of this submission in the exhaustive "
                                                   "documents (a submission without entity types is not scored)")
        if not docs:
            for k in ("link_p", "link_r"):
                metrics[k] = Metric.undefined(nodocs)
        elif not links_known:
            why = "the exhaustive annotation has no KB links (the corpus's gold layer has none): linking cannot be scored"
            metrics["link_p"] = Metric.undefined(why)
            metrics["link_r"] = Metric.undefined(why)
        else:
            metrics["link_p"] = ratio_metric("link_p", "the submission links no mention of the exhaustive documents")
            metrics["link_r"] = ratio_metric("link_r", "the exhaustive documents have no linked mention")
        metrics["link_f1"] = _pair_f1(metrics["link_p"], metrics["link_r"], ratios.get("link_p"),
                                      ratios.get("link_r"), confidence, tf)
        if nil_identity:
            per_doc = []
            for d in docs:
                rows = []
                for sm in systems[i].get(d.doc, ()):
                    g = _best(sm, d.mentions, match)
                    if g is not None and not g.link:
                        rows.append((sm.cluster, nil_identity.get((d.doc, g.cluster), ("doc", d.doc, g.cluster))))
                per_doc.append(rows)
            xb = cross_document_b3(per_doc)
            why = "the submission found no unlinked (NIL) gold mention"
            for k in ("p", "r"):
                val, var = xb[k]
                metrics[f"nil_b3_{k}"] = (_metric(val, var * tf, xb["n"], confidence, why) if xb["n"]
                                          else Metric.undefined(why))
            metrics["nil_b3_f1"] = _f1_metric(metrics["nil_b3_p"], metrics["nil_b3_r"], xb["f1"][1] * tf, xb["n"],
                                              confidence, why)
            notes.append("NIL clustering: B-cubed across documents, the unlinked entities grouped by the "
                         "cross-document clustering task")
        else:
            metrics["nil_b3_p"] = ratio_metric("nil_b3_p", "the submission found no unlinked (NIL) gold mention")
            metrics["nil_b3_r"] = ratio_metric("nil_b3_r", "the submission found no unlinked (NIL) gold mention")
            metrics["nil_b3_f1"] = _pair_f1(metrics["nil_b3_p"], metrics["nil_b3_r"], ratios.get("nil_b3_p"),
                                            ratios.get("nil_b3_r"), confidence, tf)
        out.append(EntityScores(metrics, len(docs), alpha, n_draws, notes, parts,
                                rates.to_dict() if rates is not None else {}))
    return out


def _corrected_ratios(sds: Sequence[_SysDoc], rates, free: Sequence[int], n_types: int, pi: np.ndarray) -> dict:
    r"""The document ratios with labels from the answers, their linearised values carrying the rates' error:
    :math:`u_d = z_d + \frac{N-1}{N}\,\nabla_\theta\hat R\cdot\Delta_d` (module docs)."""
    def ratios_at(theta):
        totals: dict[str, list] = defaultdict(list)
        for sd in sds:
            for k, v in _sys_doc_totals(sd, theta, rates.corrected, n_types).items():
                totals[k].append(v)
        return totals

    totals = ratios_at(rates.theta)
    N = len(sds)
    grads = {k: np.zeros(len(rates.theta)) for k in totals}
    if free and N >= 2:
        for p in free:
            h = 1e-6
            th = rates.theta.copy()
            th[p] += h
            moved = ratios_at(th)
            for k, ab in moved.items():
                a = np.array([x for x, _ in ab], dtype=float)
                b = np.array([y for _, y in ab], dtype=float)
                a0 = np.array([x for x, _ in totals[k]], dtype=float)
                B = float((b / pi).sum())
                if B > 0:
                    grads[k][p] = float(((a - a0) / pi).sum() / B) / h
    out = {}
    for k, ab in totals.items():
        a = np.array([x for x, _ in ab], dtype=float)
        b = np.array([y for _, y in ab], dtype=float)
        est, var, z, B = document_ratio(a, b, pi)
        if not math.isnan(est) and N >= 2 and np.any(grads[k]):
            u = z + (N - 1) / N * (rates.delta @ grads[k])
            z, var = u, float(theta_variance(u[None, :])[0])
        out[k] = (est, var, z, B, int(b.sum()))
    return out


def _pair_f1(p: Metric, r: Metric, rp, rr, confidence: float, tf: float = 1.0) -> Metric:
    """F1 of two document ratios (they share the documents: the delta method on their joint z)."""
    if not (p.defined and r.defined):
        return Metric.undefined(p.reason or r.reason)
    dP, dR = _f1_partials(p.value, r.value)
    zf = dP * rp[2] + dR * rr[2]
    var = float(theta_variance(np.atleast_2d(zf))[0]) * tf if len(zf) >= 2 else 0.0
    return _f1_metric(p, r, var, min(p.n or 1, r.n or 1), confidence, "")


__all__ = ["ExhaustiveDocument", "EntityScores", "LABELS", "METRICS", "Mention", "Metric", "argument_precision",
           "MATCHES", "cross_document_b3", "t_factor", "document_ratio", "entity_scores", "rate_variance", "validity_labels"]
