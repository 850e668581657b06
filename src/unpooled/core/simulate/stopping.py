r"""``unpooled simulate stopping``: coverage of the intervals of P, R and F1 when the one who watches them stops
on what they show (issue 24), the fixed-:math:`n` interval beside the confidence sequence of
:mod:`unpooled.core.estimators.anytime`.

**World** (one per trial).  System A of ``size_a`` instances and a rival B of ``size_b``, sharing ``shared`` of
A's; each instance is correct with A's precision ``p_a`` (B's own instances with ``p_b``); the truth holds every
correct instance of the pool and ``unfound`` more that no system output (so pool recall
:math:`\theta < 1`).  True precision, recall and F1 are those of the finite world.  The exhaustive sample:
``exhaustive`` true instances drawn uniformly (fixed before the first look).  Labels are noise-free.

**Looks.**  Every look adds ``batch`` draws from each system (the joint estimator, balance weights, as the
service scores) up to ``max_draws`` each; after every look the scores and both intervals (90%) are computed.

**Rules** (each kind of interval is watched on its own: the fixed-:math:`n` interval's watcher stops on it, the
sequence's on the sequence; a rule that never fires stops at ``max_draws``):

* ``rival``: stop once A's F1 interval excludes B's F1 estimate;
* ``value``: stop once A's precision interval excludes a fixed value, here equal to A's true precision (so
  every stop is a miss of P);
* ``width``: stop once A's F1 interval is at most ``width`` wide (the adaptive sizing of issue 11);
* ``separate``: stop once A's and B's F1 intervals are disjoint (the organiser's "stop annotating a pair once they
  are separated"); ``wrong``: the share of the runs that stopped on separated intervals in the wrong order (the one
  above has the lower true F1), ``saved``: the mean draws per system not made against ``max_draws``;
* ``fixed``: the last look (``max_draws``), no peeking;
* ``ever``: the time-uniform event, every look covers (the sequence's guarantee; not a stopping rule).

Coverage of P, R and F1 is counted at the stop.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from ..estimators import estimate, make_design
from ..estimators.anytime import design_intervals, excludes, separated

RULES = ("rival", "value", "width", "separate", "fixed", "ever")
KINDS = ("fixed-n", "anytime")
METRICS = ("p", "r", "f1")


@dataclass(frozen=True)
class StoppingWorld:
    """The world's options (module docs)."""

    size_a: int = 2000
    size_b: int = 2000
    shared: int = 1000
    p_a: float = 0.60
    p_b: float = 0.55
    unfound: int = 600
    exhaustive: int = 300
    batch: int = 25
    max_draws: int = 1000
    width: float = 0.10
    confidence: float = 0.90

    def __post_init__(self):
        for name in ("size_a", "size_b", "exhaustive", "batch", "max_draws"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise InvalidInputError(f"{name}: expected a positive integer, got {v!r}")
        if not 0 <= self.shared <= min(self.size_a, self.size_b):
            raise InvalidInputError(f"shared: expected 0..{min(self.size_a, self.size_b)}, got {self.shared!r}")
        if self.unfound < 0:
            raise InvalidInputError(f"unfound: expected a non-negative integer, got {self.unfound!r}")
        for name in ("p_a", "p_b"):
            if not 0 < getattr(self, name) < 1:
                raise InvalidInputError(f"{name}: expected a precision in (0, 1), got {getattr(self, name)!r}")
        if not 0 < self.width < 1:
            raise InvalidInputError(f"width: expected an interval width in (0, 1), got {self.width!r}")
        if self.max_draws < self.batch:
            raise InvalidInputError(f"max_draws: expected at least batch ({self.batch}), got {self.max_draws!r}")


def _world(w: StoppingWorld, rng):
    """``(P, truth, A, B, true)``: the two systems' distributions over the universe (pool + unfound truth), the
    labels, the systems' instances and their true (p, r, f1) (arrays of 2)."""
    own_b = w.size_b - w.shared
    pool = w.size_a + own_b
    U = pool + w.unfound
    A, B = np.arange(w.size_a), np.r_[np.arange(w.size_a - w.shared, w.size_a), np.arange(w.size_a, pool)]
    truth = np.ones(U, bool)
    truth[:w.size_a] = rng.random(w.size_a) < w.p_a
    truth[w.size_a:pool] = rng.random(own_b) < w.p_b
    P = sp.csr_matrix((np.r_[np.full(len(A), 1 / len(A)), np.full(len(B), 1 / len(B))],
                       (np.r_[np.zeros(len(A), int), np.ones(len(B), int)], np.r_[A, B])), shape=(2, U))
    y = truth.sum()
    p = np.array([truth[A].mean(), truth[B].mean()])
    r = np.array([truth[A].sum() / y, truth[B].sum() / y])
    return P, truth, A, B, {"p": p, "r": r, "f1": 2 * p * r / (p + r)}


def trajectory(w: StoppingWorld, rng) -> dict:
    """One trial: per look, the draws per system, the estimates and both kinds of interval of both systems.
    Returns ``{"n": (L,), "true": {metric: (2,)}, "est": {metric: (L, 2)}, "fixed-n"/"anytime": {metric:
    (lo (L, 2), hi (L, 2))}}``."""
    P, truth, A, B, true = _world(w, rng)
    yset = np.flatnonzero(truth)
    y0 = rng.choice(yset, w.exhaustive)
    g0 = np.array([np.isin(y0, A), np.isin(y0, B)])
    xa, xb = rng.choice(A, w.max_draws), rng.choice(B, w.max_draws)
    looks = np.arange(w.batch, w.max_draws + 1, w.batch)
    est = {k: np.zeros((len(looks), 2)) for k in METRICS}
    ci = {kind: {k: (np.zeros((len(looks), 2)), np.zeros((len(looks), 2))) for k in METRICS} for kind in KINDS}
    for t, n in enumerate(looks):
        xs = np.r_[xa[:n], xb[:n]]
        d = make_design(P, np.repeat([0, 1], n), xs, truth[xs].astype(float), g0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = estimate(d, confidence=w.confidence)
        cs = design_intervals(d, s)
        for k in METRICS:
            e = getattr(s, k)
            est[k][t] = e.value
            for kind, c in (("fixed-n", e.interval), ("anytime", cs.ci(k))):
                lo, hi = c.lo, c.hi
                ci[kind][k][0][t], ci[kind][k][1][t] = lo, hi
    return {"n": looks, "true": true, "est": est, **ci}


def stop_index(tr: dict, kind: str, rule: str, w: StoppingWorld) -> int:
    """The look at which ``rule`` stops watching ``kind`` of interval on trajectory ``tr`` (the last when it
    never fires)."""
    last = len(tr["n"]) - 1
    c = tr[kind]
    if rule == "rival":
        fired = excludes((c["f1"][0][:, 0], c["f1"][1][:, 0]), tr["est"]["f1"][:, 1])
    elif rule == "value":
        fired = excludes((c["p"][0][:, 0], c["p"][1][:, 0]), tr["true"]["p"][0])
    elif rule == "width":
        fired = c["f1"][1][:, 0] - c["f1"][0][:, 0] <= w.width
    elif rule == "separate":
        fired = separated((c["f1"][0][:, 0], c["f1"][1][:, 0]), (c["f1"][0][:, 1], c["f1"][1][:, 1]))
    elif rule == "fixed":
        return last
    else:
        raise InvalidInputError(f"rule: expected one of {', '.join(RULES[:-1])}, got {rule!r}")
    hit = np.flatnonzero(fired)
    return int(hit[0]) if len(hit) else last


def _covers(tr: dict, kind: str, k: str, t) -> np.ndarray:
    lo, hi = tr[kind][k][0][t, 0], tr[kind][k][1][t, 0]
    v = tr["true"][k][0]
    return (lo <= v) & (v <= hi)


def _wrong_order(tr: dict, kind: str, t: int) -> bool:
    """Whether A's and B's F1 intervals at look ``t`` are disjoint with the one above of the lower true F1."""
    lo, hi = tr[kind]["f1"][0][t], tr[kind]["f1"][1][t]
    f = tr["true"]["f1"]
    return bool((lo[0] > hi[1] and f[0] < f[1]) or (lo[1] > hi[0] and f[1] < f[0]))


@dataclass(frozen=True)
class RuleRow:
    """Coverage of A's intervals at the stop of one rule, one kind of interval."""

    rule: str
    kind: str
    trials: int
    cover_p: float
    cover_r: float
    cover_f1: float
    draws: float  # mean draws per system at the stop
    width_p: float  # mean widths at the stop
    width_f1: float
    wrong: float = float("nan")  # separate: stopped on intervals separated in the wrong order (share of runs)


def summarise(trajectories: list[dict], w: StoppingWorld) -> list[RuleRow]:
    """One :class:`RuleRow` per rule and kind of interval."""
    rows = []
    for rule in RULES:
        for kind in KINDS:
            cov = {k: [] for k in METRICS}
            draws, wp, wf = [], [], []
            for tr in trajectories:
                if rule == "ever":
                    t = slice(None)
                    for k in METRICS:
                        cov[k].append(bool(_covers(tr, kind, k, t).all()))
                    t = len(tr["n"]) - 1
                else:
                    t = stop_index(tr, kind, rule, w)
                    for k in METRICS:
                        cov[k].append(bool(_covers(tr, kind, k, t)))
                draws.append(tr["n"][t])
                wp.append(tr[kind]["p"][1][t, 0] - tr[kind]["p"][0][t, 0])
                wf.append(tr[kind]["f1"][1][t, 0] - tr[kind]["f1"][0][t, 0])
            wrong = float(np.mean([_wrong_order(tr, kind, stop_index(tr, kind, rule, w)) for tr in trajectories])
                          ) if rule == "separate" else float("nan")
            rows.append(RuleRow(rule, kind, len(trajectories), *(float(np.mean(cov[k])) for k in METRICS),
                                float(np.mean(draws)), float(np.mean(wp)), float(np.mean(wf)), wrong))
    return rows


def run_stopping(trials: int, *, seed: int = 0, world: StoppingWorld | None = None, progress=None) -> list[RuleRow]:
    """``trials`` independent trajectories (trial ``t`` the same for a seed whatever ``trials``), summarised."""
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise InvalidInputError(f"trials: expected a positive integer, got {trials!r}")
    w = world or StoppingWorld()
    out = []
    for ss in np.random.SeedSequence(seed).spawn(trials):
        out.append(trajectory(w, np.random.default_rng(ss)))
        if progress is not None:
            progress(1)
    return summarise(out, w)


def format_rules(rows: list[RuleRow], w: StoppingWorld) -> str:
    """The table of :func:`run_stopping` (coverages of A's 90% intervals at the stop; widths in points)."""
    head = (f"{'rule':<8} {'interval':<9} {'cover P':>8} {'cover R':>8} {'cover F1':>8} {'draws':>7} "
            f"{'saved':>6} {'width P':>8} {'width F1':>8} {'wrong':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        wrong = "" if np.isnan(r.wrong) else f"{r.wrong:.3f}"
        lines.append(f"{r.rule:<8} {r.kind:<9} {r.cover_p:>8.3f} {r.cover_r:>8.3f} {r.cover_f1:>8.3f} "
                     f"{r.draws:>7.0f} {w.max_draws - r.draws:>6.0f} {100 * r.width_p:>8.1f} "
                     f"{100 * r.width_f1:>8.1f} {wrong:>6}")
    return "\n".join(lines)


def rows_json(rows: list) -> list[dict]:
    return [asdict(r) for r in rows]


__all__ = ["KINDS", "RULES", "RuleRow", "StoppingWorld", "format_rules", "rows_json", "run_stopping",
           "stop_index", "summarise", "trajectory"]
