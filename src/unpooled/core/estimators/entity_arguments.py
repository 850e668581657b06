r"""The argument mentions' precision from the verification draws, and their labels (:mod:`.entities` puts it
together with the exhaustive documents).

A system's argument mentions :math:`A_i` are those an instance of its KB uses; every verification draw
:math:`\hat X_j` (i.i.d. from each system's :math:`p_j`) labels the argument mentions
:math:`a \in \mathrm{args}(x)` of its instance.  :math:`\hat P^A_i`, their precision, is the joint
importance-sampling estimator of :mod:`.joint` with a target-specific label: with
:math:`c_i(a) = \sum_{x \ni a} p_i(x)` the mass of :math:`p_i` on instances using :math:`a`,

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
numerator and denominator terms.

References
----------
W. J. Rogan, B. Gladen. Estimating prevalence from the results of a screening test. Am. J. Epidemiol. 107, 1978.
A. Chaganty, A. Paranjape, P. Liang, C. Manning. Importance sampling for unbiased on-demand evaluation of
knowledge base population. EMNLP 2017.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from .crowd_channels import type_channel
from .intervals import wilson
from .joint import Design, _terms, strata_var
from .rows import Rows, add, row_sums, scale, values_at


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
    args_of = args[np.unique(d.xs)]  # the argument mentions of each drawn instance (the terms' t.codes)
    used = np.unique(args_of.indices)
    if np.any(np.isnan(valid[used])):
        k = int(used[np.isnan(valid[used])][0])
        raise InvalidInputError(f"valid: argument mention {k} is used by a draw but has no label")
    t = _terms(d, W)
    # phi_i(x) = sum_{a in args(x)} v(a) / (|A_i| c_i(a)) (and with v = 1) where p_i(x) > 0, so every c_i(a) > 0:
    # per (target, drawn instance) the target holds (t.PI's non-zeros), then per draw on the pattern of p_i(x_s)
    Pm, at = _draws_pattern(t)
    phi, one = _phi(t.PI, args_of, C, sizes, valid)
    num, den = (t.ratio * sp.csr_matrix((Pm.data * v[at], Pm.indices, Pm.indptr), shape=Pm.shape)
                for v in (phi, one))  # the importance weights times phi: (m, S), non-zero where p_i(x_s) > 0
    Ns, Ds = row_sums(num, num.data), row_sums(den, den.data)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(Ds > 0, Ns / Ds, np.nan)
        # the linearised values (num - p den) / D_i, on the draws the target holds (0 elsewhere and where D_i = 0)
        U_ = add(num, scale(den, rows=-np.nan_to_num(p)))
        U_.data /= np.repeat(np.where(Ds > 0, Ds, np.inf), np.diff(U_.indptr))
    var = strata_var(Rows(U_), d)
    if rates is not None:
        var = var + rate_variance(p, rates)
    ess = np.nan_to_num(t.ess)
    lo, hi = wilson(np.nan_to_num(p), var, confidence, np.maximum(ess, 1))
    none = (sizes == 0) | ~np.isfinite(p)
    p = np.where(none, np.nan, p)
    return {"p": p, "var": np.where(none, np.nan, var), "lo": np.where(none, np.nan, lo),
            "hi": np.where(none, np.nan, hi), "ess": ess, "sizes": sizes}


def _draws_pattern(t) -> tuple[sp.csr_matrix, np.ndarray]:
    """:math:`p_i(x_s)` of the terms ``t`` (targets x draws, canonical) and, per stored value, its position among
    ``t.PI``'s (the same target and drawn instance)."""
    PI = t.PI
    pos = sp.csr_matrix((np.arange(1, PI.nnz + 1, dtype=float), PI.indices, PI.indptr), shape=PI.shape)
    pos = pos.tocsc()[:, t.item].tocsr()  # (through columns: sorted without a sort)
    at = pos.data.astype(np.int64) - 1
    return sp.csr_matrix((PI.data[at], pos.indices, pos.indptr), shape=pos.shape), at


def _phi(PI: sp.csr_matrix, args_of: sp.csr_matrix, C: sp.csr_matrix, sizes: np.ndarray,
         valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\varphi_i(x)` and :math:`\varphi^1_i(x)` at each stored value of ``PI`` (targets x drawn instances,
    canonical), from the instances' argument mentions ``args_of`` (drawn instances x K), :math:`c_i(a)` ``C``
    (targets x K) and :math:`|A_i|` ``sizes``: each term :math:`1/(|A_i| c_i(a))` (times :math:`v(a)`), summed over
    the instance's mentions in their order."""
    rows = np.repeat(np.arange(PI.shape[0]), np.diff(PI.indptr))
    per = np.diff(args_of.indptr)[PI.indices]  # mentions of each (target, instance)
    k = np.repeat(np.arange(PI.nnz), per)
    start = np.repeat(args_of.indptr[PI.indices] - np.concatenate([[0], np.cumsum(per)[:-1]]), per)
    a = args_of.indices[start + np.arange(len(k))]
    r = rows[k]
    c = values_at(C, r, a)
    with np.errstate(divide="ignore"):
        base = np.where(c > 0, 1.0 / (np.maximum(sizes, 1)[r] * c), 0.0)
    return (np.bincount(k, weights=base * valid[a], minlength=PI.nnz),
            np.bincount(k, weights=base, minlength=PI.nnz))


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
