r"""Recall from pooled and unassessed output (seed 002, "Reducing variance by incorporating pooled and unassessed
output"): the systems' agreement on instances nobody labelled, used to sharpen recall.

**The seed's idea.**  Every pooled instance is output by :math:`k(x)` of the systems.  Unassessed instances
(never drawn) are numerous, and their agreement count is known: split the pool into strata by :math:`k` (instances
output by one system are rarely correct, those output by many often), estimate each stratum's precision from the
pooled labels, and count the correct instances of the pool and of a system stratum by stratum.  Taken literally --
a system's instances in a stratum assumed as often correct as the stratum's -- this is biased for every system
whose precision differs from its strata's (measured: 4.5 points of recall on average, 13.6 at worst, on the
paper's set-up; :func:`stratified_recall` with ``shared=True``).

**A design-unbiased version** (post-stratification, Särndal et al. 1992 §7.6).  The joint estimator writes recall
as :math:`r_i = \theta_i\,\nu_i` (:mod:`.joint`), with :math:`\nu_i = A_i / B` the share of the pool's correct
instances (:math:`p_0`-weighted) that system :math:`i` output.  Its :math:`\hat A_i`, :math:`\hat B` are
importance-sampling sums :math:`\sum_s r_{is}\,p_0(x_s)\,f(x_s)\,[\cdot]` over the draws (:math:`r_{is}` the
importance ratio).  Post-stratified, with *cells* :math:`c` = (agreement band of :math:`k(x)`, whether
:math:`i` output :math:`x`) whose :math:`p_0`-weighted sizes :math:`N_c = \sum_{x \in c} p_0(x)` are known
(they need no label):

.. math::

    \hat\pi_c = \frac{\sum_{s \in c} r_{is}\,p_0(x_s)\,f(x_s)}{\sum_{s \in c} r_{is}\,p_0(x_s)}, \qquad
    \hat B^{ps} = \sum_c N_c \hat\pi_c, \qquad \hat A_i^{ps} = \sum_{c:\,g_i = 1} N_c \hat\pi_c, \qquad
    \hat\nu_i^{ps} = \hat A_i^{ps} / \hat B^{ps} .

Each cell's precision is its own (a system's singletons are judged by the draws that hit that system's
singletons), so :math:`\hat\nu^{ps}` is consistent with an :math:`O(1/n)` ratio bias like :math:`\hat\nu`.  A cell
with fewer than ``min_draws`` draws is merged into the next lower band of the same :math:`g_i` (the last resort is
one cell per :math:`g_i`).  Its variance is the stratified variance of the influence values

.. math::

    u_s = \frac{1}{\hat B}\Bigl(g_i(x_s) - \hat\nu_i\Bigr)\,\frac{N_{c(s)}}{D_{c(s)}}\,r_{is}\,p_0(x_s)\,
          \bigl(f(x_s) - \hat\pi_{c(s)}\bigr), \qquad D_c = \sum_{s\in c} r_{is}\,p_0(x_s),

over the draws' strata, and :math:`\hat r^{ps}_i = \hat\theta_i\hat\nu^{ps}_i` has the product variance of
:mod:`.joint`.

**Combined with the exhaustive sample** (:func:`combined_recall`).  The exhaustive sample alone gives
:math:`\hat r^e_i = \sum_y v_y g_i(y)/\sum_y v_y`.  Both estimators use :math:`\hat Y_0`, so they are correlated;
the minimum-variance combination :math:`\lambda\hat r^e + (1-\lambda)\hat r^{ps}` has
:math:`\lambda = (V_{ps} - C)/(V_e + V_{ps} - 2C)` (clipped to [0, 1]) with :math:`C` their covariance over the
documents of :math:`\hat Y_0`.  With independent estimators the relative efficiencies would add (the seed's
claim); here :math:`C > 0` and they do not.  ``unpooled simulate unassessed`` measures bias, width, coverage and
relative efficiency against the joint estimator; the service does not publish these estimates unless they meet
the targets there; they do not (docs/method/regimes.md, "Recall from pooled and unassessed output: measured, not published").

References
----------
C.-E. Särndal, B. Swensson, J. Wretman. *Model Assisted Survey Sampling*. Springer, 1992.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from .exhaustive import jackknife_values
from .intervals import wilson
from .joint import Design, _t0, _terms, _var0, strata_var, weight_matrix
from .results import ConfidenceInterval, Estimate

#: agreement bands: instances output by 1, 2, 3-4, 5-8 and 9 or more of the design's systems
BANDS = (1, 2, 3, 5, 9)


@dataclass(frozen=True)
class RecallEstimate:
    """Recall of every system by one estimator (:class:`~.results.Estimate` of arrays over systems) with the pool's
    share ``theta`` and the share ``nu`` within it it factorises into."""

    recall: Estimate
    theta: np.ndarray
    nu: np.ndarray
    #: with :func:`combined_recall`: the exhaustive estimate's weight :math:`\lambda` per system
    weight: np.ndarray | None = None


def _recall(r, var, d: Design, confidence: float, method: str) -> Estimate:
    """Recall ``r`` with variance ``var`` as an :class:`~.results.Estimate`: Wilson's interval at the exhaustive
    sample's size."""
    n0 = float(max(d.n0, 1))
    lo, hi = wilson(r, var, confidence, np.full(len(r), n0))
    return Estimate(r, np.sqrt(var), ConfidenceInterval(lo, hi, confidence, "wilson"), n0, method)


