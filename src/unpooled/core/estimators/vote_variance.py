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
    """Items grouped by their number of answers; in each group, per set of answering workers (items answered by
    the same workers share one), every vote pattern's log ratio and probabilities under each class;
    ``grp``/``pos``: each item's group and its workers' row in it."""

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
        grp[rows] = g
        if k == 0:
            groups.append((np.zeros((1, 1)), np.ones((1, 1)), np.ones((1, 1))))
            continue
        kk = min(k, MAX_ENUMERATED)
        # the answering workers as a set (the patterns' moments do not depend on their order)
        ws = np.sort(wk[order[starts[rows][:, None] + np.arange(kk)[None, :]]], axis=1)  # (items, kk)
        ws, at = np.unique(ws, axis=0, return_inverse=True)
        pos[rows] = at.reshape(-1)
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


def _class_var(z, p1, p0):
    """Variance of ``z`` over the vote patterns given each class: ``(v1, v0)``."""
    z = np.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)
    e1, e0 = (z * p1).sum(-1), (z * p0).sum(-1)
    return np.maximum((z * z * p1).sum(-1) - e1 * e1, 0.0), np.maximum((z * z * p0).sum(-1) - e0 * e0, 0.0)


def _moments(q, zs: dict, pairs) -> dict:
    """``E_q`` of each ``zs[a]`` and of each product ``zs[a] * zs[b]`` for ``ab`` in ``pairs``, per row."""
    out = {a: _dot(z, q) for a, z in zs.items()}
    out.update({ab: _dot(zs[ab[0]], zs[ab[1]], q) for ab in pairs})
    return out


def _covariances(mom: dict) -> dict:
    """From :func:`_moments`: per product ``ab`` the covariance ``E[ab] - E[a]E[b]`` (a variance: at least 0)."""
    out = {ab: mom[ab] - mom[ab[0]] * mom[ab[1]] for ab in mom if len(ab) == 2}
    for ab in out:
        if ab[0] == ab[1]:
            out[ab] = np.maximum(out[ab], 0.0)
    return out


def vote_variance(pat: VotePatterns, m: int, rows, cols, gp, rho_p, ga, rho_a, post_p, post_b, weight, *, dense=None,
                  lam=None, R=None, groups=None):
    r"""The votes' variance of precision and of :math:`\hat\nu` (and their covariance), per target.

    With :math:`z^P_{iu}(v) = \gamma^P_{iu}\kappa(\lambda(v), \hat\pi_i)` and
    :math:`z^\nu_{iu}(v) = \gamma^A_{iu}\kappa(\lambda(v), \hat\rho_{A,i}) + b_i p_0(u)\kappa(\lambda(v), \hat\rho_{B,i})`,
    returns :math:`\sum_u R_{iu}\mathrm{Var}_v(z^P)` (mixed by ``post_p``), the same mixed by ``post_b``,
    :math:`\sum_u R_{iu}\mathrm{Var}_v(z^\nu)` and :math:`\sum_u R_{iu}\mathrm{Cov}_v(z^P, z^\nu)` (by ``post_b``).
    The pairs ``(rows, cols)`` (target, item) are where the target's own functionals weigh the item (``gp``,
    ``ga``, ``post_p``, ``post_b``, ``weight`` per pair; the prevalences ``rho_p``, ``rho_a`` per target); a vote
    pattern where a :math:`\kappa` is not finite counts 0.  The :math:`\kappa` are enumerated once per (target,
    set of answering workers), not per pair: the pair's coefficients scale them, so its moments are the
    coefficients' combination of theirs.  The term :math:`b_i p_0(u)` weighs every item, and off the pairs it is
    summed through one vector per distinct :math:`\hat\rho_B` (with the balance heuristic one for all targets):
    the work is the pairs', not targets x items.  ``dense`` = ``(b, p0, rho_b)``; None: no recall part.  With
    ``groups`` (each item's group of strata, ``G`` of them) the rows are (target, group) pairs
    ``target * G + group`` and ``R`` is per target.
    """
    vp, vpb, vn, cv = (np.zeros(m) for _ in range(4))
    parts = [_exp_parts(lv) for lv, _, _ in pat.groups]  # once per pattern, not per (target, item) pair
    for g, sel in ((g, sel) for g in range(len(pat.groups))
                   for sel in _row_chunks(np.flatnonzero(pat.grp[cols] == g), rows)):
        lv, p1, p0 = pat.groups[g]
        r_, c_ = rows[sel], cols[sel]
        U = len(lv)
        shared, inv = np.unique(r_ * U + pat.pos[c_], return_inverse=True)  # (target, workers) of the pairs
        ur, ua = shared // U, shared % U
        li = (parts[g][0][ua], parts[g][1][ua])
        zs = {"p": _finite0(_kappa_at(li, rho_p[ur, None]))}
        pairs = ["pp"]
        if dense is not None:
            b, dvec, rho_d = dense
            ka, kd = _kappa_at(li, rho_a[ur, None]), _kappa_at(li, rho_d[ur, None])
            bad = ~(np.isfinite(ka) & np.isfinite(kd))  # z^nu is not finite there
            ka[bad] = kd[bad] = 0.0
            zs.update(a=ka, d=kd)
            pairs += ["aa", "dd", "ad", "pa", "pd"]
        # per (target, set) and class, the variances and covariances of the kappas; a pair's are its coefficients'
        # combination of them, so the pairs' coefficients are summed per (target, set) first
        cov = [_covariances(_moments(q[ua], zs, pairs)) for q in (p1, p0)]
        w, pb, gs = weight[sel], post_b[sel], gp[sel]
        n = len(shared)

        def per_set(c):  # a per-pair coefficient summed over the pairs of each (target, set)
            return np.bincount(inv, weights=c, minlength=n)

        def add(to, terms):  # to[target] += sum over (target, set) of coefficient x (co)variance
            to += np.bincount(ur, weights=sum(per_set(c) * v for c, v in terms), minlength=m)

        wg2 = w * gs * gs
        for post, to in ((post_p[sel], vp), (pb, vpb)):
            add(to, [(wg2 * post, cov[0]["pp"]), (wg2 * (1 - post), cov[1]["pp"])])
        if dense is None:
            continue
        al, be = ga[sel], b[r_] * dvec[c_]  # z^nu = al * kappa_A + be * kappa_B
        for mix, c in ((pb, cov[0]), (1 - pb, cov[1])):
            wm = w * mix
            add(vn, [(wm * al * al, c["aa"]), (2 * wm * al * be, c["ad"]), (wm * be * be, c["dd"])])
            add(cv, [(wm * gs * al, c["pa"]), (wm * gs * be, c["pd"])])
    if dense is not None:
        _dense_part(pat, parts, m, rows, cols, weight, dense, lam, R, groups, vn)
    return vp, vpb, vn, cv


