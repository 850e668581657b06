r"""The exhaustive sample :math:`\hat Y_0` as it is collected: whole documents, mention pairs within one sentence.

Two properties of the exhaustive protocol (method.md §1.4, §5.3) that the recall estimators of
:mod:`.joint` must respect.  Both the offline path (:mod:`unpooled.core.offline`) and the
service (:mod:`unpooled.service.evaluations.scoring`) use the functions here.

**1. A cluster sample of documents.**  :math:`\hat Y_0` holds the true instances of :math:`N`
sampled documents, so its instances are not independent draws: one document's instances tend
to be found (or missed) together.  Every recall term computed from :math:`\hat Y_0` is a Hájek
ratio :math:`\hat\theta_i = \sum_y v_y s_{iy} / V`, :math:`V = \sum_y v_y`, with weights
:math:`v_y = p_0(y)/\pi_{d(y)}` and :math:`s_{iy}\in\{0,1\}` (in the pool of target
:math:`i`, or found by system :math:`i` for the simple estimator).  Its linearisation per
instance is :math:`u_{iy} = v_y (s_{iy} - \hat\theta_i) / V`, and its variance under
sampling of documents (with replacement, or a small sampling fraction) is

.. math::

    z_{id} = \sum_{y \in d} u_{iy}, \qquad
    \widehat{\mathrm{Var}}(\hat\theta_i) = \frac{N}{N-1} \sum_{d=1}^{N} (z_{id} - \bar z_i)^2,
    \qquad \bar z_i = \frac1N \sum_d z_{id},

over all :math:`N` sampled documents (Cochran 1977, §6.7 and §11.7): a document without a true
instance has :math:`z_{id} = 0`.  For the Hájek ratio :math:`\sum_y u_{iy} = 0`, so
:math:`\bar z_i = 0` and such documents change the estimate only through :math:`N/(N-1)`.
With one instance per document and :math:`N = n_0` the formula is the independent-instance
one, :math:`\frac{n_0}{n_0-1}\sum_y (u_{iy} - \bar u_i)^2` (:func:`theta_variance` with
``groups=None``), exactly.

**The leverage-corrected (jackknife) variance.**  The linearisation treats every document as
if deleting it left the denominator :math:`V` unchanged; with few documents, or unequal weights,
one document holds a large share :math:`h_d = \sum_{y\in d} v_y / V` of it and the
linearisation understates the variance (90% intervals covered 0.82–0.88 at 15–40 documents,
``unpooled simulate documents``).  The delete-one-document jackknife (Quenouille 1956; Efron &
Stein 1981) of a Hájek ratio is analytic: deleting document :math:`d` moves the ratio by
:math:`\hat\theta_{i(d)} - \hat\theta_i = -z_{id}/(1 - h_d)`, so with
:math:`\delta_{id} = z_{id}/(1-h_d)`

.. math::

    \widehat{\mathrm{Var}}_{\rm J}(\hat\theta_i) = \frac{N-1}{N} \sum_{d=1}^{N} (\delta_{id} - \bar\delta_i)^2
    = \frac{N}{N-1} \sum_{d=1}^{N} (\zeta_{id} - \bar\zeta_i)^2, \qquad
    \zeta_{id} = \frac{N-1}{N}\,\frac{z_{id}}{1-h_d}

(Wolter 2007, §4.3, the jackknife of a ratio estimator), i.e. the cluster-sample formula
applied to the *jackknife values* :math:`\zeta_{id}` (:func:`jackknife_values`), which compose
like linearised values (the delta method for F1, a rates' correction).  With equal shares
:math:`h_d = 1/N` it is the linearisation exactly; a document holding every true instance
(:math:`h_d = 1`) has :math:`z_{id} = 0` and keeps :math:`\zeta_{id} = 0`.

**2. The support of** :math:`p_0`.  The protocol labels every type-compatible pair of
mentions *within one sentence*, so :math:`p_0` is a distribution over the true instances whose
arguments share a sentence.  A pooled true instance whose subject and object lie in different
sentences can never be in :math:`\hat Y_0`; in the self-normalised pooled recall

.. math::

    \hat\nu_i = \frac{\sum_j \frac{w_{ij}}{n_j}\sum_{x\in\hat X_j} p_0(x) f(x) g_i(x)/q_i(x)}
                     {\sum_j \frac{w_{ij}}{n_j}\sum_{x\in\hat X_j} p_0(x) f(x)/q_i(x)}

it must get :math:`p_0(x) = 0` (:func:`restrict_p0`): with weight 1 it enters the
denominator of every target and dilutes every system's share (the service measured a
baseline's recall at 0.022 against a true 0.049).  :func:`within_sentence` decides
membership from a sentence split (:func:`sentence_index`).

**3. The document population.**  :math:`p_0` is a distribution over the true instances of the
documents :math:`\hat Y_0` was sampled from: the *current* corpus.  Labels kept from an earlier
corpus (documents replaced between two periods) include instances on documents that are no
longer in it; :math:`\hat Y_0` can never hold them, so they too get :math:`p_0(x) = 0`, or they
would dilute :math:`\hat\nu_i` as above while :math:`\hat\theta_i` covers only the current
documents.  They still count for precision, which reads :math:`p_i` and :math:`f`, not
:math:`p_0`.  :func:`p0_support` decides both restrictions for the offline scoring and the
service alike; :func:`outside_population` is the warning naming what was left out.

**4. The recall protocol: within one sentence, or the whole document.**  Which true instances
:math:`p_0` covers is the organiser's choice (:data:`RECALL_PROTOCOLS`), and it binds the exhaustive
annotation, the support of :math:`p_0` and the matching together:

``sentence`` (within-sentence, the paper's protocol and the default)
    The exhaustive annotation asks about the pairs of mentions of two entity clusters *within one
    sentence* (one pair per sentence and cluster pair); :math:`p_0` is uniform over the true
    instances so found, and is 0 on a pooled instance across sentences (2 above).  A system's
    cross-sentence instances count for precision only.
``document`` (document-level, DocRED-style corpora)
    The unit is a *fact* :math:`\varphi = (d, h, r, t)`: relation :math:`r` between entity
    clusters :math:`h` and :math:`t` of document :math:`d`, wherever their mentions lie.
    :math:`p_0` is uniform over the true facts of the population's documents, so every instance
    on a current document is in its support (:func:`p0_support` with ``protocol='document'``).
    The estimator stays :math:`\hat r_i = \hat\theta_i\hat\nu_i` and is consistent under three
    conditions, which the code enforces where it can:

    (a) *the exhaustive sample holds every true fact of each sampled document*, cross-sentence ones
        included: the relations task asks about every pair of the document's clusters
        (:func:`~unpooled.core.annotation.answers.candidate_pairs` with ``protocol='document'``).
        An exhaustive sample collected within sentences would make :math:`\hat\theta_i` the share
        of within-sentence facts while :math:`\hat\nu_i` follows all facts; the product
        estimates neither, so protocols are never mixed (the service keeps the protocol the
        exhaustive annotation was asked under; offline, an exhaustive file without a single
        cross-sentence instance is a warning);
    (b) *fact identity is known on every pooled document*: the corpus's entity clusters (DocRED's
        ``vertexSet``, which is part of the task's input) resolve each argument span to the
        clusters of the mentions it equals or overlaps (:func:`span_clusters`; a span overlapping
        no mention is a cluster of its own).  :math:`g_i(\varphi)` is then the ``cluster``
        matching policy (:mod:`unpooled.core.matching`): system :math:`i` has :math:`r` between
        *any* mention of :math:`h` and *any* mention of :math:`t`;
    (c) *a pooled instance is true iff its fact is* (verification judges the relation between the
        two entities in the document), so that the :math:`k(x)` pooled instances expressing one fact
        share its mass: :math:`p_0(x) = 1/k(x)`, :math:`\sum_{x:\varphi(x)=\varphi} p_0(x) = 1`, and
        :math:`g_i(x) = g_i(\varphi(x))` (:func:`fact_level`).

    Then :math:`\theta_i = \Pr_{p_0}[\varphi \in S_i]` over facts and
    :math:`\nu_i = \Pr_{p_0}[\varphi \in X_i \mid \varphi \in S_i]` over pooled facts, and
    :math:`\theta_i\nu_i = r_i`, the share of the true facts the system states (DocRED's recall,
    on the population's documents); the variance is the cluster-sample one of 1, with facts for
    instances.  What a number follows is reported beside it (:data:`PROTOCOL_LABELS`).

References
----------
W. G. Cochran. *Sampling Techniques*, 3rd ed. Wiley, 1977.
C.-E. Särndal, B. Swensson, J. Wretman. *Model Assisted Survey Sampling*. Springer, 1992 (§5.7, ratio estimators).
M. H. Quenouille. Notes on bias in estimation. *Biometrika* 43, 1956.
B. Efron, C. Stein. The jackknife estimate of variance. *Annals of Statistics* 9(3), 1981.
K. M. Wolter. *Introduction to Variance Estimation*, 2nd ed. Springer, 2007 (ch. 4, the jackknife).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError, check_choice
from .rows import indicator

#: ``doc id -> (sentence starts, sentence ends)``, sorted, end-exclusive character offsets
Sentences = Mapping[str, tuple[Sequence[int], Sequence[int]]]
#: ``doc id -> [(start, end, cluster id), ...]``: the mentions of the corpus's entity clusters (DocRED's vertexSet)
EntityMentions = Mapping[str, Sequence[tuple[int, int, Hashable]]]

#: the recall protocols (module docs, 4): which true instances the exhaustive annotation finds, p0's support
RECALL_PROTOCOLS = ("sentence", "document")
#: how a report names the protocol a recall (and F1) follows
PROTOCOL_LABELS = {"sentence": "within-sentence", "document": "document-level"}


# -- 1. the variance of a ratio over the exhaustive sample ---------------------------------------
def document_groups(docs: Sequence, documents: int | None = None) -> tuple[np.ndarray, int]:
    """Per exhaustive instance, the code of its document (in order of first appearance), and the
    number of sampled documents :math:`N = \\max(\\text{distinct}, \\text{documents})`.

    ``documents``: how many documents were exhaustively annotated, counting those without a true
    instance; None (or fewer than appear): the number of distinct documents in ``docs``.
    """
    codes: dict = {}
    g = np.fromiter((codes.setdefault(d, len(codes)) for d in docs), dtype=np.int64, count=len(docs))
    return g, max(len(codes), int(documents or 0))


#: a document whose share of the denominator is within this of 1 holds (nearly) every true instance: its
#: jackknife value is its linearised one (0 exactly when the share is 1)
_FULL_SHARE = 1e-9


def jackknife_values(Z: np.ndarray, shares: np.ndarray) -> np.ndarray:
    r"""Jackknife values :math:`\zeta_{id} = \frac{N-1}{N}\,z_{id}/(1-h_d)` of a Hájek ratio over :math:`N` documents.

    Parameters
    ----------
    Z : ndarray, shape (m, N)
        Per document (column), the linearised value :math:`z_{id} = w_d (a_{id} - \hat R_i b_d)/B` of each ratio
        (row) :math:`\hat R_i = \sum_d w_d a_{id} / B`, :math:`B = \sum_d w_d b_d`, sharing the denominator.
    shares : ndarray, shape (N,) or (m, N)
        :math:`h_d = w_d b_d / B`, each document's share of the weighted denominator (they sum to 1; 0 for a
        document without a true instance); one row per ratio when the ratios have different denominators.

    Returns
    -------
    ndarray, shape (m, N)
        :math:`\zeta_{id}`: deleting document :math:`d` moves :math:`\hat R_i` by
        :math:`-\frac{N}{N-1}\zeta_{id}`, and the cluster-sample variance of :math:`\zeta` (:func:`theta_variance`)
        is the delete-one-document jackknife variance :math:`\frac{N-1}{N}\sum_d(\delta_{id}-\bar\delta_i)^2`,
        :math:`\delta_{id} = z_{id}/(1-h_d)` (module docs; Efron & Stein 1981, Wolter 2007 §4.3).  Where
        :math:`h_d` is within ``1e-9`` of 1 (the document holds every true instance) :math:`\delta_{id} = z_{id}`.

    Examples
    --------
    The jackknife of recall :math:`\sum_d x_d / \sum_d y_d` over three documents, against deleting each:

    >>> x, y = np.array([1.0, 2.0, 0.0]), np.array([2.0, 2.0, 1.0])
    >>> R, B = x.sum() / y.sum(), y.sum()
    >>> zeta = jackknife_values(((x - R * y) / B)[None, :], y / B)
    >>> deleted = np.array([(x.sum() - x[d]) / (y.sum() - y[d]) for d in range(3)])
    >>> bool(np.allclose(deleted - R, -3 / 2 * zeta[0]))
    True
    >>> jk = 2 / 3 * ((deleted - deleted.mean()) ** 2).sum()
    >>> bool(np.isclose(theta_variance(zeta)[0], jk))
    True
    """
    Z = np.asarray(Z, dtype=float)
    h = np.asarray(shares, dtype=float)
    if Z.ndim != 2 or h.shape not in ((Z.shape[1],), Z.shape):
        raise InvalidInputError(f"Z, shares: expected shapes (m, N) and (N,) or (m, N), got {Z.shape} and {h.shape}")
    N = Z.shape[1]
    if N < 2:
        return Z.copy()
    rest = 1.0 - h
    scale = np.where(rest > _FULL_SHARE, 1.0 / np.where(rest > _FULL_SHARE, rest, 1.0), 1.0)
    return (N - 1) / N * Z * scale


def theta_variance(T: np.ndarray, groups: Sequence | None = None, documents: int | None = None, *,
                   shares: np.ndarray | None = None, cross: bool = False) -> np.ndarray:
    r"""Variance estimate of the row sums of ``T`` over the exhaustive sample :math:`\hat Y_0`.

    Parameters
    ----------
    T : ndarray or sparse matrix, shape (m, n0)
        Linearised values :math:`u_{iy}` of a ratio over :math:`\hat Y_0` (for the Hájek ratio
        :math:`\hat\theta_i`, :math:`u_{iy} = v_y (s_{iy} - \hat\theta_i)/V`), one row per target.
    groups : sequence of length n0, optional
        The document of each exhaustive instance (any hashable labels, or integer codes).  None:
        the instances are treated as independent draws.
    documents : int, optional
        Number of exhaustively annotated documents, counting those without a true instance
        (documents with one are always counted: :math:`N = \max(\text{distinct}, \text{documents})`).
    shares : array_like of length n0, or shape (m, n0), optional
        Each instance's (column's) share of the ratio's weighted denominator (for :math:`\hat\theta_i`,
        :math:`v_y/V`; they sum to 1), one row per target when the targets' denominators differ (the groups
        of :mod:`.breakdown`).  Given: the leverage-corrected (jackknife) variance, the formula below of
        the :func:`jackknife_values` of the document totals with :math:`h_d` the documents' summed shares (module
        docs); None: the linearisation.

    cross : bool
        Return the ``(m, m)`` covariance matrix of the row sums, whose diagonal is the variance below.

    Returns
    -------
    ndarray, shape (m,)
        With ``groups``, the cluster-sample variance
        :math:`\frac{N}{N-1}\left(\sum_d z_{id}^2 - \bigl(\sum_d z_{id}\bigr)^2/N\right)`,
        :math:`z_{id} = \sum_{y\in d} u_{iy}` (module docs); without, the independent one
        :math:`\frac{n_0}{n_0-1}\left(\sum_y u_{iy}^2 - \bigl(\sum_y u_{iy}\bigr)^2/n_0\right)`.
        Zeros when there are fewer than 2 documents (or instances).

    Examples
    --------
    One instance per document is the independent case:

    >>> T = np.array([[0.5, -0.25, -0.25]])
    >>> theta_variance(T, ["a", "b", "c"]) == theta_variance(T)
    array([ True])

    Two instances of one document move together (as independent instances: 0.5625):

    >>> theta_variance(np.array([[0.25, 0.25, -0.5]]), ["a", "a", "b"])
    array([1.])

    With equal shares the jackknife is the linearisation; a heavy document raises it:

    >>> T = np.array([[0.2, -0.1, -0.1]])
    >>> bool(np.isclose(theta_variance(T, shares=np.full(3, 1 / 3))[0], theta_variance(T)[0]))
    True
    >>> bool(theta_variance(T, shares=np.array([0.6, 0.2, 0.2]))[0] > theta_variance(T)[0])
    True
    """
    sparse = sp.issparse(T)
    T = sp.csr_matrix(T, dtype=float) if sparse else np.asarray(T, dtype=float)
    if T.ndim != 2:
        raise InvalidInputError(f"T: expected a 2-d array (targets x exhaustive instances), got shape {T.shape}")
    m, n0 = T.shape
    if shares is not None:
        shares = sp.csr_matrix(shares, dtype=float) if sp.issparse(shares) else np.asarray(shares, dtype=float)
        if shares.shape not in ((n0,), (m, n0)):
            raise InvalidInputError(f"shares: expected one share per exhaustive instance ({n0}), or one row of "
                                    f"them per target ({m}, {n0}), got shape {shares.shape}")
    if groups is None:
        if n0 < 2:
            return np.zeros((m, m) if cross else m)
        T, shares = (x.toarray() if sp.issparse(x) else x for x in (T, shares))
        if shares is not None:
            T = jackknife_values(T, shares)
        return _centred_ss(T, cross)
    if len(groups) != n0:
        raise InvalidInputError(f"groups: expected the document of each of the {n0} exhaustive instances, "
                                f"got {len(groups)}")
    if n0 == 0:
        return np.zeros((m, m) if cross else m)
    g, N = document_groups(groups, documents)
    if N < 2:
        return np.zeros((m, m) if cross else m)
    D, H = _document_totals(T, g, N), None
    if shares is not None:
        H = _document_totals(shares if shares.ndim == 2 else np.broadcast_to(shares, (m, n0)), g, N)
        D = jackknife_values(D.T, H.T if shares.ndim == 2 else H[:, 0]).T
    return _centred_ss(D.T, cross)


def _document_totals(T, g: np.ndarray, N: int) -> np.ndarray:
    """``(N, rows)``: the sums of ``T``'s columns (an array, or sparse: many rows, each on a few instances) by their
    documents ``g``, each in the order of its instances."""
    if sp.issparse(T):
        return (T @ indicator(g, N)).toarray().T
    D = np.zeros((N, T.shape[0]))
    np.add.at(D, g, T.T)
    return D


def _centred_ss(X: np.ndarray, cross: bool) -> np.ndarray:
    r""":math:`rac{n}{n-1}\sum_k (x_{ik} - ar x_i)^2` per row of ``X`` (rows x :math:`n` units), or with ``cross``
    the matrix :math:`rac{n}{n-1}\sum_k (x_{ik} - ar x_i)(x_{jk} - ar x_j)` whose diagonal it is: the
    covariances of the targets' estimates (:mod:`.paired`)."""
    n = X.shape[1]
    s = X.sum(1)
    if cross:
        return n / (n - 1) * (X @ X.T - np.outer(s, s) / n)
    return n / (n - 1) * ((X * X).sum(1) - s ** 2 / n)


