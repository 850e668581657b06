r"""``unpooled simulate ranks``: "is A better than B?" -- paired comparisons and rank intervals on shared labels.

Worlds of systems of a target F1 (recall 0.8 F1, and the precision that gives that F1), built to share a given part of their output
(:func:`make_systems`): a system's output is its true and false instances, and ``overlap`` of it is taken from a
reference system (as many of the reference's true and false instances as both hold).  Each trial draws
``draws`` instances from every system (uniform over its output), labels them once (labels shared: an instance
drawn by two systems has one label), samples ``n0`` exhaustively found true instances, and scores every system
with the joint estimator (:func:`unpooled.core.estimators.estimate`), from the labels or from crowd votes (three
answers per drawn instance, workers of known error rates with replicates of their uncertainty).

Two experiments in one table:

* **power** (two systems, F1 0.50 and 0.50 + delta, overlap 98%, 50%, 0%): the share of trials where the paired
  comparison (:func:`unpooled.core.ranking.rank_intervals` on the covariances of
  :func:`unpooled.core.estimators.paired.covariances`) puts the better system first (*right*), the worse first
  (*wrong*), and where the replaced rule of marginal intervals (:func:`marginal_tie_groups`) separates them.
* **coverage** (six systems in a chain of shared output, 1 to 8 points apart; and six a point apart, each sharing
  98% with the next): the family-wise coverage of the rank intervals, the share of trials where every system's
  rank interval holds its true rank (target >= 0.90).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..estimators import estimate, make_design
from ..estimators.intervals import f1_score
from ..estimators.noisy import crowd_votes
from ..estimators.paired import covariances
from ..ranking import rank_intervals

CONFIDENCE = 0.90
#: a system of F1 f has recall RECALL_SHARE * f and precision f r / (2 r - f) (so that disjoint systems fit)
RECALL_SHARE = 0.8


@dataclass(frozen=True)
class RanksCell:
    """One row: systems of F1 ``f1`` (:func:`make_systems`), each sharing ``overlap[k]`` of its output with system
    ``ref[k]`` (-1: none); ``votes``: scored from crowd votes."""

    name: str
    f1: tuple[float, ...]
    ref: tuple[int, ...]
    overlap: tuple[float, ...]
    votes: bool = False
    draws: int = 300
    n0: int = 300
    true_instances: int = 2000


def default_cells() -> list[RanksCell]:
    """The power cells (overlap 98%, 50%, 0% by F1 difference 1, 2, 5 points, labels and votes) and the
    coverage cells (six systems, labels and votes)."""
    cells = []
    for votes in (False, True):
        tag = "votes" if votes else "labels"
        for ov in (0.98, 0.5, 0.0):
            for delta in (0.01, 0.02, 0.05):
                cells.append(RanksCell(f"power ov{round(100 * ov)} d{round(100 * delta)} {tag}", (0.50, 0.50 + delta),
                                       (-1, 0), (0.0, ov), votes))
        cells.append(RanksCell(f"coverage 6 {tag}", (0.40, 0.45, 0.50, 0.52, 0.60, 0.61), (-1, 0, 1, 2, 3, 4),
                               (0.0, 0.5, 0.9, 0.98, 0.5, 0.98), votes))
        # a point apart, each sharing 98% with the next: every difference is decided by its covariance
        cells.append(RanksCell(f"coverage 6 close {tag}", (0.50, 0.51, 0.52, 0.53, 0.54, 0.55), (-1, 0, 1, 2, 3, 4),
                               (0.0, 0.98, 0.98, 0.98, 0.98, 0.98), votes))
    return cells


def make_systems(cell: RanksCell, rng) -> tuple[np.ndarray, list[np.ndarray]]:
    """The world: per universe instance whether it is true, and each system's output (instance indices).

    System ``k`` of F1 ``f`` holds ``RECALL_SHARE * f * T`` of the ``T`` true instances at precision
    :math:`fr/(2r-f)`; ``overlap[k]`` of its output comes from ``ref[k]``'s (true and false instances in the
    proportions both allow), the rest from instances ``ref[k]`` does not hold."""
    T = cell.true_instances
    U = T + 2 * T * len(cell.f1)
    truth = np.zeros(U, bool)
    truth[:T] = True
    out: list[np.ndarray] = []
    for k, f in enumerate(cell.f1):
        nt = int(round(RECALL_SHARE * f * T))
        nf = int(round(nt / (f * RECALL_SHARE / (2 * RECALL_SHARE - 1)) - nt))  # precision f r / (2r - f)
        got_t = got_f = np.zeros(0, np.int64)
        base = np.zeros(0, np.int64)
        if cell.ref[k] >= 0 and cell.overlap[k] > 0:
            base = out[cell.ref[k]]
            bt, bf = base[truth[base]], base[~truth[base]]
            share = int(round(cell.overlap[k] * (nt + nf)))
            sf = min(len(bf), nf, int(round(share * nf / (nt + nf))))
            st = min(len(bt), nt, share - sf)
            sf = min(len(bf), nf, share - st)
            got_t, got_f = rng.choice(bt, st, replace=False), rng.choice(bf, sf, replace=False)
        elif cell.ref[k] >= 0:
            base = out[cell.ref[k]]
        free = np.setdiff1d(np.arange(U), base)  # the rest: instances the reference does not hold
        ft, ff = free[truth[free]], free[~truth[free]]
        got_t = np.r_[got_t, rng.choice(ft, nt - len(got_t), replace=False)]
        got_f = np.r_[got_f, rng.choice(ff, nf - len(got_f), replace=False)]
        out.append(np.r_[got_t, got_f].astype(np.int64))
    return truth, out


def true_scores(truth: np.ndarray, systems: list[np.ndarray]) -> np.ndarray:
    """The true F1 of every system."""
    T = truth.sum()
    out = []
    for s in systems:
        tp = truth[s].sum()
        p, r = tp / len(s), tp / T
        out.append(float(f1_score(p, r)))
    return np.array(out)


def _votes(items: np.ndarray, truth: np.ndarray, rng, *, workers: int = 8, sens: float = 0.85, fpr: float = 0.15,
           replicates: int = 20):
    """Three answers per item from workers of known rates, with replicates of the rates' uncertainty."""
    it = np.repeat(items, 3)
    wk = np.concatenate([rng.choice(workers, 3, replace=False) for _ in items])
    yes = np.where(truth[it], rng.random(len(it)) < sens, rng.random(len(it)) < fpr)
    s, e = np.full(workers, sens), np.full(workers, fpr)
    sr = np.clip(s + rng.normal(0, 0.02, (replicates, workers)), 0.01, 0.99)
    er = np.clip(e + rng.normal(0, 0.02, (replicates, workers)), 0.01, 0.99)
    return crowd_votes(it, wk, yes, s, e, sr, er, n_items=len(truth))


