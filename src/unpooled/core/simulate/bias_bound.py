r"""How small can the bias of a precision estimate in [0, 1] be near 0 and 1, and at what cost in spread?

The latent-class estimate of a precision from crowd votes is kept in [0, 1], so near a bound its errors are
one-sided: under a 0.7 crowd, precision 0.99 is estimated about 2 points low (``unpooled simulate regimes``,
docs/method/regimes.md).  Is that a limit of every estimator, or of the maximum-likelihood one?  Exactly, in the
simplest world: ``n`` items each judged by ``votes`` answers of a crowd with *known* sensitivity :math:`s` and
false-positive rate :math:`e` (with fitted rates the problem is only harder).  The counts :math:`c_k` of items
with :math:`k` "yes" votes are sufficient, multinomial with cell probabilities
:math:`q_k(P) = P\,\mathrm{Bin}(k; v, s) + (1 - P)\,\mathrm{Bin}(k; v, e)`; an estimator is any :math:`T(c) \in
[0, 1]`, and its bias :math:`E_P[T] - P` is linear in :math:`T`.

:func:`bias_bounded` finds, among every estimator whose bias is at most ``bound`` on a grid of :math:`P` over
[0, 1], the one with the least mean squared error averaged over the grid: a quadratic programme separable in the
outcomes, solved through its dual (one multiplier per grid point and sign; the primal solution is
:math:`T_c = \mathrm{clip}((2 b_c - \sum_P \nu_P \pi_P(c)) / 2 a_c, 0, 1)`, :math:`a_c = \sum_P \pi_P(c)`,
:math:`b_c = \sum_P P\,\pi_P(c)`).  Beside it, the maximum-likelihood estimate
(:func:`unpooled.core.estimators.noisy.prevalence` on the items' log likelihood ratios), as the service fits it.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import minimize
from scipy.stats import binom, multinomial

from ..errors import InvalidInputError
from ..estimators.noisy import prevalence

#: the precisions at which :func:`bias_bounded` reports both estimators
AT = (0.0, 0.05, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 1.0)


def vote_counts(n: int, votes: int) -> np.ndarray:
    """Every way ``n`` items fall into ``votes + 1`` classes (items with 0, 1, ... ``votes`` "yes" votes)."""
    K = votes + 1
    out = []
    for cut in itertools.combinations(range(n + K - 1), K - 1):
        edges = (-1,) + cut + (n + K - 1,)
        out.append([edges[j + 1] - edges[j] - 1 for j in range(K)])
    return np.array(out, dtype=np.int64)


def bias_bounded(n: int, *, sensitivity: float, false_positive_rate: float, bound: float, votes: int = 3,
                 grid: int = 51, at=AT) -> dict:
    """The estimator of least grid-averaged MSE whose |bias| is at most ``bound`` everywhere on ``grid`` points of
    [0, 1] (module docs), beside the maximum-likelihood estimate: per precision of ``at``, each one's bias, spread
    (sd) and root mean squared error.  Outcomes whose probability is below 1e-13 at every grid point are left out.

    Examples
    --------
    >>> got = bias_bounded(20, sensitivity=0.7, false_positive_rate=0.3, bound=0.02, at=(1.0,))
    >>> got["max_abs_bias"] <= 0.02 + 1e-6, round(got["rows"][0]["mle_bias"], 3)
    (True, -0.045)
    """
    if n < 1 or n > 200 or votes < 1 or votes > 5:
        raise InvalidInputError(f"n: 1 to 200 items and votes: 1 to 5 (the outcomes are enumerated), got {n}, {votes}")
    if not 0 <= false_positive_rate < sensitivity <= 1:
        raise InvalidInputError("expected 0 <= false_positive_rate < sensitivity <= 1, got "
                                f"{false_positive_rate}, {sensitivity}")
    if not 0 < bound < 0.5:
        raise InvalidInputError(f"bound: expected a bias bound in (0, 0.5), got {bound}")
    ks = np.arange(votes + 1)
    yes, no = binom.pmf(ks, votes, sensitivity), binom.pmf(ks, votes, false_positive_rate)
    Ps = np.linspace(0.0, 1.0, grid)
    counts = vote_counts(n, votes)
    L = np.array([multinomial.pmf(counts, n, P * yes + (1 - P) * no) for P in Ps])
    keep = L.max(0) > 1e-13
    L, counts = L[:, keep], counts[keep]
    a, b = L.sum(0), L.T @ Ps

    def estimator(nu):
        return np.clip((2 * b - L.T @ nu) / (2 * a), 0.0, 1.0)

    def neg_dual(x):
        nu = x[:grid] - x[grid:]
        T = estimator(nu)
        gap = L @ T - Ps
        value = (a * T * T - 2 * b * T).sum() + nu @ gap - bound * x.sum()
        return -value, -np.concatenate([gap - bound, -gap - bound])

    fit = minimize(neg_dual, np.zeros(2 * grid), jac=True, method="L-BFGS-B", bounds=[(0, None)] * (2 * grid),
                   options={"maxiter": 10000, "ftol": 1e-15, "gtol": 1e-12})
    T = estimator(fit.x[:grid] - fit.x[grid:])
    with np.errstate(divide="ignore"):
        lam = np.log(yes) - np.log(no)
    mle, _ = prevalence(counts.astype(float), lam, information=False)
    rows = []
    for P in at:
        p = multinomial.pmf(counts, n, P * yes + (1 - P) * no)
        p = p / p.sum()
        row = {"precision": float(P)}
        for name, est in (("mle", mle), ("bounded", T)):
            m = float(p @ est)
            sd = float(np.sqrt(p @ (est - m) ** 2))
            row |= {f"{name}_bias": m - P, f"{name}_sd": sd, f"{name}_rmse": float(np.hypot(m - P, sd))}
        rows.append(row)
    return {"n": n, "votes": votes, "sensitivity": sensitivity, "false_positive_rate": false_positive_rate,
            "bound": bound, "max_abs_bias": float(np.abs(L @ T - Ps).max()), "converged": bool(fit.success),
            "outcomes": int(keep.sum()), "rows": rows}