def t_factor(N: int, confidence: float) -> float:
    r"""Variance inflation :math:`(t_{N-1}/z)^2` for a ratio over :math:`N` sampled documents: the interval of a
    cluster sample of few documents uses Student's :math:`t` with :math:`N-1` degrees of freedom (Cochran 1977
    §2.15).  Measured: entity scores with 8 documents, coverage 0.85 -> about 0.9; with the jackknife variance,
    recall's 90% intervals at 15 documents 0.86-0.88 -> 0.88-0.90 pooled by scheme (``unpooled simulate documents``).

    >>> t_factor(1, 0.9), round(t_factor(8, 0.9), 4)
    (1.0, 1.3267)
    """
    from scipy.stats import norm, t

    if N < 2:
        return 1.0
    q = 0.5 + confidence / 2
    return float((t.ppf(q, N - 1) / norm.ppf(q)) ** 2)


# -- 2. the support of p0 ---------------------------------------------------------------------------
def restrict_p0(design, inside):
    r"""The design with :math:`p_0(x) = 0` for every drawn instance outside the exhaustive protocol's support.

    Parameters
    ----------
    design : :class:`~unpooled.core.estimators.joint.Design`
    inside : array_like of bool, shape (S,) or None
        Per labelled draw (``design.xs``), whether the drawn instance is one the exhaustive
        protocol can find (:func:`within_sentence`).  None: no restriction.

    Returns
    -------
    Design
        ``design`` itself when ``inside`` is None or every draw is inside; else a copy with
        :math:`p_0(x_s) = 0` where ``inside`` is False (only :math:`\hat\nu_i` reads :math:`p_0`,
        module docs).
    """
    if inside is None or not len(design.xs):
        return design
    inside = np.asarray(inside, dtype=bool)
    if inside.shape != design.xs.shape:
        raise InvalidInputError(f"inside: expected one flag per labelled draw ({len(design.xs)}), "
                                f"got shape {inside.shape}")
    if inside.all():
        return design
    p0 = np.array(design.p0, dtype=float, copy=True)
    p0[design.xs[~inside]] = 0.0
    return replace(design, p0=p0)


