r"""Ranks that respect uncertainty: simultaneous pairwise comparisons, rank intervals, and tie groups from them.

**Pairwise differences.** For systems :math:`i, j` with estimates :math:`\hat\mu` and estimated covariance
:math:`\hat\Sigma` (from the joint design: :mod:`.estimators.paired`), the difference
:math:`\hat\mu_i - \hat\mu_j` has standard error
:math:`s_{ij} = (\hat\Sigma_{ii} + \hat\Sigma_{jj} - 2\hat\Sigma_{ij})^{1/2}`; systems that share most of their
output share most of their draws and labels, so :math:`\hat\Sigma_{ij}` is large and :math:`s_{ij}` far
smaller than the marginal intervals suggest.

**Simultaneous control (max-|t|).** The intervals :math:`\hat\mu_i - \hat\mu_j \pm c\,s_{ij}` hold for *every*
pair at once with probability :math:`1-\alpha` when :math:`c` is the :math:`1-\alpha` quantile of

.. math::

    \max_{i<j} \frac{|Z_i - Z_j|}{s_{ij}}, \qquad Z \sim N(0, \hat\Sigma),

computed from Gaussian multiplier draws of :math:`Z` (:func:`critical_value`; a fixed seed, so a leaderboard is
reproducible).  This is the single-step max-t procedure of Mogstad, Romano, Shaikh & Wilhelm (2024, §3, the
"all ranks simultaneously" confidence set) with the asymptotic normal approximation they allow.  Max-|t| was
chosen over Holm because the pairwise differences are strongly dependent (every difference of :math:`i` shares
:math:`\hat\mu_i`, and shared output correlates systems): the max accounts for that dependence, Holm's
Bonferroni steps do not, and with two systems both are the plain paired test.  Above :data:`MAX_TABLE_PAIRS`
pairs the Gaussian draws' work (draws x pairs) is bounded by the Bonferroni value
:math:`c = z_{1-\alpha/(2K)}` over the :math:`K` pairs (valid under any dependence, at least as large).

**Rank intervals.** With :math:`B_i` the systems significantly better than :math:`i` (their interval above 0) and
:math:`W_i` those significantly worse, :math:`i`'s rank lies in

.. math::

    \bigl[\,1 + |B_i|,\; m - |W_i|\,\bigr]

for every :math:`i` at once whenever all pairwise intervals hold, so the rank intervals have family-wise coverage
at least :math:`1-\alpha` (Mogstad et al. 2024, Theorem 3.1; Klein, Wright & Wieczorek 2020 build the same sets
from simultaneous marginal intervals, which is more conservative).  Ranks count from 1 = best (largest value).

**Tie groups** follow: ordered by estimate, a new group starts after position :math:`k` when every system above
is significantly better than every system below (their rank intervals do not overlap across the cut); every
member of a group shares its first position as competition rank (1, =2, =2, 4).  Systems with a NaN value come
last, ranks :math:`[n+1, m]` among the :math:`n` with values, in one group.

**Work.** The table holds :math:`m(m-1)/2` pairs; this module works on :math:`\hat\Sigma` (:math:`m\times m`)
and arrays of pairs, so hundreds of systems are tens of thousands of pairs (:data:`MAX_TABLE_PAIRS` bounds the
Gaussian draws); the covariance itself is computed by :mod:`.estimators.paired`, which bounds its own work.

References
----------
M. Mogstad, J. P. Romano, A. M. Shaikh, D. Wilhelm. Inference for ranks with applications to mobility across
neighbourhoods and academic achievement across countries. *Review of Economic Studies* 91(1):476-518, 2024.
T. Klein, A. Wright, J. Wieczorek. A joint confidence region for an overall ranking of populations.
*Journal of the Royal Statistical Society C* 69(3):589-606, 2020.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from .errors import InvalidInputError
from .estimators.results import ConfidenceInterval, Estimate

#: above this many pairs the critical value is Bonferroni's, not the max-|t| quantile of Gaussian draws
MAX_TABLE_PAIRS = 20_000
#: Gaussian multiplier draws for the max-|t| quantile
DRAWS = 4000
#: a difference whose standard error is below this is exact (a system drawn completely, labels shared)
EXACT_SE = 1e-12


@dataclass(frozen=True)
class Pairs:
    """The pairwise table: for each pair ``(i[k], j[k])`` (``i < j``) the difference ``est_i - est_j`` as one
    :class:`~.estimators.results.Estimate` of arrays (``diff.value``, ``diff.se``, the simultaneous interval
    ``diff.lo``, ``diff.hi``, built ``'simultaneous'``; its method the critical value's, ``'max-t'`` or
    ``'bonferroni'``; no sample size of its own: ``n`` NaN), ``sign``: +1 when ``i`` is significantly better, -1 when
    ``j`` is, 0 when the data cannot tell; ``critical``: the :math:`c` of the intervals."""

    i: np.ndarray
    j: np.ndarray
    diff: Estimate
    sign: np.ndarray
    critical: float

    def better(self, m: int) -> np.ndarray:
        """``(m, m)`` bool: ``[a, b]`` when ``a`` is significantly better than ``b``."""
        out = np.zeros((m, m), bool)
        out[self.i[self.sign > 0], self.j[self.sign > 0]] = True
        out[self.j[self.sign < 0], self.i[self.sign < 0]] = True
        return out


@dataclass(frozen=True)
class Ranking:
    """Rank intervals and tie groups of ``m`` systems: ``order`` (the leaderboard's: by group, then estimate,
    NaN last), ``rank`` (competition rank of the tie group), ``rank_lo``/``rank_hi`` (the rank interval),
    ``group`` (1 = best), ``tied`` (shares its group), ``better`` (``(m, m)``: row significantly better than
    column) and the pairwise table ``pairs``."""

    order: list[int]
    rank: np.ndarray
    rank_lo: np.ndarray
    rank_hi: np.ndarray
    group: np.ndarray
    tied: np.ndarray
    better: np.ndarray
    pairs: Pairs


def _check(values, cov) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(values, dtype=float)
    S = np.asarray(cov, dtype=float)
    if v.ndim != 1:
        raise InvalidInputError(f"values: expected a 1-d array, got shape {v.shape}")
    if S.shape != (len(v), len(v)):
        raise InvalidInputError(f"cov: expected shape ({len(v)}, {len(v)}), got {S.shape}")
    ok = ~np.isnan(v)
    if not np.all(np.isfinite(S[np.ix_(ok, ok)])):
        raise InvalidInputError("cov: expected finite covariances between the systems with values")
    return v, S


def critical_value(cov: np.ndarray, i: np.ndarray, j: np.ndarray, se: np.ndarray, confidence: float, *,
                   draws: int = DRAWS, seed: int = 0, memo=None) -> tuple[float, str]:
    r"""The :math:`1-\alpha` quantile of :math:`\max_k |Z_{i_k} - Z_{j_k}|/s_k`, :math:`Z\sim N(0,\Sigma)`, over
    the pairs with ``se > 0`` (module docs), and the method's name; Bonferroni's value above
    :data:`MAX_TABLE_PAIRS` pairs.

    ``memo``: a cache with ``get(key)`` and ``set(key, value)`` (Django's cache API, a per-process one, ...): the
    value is looked up there first under a digest of every input, and kept there once computed, so that a
    leaderboard rebuilt on the same covariances (another reader, another visibility scope showing the same
    systems) does not draw again.  The draws cost :math:`O(\text{draws}\times K)`: about 0.2 s at 100 systems."""
    live = se > EXACT_SE
    K = int(live.sum())
    alpha = 1 - confidence
    if K == 0:
        return float(norm.ppf(1 - alpha / 2)), "max-t"
    if K > MAX_TABLE_PAIRS:
        return float(norm.ppf(1 - alpha / (2 * K))), "bonferroni"
    key = None
    if memo is not None:
        h = hashlib.blake2b(repr((cov.shape, float(confidence), int(draws), int(seed))).encode(), digest_size=16)
        for a in (cov, i, j, se):
            h.update(np.ascontiguousarray(a).tobytes())
        key = f"unpooled.ranking.critical:{h.hexdigest()}"
        got = memo.get(key)
        if got is not None:
            return float(got[0]), str(got[1])
    m = len(cov)
    w, E = np.linalg.eigh((cov + cov.T) / 2)
    root = E * np.sqrt(np.clip(w, 0.0, None))  # Z = root @ xi
    # each system's pairs with the systems after it as one row; a pair that is not live has an infinite standard
    # error, so its |difference|/s is 0 and never raises a maximum of |differences| (the live pairs' maximum)
    S = np.full((m, m), np.inf)
    S[i[live], j[live]] = se[live]
    rows = [(a, np.flatnonzero(np.isfinite(S[a]))) for a in range(m)]
    rows = [(a, b, S[a, b][:, None]) for a, b in rows if len(b)]
    rng = np.random.default_rng(seed)
    top = np.empty(draws)
    step = max(1, int(4_000_000 // max(K, m)))
    for a in range(0, draws, step):
        Zt = np.ascontiguousarray((rng.standard_normal((min(step, draws - a), m)) @ root.T).T)  # systems x draws
        t = np.zeros(Zt.shape[1])
        for r, b, s in rows:
            d = Zt[b] - Zt[r]
            np.abs(d, out=d)
            d /= s
            np.maximum(t, d.max(axis=0), out=t)
        top[a:a + len(t)] = t
    got = (float(np.quantile(top, confidence)), "max-t")
    if memo is not None:
        memo.set(key, got)
    return got


def pairwise(values, cov, confidence: float = 0.90, *, draws: int = DRAWS, seed: int = 0, memo=None) -> Pairs:
    """Every pairwise difference of the systems with values, with simultaneous intervals (module docs); ``memo``:
    where the critical value is kept (:func:`critical_value`).

    >>> p = pairwise([0.52, 0.50], [[1e-3, 0.99e-3], [0.99e-3, 1e-3]])
    >>> p.sign.tolist(), round(float(p.diff.se[0]), 4)
    ([1], 0.0045)
    """
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    v, S = _check(values, cov)
    ok = np.flatnonzero(~np.isnan(v))
    i, j = (ok[k] for k in np.triu_indices(len(ok), 1))
    diff = v[i] - v[j]
    se = np.sqrt(np.maximum(S[i, i] + S[j, j] - 2 * S[i, j], 0.0))
    sub = S[np.ix_(ok, ok)]
    pos = np.full(len(v), -1)
    pos[ok] = np.arange(len(ok))
    c, method = critical_value(sub, pos[i], pos[j], se, confidence, draws=draws, seed=seed, memo=memo)
    exact = se <= EXACT_SE
    lo = np.where(exact, diff, diff - c * se)
    hi = np.where(exact, diff, diff + c * se)
    # an exact difference decides when it is more than round-off (two systems with the same output: a tie)
    sign = np.where(exact & (np.abs(diff) <= EXACT_SE), 0, np.where(lo > 0, 1, np.where(hi < 0, -1, 0)))
    return Pairs(i, j, Estimate(diff, se, ConfidenceInterval(lo, hi, confidence, "simultaneous"), np.nan, method),
                 sign.astype(np.int64), c)


def rank_intervals(values, cov, confidence: float = 0.90, *, draws: int = DRAWS, seed: int = 0, memo=None
                   ) -> Ranking:
    """Rank intervals, tie groups and competition ranks of every system from simultaneous pairwise comparisons
    (module docs); NaN values last; ``memo``: where the critical value is kept (:func:`critical_value`).

    >>> rk = rank_intervals([0.5, 0.9, 0.85], np.diag([4e-4, 4e-4, 4e-4]))
    >>> rk.order, rk.rank.tolist(), rk.rank_lo.tolist(), rk.rank_hi.tolist(), rk.tied.tolist()
    ([1, 2, 0], [3, 1, 1], [3, 1, 1], [3, 2, 2], [False, True, True])
    """
    v, _ = _check(values, cov)
    m = len(v)
    pairs = pairwise(v, cov, confidence, draws=draws, seed=seed, memo=memo)
    better = pairs.better(m)
    has = ~np.isnan(v)
    n = int(has.sum())
    lo = 1 + better.sum(0)  # systems better than i: column sums
    hi = np.where(has, n - better.sum(1), m)
    lo = np.where(has, lo, n + 1)
    order = sorted(range(m), key=lambda k: (not has[k], -(v[k] if has[k] else 0.0), k))
    group = np.zeros(m, np.int64)
    group[order[:n]] = np.cumsum(np.r_[True, _cuts(better, order[:n])]) if n else []
    group[~has] = (group.max() if n else 0) + 1
    g = int(group.max()) if m else 0
    first = {}
    for pos, k in enumerate(order):
        first.setdefault(int(group[k]), pos + 1)
    rank = np.array([first[int(x)] for x in group], dtype=np.int64)
    size = np.bincount(group, minlength=g + 1)
    return Ranking(order, rank, lo.astype(np.int64), hi.astype(np.int64), group, size[group] > 1, better, pairs)


def _cuts(better: np.ndarray, order: list[int]) -> np.ndarray:
    """For positions ``1..n-1`` of ``order``: whether every system above is significantly better than every
    system from there down (a tie group ends above it), from the block sums of ``better`` in that order."""
    n = len(order)
    B = better[np.ix_(order, order)].astype(np.int64)
    S = B.cumsum(0).cumsum(1)  # S[a, b]: the trues of B[:a+1, :b+1]
    pos = np.arange(1, n)
    block = S[pos - 1, n - 1] - S[pos - 1, pos - 1]  # B[:pos, pos:]
    return block == pos * (n - pos)


def independent_cov(low, high, confidence: float) -> np.ndarray:
    """A diagonal covariance from marginal intervals, :math:`\\sigma_i = (h_i - l_i)/(2z)`: for estimates whose
    covariances are not known (each from its own fit, e.g. entity scores).  Taking them as independent overstates
    the variance of a difference of positively correlated estimates, so the comparisons are conservative there."""
    lo, hi = np.asarray(low, float), np.asarray(high, float)
    z = norm.ppf(0.5 + confidence / 2)
    return np.diag(((hi - lo) / (2 * z)) ** 2)
