r"""Which boundary for the confidence sequences (:mod:`unpooled.core.estimators.anytime`): the table behind the
choice, printed by ``unpooled simulate stopping``.

The one case where every candidate applies: a precision from a system's own draws, i.i.d. labels in {0, 1}
(true precision ``p``), looked at every ``batch`` draws up to ``max_draws``.  Per boundary, the time-uniform
coverage (every look covers) and the mean width at a few sizes:

* ``fixed-n``: Wilson's interval (not a sequence: the reference width);
* ``bonferroni``: Wilson's at :math:`\alpha/L` for the :math:`L` planned looks (valid only at those looks);
* ``mixture``: the normal-mixture sequence the service uses (:func:`~unpooled.core.estimators.anytime.
  anytime_intervals`, tightest at 150 labels), and the same tuned for 1,000;
* ``eb``: the predictable plug-in empirical-Bernstein sequence (Waudby-Smith & Ramdas 2024, Theorem 2),
  :math:`\frac{\sum\lambda_iX_i}{\sum\lambda_i} \pm \frac{\log(2/\alpha) + \sum_i v_i\psi_E(\lambda_i)}
  {\sum\lambda_i}`, :math:`v_i = 4(X_i-\hat\mu_{i-1})^2`, :math:`\psi_E(\lambda) = (-\log(1-\lambda)-\lambda)/4`,
  :math:`\lambda_t = \min(\sqrt{2\log(2/\alpha)/(\hat\sigma^2_{t-1}t\log(1+t))}, 1/2)`;
* ``betting``: the hedged capital process (their Theorem 3), :math:`\{m: \max(\tfrac12K^+_t(m),
  \tfrac12K^-_t(m)) < 1/\alpha\}`, :math:`K^\pm_t(m) = \prod_i(1 \pm \lambda^\pm_i(m)(X_i - m))`,
  :math:`\lambda^+_i(m) = \min(\dot\lambda_i, \tfrac12/m)`, :math:`\lambda^-_i(m) = \min(\dot\lambda_i,
  \tfrac12/(1-m))`, on a grid of ``grid`` values of :math:`m`.

Betting and empirical Bernstein are exact here and need the bounds [0, 1]; the joint estimates' terms have no
such bound (:mod:`unpooled.core.estimators.anytime`), so they can serve only this simple case.

References: I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting. *JRSS B*
86(1), 2024.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..estimators.anytime import anytime_intervals
from ..estimators.intervals import wilson
from ..estimators.results import Estimate

BOUNDARIES = ("fixed-n", "bonferroni", "mixture", "mixture-1000", "eb", "betting")
AT = (100, 250, 1000)


def _mu_sigma(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predictable :math:`\\hat\\mu_{t-1}, \\hat\\sigma^2_{t-1}` (their eq. 13: priors 1/2 and 1/4) per step."""
    t = np.arange(1, x.shape[-1] + 1)
    mu = (0.5 + np.cumsum(x, -1)) / (t + 1)
    sig = (0.25 + np.cumsum((x - mu) ** 2, -1)) / (t + 1)
    prev = lambda a, v: np.concatenate([np.full(a.shape[:-1] + (1,), v), a[..., :-1]], -1)
    return prev(mu, 0.5), prev(sig, 0.25)


def _lambda_dot(x: np.ndarray, alpha: float) -> np.ndarray:
    _, sig = _mu_sigma(x)
    t = np.arange(1, x.shape[-1] + 1)
    return np.sqrt(2 * np.log(2 / alpha) / (sig * t * np.log1p(t)))