def p0_support(refs, *, found=frozenset(), sentences: Sentences | None = None, population=None,
               memo: dict | None = None, protocol: str = "sentence") -> np.ndarray:
    r"""Per instance, whether it lies in the support of :math:`p_0` (module docs, 2 to 4): its document is in
    the current ``population`` and the exhaustive protocol found it (its key in ``found``) or can find it
    (``protocol='sentence'``: :func:`within_sentence`; ``'document'``: every instance of the document).

    Parameters
    ----------
    refs : sequence of :class:`~unpooled.core.matching.InstanceRef`
        The drawn instances (one per labelled draw, or per distinct instance).
    found : container of instance keys
        The instances of :math:`\hat Y_0` (in the support by definition).
    sentences : mapping, optional
        :func:`sentence_index` of the corpus; None: no sentence restriction.
    population : container of document ids, optional
        The documents :math:`\hat Y_0` was sampled from (the current corpus); None: unknown, no restriction.
    memo : dict, optional
        ``key -> within one sentence``, kept by the caller across calls under one sentence split.
    protocol : {'sentence', 'document'}
        The recall protocol (:data:`RECALL_PROTOCOLS`); under ``document`` ``sentences`` is not read.

    Returns
    -------
    ndarray of bool, shape (len(refs),)
        ``make_design(inside=...)``'s argument.

    >>> from unpooled.core.matching import InstanceRef
    >>> refs = [InstanceRef("old", 0, 1, "r", 2, 3), InstanceRef("new", 0, 1, "r", 2, 3)]
    >>> p0_support(refs, population={"new"}).tolist(), p0_support(refs).tolist()
    ([False, True], [True, True])
    >>> across = [InstanceRef("d", 0, 1, "r", 10, 11)]
    >>> split = {"d": ([0, 5], [4, 12])}
    >>> p0_support(across, sentences=split).tolist(), p0_support(across, sentences=split, protocol="document").tolist()
    ([False], [True])
    """
    check_choice("protocol", protocol, RECALL_PROTOCOLS)
    if protocol == "document":
        sentences = None  # every instance of a current document is in the support
    memo = {} if memo is None else memo
    out = np.ones(len(refs), dtype=bool)
    for j, ref in enumerate(refs):
        if population is not None and ref.doc not in population:
            out[j] = False
        elif sentences is not None and ref.key not in found:
            key = ref.key
            v = memo.get(key)
            if v is None:
                v = memo[key] = within_sentence(ref, sentences)
            out[j] = v
    return out