def one_trial(cell: RanksCell, truth: np.ndarray, systems: list[np.ndarray], rng):
    """Draws, labels (or votes), the joint estimate and its covariances: ``(scores, covariances)``."""
    m, U = len(systems), len(truth)
    rows = np.repeat(np.arange(m), [len(s) for s in systems])
    cols = np.concatenate(systems)
    vals = np.concatenate([np.full(len(s), 1 / len(s)) for s in systems])
    P = sp.csr_matrix((vals, (rows, cols)), shape=(m, U))
    src = np.repeat(np.arange(m), cell.draws)
    xs = np.concatenate([rng.choice(s, cell.draws) for s in systems])
    y0 = rng.choice(np.flatnonzero(truth), cell.n0, replace=False)
    g0 = np.array([np.isin(y0, s) for s in systems])
    d = make_design(P, src, xs, truth[xs].astype(float), g0)
    votes = _votes(np.unique(xs), truth, rng) if cell.votes else None
    sc = estimate(d, confidence=CONFIDENCE, votes=votes)
    return sc, covariances(d, sc, votes=votes)


def marginal_tie_groups(values, low, high) -> np.ndarray:
    """The tie groups the leaderboard showed before paired comparisons (kept here for the comparison): by
    decreasing value, a system joins the current group while its interval reaches the group leader's lower bound
    (``high >= leader's low``), else starts the next."""
    v, lo, hi = (np.asarray(a, float) for a in (values, low, high))
    order = np.argsort(-v, kind="stable")
    groups = np.zeros(len(v), np.int64)
    g, leader_low = 0, None
    for i in order:
        if leader_low is None or not (hi[i] >= leader_low):
            g, leader_low = g + 1, lo[i]
        groups[i] = g
    return groups


