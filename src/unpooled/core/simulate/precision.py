r"""The joint precision from labels when systems overlap and share draws (``unpooled simulate precision``).

Is the label-only joint precision of :mod:`unpooled.core.estimators.joint` (balance heuristic, every system's draws
shared) unbiased, is its standard error right, and do its 90% intervals hold the truth, near precision 0.95 as
near 0.05?  The world of one trial (the same as ``unpooled simulate ppi``'s, :mod:`.ppi`): a pool of instances, each
correct with probability ``precision``; ``systems`` systems each output ``size`` of them (one system: all of
them; several: a random ``size`` from a pool of :math:`\lceil size\,(1 + m)/2 \rceil`, so that they overlap and
share draws).  Every system draws ``draws`` instances uniformly with replacement from its own output; the labels
are the truth, and the truth is each system's realised precision.

Reported per cell over every system of every trial: the mean error (bias), the spread of the estimates (sd, the
standard deviation of the error), the mean standard error the estimator reports, the coverage of its 90% interval
and its mean width, and the share of estimates above 1.  The estimate was once the importance-weighted sum
:math:`\sum_s \omega_{is} f(x_s)`, unbiased with the right standard error but with a spread that does not shrink
towards 1 (the weights' total varies from sample to sample): ten systems of 5,000 instances at precision 0.95
covered 0.586 of the time with a fifth of the estimates above 1; the self-normalised (Hájek) ratio replaced it
(docs/method/index.md §2.2).  Ten systems of 30 instances then covered 0.846: the estimates of variance 0 (no false
instance drawn, though one existed) took a fallback size that treated the unseen instances as known; bounded by
the finite population (:func:`unpooled.core.estimators.intervals.population_size`) they cover 0.928.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..estimators import distribution_matrix, estimate, make_design

LEVEL = 0.90


@dataclass(frozen=True)
class PrecisionCell:
    """One regime of :func:`run_cell`: ``systems`` systems of ``size`` instances, ``draws`` draws each."""

    name: str
    systems: int = 10
    size: int = 5000
    draws: int = 50
    precision: float = 0.95


def default_cells() -> list[PrecisionCell]:
    """Ten overlapping large systems near 0.95, 0.99 and 0.05; ten small ones; three large ones of 150 draws each;
    one system alone (the simple estimator's case: nothing to share)."""
    rows = [(10, 5000, 50, 0.95), (10, 5000, 50, 0.99), (10, 30, 20, 0.95), (3, 5000, 150, 0.95),
            (10, 5000, 50, 0.05), (1, 5000, 150, 0.97)]
    return [PrecisionCell(f"{m}x{size}-n{n}-p{round(100 * p)}", m, size, n, p) for m, size, n, p in rows]


def overlapping_systems(systems: int, size: int, precision: float, rng):
    """The world of one trial (module docs): ``(truth, members, P)``, the truth per pool instance, each system's
    instances (sorted) and their instance-level distributions."""
    pool = size if systems == 1 else math.ceil(size * (1 + systems) / 2)
    truth = rng.random(pool) < precision
    members = ([np.arange(pool)] if systems == 1
               else [np.sort(rng.choice(pool, size, replace=False)) for _ in range(systems)])
    return truth, members, distribution_matrix(members, pool)


def own_draws(members: list[np.ndarray], draws: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``draws`` uniform draws with replacement from each system's own instances: ``(src, xs)``."""
    src = np.repeat(np.arange(len(members)), draws)
    return src, np.concatenate([s[rng.integers(0, len(s), draws)] for s in members])


def run_trial(cell: PrecisionCell, rng) -> dict:
    """One trial: per system the truth, the estimate, its standard error and its interval."""
    truth, members, P = overlapping_systems(cell.systems, cell.size, cell.precision, rng)
    src, xs = own_draws(members, cell.draws, rng)
    d = make_design(P, src, xs, truth[xs].astype(float), np.zeros((cell.systems, 0), bool))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = estimate(d, weights="balance", confidence=LEVEL)
    return {"truth": np.array([truth[x].mean() for x in members]), "p": s.p.value, "se": s.p.se, "ci": (s.p.lo, s.p.hi)}


@dataclass
class PrecisionCellResult:
    cell: PrecisionCell
    trials: int
    rows: dict = field(default_factory=lambda: {k: [] for k in ("err", "se", "hit", "width", "above")})
    seconds: float = 0.0

    def add(self, t: dict) -> None:
        lo, hi = t["ci"]
        self.rows["err"].extend(t["p"] - t["truth"])
        self.rows["se"].extend(t["se"])
        self.rows["hit"].extend((lo - 1e-9 <= t["truth"]) & (t["truth"] <= hi + 1e-9))
        self.rows["width"].extend(hi - lo)
        self.rows["above"].extend(t["p"] > 1 + 1e-12)

    def summary(self) -> dict:
        r = {k: np.asarray(v, float) for k, v in self.rows.items()}
        n = len(r["hit"])
        cov = float(r["hit"].mean())
        return {"cell": self.cell.name, "trials": self.trials, "intervals": n, "seconds": round(self.seconds, 1),
                "bias": float(r["err"].mean()), "sd": float(r["err"].std(ddof=1)) if n > 1 else math.nan,
                "se": float(r["se"].mean()), "coverage": cov, "coverage_se": math.sqrt(cov * (1 - cov) / n),
                "width": float(r["width"].mean()), "above_one": float(r["above"].mean())}


def run_cell(cell: PrecisionCell, trials: int, *, seed: int = 0, progress=None) -> PrecisionCellResult:
    """``trials`` independent trials of ``cell`` (seeded by ``seed``)."""
    if trials < 1:
        raise InvalidInputError(f"trials: expected at least 1, got {trials}")
    t0 = time.perf_counter()
    res = PrecisionCellResult(cell, trials)
    rng = np.random.default_rng(seed)
    for k in range(trials):
        res.add(run_trial(cell, rng))
        if progress is not None:
            progress(k + 1, trials)
    res.seconds = time.perf_counter() - t0
    return res


def format_table(rows: list[dict]) -> str:
    head = f"{'cell':<20}{'n':>6}{'bias':>9}{'sd':>8}{'se':>8}{'cover':>7}{'(se)':>7}{'width':>7}{'P>1':>7}"
    lines = [head]
    for r in rows:
        lines.append(f"{r['cell']:<20}{r['intervals']:>6}{r['bias']:+9.4f}{r['sd']:8.4f}{r['se']:8.4f}"
                     f"{r['coverage']:7.3f}{'(' + format(r['coverage_se'], '.3f') + ')':>7}{r['width']:7.3f}"
                     f"{r['above_one']:7.3f}")
    lines.append("cell: systems x size - draws each - precision (balance heuristic, labels = truth); n: intervals "
                 "(trials x systems); bias, sd: mean and spread of estimate - truth; se: mean reported standard "
                 "error; cover: share of 90% intervals holding the truth; P>1: share of estimates above 1")
    return "\n".join(lines)


__all__ = ["PrecisionCell", "PrecisionCellResult", "default_cells", "format_table", "overlapping_systems",
           "own_draws", "run_cell", "run_trial"]