def outside_population(refs, population, *, examples: int = 3) -> str | None:
    """The warning for labelled draws on documents outside the current ``population`` (:func:`p0_support`):
    how many draws, of how many distinct instances, on how many documents, with the first ``examples``
    documents; None when there are none or the population is unknown (None).

    >>> from unpooled.core.matching import InstanceRef
    >>> print(outside_population([InstanceRef("D9", 0, 1, "r", 2, 3)] * 2, {"D1"}))
    2 labelled draws (1 distinct instance) on 1 document outside the current corpus (D9) count for precision \
only: recall's pool follows the current documents, which the exhaustive sample covers (p0 = 0 there)
    """
    if population is None:
        return None
    docs: dict[str, None] = {}
    keys = set()
    n = 0
    for ref in refs:
        if ref.doc not in population:
            n += 1
            docs.setdefault(ref.doc)
            keys.add(ref.key)
    if not n:
        return None
    named = ", ".join(list(docs)[:examples]) + (", ..." if len(docs) > examples else "")
    plural = lambda k, word: f"{k} {word}" + ("" if k == 1 else "s")  # noqa: E731
    return (f"{plural(n, 'labelled draw')} ({plural(len(keys), 'distinct instance')}) on "
            f"{plural(len(docs), 'document')} outside the current corpus ({named}) count{'s' if n == 1 else ''} "
            "for precision only: recall's pool follows the current documents, which the exhaustive sample covers "
            "(p0 = 0 there)")