#: the votes' variance works on chunks of about this many (target, item) pairs (each row's pairs in one chunk)
PAIRS_PER_CHUNK = 1 << 19


def _row_chunks(sel: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """``sel`` (pairs, in order) cut into chunks of about :data:`PAIRS_PER_CHUNK`, only where every row before the
    cut is below every row after it (``rows`` per pair, sorted by target): each row's pairs, and so its sums, in one
    chunk, added in the same order as at once."""
    if len(sel) <= PAIRS_PER_CHUNK:
        return [sel] if len(sel) else []
    r = rows[sel]
    ok = np.maximum.accumulate(r)[:-1] < np.minimum.accumulate(r[::-1])[::-1][1:]  # a cut after pair i
    cuts = np.flatnonzero(ok) + 1
    want = np.arange(PAIRS_PER_CHUNK, len(sel), PAIRS_PER_CHUNK)
    at = np.unique(cuts[np.minimum(np.searchsorted(cuts, want), len(cuts) - 1)]) if len(cuts) else np.zeros(0, int)
    return np.split(sel, at)


def _dense_part(pat, parts, m, rows, cols, weight, dense, lam, R, groups, vn) -> None:
    r"""Adds to ``vn`` the votes' variance of the term :math:`b_i p_0(u)\kappa` off the pairs (:func:`vote_variance`):
    per distinct :math:`\hat\rho_B`, every item's variance summed through ``R``, less the pairs'."""
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
            v1, v0 = _class_var(_kappa_at(parts[g], val), p1, p0)  # per set of answering workers
            post = posterior(lam[items], val)
            at = pat.pos[items]
            VB[items] = post * v1[at] + (1 - post) * v0[at]
        vec = dvec * dvec * VB
        if groups is None:
            full = (R @ vec)[tg]
        else:  # row (target, g) sums over the items of group g
            G = m // R.shape[0]
            full = (R @ (vec[:, None] * (groups[:, None] == np.arange(G)[None, :])))[tg // G, tg % G]
        mine = np.isin(rows, tg)
        part = np.bincount(rows[mine], weights=weight[mine] * vec[cols[mine]], minlength=m)[tg]
        vn[tg] += b[tg] ** 2 * np.maximum(full - part, 0.0)
