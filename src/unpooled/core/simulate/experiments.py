r"""The estimator and adaptive-labelling simulations (method.md §4.2, §4.3), on a synthetic world.

``estimators``: in each trial half of the teams form the pool; the other teams'
runs are scored by pooling (unjudged counts as wrong), and by the simple and the
joint estimators from ``labels`` own draws per system plus ``exhaustive`` draws
from the true set (the paper's set-up: about 150 + 150). Reported over the top
systems by true F1: mean bias (estimate − truth), the median width of the 5–95%
spread of point estimates across trials, and the coverage of the *computed* 90%
intervals (analytic, and bootstrap when asked).

``adaptive``: systems arrive in random order; each draws as many labels as it
needs for its precision interval to match what ``own`` own draws would give
(the paper: the variance of 500 own samples); a label already collected is
reused. Fixed schemes draw ``own`` per system (with and without reuse).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from ..estimators import distribution_matrix, estimate, make_design, p0_weights
from ..estimators.intervals import f1_score

ESTIMATOR_VARIANTS = ("pooling", "simple", "joint-heuristic", "joint-balance", "joint-minvar")


def _member(world, idx) -> np.ndarray:
    M = np.zeros((len(idx), len(world.truth)), dtype=bool)
    for k, i in enumerate(idx):
        M[k, world.systems[i]] = True
    return M


def true_scores(world, level: str = "instance") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True P, R, F1 of every system: instance level, or fill level (each fill counts once)."""
    truth = np.asarray(world.truth, dtype=bool)
    if level == "instance":
        ny = truth.sum()
        p = np.array([truth[s].mean() for s in world.systems])
        r = np.array([truth[s].sum() / ny for s in world.systems])
    else:
        P = distribution_matrix(world.systems, len(truth), level="fill", fill=world.fill)
        p = np.asarray(P @ truth.astype(float)).ravel()
        p0 = p0_universe(world)
        r = np.array([p0[s].sum() for s in world.systems])
    return p, r, f1_score(p, r)


def p0_universe(world) -> np.ndarray:
    """Fill-weighted :math:`p_0` over the universe (normalised): every true fill counts once."""
    truth = np.asarray(world.truth, dtype=bool)
    p0 = np.zeros(len(truth))
    Y = np.flatnonzero(truth)
    p0[Y] = p0_weights(len(Y), level="fill", fill=np.asarray(world.fill)[Y])
    return p0 / p0.sum()


@dataclass
class EstimatorStats:
    """Per estimator: arrays (trials, systems) of estimates, NaN where a system was pooled."""

    est: dict = field(default_factory=dict)  # name -> {"p": (T, m), "r": ..., "f1": ...}
    cover: dict = field(default_factory=dict)  # name -> {"p": (T, m) bool/NaN, ...}

    def summary(self, truth: dict[str, np.ndarray], top: np.ndarray) -> dict[str, dict]:
        """Summaries over the ``top`` systems that were evaluated in at least one trial."""
        out = {}
        anyname = next(iter(self.est))
        top = top[np.any(~np.isnan(self.est[anyname]["p"][:, top]), axis=0)]  # held out at least once
        for name, arrs in self.est.items():
            row = {}
            for k in ("p", "r", "f1"):
                a = arrs[k][:, top]
                bias = np.nanmean(a, axis=0) - truth[k][top]
                lo, hi = np.nanpercentile(a, [5, 95], axis=0)
                row[f"bias_{k}"] = float(np.nanmean(bias))
                row[f"abs_bias_{k}"] = float(np.nanmean(np.abs(bias)))
                row[f"width_{k}"] = float(np.nanmedian(hi - lo))
                for cname, cov in self.cover.get(name, {}).items():
                    if cname.startswith(k + ":"):
                        c = cov[:, top]
                        row[f"coverage_{k}" + ("" if cname.endswith(":analytic") else "_" + cname.split(":")[1])] = \
                            float(np.nanmean(c))
            out[name] = row
        return out