def sentence_index(documents: Iterable, *, docs: Iterable[str] | None = None) -> dict[str, tuple[list, list]]:
    """``doc id -> (sentence starts, sentence ends)`` of core :class:`~unpooled.core.corpus.Document` objects.

    ``docs``: keep only these document ids (the others are read and dropped).
    """
    keep = None if docs is None else set(docs)
    out: dict[str, tuple[list, list]] = {}
    for d in documents:
        if keep is not None and d.id not in keep:
            continue
        out[d.id] = ([s for s, _ in d.sentences], [e for _, e in d.sentences])
    return out


def within_sentence(ref, sentences: Sentences) -> bool:
    """Both arguments of the instance lie inside one sentence (string fillers: the subject does).

    ``ref``: an :class:`~unpooled.core.matching.InstanceRef`; ``sentences``: :func:`sentence_index`.
    A document without a known sentence split is not restricted (True).
    """
    got = sentences.get(ref.doc)
    if not got:
        return True  # no sentence split known: no restriction
    starts, ends = got

    def which(a: int, b: int) -> int:
        i = bisect_right(starts, a) - 1
        return i if i >= 0 and b <= ends[i] else -1

    s = which(ref.s_start, ref.s_end)
    if ref.value is not None or ref.o_start < 0:
        return s >= 0
    return s >= 0 and s == which(ref.o_start, ref.o_end)


