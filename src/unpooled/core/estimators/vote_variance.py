r"""The votes' share of the variance of an estimate from crowd votes (source 2 of :mod:`.noisy`'s module docstring).

An item's votes are drawn once, however often the item is drawn, so their noise adds, per item, the variance over
the item's possible vote patterns (given its class) of its influence on each target's estimates.  The patterns an
item could have received are enumerated from the workers who answered it (:func:`vote_patterns`: items with the
same answerers' confusion rows share one enumeration); :func:`vote_variance` sums the per-item variances, class by
class, into each target's precision and recall parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .noisy import CrowdVotes, _exp_parts, _kappa_at, posterior

#: items answered by more workers than this have their noise variance computed from their first
#: ``MAX_ENUMERATED`` answers (fewer votes: a larger variance, so the interval errs on the wide side)
MAX_ENUMERATED = 12


@dataclass
class VotePatterns:
    """Items grouped by their number of answers, with every vote pattern's log ratio and probabilities under
    each class; ``grp``/``pos``: each item's group and row in it."""

    groups: list  # (lam_v (G, 2^k), p1 (G, 2^k), p0 (G, 2^k))
    grp: np.ndarray
    pos: np.ndarray


def vote_patterns(votes: CrowdVotes, codes: np.ndarray) -> VotePatterns:
    """Vote patterns of the items ``codes`` (universe indices), each over its own workers' confusions."""
    K = len(codes)
    where = np.searchsorted(codes, votes.item)
    sel = (where < K) & (codes[np.minimum(where, K - 1)] == votes.item) if K else np.zeros(len(votes.item), bool)
    it = where[sel]
    wk = votes.worker[sel]
    counts = np.bincount(it, minlength=K)
    order = np.argsort(it, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ls, l1s = np.log(votes.sens), np.log1p(-votes.sens)
    le, l1e = np.log(votes.fpr), np.log1p(-votes.fpr)
    groups = []
    grp = np.zeros(K, np.int64)
    pos = np.zeros(K, np.int64)
    for g, k in enumerate(np.unique(counts).tolist()):
        rows = np.flatnonzero(counts == k)
        grp[rows], pos[rows] = g, np.arange(len(rows))
        if k == 0:
            groups.append((np.zeros((len(rows), 1)), np.ones((len(rows), 1)), np.ones((len(rows), 1))))
            continue
        kk = min(k, MAX_ENUMERATED)
        ws = wk[order[starts[rows][:, None] + np.arange(kk)[None, :]]]  # (G, kk)
        V = ((np.arange(2 ** kk)[:, None] >> np.arange(kk)[None, :]) & 1).astype(float)  # (2^kk, kk)
        lp1 = ls[ws] @ V.T + l1s[ws] @ (1 - V).T
        lp0 = le[ws] @ V.T + l1e[ws] @ (1 - V).T
        groups.append((lp1 - lp0, np.exp(lp1), np.exp(lp0)))
    return VotePatterns(groups, grp, pos)


def _finite0(z: np.ndarray) -> np.ndarray:
    """``z`` with its NaN and infinite entries set to 0, in place (``np.nan_to_num`` without the copies)."""
    with np.errstate(invalid="ignore"):
        z[~np.isfinite(z)] = 0.0
    return z


def _dot(*arrays) -> np.ndarray:
    """Row sums of the elementwise product of ``(n, k)`` arrays, without temporaries."""
    spec = ",".join("ij" for _ in arrays) + "->i"
    return np.einsum(spec, *arrays, optimize=False)


def _class_var(z, p1, p0, post):
    """Variance of ``z`` over the vote patterns given each class, mixed by ``post``."""
    z = np.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)
    e1, e0 = (z * p1).sum(-1), (z * p0).sum(-1)
    v1 = np.maximum((z * z * p1).sum(-1) - e1 * e1, 0.0)
    v0 = np.maximum((z * z * p0).sum(-1) - e0 * e0, 0.0)
    return post * v1 + (1 - post) * v0