def run_estimators(world, *, trials: int = 100, labels: int = 150, exhaustive: int = 150, top: int = 40,
                   bootstrap: int = 0, confidence: float = 0.90, rng=None, progress=None,
                   variants=ESTIMATOR_VARIANTS, metric: str = "instance") -> dict:
    """The §4.2 simulation; returns the summary per estimator and the raw arrays.

    ``metric='fill'`` scores as TAC does officially (method.md §1.4): fill-level
    :math:`p_i`, and :math:`p_0` weighting every true fill once; the exhaustive
    draws then come from that :math:`p_0`.
    """
    rng = np.random.default_rng(rng)
    truth = np.asarray(world.truth, dtype=bool)
    U = len(truth)
    m = len(world.systems)
    tp, tr, tf = true_scores(world, metric)
    order = np.argsort(-tf)
    top_idx = order[:top]
    Y = np.flatnonzero(truth)
    teams = np.unique(world.team)
    if metric == "fill":
        P_all = distribution_matrix(world.systems, U, level="fill", fill=world.fill)
        p0u = p0_universe(world)
        pY = p0u[Y] / p0u[Y].sum()
    else:
        P_all = distribution_matrix(world.systems, U)
        p0u, pY = np.ones(U), None
    member_all = _member(world, range(m))
    stats = EstimatorStats()
    for name in variants:
        stats.est[name] = {k: np.full((trials, m), np.nan) for k in ("p", "r", "f1")}
        stats.cover[name] = {}
    for t in range(trials):
        pooled_teams = rng.choice(teams, size=len(teams) // 2, replace=False)
        pooled = np.isin(world.team, pooled_teams)
        evald = np.flatnonzero(~pooled)
        if "pooling" in variants:
            # the judged pool: the pooled teams' runs plus the human run when the world has one (§4.2: LDC)
            pool = member_all[pooled].any(axis=0) & truth
            manual = getattr(world, "manual", None)
            if manual is not None:
                pool[np.asarray(manual)] = True
                pool &= truth
            wpool = p0u * pool  # recall denominator: the true instances the pool knows (p0-weighted)
            denom = wpool.sum()
            for i in evald:
                hit = member_all[i] & pool
                p_ = float(P_all[i].toarray().ravel() @ hit)  # unjudged counts as wrong
                r_ = float(wpool[hit].sum() / denom) if denom else 0.0
                _store(stats, "pooling", t, i, p_, r_)
        # draws: `labels` per evaluated system from its own p_i; `exhaustive` from p0 (uniform over Y)
        P = P_all[evald]
        src = np.repeat(np.arange(len(evald)), labels)
        xs = np.concatenate([_draw_row(P_all, i, world.systems[i], labels, rng) for i in evald])
        y0 = Y[rng.choice(len(Y), size=exhaustive, p=pY)] if pY is not None else Y[rng.integers(0, len(Y), exhaustive)]
        d = make_design(P, src, xs, truth[xs].astype(float), member_all[evald][:, y0], p0=p0u)
        for name in variants:
            if name == "pooling":
                continue
            est, _, w = name.partition("-")
            sc = estimate(d, estimator=est, weights=w or "balance", confidence=confidence, bootstrap=bootstrap, rng=rng)
            for k in ("p", "r", "f1"):
                e = getattr(sc, k)
                stats.est[name][k][t, evald] = e.value
                tv = {"p": tp, "r": tr, "f1": tf}[k][evald]
                lo, hi = e.lo, e.hi
                cov = stats.cover[name].setdefault(f"{k}:analytic", np.full((trials, m), np.nan))
                cov[t, evald] = (lo <= tv) & (tv <= hi)
                if bootstrap:
                    blo, bhi = sc.boot[k].lo, sc.boot[k].hi
                    covb = stats.cover[name].setdefault(f"{k}:bootstrap", np.full((trials, m), np.nan))
                    covb[t, evald] = (blo <= tv) & (tv <= bhi)
        if progress:
            progress(1)
    summary = stats.summary({"p": tp, "r": tr, "f1": tf}, top_idx)
    return {"summary": summary, "stats": stats, "top": top_idx, "truth": (tp, tr, tf)}


def _draw_row(P, i: int, support: np.ndarray, n: int, rng) -> np.ndarray:
    """``n`` draws from row ``i`` of ``P`` (whose support is ``support``)."""
    p = np.asarray(P[i, support].todense()).ravel()
    return support[rng.choice(len(support), size=n, p=p / p.sum())]


def _store(stats, name, t, i, p_, r_):
    f_ = 2 * p_ * r_ / (p_ + r_) if p_ + r_ > 0 else 0.0
    for k, v in (("p", p_), ("r", r_), ("f1", f_)):
        stats.est[name][k][t, i] = v


def run_adaptive(world, *, trials: int = 100, systems: int = 40, own: int = 500, rng=None, progress=None,
                 confidence: float = 0.90, rounds: int = 3) -> dict:
    """The §4.3 simulation: cumulative draws and new labels as ``systems`` systems arrive in random order.

    Schemes: ``fixed`` (``own`` draws each, every draw a label: the paper's baseline),
    ``fixed-reuse`` (``own`` draws each, labels reused), ``adaptive`` (new labels of the
    sequential rule, :func:`~unpooled.core.estimators.adaptive.next_draws`: a pilot, then
    the rest planned with the pilot's labels, target the variance of ``own`` own draws,
    labels reused) and ``adaptive-draws`` (its draws: the unit the paper's 7,570 counts).

    Coverage of the 90% precision intervals after adaptive stopping, twice: *at arrival*
    (each system's interval once its own rounds are done, as it would be published then)
    and *final* (every system with every draw). Half-widths are reported beside the
    target's, :math:`z\\sqrt{\\pi(1-\\pi)/{\\rm own}}` at the true precision, and the plan's
    (its variance at the draws made, with the labels known then); ``error_over_planned_var``: the
    estimates' mean squared error at arrival over the plan's mean variance (below 1: the plan is conservative).
    """
    from ..estimators.adaptive import precision_variance

    rng = np.random.default_rng(rng)
    truth = np.asarray(world.truth, dtype=bool)
    U = len(truth)
    tp, _, tf = true_scores(world)
    top_idx = np.argsort(-tf)[:systems]
    cum = {"fixed": np.zeros((trials, systems)), "fixed-reuse": np.zeros((trials, systems)),
           "adaptive": np.zeros((trials, systems)), "adaptive-draws": np.zeros((trials, systems))}
    hits = {"arrival": [], "final": []}
    half = {"arrival": [], "final": []}
    planned, sq_err = [], []  # at arrival: the plan's variance at the draws made, the estimate's squared error
    target_half = []
    rounds_used = []
    z = float(norm.ppf(0.5 + confidence / 2))
    no_g0 = np.zeros((systems, 0), bool)
    for t in range(trials):
        order = rng.permutation(top_idx)
        P = distribution_matrix([world.systems[i] for i in order], U)
        labelled = np.full(U, np.nan)
        labelled_fixed = np.zeros(U, dtype=bool)
        src_l, xs_l = [], []
        total_fixed_reuse = total_adaptive = total_draws = 0
        for k, i in enumerate(order):
            # fixed with reuse
            draws = world.systems[i][rng.integers(0, len(world.systems[i]), own)]
            new = np.unique(draws[~labelled_fixed[draws]])
            labelled_fixed[new] = True
            total_fixed_reuse += len(new)
            # adaptive: design over systems 0..k, rounds of draws until the plan is met
            Pk = P[: k + 1]
            used, plan, fresh, more = _adaptive_rounds(Pk, k, world.systems[i], truth, labelled, src_l, xs_l,
                                                       rounds=rounds, own=own, rng=rng)
            total_adaptive += fresh
            total_draws += more
            rounds_used.append(used)
            xs = np.array(xs_l, dtype=np.int64)
            d = make_design(Pk, np.array(src_l, dtype=np.int64), xs, truth[xs].astype(float), no_g0[: k + 1])
            sc = estimate(d, weights="balance", confidence=confidence)
            lo, hi = sc.p.lo[k], sc.p.hi[k]
            hits["arrival"].append(lo - 1e-9 <= tp[i] <= hi + 1e-9)
            half["arrival"].append((hi - lo) / 2)
            planned.append(precision_variance(d, k, int(np.count_nonzero(d.src == k)), labelled, plan.prior))
            sq_err.append((sc.p.value[k] - tp[i]) ** 2)
            target_half.append(z * np.sqrt(tp[i] * (1 - tp[i]) / own))
            cum["fixed"][t, k] = own * (k + 1)
            cum["fixed-reuse"][t, k] = total_fixed_reuse
            cum["adaptive"][t, k] = total_adaptive
            cum["adaptive-draws"][t, k] = total_draws
        # final estimates for every system with all labels
        xs = np.array(xs_l, dtype=np.int64)
        d = make_design(P, np.array(src_l, dtype=np.int64), xs, truth[xs].astype(float), no_g0)
        sc = estimate(d, weights="balance", confidence=confidence)
        tv = tp[order]
        hits["final"] += ((sc.p.lo - 1e-9 <= tv) & (tv <= sc.p.hi + 1e-9)).tolist()
        half["final"] += (sc.p.interval.width / 2).tolist()
        if progress:
            progress(1)
    return _adaptive_summary(cum, hits, half, planned, sq_err, target_half, rounds_used, z=z,
                             reference=float(z * np.sqrt(np.median(tp[top_idx] * (1 - tp[top_idx])) / own)))


def _adaptive_rounds(Pk, k: int, supp: np.ndarray, truth: np.ndarray, labelled: np.ndarray, src_l: list,
                     xs_l: list, *, rounds: int, own: int, rng) -> tuple[int, object, int, int]:
    """System ``k`` (its instances ``supp``) drawn in rounds of the sequential rule until its plan is met, the draws
    appended to ``src_l``/``xs_l`` and their new labels written in ``labelled``: the rounds used, the last plan, the
    new labels and the draws made."""
    from ..estimators.adaptive import next_draws

    pm = np.asarray(Pk.getrow(k).todense()).ravel()[supp]
    no_g0 = np.zeros((k + 1, 0), bool)
    used = new_labels = made = 0
    plan = None
    for r in range(rounds):
        xs = np.array(xs_l, dtype=np.int64)
        d = make_design(Pk, np.array(src_l, dtype=np.int64), xs, truth[xs].astype(float), no_g0)
        more, plan = next_draws(d, k, rounds_left=rounds - r, own=own, labelled=labelled)
        if not more:
            break
        used += 1
        picks = supp[rng.choice(len(supp), size=more, p=pm / pm.sum())]
        fresh = np.unique(picks[np.isnan(labelled[picks])])
        labelled[fresh] = truth[fresh]
        new_labels += len(fresh)
        made += more
        src_l += [k] * more
        xs_l += picks.tolist()
    return used, plan, new_labels, made


def _adaptive_summary(cum: dict, hits: dict, half: dict, planned: list, sq_err: list, target_half: list,
                      rounds_used: list, *, z: float, reference: float) -> dict:
    """:func:`run_adaptive`'s report from its per-trial and per-arrival records (``z``: the intervals' normal
    quantile; ``reference``: the half-width of ``own`` draws at the median true precision)."""
    cov = {k: float(np.mean(v)) for k, v in hits.items()}
    return {
        "labels_by_system": {k: v.mean(axis=0).round(1).tolist() for k, v in cum.items()},
        "total": {k: float(v[:, -1].mean()) for k, v in cum.items()},
        "total_range": {k: [float(v[:, -1].min()), float(v[:, -1].max())] for k, v in cum.items()},
        "adaptive_coverage_p": cov["final"],
        "adaptive_coverage_p_arrival": cov["arrival"],
        "coverage_se": float(np.sqrt(0.9 * 0.1 / max(len(hits["final"]), 1))),
        "adaptive_median_halfwidth_p": float(np.median(half["final"])),
        "adaptive_median_halfwidth_p_arrival": float(np.median(half["arrival"])),
        "target_median_halfwidth_p": float(np.median(target_half)),
        "planned_median_halfwidth_p": float(z * np.sqrt(np.median(planned))),
        "error_over_planned_var": float(np.mean(sq_err) / np.mean(planned)),
        "rounds_mean": float(np.mean(rounds_used)),
        "own_halfwidth_reference": reference,
    }



#: recall estimators compared by :func:`run_unassessed`
UNASSESSED_VARIANTS = ("joint", "exhaustive", "stratified", "seed-shared", "joint+exhaustive",
                       "stratified+exhaustive")


def run_unassessed(world, *, trials: int = 100, labels: int = 150, exhaustive: int = 150, confidence: float = 0.90,
                   min_draws: int = 20, rng=None, progress=None) -> dict:
    """Recall from pooled and unassessed output (:mod:`unpooled.core.estimators.unassessed`), in the §4.2 set-up:
    half of the teams' runs evaluated per trial with ``labels`` own draws each and ``exhaustive`` true instances.

    Per estimator, over the evaluated systems: mean and largest absolute bias per system, the spread (root mean
    per-system variance), mean interval width, coverage of the 90% intervals, and the relative efficiency
    (ratio of mean variances) against the joint estimator and against the exhaustive sample alone.
    """
    from ..estimators.intervals import wilson
    from ..estimators.results import Estimate
    from ..estimators.unassessed import RecallEstimate, combined_recall, stratified_recall

    rng = np.random.default_rng(rng)
    truth = np.asarray(world.truth, dtype=bool)
    U = len(truth)
    m = len(world.systems)
    _, tr, _ = true_scores(world)
    P_all = distribution_matrix(world.systems, U)
    member = _member(world, range(m))
    Y = np.flatnonzero(truth)
    teams = np.unique(world.team)
    err = {k: [] for k in UNASSESSED_VARIANTS}
    width = {k: [] for k in UNASSESSED_VARIANTS}
    hit = {k: [] for k in UNASSESSED_VARIANTS}
    lam = []
    ids = []
    for _ in range(trials):
        pooled_teams = rng.choice(teams, size=len(teams) // 2, replace=False)
        evald = np.flatnonzero(~np.isin(world.team, pooled_teams))
        me = len(evald)
        src = np.repeat(np.arange(me), labels)
        xs = np.concatenate([_draw_row(P_all, i, world.systems[i], labels, rng) for i in evald])
        y0 = Y[rng.integers(0, len(Y), exhaustive)]
        d = make_design(P_all[evald], src, xs, truth[xs].astype(float), member[evald][:, y0])
        sc = estimate(d, confidence=confidence)
        joint = RecallEstimate(sc.r, sc.theta, sc.nu)
        G = d.g0.astype(float)
        r_e = G.mean(1)
        v_e = r_e * (1 - r_e) / max(d.n0 - 1, 1)
        lo, hi = wilson(r_e, v_e, confidence, np.full(me, float(d.n0)))
        exh = RecallEstimate(Estimate.of(r_e, np.sqrt(v_e), lo, hi, level=confidence, interval="wilson", n=d.n0,
                                         method="exhaustive"), sc.theta, np.ones(me))
        ps = stratified_recall(d, min_draws=min_draws, confidence=confidence)
        both = combined_recall(d, ps, confidence=confidence)
        lam.append(both.weight)
        got = {"joint": joint, "exhaustive": exh, "stratified": ps,
               "seed-shared": stratified_recall(d, min_draws=min_draws, confidence=confidence, shared=True),
               "joint+exhaustive": combined_recall(d, joint, confidence=confidence), "stratified+exhaustive": both}
        tv = tr[evald]
        for k, v in got.items():
            err[k].append(v.recall.value - tv)
            width[k].append(v.recall.interval.width)
            hit[k].append((v.recall.lo - 1e-12 <= tv) & (tv <= v.recall.hi + 1e-12))
        ids.append(evald)
        if progress:
            progress(1)
    ids = np.concatenate(ids)
    systems = np.unique(ids)
    rows = {}
    var = {}
    for k in UNASSESSED_VARIANTS:
        e = np.concatenate(err[k])
        bias = np.array([e[ids == s].mean() for s in systems])
        var[k] = float(np.mean([e[ids == s].var() for s in systems]))
        rows[k] = {"mean_abs_bias": float(np.abs(bias).mean()), "max_abs_bias": float(np.abs(bias).max()),
                   "spread": float(np.sqrt(var[k])), "width": float(np.concatenate(width[k]).mean()),
                   "coverage": float(np.concatenate(hit[k]).mean())}
    for k in UNASSESSED_VARIANTS:
        rows[k]["re_joint"] = var["joint"] / var[k] if var[k] > 0 else float("nan")
        rows[k]["re_exhaustive"] = var["exhaustive"] / var[k] if var[k] > 0 else float("nan")
    return {"rows": rows, "intervals": int(len(ids)), "exhaustive_weight": float(np.mean(np.concatenate(lam)))}
