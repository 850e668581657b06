r"""The human reference's precision interval beside a system's of the same number of draws (``unpooled simulate
reference``).

The service scores the exhaustive annotation :math:`H` of the sampled documents as a submission of its own
(:mod:`unpooled.service.evaluations.reference`): a uniform sample of its instances is verified by the crowd and its
precision estimated from the votes (:mod:`unpooled.core.estimators.noisy`) with the workers' rates fitted on every
verification answer of the corpus (:func:`unpooled.core.annotation.confusion.fit_preferred`), as a system's.  This
experiment repeats that in a synthetic world and reports, per regime, the bias, mean width and 90% coverage of the
reference's precision interval and of a system's with as many draws and about the same precision.

**One trial.**  :math:`H` has ``ref_size`` instances spread over ``documents`` documents, each correct with
probability ``ref_precision`` (the truth is the realised share).  Beside it a system of ``system_size`` instances
correct with probability ``system_precision`` and, optionally, a noisy one (``noisy_precision``; None: none).  Every
target draws ``draws`` instances i.i.d. uniformly from its own; every distinct drawn instance is answered by 3 of
``annotators`` workers of accuracy ``accuracy`` (both classes), the reference's by 3 who did not annotate its
document (each document's makers: 3 of the first 5 workers, as the service never routes a reference item to them).
``controls`` gold controls (half correct) are offered as the service does, with probability ``control_share`` per
answer: each worker answers about ``control_share / (1 - control_share)`` of its item count of distinct controls.
The rates are fitted once on all answers (``replicates`` bootstrap replicates) and every target is scored with the
``simple`` estimator from the votes.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError

TARGETS = ("reference", "system")


@dataclass(frozen=True)
class ReferenceCell:
    """One regime of :func:`run_cell`."""

    name: str
    accuracy: float = 0.9
    ref_size: int = 300
    ref_precision: float = 0.97
    system_size: int = 400
    system_precision: float = 0.97
    noisy_precision: float | None = None
    noisy_size: int = 400
    draws: int = 200
    documents: int = 8
    annotators: int = 8
    controls: int = 100
    control_share: float = 0.1
    replicates: int = 30


def default_cells() -> list[ReferenceCell]:
    """Crowd 0.9 and 0.75, few (60) and many (1,500) reference instances; the systems as good as the reference
    (every verified item nearly always correct: the hard case for the rates), and with a noisy system beside."""
    cells = []
    for acc in (0.9, 0.75):
        for n in (60, 1500):
            cells.append(ReferenceCell(f"crowd {acc:g} / {n} instances", accuracy=acc, ref_size=n))
    cells += [ReferenceCell("crowd 0.75 / 300 + noisy system", accuracy=0.75, noisy_precision=0.5),
              ReferenceCell("crowd 0.75 / 300 without controls", accuracy=0.75, noisy_precision=0.5, controls=0)]
    return cells


@dataclass
class ReferenceCellResult:
    cell: ReferenceCell
    trials: int
    errors: dict = field(default_factory=lambda: {t: [] for t in TARGETS})
    widths: dict = field(default_factory=lambda: {t: [] for t in TARGETS})
    hits: dict = field(default_factory=lambda: {t: [] for t in TARGETS})
    sources: dict = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> dict:
        out = {"cell": self.cell.name, "trials": self.trials, "sources": dict(self.sources),
               "seconds": round(self.seconds, 1)}
        for t in TARGETS:
            e, w, h = (np.asarray(x[t], float) for x in (self.errors, self.widths, self.hits))
            n = len(h)
            out[t] = {"bias": float(e.mean()) if n else math.nan, "width": float(w.mean()) if n else math.nan,
                      "width_max": float(w.max()) if n else math.nan,
                      "coverage": float(h.mean()) if n else math.nan,
                      "coverage_se": float(math.sqrt(h.mean() * (1 - h.mean()) / n)) if n else math.nan}
        return out


def _answer(items, truth, acc, who, rng):
    it = np.repeat(items, who.shape[1])
    right = rng.random(len(it)) < acc
    t = np.repeat(truth, who.shape[1])
    return it, who.ravel(), np.where(right, t, ~t)


def _three_of(pool, n, rng):
    """``n`` rows of 3 distinct workers from ``pool`` (rows of candidates, or one candidate list for all)."""
    pool = np.asarray(pool)
    if pool.ndim == 1:
        pool = np.broadcast_to(pool, (n, len(pool)))
    order = np.argsort(rng.random(pool.shape), axis=1)[:, :3]
    return np.take_along_axis(pool, order, axis=1)


def run_trial(cell: ReferenceCell, rng):
    """One trial: ``(estimates, truth, source)``, dicts by target of ``(p, lo, hi)`` and of the true precision."""
    from ..annotation.confusion import VerifyAnswers, fit_preferred
    from ..estimators import estimate, make_design
    from ..estimators.noisy import crowd_votes

    sizes = [cell.ref_size, cell.system_size] + ([cell.noisy_size] if cell.noisy_precision is not None else [])
    precs = [cell.ref_precision, cell.system_precision] + (
        [cell.noisy_precision] if cell.noisy_precision is not None else [])
    start = np.cumsum([0] + sizes)
    U = int(start[-1])
    f = np.concatenate([rng.random(n) < p for n, p in zip(sizes, precs)])
    m = len(sizes)
    rows = np.concatenate([np.full(n, i) for i, n in enumerate(sizes)])
    P = sp.csr_matrix((np.concatenate([np.full(n, 1.0 / n) for n in sizes]), (rows, np.arange(U))), shape=(m, U))
    draws = [rng.integers(start[i], start[i + 1], cell.draws) for i in range(m)]
    src = np.concatenate([np.full(cell.draws, i) for i in range(m)])
    xs = np.concatenate(draws)
    labelled = np.unique(xs)
    # who answers: the reference's items 3 workers who did not annotate their document, the others any 3
    W = cell.annotators
    doc = rng.integers(0, cell.documents, cell.ref_size)
    makers = np.array([rng.choice(min(5, W), min(3, W - 3), replace=False) for _ in range(cell.documents)])
    is_ref = labelled < cell.ref_size
    who = np.empty((len(labelled), 3), np.int64)
    if is_ref.any():
        allowed = np.array([[w for w in range(W) if w not in makers[d]] for d in range(cell.documents)])
        who[is_ref] = _three_of(allowed[doc[labelled[is_ref]]], int(is_ref.sum()), rng)
    who[~is_ref] = _three_of(np.arange(W), int((~is_ref).sum()), rng)
    it, wk, yes = _answer(labelled, f[labelled], cell.accuracy, who, rng)
    codes = np.full(U, -1)
    codes[labelled] = np.arange(len(labelled))
    item, worker, said = [codes[it]], [wk], [yes]
    control = [np.full(len(labelled), -1)]
    keys = [str(int(u)) for u in labelled]
    if cell.controls:
        ctruth = np.arange(cell.controls) % 2 == 0
        per = np.bincount(wk, minlength=W) * cell.control_share / (1 - cell.control_share)
        for w in range(W):
            k = min(cell.controls, int(rng.poisson(per[w])))
            c = rng.choice(cell.controls, k, replace=False)
            ci, cw, cy = _answer(c, ctruth[c], cell.accuracy, np.full((k, 1), w), rng)
            item.append(len(labelled) + ci)
            worker.append(cw)
            said.append(cy)
        control.append(ctruth.astype(np.int64))
        keys += [f"c{j}" for j in range(cell.controls)]
    a = VerifyAnswers(np.concatenate(item), np.concatenate(worker), np.concatenate(said).astype(np.int64), keys,
                      np.concatenate(control), W)
    source, point, reps = fit_preferred(a, replicates=cell.replicates, rng=int(rng.integers(2 ** 31)))
    sens, fpr = (np.clip(np.asarray(x, float), 1e-6, 1 - 1e-6) for x in point)
    sr = np.array([r[0] for r in reps]) if len(reps) > 1 else None
    fr = np.array([r[1] for r in reps]) if len(reps) > 1 else None
    votes = crowd_votes(it, wk, yes, sens, fpr, sr, fr, n_items=U)
    d = make_design(P, src, xs, f[xs].astype(float), np.zeros((m, 0), bool))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = estimate(d, estimator="simple", votes=votes)
    est = {t: (float(s.p.value[i]), float(s.p.lo[i]), float(s.p.hi[i])) for i, t in enumerate(TARGETS)}
    truth = {t: float(f[start[i]:start[i + 1]].mean()) for i, t in enumerate(TARGETS)}
    return est, truth, source


def run_cell(cell: ReferenceCell, trials: int, *, seed: int = 0, progress=None) -> ReferenceCellResult:
    if trials < 1:
        raise InvalidInputError(f"trials: expected at least 1, got {trials}")
    t0 = time.perf_counter()
    res = ReferenceCellResult(cell, trials)
    rng = np.random.default_rng(seed)
    for k in range(trials):
        est, truth, source = run_trial(cell, rng)
        res.sources[source] = res.sources.get(source, 0) + 1
        for t in TARGETS:
            p, lo, hi = est[t]
            res.errors[t].append(p - truth[t])
            res.widths[t].append(hi - lo)
            res.hits[t].append(bool(lo - 1e-9 <= truth[t] <= hi + 1e-9))
        if progress is not None:
            progress(k + 1, trials)
    res.seconds = time.perf_counter() - t0
    return res


def format_table(rows: list[dict]) -> str:
    head = f"{'cell':<34} {'trials':>6}  " + "  ".join(
        f"{t[:3] + ' bias':>8} {'width':>6} {'max':>5} {'cover':>6}" for t in TARGETS) + "  rates from"
    lines = [head]
    for r in rows:
        cells = []
        for t in TARGETS:
            x = r[t]
            cells.append(f"{x['bias']:+8.3f} {x['width']:6.3f} {x['width_max']:5.2f} {x['coverage']:6.2f}")
        src = ", ".join(f"{k} {v}" for k, v in sorted(r["sources"].items()))
        lines.append(f"{r['cell']:<34} {r['trials']:>6}  " + "  ".join(cells) + f"  {src}")
    lines.append("P of the human reference (ref) and of a system as good, each from its own 200 draws; width: mean "
                 "of the 90% intervals (max: the widest); cover: share holding the truth")
    return "\n".join(lines)


__all__ = ["ReferenceCell", "ReferenceCellResult", "default_cells", "format_table", "run_cell", "run_trial"]