def vote_variance(pat: VotePatterns, m: int, rows, cols, gp, rho_p, ga, rho_a, post_p, post_b, weight, *, dense=None,
              lam=None, R=None, groups=None):
    r"""The votes' variance of precision and of :math:`\hat\nu` (and their covariance), per target.

    With :math:`z^P_{iu}(v) = \gamma^P_{iu}\kappa(\lambda(v), \hat\pi_i)` and
    :math:`z^\nu_{iu}(v) = \gamma^A_{iu}\kappa(\lambda(v), \hat\rho_{A,i}) + b_i p_0(u)\kappa(\lambda(v), \hat\rho_{B,i})`,
    returns :math:`\sum_u R_{iu}\mathrm{Var}_v(z^P)` (mixed by ``post_p``), the same mixed by ``post_b``,
    :math:`\sum_u R_{iu}\mathrm{Var}_v(z^\nu)` and :math:`\sum_u R_{iu}\mathrm{Cov}_v(z^P, z^\nu)` (by ``post_b``).
    The pairs ``(rows, cols)`` (target, item) are where the target's own functionals weigh the item; the term
    :math:`b_i p_0(u)` weighs every item, and off the pairs it is summed through one vector per distinct
    :math:`\hat\rho_B` (with the balance heuristic one for all targets): the work is the pairs', not
    targets x items.  ``dense`` = ``(b, p0, rho_b)``; None: no recall part.  With ``groups`` (each item's group
    of strata, ``G`` of them) the rows are (target, group) pairs ``target * G + group`` and ``R`` is per target.
    """
    vp, vpb, vn, cv = (np.zeros(m) for _ in range(4))

    def moments(z, q):
        z = np.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)
        return z, (z * q).sum(-1)

    parts = [_exp_parts(lv) for lv, _, _ in pat.groups]  # once per pattern, not per (target, item) pair
    for g, (lv, p1, p0) in enumerate(pat.groups):
        sel = np.flatnonzero(pat.grp[cols] == g)
        if not len(sel):
            continue
        r_, c_ = rows[sel], cols[sel]
        at = pat.pos[c_]
        li = (parts[g][0][at], parts[g][1][at])
        q1, q0 = p1[at], p0[at]
        zp = _finite0(gp[sel, None] * _kappa_at(li, rho_p[sel, None]))
        e1p, e0p = _dot(zp, q1), _dot(zp, q0)
        v1p = np.maximum(_dot(zp, zp, q1) - e1p ** 2, 0.0)
        v0p = np.maximum(_dot(zp, zp, q0) - e0p ** 2, 0.0)
        w = weight[sel]
        vp += np.bincount(r_, weights=w * (post_p[sel] * v1p + (1 - post_p[sel]) * v0p), minlength=m)
        pb = post_b[sel]
        vpb += np.bincount(r_, weights=w * (pb * v1p + (1 - pb) * v0p), minlength=m)
        if dense is None:
            continue
        b, dvec, rho_d = dense
        zn = _finite0(ga[sel, None] * _kappa_at(li, rho_a[sel, None])
                      + (b[r_] * dvec[c_])[:, None] * _kappa_at(li, rho_d[r_][:, None]))
        e1n, e0n = _dot(zn, q1), _dot(zn, q0)
        v1n = np.maximum(_dot(zn, zn, q1) - e1n ** 2, 0.0)
        v0n = np.maximum(_dot(zn, zn, q0) - e0n ** 2, 0.0)
        c1 = _dot(zp, zn, q1) - e1p * e1n
        c0 = _dot(zp, zn, q0) - e0p * e0n
        vn += np.bincount(r_, weights=w * (pb * v1n + (1 - pb) * v0n), minlength=m)
        cv += np.bincount(r_, weights=w * (pb * c1 + (1 - pb) * c0), minlength=m)
    if dense is not None:
        b, dvec, rho_d = dense
        K = len(dvec)
        keys = np.round(np.nan_to_num(rho_d), 12)
        for val in np.unique(keys):
            tg = np.flatnonzero(keys == val)
            VB = np.zeros(K)
            for g, (lv, p1, p0) in enumerate(pat.groups):
                items = np.flatnonzero(pat.grp == g)
                if not len(items):
                    continue
                at = pat.pos[items]
                k = _kappa_at((parts[g][0][at], parts[g][1][at]), val)
                VB[items] = _class_var(k, p1[pat.pos[items]], p0[pat.pos[items]], posterior(lam[items], val))
            vec = dvec * dvec * VB
            if groups is None:
                full = R[tg] @ vec
            else:  # row (target, g) sums over the items of group g
                G = m // R.shape[0]
                full = ((R[tg // G] * (groups[None, :] == (tg % G)[:, None])) @ vec)
            mine = np.isin(rows, tg)
            part = np.bincount(rows[mine], weights=weight[mine] * vec[cols[mine]], minlength=m)[tg]
            vn[tg] += b[tg] ** 2 * np.maximum(full - part, 0.0)
    return vp, vpb, vn, cv
