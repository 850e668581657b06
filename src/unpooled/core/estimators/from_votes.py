r"""Precision, recall and F1 of every target from crowd votes: the estimator of :mod:`.noisy`'s model, with the
crowd model by strata (:mod:`.strata`).

:func:`noisy_estimates` fits each functional's prevalence per (target, group of strata) by
:func:`.noisy.prevalence`, combines them, and adds the three sources of variance the model's documentation
derives (the draws, the votes, the confusions); :func:`unpooled.core.estimators.joint.estimate` calls it when
it is given votes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from .noisy import (CrowdVotes, _exp_parts, _kappa_at, _merge_items, item_log_lr, item_merge, majority_labels,
                    posterior, prevalence)
from .vote_variance import _finite0, vote_patterns, vote_variance
from .linear import Linear
from .rows import Rows, Segments, _same
from .strata import MIN_TARGET_ITEMS, precision_weights
from .strata import groups as strata_groups


@dataclass(frozen=True)
class _NoisyParts:
    """What :func:`noisy_estimates` computed besides the estimates: an intermediate, not a result (the figures reach
    readers through :class:`~.joint.Scores`'s ``raw``, ``var_parts`` and ``rates``)."""

    p_raw: np.ndarray        # the labelled-sample figure: each item's majority label taken as certain
    r_raw: np.ndarray
    f1_raw: np.ndarray
    var_design: dict         # metric -> (m,)
    var_votes: dict
    var_rates: dict
    mean_sens: float         # the crowd's rates, weighted by answers
    mean_fpr: float


@dataclass(frozen=True)
class _Fit:
    """Every functional's prevalence per (target, group) (:mod:`.strata`), ``(m, G)`` each: ``r*`` the prevalence,
    ``J*`` its information, ``k*`` the factor of its influence values (precision: the group's weight over
    :math:`J`; recall's numerator and denominator: the group's coefficient sum over :math:`J`), ``s*`` the
    coefficient sums; and the combined estimates."""

    rc: np.ndarray
    Jc: np.ndarray
    kc: np.ndarray
    ra: np.ndarray
    Ja: np.ndarray
    ka: np.ndarray
    sa: np.ndarray
    rb: np.ndarray
    kb: np.ndarray
    p: np.ndarray
    Ahat: np.ndarray
    Bhat: np.ndarray
    nu: np.ndarray
    wc: np.ndarray

    def single(self, w: np.ndarray) -> np.ndarray:
        """Per target, whether one group carries all of ``w`` (``(m, G)``): its estimate is one prevalence."""
        return (w > 0).sum(1) <= 1


def _safe_div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def _fit(Mc, Ma, Mb, lam, grp, P, simple: bool) -> _Fit:
    """The prevalences of precision (``Mc``) and of recall's numerator and denominator (``Ma``, ``Mb``), per
    (target, group), combined: precision by the targets' known masses, recall by the coefficient sums."""
    G, gk = grp.n, grp.item
    rc, Jc = prevalence(Mc, lam, groups=gk, n_groups=G)
    ra, Ja = prevalence(Ma, lam, groups=gk, n_groups=G)
    rb, Jb = prevalence(Mb, lam, groups=gk, n_groups=G)
    rc, ra, rb = np.nan_to_num(rc), np.nan_to_num(ra), np.nan_to_num(rb)
    wc = _precision_weights(Mc, grp, P)
    sa, sb = grp.sums(Ma), grp.sums(Mb)
    p, Ahat, Bhat, nu = _combine(rc, ra, rb, wc, sa, sb, simple)
    return _Fit(rc, Jc, _safe_div(wc, Jc), ra, Ja, _safe_div(sa, Ja), sa, rb, _safe_div(sb, Jb), p, Ahat, Bhat,
                nu, wc)


def _precision_weights(Mc, grp, P) -> np.ndarray:
    """``(m, G)``: precision's weight of each group (:func:`.strata.precision_weights`; 1 for one group)."""
    if grp.n > 1:
        return precision_weights(grp.masses(P), grp.sums(Mc) > 0)
    return (Mc.sum(1, keepdims=True) > 0) * 1.0


def _combine(rc, ra, rb, wc, sa, sb, simple: bool):
    """Precision, recall's numerator and denominator and :math:`\nu` from the prevalences per (target, group)
    (any leading axes: replicates)."""
    p = (wc * rc).sum(-1)
    Ahat, Bhat = (sa * ra).sum(-1), (sb * rb).sum(-1)
    nu = np.ones_like(p) if simple else np.clip(_safe_div(Ahat, Bhat), 0.0, 1.0)
    return p, Ahat, Bhat, nu


#: a shared part of higher rank than this (many distinct prevalences of recall's denominator) is made dense
MAX_SHARED_RANK = 32


def _design_var(d, t, fit: _Fit, lam_u, gs, var_th, theta, dP, dR, simple: bool):
    """The draws' variance given the votes (module docs, 1.): per metric, ``(m,)``.  The per-(target, draw)
    influence values are the terms (:class:`.rows.Rows`: non-zero where a target holds the drawn instance, plus
    recall's denominator shared by every target) times a function of each target's prevalence and the draw's
    instance, so a unit's draws (:mod:`.finite`) share theirs: they are held per unit as the terms are, sparse with
    a shared part of low rank (:func:`_influence`), a block of targets at a time (:meth:`.terms._Terms.unit_values`:
    memory is a block's non-zeros); ``lam_u``, ``gs``: each unit's log ratio and group."""
    var = {k: np.zeros(d.m) for k in ("p", "nu", "f1")}
    order = _registration(d)
    parts = _exp_parts(lam_u[order])
    for rows, *terms in t.unit_values(order=order):
        got = _design_rows(d, t, fit, rows, terms, parts, gs[order], dP[rows], dR[rows] * theta[rows], simple,
                           order)[0]
        for k in var:
            var[k][rows] = got[k]
    return _design_totals(var, fit.nu, var_th, theta, dR)


def _design_totals(var: dict, nu, var_th, theta, dR) -> dict:
    """The draws' variance of each metric from the strata variances of precision's, :math:`\nu`'s and F1's
    influence rows (``var``) and :math:`\theta`'s variance ``var_th`` (the exhaustive sample's)."""
    return {"p": var["p"], "r": theta ** 2 * var["nu"] + nu ** 2 * var_th + var_th * var["nu"],
            "f1": var["f1"] + (dR * nu) ** 2 * var_th}


def _registration(d) -> np.ndarray:
    """The units by their first draw, last first: the order in which a product of a target's per-draw values with
    the units' indicator stores the units' totals (scipy's ``csr_matmat``), which :func:`.finite.strata_var` sums
    in (kept, so that the variances are those of the per-draw values to the last bit)."""
    return np.argsort(-d.units.first, kind="stable")


def _design_rows(d, t, fit: _Fit, rows, terms, parts, gs, dP, dRt, simple: bool, order, theta=None
                 ) -> tuple[dict, dict]:
    r"""The strata variances and the influence rows (unit totals, :func:`_unit_totals`) of precision, of
    :math:`\nu` and of F1's draws' part (:math:`\partial_P F\,u^P + \partial_R F\,\theta\,u^\nu`, ``dP`` and
    ``dRt``) for the targets ``rows``, from :func:`_influence` of their terms' one-draw values ``terms``
    (``C``, ``A``, ``B``, their columns the units ``order``); with ``theta``, also recall's draws' part
    :math:`\theta\,u^\nu` (``r``, its rows only)."""
    from .joint import strata_var

    C, A, B = terms
    uP = _influence(C, rows, parts, fit.rc, fit.kc, None, gs)
    if simple:
        uN = Rows(sp.csr_matrix(uP.shape))
    else:
        inv_b = _safe_div(np.ones(len(fit.Bhat)), fit.Bhat)[rows]
        dA = _influence(A, rows, parts, fit.ra, fit.ka, fit.ra, gs)  # dA = A (rho_A + sum(A)/J_A kappa_A)
        dB = _influence(B, rows, parts, fit.rb, fit.kb, fit.rb, gs)  # dB likewise
        uN = dA.scaled(rows=inv_b) + dB.scaled(rows=-fit.nu[rows] * inv_b)  # (dA - nu dB) / B
    u = {"p": uP, "nu": uN, "f1": uN.scaled(rows=dRt) + uP.scaled(rows=dP)}
    pattern = _Pattern.of(C.sparse, t.unit_draws, order)  # the three share C's pattern but where one holds a 0
    u = {k: pattern.totals(x) for k, x in u.items()}
    seg = {}
    for k, x in u.items():  # the runs by cell, once per pattern
        if _same(x.sparse.indices, pattern.indices) and "runs" not in seg:
            seg["runs"] = Segments.of(x.sparse, d.units.unit_cell)
    var = {k: strata_var(x, d, per_unit=True, segments=seg.get("runs")) for k, x in u.items()}
    if theta is not None:
        u["r"] = pattern.totals(uN.scaled(rows=theta))
    return var, u


def _design_linear(d, t, fit: _Fit, lam_u, gs, T0, var_th, theta, dP, dR, simple: bool) -> tuple[dict, dict]:
    """:func:`_design_var`'s variances and, per metric, the design part's :class:`.linear.Linear` of every target
    (per unit), from one set of influence rows (:func:`_design_rows` of all targets at once)."""
    order = _registration(d)
    (rows, *terms), = t.unit_values(whole=True, order=order)
    var, u = _design_rows(d, t, fit, rows, terms, _exp_parts(lam_u[order]), gs[order], dP, dR * theta, simple,
                          order, theta)
    nu = fit.nu
    return _design_totals(var, nu, var_th, theta, dR), {
        "p": Linear(u["p"], per_unit=True),
        "r": Linear(u["r"], nu[:, None] * T0, extra=var_th * var["nu"], per_unit=True),
        "f1": Linear(u["f1"], (dR * nu)[:, None] * T0, per_unit=True)}


@dataclass(frozen=True)
class _Pattern:
    """The one-draw values' pattern of a block of targets (targets x units ``order``, CSR) and what turns values on
    it into the units' totals (:meth:`totals`): each unit's draws ``n``, the entries of units of several draws
    (``multi``, their draws ``n_multi``), and the entries' units (``indices``) in ``order``."""

    indptr: np.ndarray
    indices: np.ndarray
    multi: np.ndarray
    n_multi: np.ndarray
    n: np.ndarray
    order: np.ndarray
    pattern: np.ndarray

    @staticmethod
    def of(X: sp.csr_matrix, n: np.ndarray, order: np.ndarray) -> _Pattern:
        cnt = n[order][X.indices]
        multi = np.flatnonzero(cnt > 1)
        return _Pattern(X.indptr, order.astype(X.indices.dtype)[X.indices], multi, cnt[multi], n[order], order,
                        X.indices)

    def totals(self, X: Rows) -> Rows:
        """``X``'s one-draw values (targets x units ``order``) as the units' totals (targets x units), each added
        to itself as many times as its unit has draws, one draw after another: the sums the per-draw values made,
        stored in ``order`` (zeros not stored, as a product leaves them out)."""
        Xs = X.sparse
        if _same(Xs.indices, self.pattern) and _same(Xs.indptr, self.indptr):
            data, indices, indptr = _added(Xs.data, self.multi, self.n_multi), self.indices, self.indptr
        else:
            cnt = self.n[Xs.indices]
            multi = np.flatnonzero(cnt > 1)
            data, indices, indptr = _added(Xs.data, multi, cnt[multi]), self.order[Xs.indices], Xs.indptr
        kept = data != 0
        if not kept.all():
            row = np.repeat(np.arange(Xs.shape[0]), np.diff(indptr))[kept]
            data, indices, indptr = data[kept], indices[kept], np.searchsorted(row, np.arange(Xs.shape[0] + 1))
        out = sp.csr_matrix((data, indices, indptr), shape=Xs.shape)
        b = None
        if X.b is not None:  # as the product of the draws' indicator with the per-draw rows (laid out as it is)
            multi = np.flatnonzero(self.n > 1)
            bo = _added(X.b, multi, self.n[multi])
            b = np.empty_like(bo) if bo.ndim == 1 else np.empty(bo.shape[::-1]).T
            b[..., self.order] = bo
        return Rows(out, X.a, b)


def _added(x: np.ndarray, idx: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``x`` (last axis: one value per entry) with its entries ``idx`` added to themselves ``n`` times (``n > 1``
    each), one addition at a time."""
    out = x.copy()
    k = 2
    while len(idx):
        out[..., idx] += x[..., idx]
        keep = n > k
        idx, n = idx[keep], n[keep]
        k += 1
    return out


def _item_totals(t, X: Rows, runs=None) -> np.ndarray:
    """``(rows, K)``: ``X``'s one-draw values (targets x units) summed over the draws of each distinct instance
    drawn, as the per-draw terms' :meth:`.rows.Rows.totals` (each total added draw by draw in the draws' order);
    ``runs``: :func:`_draw_runs` of ``X``'s pattern when at hand."""
    u, K = t.d.units, len(t.codes)
    shared = None if X.a is None else Rows(sp.csr_matrix((X.shape[0], len(u.unit))), X.a,
                                           X.b[..., u.unit]).totals(t.item, K)  # per draw: a row of S values
    Xs = X.sparse
    if not t.units_in_draw_order:
        out = Rows(Xs).columns(u.unit).totals(t.item, K)
    else:  # the units' draws in the units' order: one pass, each unit's value repeated for its draws
        if runs is None or not (_same(runs[2], Xs.indices) and _same(runs[3], Xs.indptr)):
            runs = _draw_runs(t, Xs)
        key, idx = runs[:2]
        out = np.bincount(key, weights=Xs.data[idx], minlength=Xs.shape[0] * K).reshape(-1, K)
    return out if shared is None else out + shared


def _draw_runs(t, Xs: sp.csr_matrix) -> tuple:
    """For :func:`_item_totals` of values on the pattern ``Xs`` (targets x units): per draw of each stored
    (target, unit), its (target, instance) key and the stored entry, in order, and the pattern."""
    K = len(t.codes)
    idx = np.repeat(np.arange(Xs.nnz), t.unit_draws[Xs.indices])
    key = np.repeat(np.arange(Xs.shape[0], dtype=np.int64) * K, np.diff(Xs.indptr))
    key += t.item[t.d.units.first][Xs.indices]
    return key[idx], idx, Xs.indices, Xs.indptr


@dataclass(frozen=True)
class _Replicates:
    """The estimates under each replicate of the confusions, per metric ``(R, m)`` (:func:`_rates_replicates`)."""

    by_metric: dict


def exhaustive_recall(d, bare: np.ndarray, est: dict, var: dict, parts: _NoisyParts, confidence) -> None:
    """The ``bare`` targets' recall taken from the exhaustive sample alone (:func:`.joint.exhaustive_recall_targets`),
    as :func:`.joint.linear_parts` takes it from labels: :func:`noisy_estimates`'s ``est`` (with its linear parts and
    confusion replicates when kept), ``var`` and variance ``parts`` updated in place.  The votes and the confusions
    no longer enter recall; F1 is precision's and that recall's (independent: the delta method)."""
    from .intervals import _f1_partials, f1_score
    from .joint import _implied_nu, pool_values

    share, T = pool_values(d, d.g0)
    var_th = _var0_of(d, T, confidence)
    est["r"] = np.where(bare, share, est["r"])
    est["nu"] = _implied_nu(est["r"], est["theta"], est["nu"], bare)  # theta stays the pool's share
    f1 = f1_score(est["p"], est["r"])
    est["f1"] = np.where(bare, f1, est["f1"])
    dP, dR = _f1_partials(est["p"], est["r"])
    for name, part in (("design", parts.var_design), ("votes", parts.var_votes), ("rates", parts.var_rates)):
        part["r"] = np.where(bare, var_th if name == "design" else 0.0, part["r"])
        part["f1"] = np.where(bare, dP ** 2 * part["p"] + (dR ** 2 * var_th if name == "design" else 0.0),
                              part["f1"])
    var["r"] = np.where(bare, var_th, var["r"])
    var["f1"] = np.where(bare, dP ** 2 * var["p"] + dR ** 2 * var_th, var["f1"])
    parts.r_raw[bare] = share[bare]
    parts.f1_raw[bare] = np.where(np.isnan(parts.p_raw), np.nan, f1_score(parts.p_raw, parts.r_raw))[bare]
    lin, reps = est.get("_linear"), est.get("_reps")
    if lin is not None:
        lp = lin["p"]
        lin["r"] = _pick(Linear(lp.draws.scaled(rows=np.zeros(d.m)), T, extra=np.zeros(d.m), per_unit=lp.per_unit),
                         lin["r"], bare)
        lin["f1"] = _pick(Linear(lp.draws.scaled(rows=dP), dR[:, None] * T, per_unit=lp.per_unit), lin["f1"], bare)
    if reps is not None:
        by = reps.by_metric
        by["r"] = np.where(bare[None, :], est["r"][None, :], by["r"])
        by["f1"] = np.where(bare[None, :], f1_score(by["p"], est["r"][None, :]), by["f1"])


def _var0_of(d, T, confidence):
    from .joint import _var0

    return _var0(T, d, confidence) if d.v0.sum() > 0 else np.zeros(len(T))


def vote_covariances(d, W, votes, confidence, simple: bool) -> tuple[dict, tuple[str, ...]]:
    """For :func:`.paired.covariances`: per metric the ``(m, m)`` covariance matrix of the estimates from crowd
    votes, and notes.  Design: the influence rows' (exact, :func:`_design_linear`); confusions: the replicates'
    covariance (exact); votes: each system's votes' variance on the diagonal, their covariance taken as 0
    (:mod:`.paired`)."""
    from dataclasses import replace

    from .joint import _terms

    t = _terms(replace(d, f=np.ones(len(d.xs))), W)
    est, _, parts = noisy_estimates(d, t, W, votes, simple=simple, confidence=confidence, keep=True)
    return fitted_covariances(d, est["_linear"], est["_reps"], parts.var_votes, confidence)


def fitted_covariances(d, lin, reps, var_votes, confidence) -> tuple[dict, tuple[str, ...]]:
    """:func:`vote_covariances` from a fit's linear parts, confusion replicates and votes' variances (kept by
    ``estimate(..., linear=True)``)."""
    out = {}
    for k in ("p", "r", "f1"):
        C = lin[k].cov(d, confidence)
        C[np.diag_indices(d.m)] += var_votes[k]
        if reps is not None:
            C += np.atleast_2d(np.cov(reps.by_metric[k], rowvar=False, ddof=1))
        out[k] = C
    return out, ("votes' covariance between systems taken as 0 (their variances added for a difference)",)


def _classes(rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rho`` (targets x groups; equal to 12 decimals) and each target's."""
    uniq, cls = np.unique(np.round(rho, 12), axis=0, return_inverse=True)
    return uniq, cls.reshape(-1)


def _shared_rank(X: Rows, rho: np.ndarray) -> int:
    """The rank of :func:`_influence`'s shared part of ``X`` at the prevalences ``rho``."""
    return len(_classes(rho)[0]) * rho.shape[1] * 2 * X.factors()[0].shape[1]


def _influence(X: Rows, rows, parts, rho, k, c, gs) -> Rows:
    r"""``X``, the terms of the targets ``rows`` (a unit's one-draw values), with each entry :math:`x_{is}` times
    :math:`\kappa(\lambda_s, \rho_{i g(s)})\,k_{i g(s)} + c_{i g(s)}` (``rho``, ``k``, ``c``: targets x groups; ``c``
    None: 0; ``parts``: :func:`.noisy._exp_parts` of the units' log ratios; ``gs``: each unit's group).  The sparse
    part stays sparse; the shared part :math:`a_i b_s` becomes, per class of targets with equal prevalences and per
    group, two shared rows (:math:`a_i k_{ig} \otimes b_s\kappa_s` and :math:`a_i c_{ig} \otimes b_s`), or dense
    when that rank exceeds :data:`MAX_SHARED_RANK`."""
    num, den = parts
    G = rho.shape[1]
    rho, k, c = rho[rows], k[rows], None if c is None else c[rows]
    Xs = X.sparse
    per_row = np.diff(Xs.indptr)
    i = np.repeat(np.arange(Xs.shape[0]), per_row) if G > 1 else None
    g = gs[Xs.indices] if G > 1 else None

    def entry(v):  # each entry's (target, group) value; one group: its target's, a row's value repeated
        return v[i, g] if G > 1 else np.repeat(v[:, 0], per_row)

    val = _finite0(_kappa_at((num[Xs.indices], den[Xs.indices]), entry(rho)))
    val *= entry(k)
    if c is not None:
        val += entry(c)
    val *= Xs.data
    out = Rows(sp.csr_matrix((val, Xs.indices, Xs.indptr), shape=Xs.shape))
    if X.a is None:
        return out
    A, B = X.factors()
    uniq, cls = _classes(rho)
    at = (lambda vec: vec[gs]) if G > 1 else (lambda vec: vec[0])
    if _shared_rank(X, rho) > MAX_SHARED_RANK:  # dense: (rows, units), bounded by the caller's blocks
        D = A @ B
        for j, vec in enumerate(uniq):
            tg = np.flatnonzero(cls == j)
            kap = _finite0(_kappa_at(parts, at(vec)))
            D[tg] *= (kap[None, :] * (k[tg][:, gs] if G > 1 else k[tg]) +
                      (0.0 if c is None else (c[tg][:, gs] if G > 1 else c[tg])))
        return out + Rows(sp.csr_matrix(D))
    left, right = [], []
    for j, vec in enumerate(uniq):
        tg = (cls == j).astype(float)
        kap = _finite0(_kappa_at(parts, at(vec)))
        for gg in range(G):
            ing = (gs == gg) if G > 1 else 1.0
            for q in range(A.shape[1]):
                left.append(A[:, q] * k[:, gg] * tg)
                right.append(B[q] * kap * ing)
                if c is not None:
                    left.append(A[:, q] * c[:, gg] * tg)
                    right.append(B[q] * ing)
    return Rows(out.sparse, np.stack(left, axis=1), np.stack(right))


def _information_at_edges(rho, J, M, *, pat, n, re, rows, cols, lam) -> np.ndarray:
    """Per (target, group) row: its information ``J``, or where its prevalence ``rho`` is 0 or 1 the expected
    information of its items (coefficients ``M``) over their vote patterns when that is larger.  The observed
    ``J`` then holds none of the contrary vote patterns whose score is unbounded there (module docs, 2.)."""
    edge = np.flatnonzero(np.isfinite(J) & ((rho <= 0) | (rho >= 1)) & (J > 0))
    if not len(edge):
        return J
    on = np.isin(re, edge)
    k = int(on.sum())
    post = posterior(lam[cols[on]], rho[re[on]])
    j_exp = vote_variance(pat, n, re[on], cols[on], np.ones(k), rho, np.zeros(k), rho, post, post,
                          M[rows[on], cols[on]])[0]
    out = J.copy()
    out[edge] = np.maximum(J[edge], j_exp[edge])
    return out


def _votes_var(d, t, fit: _Fit, votes, codes, lam, grp, Mc, Ma, Mb, R, theta, dP, dR, simple: bool):
    """The votes' variance (module docs, 2.): per metric, ``(m,)``.  Computed per (target, group) row
    (``row * G + group``): the groups' items are distinct, their variances add."""
    m, G, gk = d.m, grp.n, grp.item
    pat = vote_patterns(votes, codes)
    # the pairs (target, item) where a target's own functionals weigh the item; recall's denominator weighs every
    # item, by a factor per (target, group) (b) times p0 (the dense part of _vote_var)
    rows, cols, p_pair, g_pair = _vote_pairs(d.P[:, codes], Ma, Mb, simple)
    re = rows * G + gk[cols]
    rc, ra, rb = fit.rc.ravel(), fit.ra.ravel(), fit.rb.ravel()
    post_p = posterior(lam[cols], rc[re])
    post_b = posterior(lam[cols], rb[re])
    # a prevalence estimated at 0 or 1 (precision's, recall's numerator's): the expected information instead of
    # the observed one where larger (module docs, 2.)
    edge = dict(pat=pat, n=m * G, re=re, rows=rows, cols=cols, lam=lam)
    kc = _safe_div(fit.wc.ravel(), _information_at_edges(rc, fit.Jc.ravel(), Mc, **edge))
    gp = p_pair * kc[re]
    ka = _safe_div(fit.sa.ravel(), _information_at_edges(ra, fit.Ja.ravel(), Ma, **edge)) if not simple else kc * 0
    ga = d.p0[codes][cols] * g_pair * ka[re] * _safe_div(np.ones(m), fit.Bhat)[rows]
    wpair = R[rows, cols]
    dense = None
    if not simple:
        bfac = -(fit.nu[:, None] * fit.kb) * _safe_div(np.ones(m), fit.Bhat)[:, None]
        dense = (bfac.ravel(), d.p0[codes], rb)
    vp, vpb, vn, cv = vote_variance(pat, m * G, re, cols, gp, rc, ga, ra, post_p, post_b, wpair, dense=dense,
                                    lam=lam, R=R, groups=gk if G > 1 else None)
    vp, vpb, vn, cv = (x.reshape(m, G).sum(1) for x in (vp, vpb, vn, cv))
    var = {"p": vp}
    if simple:
        var["f1"] = dP ** 2 * vp
        var["r"] = np.zeros(m)
    else:
        fa = dR * theta
        var["f1"] = np.maximum(dP ** 2 * vpb + 2 * dP * fa * cv + fa ** 2 * vn, 0.0)
        var["r"] = theta ** 2 * vn
    return var


def _vote_pairs(Pk: sp.csr_matrix, Ma: np.ndarray, Mb: np.ndarray, simple: bool):
    """The (target, item) pairs, in row-major order, where the target's distribution ``Pk`` (targets x items) or
    its unit coefficient of recall's numerator over the denominator's, :math:`g_i(x) = A/B` (none when
    ``simple``), is positive: rows, columns and both values per pair (no targets x items array of floats)."""
    Pk = sp.csr_matrix(Pk)
    Pk.sum_duplicates()
    Pk.data[~(Pk.data > 0)] = 0.0
    Pk.eliminate_zeros()
    held = Pk.astype(bool).toarray()
    if not simple:
        held |= (Ma > 0) & (Mb > 0)
    rows, cols = np.nonzero(held)
    del held
    K = Pk.shape[1]
    keys = np.repeat(np.arange(Pk.shape[0], dtype=np.int64) * K, np.diff(Pk.indptr)) + Pk.indices
    at = np.searchsorted(keys, rows * K + cols)
    hit = at < len(keys)
    hit[hit] = keys[at[hit]] == (rows * K + cols)[hit]
    p = np.where(hit, Pk.data[np.minimum(at, max(len(keys) - 1, 0))] if len(keys) else 0.0, 0.0)
    g = np.zeros(len(rows)) if simple else _safe_div(Ma[rows, cols], Mb[rows, cols])
    keep = (p > 0) | (g > 0)
    return rows[keep], cols[keep], p[keep], g[keep]


def _rates_replicates(votes, U, codes, Mc, Ma, Mb, grp, P, theta, simple: bool, fit: _Fit) -> dict | None:
    """Per metric, ``(replicates, m)``: the estimates refitted under each replicate of the confusions (the draws
    and the votes held), each refit searched from ``fit``'s; None with one replicate."""
    from .intervals import f1_score

    if votes.replicates <= 1:
        return None
    lam_rep = item_log_lr(votes, U, votes.sens_rep, votes.fpr_rep, items=codes)  # (R, K)
    G, gk = grp.n, grp.item
    # refits by Newton steps from the point fit, continued past a bound (noisy.prevalence start): clipped, a point
    # estimate at 1 had refits at 1 and no confusions' variance (a human reference of true precision 1 at 0.965
    # [0.832, 0.994]; 10-instance systems judged by a 0.6 crowd covered 0.80 against 0.90 with the delta method)
    # the items of equal log ratios under every replicate merged once for the three (prevalence would merge them
    # for each)
    merge = item_merge(lam_rep, gk)

    def refit(M, r0):
        merged, lam_m, gm = _merge_items(M, lam_rep, gk, merge)
        return np.nan_to_num(prevalence(merged, lam_m, groups=gm, n_groups=G, start=r0)[0])

    rc, ra, rb = (refit(M, r0) for M, r0 in ((Mc, fit.rc), (Ma, fit.ra), (Mb, fit.rb)))
    p, _, _, nu = _combine(rc, ra, rb, _precision_weights(Mc, grp, P), grp.sums(Ma), grp.sums(Mb), simple)
    r = theta[None, :] * nu
    return {"p": p, "r": r, "f1": f1_score(p, r)}


def _per_item(t) -> tuple[np.ndarray, ...]:
    """``(m, K)`` each: precision's, recall's numerator's and denominator's terms and the importance ratios summed
    over the draws of each distinct instance drawn (:func:`_item_totals`), a block of targets at a time."""
    d, K = t.d, len(t.codes)
    out = tuple(np.zeros((d.m, K)) for _ in range(4))
    if not len(d.xs):
        return out
    for rows, C, A, B in t.unit_values(ess=True):
        runs = _draw_runs(t, C.sparse) if t.units_in_draw_order else None  # A's pattern is C's
        for o, X in zip(out, (C, A, B, t.ratio_u.sub(rows))):
            o[rows] = _item_totals(t, X, runs)
    return out


def noisy_estimates(d, t, W: np.ndarray, votes: CrowdVotes, *, simple: bool = False,
                    confidence: float | None = None, keep: bool = False):
    """Estimates and variances of every target from the design ``d``, its unit-label terms ``t`` (the joint
    kernel's ``_terms`` with every label 1) and the crowd's ``votes`` (module docs); with ``votes.strata`` every
    prevalence is fitted per (target, group of strata) and combined (:mod:`.strata`) for the targets that have at
    least :data:`~.strata.MIN_TARGET_ITEMS` items in each of their groups and are not near a bound with a group at
    it (:data:`NEAR_BOUND`), else in one group.
    ``confidence``: the level of the intervals, for the exhaustive documents' Student-:math:`t` inflation
    (:func:`~.joint._var0`).

    Returns ``(est, var, parts)``: dicts metric -> (m,) for ``p``, ``r``, ``f1``, ``theta``, ``nu`` and the
    total variances of ``p``, ``r``, ``f1``; and :class:`_NoisyParts`.
    """
    m, U = d.P.shape
    if getattr(t, "ratio_u", None) is None:
        raise InvalidInputError("terms: the kernel's importance ratios are needed for the vote variance")
    codes, inv = t.codes, t.item
    items = (codes, inv, item_log_lr(votes, U)[codes], *_per_item(t))
    grp = strata_groups(votes.strata, codes, U)
    got = _estimates(d, t, votes, items, grp, simple, confidence, keep)
    if grp.n == 1:
        return got
    # a target with few items in one of its groups: that group's prevalence sits at 0 or 1 half the time, and
    # the bounded estimates of many small groups add up to a bias (a system of precision 0.99 over 8 relation
    # types, 150 draws: -3 points); such a target is fitted in one group (its rates still per stratum)
    Mc = items[3]
    own = np.stack([np.bincount(grp.item, weights=(Mc[i] > 0), minlength=grp.n) for i in range(m)])
    thin = ((own > 0) & (own < MIN_TARGET_ITEMS)).any(1)
    # a target near a bound (precision within NEAR_BOUND of 0 or 1) with a group less than one of its items from
    # that bound too: the likelihood-ratio interval that reaches the bound needs one prevalence (and near a bound
    # there is little for the groups to correct)
    rc, p = got[0]["_rc"], got[0]["p"][:, None]
    hi = (p > 1 - NEAR_BOUND) & ((1 - rc) * own < 1)
    lo = (p < NEAR_BOUND) & (rc * own < 1)
    thin |= ((own > 0) & (hi | lo)).any(1)
    if not thin.any():
        return got
    one = _estimates(d, t, votes, items, strata_groups(None, codes, U), simple, confidence, keep)
    return _pick(one, got, thin)


#: a target whose precision is this close to 0 or 1, with a group at that bound, is fitted in one group
NEAR_BOUND = 0.1


def _pick(a, b, where: np.ndarray):
    """``a`` where ``where`` (per target), else ``b``: arrays of length m, and dicts, tuples and
    :class:`_NoisyParts` of them (other values from ``b``)."""
    m = len(where)
    if isinstance(a, np.ndarray) and a.ndim == 1 and len(a) == m and a.dtype != object:
        return np.where(where, a, b)
    if isinstance(a, dict):
        return {k: _pick(a[k], b[k], where) for k in b}
    if isinstance(a, tuple) and not isinstance(a, _NoisyParts):
        return tuple(_pick(x, y, where) for x, y in zip(a, b))
    if isinstance(a, Linear):
        w = where.astype(float)
        return Linear(a.draws.scaled(rows=w) + b.draws.scaled(rows=1 - w),
                      None if b.exhaustive is None else np.where(where[:, None], a.exhaustive, b.exhaustive),
                      extra=_pick(a.extra, b.extra, where), per_unit=b.per_unit)
    if isinstance(a, _Replicates):
        return _Replicates({k: np.where(where[None, :], a.by_metric[k], b.by_metric[k]) for k in b.by_metric})
    if isinstance(a, _NoisyParts):
        return _NoisyParts(*(_pick(getattr(a, f), getattr(b, f), where) for f in _NoisyParts.__dataclass_fields__))
    return b


def _estimates(d, t, votes, items, grp, simple: bool, confidence, keep: bool = False):
    """:func:`noisy_estimates` in the groups ``grp``; ``items``: the distinct drawn items, each draw's item, their
    log ratios and the per-item coefficients of precision, recall's numerator and denominator and the ratios."""
    from .intervals import _f1_partials, f1_score
    from .joint import _var0

    m, U = d.P.shape
    codes, inv, lam, Mc, Ma, Mb, R = items
    fit = _fit(Mc, Ma, Mb, lam, grp, d.P, simple)
    # theta: from the exhaustive sample (no labels)
    v = d.v0
    V = v.sum()
    S0 = d.g0.astype(float) if simple else t.S0.astype(float)
    theta = (S0 * v).sum(1) / V if V > 0 else np.zeros(m)
    T0 = v[None, :] * (S0 - theta[:, None]) / V if V > 0 else np.zeros_like(S0)
    var_th = _var0(T0, d, confidence)
    p, nu = fit.p, fit.nu
    r = theta * nu
    f1 = f1_score(p, r)
    dP, dR = _f1_partials(p, r)
    unit_item = inv[d.units.first]
    if keep:  # the linear parts for the covariances between targets (:mod:`.paired`), and the variances from them
        var_d, lin = _design_linear(d, t, fit, lam[unit_item], grp.item[unit_item], T0, var_th, theta, dP, dR,
                                    simple)
    else:
        var_d = _design_var(d, t, fit, lam[unit_item], grp.item[unit_item], var_th, theta, dP, dR, simple)
    var_v = _votes_var(d, t, fit, votes, codes, lam, grp, Mc, Ma, Mb, R, theta, dP, dR, simple)
    reps = _rates_replicates(votes, U, codes, Mc, Ma, Mb, grp, d.P, theta, simple, fit)
    var_r = {k: np.zeros(m) if reps is None else np.var(reps[k], axis=0, ddof=1) for k in ("p", "r", "f1")}
    var = {k: var_d[k] + var_v[k] + var_r[k] for k in ("p", "r", "f1")}
    # the raw figure: majority labels as if certain
    y = majority_labels(votes, U)[codes]
    y = np.where(np.isnan(y), 0.0, y)
    n_c = np.asarray(Mc.sum(1)).ravel()
    p_raw = np.where(n_c > 0, _safe_div(Mc @ y, n_c), np.nan)  # no draw weighs the target: the sample says nothing
    nu_raw = np.ones(m) if simple else np.clip(_safe_div(Ma @ y, Mb @ y), 0, 1)
    r_raw = theta * nu_raw
    n_ans = np.bincount(votes.worker, minlength=votes.n_workers).astype(float)
    tot = max(n_ans.sum(), 1.0)
    f1_raw = np.where(np.isnan(p_raw), np.nan, f1_score(np.nan_to_num(p_raw), r_raw))
    parts = _NoisyParts(p_raw, r_raw, f1_raw, var_d, var_v, var_r,
                       float((n_ans * votes.sens).sum() / tot), float((n_ans * votes.fpr).sum() / tot))
    # the likelihood-ratio intervals need one prevalence: targets whose estimate is one group's (all without strata)
    one_p, one_a = fit.single(fit.wc), fit.single(fit.sa * (fit.Ja > 0))
    scale = theta * _safe_div(fit.sa.sum(1), fit.Bhat)  # r = scale * rho_A while nu is not clipped
    est = {"p": p, "r": r, "f1": f1, "theta": theta, "nu": nu, "_rc": fit.rc, "_nu_defined": fit.Bhat > 0,
           "_p_fit": (Mc, lam, (fit.Jc * (fit.wc > 0)).sum(1), one_p),
           "_r_fit": (Ma, lam, (fit.Ja * (fit.sa > 0)).sum(1), (fit.ra * (fit.sa > 0)).sum(1), scale, one_a)}
    if keep:
        est["_linear"] = lin
        est["_reps"] = None if reps is None else _Replicates(reps)
    return est, var, parts