# -- 4. the document protocol: facts between entity clusters ------------------------------------
def span_clusters(entities: EntityMentions, spans: Iterable[tuple[str, int, int]]) -> dict:
    """``(doc, start, end) -> cluster id`` (or a frozenset of ids) for every span: the clusters of the corpus's
    mentions it equals, else of those it overlaps (end-exclusive offsets); a span overlapping no mention is a
    cluster of its own, ``('span', start, end)`` (module docs, 4 (b)).  The ``clusters`` argument of the
    ``cluster`` matching policy (:mod:`unpooled.core.matching`).

    >>> ents = {"d": [(0, 5, 0), (20, 23, 0), (30, 35, 1)]}
    >>> m = span_clusters(ents, [("d", 20, 23), ("d", 0, 3), ("d", 31, 40), ("d", 50, 52)])
    >>> m[("d", 20, 23)], m[("d", 0, 3)], m[("d", 31, 40)], m[("d", 50, 52)]
    (0, 0, 1, ('span', 50, 52))
    """
    index: dict[str, tuple[list, list]] = {}
    for doc, ms in entities.items():
        rows = sorted((int(a), int(b), c) for a, b, c in ms)
        index[doc] = ([a for a, _, _ in rows], rows)
    longest = {doc: max((b - a for a, b, _ in rows), default=0) for doc, (_, rows) in index.items()}
    out: dict = {}
    for doc, a, b in spans:
        key = (doc, a, b)
        if key in out:
            continue
        starts, rows = index.get(doc, ((), ()))
        lo = bisect_right(starts, a - longest.get(doc, 0) - 1)
        hi = bisect_right(starts, b - 1) if b > a else bisect_right(starts, a)
        exact = {c for s, e, c in rows[lo:hi] if (s, e) == (a, b)}
        got = exact or {c for s, e, c in rows[lo:hi] if s < b and a < e}
        out[key] = ("span", a, b) if not got else next(iter(got)) if len(got) == 1 else frozenset(got)
    return out


