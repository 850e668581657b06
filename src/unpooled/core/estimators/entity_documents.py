r"""The exhaustive documents and the per-document totals of the entity ratios: matching, the aggregated layer's
labels and the labels corrected from the crowd's answers (:mod:`.entities` puts them together).

**Matching.**  A system mention is *valid* when its span overlaps a mention of the exhaustive layer
(``match='overlap'``, as relation instances are matched; it then stands for the mention it overlaps most) or
equals one (``'exact'``); the annotators' "valid mention" answers judge the same thing on the draws.  A gold
mention is *found* when a system mention matches it.

**Per-document totals.**  Every metric but the argument mentions' precision is a ratio
:math:`\sum_d a_d/\pi_d \,/\, \sum_d b_d/\pi_d` over the exhaustive documents
(:func:`~.entity_metrics.document_ratio`), with per document :math:`d`:

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

References
----------
W. J. Rogan, B. Gladen. Estimating prevalence from the results of a screening test. Am. J. Epidemiol. 107, 1978.
A. Bagga, B. Baldwin. Algorithms for scoring coreference chains. LREC 1998 workshop.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import InvalidInputError
from .crowd_channels import DocumentItems
from .entity_metrics import document_ratio
from .exhaustive import theta_variance

MATCHES = ("overlap", "exact")


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


def _best_of(ms: Sequence[Mention], gold: Sequence[Mention], match: str) -> np.ndarray:
    """Per mention of ``ms``, the index in ``gold`` of the mention :func:`_best` gives it (-1: none), all at once:
    the largest overlap, the first of equal ones (``argmax``), or the first with the same span."""
    if not len(ms) or not len(gold):
        return np.full(len(ms), -1, dtype=np.int64)
    a = np.array([(m.start, m.end) for m in ms], dtype=np.int64)
    b = np.array([(g.start, g.end) for g in gold], dtype=np.int64)
    if match == "exact":
        ov = (a[:, :1] == b[None, :, 0]) & (a[:, 1:] == b[None, :, 1])
    else:
        ov = np.minimum(a[:, 1:], b[None, :, 1]) - np.maximum(a[:, :1], b[None, :, 0])
    k = ov.argmax(1)
    return np.where(ov[np.arange(len(ms)), k] > 0, k, -1)


def _matched(ms: Sequence[Mention], gold: Sequence[Mention], match: str) -> list:
    """:func:`_best` of every mention of ``ms`` (:func:`_best_of`)."""
    return [gold[k] if k >= 0 else None for k in _best_of(ms, gold, match).tolist()]


def _doc_totals(gold: Sequence[Mention], system: Sequence[Mention], arg_spans: set, links_known: bool,
                match: str) -> dict:
    """The :math:`(a_d, b_d)` of every ratio for one document (module table)."""
    out = {}
    found = list(zip(system, _matched(system, gold, match)))
    valid = [(s, g) for s, g in found if g is not None]
    rev = _matched(gold, system, match)  # the system mention matching each gold mention
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


def _layer_ratios(docs: Sequence[ExhaustiveDocument], system: Mapping, arg_spans: Mapping, links_known: bool,
                  match: str, pi: np.ndarray) -> dict:
    """The document ratios with the aggregated layer's labels (:func:`_doc_totals`):
    ``key -> (estimate, variance, z, B, n)``."""
    totals: dict[str, list] = defaultdict(list)
    for d in docs:
        got = _doc_totals(d.mentions, system.get(d.doc, ()), set(arg_spans.get(d.doc, ())), links_known, match)
        for k, v in got.items():
            totals[k].append(v)
    ratios: dict[str, tuple] = {}
    for k, ab in totals.items():
        a = np.array([x for x, _ in ab], dtype=float)
        b = np.array([y for _, y in ab], dtype=float)
        ratios[k] = (*document_ratio(a, b, pi), int(b.sum()))
    return ratios



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
        for a, g in zip(ans, _best_of(ans, d.mentions, match).tolist()):
            if g >= 0:
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
    marks: list = [{} for _ in range(L)]
    for j, ans in enumerate(d.answers):
        for x, a in enumerate(_matched(d.mentions, ans, match)):
            if a is not None:
                marks[x][j] = a
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


def _items(ad: _AnswerDoc, mx: np.ndarray) -> DocumentItems:
    """The document's items for :func:`~.crowd_channels.fit_rates`: the candidate (system) spans' marks (``mx``: the
    answers marking each distinct span of the systems, :attr:`_SysDoc.marks`), the layer mentions' type agreement,
    the layer pairs' clustering."""
    if not ad.k:
        return DocumentItems()
    agree, pairs = [], []
    for mk in ad.marks:
        types = [a.type for a in mk.values()]
        n = len(types)
        counts: dict = defaultdict(int)
        for t in types:
            counts[t] += 1
        agree.append(sum(c * (c - 1) // 2 for c in counts.values()))
        pairs.append(n * (n - 1) // 2)
    iu = np.triu_indices(len(ad.marks), 1)
    k = ad.pair_k[iu]
    has = k > 0
    return DocumentItems(mx, np.full(len(mx), ad.k), agree, pairs, ad.pair_x[iu][has].astype(int), k[has].astype(int))


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
    k: int = 0          # the document's answers
    span_x: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per marked span: answers marking it
    span_found: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # the system has it
    span_linked: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # the answers link it
    span_link_ok: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # and the system the same
    marks: dict = field(default_factory=dict)  # (start, end) of each of its spans -> the answers marking it


def _sys_doc(d: ExhaustiveDocument, ad: _AnswerDoc, system: Sequence[Mention], arg_spans: set, links_known: bool,
             match: str, types) -> _SysDoc:
    gold = d.mentions
    index = {id(g): x for x, g in enumerate(gold)}
    found = list(zip(system, _matched(system, gold, match)))
    n = len(found)
    layer = {}
    rev = _matched(gold, system, match)
    layer["mention_r"] = (sum(x is not None for x in rev), len(gold))
    if links_known:
        layer["link_r"] = (sum(x is not None and x.link == g.link for g, x in zip(gold, rev) if g.link),
                           sum(1 for g in gold if g.link))
    yv = np.full(n, np.nan)
    yt = np.full(n, np.nan)
    ll = np.zeros(n, dtype=bool)
    marks: dict = {}
    by_answer = [_matched(system, ans, match) for ans in d.answers] if ad.k else []
    for x, (s, _) in enumerate(found):
        if not ad.k:
            continue
        ms = [a for got in by_answer if (a := got[x]) is not None]
        yv[x] = len(ms) / ad.k
        marks.setdefault((s.start, s.end), len(ms))
        if ms:
            if s.type:
                yt[x] = sum(a.type == s.type for a in ms) / len(ms)
            ll[x] = bool(s.link) and _plurality_link(ms) == s.link
    lv = np.array([g is not None for _, g in found], dtype=bool)
    hits = _matched(ad.spans, system, match)  # the system mention matching each marked span
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
        ad.k, ad.span_x, np.array([h is not None for h in hits], dtype=bool),
        np.array([bool(lk) for lk in ad.span_link], dtype=bool),
        np.array([bool(lk) and h is not None and h.link == lk for h, lk in zip(hits, ad.span_link)], dtype=bool),
        marks)


def span_weights(x, k, s1: float, s0: float, n=1) -> np.ndarray:
    r"""Recall's weight of each span marked by :math:`x \ge 1` of :math:`k` answers (module docs): the
    Rogan–Gladen label of the marking channel *given that the span was marked at all*,

    .. math:: \omega(x) = \frac{x/k - m(s_0)}{m(s_1) - m(s_0)} \Big/ \left(1 - (1-s_1)^k\right), \qquad
              m(s) = \mathbb E[X/k \mid X \ge 1] = \frac{s}{1 - (1-s)^k},

    so that :math:`\mathbb E[\omega(X)\,\mathbb 1[X \ge 1] \mid T] = T`: a sum over the marked spans is
    unbiased for the number of true mentions, whichever non-mentions the answers marked (a span nobody marked
    weighs 0, as its expectation :math:`\omega(0)` would weigh an unbounded set of spans).  :math:`\omega` is
    affine in :math:`x`: with ``n`` spans and ``x`` the answers marking them in all, the sum of their weights
    (``k`` may then be an array, one per document).

    >>> np.round(span_weights([1, 2, 3], 3, 0.9, 0.0), 3)  # no false marks: a lone mark says nothing
    array([0.   , 0.588, 1.176])
    >>> np.round(span_weights([1, 2, 3], 3, 0.9, 0.08), 3)  # a lone mark is more likely a false one
    array([-0.052,  0.566,  1.185])
    >>> float(np.round(span_weights(6, 3, 0.9, 0.08, n=3), 3))  # the three spans' sum
    1.699
    """
    x = np.asarray(x, dtype=float)
    k = np.asarray(k, dtype=float)
    if np.any(k < 2):
        raise InvalidInputError(f"k: one answer cannot tell a mention from a false mark (got k = {k})")

    def marked(s: float):  # 1 - (1 - s)^k, exact for tiny s
        return -np.expm1(k * math.log1p(-s)) if s < 1 else 1.0

    def m(s: float):
        return s / marked(s) if s > 1e-12 else 1.0 / k

    return (x / k - n * m(s0)) / (m(s1) - m(s0)) / marked(s1)


def _label_sum(y, lo: float, hi: float, n=1):
    r"""The Rogan–Gladen label :math:`(y - lo)/(hi - lo)` of an answers' share ``y`` (module docs); affine in
    :math:`y`: with ``n`` items and ``y`` the sum of their shares, the sum of their labels."""
    return (y - n * lo) / (hi - lo)


#: the sums over one system's mentions (and the marked spans) in each document that its labels are computed from
#: (:class:`_SysStats`): ``n`` items, ``y`` the answers' shares, ``l`` the layer's labels, ``x`` the marks
_SUMS = ("n", "y", "l", "n_rest", "y_rest", "l_rest", "n_linked", "n_link", "y_link", "l_link",
         "n_typed", "n_type", "y_type", "l_type", "l_typed",
         "n_span", "x_span", "n_found", "x_found", "n_slinked", "x_slinked", "n_slink_ok", "x_slink_ok")
#: the rates' channel of each parameter of :attr:`~.crowd_channels.Rates.theta`, and the ratios each one moves
CHANNEL = ("mark", "mark", "type", "pair", "pair")
_KEYS = {"mark": ("mention_r", "link_r", "mention_p_all", "mention_p_rest", "link_p"), "type": ("typing",),
         "pair": ("nil_b3_p", "nil_b3_r")}


@dataclass
class _SysStats:
    """One system's documents (:class:`_SysDoc`) as sums over its mentions and over the marked spans, arrays over
    the documents: every label but the clusters' is affine in its answers' share, so the sum of a document's labels
    is the label of the sums (:func:`_label_sum`, :func:`span_weights`) and new rates cost a few array operations
    (:func:`_totals`).  The clusters' labels are kept per document, their totals by the rates they were computed
    with (a few)."""

    k: np.ndarray       # the documents' answers
    s: dict             # name (_SUMS) -> per document
    layer: dict         # key -> (a, b) per document, from the aggregated layer (mention and link recall)
    nil: list           # per document: (layer mention of each NIL mention found, same system entity, same layer
    #                     cluster, what the answers say: _AnswerDoc)
    memo: dict = field(default_factory=dict)  # the clusters' totals by (corrected, f1, f0)


def _sys_stats(sds: Sequence[_SysDoc], ads: Sequence[_AnswerDoc]) -> _SysStats:
    """:class:`_SysStats` of one system's documents (``ads``: what their answers say)."""
    rows = []
    for sd in sds:
        y, yt, sx = np.nan_to_num(sd.yv), np.nan_to_num(sd.yt), sd.span_x
        lk = sd.linked & sd.ll
        t_in = sd.typed & ~sd.oos
        ht = t_in & ~np.isnan(sd.yt)
        fs, ls, ok = sd.span_found, sd.span_linked, sd.span_link_ok
        rows.append((len(y), y.sum(), sd.lv.sum(), sd.rest.sum(), y[sd.rest].sum(), sd.lv[sd.rest].sum(),
                     sd.linked.sum(), lk.sum(), y[lk].sum(), sd.lay_link[sd.linked].sum(),
                     sd.typed.sum(), ht.sum(), yt[ht].sum(), sd.lt[t_in & ~ht].sum(), sd.lt[t_in].sum(),
                     len(sx), sx.sum(), fs.sum(), sx[fs].sum(), ls.sum(), sx[ls].sum(), ok.sum(), sx[ok].sum()))
    cols = np.array(rows, dtype=float).reshape(len(sds), len(_SUMS)).T
    layer = {key: (np.array([sd.layer[key][0] for sd in sds], dtype=float),
                   np.array([sd.layer[key][1] for sd in sds], dtype=float))
             for key in (sds[0].layer if sds else ())}
    nil = []
    for sd, ad in zip(sds, ads):
        n = len(sd.nil_s)
        same = np.array([[a == b for b in sd.nil_s] for a in sd.nil_s], dtype=bool).reshape(n, n)
        nil.append((sd.nil_g, same, sd.lay_same, ad))
    return _SysStats(np.array([sd.k for sd in sds], dtype=float), dict(zip(_SUMS, cols)), layer, nil)


def _b3_totals(nil: tuple, theta: np.ndarray, corrected: bool) -> tuple[float, float, int]:
    """NIL B-cubed's :math:`(a_d)` of precision and recall and :math:`b_d` in one document (module docs)."""
    gi, sys_same, lay_same, ad = nil
    n = len(gi)
    if corrected and n and ad.k:
        px, pk = ad.pair_x[np.ix_(gi, gi)], ad.pair_k[np.ix_(gi, gi)]
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.where(pk > 0, _label_sum(px / np.maximum(pk, 1), theta[4], theta[3]), lay_same)
        rho[gi[:, None] == gi[None, :]] = 1.0  # one layer mention
    else:
        rho = lay_same.astype(float)
    size_s = sys_same.sum(1)
    num = (rho * sys_same).sum(1)
    bp = float((num / np.maximum(size_s, 1)).sum())
    # recall's denominator |G(m)| is itself estimated: a ratio per mention (module docs: not exactly unbiased)
    den = np.maximum(rho.sum(1), np.maximum(num, 1e-12))
    br = float(np.clip(num / den, 0.0, 1.0).sum()) if n else 0.0
    return bp, br, n


def _totals(st: _SysStats, theta: np.ndarray, corrected: Mapping, n_types: int, channels=("mark", "type", "pair")):
    """The :math:`(a_d, b_d)` of the ratios of ``channels`` (:data:`_KEYS`), arrays over the documents, with the
    labels of rates ``theta``."""
    s, out, has = st.s, {}, st.k > 0
    if "mark" in channels:
        out.update(st.layer)
        mark = corrected.get("mark")
        s1, s0 = theta[0], theta[1]

        def valid(y, n, lay):
            return np.where(has, _label_sum(s[y], s0, s1, s[n]), s[lay]) if mark else s[lay]

        out["mention_p_all"] = (valid("y", "n", "l"), s["n"])
        out["mention_p_rest"] = (valid("y_rest", "n_rest", "l_rest"), s["n_rest"])
        on = (st.k >= 2) & (s["n_span"] > 0) if mark else np.zeros(len(st.k), bool)  # one answer cannot weigh
        if on.any():
            for key, num, den in (("mention_r", "found", "span"), ("link_r", "slink_ok", "slinked")):
                if key in out:
                    a, b = (v.copy() for v in out[key])
                    a[on] = span_weights(s["x_" + num][on], st.k[on], s1, s0, s[f"n_{num}"][on])
                    b[on] = span_weights(s["x_" + den][on], st.k[on], s1, s0, s[f"n_{den}"][on])
                    out[key] = (a, b)
    if "type" in channels:
        if corrected.get("type"):
            c = theta[2]
            e = (1 - c) / (n_types - 1)
            out["typing"] = (_label_sum(s["y_type"], e, c, s["n_type"]) + s["l_type"], s["n_typed"])
        else:
            out["typing"] = (s["l_typed"], s["n_typed"])
    if "mark" in channels and "link_r" in st.layer:
        out["link_p"] = (valid("y_link", "n_link", "l_link"), s["n_linked"])
    if "pair" in channels:
        out.update(_pair_totals(st, theta, bool(corrected.get("pair"))))
    return out


def _pair_totals(st: _SysStats, theta: np.ndarray, corrected: bool) -> dict:
    """NIL B-cubed's totals (:func:`_b3_totals`) of every document, kept in ``st.memo`` by the clusters' rates."""
    key = (True, float(theta[3]), float(theta[4])) if corrected else (False,)
    got = st.memo.get(key)
    if got is None:
        v = np.array([_b3_totals(x, theta, corrected) for x in st.nil], dtype=float).reshape(-1, 3)
        got = {"nil_b3_p": (v[:, 0], v[:, 2]), "nil_b3_r": (v[:, 1], v[:, 2])}
        if len(st.memo) >= 8:
            st.memo.clear()
        st.memo[key] = got
    return got


def _corrected_ratios(st: _SysStats, rates, free: Sequence[int], n_types: int, pi: np.ndarray) -> dict:
    r"""The document ratios with labels from the answers, their linearised values carrying the rates' error:
    :math:`u_d = z_d + \frac{N-1}{N}\,\nabla_\theta\hat R\cdot\Delta_d` (module docs); a parameter moves only its
    channel's ratios (:data:`CHANNEL`)."""
    totals = _totals(st, rates.theta, rates.corrected, n_types)
    N = len(pi)
    grads = {k: np.zeros(len(rates.theta)) for k in totals}
    if free and N >= 2:
        for p in free:
            h = 1e-6
            th = rates.theta.copy()
            th[p] += h
            moved = _totals(st, th, rates.corrected, n_types, channels=(CHANNEL[p],))
            for k, (a, b) in moved.items():
                B = float((b / pi).sum())
                if B > 0:
                    grads[k][p] = float(((a - totals[k][0]) / pi).sum() / B) / h
    out = {}
    for k, (a, b) in totals.items():
        est, var, z, B = document_ratio(a, b, pi)
        if not math.isnan(est) and N >= 2 and np.any(grads[k]):
            u = z + (N - 1) / N * (rates.delta @ grads[k])
            z, var = u, float(theta_variance(u[None, :])[0])
        out[k] = (est, var, z, B, int(b.sum()))
    return out
