r"""Covariances of every system's precision, recall and F1 under the joint design: "is A better than B?".

Systems evaluated jointly share draws, labels and the exhaustive sample, so their estimates are correlated; two
systems that share most of their output err together, and the variance of their difference is far smaller than
the sum of their variances.  The estimates' linear parts (:class:`.linear.Linear`, from
:func:`.joint.linear_parts`) give it exactly: the variance of :math:`\hat F_i - \hat F_j` is the design variance
of the difference of the two systems' rows (per-draw influence values within strata of draws, over distinct
instances, :func:`.finite.strata_var`; per-document linearised values of the exhaustive sample,
:func:`.joint._var0`), and

.. math::

    \widehat{\mathrm{Cov}}(\hat F_i, \hat F_j) = \tfrac12\bigl(\widehat{\mathrm{Var}}\hat F_i +
    \widehat{\mathrm{Var}}\hat F_j - \widehat{\mathrm{Var}}(\hat F_i - \hat F_j)\bigr)

with the marginal variances the published ones (:func:`covariances`).  :mod:`unpooled.core.ranking` turns the
covariance matrix into simultaneous pairwise intervals, rank intervals and tie groups.

**With crowd votes** (:mod:`.from_votes`) the variance has three parts.  *Design*: the same construction on the
votes' influence rows (:func:`.from_votes.design_linear`).  *Confusions*: the estimates refitted under each
replicate of the workers' confusions, the covariance of the replicates (differences of replicates give the
difference's spread).  *Votes*: the votes' variance is computed per system (:func:`.from_votes._votes_var`) and
its covariance between systems is not: it is taken as 0, i.e. the votes' part of a difference's variance is the
sum of the two systems' (an upper bound whenever the votes move the two estimates the same way, as they do for
the shared items of two systems; the difference's interval is then conservative, never narrow).

**Work.** All :math:`m(m-1)/2` differences up to :data:`MAX_SYSTEMS` systems, in blocks of about
:data:`BLOCK_VALUES` non-zeros; beyond, each system's :data:`NEIGHBOURS` nearest neighbours in the order of its
estimate on either side (the pairs a ranking can be unsure of), the other covariances taken as 0 (the
difference's variance then the sum of the two; systems that far apart in the order are separated anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from .linear import Linear

METRICS = ("p", "r", "f1")
#: all pairs up to this many systems
MAX_SYSTEMS = 150
#: beyond :data:`MAX_SYSTEMS`: pairs within this many places in the order of the estimate
NEIGHBOURS = 20
#: non-zeros of the combined rows per block of pairs
BLOCK_VALUES = 1 << 23


@dataclass(frozen=True)
class Covariances:
    """Per metric (``p``, ``r``, ``f1``): the estimates (``est``, ``(m,)``) and their covariance matrix
    (``cov``, ``(m, m)``; its diagonal the published variances); ``notes``: what is approximated."""

    est: dict
    cov: dict
    notes: tuple[str, ...] = ()


def pair_list(m: int, values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(i, j)``, ``i < j``, whose covariance is computed (module docs, *Work*)."""
    if m <= MAX_SYSTEMS or values is None:
        return np.triu_indices(m, 1)
    order = np.argsort(-np.nan_to_num(np.asarray(values, float), nan=-np.inf), kind="stable")
    a, b = [], []
    for k in range(1, NEIGHBOURS + 1):
        a.append(order[:-k])
        b.append(order[k:])
    a, b = np.concatenate(a), np.concatenate(b)
    return np.minimum(a, b), np.maximum(a, b)


def difference_variances(lin: Linear, d, confidence: float | None, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """:math:`\\widehat{\\mathrm{Var}}(\\hat\\mu_i - \\hat\\mu_j)` for each pair, from ``lin``'s rows combined
    (:meth:`.linear.Linear.combine`), in blocks of about :data:`BLOCK_VALUES` non-zeros."""
    m, k = lin.m, len(i)
    out = np.zeros(k)
    per_row = 1.0
    if lin.draws is not None:
        per_row = max(1.0, 2 * lin.draws.sparse.nnz / max(m, 1) + (len(lin.draws.b) if lin.draws.a is not None
                                                                    and lin.draws.a.ndim == 1 else 0))
    step = max(1, int(BLOCK_VALUES // per_row))
    for a in range(0, k, step):
        ii, jj = i[a:a + step], j[a:a + step]
        n = len(ii)
        L = sp.csr_matrix((np.r_[np.ones(n), -np.ones(n)], (np.r_[np.arange(n), np.arange(n)], np.r_[ii, jj])),
                          shape=(n, m))
        out[a:a + step] = lin.combine(L).var(d, confidence)
    return out


def covariance_matrix(var: np.ndarray, i: np.ndarray, j: np.ndarray, var_diff: np.ndarray) -> np.ndarray:
    """``(m, m)`` from the marginal variances and the differences' (pairs not given: 0)."""
    C = np.diag(np.asarray(var, float))
    c = (var[i] + var[j] - var_diff) / 2
    C[i, j] = C[j, i] = c
    return C


def covariances(d, scores, *, votes=None) -> Covariances:
    """The covariance matrices of ``scores`` (:func:`.joint.estimate` of ``d``, with the same ``votes``): their
    estimates and variances on the diagonal, the covariances from the linear parts (module docs)."""
    from .joint import _terms, linear_parts

    if scores.weights is None:
        raise InvalidInputError("scores: expected the result of estimate() (its weights are needed)")
    simple = scores.method == "simple"
    m = d.m
    var = {k: getattr(scores, f"{k}_se") ** 2 for k in METRICS}
    est = {k: getattr(scores, k) for k in METRICS}
    notes: list[str] = []
    i, j = pair_list(m, scores.f1)
    if m > MAX_SYSTEMS:
        notes.append(f"{m} systems: covariances of the pairs within {NEIGHBOURS} places of each other only")
    if votes is None:
        _, lin, _ = linear_parts(d, _terms(d, scores.weights), scores.confidence, simple=simple)
        diff = {k: difference_variances(lin[k], d, scores.confidence, i, j) for k in METRICS}
    else:
        from .from_votes import vote_covariance_parts

        diff, extra = vote_covariance_parts(d, scores.weights, votes, scores.confidence, simple, i, j)
        notes += extra
    cov = {k: covariance_matrix(var[k], i, j, diff[k]) for k in METRICS}
    return Covariances(est, cov, tuple(notes))