@dataclass(frozen=True)
class FactLevel:
    """The recall inputs of the document protocol (module docs, 4), from :func:`fact_level`.

    ``g0`` (m, F): system ``i`` states fact ``k``; ``first`` (F,): per fact, the index of its first true instance
    (its document and weight); ``gs`` (m, S): per labelled draw, whether system ``i`` states the draw's fact;
    ``mult`` (U,): the pooled instances expressing each universe instance's fact (:meth:`p0` divides by it);
    ``facts``: the facts as :class:`~unpooled.core.matching.GoldTriple`; ``clusters``: the span map used."""

    g0: np.ndarray
    first: np.ndarray
    gs: np.ndarray
    mult: np.ndarray
    facts: tuple
    clusters: Mapping

    def p0(self, p0: np.ndarray) -> np.ndarray:
        """The universe's :math:`p_0` with each fact's mass shared by the pooled instances expressing it (module
        docs, 4 (c))."""
        return p0 / np.maximum(self.mult, 1)


def fact_level(universe: Sequence, members: Sequence, xs, truth: Sequence, entities: EntityMentions, *,
               symmetric: Iterable[str] = ()) -> FactLevel:
    r"""Match the systems to true *facts* (module docs, 4): the one implementation the offline scoring and the
    service share.

    Parameters
    ----------
    universe : sequence of :class:`~unpooled.core.matching.InstanceRef`, length U
        Every pooled instance once.
    members : sequence of int arrays
        The universe indices of each system's instances.
    xs : int array, shape (S,)
        The universe index of each labelled draw.
    truth : sequence of InstanceRef
        The true instances of the exhaustive sample (several may express one fact).
    entities : mapping
        :data:`EntityMentions` of (at least) the pooled and sampled documents.

    Raises
    ------
    InvalidInputError
        ``entities`` is empty: the document protocol needs the corpus's entity clusters.
    """
    from ..matching import GoldTriple, match_matrix, match_multiplicity, match_universe

    if not entities:
        raise InvalidInputError("entities: the document recall protocol counts facts between the corpus's entity "
                                "clusters, but the corpus has none (load a corpus with coreference clusters, e.g. "
                                "the docred format's vertexSet, or use the within-sentence protocol)")
    spans = [(x[0], x[1], x[2]) for x in (*universe, *truth)]
    spans += [(x[0], x[4], x[5]) for x in (*universe, *truth) if x[6] is None]
    clusters = span_clusters(entities, spans)
    one = lambda c: min(c, key=repr) if isinstance(c, frozenset) else c  # noqa: E731
    ids: dict = {}
    first: list[int] = []
    for k, t in enumerate(truth):
        obj = None if t[6] is not None else one(clusters[(t[0], t[4], t[5])])
        fact = GoldTriple(t[0], one(clusters[(t[0], t[1], t[2])]), t[3], obj, t[6])
        if fact not in ids:
            ids[fact] = len(ids)
            first.append(k)
    facts = tuple(ids)
    sym = tuple(symmetric)
    systems = [[universe[u] for u in np.asarray(x).tolist()] for x in members]
    g0 = match_matrix(systems, list(facts), policy="cluster", clusters=clusters, symmetric=sym)
    xs = np.asarray(xs, dtype=np.int64)
    gs = (match_universe(universe, members, targets=xs, policy="cluster", clusters=clusters, symmetric=sym)
          .toarray().astype(bool) if len(xs) else np.zeros((len(members), 0), bool))
    mult = match_multiplicity(universe, policy="cluster", clusters=clusters, symmetric=sym) if len(universe) \
        else np.zeros(0, np.int64)
    return FactLevel(g0, np.asarray(first, np.int64), gs, mult, facts, clusters)


def crossing_share(refs, sentences: Sentences) -> tuple[int, int]:
    """``(across, known)``: of the instances whose document has a sentence split, how many have arguments in
    different sentences (the check that an exhaustive sample follows the document protocol, module docs 4 (a))."""
    across = known = 0
    for ref in refs:
        if sentences.get(ref.doc):
            known += 1
            across += not within_sentence(ref, sentences)
    return across, known


__all__ = ["EntityMentions", "FactLevel", "PROTOCOL_LABELS", "RECALL_PROTOCOLS", "Sentences", "crossing_share",
           "fact_level", "span_clusters", "document_groups", "jackknife_values", "outside_population", "p0_support", "restrict_p0",
           "sentence_index", "t_factor", "theta_variance", "within_sentence"]
