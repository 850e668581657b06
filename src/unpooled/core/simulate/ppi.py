r"""Prediction-powered precision against labels alone across regimes (``unpooled simulate ppi``).

Does the PPI++ precision of :mod:`unpooled.core.estimators.ppi` keep the 90% coverage of the label-only joint
estimate, and how much narrower is it?  Per regime (cell), each trial builds a pool of ``pool`` instances, each
correct with probability ``precision``; ``systems`` systems each submit ``size`` of them (one system: all of them;
several: a random ``size`` from a pool of :math:`\lceil size\,(1 + m)/2 \rceil`, so that they overlap and share
draws), each with its own confidence per instance:

* ``informative``: Beta(3, 2) for a correct instance, Beta(2, 3) for a wrong one (a correlation of about 0.45
  with correctness, as a modest extractor's scores);
* ``uninformative``: uniform, independent of correctness;
* ``adversarial``: the informative scores swapped (anti-correlated);
* ``miscalibrated``: :math:`0.9 + 0.1\,s` with :math:`s` informative: every score in [0.9, 1] (overconfident and
  compressed, the ranking kept).

Every system draws ``draws`` instances uniformly with replacement from its own; the labels are the truth.  Both
estimates come from one :func:`~unpooled.core.estimators.ppi.ppi_precision` call (balance heuristic, every
system's draws shared); the truth is the system's realised precision.  With one system the ``oracle`` (the
``ppi_py`` module, when installed) scores the same distinct drawn instances: ``agree`` is the largest difference
between our estimate and ``ppi_mean_pointestimate`` at our coefficient (the same estimator: 0 up to round-off),
and ``ppi_py`` is the coverage and width of its own ``ppi_mean_ci`` (its coefficient clipped to [0, 1], a normal
interval without the finite-population correction), the whole output's confidences as its unlabelled data.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..estimators import make_design
from ..estimators.ppi import ppi_precision
from .precision import overlapping_systems, own_draws

KINDS = ("informative", "uninformative", "adversarial", "miscalibrated")
LEVEL = 0.90


@dataclass(frozen=True)
class PPICell:
    """One regime of :func:`run_cell`."""

    name: str
    confidences: str = "informative"
    size: int = 5000
    systems: int = 1
    precision: float = 0.5
    draws: int = 150


def default_cells() -> list[PPICell]:
    """Every confidence kind x small (30) and large (5,000) systems x one and ten systems sharing draws x precision
    near 0.5 and near 0.95: 150 draws for one large system (the issue's case), 50 each for ten, 20 for a small one."""
    cells = []
    for kind in KINDS:
        for size in (5000, 30):
            for m in (1, 10):
                for prec in (0.5, 0.95):
                    draws = 20 if size < 100 else (150 if m == 1 else 50)
                    cells.append(PPICell(f"{kind[:5]}-{size}x{m}-p{round(100 * prec)}", kind, size, m, prec, draws))
    return cells


def _confidences(kind: str, correct: np.ndarray, rng) -> np.ndarray:
    shape = correct.shape
    good, bad = rng.beta(3, 2, shape), rng.beta(2, 3, shape)
    if kind == "informative":
        c = np.where(correct, good, bad)
    elif kind == "uninformative":
        c = rng.random(shape)
    elif kind == "adversarial":
        c = np.where(correct, bad, good)
    elif kind == "miscalibrated":
        c = 0.9 + 0.1 * np.where(correct, good, bad)
    else:
        raise InvalidInputError(f"confidences: expected one of {', '.join(KINDS)}, got {kind!r}")
    return np.clip(c, 1e-3, 1.0)


def run_trial(cell: PPICell, rng, oracle=None) -> dict:
    """One trial: per system the truth, both estimates with their intervals and the coefficient; with one system
    and an ``oracle``, its figures on the same draws."""
    m = cell.systems
    truth, systems, P = overlapping_systems(m, cell.size, cell.precision, rng)
    conf = _confidences(cell.confidences, np.broadcast_to(truth, (m, len(truth))), rng)
    K = P.astype(bool).multiply(conf).tocsr()
    src, xs = own_draws(systems, cell.draws, rng)
    d = make_design(P, src, xs, truth[xs].astype(float), np.zeros((m, 0), bool))
    r = ppi_precision(d, K, confidence=LEVEL)
    out = {"truth": np.array([truth[s].mean() for s in systems]), "p": r.p.value, "ci": (r.p.lo, r.p.hi),
           "lam": r.lam, "p_labels": r.labels.value, "ci_labels": (r.labels.lo, r.labels.hi)}
    if oracle is not None and m == 1:
        u = np.unique(xs)  # the estimate is the mean over the distinct instances drawn (estimators.finite)
        Y, Yhat, Yu = truth[u].astype(float), conf[0, u], conf[0]
        point = float(np.ravel(oracle.ppi_mean_pointestimate(Y, Yhat, Yu, lam=float(r.lam[0])))[0])
        lo, hi = (float(np.ravel(x)[0]) for x in oracle.ppi_mean_ci(Y, Yhat, Yu, alpha=1 - LEVEL))
        out["oracle"] = {"diff": abs(point - float(r.p.value[0])), "ci": (lo, hi)}
    return out


@dataclass
class PPICellResult:
    cell: PPICell
    trials: int
    rows: dict = field(default_factory=lambda: {k: [] for k in ("err", "width", "hit", "err_l", "width_l", "hit_l",
                                                                   "tuned")})
    oracle: dict = field(default_factory=lambda: {"diff": [], "width": [], "hit": []})
    seconds: float = 0.0

    def add(self, t: dict) -> None:
        truth = t["truth"]
        for sfx, p, (lo, hi) in (("", t["p"], t["ci"]), ("_l", t["p_labels"], t["ci_labels"])):
            self.rows["err" + sfx].extend(np.clip(p, 0, 1) - truth)
            self.rows["width" + sfx].extend(hi - lo)
            self.rows["hit" + sfx].extend((lo - 1e-9 <= truth) & (truth <= hi + 1e-9))
        self.rows["tuned"].extend(t["lam"] != 0)
        if "oracle" in t:
            lo, hi = t["oracle"]["ci"]
            self.oracle["diff"].append(t["oracle"]["diff"])
            self.oracle["width"].append(hi - lo)
            self.oracle["hit"].append(lo <= truth[0] <= hi)

    def summary(self) -> dict:
        r = {k: np.asarray(v, float) for k, v in self.rows.items()}
        n = len(r["hit"])
        out = {"cell": self.cell.name, "trials": self.trials, "intervals": n, "seconds": round(self.seconds, 1)}
        for key, sfx in (("ppi", ""), ("labels", "_l")):
            h = r["hit" + sfx]
            out[key] = {"bias": float(r["err" + sfx].mean()), "width": float(r["width" + sfx].mean()),
                        "coverage": float(h.mean()), "coverage_se": float(math.sqrt(h.mean() * (1 - h.mean()) / n))}
        out["width_ratio"] = out["ppi"]["width"] / out["labels"]["width"] if out["labels"]["width"] > 0 else math.nan
        out["tuned"] = float(r["tuned"].mean())
        if self.oracle["hit"]:
            out["oracle"] = {"max_diff": float(np.max(self.oracle["diff"])),
                             "width": float(np.mean(self.oracle["width"])),
                             "coverage": float(np.mean(self.oracle["hit"]))}
        return out


def run_cell(cell: PPICell, trials: int, *, seed: int = 0, oracle=None, progress=None) -> PPICellResult:
    """``trials`` independent trials of ``cell`` (seeded by ``seed``)."""
    if trials < 1:
        raise InvalidInputError(f"trials: expected at least 1, got {trials}")
    t0 = time.perf_counter()
    res = PPICellResult(cell, trials)
    rng = np.random.default_rng(seed)
    for k in range(trials):
        res.add(run_trial(cell, rng, oracle))
        if progress is not None:
            progress(k + 1, trials)
    res.seconds = time.perf_counter() - t0
    return res


def format_table(rows: list[dict]) -> str:
    head = (f"{'cell':<22}{'n':>6}  {'PPI bias':>8}{'width':>7}{'cover':>7}  {'lab bias':>8}{'width':>7}{'cover':>7}"
            f"{'ratio':>7}{'tuned':>7}  {'ppi_py':>6}{'width':>7}{'agree':>9}")
    lines = [head]
    for r in rows:
        a, b = r["ppi"], r["labels"]
        o = r.get("oracle")
        tail = f"  {o['coverage']:6.3f}{o['width']:7.3f}{o['max_diff']:9.1e}" if o else ""
        lines.append(f"{r['cell']:<22}{r['intervals']:>6}  {100 * a['bias']:+7.2f}p{a['width']:7.3f}{a['coverage']:7.3f}"
                     f"  {100 * b['bias']:+7.2f}p{b['width']:7.3f}{b['coverage']:7.3f}{r['width_ratio']:7.3f}"
                     f"{r['tuned']:7.2f}" + tail)
    lines.append("cell: confidences-size x systems-precision; n: intervals (trials x systems); bias in points; width: "
                 "mean of the 90% intervals; cover: share holding the truth; ratio: PPI width / label width; tuned: "
                 "share with lambda != 0; ppi_py: its ppi_mean_ci's coverage and width (one system); agree: largest "
                 "|ours - ppi_mean_pointestimate at our lambda|")
    return "\n".join(lines)


__all__ = ["KINDS", "PPICell", "PPICellResult", "default_cells", "format_table", "run_cell", "run_trial"]
