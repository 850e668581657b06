r"""The crowd's error rates on exhaustive entity annotation, estimated from its own answers (no gold item).

Every exhaustive document :math:`d` is annotated by :math:`k_d` answers.  Three questions are asked of them, each
modelled as a channel with rates shared by the whole crowd (the answers of one item independent given its truth):

**Marking** (is this span a mention?) and **pairing** (are these two mentions in one cluster?): binary, with
*two* rates, because exhaustive annotation is not symmetric (an annotator misses a mention far more often than
they mark a non-mention, and splits a cluster more often than they merge two):

.. math::

    X_i \mid T_i \sim \mathrm{Bin}(k_i, s_{T_i}), \qquad
    \Pr(T_i = 1) = \pi, \qquad s_1 = \Pr(\text{yes} \mid \text{true}),\; s_0 = \Pr(\text{yes} \mid \text{false}),

:math:`X_i` the answers saying yes among the :math:`k_i` that judge item :math:`i`.  The mixture of two binomials
is identified when items have :math:`k_i \ge 3` answers (Teicher 1963; a one-coin pair agreement would assume
:math:`s_0 = 1 - s_1`, false here); :func:`two_coin` fits it by EM (Dempster, Laird & Rubin 1977).  The corrected
label of an item (Rogan & Gladen 1978)

.. math:: \tilde t_i = \frac{X_i/k_i - s_0}{s_1 - s_0}, \qquad \mathbb E[\tilde t_i \mid T_i] = T_i,

is linear in the answers, so a sum of them over a document is unbiased for the sum of the truths.

**Typing** (which of :math:`K` types?): a symmetric channel with one rate, the answer's type right with
probability :math:`c`, each wrong type with :math:`e = (1-c)/(K-1)`.  Two answers on one mention agree with
probability :math:`g = c^2 + (1-c)^2/(K-1)` whatever the true type, so the pooled share :math:`\bar g` of agreeing
pairs gives

.. math:: \hat c = \frac{1 + \sqrt{1 - K + K(K-1)\bar g}}{K}, \qquad
          \tilde\tau = \frac{y - \hat e}{\hat c - \hat e},\; \mathbb E[\tilde\tau] = \mathbb 1[\text{type right}]

(:func:`type_channel`), :math:`y` the share of the answers marking the mention that give the system's type.

**Their variance.**  The rates are refitted without each document in turn (delete-one-document jackknife, Efron &
Stein 1981): :func:`fit_rates` returns :math:`\Delta_d = \hat\theta - \hat\theta_{(d)}`, which the estimators add,
through their gradient in :math:`\theta`, to the documents' linearised values (their covariance with the labels is
kept: one sum over documents).

References
----------
W. J. Rogan, B. Gladen. Estimating prevalence from the results of a screening test. Am. J. Epidemiol. 107, 1978.
H. Teicher. Identifiability of finite mixtures. Ann. Math. Statist. 34, 1963.
A. P. Dempster, N. M. Laird, D. B. Rubin. Maximum likelihood from incomplete data via the EM algorithm. JRSS B 39, 1977.
B. Efron, C. Stein. The jackknife estimate of variance. Ann. Statist. 9, 1981.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..errors import InvalidInputError

#: below this gap between the rates (:math:`s_1 - s_0`, :math:`c - e`) the answers are not corrected
MIN_GAP = 0.2

#: the parameters, in this order, of :attr:`Rates.theta`
PARAMS = ("s1", "s0", "c", "f1", "f0")


def two_coin(x, k, *, iters: int = 2000, tol: float = 1e-7, start=None) -> dict:
    r"""Fit :math:`X_i \sim \pi\,\mathrm{Bin}(k_i, s_1) + (1-\pi)\,\mathrm{Bin}(k_i, s_0)` by EM (module docs).

    Parameters
    ----------
    x, k : array_like of int
        Per item, the answers saying yes and the answers judging it (items with :math:`k_i = 0` are ignored).
    start : tuple, optional
        ``(pi, s1, s0)`` to start from (the full sample's fit, for the jackknife).

    Returns
    -------
    dict
        ``pi``, ``s1``, ``s0`` (:math:`s_1 \ge s_0`), ``items`` and ``identified`` (some item has 3 answers or more
        and both answers occur); NaN rates without items.

    Examples
    --------
    >>> out = two_coin([3] * 80 + [2] * 15 + [0] * 30, [3] * 125)
    >>> round(out["s1"], 3), round(out["s0"], 3)
    (0.947, 0.0)
    """
    x = np.asarray(x, dtype=float)
    k = np.asarray(k, dtype=float)
    if x.shape != k.shape or x.ndim != 1:
        raise InvalidInputError("x, k: expected 1-d arrays of one length")
    if np.any(x < 0) or np.any(x > k):
        raise InvalidInputError("x: expected 0 <= x <= k")
    return _two_coin_cells(_cells(x, k), iters=iters, tol=tol, start=start)


def _cells(x: np.ndarray, k: np.ndarray) -> dict[tuple[float, float], int]:
    """The items' counts per ``(x, k)`` (items with :math:`k = 0` left out): all the likelihood depends on."""
    keep = k > 0
    xk, w = np.unique(np.stack([x[keep], k[keep]], 1), axis=0, return_counts=True)
    return {(float(a), float(b)): int(c) for (a, b), c in zip(xk, w)}


def _two_coin_cells(cells: dict, *, iters: int = 2000, tol: float = 1e-7, start=None) -> dict:
    """:func:`two_coin` of the items counted by ``(x, k)`` (:func:`_cells`; cells counted 0 are left out)."""
    cells = sorted((xk, c) for xk, c in cells.items() if c > 0)
    x = np.array([xk[0] for xk, _ in cells])
    k = np.array([xk[1] for xk, _ in cells])
    w = np.array([c for _, c in cells], dtype=float)
    n = int(w.sum())
    nan = float("nan")
    if n == 0 or (w * k).sum() == 0:
        return {"pi": nan, "s1": nan, "s0": nan, "items": 0, "identified": False}
    identified = bool(np.any(k >= 3) and 0 < (w * x).sum() < (w * k).sum())
    if start is not None and all(np.isfinite(start)):
        pi, s1, s0 = start
    else:
        hi = x / k >= 0.5
        pi = float(np.clip(w[hi].sum() / n, 0.05, 0.95))
        s1 = float(np.clip((w * x)[hi].sum() / (w * k)[hi].sum() if hi.any() else 0.9, 0.55, 0.999))
        s0 = float(np.clip((w * x)[~hi].sum() / (w * k)[~hi].sum() if (~hi).any() else 0.05, 0.001, 0.45))
    eps = 1e-12
    cells = list(zip(x.tolist(), k.tolist(), w.tolist()))  # a handful: plain floats are faster than arrays
    for _ in range(iters):
        a1, b1, a0, b0 = math.log(max(s1, eps)), math.log(max(1 - s1, eps)), math.log(max(s0, eps)), \
            math.log(max(1 - s0, eps))
        prior = math.log(max(pi, eps)) - math.log(max(1 - pi, eps))
        sr = sx1 = sk1 = sx0 = sk0 = 0.0
        for xi, ki, wi in cells:
            lr = prior + xi * (a1 - a0) + (ki - xi) * (b1 - b0)
            r = 1.0 / (1.0 + math.exp(-lr)) if lr > -700 else 0.0
            sr += wi * r
            sx1 += wi * r * xi
            sk1 += wi * r * ki
            sx0 += wi * (1 - r) * xi
            sk0 += wi * (1 - r) * ki
        npi = sr / n
        ns1 = sx1 / sk1 if sk1 > eps else s1
        ns0 = sx0 / sk0 if sk0 > eps else s0
        done = max(abs(npi - pi), abs(ns1 - s1), abs(ns0 - s0)) < tol
        pi, s1, s0 = npi, ns1, ns0
        if done:
            break
    if s0 > s1:  # the labels of the two classes: "yes" is the truth's answer
        pi, s1, s0 = 1 - pi, s0, s1
    return {"pi": pi, "s1": s1, "s0": s0, "items": n, "identified": identified}


def type_channel(agree, pairs, n_types: int) -> float:
    r""":math:`\hat c` of the symmetric :math:`K`-type channel from the pooled agreeing answer pairs (module docs);
    NaN without pairs.

    >>> round(type_channel([3, 1], [3, 3], 5), 4)  # g = 4/6
    0.811
    """
    K = int(n_types)
    if K < 2:
        raise InvalidInputError(f"n_types: expected at least 2 types, got {n_types!r}")
    P = float(np.sum(pairs))
    if P <= 0:
        return float("nan")
    g = float(np.sum(agree)) / P
    return (1 + math.sqrt(max(1 - K + K * (K - 1) * g, 0.0))) / K


@dataclass
class DocumentItems:
    """One document's items for the rates: marking ``(x, k)`` of the candidate spans, typing ``(agree, pairs)``
    per mention, pairing ``(x, k)`` per pair of mentions."""

    mark_x: Sequence[int] = ()
    mark_k: Sequence[int] = ()
    type_agree: Sequence[int] = ()
    type_pairs: Sequence[int] = ()
    pair_x: Sequence[int] = ()
    pair_k: Sequence[int] = ()


@dataclass
class Rates:
    r"""The fitted rates :math:`\theta` = (:math:`s_1, s_0, c, f_1, f_0`), which of the three channels are
    corrected, and the jackknife differences :math:`\Delta_d` (shape ``(N, 5)``)."""

    theta: np.ndarray
    corrected: dict
    delta: np.ndarray
    n_types: int
    details: dict = field(default_factory=dict)

    def e(self, theta=None) -> float:
        c = (self.theta if theta is None else theta)[2]
        return (1 - c) / (self.n_types - 1)

    def to_dict(self) -> dict:
        def num(v):
            return None if not math.isfinite(v) else round(float(v), 6)

        return {**{p: num(v) for p, v in zip(PARAMS, self.theta)}, "corrected": dict(self.corrected),
                **{k: num(v) if isinstance(v, float) else v for k, v in self.details.items()}}


@dataclass
class _Counts:
    """What the rates depend on in some documents' items: the marking and pairing items counted by ``(x, k)``
    (:func:`_cells`) and the typing's agreeing pairs and pairs; documents are taken out by subtraction."""

    mark: dict
    pair: dict
    agree: float
    pairs: float

    @classmethod
    def of(cls, d: DocumentItems) -> "_Counts":
        arr = lambda v: np.asarray(v, dtype=float).reshape(-1)  # noqa: E731
        return cls(_cells(arr(d.mark_x), arr(d.mark_k)), _cells(arr(d.pair_x), arr(d.pair_k)),
                   float(arr(d.type_agree).sum()), float(arr(d.type_pairs).sum()))

    def add(self, other: "_Counts", sign: int = 1) -> "_Counts":
        def cells(a, b):
            out = dict(a)
            for xk, c in b.items():
                out[xk] = out.get(xk, 0) + sign * c
            return out

        return _Counts(cells(self.mark, other.mark), cells(self.pair, other.pair), self.agree + sign * other.agree,
                       self.pairs + sign * other.pairs)


def _fit(counts: _Counts, n_types: int, start=None) -> tuple[np.ndarray, dict]:
    mk = _two_coin_cells(counts.mark, start=None if start is None else start[0])
    tc = type_channel([counts.agree], [counts.pairs], n_types)
    pk = _two_coin_cells(counts.pair, start=None if start is None else start[1])
    theta = np.array([mk["s1"], mk["s0"], tc, pk["s1"], pk["s0"]], dtype=float)
    return theta, {"mark": mk, "pair": pk}


def fit_rates(items: Sequence[DocumentItems], n_types: int, *, min_gap: float = MIN_GAP) -> Rates:
    r"""The crowd's rates from every document's items, with the delete-one-document differences
    :math:`\Delta_d = \hat\theta - \hat\theta_{(d)}` (module docs).

    A channel is corrected when its rates are identified and their gap is at least ``min_gap``
    (:math:`s_1 - s_0`, :math:`c - e`, :math:`f_1 - f_0`).
    """
    per_doc = [_Counts.of(d) for d in items]
    total = _Counts({}, {}, 0.0, 0.0)
    for c in per_doc:
        total = total.add(c)
    theta, fits = _fit(total, n_types)
    e = (1 - theta[2]) / (n_types - 1) if math.isfinite(theta[2]) else float("nan")
    corrected = {
        "mark": bool(fits["mark"]["identified"] and theta[0] - theta[1] >= min_gap),
        "type": bool(math.isfinite(theta[2]) and theta[2] - e >= min_gap),
        "pair": bool(fits["pair"]["identified"] and theta[3] - theta[4] >= min_gap),
    }
    N = len(items)
    delta = np.zeros((N, len(PARAMS)))
    if N >= 2 and any(corrected.values()):
        start = ((fits["mark"]["pi"], theta[0], theta[1]), (fits["pair"]["pi"], theta[3], theta[4]))
        for d in range(N):
            less, _ = _fit(total.add(per_doc[d], -1), n_types, start=start)
            delta[d] = np.where(np.isfinite(less) & np.isfinite(theta), theta - less, 0.0)
    details = {"mark_items": fits["mark"]["items"], "pair_items": fits["pair"]["items"],
               "mark_prevalence": fits["mark"]["pi"], "pair_prevalence": fits["pair"]["pi"]}
    return Rates(theta, corrected, delta, int(n_types), details)


__all__ = ["DocumentItems", "MIN_GAP", "PARAMS", "Rates", "fit_rates", "two_coin", "type_channel"]