def agreement_band(P, bands=BANDS) -> np.ndarray:
    """Per universe instance: the band (``0..len(bands)-1``) of the number of systems outputting it; -1 for none."""
    k = np.asarray((P > 0).sum(axis=0)).ravel()
    return np.where(k > 0, np.searchsorted(np.asarray(bands), k, side="right") - 1, -1)


def merge_cells(counts: np.ndarray, n_bands: int, min_draws: int) -> np.ndarray:
    """Where each raw cell ``g * n_bands + band`` goes: a cell with fewer than ``min_draws`` draws joins the next
    lower band of the same ``g`` (from the top down); a lowest cell still short joins the next higher cell left; a
    ``g`` without any draw joins the other ``g``'s lowest cell."""
    counts = np.asarray(counts, float)
    target = np.arange(2 * n_bands)
    for g in (0, 1):
        base = g * n_bands
        c = counts[base:base + n_bands].copy()
        where = np.arange(n_bands)
        for b in range(n_bands - 1, 0, -1):
            if c[b] < min_draws:
                c[b - 1] += c[b]
                c[b] = 0
                where[where == b] = b - 1
        alive = [b for b in range(1, n_bands) if c[b] > 0]
        if c[0] < min_draws and alive:
            where[where == 0] = alive[0]
        target[base:base + n_bands] = base + where
    for g in (0, 1):
        if counts[g * n_bands:(g + 1) * n_bands].sum() == 0:  # nothing drawn in this g at all
            other = (1 - g) * n_bands
            target[g * n_bands:(g + 1) * n_bands] = target[other]
    return target