def eb_sequence(x: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The predictable plug-in empirical-Bernstein sequence at every step (module docs)."""
    mu_prev, _ = _mu_sigma(x)
    lam = np.minimum(_lambda_dot(x, alpha), 0.5)
    v = 4 * (x - mu_prev) ** 2
    psi = (-np.log1p(-lam) - lam) / 4
    sl = np.cumsum(lam, -1)
    centre = np.cumsum(lam * x, -1) / sl
    half = (np.log(2 / alpha) + np.cumsum(v * psi, -1)) / sl
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def betting_sequence(x: np.ndarray, alpha: float, *, grid: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """The hedged-capital betting sequence at every step for one path ``x`` (module docs), on a grid."""
    m = (np.arange(grid) + 0.5) / grid
    ld = _lambda_dot(x, alpha)[:, None]
    lp, lm = np.minimum(ld, 0.5 / m), np.minimum(ld, 0.5 / (1 - m))
    dev = x[:, None] - m[None, :]
    kp = np.cumsum(np.log1p(lp * dev), 0)
    km = np.cumsum(np.log1p(-lm * dev), 0)
    keep = np.maximum(kp, km) + np.log(0.5) < np.log(1 / alpha)
    anyk = keep.any(1)
    lo = np.where(anyk, m[np.argmax(keep, 1)] - 0.5 / grid, np.nan)
    hi = np.where(anyk, m[grid - 1 - np.argmax(keep[:, ::-1], 1)] + 0.5 / grid, np.nan)
    return lo, hi


def _wilson_like(x: np.ndarray, looks: np.ndarray, confidence: float, kind: str):
    n = looks.astype(float)
    p = np.cumsum(x, -1)[..., looks - 1] / n
    var = p * (1 - p) / n
    nb = np.broadcast_to(n, p.shape)
    if kind == "fixed-n":
        return wilson(p, var, confidence, nb)
    if kind == "bonferroni":
        return wilson(p, var, 1 - (1 - confidence) / len(looks), nb)
    tight = 150.0 if kind == "mixture" else 1000.0
    flat = p.ravel()
    se = np.sqrt(var).ravel()
    fixed = wilson(flat, se ** 2, confidence, nb.ravel())
    e = Estimate.of(flat, se, *fixed, level=confidence, interval="wilson", n=nb.ravel(), method="fixed-n")
    s = SimpleNamespace(p=e, r=e, f1=e, confidence=confidence)
    ci = anytime_intervals(s, n_fallback_p=nb.ravel(), n_fallback_r=nb.ravel(), tight_at=tight).p
    return ci.lo.reshape(p.shape), ci.hi.reshape(p.shape)


@dataclass(frozen=True)
class BoundaryRow:
    boundary: str
    p: float
    trials: int
    uniform_cover: float  # every look covers
    widths: dict  # draws -> mean width


def compare_boundaries(trials: int = 200, *, p: float = 0.7, batch: int = 25, max_draws: int = 1000,
                       confidence: float = 0.90, seed: int = 0, grid: int = 1000) -> list[BoundaryRow]:
    """The table of the module docs for true precision ``p``."""
    rng = np.random.default_rng(seed)
    x = (rng.random((trials, max_draws)) < p).astype(float)
    looks = np.arange(batch, max_draws + 1, batch)
    alpha = 1 - confidence
    out = []
    for b in BOUNDARIES:
        if b in ("eb", "betting"):
            if b == "eb":
                lo, hi = eb_sequence(x, alpha)
            else:
                lo, hi = map(np.array, zip(*(betting_sequence(xi, alpha, grid=grid) for xi in x)))
            lo, hi = lo[:, looks - 1], hi[:, looks - 1]
        else:
            lo, hi = _wilson_like(x, looks, confidence, b)
        cover = ((lo <= p) & (p <= hi)).all(1).mean()
        widths = {int(a): float(np.nanmean(hi[:, np.searchsorted(looks, a)] - lo[:, np.searchsorted(looks, a)]))
                  for a in AT if a in looks}
        out.append(BoundaryRow(b, p, trials, float(cover), widths))
    return out


def format_boundaries(rows: list[BoundaryRow]) -> str:
    sizes = sorted({a for r in rows for a in r.widths})
    head = f"{'boundary':<13} {'p':>5} {'uniform cover':>13} " + " ".join(f"{'width@' + str(a):>10}" for a in sizes)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.boundary:<13} {r.p:>5.2f} {r.uniform_cover:>13.3f} "
                     + " ".join(f"{100 * r.widths.get(a, np.nan):>10.1f}" for a in sizes))
    return "\n".join(lines)


__all__ = ["BOUNDARIES", "BoundaryRow", "betting_sequence", "compare_boundaries", "eb_sequence",
           "format_boundaries"]