@dataclass
class RanksResult:
    """A cell's counts over its trials."""

    cell: RanksCell
    trials: int = 0
    right: int = 0
    wrong: int = 0
    marginal: int = 0
    covered: int = 0
    width: list = field(default_factory=list)
    se_ratio: list = field(default_factory=list)

    def summary(self) -> dict:
        n = max(self.trials, 1)
        return {"cell": self.cell.name, "systems": len(self.cell.f1), "votes": self.cell.votes,
                "trials": self.trials, "paired_right": self.right / n, "paired_wrong": self.wrong / n,
                "marginal_separate": self.marginal / n, "rank_coverage": self.covered / n,
                "mean_rank_width": float(np.mean(self.width)) if self.width else float("nan"),
                "se_diff_over_se_sum": float(np.mean(self.se_ratio)) if self.se_ratio else float("nan")}


def run_cell(cell: RanksCell, trials: int, *, seed: int = 0) -> RanksResult:
    """``trials`` independent worlds and trials of ``cell``."""
    rng = np.random.default_rng(seed)
    res = RanksResult(cell)
    for _ in range(trials):
        truth, systems = make_systems(cell, rng)
        true_f1 = true_scores(truth, systems)
        sc, cv = one_trial(cell, truth, systems, rng)
        rk = rank_intervals(sc.f1.value, cv.cov["f1"], CONFIDENCE, seed=int(rng.integers(1 << 31)))
        true_rank = 1 + np.argsort(np.argsort(-true_f1, kind="stable"), kind="stable")
        res.trials += 1
        res.covered += bool(np.all((rk.rank_lo <= true_rank) & (true_rank <= rk.rank_hi)))
        res.width.append(float(np.mean(rk.rank_hi - rk.rank_lo + 1)))
        best, worst = int(np.argmax(true_f1)), int(np.argmin(true_f1))
        res.right += bool(rk.better[best, worst])
        res.wrong += bool(rk.better[worst, best])
        g = marginal_tie_groups(sc.f1.value, sc.f1.lo, sc.f1.hi)
        res.marginal += bool(g[best] != g[worst])
        pr = rk.pairs
        k = int(np.flatnonzero(((pr.i == best) & (pr.j == worst)) | ((pr.i == worst) & (pr.j == best)))[0])
        res.se_ratio.append(float(pr.diff.se[k] / (sc.f1.se[best] + sc.f1.se[worst])))
    return res


def format_table(rows: list[dict]) -> str:
    """The table: per cell the paired method's right and wrong separations of the best and worst systems, the
    marginal tie groups' separations, the family-wise coverage of the rank intervals and their mean width."""
    head = (f"{'cell':<26} {'m':>2} {'trials':>6} {'paired right':>12} {'wrong':>6} {'marginal sep':>12} "
            f"{'rank cover':>10} {'width':>6} {'se_d/(se_a+se_b)':>16}")
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(f"{r['cell']:<26} {r['systems']:>2} {r['trials']:>6} {r['paired_right']:>12.3f} "
                   f"{r['paired_wrong']:>6.3f} {r['marginal_separate']:>12.3f} {r['rank_coverage']:>10.3f} "
                   f"{r['mean_rank_width']:>6.2f} {r['se_diff_over_se_sum']:>16.3f}")
    out.append("paired: simultaneous 90% max-|t| intervals of the F1 differences from the joint design's "
               "covariances; marginal: the old tie groups (a system's 90% interval reaching the leader's lower bound); "
               "rank cover: every rank interval holds the true rank (target >= 0.90)")
    return "\n".join(out)