def stratified_recall(d: Design, W: np.ndarray | None = None, *, bands=BANDS, min_draws: int = 20,
                      confidence: float = 0.90, shared: bool = False) -> RecallEstimate:
    r"""Recall of every system by post-stratification on agreement bands (module docs).

    ``W``: the joint estimator's weights (default: the balance heuristic); the draws' labels are ``d.f``
    (certain or soft labels; the crowd-vote model is not applied here).  ``shared=True``: the seed's literal
    rule, each system's instances in a band given the band's precision (biased; for comparison only).
    """
    if min_draws < 1:
        raise InvalidInputError(f"min_draws: expected at least 1, got {min_draws!r}")
    m, U = d.P.shape
    W = weight_matrix(d.P, d.n, "balance") if W is None else np.asarray(W, float)
    t = _terms(d, W, own_complete=False)
    band_u = agreement_band(d.P, bands)
    nb = len(bands)
    p0 = d.p0
    Pbool = (d.P > 0).tocsr()
    # each target's pool S_i = supp q_i: instances output by a system j with w_ij > 0
    Sx = ((W > 0).astype(float) @ Pbool.astype(float).toarray()) > 0 if U * m <= 5e7 else None
    r_out, var_out, nu_out = np.zeros(m), np.zeros(m), np.zeros(m)
    band_s = np.maximum(band_u[d.xs], 0)
    band_x = np.maximum(band_u, 0)
    pw = p0[d.xs]
    n_cells = 2 * nb
    for i in range(m):
        pool = Sx[i] if Sx is not None else np.asarray(((W[i] > 0).astype(float) @ Pbool).toarray()).ravel() > 0
        gu = np.asarray(Pbool[i].toarray()).ravel().astype(bool)  # system i output x
        gs = (d.gs[i] if d.gs is not None else gu[d.xs]).astype(bool)  # system i matches draw s (recall)
        ratio = t.ratio.row(i)
        in_pool = pool[d.xs] & (ratio > 0)
        # cells: band x (g_i, or nothing with the seed's shared rule)
        raw_s = np.where(in_pool, np.where(gs & (not shared), nb, 0) + band_s, -1)
        raw_u = np.where(pool, np.where(gu & (not shared), nb, 0) + band_x, -1)
        target = merge_cells(np.bincount(raw_s[raw_s >= 0], minlength=n_cells), nb, min_draws)
        code = np.where(raw_s >= 0, target[np.maximum(raw_s, 0)], -1)
        cu = np.where(raw_u >= 0, target[np.maximum(raw_u, 0)], -1)
        N_c = np.bincount(cu[cu >= 0], weights=p0[cu >= 0], minlength=n_cells)
        NA_c = np.bincount(cu[(cu >= 0) & gu], weights=p0[(cu >= 0) & gu], minlength=n_cells)
        keep = code >= 0
        num = np.bincount(code[keep], weights=(ratio * pw * d.f)[keep], minlength=n_cells)
        den = np.bincount(code[keep], weights=(ratio * pw)[keep], minlength=n_cells)
        with np.errstate(divide="ignore", invalid="ignore"):
            pi = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        B = float((N_c * pi).sum())
        A = float((NA_c * pi).sum())
        nu = A / B if B > 0 else 0.0
        nu_out[i] = min(max(nu, 0.0), 1.0)
        # influence of draw s on nu: (dA - nu dB)/B with dX = N_c/D_c ratio p0 (f - pi_c) times X's share of c
        cs = np.maximum(code, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lin = np.where(keep, ratio * pw * (d.f - pi[cs]) / np.where(den[cs] > 0, den[cs], 1.0), 0.0)
            share_a = np.where(N_c > 0, NA_c / np.where(N_c > 0, N_c, 1.0), 0.0)
        u = np.where(keep, N_c[cs] * lin * (share_a[cs] - nu), 0.0) / (B if B > 0 else 1.0)
        var_out[i] = float(strata_var(u[None, :], d)[0])
    v = d.v0
    V = v.sum()
    S0 = t.S0.astype(float)
    theta = (S0 * v).sum(1) / V if V > 0 else np.zeros(m)
    T = v[None, :] * (S0 - theta[:, None]) / V if V > 0 else np.zeros_like(S0)
    var_th = _var0(T, d, confidence)
    r_out = theta * nu_out
    var_r = theta ** 2 * var_out + nu_out ** 2 * var_th + var_th * var_out
    return RecallEstimate(_recall(r_out, var_r, d, confidence, "seed-shared" if shared else "stratified"), theta,
                          nu_out)


def combined_recall(d: Design, base: RecallEstimate, *, confidence: float = 0.90) -> RecallEstimate:
    r"""The minimum-variance combination of ``base`` (e.g. :func:`stratified_recall`, or the joint estimator's
    recall as a :class:`RecallEstimate`) with the exhaustive sample's own estimate :math:`\hat r^e` (module docs).

    The covariance of the two comes from :math:`\hat Y_0` alone (the draws enter ``base`` only): per document,
    the influence :math:`v_y (g_i(y) - \hat r^e_i)/V` of :math:`\hat r^e` against
    :math:`\hat\nu_i\,v_y (s_{iy} - \hat\theta_i)/V` of ``base``.
    """
    m = d.m
    v = d.v0
    V = v.sum()
    if V <= 0:
        return base
    G = d.g0.astype(float)
    r_e = (G * v).sum(1) / V
    Te = v[None, :] * (G - r_e[:, None]) / V
    # base's influence on Y0: nu * T_theta, theta from the pool of each target (base.theta)
    # the pool indicator is not stored in base: use the design's terms again (balance weights' pool)
    t = _terms(d, weight_matrix(d.P, d.n, "balance"), own_complete=False)
    S0 = t.S0.astype(float)
    Tb = base.nu[:, None] * v[None, :] * (S0 - base.theta[:, None]) / V
    V_e = _var0(Te, d, confidence)
    V_b = base.recall.se ** 2
    # with documents: the covariance of the jackknife values (the variances are the jackknife ones: _var0)
    if d.y0_groups is None:
        n0 = Te.shape[1]
        C = n0 / max(n0 - 1, 1) * ((Te - Te.mean(1, keepdims=True)) * (Tb - Tb.mean(1, keepdims=True))).sum(1)
    else:
        z_e = np.zeros((m, d.n_groups or (d.y0_groups.max() + 1)))
        z_b = np.zeros_like(z_e)
        for k in range(m):
            z_e[k] = np.bincount(d.y0_groups, weights=Te[k], minlength=z_e.shape[1])
            z_b[k] = np.bincount(d.y0_groups, weights=Tb[k], minlength=z_e.shape[1])
        h = np.bincount(d.y0_groups, weights=v / V, minlength=z_e.shape[1])
        z_e, z_b = jackknife_values(z_e, h), jackknife_values(z_b, h)
        N = z_e.shape[1]
        C = N / max(N - 1, 1) * ((z_e - z_e.mean(1, keepdims=True)) * (z_b - z_b.mean(1, keepdims=True))).sum(1)
    C = C * _t0(d, confidence)  # on the variances' scale (Student's t with the documents, :func:`~.joint._var0`)
    den = V_e + V_b - 2 * C
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.clip(np.where(den > 0, (V_b - C) / np.where(den > 0, den, 1.0), 0.0), 0.0, 1.0)
    r = lam * r_e + (1 - lam) * base.recall.value
    var = np.maximum(lam ** 2 * V_e + (1 - lam) ** 2 * V_b + 2 * lam * (1 - lam) * C, 0.0)
    return RecallEstimate(_recall(r, var, d, confidence, f"{base.recall.method}+exhaustive"), base.theta, base.nu,
                          lam)


__all__ = ["BANDS", "RecallEstimate", "agreement_band", "combined_recall", "merge_cells", "stratified_recall"]
