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

References
----------
W. G. Cochran. *Sampling Techniques*, 3rd ed. Wiley, 1977.
C.-E. Särndal, B. Swensson, J. Wretman. *Model Assisted Survey Sampling*. Springer, 1992 (§5.7, ratio estimators).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from ..errors import InvalidInputError

#: ``doc id -> (sentence starts, sentence ends)``, sorted, end-exclusive character offsets
Sentences = Mapping[str, tuple[Sequence[int], Sequence[int]]]


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


def theta_variance(T: np.ndarray, groups: Sequence | None = None, documents: int | None = None) -> np.ndarray:
    r"""Variance estimate of the row sums of ``T`` over the exhaustive sample :math:`\hat Y_0`.

    Parameters
    ----------
    T : ndarray, shape (m, n0)
        Linearised values :math:`u_{iy}` of a ratio over :math:`\hat Y_0` (for the Hájek ratio
        :math:`\hat\theta_i`, :math:`u_{iy} = v_y (s_{iy} - \hat\theta_i)/V`), one row per target.
    groups : sequence of length n0, optional
        The document of each exhaustive instance (any hashable labels, or integer codes).  None:
        the instances are treated as independent draws.
    documents : int, optional
        Number of exhaustively annotated documents, counting those without a true instance
        (documents with one are always counted: :math:`N = \max(\text{distinct}, \text{documents})`).

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
    """
    T = np.asarray(T, dtype=float)
    if T.ndim != 2:
        raise InvalidInputError(f"T: expected a 2-d array (targets x exhaustive instances), got shape {T.shape}")
    m, n0 = T.shape
    if groups is None:
        if n0 < 2:
            return np.zeros(m)
        return n0 / (n0 - 1) * ((T * T).sum(1) - T.sum(1) ** 2 / n0)
    if len(groups) != n0:
        raise InvalidInputError(f"groups: expected the document of each of the {n0} exhaustive instances, "
                                f"got {len(groups)}")
    if n0 == 0:
        return np.zeros(m)
    g, N = document_groups(groups, documents)
    if N < 2:
        return np.zeros(m)
    D = np.zeros((N, m))
    np.add.at(D, g, T.T)
    return N / (N - 1) * ((D * D).sum(0) - D.sum(0) ** 2 / N)


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


__all__ = ["Sentences", "document_groups", "restrict_p0", "sentence_index", "theta_variance", "within_sentence"]
