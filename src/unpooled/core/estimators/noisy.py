r"""Precision, recall and F1 from crowd votes: each target's mixture likelihood over the items' vote likelihoods.

**Model.** Verification answer :math:`a` says :math:`y_a \in \{0, 1\}` ("correct") about instance :math:`x_a`;
it comes from worker :math:`w_a` with sensitivity :math:`s_w = P(y=1 \mid f=1)` and false-positive rate
:math:`e_w = P(y=1 \mid f=0)`, independently given the item's class :math:`f(x)` (Dawid & Skene 1979; the
confusions are fitted by :mod:`unpooled.core.annotation.confusion`).  An item's votes :math:`v_x` have the
likelihoods :math:`L_c(x) = \prod_{a: x_a = x} P(y_a \mid f = c)` and the log likelihood ratio
:math:`\lambda(x) = \log L_1(x) - \log L_0(x)` (0 for an item without votes).

**Estimating equations.** Every estimate of :mod:`.joint` is built from linear functionals of the labels with
non-negative coefficients, :math:`T = \sum_s c_s f(x_s)` over the draws: precision's :math:`C` (the importance
weights of target :math:`i`), recall's numerator :math:`A` (:math:`p_0 g_i / q_i`) and denominator :math:`B`
(:math:`p_0/q_i`).  With :math:`\bar c = \sum_s c_s`, :math:`T = \bar c\,\rho` where :math:`\rho` is the
*c-weighted prevalence* of correct items.  It is estimated by the maximiser of the weighted mixture
log-likelihood

.. math::

    \ell(\rho) = \sum_s c_s \log\bigl(\rho L_1(x_s) + (1-\rho) L_0(x_s)\bigr), \qquad
    \ell'(\rho) = \sum_s c_s\,\kappa(\lambda_s, \rho), \quad
    \kappa(\lambda, \rho) = \frac{e^{\lambda} - 1}{1 + \rho(e^{\lambda} - 1)} .

:math:`\ell` is concave, so :math:`\hat\rho \in [0, 1]` is unique; :math:`\mathbb E[\ell'(\rho)] = 0` at the
true prevalence (over the draws and the votes, since :math:`\sum_v L_1(v) - L_0(v) = 0`), so
:math:`\hat\rho` is consistent (an M-estimator); at an interior root
:math:`\hat\rho = \sum_s c_s\,\mathrm{post}_s(\hat\rho) / \bar c`, the mean posterior
:math:`P(f = 1 \mid v_{x_s})` under the prior :math:`\hat\rho` (EM's fixed point).  Each functional has its own
prior, its own prevalence: a system's items are judged against that system's precision, not the crowd's
class prior (a pooled prior pulls every system towards the pool).  Precision is :math:`\hat\pi_i =
\hat\rho_{C_i}`, recall :math:`\hat r_i = \hat\theta_i\,\hat\nu_i` with
:math:`\hat\nu_i = \bar a_i \hat\rho_{A_i} / (\bar b_i \hat\rho_{B_i})` (clipped to [0, 1]); all lie in [0, 1].
Certain votes (:math:`\lambda = \pm\infty`) give :math:`\hat\rho = \sum c f / \bar c`: the joint estimator in
its self-normalised (Hájek) form.

**Variance** (law of total variance, three independent sources), each by linearisation
(:math:`\hat\rho - \rho \approx \sum_s c_s \kappa_s / J`, :math:`J = \sum_s c_s \kappa_s^2 = -\ell''`):

1. *the draws*, given the votes: the stratified variance of the influence values
   :math:`u_s = c_s \kappa_s / J` (for :math:`\hat T = \bar c\hat\rho`: :math:`c_s\hat\rho + \bar c\,u_s`);
2. *the votes*: an item's votes are drawn once, however often the item is drawn, so they add
   :math:`\sum_x \tilde c(x)^2\,\mathrm{Var}(\kappa(\lambda(v_x), \rho) \mid f(x)) / J^2` where
   :math:`\tilde c(x) = \mathbb E[\sum_{s: x_s = x} c_s]` (:math:`p_i(x)` for precision) -- a sum over the
   population, estimated over the draws as :math:`\sum_s r_s\,\tilde c(x_s)^2 V(x_s)/J^2` with the
   importance ratio :math:`r_s = (w_{ij}/n_j)/q_i(x_s)`; :math:`V(x)` is the variance over the item's
   :math:`2^k` vote patterns (its own workers' confusions) given each class, mixed by the item's posterior.
   For a system of 6 items drawn 150 times this is the variance of 6 noisy labels, not of 150
   (:mod:`.vote_variance`).
   *At a bound* (:math:`\hat\pi_i = 0` or 1, every item's votes on one side) :math:`J` is replaced in this term
   by the expected information :math:`\sum_s c_s\,V(x_s)` when that is larger: the observed :math:`J` then
   holds none of the contrary vote patterns that :math:`V` weighs, whose :math:`\kappa` is unbounded there
   (:math:`1 - e^{-\lambda}` at :math:`\rho = 1`), and the linearisation pairing them gave one contrary
   pattern a pull of 12 on a prevalence of 60 items (60 correct items at crowd accuracy 0.9 estimated at 1 had
   [0.004, 1]; with the expected information [0.947, 1], about a binomial 60 of 60);
3. *the confusions*: their bootstrap replicates move every :math:`\lambda`; the estimates refitted under each
   replicate (draws and votes held) spread by the confusions' share of the variance.  A refit, not the delta
   method: where the crowd barely tells the classes apart (a hard relation type) the prevalence is far from
   linear in :math:`\lambda`, and the linearisation overstated the spread up to threefold.

The interval is Wilson's at the effective sample size :math:`\hat e(1-\hat e)/\widehat{\mathrm{Var}}`
(:func:`~unpooled.core.estimators.intervals.wilson`): inside [0, 1] and around the estimate.

References
----------
A. P. Dawid, A. M. Skene. Maximum likelihood estimation of observer error-rates using the EM algorithm.
*Applied Statistics* 28(1):20-28, 1979.
L. A. Stefanski, D. D. Boos. The calculus of M-estimation. *The American Statistician* 56(1):29-38, 2002.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from .rows import group_totals, unique_rows



@dataclass(frozen=True)
class CrowdVotes:
    r"""Verification answers about the design's instances, and the workers' confusions.

    Attributes
    ----------
    item : ndarray of int, shape (A,)
        The universe index (a column of ``Design.P``) of the instance each answer is about.
    worker : ndarray of int, shape (A,)
        The worker (``0..W-1``).
    yes : ndarray of bool, shape (A,)
        The answer: the instance is correct.
    sens, fpr : ndarray of float, shape (W,)
        Each worker's :math:`P(\text{yes} \mid \text{correct})` and :math:`P(\text{yes} \mid \text{incorrect})`,
        strictly inside (0, 1).
    sens_rep, fpr_rep : ndarray of float, shape (R, W), optional
        Replicates of the confusions (e.g. a bootstrap of the answers they were fitted on): their spread is the
        confusions' own uncertainty, carried into every interval.
    strata : ndarray of int, shape (n_items,), optional
        The stratum of every universe instance (:mod:`.strata`): prevalences are then fitted per (target,
        stratum) and combined.  With rates per (worker, stratum), ``worker`` is the answer's row of the rates.
    """

    item: np.ndarray
    worker: np.ndarray
    yes: np.ndarray
    sens: np.ndarray
    fpr: np.ndarray
    sens_rep: np.ndarray | None = None
    fpr_rep: np.ndarray | None = None
    strata: np.ndarray | None = None

    @property
    def n_workers(self) -> int:
        return len(self.sens)

    @property
    def replicates(self) -> int:
        return 0 if self.sens_rep is None else int(self.sens_rep.shape[0])


def crowd_votes(item, worker, yes, sens, fpr, sens_rep=None, fpr_rep=None, *, n_items: int | None = None,
                strata=None) -> CrowdVotes:
    """Check the arrays once and return a :class:`CrowdVotes`; ``n_items``: the size of the universe (needed
    with ``strata``, the stratum of each universe instance)."""
    item = np.asarray(item, dtype=np.int64)
    worker = np.asarray(worker, dtype=np.int64)
    yes = np.asarray(yes)
    if not (item.shape == worker.shape == yes.shape) or item.ndim != 1:
        raise InvalidInputError(f"item, worker, yes: expected equal 1-d shapes, got {item.shape}, {worker.shape}, "
                                f"{yes.shape}")
    if yes.size and not np.isin(yes, (0, 1)).all():
        raise InvalidInputError("yes: expected booleans (0 or 1)")
    yes = yes.astype(bool)
    sens = np.asarray(sens, dtype=float)
    fpr = np.asarray(fpr, dtype=float)
    if sens.ndim != 1 or sens.shape != fpr.shape:
        raise InvalidInputError(f"sens, fpr: expected equal 1-d shapes, got {sens.shape}, {fpr.shape}")
    for name, a in (("sens", sens), ("fpr", fpr)):
        if a.size and not ((a > 0) & (a < 1)).all():
            raise InvalidInputError(f"{name}: expected rates strictly inside (0, 1), got {a.min():.6g}..{a.max():.6g}")
    W = len(sens)
    if worker.size and (worker.min() < 0 or worker.max() >= W):
        raise InvalidInputError(f"worker: expected indices in [0, {W}), got [{worker.min()}, {worker.max()}]")
    if item.size and (item.min() < 0 or (n_items is not None and item.max() >= n_items)):
        raise InvalidInputError(f"item: expected universe indices in [0, {n_items}), got [{item.min()}, {item.max()}]")
    if (sens_rep is None) != (fpr_rep is None):
        raise InvalidInputError("sens_rep, fpr_rep: give both or neither")
    if sens_rep is not None:
        sens_rep = np.asarray(sens_rep, dtype=float)
        fpr_rep = np.asarray(fpr_rep, dtype=float)
        if sens_rep.ndim != 2 or sens_rep.shape[1] != W or sens_rep.shape != fpr_rep.shape:
            raise InvalidInputError(f"sens_rep, fpr_rep: expected shape (R, {W}), got {sens_rep.shape}, "
                                    f"{fpr_rep.shape}")
        sens_rep = np.clip(sens_rep, 1e-9, 1 - 1e-9)
        fpr_rep = np.clip(fpr_rep, 1e-9, 1 - 1e-9)
    if strata is not None:
        strata = np.asarray(strata)
        if n_items is None or strata.shape != (n_items,) or (
                strata.size and (not np.issubdtype(strata.dtype, np.integer) or strata.min() < 0)):
            raise InvalidInputError(f"strata: expected a non-negative integer stratum for each of the {n_items} "
                                    f"universe instances, got shape {strata.shape}")
        strata = strata.astype(np.int64)
    return CrowdVotes(item, worker, yes, sens, fpr, sens_rep, fpr_rep, strata)


@dataclass(frozen=True)
class KeyedAnswers:
    """Verification answers addressed by instance key (files, the service's database), with the confusions.

    :meth:`on` places them on a design's universe as :class:`CrowdVotes`; answers about instances outside it
    (gold controls, other corpora's keys) are left out.
    """

    key: tuple
    worker: np.ndarray
    yes: np.ndarray
    sens: np.ndarray
    fpr: np.ndarray
    sens_rep: np.ndarray | None = None
    fpr_rep: np.ndarray | None = None
    #: relation -> stratum of the crowd model (rates per (worker, stratum)); None: one stratum
    strata: dict | None = None

    def on(self, index, n_items: int, relations=None) -> CrowdVotes:
        """The answers on the universe ``index`` (key -> universe index) of ``n_items`` instances; ``relations``:
        each universe instance's relation, which places it in its stratum (:attr:`strata`)."""
        u = np.array([index.get(k, -1) for k in self.key], dtype=np.int64)
        keep = u >= 0
        st = None
        if self.strata is not None and relations is not None:
            other = len(self.strata)
            st = np.fromiter((self.strata.get(r, other) for r in relations), np.int64, count=n_items)
        return crowd_votes(u[keep], np.asarray(self.worker)[keep], np.asarray(self.yes)[keep], self.sens, self.fpr,
                           self.sens_rep, self.fpr_rep, n_items=n_items, strata=st)


# -- the kernel functions ---------------------------------------------------------
def kappa(lam, rho):
    r""":math:`\kappa(\lambda, \rho) = (e^\lambda - 1)/(1 + \rho(e^\lambda - 1))`, the score of one item
    (:math:`1/\rho` for certain yes, :math:`-1/(1-\rho)` for certain no), computed without overflow."""
    return _kappa_at(_exp_parts(lam), rho)


def _exp_parts(lam) -> tuple[np.ndarray, np.ndarray]:
    r"""What :func:`kappa` and :func:`_loglik_terms` need of ``lam``, computed once when one ``lam`` meets many
    ``rho`` (a root search, a bisection): with :math:`e = e^{-|\lambda|}`, the numerator
    :math:`n = \pm(1 - e)` (the sign of :math:`\lambda`) and :math:`c = e` for :math:`\lambda > 0`, else 1, so
    that :math:`\kappa = n/(c + \rho n)` and the log-likelihood term is :math:`\log(c + \rho n)`."""
    lam = np.asarray(lam, float)
    e = np.exp(-np.abs(lam))
    pos = lam > 0
    return np.where(pos, 1.0 - e, e - 1.0), np.where(pos, e, 1.0)


def _kappa_at(parts, rho):
    """:func:`kappa` from :func:`_exp_parts` of ``lam``."""
    num, c = parts
    with np.errstate(divide="ignore", invalid="ignore"):
        den = np.multiply(num, rho)
        if not isinstance(den, np.ndarray) or den.ndim == 0:
            return num / (c + den)
        den += c  # in place: these arrays are (target, item) pairs x vote patterns, millions of entries
        return np.divide(num, den, out=den)


def _kappa_offsets(parts) -> np.ndarray:
    r""":math:`b = c/n` of :func:`_exp_parts`, so that :math:`\kappa = 1/(\rho + b)` (``+inf`` where :math:`n = 0`:
    :math:`\kappa = 0`): one addition and one reciprocal a :math:`\rho`, for the refits (:func:`_refit_block`) that
    evaluate every item at many :math:`\rho`.  The same :math:`\kappa` as :func:`_kappa_at` to rounding (the sign
    of an infinite :math:`\kappa` at a zero denominator aside: :math:`\rho = 1` with a certain no)."""
    num, c = parts
    with np.errstate(divide="ignore"):
        return c / num


def posterior(lam, rho):
    r""":math:`P(f = 1 \mid v) = \rho e^\lambda / (\rho e^\lambda + 1 - \rho)`."""
    lam = np.asarray(lam, float)
    with np.errstate(divide="ignore", over="ignore"):
        lo = np.log(np.clip(rho, 0, 1)) - np.log1p(-np.clip(rho, 0, 1))
        return 1.0 / (1.0 + np.exp(-(lam + lo)))


def _unique_rows(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``M`` and each row's index among them (the balance heuristic gives every target the
    same proposal, so recall's denominator has one row m times): rows grouped by two random projections, each
    checked equal to its group's first row."""
    m = M.shape[0]
    if m <= 1:
        return M, np.zeros(m, np.int64)
    h = M @ np.random.default_rng(0).random((M.shape[1], 2))
    _, first, inv = np.unique(h, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    rep = first[inv]
    same = np.array([i == r or np.array_equal(M[i], M[r]) for i, r in enumerate(rep.tolist())])
    if not same.all():  # a projection collision between different rows: keep them apart
        return M, np.arange(m)
    return M[first], inv


def _merge_items(M: np.ndarray, lam: np.ndarray, groups, merge=False):
    """``M``, ``lam`` and ``groups`` with the items of equal log ratios (under every replicate) and of the same
    group merged into one, their coefficients added: every row's likelihood is a sum over items of a function of
    the item's log ratio, so its fits are the same (up to the order of the sums), on as many items as there are
    distinct vote patterns, a number bounded whatever the number of items (``bench rescore``'s 12 annotators
    answering 3 times: 1,150-1,200 patterns among 2,550-2,740 items at 20 submissions)."""
    merge = item_merge(lam, groups) if merge is False else merge
    if merge is None:
        return M, lam, groups
    first, inv = merge
    merged = group_totals(M, inv, len(first))
    return merged, lam[..., first], None if groups is None else np.asarray(groups)[first]


def item_merge(lam: np.ndarray, groups=None) -> tuple[np.ndarray, np.ndarray] | None:
    """Which items :func:`_merge_items` merges: ``(first, inv)``, the first item of each merged one and the merged
    one of each item; None when none merge.  It depends on ``lam`` (and ``groups``) alone: fits of many rows' ``M``
    on the same log ratios compute it once (:func:`prevalence`'s ``merge``)."""
    lam = np.asarray(lam, float)
    K = lam.shape[-1]
    if K < 2:
        return None
    key = np.round(np.atleast_2d(lam), 12)  # one pattern's log ratio, summed in another order, differs by ulps
    key = key if groups is None else np.vstack([key, np.asarray(groups, float)])
    first, inv = unique_rows(key.T)
    return None if len(first) == K else (first, inv)


def _fitted_pairs(M, lam, groups, merge):
    """What :func:`prevalence` fits: ``M`` and ``lam`` with their items merged (:func:`_merge_items`), the groups,
    the positive (row, item, coefficient) pairs of its distinct rows, the distinct row of each row and their
    number.  A sparse ``M`` (a batch of rows over many items) gives its pairs alone, every row fitted as it is."""
    if sp.issparse(M):
        if groups is not None:
            raise InvalidInputError("prevalence: groups are not available with a sparse M")
        M, lam = _merge_sparse(M, np.asarray(lam, float), merge)
        return M, lam, None, _positive_pairs(M), np.arange(M.shape[0]), M.shape[0]
    M, lam, groups = _merge_items(np.atleast_2d(np.asarray(M, float)), np.asarray(lam, float), groups, merge)
    uniq, inv = _unique_rows(M)
    rows, cols = np.nonzero(uniq > 0)
    return M, lam, groups, (rows, cols, uniq[rows, cols]), inv, uniq.shape[0]


def _merge_sparse(M, lam: np.ndarray, merge=False):
    """:func:`_merge_items` of a sparse ``M`` (no groups): its columns of one merged item added (in the order of
    their items), the merged items' log ratios."""
    M = sp.csr_matrix(M, dtype=float)
    merge = item_merge(lam) if merge is False else merge
    if merge is not None:
        first, inv = merge
        C = M.tocoo()
        M = sp.csr_matrix((C.data, (C.row, inv[C.col])), shape=(M.shape[0], len(first)))
        lam = lam[..., first]
    M.sum_duplicates()
    return M, lam


def _positive_pairs(M) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (row, column, value) of the positive entries of a canonical sparse ``M``, row by row, columns in order
    (as ``np.nonzero`` of the dense matrix gives them)."""
    C = M.tocoo()
    keep = C.data > 0
    return C.row[keep].astype(np.int64), C.col[keep].astype(np.int64), C.data[keep]


def _positive_pairs_of(M, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (row, column, value) of the positive entries of ``M`` (dense, or sparse: many rows over many items) in
    the rows ``ok``, row by row."""
    if sp.issparse(M):
        M.sum_duplicates()
        rows, cols, w = _positive_pairs(M)
        keep = ok[rows]
        return rows[keep], cols[keep], w[keep]
    rows, cols = np.nonzero((M > 0) & ok[:, None])
    return rows, cols, M[rows, cols]


#: the replicates' refits of :func:`prevalence` work on at most about this many (row, item) pairs at once (memory)
PAIRS_AT_ONCE = 1 << 23


def prevalence(M, lam, *, tol: float = 1e-10, max_iter: int = 100, groups=None, n_groups: int = 1,
               information: bool = True, start=None, merge=False) -> tuple[np.ndarray, np.ndarray | None]:
    r"""The maximiser :math:`\hat\rho \in [0, 1]` of every row's weighted mixture log-likelihood, and :math:`J`.

    Parameters
    ----------
    M : array_like or sparse matrix, shape (m, K)
        Non-negative coefficients of each row's functional on each item (sparse: many rows, each on a few of many
        items, fitted from their positive entries alone; no ``groups``).
    lam : array_like, shape (K,)
        The items' log likelihood ratios :math:`\lambda` (``±inf``: certain).

    Returns
    -------
    rho : ndarray, shape (m,)
        :math:`\hat\rho` (NaN for a row without positive coefficients).
    J : ndarray, shape (m,)
        :math:`\sum_u M_u \kappa(\lambda_u, \hat\rho)^2`, minus the second derivative of the log-likelihood.

    With ``groups`` (the group ``0..n_groups-1`` of each item, :mod:`.strata`) every row is fitted in each group
    separately: ``rho`` and ``J`` are ``(m, n_groups)``.  ``lam`` of shape ``(R, K)``: every row is fitted under
    each of ``R`` replicates of the log ratios, ``rho`` and ``J`` get a leading axis ``R``.
    ``information=False``: ``J`` is not computed (None), which saves a pass over the pairs.

    ``start`` (the shape of one fit's ``rho``: the fit under the point log ratios) makes the fit a *refit* near it,
    as the spread of the refits under the confusions' replicates needs (:mod:`.from_votes`): Newton steps of each
    row's likelihood from ``start`` (to :data:`REFIT_TOL`) instead of a search to ``tol``,
    ``J`` None.  A row whose maximiser is a bound gets instead one Newton step of its likelihood continued past
    it, :math:`b + \ell'(b)/J(b)` (outside [0, 1]): the spread of the refits is then not cut off at the bound, as
    it would be by a refit clipped there (a point estimate at 1 had refits at 1 and no confusions' variance).
    Refits near ``start`` take two or three passes over the pairs (the search: about ten).

    ``merge``: :func:`item_merge` of ``lam`` and ``groups``, when the caller fits many ``M`` on the same log ratios
    (computed here otherwise).

    Notes
    -----
    :math:`\ell'(\rho) = \sum_u M_u\kappa(\lambda_u, \rho)` decreases in :math:`\rho`: 0 when
    :math:`\ell'(0) \le 0`, 1 when :math:`\ell'(1) \ge 0`, else its root by Newton's method kept inside a
    shrinking bracket (bisection when a step leaves it).

    Examples
    --------
    Certain votes give the weighted share of correct items:

    >>> import numpy as np
    >>> rho, _ = prevalence(np.array([[1.0, 1.0, 2.0]]), np.array([np.inf, -np.inf, np.inf]))
    >>> round(float(rho[0]), 12)
    0.75
    """
    M, lam, groups, (rows, cols, w), inv, n_rows = _fitted_pairs(M, lam, groups, merge)
    G = int(n_groups) if groups is not None else 1
    grows = rows * G + (np.asarray(groups)[cols] if groups is not None else 0)
    n = n_rows * G
    if start is not None:  # per unique row (identical rows have the same fit), then per (row, group)
        one = np.zeros(n_rows, np.int64)
        one[inv] = np.arange(M.shape[0])
        start = np.asarray(start, float).reshape(M.shape[0], G)[one].ravel()
    lam2 = np.atleast_2d(lam)
    shape = (lam2.shape[0], -1, G) if groups is not None else (lam2.shape[0], -1)
    if start is not None:  # the refits, under each replicate (R, m[, G]) or under the one (m[, G])
        rho = _refit_replicates(grows, w, cols, _exp_parts(lam2), n, start).reshape(shape)[:, inv]
        return (rho if lam.ndim == 2 else rho[0]), None
    if lam.ndim == 2:  # replicates of the log ratios: every row fitted under each, (R, m[, G])
        rho, J = _fit_replicates(lam, cols, grows, w, n, tol, max_iter, information)
        return rho.reshape(shape)[:, inv], None if J is None else J.reshape(shape)[:, inv]
    num, den = _exp_parts(lam)
    rho, J = _prevalence_pairs(grows, w, (num[cols], den[cols]), n, tol, max_iter, information)
    if groups is None:
        return rho[inv], None if J is None else J[inv]
    return rho.reshape(-1, G)[inv], None if J is None else J.reshape(-1, G)[inv]



def _fit_replicates(lam, cols, grows, weights, n, tol, max_iter, information):
    """:func:`prevalence`'s search under each replicate ``lam[r]`` of the log ratios, several replicates at a time
    (each fit is its own ``n`` rows): ``rho`` and ``J`` (None without ``information``), flat (R * n,)."""
    Rn = lam.shape[0]
    step = max(1, PAIRS_AT_ONCE // max(len(cols), 1))  # replicates fitted together
    num, den = _exp_parts(lam)  # once per (replicate, item), gathered for the pairs
    got = [_prevalence_pairs((np.arange(b - a)[:, None] * n + grows[None, :]).ravel(), np.tile(weights, b - a),
                             (num[a:b, cols].ravel(), den[a:b, cols].ravel()), (b - a) * n, tol, max_iter,
                             information)
           for a, b in ((a, min(Rn, a + step)) for a in range(0, Rn, step))]
    rho = np.concatenate([g[0] for g in got])
    return rho, (np.concatenate([g[1] for g in got]) if information else None)

#: a refit (:func:`prevalence`'s ``start``) stops after a Newton step smaller than this (its error is then of the
#: order of the step squared), or after :data:`REFIT_STEPS` steps
REFIT_TOL, REFIT_STEPS = 1e-3, 8


def _pair_sums(parts_of_pairs, r, m: int):
    r"""Per row of ``m``: :math:`\sum w\kappa` and :math:`\sum w\kappa^2` at ``r`` (per row) over the
    (row, weight, :func:`_exp_parts`) pairs."""
    rw, ww, pp = parts_of_pairs
    k = _kappa_at(pp, r[rw])
    with np.errstate(invalid="ignore"):
        wk = ww * k
        return np.bincount(rw, weights=wk, minlength=m), np.bincount(rw, weights=wk * k, minlength=m)


def _refit_replicates(rows: np.ndarray, w: np.ndarray, cols: np.ndarray, parts, m: int, start: np.ndarray
                      ) -> np.ndarray:
    """:func:`prevalence`'s refit of ``m`` rows under each replicate of the log ratios, ``(R, m)``: Newton steps from
    ``start`` (clipped to [0, 1]) until a step is below :data:`REFIT_TOL`.  A step out of [0, 1] goes to the bound;
    a row at a bound whose step points outwards has its maximiser there, and its refit is the bound plus that step
    (the likelihood continued).  The pairs (``rows``, ``w``, ``cols``: their item) are the same in every replicate,
    only the items' :func:`_exp_parts` ``parts`` (``(R, items)`` each) differ, so the refits run on (pair,
    replicate) arrays of the items' :func:`_kappa_offsets` (one gather a block), summed per row by one sparse
    product, for blocks of replicates of about :data:`PAIRS_AT_ONCE` values."""
    order = np.argsort(rows, kind="stable")  # pairs by row: a row's prevalence is repeated over its pairs
    rows, w, cols = rows[order], w[order], cols[order]
    live = np.bincount(rows, weights=w, minlength=m) > 0
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))])
    S = sp.csr_matrix((w, np.arange(len(rows)), indptr), shape=(m, len(rows)))  # the rows' weighted sums
    off = np.ascontiguousarray(_kappa_offsets(parts).T)  # (items, R)
    Rn = off.shape[1]
    out = np.empty((m, Rn))
    for r0, r1 in _row_chunks(indptr, max(1, REFIT_VALUES // Rn)):  # rows apart: each row's refit is its own
        p0, p1 = indptr[r0], indptr[r1]
        Sc = S[r0:r1][:, p0:p1]
        step = max(1, PAIRS_AT_ONCE // max(p1 - p0, 1))
        for a in range(0, Rn, step):
            b = min(Rn, a + step)
            out[r0:r1, a:b] = _refit_block(Sc, off[cols[p0:p1], a:b], live[r0:r1], start[r0:r1])
    return out.T


#: the refits work on blocks of rows of about this many (pair, replicate) values (a few MB: in cache)
REFIT_VALUES = 1 << 18


def _row_chunks(indptr: np.ndarray, pairs: int) -> list[tuple[int, int]]:
    """Ranges of rows (``indptr``: their pairs, in order) of about ``pairs`` pairs each (at least one row)."""
    m = len(indptr) - 1
    cut = np.searchsorted(indptr, np.arange(pairs, indptr[-1], pairs))
    edges = np.unique(np.concatenate([[0], np.clip(cut, 1, m), [m]]))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _refit_block(S, off, live0: np.ndarray, start: np.ndarray) -> np.ndarray:
    """:func:`_refit_replicates` for some replicates (``off``: (pair, replicate), the pairs' :func:`_kappa_offsets`;
    ``S``: the rows' weighted sums over the pairs), each step over the replicates that still have a row refitting
    and the rows that still have a replicate refitting (many rows fitted at once, :mod:`.breakdown`'s groups, mostly
    stop early); ``(m, replicates)``."""
    R = off.shape[1]
    live = np.repeat(live0[:, None], R, axis=1)
    rho = np.where(live, np.clip(np.nan_to_num(start), 0.0, 1.0)[:, None], np.nan)
    edge = live & ((rho == 0) | (rho == 1))
    idx = np.arange(R)  # the replicates off holds
    rows = np.arange(len(live0))  # the rows S and off hold (a row's pairs together, rows in order)
    counts = np.diff(S.indptr)  # pairs per row, in order
    for _ in range(REFIT_STEPS):
        busy = np.flatnonzero(live.any(0))
        if not len(busy):
            break
        if len(busy) < len(idx):
            off, idx = off[:, np.searchsorted(idx, busy)], busy
        on = live[rows][:, idx].any(1)  # rows whose refit goes on (the others keep their values: dropped)
        if on.sum() < 0.75 * len(rows):
            pk = np.repeat(on, counts)
            off, S = off[pk], S[on][:, pk]
            rows, counts = rows[on], counts[on]
        at = np.ix_(rows, idx)
        r, lv, ed = rho[at], live[at], edge[at]
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.repeat(np.nan_to_num(r), counts, axis=0)
            k += off
            np.reciprocal(k, out=k)  # kappa at each pair's row's prevalence
            g = S @ k
            k *= k
            j = S @ k
            step = np.where(lv & (j > 0), g / np.where(j > 0, j, 1.0), 0.0)
        new = r + step
        outward = ed & (((r <= 0) & (step < 0)) | ((r >= 1) & (step > 0)))
        ed = lv & ~outward & ((new < 0) | (new > 1))
        rho[at] = np.where(lv, np.where(ed, np.clip(new, 0.0, 1.0), new), r)
        edge[at] = ed
        live[at] = lv & ~outward & (ed | (np.abs(step) > REFIT_TOL))
    return rho


def _prevalence_pairs(rows: np.ndarray, w: np.ndarray, parts: tuple[np.ndarray, np.ndarray], m: int, tol: float,
                      max_iter: int, information: bool = True):
    """:func:`prevalence` of ``m`` rows given as (row, weight, :func:`_exp_parts` of the log ratio) pairs, searched
    from the share of items whose votes lean to yes."""
    total = np.bincount(rows, weights=w, minlength=m)
    rho = np.full(m, np.nan)
    live = total > 0

    def sums(r, on=None):  # per row: sum w kappa and sum w kappa^2 at r (m,); ``on``: those pairs only
        return _pair_sums((rows, w, parts) if on is None else on, r, m)

    if not live.any():
        return rho, np.zeros(m) if information else None
    at0, at1 = live & ~(sums(np.zeros(m))[0] > 0), live & ~(sums(np.ones(m))[0] < 0)
    leans_yes = parts[0] > 0  # lambda > 0
    r = np.bincount(rows, weights=w * leans_yes, minlength=m) / np.where(live, total, 1)
    r = np.clip(r, 1e-6, 1 - 1e-6)
    r[at0], r[at1 & ~at0] = 0.0, 1.0
    todo = live & ~(at0 | at1)
    lo, hi = np.zeros(m), np.ones(m)
    prev = np.full(m, np.inf)
    on = (rows, w, parts)  # the pairs of rows still searched (fewer every step: the sums of the others are unused)
    for _ in range(max_iter):
        if not todo.any():
            break
        on = _pairs_of(todo, *on) if not todo[on[0]].all() else on
        g, j = sums(r, on)
        pos = todo & (g > 0)
        neg = todo & ~(g > 0)
        lo[pos] = np.maximum(lo[pos], r[pos])
        hi[neg] = np.minimum(hi[neg], r[neg])
        # Newton's step on the logit scale (a root near 0 or 1 is reached geometrically, not by halving); a
        # bisection of the bracket when the step leaves it or the last step did not halve |l'|
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            eta = np.log(r) - np.log1p(-r) + np.where(j > 0, g / (j * r * (1 - r)), 0.0)
            new = 1.0 / (1.0 + np.exp(-eta))
        inside = (new >= lo) & (new <= hi) & np.isfinite(new)
        step = np.abs(new - r)
        done = inside & (step <= tol * np.minimum(new, 1 - new))
        out = ~inside | (np.abs(g) > 0.5 * prev)
        new = np.where(out & ~done, (lo + hi) / 2, new)
        prev = np.where(out, np.inf, np.abs(g))
        done |= hi - lo <= tol
        r = np.where(todo, new, r)
        todo &= ~done
    rho[live] = r[live]
    if not information:
        return rho, None
    return rho, sums(np.nan_to_num(rho))[1]


def _pairs_of(which: np.ndarray, rows, w, parts):
    """The (row, weight, parts) pairs of the rows ``which`` (a mask over rows)."""
    keep = which[rows]
    return rows[keep], w[keep], (parts[0][keep], parts[1][keep])


def _loglik_terms(lam, rho):
    r""":math:`\log(1 + \rho(e^\lambda - 1))` up to a constant per item (``λ`` for ``λ > 0``), without overflow:
    :math:`\log(\rho + (1-\rho)e^{-\lambda})` for :math:`\lambda > 0`, :math:`\log(1 - \rho + \rho e^{\lambda})`
    otherwise."""
    return _loglik_at(_exp_parts(lam), rho)


def _loglik_at(parts, rho):
    """:func:`_loglik_terms` from :func:`_exp_parts` of ``lam``."""
    num, c = parts
    with np.errstate(divide="ignore"):
        return np.log(c + rho * num)


def profile_interval(M, lam, rho, J, var, confidence: float, *, side=None, iters: int = 60, tol: float = 1e-10):
    r"""Per row, the likelihood-ratio interval of :func:`prevalence`'s :math:`\hat\rho`, calibrated by its
    variance: :math:`\{\rho : 2(\ell(\hat\rho) - \ell(\rho)) \le z^2\,J\,\widehat{\mathrm{Var}}(\hat\rho)\}`.

    The weighted log-likelihood's curvature :math:`J` gives the variance :math:`1/J` of a plain likelihood;
    scaling the statistic by :math:`1/(J\widehat{\mathrm{Var}})` (the sandwich variance, with the votes' and the
    confusions' parts) makes it a Wald statistic near :math:`\hat\rho` while keeping the likelihood's shape near
    0 and 1: an estimate of 0.994 whose evidence against 1 is two items' split votes reaches 1, where a
    symmetric interval would not.  Rows with ``var`` 0 or undefined give ``(rho, rho)``.  ``M`` may be sparse
    (:func:`prevalence`'s).  ``side``: per row,
    +1 for the upper bound only, -1 for the lower only, 0 for neither (the other bound is then ``rho``);
    default both.
    """
    from .intervals import z_of

    M = sp.csr_matrix(M, dtype=float) if sp.issparse(M) else np.atleast_2d(np.asarray(M, float))
    m = M.shape[0]
    z2 = z_of(confidence) ** 2
    rho = np.asarray(rho, float)
    side = np.full(m, 2) if side is None else np.asarray(side)
    lo, hi = rho.copy(), rho.copy()
    ok = np.isfinite(rho) & (np.asarray(var) > 0) & (np.asarray(J) > 0) & (side != 0)
    rows, cols, w = _positive_pairs_of(M, ok)
    if not len(rows):
        return lo, hi
    lr = lam[cols]
    thr = np.where(ok, z2 * np.asarray(J) * np.asarray(var), 0.0)
    r0 = np.nan_to_num(rho)

    parts = _exp_parts(lr)

    def ll(r, pairs=None):  # per row: sum of w * log-lik terms at r (m,); pairs: only these (row, item) pairs
        if pairs is None:
            return np.bincount(rows, weights=w * _loglik_at(parts, r[rows]), minlength=m)
        pr, pw, pp = pairs
        return np.bincount(pr, weights=pw * _loglik_at(pp, r[pr]), minlength=m)

    def restrict(todo):
        sel = np.flatnonzero(todo[rows])
        return (rows[sel], w[sel], (parts[0][sel], parts[1][sel])), int(todo.sum())

    top = ll(r0)

    def bound(edge, want):
        # the root of f(r) = 2(l(rho) - l(r)) - thr between rho (f = -thr <= 0) and the edge (f > 0): f is convex
        # and monotone there (the log-likelihood is concave), so the Illinois variant of regula falsi keeps the
        # bracket and converges superlinearly; a bisection while f at the bracket's outer end is infinite (a
        # certain vote against the edge).  The bound returned is the bracket's inner end (f <= 0), to within
        # ``tol`` of the root or with f within ``tol`` of 0 relative to the threshold.  Each step evaluates the
        # log-likelihood of the rows still searching only.
        at = np.full(m, float(edge))
        with np.errstate(invalid="ignore"):
            fb = 2 * (top - ll(at)) - thr
        reach = ~(fb > 0)
        a, b = r0.copy(), at.copy()
        fa = -thr.copy()
        f_in = fa.copy()  # f at the inner end (fa is halved by the Illinois rule)
        todo = want & ~reach
        side = np.zeros(m, np.int8)  # which end moved last: -1 inner, +1 outer
        pairs, n_at = restrict(todo)
        for _ in range(iters):
            todo &= (np.abs(b - a) > tol) & (f_in < -tol * thr)
            n = int(todo.sum())
            if not n:
                break
            if n <= n_at // 2:
                pairs, n_at = restrict(todo)
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                x = b - fb * (b - a) / (fb - fa)
            ok = np.isfinite(fb) & np.isfinite(x) & ((x - a) * (x - b) < 0)
            x = np.where(ok, x, (a + b) / 2)
            with np.errstate(invalid="ignore"):
                fx = 2 * (top - ll(x, pairs)) - thr
            inner = todo & ~(fx > 0)
            outer = todo & (fx > 0)
            fb = np.where(inner & (side == -1), fb / 2, fb)  # Illinois: the end kept twice is halved
            fa = np.where(outer & (side == 1), fa / 2, fa)
            a, fa, f_in = np.where(inner, x, a), np.where(inner, fx, fa), np.where(inner, fx, f_in)
            b, fb = np.where(outer, x, b), np.where(outer, fx, fb)
            side = np.where(inner, -1, np.where(outer, 1, side)).astype(np.int8)
        return np.where(want, np.where(reach, at, a), r0)

    lo = np.where(ok & (side != 1), bound(0.0, ok & (side != 1)), rho)
    hi = np.where(ok & (side != -1), bound(1.0, ok & (side != -1)), rho)
    return lo, hi


def precision_interval(M, lam, p, J, var, confidence: float, n_fallback, *, profile=None):
    """The interval of precisions estimated from votes: the hull of Wilson's at the effective size (fallback
    ``n_fallback``) and the calibrated likelihood-ratio interval (:func:`profile_interval`).  Near 0 and 1 split
    votes pull the estimate inwards, and the likelihood's shape reaches the bound where a symmetric interval
    would stop short (a perfect system estimated at 0.994 had [0.960, 0.999]); with few items and weak votes
    the likelihood is flat on a wide range that Wilson's interval at the items' count does not cover (the
    hull is then conservative, the trade ``unpooled simulate regimes`` measures).  ``profile``: per row, whether
    the estimate is one prevalence of ``M``'s row (default all; Wilson's interval alone elsewhere)."""
    from .intervals import wilson

    wlo, whi = wilson(p, var, confidence, n_fallback)
    side = np.where(whi < 1, 1, 0) + np.where(wlo > 0, -1, 0)
    side = np.where((whi < 1) & (wlo > 0), 2, side)  # both bounds
    if profile is not None:
        side = np.where(profile, side, 0)
    plo, phi = profile_interval(M, lam, p, J, var, confidence, side=side)
    if profile is not None:
        plo, phi = np.where(profile, plo, wlo), np.where(profile, phi, whi)
    return np.minimum(wlo, plo), np.maximum(whi, phi)


def recall_interval(M, lam, rho_a, J, scale, theta, var_theta, r, var, confidence: float, n_fallback, *,
                    profile=None):
    r"""The interval of recall estimated from votes, :math:`\hat r = \hat\theta\,\hat\nu` with
    :math:`\hat\nu = k\,\hat\rho_A`, :math:`k = \bar a/\hat B` (``scale`` :math:`= \hat\theta k`): the product of
    two intervals from independent samples (:func:`~unpooled.core.estimators.intervals.monotone_interval`, correlation 0).
    :math:`\theta`'s (the exhaustive sample's) is Wilson's at its own variance ``var_theta`` (fallback
    ``n_fallback``); :math:`\nu`'s (the draws' and votes') is the hull of Wilson's (fallback
    ``n_fallback`` :math:`\hat\theta`) and :math:`k` times the
    calibrated likelihood-ratio interval of the numerator's prevalence :math:`\rho_A` (:func:`profile_interval`) on
    the side of the bound :math:`\hat\rho_A` is nearer to, capped at 1, both at :math:`\nu`'s part of recall's variance,
    :math:`(\widehat{\mathrm{Var}}\,\hat r - \hat\nu^2\,\mathrm{Var}\,\hat\theta)/(\hat\theta^2 + \mathrm{Var}\,\hat\theta)`
    (from :math:`\mathrm{Var}(\theta\nu) = \theta^2\sigma_\nu^2 + \nu^2\sigma_\theta^2 + \sigma_\theta^2\sigma_\nu^2`).
    A target without an exhaustive instance in its pool (:math:`\hat\theta = 0`) gets Wilson's on :math:`\hat r`.

    Why the profile: a system of low precision has few correct items among its draws; with a noisy crowd the
    numerator's mixture likelihood is flat near 0 and its maximiser often *is* 0, where Wilson's interval stops
    short of 0 (precision 0.05 beside a system of 2,000 instances, crowd 0.8: 90% recall intervals covered 0.82
    of the time; ``unpooled simulate regimes``).  Why the product: the exhaustive sample's part of the variance is
    symmetric and has nothing to do with :math:`\rho_A`'s likelihood; pushed through that likelihood near
    :math:`\rho_A = 1` (a near-perfect system) it stretched the lower side several times too far (and so does
    :math:`\nu`'s own design part on the side away from the bound).
    ``profile``: per row, whether the numerator is one prevalence (default all; elsewhere :math:`\nu`'s
    interval is Wilson's alone).
    """
    from .intervals import monotone_interval, wilson

    theta, r = np.asarray(theta, float), np.asarray(r, float)
    var, var_theta = np.asarray(var, float), np.asarray(var_theta, float)
    scale = np.asarray(scale, float)
    live = (theta > 0) & (scale > 0)
    th = np.where(live, theta, 1.0)
    k = np.where(live, scale / th, 1.0)
    nu = np.where(live, r / th, 0.0)
    var_nu = np.where(live, np.maximum(var - nu ** 2 * var_theta, 0.0) / (th ** 2 + var_theta), 0.0)
    # Wilson's fallback size for nu: n_fallback * theta, so that nu's "near 0" is where recall's is
    wlo, whi = wilson(nu, var_nu, confidence, np.maximum(np.asarray(n_fallback, float) * th, 1.0))
    # the likelihood's shape on the side of the nearer bound only (where the normal approximation fails)
    high = np.nan_to_num(np.asarray(rho_a, float)) > 0.5
    side = np.where(live & high & (whi < 1), 1, np.where(live & ~high & (wlo > 0), -1, 0))
    if profile is not None:
        side = np.where(profile, side, 0)
    plo, phi = profile_interval(M, lam, rho_a, J, var_nu / k ** 2, confidence, side=side)
    nu_ci = np.minimum(wlo, k * plo), np.minimum(np.maximum(whi, k * phi), 1.0)
    if profile is not None:  # nu is not one prevalence times k there: Wilson's alone
        nu_ci = np.where(profile, nu_ci[0], wlo), np.where(profile, nu_ci[1], whi)
    th_ci = wilson(theta, var_theta, confidence, n_fallback)
    lo, hi = monotone_interval(np.multiply, theta, nu, th_ci, nu_ci, 0.0)
    rlo, rhi = wilson(r, var, confidence, n_fallback)
    return np.where(live, lo, rlo), np.where(live, hi, rhi)


def item_log_lr(votes: CrowdVotes, n_items: int, sens=None, fpr=None, *, items=None) -> np.ndarray:
    r""":math:`\lambda(x)` of every universe item (0 without votes); ``sens``/``fpr``: ``(W,)`` or ``(R, W)``
    confusions to use instead of the fitted ones (then ``(R, n_items)``); ``items``: only these (sorted)
    universe indices, in their order."""
    if items is not None:
        K = len(items)
        where = np.searchsorted(items, votes.item)
        keep = (where < K) & (items[np.minimum(where, K - 1)] == votes.item) if K else np.zeros(len(votes.item), bool)
        votes = CrowdVotes(where[keep], votes.worker[keep], votes.yes[keep], votes.sens, votes.fpr,
                           votes.sens_rep, votes.fpr_rep)
        n_items = K
    s = votes.sens if sens is None else np.asarray(sens, float)
    e = votes.fpr if fpr is None else np.asarray(fpr, float)
    ly = np.log(s) - np.log(e)            # a yes vote's log ratio per worker
    ln = np.log1p(-s) - np.log1p(-e)      # a no vote's
    if s.ndim == 1:
        per = np.where(votes.yes, ly[votes.worker], ln[votes.worker])
        return np.bincount(votes.item, weights=per, minlength=n_items)
    # (R, W): one sparse product per kind of answer
    W = s.shape[1]
    Y = sp.csr_matrix((votes.yes.astype(float), (votes.item, votes.worker)), shape=(n_items, W))
    N = sp.csr_matrix(((~votes.yes).astype(float), (votes.item, votes.worker)), shape=(n_items, W))
    return np.asarray((Y @ ly.T + N @ ln.T).T)


def majority_labels(votes: CrowdVotes, n_items: int) -> np.ndarray:
    """Per universe item: 1 where a strict majority of its answers say yes (ties: 0), NaN without answers."""
    from ..annotation.aggregation import strict_majority

    n = np.bincount(votes.item, minlength=n_items).astype(float)
    y = np.bincount(votes.item, weights=votes.yes.astype(float), minlength=n_items)
    return np.where(n > 0, strict_majority(y, n).astype(float), np.nan)
