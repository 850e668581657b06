r"""Coverage of the published intervals across regimes: system size, precision, crowd quality, number of systems,
label reuse and adaptive stopping (``unpooled simulate regimes``).

Each *cell* is a synthetic evaluation repeated ``trials`` times with fresh draws, votes and exhaustive sample, and
scored exactly as the service scores: :func:`unpooled.core.estimators.estimate` with the crowd's votes
(:mod:`unpooled.core.estimators.noisy`), the annotators' error rates fitted by semi-supervised Dawid–Skene on the
answers and on gold controls, with bootstrap replicates (:mod:`unpooled.core.annotation.confusion`).  Reported per
cell, over the trials and the cell's reported systems: the mean error of P, R and F1 against the truth (with its
standard error by trial), the mean width of the 90% intervals and how often they hold the truth (with its binomial
standard error).

**The world of one trial.**  System :math:`i` outputs :math:`n_i` instances; a share ``shared`` of them come from a
pool common to all systems (so labels drawn for one system are reused by the others), the rest are its own.  An
instance is correct with the system's precision (a shared instance with the mean precision of the systems that
output it); 30% more true instances exist that no system found (so the pool's recall is below 1).  The truth:
:math:`P_i` the share of system :math:`i`'s instances that are correct, :math:`R_i` the share of all true instances
it output.  Every system draws ``draws`` instances i.i.d. from its instance-level :math:`p_i` (with ``adaptive``:
batches of 50 until its precision interval's half-width is at most 0.05, at most 500); every distinct drawn
instance is answered by 3 of 10 annotators (accuracy ``accuracy``, the same on both classes), and 100 gold controls
(half correct) are answered too, 300 answers in all (with strata, offered where the items' mix needs them most, as
the service's lease queue offers them: :mod:`unpooled.core.annotation.controls`).  ``n0`` true instances are sampled uniformly for recall.  ``control_accuracy``: the
crowd answers the gold controls at this accuracy instead (controls easier or harder than the items: a crowd worse
or better than its controls suggest; the rates are fitted on both).  ``believed``: the estimator is *told* the
annotators' accuracy instead of fitting it; None: fitted.

**A changing corpus** (``replaced`` > 0): the same systems ran in two periods on a corpus of
:data:`CORPUS_DOCUMENTS` documents of which the share ``replaced`` was replaced between them.  A system's
instances lie in documents drawn uniformly from its period's corpus: a share ``1 - replaced`` of its output is on
the kept documents, the same in both periods; the rest is on the dropped documents (first period) or the new ones
(second).  Each system's two versions drew ``draws`` labelled instances each; recall and precision are those
of the current versions, against the true instances of the current corpus (30% more that no system found), from
an exhaustive sample of :data:`EXHAUSTIVE_DOCUMENTS` current documents drawn uniformly.  ``reuse``: ``all``, the
first period's systems and labels enter the joint estimation with :math:`p_0 = 1` everywhere (the library without
the current corpus); ``current``, the same with recall's pool restricted to the current documents
(:func:`~unpooled.core.estimators.exhaustive.p0_support`); ``none``, the current period alone.

**The cells** (:func:`default_cells`) vary one factor at a time around a default (a system of 500 instances of
precision 0.7 beside one of 2,000 at 0.6, crowd accuracy 0.8, rates fitted), plus the interactions that matter:
tiny systems with a poor crowd, 40 and 300 systems sharing instances (at least 128 systems share every pooled
instance in the 300-system cell), heavy label reuse, adaptive stopping, and half the corpus replaced between two
periods with each way of reusing the first period's labels.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from ..estimators.intervals import f1_score

METRICS = ("p", "r", "f1")
#: the changing-corpus cells: documents of each period's corpus, and the current ones exhaustively annotated
CORPUS_DOCUMENTS, EXHAUSTIVE_DOCUMENTS = 400, 40
REUSE = ("all", "current", "none")


@dataclass(frozen=True)
class Cell:
    """One regime.  ``sizes``/``precision``: per system (``report`` of them are reported: the first ones)."""

    name: str
    sizes: tuple
    precision: tuple
    accuracy: float = 0.8
    believed: float | None = None
    control_accuracy: float | None = None  # the crowd's accuracy on gold controls (None: ``accuracy``)
    shared: float = 0.0
    adaptive: bool = False
    draws: int = 150
    n0: int = 300
    report: int = 1
    trial_share: float = 1.0   # this cell runs this share of the trials (large cells)
    annotators: int = 10
    replicates: int = 30
    #: relation types that differ in difficulty: per stratum the crowd's (sensitivity, false-positive rate) on
    #: items; () for one stratum at ``accuracy``
    strata: tuple = ()
    #: per system, the share of its instances in each stratum (default equal shares)
    mix: tuple = ()
    #: per system, its precision in each stratum (default ``precision`` in every stratum)
    strata_precision: tuple = ()
    #: the share of the gold controls in each stratum (None: the systems' instances' overall mix, as drawn by a
    #: service that stratifies its controls)
    control_mix: tuple | None = None
    controls: int = 100
    #: difficulty no stratum explains: this share of each stratum's items is judged at chance plus a quarter
    #: (sensitivity and false-positive rate moved three quarters of the way to 0.5)
    hidden: float = 0.0
    replaced: float = 0.0      # share of the corpus's documents replaced between two periods (module docs)
    reuse: str = "all"         # with ``replaced``: how the first period's labels are used (:data:`REUSE`)


def default_cells() -> list[Cell]:
    big = (2000,)
    cells = [Cell(f"size {n}", (n,) + big, (0.7, 0.6)) for n in (5, 10, 25, 100, 1000, 10000)]
    cells += [Cell(f"precision {p:g}", (500,) + big, (p, 0.6)) for p in (0.05, 0.3, 0.6, 0.9, 0.99)]
    cells += [Cell(f"crowd {a:g}", (500,) + big, (0.7, 0.6), accuracy=a) for a in (0.6, 0.8, 0.95)]
    cells += [Cell("size 10 / crowd 0.6", (10,) + big, (0.7, 0.6), accuracy=0.6),
              Cell("size 25 / crowd 0.6", (25,) + big, (0.5, 0.6), accuracy=0.6),
              Cell("crowd 0.8 / controls 0.9", (500,) + big, (0.7, 0.6), accuracy=0.8, control_accuracy=0.9),
              Cell("crowd 0.9 / controls 0.8", (500,) + big, (0.7, 0.6), accuracy=0.9, control_accuracy=0.8),
              Cell("crowd 0.7 / controls 0.95", (500,) + big, (0.7, 0.6), accuracy=0.7, control_accuracy=0.95)]
    # the edges: a system with no correct output, near-perfect systems under crowds of 0.7-0.9 ("precision 0.99"
    # above is the one at 0.8), and a near-perfect large system beside small ones (the first is reported)
    cells += [Cell("precision 0", (500,) + big, (0.0, 0.6))]
    cells += [Cell(f"precision {p:g} / crowd {a:g}", (500,) + big, (p, 0.6), accuracy=a)
              for p in (0.95, 0.99) for a in (0.7, 0.8, 0.9) if (p, a) != (0.99, 0.8)]
    cells += [Cell("precision 0.95 / small", (1500, 6, 20, 40, 60), (0.95, 0.3, 0.6, 0.8, 0.92))]
    rng = np.random.default_rng(12345)

    def many(m):
        return tuple(int(x) for x in rng.integers(100, 600, m)), tuple(float(x) for x in rng.uniform(0.3, 0.95, m))

    s2, p2 = many(2)
    s40, p40 = many(40)
    s300, p300 = many(300)
    cells += [Cell("2 systems", s2, p2, shared=0.3, report=2),
              Cell("40 systems", s40, p40, shared=0.5, report=40, draws=100, trial_share=0.5),
              Cell("300 systems", s300, p300, shared=0.5, report=300, draws=50, trial_share=0.1),
              Cell("label reuse 80%", s40[:10], p40[:10], shared=0.8, report=10),
              Cell("adaptive stopping", s40[:10], p40[:10], shared=0.3, report=10, adaptive=True)]
    cells += [Cell(f"replaced 50% / {how}", (500,) + big, (0.7, 0.6), replaced=0.5, reuse=how, report=2)
              for how in REUSE]
    return cells + type_cells()


#: relation types a crowd judges well and badly: (sensitivity, false-positive rate)
EASY, HARD = (0.97, 0.07), (0.75, 0.45)


def type_cells() -> list[Cell]:
    """Crowds whose accuracy depends on the relation type (:attr:`Cell.strata`): a system heavy in hard or in easy
    relations beside a balanced one, with controls drawn like the items or mostly easy, symmetric accuracy by
    type, difficulty no type explains, many types (two of them rare; and the same types judged alike: what
    fitting by type costs when the crowd is uniform), a tiny system and 40 systems."""
    two = (EASY, HARD)
    heavy_hard = dict(sizes=(500, 2000), strata=two, mix=((0.2, 0.8), (0.5, 0.5)),
                      strata_precision=((0.85, 0.45), (0.8, 0.5)), precision=(0.0, 0.0))
    heavy_easy = dict(heavy_hard, mix=((0.8, 0.2), (0.5, 0.5)))
    rng = np.random.default_rng(2021)
    eight = ((0.97, 0.05), (0.95, 0.1), (0.92, 0.15), (0.88, 0.2), (0.85, 0.3), (0.8, 0.35), (0.75, 0.45),
             (0.7, 0.4))
    mix8 = tuple(tuple(float(x) for x in np.r_[rng.dirichlet(np.ones(6)) * 0.96, 0.02, 0.02]) for _ in range(4))
    prec8 = tuple(tuple(float(x) for x in np.clip(0.9 - 0.07 * np.arange(8) + rng.normal(0, 0.05, 8), 0.1, 0.95))
                  for _ in range(4))
    s40 = tuple(int(x) for x in rng.integers(100, 600, 40))
    mix40 = tuple((float(a), 1 - float(a)) for a in rng.uniform(0.1, 0.9, 40))
    prec40 = tuple((float(a), float(b)) for a, b in zip(rng.uniform(0.6, 0.95, 40), rng.uniform(0.2, 0.6, 40)))
    return [Cell("types hard-heavy", **heavy_hard),
            Cell("types hard-heavy / easy controls", **heavy_hard, control_mix=(0.9, 0.1)),
            Cell("types easy-heavy", **heavy_easy),
            Cell("types easy-heavy / easy controls", **heavy_easy, control_mix=(0.9, 0.1)),
            Cell("types symmetric", **dict(heavy_hard, strata=((0.95, 0.05), (0.65, 0.35)))),
            Cell("types hidden difficulty", **heavy_hard, hidden=0.3),
            Cell("types 400 controls", **heavy_hard, controls=400),
            Cell("types tiny system", **dict(heavy_hard, sizes=(25, 2000))),
            Cell("types 8 relations", (300, 800, 2000, 150), (0.0,) * 4, strata=eight, mix=mix8,
                 strata_precision=prec8, report=4, controls=200),
            Cell("types 8 / uniform crowd", (300, 800, 2000, 150), (0.0,) * 4, strata=((0.8, 0.2),) * 8, mix=mix8,
                 strata_precision=prec8, report=4, controls=200),
            Cell("types 8 / near-perfect", (500, 2000), (0.0, 0.0), strata=((0.9, 0.1),) * 8,
                 strata_precision=((0.99,) * 8, (0.6,) * 8)),
            Cell("types 40 systems", s40, (0.0,) * 40, strata=two, mix=mix40, strata_precision=prec40, shared=0.5,
                 report=40, draws=100, trial_share=0.5)]


@dataclass
class CellResult:
    cell: Cell
    trials: int
    hits: dict = field(default_factory=dict)     # metric -> list of bool
    errors: dict = field(default_factory=dict)   # metric -> list of float
    widths: dict = field(default_factory=dict)
    draws: list = field(default_factory=list)    # total draws per trial
    seconds: float = 0.0

    def summary(self) -> dict:
        out = {"cell": self.cell.name, "trials": self.trials, "intervals": len(self.hits.get("p", ())),
               "draws": float(np.mean(self.draws)) if self.draws else 0.0, "seconds": round(self.seconds, 1)}
        for k in METRICS:
            h = np.asarray(self.hits.get(k, ()), float)
            e = np.asarray(self.errors.get(k, ()), float)
            w = np.asarray(self.widths.get(k, ()), float)
            n = len(h)
            out[k] = {"bias": float(e.mean()) if n else math.nan, "bias_se": _trial_se(e, self.trials),
                      "width": float(w.mean()) if n else math.nan, "coverage": float(h.mean()) if n else math.nan,
                      "coverage_se": float(math.sqrt(h.mean() * (1 - h.mean()) / n)) if n else math.nan}
        return out


def _trial_se(errors: np.ndarray, trials: int) -> float:
    """The standard error of the mean error, by trial: the reported systems of one trial share its votes and
    fitted rates, so their errors are not independent; the errors of each trial are averaged first."""
    if trials < 2 or not len(errors) or len(errors) % trials:
        return math.nan
    per_trial = np.asarray(errors, float).reshape(trials, -1).mean(1)
    return float(per_trial.std(ddof=1) / math.sqrt(trials))


def _strata_of(cell: Cell) -> tuple[int, np.ndarray, np.ndarray]:
    """``(H, mix (m, H), precision (m, H))`` of a cell."""
    m = len(cell.sizes)
    H = max(len(cell.strata), 1)
    mix = np.asarray(cell.mix, float) if cell.mix else np.full((m, H), 1.0 / H)
    prec = (np.asarray(cell.strata_precision, float) if cell.strata_precision
            else np.repeat(np.asarray(cell.precision, float)[:, None], H, axis=1))
    return H, mix / mix.sum(1, keepdims=True), prec


def _world(cell: Cell, rng):
    m = len(cell.sizes)
    sizes = np.asarray(cell.sizes, int)
    H, mix, sprec = _strata_of(cell)
    n_shared = np.round(sizes * cell.shared).astype(int)
    pool = int(max(n_shared.max(initial=0), 1)) if cell.shared > 0 else 0
    pool = int(math.ceil(pool * 1.25)) if pool else 0
    members, start = [], pool
    for i in range(m):
        own = np.arange(start, start + sizes[i] - n_shared[i])
        start += sizes[i] - n_shared[i]
        sh = np.sort(rng.choice(pool, n_shared[i], replace=False)) if n_shared[i] else np.zeros(0, int)
        members.append(np.concatenate([sh, own]))
    U = start
    # each instance's stratum: a system's own ones by its mix, the pool's by the systems' mean mix
    st = np.zeros(U, np.int64)
    if H > 1:
        st[:pool] = rng.choice(H, pool, p=mix.mean(0)) if pool else st[:0]
        for i in range(m):
            own = members[i][n_shared[i]:]
            st[own] = rng.choice(H, len(own), p=mix[i])
    f = np.zeros(U, bool)
    if pool:
        # a shared instance is correct with the mean precision (in its stratum) of the systems that output it
        cnt = np.zeros(pool)
        tot = np.zeros(pool)
        for i in range(m):
            sh = members[i][:n_shared[i]]
            cnt[sh] += 1
            tot[sh] += sprec[i, st[sh]]
        f[:pool] = rng.random(pool) < np.where(cnt > 0, tot / np.maximum(cnt, 1), 0.5)
    for i in range(m):
        own = members[i][n_shared[i]:]
        f[own] = rng.random(len(own)) < sprec[i, st[own]]
    # exact precision of tiny systems: set the number of correct own instances by rounding when all are own
    rows = np.concatenate([np.full(len(x), i) for i, x in enumerate(members)])
    cols = np.concatenate(members)
    vals = np.concatenate([np.full(len(x), 1.0 / len(x)) for x in members])
    P = sp.csr_matrix((vals, (rows, cols)), shape=(m, U))
    n_true = int(f.sum())
    missed = int(round(0.3 * max(n_true, 1)))  # true instances no system found
    truth_p = np.array([f[x].mean() for x in members])
    truth_r = np.array([f[x].sum() for x in members]) / max(n_true + missed, 1)
    return P, members, f, missed, truth_p, truth_r, st


def _answers(items, truth, sens, fpr, workers, rng, k=3):
    """k distinct annotators per item (``k``: a number, or one per item), each saying yes with probability
    ``sens`` (per item) when it is correct and ``fpr`` when it is not."""
    n = len(items)
    ranks = np.argsort(rng.random((n, workers)), axis=1)
    if np.ndim(k):
        who = ranks[np.arange(workers)[None, :] < np.asarray(k)[:, None]]
    else:
        who = ranks[:, :k].ravel()
    it = np.repeat(items, k)
    j = np.repeat(np.arange(n), k)
    u = rng.random(len(it))
    yes = np.where(truth[j], u < np.broadcast_to(sens, n)[j], u >= 1 - np.broadcast_to(fpr, n)[j])
    return it, who, yes


def _control_answers(demand, cst, ctruth, workers, rng, per_control: int = 3) -> np.ndarray:
    """Answers per control: ``per_control`` times as many as controls, each offered where the items need it most
    (:func:`~unpooled.core.annotation.controls.control_order`, as the service's lease queue does), at most one
    per annotator."""
    from ..annotation.controls import control_order

    n = np.zeros(len(cst), np.int64)
    for _ in range(per_control * len(cst)):
        order = control_order(demand, cst, ctruth, n, n < workers, rng)
        if not len(order):
            break
        n[order[0]] += 1
    return n


def _rates(cell: Cell, st: np.ndarray, rng, acc: float | None = None):
    """Per item of strata ``st``: the crowd's (sensitivity, false-positive rate); ``acc``: one accuracy instead."""
    if acc is not None or not cell.strata:
        a = cell.accuracy if acc is None else acc
        return np.full(len(st), a), np.full(len(st), 1 - a)
    sens, fpr = (np.asarray(x, float)[st] for x in zip(*cell.strata))
    if cell.hidden:
        hard = rng.random(len(st)) < cell.hidden
        sens, fpr = np.where(hard, sens + 0.75 * (0.5 - sens), sens), np.where(hard, fpr + 0.75 * (0.5 - fpr), fpr)
    return sens, fpr


def _votes(cell: Cell, labelled, f, U, rng, st=None, *, use_strata: bool = True):
    from ..annotation.confusion import VerifyAnswers, fit_preferred, model_answers
    from ..estimators.noisy import crowd_votes

    st = np.zeros(U, np.int64) if st is None else st
    # per universe instance: hidden difficulty is drawn once per instance (its answers share it)
    s_u, e_u = _rates(cell, st, rng)
    it, wk, yes = _answers(labelled, f[labelled], s_u[labelled], e_u[labelled], cell.annotators, rng)
    if cell.believed is not None:
        W = cell.annotators
        return crowd_votes(it, wk, yes, np.full(W, cell.believed), np.full(W, 1 - cell.believed), n_items=U)
    nc = cell.controls
    ctruth = np.arange(nc) % 2 == 0
    H, mix, _ = _strata_of(cell)
    sizes = np.asarray(cell.sizes, float)
    cmix = np.asarray(cell.control_mix, float) if cell.control_mix is not None else (sizes[:, None] * mix).sum(0)
    cst = np.sort(rng.choice(H, nc, p=cmix / cmix.sum())) if H > 1 else np.zeros(nc, np.int64)
    cs, ce = _rates(cell, cst, rng, cell.control_accuracy)
    cit, cwk, cyes = _answers(np.arange(nc), ctruth, cs, ce, cell.annotators, rng,
                              _control_answers(np.bincount(st[labelled], minlength=H), cst, ctruth,
                                               cell.annotators, rng) if H > 1 else 3)
    # items: the labelled instances then the controls, numbered in order of first appearance
    codes = {int(u): j for j, u in enumerate(labelled.tolist())}
    item = np.concatenate([np.array([codes[int(u)] for u in it], np.int64), len(labelled) + cit])
    control = np.concatenate([np.full(len(labelled), -1), ctruth.astype(np.int64)])
    keys = [str(int(u)) for u in labelled] + [f"c{j}" for j in range(nc)]
    strat = H > 1 and use_strata
    a = VerifyAnswers(item, np.concatenate([wk, cwk]), np.concatenate([yes, cyes]).astype(np.int64), keys,
                      control, cell.annotators, stratum=np.concatenate([st[labelled], cst]) if strat else None,
                      strata=H if strat else None)
    source, point, reps = fit_preferred(a, replicates=cell.replicates, rng=int(rng.integers(2 ** 31)))
    sens, fpr = (np.clip(np.asarray(x, float), 1e-6, 1 - 1e-6) for x in point)
    sr = np.array([r[0] for r in reps]) if len(reps) > 1 else None
    fr = np.array([r[1] for r in reps]) if len(reps) > 1 else None
    rows = model_answers(a, source).rate_rows()[:len(it)]  # the confusion rows as the fit saw them
    return crowd_votes(it, rows, yes, sens, fpr, sr, fr, n_items=U, strata=st if strat else None)


def _changing_world(cell: Cell, rng):
    """``(P, members, f, doc)`` of a changing corpus (module docs): the current systems' rows first, then the first
    period's; ``doc`` per instance, the dropped documents numbered first, then the kept ones, then the new."""
    D, r = CORPUS_DOCUMENTS, cell.replaced
    n_rep = int(round(D * r))
    cur, old, f, doc = [], [], [], []
    start = 0
    for n, p in zip(cell.sizes, cell.precision):
        k = int(round(n * (1 - r)))
        kept, dropped, new = np.split(np.arange(start, start + 2 * n - k), [k, n])
        start += 2 * n - k
        cur.append(np.concatenate([kept, new]))
        old.append(np.concatenate([kept, dropped]))
        f.append(rng.random(2 * n - k) < p)
        doc += [rng.integers(n_rep, D, k), rng.integers(0, n_rep, n - k), rng.integers(D, D + n_rep, n - k)]
    members = cur + old
    rows = np.concatenate([np.full(len(x), i) for i, x in enumerate(members)])
    vals = np.concatenate([np.full(len(x), 1.0 / len(x)) for x in members])
    P = sp.csr_matrix((vals, (rows, np.concatenate(members))), shape=(len(members), start))
    return P, members, np.concatenate(f), np.concatenate(doc)


def _changing_trial(cell: Cell, rng) -> tuple[dict, dict, int]:
    """:func:`run_trial` of a changing corpus (module docs)."""
    from ..estimators import estimate, make_design
    from ..estimators.exhaustive import p0_support
    from ..matching import InstanceRef

    if cell.reuse not in REUSE:
        raise InvalidInputError(f"reuse: expected one of {', '.join(REUSE)}, got {cell.reuse!r}")
    P, members, f, doc = _changing_world(cell, rng)
    m = len(cell.sizes)
    n_rep = int(round(CORPUS_DOCUMENTS * cell.replaced))
    current = np.arange(n_rep, CORPUS_DOCUMENTS + n_rep)
    found = f & (doc >= n_rep)
    missed = int(round(0.3 * found.sum()))  # true instances of the current corpus that no system found
    y_idx = np.concatenate([np.flatnonzero(found), np.full(missed, -1)])
    y_doc = np.concatenate([doc[found], rng.choice(current, missed)])
    sample = np.isin(y_doc, rng.choice(current, EXHAUSTIVE_DOCUMENTS, replace=False))
    systems = m if cell.reuse == "none" else 2 * m
    g0 = np.array([np.isin(y_idx[sample], members[i]) for i in range(systems)])
    draws = [rng.choice(members[i], cell.draws) for i in range(systems)]
    src = np.concatenate([np.full(len(d), i) for i, d in enumerate(draws)])
    xs = np.concatenate(draws)
    inside = None
    if cell.reuse == "current":
        refs = [InstanceRef(str(doc[u]), u, u + 1, "r", -1, -1, "v") for u in xs.tolist()]
        inside = p0_support(refs, population={str(d) for d in current.tolist()})
    d = make_design(P[:systems], src, xs, f[xs].astype(float), g0, y0_docs=y_doc[sample].tolist(),
                    documents=EXHAUSTIVE_DOCUMENTS, inside=inside)
    v = _votes(cell, np.unique(xs), f, P.shape[1], rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = estimate(d, votes=v)
    truth_p = np.array([f[x].mean() for x in members[:m]])
    truth_r = np.array([f[x].sum() for x in members[:m]]) / (found.sum() + missed)
    return s, _with_f1({"p": truth_p, "r": truth_r}), len(xs)


def _with_f1(truth: dict) -> dict:
    truth["f1"] = f1_score(truth["p"], truth["r"])
    return truth


def run_trial(cell: Cell, rng, *, use_strata: bool = True) -> tuple[dict, dict, int]:
    """One trial: ``(estimates, truth, total draws)``, estimates as the core's :class:`Scores`; ``use_strata``:
    the estimator is told each instance's stratum (else it fits one crowd model for all)."""
    from ..estimators import estimate, make_design

    if cell.replaced:
        return _changing_trial(cell, rng)
    P, members, f, missed, truth_p, truth_r, st = _world(cell, rng)
    m, U = P.shape
    n_true = int(f.sum())
    # the exhaustive sample: uniform over all true instances (found or not)
    k = rng.integers(0, n_true + missed, cell.n0) if n_true + missed else np.zeros(0, int)
    true_idx = np.flatnonzero(f)
    found = k < n_true
    y0 = true_idx[k[found]]
    g0 = np.zeros((m, cell.n0), bool)
    for i, x in enumerate(members):
        g0[i, np.flatnonzero(found)] = np.isin(y0, x)
    draws = [rng.choice(x, min(cell.draws, 50) if cell.adaptive else cell.draws) for x in members]

    def score():
        src = np.concatenate([np.full(len(d), i) for i, d in enumerate(draws)])
        xs = np.concatenate(draws)
        d = make_design(P, src, xs, f[xs].astype(float), g0)
        v = _votes(cell, np.unique(xs), f, U, rng, st, use_strata=use_strata)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return estimate(d, votes=v), len(xs)

    s, n = score()
    if cell.adaptive:
        for _ in range(9):
            half = s.p.interval.width / 2
            more = [i for i in range(m) if half[i] > 0.05 and len(draws[i]) < 500]
            if not more:
                break
            for i in more:
                draws[i] = np.concatenate([draws[i], rng.choice(members[i], 50)])
            s, n = score()
    return s, _with_f1({"p": truth_p, "r": truth_r}), n


def run_cell(cell: Cell, trials: int, *, seed: int = 0, progress=None, use_strata: bool = True) -> CellResult:
    import time

    if trials < 1:
        raise InvalidInputError(f"trials: expected at least 1, got {trials}")
    t0 = time.perf_counter()
    n = max(1, int(round(trials * cell.trial_share)))
    res = CellResult(cell, n)
    rng = np.random.default_rng(seed)
    for t in range(n):
        s, truth, draws = run_trial(cell, rng, use_strata=use_strata)
        res.draws.append(draws)
        for k in METRICS:
            e = getattr(s, k)
            est, lo, hi = (x[:cell.report] for x in (e.value, e.lo, e.hi))
            tr = truth[k][:cell.report]
            res.hits.setdefault(k, []).extend(((lo - 1e-9 <= tr) & (tr <= hi + 1e-9)).tolist())
            res.errors.setdefault(k, []).extend((est - tr).tolist())
            res.widths.setdefault(k, []).extend((hi - lo).tolist())
        if progress is not None:
            progress(t + 1, n)
    res.seconds = time.perf_counter() - t0
    return res


def run_regimes(trials: int = 100, *, seed: int = 0, cells=None, progress=None, use_strata: bool = True
                ) -> list[dict]:
    """Every cell of :func:`default_cells` (or ``cells``), ``trials`` trials each (scaled by the cell's
    ``trial_share``); returns one :meth:`CellResult.summary` per cell."""
    cells = default_cells() if cells is None else cells
    out = []
    for j, cell in enumerate(cells):
        res = run_cell(cell, trials, seed=seed + 1000 * j, use_strata=use_strata,
                       progress=None if progress is None else (lambda t, n, c=cell: progress(c.name, t, n)))
        out.append(res.summary())
    return out


def format_table(rows: list[dict]) -> str:
    head = (f"{'cell':<22} {'trials':>6} {'CIs':>6} {'draws':>7}  " +
            "  ".join(f"{k.upper() + ' bias':>8} {'(se)':>7} {'width':>6} {'cover':>6}" for k in METRICS))
    lines = [head]
    for r in rows:
        cells = []
        for k in METRICS:
            x = r[k]
            flag = "" if 0.88 <= x["coverage"] <= 0.92 else ("+" if x["coverage"] > 0.92 else "-")
            se = x.get("bias_se", math.nan)
            cells.append(f"{x['bias']:+8.3f} {'(' + format(se, '.3f') + ')':>7} {x['width']:6.3f} "
                         f"{x['coverage']:5.2f}{flag or ' '}")
        lines.append(f"{r['cell']:<22} {r['trials']:>6} {r['intervals']:>6} {r['draws']:>7.0f}  " + "  ".join(cells))
    lines.append("coverage of the 90% intervals; '+' above 0.92 (conservative), '-' below 0.88; (se): the bias's "
                 "standard error, by trial")
    return "\n".join(lines)


__all__ = ["Cell", "CellResult", "default_cells", "format_table", "run_cell", "run_regimes", "run_trial"]
