r"""Simple and joint (multiple importance sampling) estimators of precision, recall and F1.

Notation (method.md §1–§2). Systems :math:`j=1..m` with known sampling
distributions :math:`p_j` (rows of ``P``); :math:`\hat X_j` are :math:`n_j` i.i.d.
draws from :math:`p_j` with labels :math:`f(x)\in[0,1]` (soft labels allowed);
:math:`\hat Y_0` are :math:`n_0` exhaustively found true instances with weights
:math:`v_y = p_0(y)/\pi_{d(y)}` (document inclusion probability :math:`\pi_d`).

**Joint precision** (Chaganty et al. 2017, eq. for :math:`\hat\pi^{\rm joint}`, self-normalised)

.. math::

    q_i(x) = \sum_j w_{ij} p_j(x), \qquad
    \hat\pi_i = \frac{\sum_j \frac{w_{ij}}{n_j} \sum_{x \in \hat X_j} \frac{p_i(x) f(x)}{q_i(x)}}
                     {\sum_j \frac{w_{ij}}{n_j} \sum_{x \in \hat X_j} \frac{p_i(x)}{q_i(x)}}
              = \frac{\sum_s C_{is}}{\sum_s W_{is}}

(:math:`W_{is}` the importance weight of draw :math:`s` for target :math:`i`, :math:`C_{is} = W_{is} f(x_s)`).  The
numerator is the paper's estimator, unbiased whenever :math:`w_{ij}` do not depend on the labels and
:math:`q_i > 0` on the support of :math:`p_i` (every system has own samples); the denominator, of expectation 1,
is the same sum with every label 1 (Hájek's ratio).  The ratio is consistent with an :math:`O(1/n)` bias, not
exactly unbiased, and it is a weighted mean of the labels (inside [0, 1] with them).  Why: when several
overlapping systems share draws, the weights' total :math:`\sum_s W_{is}` varies from sample to sample, and the
numerator alone varies with it, not shrinking towards 1 near precision 1; its standard error was right, but
Wilson's interval assumes a spread :math:`\hat\pi(1-\hat\pi)/n` and the estimate left [0, 1].  Ten systems of 5,000
instances, 50 draws each, precision 0.95: 90% intervals held the truth 0.586 of the time and 22% of the estimates
were above 1 (``unpooled simulate precision``, docs/method/index.md §2.2, for every regime).  The simple estimator
and a system drawn completely (:func:`complete_targets`) have :math:`\sum_s W_{is} = 1` exactly over distinct
instances: the ratio is their sum.  Its linear part is :math:`(C_{is} - \hat\pi_i W_{is})/\sum_s W_{is}`
(:func:`precision_linear`), as :math:`\hat\nu_i`'s below.  Where the labels vary with the weights (the TAC-like
world of ``unpooled simulate estimators``: instances many systems output weigh less and are more often correct)
the sum was the more efficient (spread of P 0.047 against 0.055); the regression estimate
:math:`\sum_s C_{is} - \hat\beta_i(\sum_s W_{is} - 1)` with a fitted coefficient, which contains both, recovered
that efficiency but covered up to 0.005 less than the ratio where labels and weights are unrelated (the
coefficient is fitted on the same labels), so the ratio stays (docs/method/index.md §2.2).  A cross-fitted
coefficient (fitted on the other folds of each system's draws, 5 folds) covered as the ratio does and was as
efficient as the sum, measured but not yet built at scale nor for the bootstrap (§2.2 there).

**Recall** factorises through the pool covered by :math:`q_i`,
:math:`S_i = \mathrm{supp}\, q_i \supseteq X_i`:
:math:`r_i = \theta_i \nu_i` with :math:`\theta_i = \Pr_{p_0}[x \in S_i]` estimated from
:math:`\hat Y_0` (Hájek), and
:math:`\nu_i = \Pr_{p_0}[x\in X_i \mid x \in S_i]` by self-normalised importance
sampling over the positively labelled draws:

.. math::

    \hat\nu_i = \frac{\sum_j \frac{w_{ij}}{n_j}\sum_{x\in\hat X_j} p_0(x) f(x) g_i(x)/q_i(x)}
                     {\sum_j \frac{w_{ij}}{n_j}\sum_{x\in\hat X_j} p_0(x) f(x)/q_i(x)} .

(The paper's :math:`\theta` is over the whole pool; that is exact only when every
:math:`w_{ij} > 0`. With :math:`S_i` the factorisation is exact for any weights.)
:math:`p_0` is 0 outside the support of the exhaustive protocol (pooled instances whose
arguments lie in different sentences: ``make_design(inside=...)``, :mod:`.exhaustive`).
:math:`\hat\nu_i` is consistent, not unbiased (a ratio): its bias is :math:`O(1/n)`.

**Weights** (each row sums to 1):

* ``heuristic`` -- the paper's :math:`w_{ij} \propto n_j \sum_x p_i(x) p_j(x)`;
* ``balance`` -- the balance heuristic / deterministic mixture
  :math:`w_{ij} = n_j / \sum_k n_k` (Veach & Guibas 1995; Owen & Zhou 2000), one
  shared proposal :math:`q = \sum_j n_j p_j / N`;
* ``minvar`` -- per target, the member of the family
  :math:`w_{ij} \propto n_j\,o_{ij}^{\lambda}` (:math:`o_{ij}=\sum_x p_i p_j`,
  :math:`\lambda \in \{0, \tfrac12, 1, 2\}`, so it contains both rules above) whose
  estimated variance is smallest. The choice looks at the labels, so exact
  unbiasedness is traded for variance (measured by ``unpooled simulate estimators``).

**Distinct instances.** Every sum over the draws counts each distinct instance a system's draws reached
:math:`n_c/k_c` times instead of as often as it happened to be drawn (:mod:`.finite`: the Rao–Blackwell
improvement within cells of equal :math:`p_j`); the numerators' unbiasedness is kept, a small system drawn
completely is known exactly, and the variances below carry the finite-population correction.

**Memory.** The per-(target, draw) terms are held sparse (:mod:`.rows`): non-zero where the target holds the
drawn instance, plus one row every target shares under the balance heuristic (the proposal is one for all), so
1,000 systems of 500 draws each need the terms' non-zeros, not four dense 1,000 x 500,000 matrices.  The
estimates and their variances read the terms' totals per unit (a system's draws of one instance share their
weight: :meth:`.terms._Terms.per_unit`), built a block of targets at a time.  The bootstrap resamples one stratum at a
time and sums the resampled draws through per-instance totals (:class:`.rows.ByItem`).

**Intervals.** Every estimate is a smooth function of stratum sums, so its
variance is estimated from per-draw influence values
:math:`\widehat{\mathrm{Var}} = \sum_h \frac{n_h}{n_h-1}\sum_{s\in h}(u_s-\bar u_h)^2`
over the strata :math:`h` (each :math:`\hat X_j`, over its distinct instances and with the
finite-population correction, :func:`.finite.strata_var`; and :math:`\hat Y_0`), which
carries the covariance of precision and recall into F1 (the delta method).
:math:`\hat Y_0` is a sample of documents: when the design knows each exhaustive
instance's document (``y0_groups``), its stratum is a cluster sample of :math:`N`
documents, :math:`\widehat{\mathrm{Var}}(\hat\theta_i) = \frac{N-1}{N}\sum_d (\delta_{id}-\bar\delta_i)^2`,
the delete-one-document jackknife, :math:`\delta_{id} = z_{id}/(1-h_d)` from the document totals
:math:`z_{id}` of the :math:`u_s` and the document's share :math:`h_d` of :math:`V` (:mod:`.exhaustive`;
the linearisation :math:`\frac{N}{N-1}\sum_d z_{id}^2` understated it with few documents or unequal weights),
inflated by Student's :math:`(t_{N-1}/z)^2` (:func:`~.exhaustive.t_factor`). The
interval is Wilson's score interval at the effective sample size
:math:`\hat e(1-\hat e)/\widehat{\mathrm{Var}}`, which stays inside [0, 1] and behaves
near the bounds (a precision of variance 0 takes the size the finite population allows,
:func:`.intervals.population_size`); F1's is derived from precision's and recall's (:func:`.intervals.f1_interval`: the extremes of F1 on
their joint region), so that it reaches 0 whenever either of theirs does. The product rule for recall uses
Lemma A with the squares the paper's Theorem 3 dropped: :math:`\mathrm{Var}(\theta\nu)=\theta^2\sigma_\nu^2+\nu^2\sigma_\theta^2+\sigma_\theta^2\sigma_\nu^2`.
The bootstrap resamples each :math:`\hat X_j` and :math:`\hat Y_0` with replacement at
their sizes (the sampling design; :math:`\hat Y_0` by whole documents when they are
known), keeps the label-free weights fixed, recomputes every estimate from the replicate's sums (precision and
:math:`\hat\nu` as ratios of them), and takes the :math:`\alpha/2, 1-\alpha/2` percentiles.

References
----------
A. Chaganty, A. Paranjape, P. Liang, C. Manning. Importance sampling for unbiased
on-demand evaluation of knowledge base population. EMNLP 2017.
E. Veach, L. Guibas. Optimally combining sampling techniques for Monte Carlo rendering. SIGGRAPH 1995.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError, check_choice
from .exhaustive import document_groups, restrict_p0, t_factor, theta_variance
from .finite import DrawUnits, draw_units, population_count, unseen_mass
from .finite import strata_var as finite_var
from .intervals import _f1_partials, f1_interval, f1_score, population_size, wilson
from .linear import Linear
from .results import ConfidenceInterval, Estimate
from .rows import Rows, Segments, combine
from .terms import _Terms, _terms

WEIGHTS = ("heuristic", "balance", "minvar")
ESTIMATORS = ("simple", "joint")
MINVAR_LAMBDAS = (0.0, 0.5, 1.0, 2.0)


class WeightDegeneracyWarning(UserWarning):
    """The importance weights of a target rest on very few draws."""


@dataclass(frozen=True)
class Design:
    r"""Samples and labels collected so far, as arrays.

    Attributes
    ----------
    P : scipy.sparse.csr_matrix, shape (m, U)
        Row ``i`` is :math:`p_i` over the universe of instances (rows sum to 1).
    src : ndarray of int, shape (S,)
        The system whose :math:`p_j` drew each precision sample.
    xs : ndarray of int, shape (S,)
        The instance drawn.
    f : ndarray of float, shape (S,)
        Its label (probability it is correct).
    g0 : ndarray of bool, shape (m, n0)
        Whether system ``i`` predicted (matched) each exhaustively found true instance.
    v0 : ndarray of float, shape (n0,)
        Weights of the exhaustive sample, :math:`p_0(y)/\pi_{d(y)}` (unnormalised).
    p0 : ndarray of float, shape (U,)
        :math:`p_0` over the universe, unnormalised (uniform over true instances: ones).
    gs : ndarray of bool, shape (m, S), optional
        :math:`g_i(x_s)`: whether system ``i`` matches each draw under the recall matching
        policy. None: by instance identity (:math:`p_i(x_s) > 0`). Give it when recall
        matches by overlapping spans or entity clusters, so that :math:`\hat\nu_i` and
        :math:`\hat\theta_i` (through ``g0``) use the same policy.
    y0_groups : ndarray of int, shape (n0,), optional
        The document of each exhaustive instance (codes ``0..n_groups-1``): the variance (and
        the bootstrap) of :math:`\hat\theta_i` is then that of a cluster sample of documents
        (:func:`~unpooled.core.estimators.exhaustive.theta_variance`). None: independent instances.
    n_groups : int, optional
        With ``y0_groups``: the number of exhaustively annotated documents, counting those
        without a true instance (codes ``>=`` the distinct ones present have no instance).
    """

    P: sp.csr_matrix
    src: np.ndarray
    xs: np.ndarray
    f: np.ndarray
    g0: np.ndarray
    v0: np.ndarray
    p0: np.ndarray
    gs: np.ndarray | None = None
    y0_groups: np.ndarray | None = None
    n_groups: int | None = None

    @property
    def m(self) -> int:
        return self.P.shape[0]

    @property
    def n(self) -> np.ndarray:
        return np.bincount(self.src, minlength=self.m)

    @property
    def n0(self) -> int:
        return len(self.v0)

    @cached_property
    def units(self) -> DrawUnits:
        """The draws grouped into distinct instances and cells of equal probability (:mod:`.finite`)."""
        return draw_units(self.P, self.src, self.xs)


def make_design(P, src, xs, f, g0, v0=None, p0=None, gs=None, *, corrected_labels: bool = False,
                y0_docs=None, documents: int | None = None, inside=None) -> Design:
    r"""Check shapes and types once (``_iv``); returns a :class:`Design`.

    ``corrected_labels``: labels corrected for annotation error (e.g. Rogan–Gladen,
    :math:`(y - f)/(t - f)`) may leave [0, 1]; they must still be finite.

    ``y0_docs``: the document of each exhaustive instance (any hashable ids), so that
    :math:`\hat Y_0` is treated as the cluster sample of documents it is
    (:mod:`.exhaustive`); ``documents``: how many documents were exhaustively annotated,
    counting those without a true instance (at least the number of distinct ``y0_docs``;
    default that number).  ``inside``: per draw, whether the drawn instance lies in the
    support of :math:`p_0` (within one sentence); :math:`p_0 = 0` for the others
    (:func:`~unpooled.core.estimators.exhaustive.restrict_p0`).
    """
    P = sp.csr_matrix(P, dtype=float)
    m, U = P.shape
    src = np.asarray(src, dtype=np.int64)
    xs = np.asarray(xs, dtype=np.int64)
    f = np.asarray(f, dtype=float)
    if not (src.shape == xs.shape == f.shape) or src.ndim != 1:
        raise InvalidInputError(f"src, xs, f: expected equal 1-d shapes, got {src.shape}, {xs.shape}, {f.shape}")
    if src.size and (src.min() < 0 or src.max() >= m):
        raise InvalidInputError(f"src: system indices must be in [0, {m}), got [{src.min()}, {src.max()}]")
    if xs.size and (xs.min() < 0 or xs.max() >= U):
        raise InvalidInputError(f"xs: instance indices must be in [0, {U}), got [{xs.min()}, {xs.max()}]")
    if not np.all(np.isfinite(f)) or (not corrected_labels and np.any((f < 0) | (f > 1))):
        raise InvalidInputError("f: labels must be probabilities in [0, 1]" if not corrected_labels
                                else "f: labels must be finite")
    sums = np.asarray(P.sum(axis=1)).ravel()
    if np.any(np.abs(sums - 1) > 1e-6):
        bad = int(np.argmax(np.abs(sums - 1)))
        raise InvalidInputError(f"P: row {bad} sums to {sums[bad]:.6g}; each p_i must sum to 1")
    if xs.size:
        pin = np.asarray(P[src, xs]).ravel()
        if np.any(pin <= 0):
            k = int(np.argmax(pin <= 0))
            raise InvalidInputError(f"xs: sample {k} (instance {xs[k]}) has p_src = 0: it cannot have been drawn")
    g0 = np.asarray(g0, dtype=bool)
    if g0.ndim != 2 or g0.shape[0] != m:
        raise InvalidInputError(f"g0: expected shape ({m}, n0), got {g0.shape}")
    n0 = g0.shape[1]
    v0 = np.ones(n0) if v0 is None else np.asarray(v0, dtype=float)
    if v0.shape != (n0,) or np.any(v0 <= 0):
        raise InvalidInputError(f"v0: expected {n0} positive weights")
    p0 = np.ones(U) if p0 is None else np.asarray(p0, dtype=float)
    if p0.shape != (U,) or np.any(p0 < 0):
        raise InvalidInputError(f"p0: expected {U} non-negative weights")
    if gs is not None:
        gs = np.asarray(gs, dtype=bool)
        if gs.shape != (m, len(xs)):
            raise InvalidInputError(f"gs: expected shape ({m}, {len(xs)}), got {gs.shape}")
        own = gs[src, np.arange(len(xs))] if len(xs) else np.array([], bool)
        if not own.all():
            k = int(np.argmax(~own))
            raise InvalidInputError(f"gs: draw {k} does not match the system that drew it")
    groups, n_groups = None, None
    if y0_docs is not None:
        if len(y0_docs) != n0:
            raise InvalidInputError(f"y0_docs: expected the document of each of the {n0} exhaustive instances, "
                                    f"got {len(y0_docs)}")
        groups, n_groups = document_groups(y0_docs)
        if documents is not None:
            if not isinstance(documents, (int, np.integer)) or isinstance(documents, bool) or documents < n_groups:
                raise InvalidInputError(f"documents: expected an integer >= {n_groups} (the true instances lie in "
                                        f"{n_groups} distinct documents), got {documents!r}")
            n_groups = int(documents)
    elif documents is not None:
        raise InvalidInputError("documents: give y0_docs (the document of each exhaustive instance) too")
    d = Design(P, src, xs, f, g0, v0, p0, gs, groups, n_groups)
    return restrict_p0(d, inside)


# -- weights -------------------------------------------------------------------
def overlap_matrix(P: sp.csr_matrix) -> np.ndarray:
    r""":math:`o_{ij} = \sum_x p_i(x) p_j(x)`."""
    return np.asarray((P @ P.T).todense())


def weight_matrix(P: sp.csr_matrix, n: np.ndarray, rule: str = "balance", *, lam: float | None = None,
                  overlap: np.ndarray | None = None) -> np.ndarray:
    """Row-stochastic ``(m, m)`` weights for ``rule`` (``heuristic``, ``balance``, or the family at ``lam``)."""
    n = np.asarray(n, dtype=float)
    m = len(n)
    if rule == "balance" or lam == 0.0:
        W = np.tile(n, (m, 1))
    elif rule in ("heuristic", "family"):
        o = overlap_matrix(P) if overlap is None else overlap
        W = n[None, :] * (o if rule == "heuristic" or lam is None else o ** lam)
    else:
        raise InvalidInputError(f"weights: expected one of {', '.join(WEIGHTS)}, got {rule!r}")
    s = W.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        W = np.where(s > 0, W / s, 0.0)
    return W


def strata_var(U: np.ndarray, d: Design, *, cross: bool = False, per_unit: bool = False,
               segments: Segments | None = None) -> np.ndarray:
    """Variance estimate of the row sums of ``U`` (targets x draws, built from :func:`.terms._terms`; with ``per_unit``
    targets x units, :meth:`.terms._Terms.per_unit`) under the design's stratified draws, over the distinct instances
    drawn (:func:`.finite.strata_var`, ``segments`` as there); ``cross``: their covariance matrix."""
    return finite_var(U, d.src, d.m, d.units, cross=cross, per_unit=per_unit, segments=segments)


def _shares0(d: Design) -> np.ndarray | None:
    r"""Each exhaustive instance's share :math:`v_y/V` of the denominator of every ratio over :math:`\hat Y_0`."""
    V = float(d.v0.sum())
    return d.v0 / V if V > 0 else None


def _var0(T: np.ndarray, d: Design | None = None, confidence: float | None = None, shares=None, *,
          cross: bool = False) -> np.ndarray:
    r"""Variance of row sums over the exhaustive stratum: by documents when ``d`` knows them, else i.i.d.

    :func:`~unpooled.core.estimators.exhaustive.theta_variance` of ``T`` with ``d.y0_groups``; ``T`` are the
    linearised values of Hájek ratios over :math:`\hat Y_0` with the denominator :math:`V = \sum_y v_y`, so
    with the documents known the variance is the leverage-corrected (delete-one-document jackknife) one, the
    shares :math:`h_d = \sum_{y\in d} v_y/V` (:func:`~unpooled.core.estimators.exhaustive.jackknife_values`),
    and with a ``confidence`` it is inflated by :func:`~unpooled.core.estimators.exhaustive.t_factor` (Student's
    :math:`t`, :math:`N-1` degrees of freedom): ``unpooled simulate documents`` measured the two together at
    0.88-0.90 pooled with 15 documents (the linearisation: 0.81-0.87) and never below the linearisation's
    coverage.  Without documents (independent instances, hundreds of them) the linearisation is kept.
    ``shares`` (one row per row of ``T``): the denominators' shares when the rows are ratios over different
    parts of :math:`\hat Y_0` (default :math:`v_y/V`).
    """
    if d is None or d.y0_groups is None:
        return theta_variance(T, cross=cross)
    if shares is None:
        shares = _shares0(d) if T.shape[1] == d.n0 else None
    var = theta_variance(T, d.y0_groups, d.n_groups, shares=shares, cross=cross)
    return var * _t0(d, confidence)


def pool_share(d: Design, inside: np.ndarray, confidence: float | None) -> tuple[np.ndarray, np.ndarray]:
    r"""Per target, the weighted share :math:`\hat\theta_i = \sum_y v_y s_{iy} / \sum_y v_y` of the exhaustive
    instances ``inside`` (``(m, n0)``, e.g. in its pool :math:`S_i`, or matched) and its variance
    (:func:`_var0` of the linearised values of :func:`pool_values`)."""
    share, T = pool_values(d, inside)
    return share, (_var0(T, d, confidence) if d.v0.sum() > 0 else np.zeros(len(share)))


def pool_values(d: Design, inside: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`pool_share`'s shares and their linearised values :math:`v_y (s_{iy} - \hat\theta_i)/V`."""
    S = np.asarray(inside, float)
    v = d.v0
    V = v.sum()
    if V <= 0:
        return np.zeros(S.shape[0]), np.zeros(S.shape)
    share = (S * v).sum(1) / V
    return share, v[None, :] * (S - share[:, None]) / V


def _t0(d: Design, confidence: float | None) -> float:
    """The :func:`~unpooled.core.estimators.exhaustive.t_factor` of the exhaustive documents (1 without them)."""
    if confidence is None or d.y0_groups is None:
        return 1.0
    present = int(d.y0_groups.max()) + 1 if len(d.y0_groups) else 0
    return t_factor(max(int(d.n_groups or 0), present), confidence)


@dataclass(frozen=True)
class Scores:
    """Precision, recall and F1 of every system of one fit: each one :class:`~.results.Estimate` of arrays of length
    m (``scores.p.value``, ``.se``, ``.interval.lo``; ``scores.p[i]`` is system ``i``'s; ``n``: each system's
    labelled draws), with the fit's other per-system figures.  Built once, by :func:`estimate`."""

    p: Estimate
    r: Estimate
    f1: Estimate
    ess: np.ndarray
    n_labels: np.ndarray
    theta: np.ndarray
    nu: np.ndarray
    weights: np.ndarray | None = None
    #: with ``estimate(..., bootstrap=B)``: metric -> the bootstrap's percentile :class:`~.results.ConfidenceInterval`
    boot: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: with crowd votes: the labelled-sample figures (majority labels as certain), metric -> (m,)
    raw: dict | None = None
    #: with crowd votes: variance by source ('design', 'votes', 'rates') -> metric -> (m,)
    var_parts: dict | None = None
    #: with crowd votes: the crowd's mean sensitivity and false-positive rate (weighted by answers)
    rates: dict | None = None
    #: with ``estimate(..., linear=True)``: what :func:`.paired.covariances` needs from this fit (``linear``: the
    #: estimates' linear parts; with crowd votes also ``reps``, the confusions' replicates, and ``var_votes``)
    linear: dict | None = None

    @property
    def method(self) -> str:
        """The estimator (``'simple'``, ``'joint-balance'``, ...), as every metric's :class:`~.results.Estimate`
        records it."""
        return self.p.method

    @property
    def confidence(self) -> float:
        return self.p.interval.level

    def row(self, i: int) -> dict:
        out = {}
        for k in ("p", "r", "f1"):
            e = getattr(self, k)
            out[k], out[f"{k}_lo"], out[f"{k}_hi"] = e.value[i], e.lo[i], e.hi[i]
        out.update({f"{k}_se": getattr(self, k).se[i] for k in ("p", "r", "f1")})
        out.update(ess=self.ess[i], labels=int(self.n_labels[i]))
        for k, c in self.boot.items():
            out[f"{k}_boot_lo"], out[f"{k}_boot_hi"] = c.lo[i], c.hi[i]
        if self.raw is not None:
            for k, arr in self.raw.items():
                out[f"{k}_raw"] = arr[i]
        return {k: float(v) if isinstance(v, (np.floating, float)) else v for k, v in out.items()}


def _metrics(values: dict, var: dict, cis: dict, n_labels: np.ndarray, method: str, confidence: float,
             intervals: dict) -> dict:
    """``{'p': Estimate, 'r': ..., 'f1': ...}`` from the values, variances, ``(lo, hi)`` and interval kinds."""
    return {k: Estimate(values[k], np.sqrt(var[k]), ConfidenceInterval(*cis[k], confidence, intervals[k]),
                        n_labels, method) for k in ("p", "r", "f1")}


def _better_of(best: Scores, res: Scores, better: np.ndarray) -> Scores:
    """``best`` with the systems ``better`` taken from ``res`` (the minimum-variance weight search)."""
    def pick(a, b):
        return np.where(better, b, a)

    est = {k: replace(getattr(best, k), value=pick(getattr(best, k).value, getattr(res, k).value),
                      se=pick(getattr(best, k).se, getattr(res, k).se),
                      interval=replace(getattr(best, k).interval, lo=pick(getattr(best, k).lo, getattr(res, k).lo),
                                       hi=pick(getattr(best, k).hi, getattr(res, k).hi)))
           for k in ("p", "r", "f1")}
    return replace(best, **est, **{k: pick(getattr(best, k), getattr(res, k)) for k in ("ess", "theta", "nu")})


def estimate(d: Design, *, estimator: str = "joint", weights: str = "balance", confidence: float = 0.90,
             bootstrap: int = 0, rng=None, ess_warn: float = 10.0, votes=None, linear: bool = False) -> Scores:
    """Precision, recall and F1 of every system with intervals.

    Parameters
    ----------
    d : Design
    estimator : {'joint', 'simple'}
        ``simple`` uses each system's own draws for precision and the exhaustive
        sample alone for recall (method.md §2.1).
    weights : {'balance', 'heuristic', 'minvar'}
        Weight rule of the joint estimator.
    confidence : float
        Confidence level of the intervals (0.90 gives the 5th to 95th percentile band).
    bootstrap : int
        Number of bootstrap replicates (0: analytic intervals only).
    votes : CrowdVotes, optional
        The verification answers behind the labels and the workers' confusions
        (:func:`~unpooled.core.estimators.noisy.crowd_votes`): the labels ``d.f`` are then not used; every
        estimate is its functional's mixture likelihood over the items' votes, and every interval carries the
        votes' and the confusions' uncertainty (:mod:`.noisy`).
    linear : bool
        Keep the fit's linear parts in ``Scores.linear`` (not with ``weights='minvar'``), so that
        :func:`.paired.covariances` does not fit again.

    Returns
    -------
    Scores
        Estimates, standard errors and intervals of every system; with ``votes``, ``raw`` holds the
        labelled-sample figures (majority labels taken as certain) and ``var_parts`` the variance by source.

    Raises
    ------
    InvalidInputError
        An unknown ``estimator`` or ``weights``, a ``confidence`` outside (0, 1), ``bootstrap`` with ``votes``.
    """
    check_choice("estimator", estimator, ESTIMATORS)
    check_choice("weights", weights, WEIGHTS)
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    if votes is not None and bootstrap:
        raise InvalidInputError("bootstrap: not available with votes (the analytic intervals carry the votes' and "
                                "the confusions' uncertainty; the bootstrap resamples draws only)")
    m, n = d.m, d.n
    warn: list[str] = []
    missing = np.flatnonzero(n == 0)
    if len(missing):
        warn.append(f"systems {missing.tolist()[:10]} have no own draws: their precision is undefined, or biased "
                    "where other systems' draws weigh them; their recall is the exhaustive sample's share")
    terms = None
    method = "simple" if estimator == "simple" else f"joint-{weights}"
    if estimator == "simple":
        W = np.eye(m)
        terms = None if votes is not None else _terms(d, W)
        out = _estimate_with(d, W, confidence, method, simple=True, votes=votes, terms=terms, keep=linear)
    elif weights == "minvar":
        out, W = _minvar(d, confidence, method, votes)
    else:
        W = weight_matrix(d.P, n, weights)
        terms = None if votes is not None else _terms(d, W)
        out = _estimate_with(d, W, confidence, method, votes=votes, terms=terms, keep=linear)
    low = np.flatnonzero(out.ess < ess_warn)
    if len(low) and estimator == "joint":
        msg = (f"importance weights degenerate for systems {low.tolist()[:10]} "
               f"(effective sample size < {ess_warn:g}): collect own labels for them")
        warn.append(msg)
        warnings.warn(msg, WeightDegeneracyWarning, stacklevel=2)
    boot = {}
    if bootstrap:
        from .bootstrap import bootstrap_intervals

        boot = {k: ConfidenceInterval(lo, hi, confidence, "bootstrap")
                for k, (lo, hi) in bootstrap_intervals(d, W, bootstrap, confidence=confidence, rng=rng,
                                                       simple=estimator == "simple", terms=terms).items()}
    return replace(out, weights=W, warnings=tuple(warn), boot=boot)


def _minvar(d: Design, confidence: float, method: str, votes) -> tuple[Scores, np.ndarray]:
    """The ``minvar`` weights: per system, the family weights of :data:`MINVAR_LAMBDAS` whose estimates have the
    smallest variance of precision plus recall; the scores and the weight matrix so chosen."""
    o = overlap_matrix(d.P)
    best = None
    for lam in MINVAR_LAMBDAS:
        W = weight_matrix(d.P, d.n, "family", lam=lam, overlap=o)
        res = _estimate_with(d, W, confidence, method, votes=votes)
        if best is None:
            best, bestW = res, np.tile(W, (1, 1))
            continue
        better = res.p.se ** 2 + res.r.se ** 2 < best.p.se ** 2 + best.r.se ** 2
        bestW[better] = W[better]
        best = _better_of(best, res, better)
    return best, bestW


def _estimate_with(d: Design, W: np.ndarray, confidence: float, method: str, *, simple: bool = False, votes=None,
                   terms: _Terms | None = None, keep: bool = False) -> Scores:
    m = d.m
    if votes is not None:
        return _estimate_noisy(d, W, confidence, method, simple=simple, votes=votes, keep=keep)
    t = _terms(d, W) if terms is None else terms
    n_labels = np.bincount(d.src, minlength=m)
    est, lin, var = linear_parts(d, t, confidence, simple=simple, keep=keep)
    p, r, f1, theta, nu = (est[k] for k in ("p", "r", "f1", "theta", "nu"))
    var_p, var_r, var_f = var["p"], var["r"], var["f1"]
    n0 = float(max(d.n0, 1))
    nfb = population_size(t.ess, var_p, unseen_mass(d.P, d.xs), population_count(d.P))
    p_ci = wilson(p, var_p, confidence, nfb)
    r_ci = wilson(r, var_r, confidence, np.full(m, n0))
    f_ci = f1_interval(p, r, p_ci, r_ci, var_p, var_r, var_f)
    est = _metrics({"p": p, "r": r, "f1": f1}, var, {"p": p_ci, "r": r_ci, "f1": f_ci}, n_labels, method, confidence,
                   {"p": "wilson", "r": "wilson", "f1": "f1-region"})
    return Scores(**est, ess=t.ess, n_labels=n_labels, theta=theta, nu=nu, linear={"linear": lin} if keep else None)


def linear_parts(d: Design, t: _Terms, confidence: float | None, *, simple: bool = False, keep: bool = True):
    """Estimates (``p``, ``r``, ``f1``, ``theta``, ``nu``), their linear parts (:class:`.linear.Linear`: the
    covariance of any two targets is that of their rows; per unit, :meth:`.terms._Terms.per_unit`) and variances, from
    labels (no votes).  Every figure of a target is its own rows', so without ``keep`` (the linear parts then None)
    the terms are built and dropped a block of targets at a time (:meth:`.terms._Terms.per_unit_blocks`): memory
    is a block's non-zeros, not every target's."""
    m = d.m
    share, T = pool_values(d, d.g0 if simple else t.S0)  # simple: recall from the exhaustive sample only
    var_th = None if simple else _var0(T, d, confidence)
    ex = None if simple else (exhaustive_recall_targets(d), *pool_values(d, d.g0))  # recall's fallback (below)
    est = {k: np.zeros(m) for k in ("p", "r", "theta", "nu")}
    var = {k: np.zeros(m) for k in ("p", "r", "f1")}
    blocks = ([(slice(0, m), t.per_unit(recall=not simple))] if keep else t.per_unit_blocks(recall=not simple))
    lin = None
    for rows, terms in blocks:
        e, lin, v = _block_parts(d, terms, share[rows], T[rows], None if simple else var_th[rows], confidence,
                                 None if ex is None else tuple(x[rows] for x in ex))
        for k in est:
            est[k][rows] = e[k]
        for k in var:
            var[k][rows] = v[k]
    if d.v0.sum() <= 0:  # no exhaustively found true instance: recall is 0/0, undefined (not 0)
        est["r"], var["r"] = np.full(m, np.nan), np.full(m, np.nan)
    undefined = np.isnan(est["p"]) | np.isnan(est["r"])
    est["f1"] = np.where(undefined, np.nan, f1_score(est["p"], est["r"]))
    return est, lin if keep else None, var


def exhaustive_recall_targets(d: Design) -> np.ndarray:
    r"""The targets whose recall the joint estimator takes from the exhaustive sample alone (the simple
    estimator's share of :math:`\hat Y_0` they output): those without own draws.  The factorisation
    :math:`r_i = \theta_i\nu_i` needs :math:`S_i = \mathrm{supp}\,q_i \supseteq X_i`, which a system's own draws
    ensure; without them its true instances outside the other systems' outputs fall out of :math:`\theta_i\nu_i`
    (a system no draw weighs got recall 0 while the exhaustive sample showed it finding 3 of 5).  So are, where
    the fit finds them, the targets without a positively labelled draw in their pool: :math:`\hat\nu_i` is then
    0/0 (it was taken as 0: recall 0 [0, 0.40] for systems the exhaustive sample shows finding half of it)."""
    return d.n == 0


def _block_parts(d: Design, terms: list, share: np.ndarray, T: np.ndarray, var_th: np.ndarray | None,
                 confidence: float | None, ex: tuple | None = None):
    r""":func:`linear_parts` of a block of targets from their unit terms ``terms`` (``[C, W]``, or ``[C, W, A, B]``
    with recall's; emptied here, so that each is dropped once used), their shares of the exhaustive sample and its
    linearised values ``T`` (recall itself without ``var_th``, else :math:`\hat\theta` and its variance).  ``ex``:
    the targets :func:`exhaustive_recall_targets` names and every target's share of :math:`\hat Y_0` it outputs
    with its linearised values: recall itself for those and for the targets without a positive draw in their
    pool."""
    C, Wt, *recall = terms
    terms.clear()
    p, lin_p = precision_linear(C, Wt, per_unit=True)
    del C, Wt
    Up, inv_w = lin_p.draws, lin_p.draw_scale  # (C - p W), over W's sum
    seg = Segments.of(Up.sparse, d.units.unit_cell)  # the runs of every unit-level row below (of one pattern)
    lin = {"p": replace(lin_p, segments=seg)}
    if var_th is None:  # recall from the exhaustive sample only: r = sum v g / sum v
        r, theta, nu = share, share.copy(), np.ones(len(p))
        dP, dR = _f1_partials(p, r)
        lin["r"] = Linear(None, T)
        lin["f1"] = Linear(Up, T, draw_scale=dP * inv_w, ex_scale=dR, per_unit=True, segments=seg)  # independent
        var = {k: lin[k].var(d, confidence) for k in lin}
        return {"p": p, "r": r, "theta": theta, "nu": nu}, lin, var
    A, B = recall
    del recall
    Bs = B.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = np.where(Bs > 0, A.sum() / Bs, 0.0)
        inv = np.where(Bs > 0, 1.0 / Bs, 0.0)
    swap = ex[0] | (Bs <= 0) if ex is not None else np.zeros(len(nu), bool)
    theta_pool = share  # reported as it is (the pool's share); nu as recall over it
    if swap.any():  # recall is the exhaustive share: theta itself, nu 1, without a part on the draws
        nu, inv = np.where(swap, 1.0, nu), np.where(swap, 0.0, inv)
        share, T, var_th = np.where(swap, ex[1], share), np.where(swap[:, None], ex[2], T), var_th.copy()
        var_th[swap] = _var0(ex[2][swap], d, confidence)
    Uu = A + B.scaled(rows=-nu)  # (A - nu B), over B below: a row's scale leaves strata_var's own
    del A, B
    theta = share
    var_nu = strata_var(Uu, d, per_unit=True, segments=seg) * inv ** 2
    r = theta * nu
    dP, dR = _f1_partials(p, r)
    lin["r"] = Linear(Uu, T, draw_scale=theta * inv, ex_scale=nu, extra=var_th * var_nu, per_unit=True,
                      segments=seg)
    var = {"p": lin["p"].var(d, confidence)}
    # F1 influence: on the draws, dP*Up/sum(W) + dR*theta*Uu/sum(B) (they share draws); on Y0, dR*nu*T
    lin["f1"] = Linear(combine(Up, dP * inv_w, Uu, dR * theta * inv), T, ex_scale=dR * nu,
                       per_unit=True, segments=seg)
    var.update({"f1": lin["f1"].var(d, confidence), "r": theta ** 2 * var_nu + nu ** 2 * var_th + var_th * var_nu})
    return {"p": p, "r": r, "theta": theta_pool, "nu": _implied_nu(r, theta_pool, nu, swap)}, lin, var


def _implied_nu(r, theta, nu, swap):
    r""":math:`\hat\nu` as reported: the fit's, and for the targets whose recall is the exhaustive share (``swap``)
    recall over the pool's share :math:`\hat\theta` (NaN without one)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(swap, np.where(theta > 0, r / np.where(theta > 0, theta, 1), np.nan), nu)


def precision_linear(C: Rows, W: Rows, *, per_unit: bool = False) -> tuple[np.ndarray, Linear]:
    r"""Precision from labels, the self-normalised (Hájek) ratio :math:`\hat\pi_i = \sum_s C_{is} / \sum_s W_{is}`
    of its numerator's and denominator's terms (:class:`_Terms`: per draw, or per unit with ``per_unit``), and its
    linear part: the rows :math:`C_i - \hat\pi_i W_i` scaled by :math:`1/\sum_s W_{is}` (0 for a target no draw
    weighs, whose precision is then undefined, NaN: the sample says nothing of it).  The one formula of every
    consumer (:func:`linear_parts`, :mod:`.ppi`); the bootstrap's replicates take the same ratio of their sums
    (:mod:`.bootstrap`)."""
    Ws = W.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(Ws > 0, C.sum() / Ws, np.nan)
        inv = np.where(Ws > 0, 1.0 / Ws, 0.0)
    return p, Linear(combine(C, None, W, -np.nan_to_num(p)), draw_scale=inv, per_unit=per_unit)


def _estimate_noisy(d: Design, W: np.ndarray, confidence: float, method: str, *, simple: bool, votes,
                    keep: bool = False) -> Scores:
    """The estimates from crowd votes (:func:`.from_votes.noisy_estimates`) with Wilson intervals."""
    from .from_votes import noisy_estimates
    from .noisy import precision_interval, recall_interval

    m = d.m
    t = _terms(replace(d, f=np.ones(len(d.xs))), W)
    est, var, parts = noisy_estimates(d, t, W, votes, simple=simple, confidence=confidence, keep=keep)
    n_labels = np.bincount(d.src, minlength=m)
    # near the bounds Wilson falls back to a sample size: the effective number of *items* behind the
    # precision (an item's votes count once however often it is drawn), at most the draws' effective size
    Mc = est["_p_fit"][0]  # precision's terms summed per distinct instance drawn
    with np.errstate(divide="ignore", invalid="ignore"):
        items_eff = np.nan_to_num(Mc.sum(1) ** 2 / (Mc ** 2).sum(1))
    nfb_p = np.maximum(np.minimum(t.ess, items_eff), 1)
    n0 = float(max(d.n0, 1))
    p, r = est["p"], est["r"]
    Mc_, lam_, Jc_, one_p = est["_p_fit"]
    p_ci = precision_interval(Mc_, lam_, p, Jc_, var["p"], confidence, nfb_p, profile=one_p)
    if simple:
        r_ci = wilson(r, var["r"], confidence, np.full(m, n0))
    else:
        Ma_, lam_a, Ja_, rho_a, scale, one_a = est["_r_fit"]
        _, var_th = pool_share(d, t.S0, confidence)
        r_ci = recall_interval(Ma_, lam_a, rho_a, Ja_, scale, est["theta"], var_th, r, var["r"], confidence,
                               np.full(m, n0), profile=one_a)
    bare = np.zeros(m, bool) if simple else exhaustive_recall_targets(d) | ~est["_nu_defined"]
    if bare.any():
        from .from_votes import exhaustive_recall

        exhaustive_recall(d, bare, est, var, parts, confidence)
        lo, hi = wilson(est["r"], var["r"], confidence, np.full(m, n0))
        r_ci = np.where(bare, lo, r_ci[0]), np.where(bare, hi, r_ci[1])
        r = est["r"]
    none = Mc.sum(1) == 0  # no draw weighs the target: its precision, and F1, are undefined
    for k in ("p", "f1"):
        est[k], var[k] = np.where(none, np.nan, est[k]), np.where(none, np.nan, var[k])
    p_ci = tuple(np.where(none, np.nan, b) for b in p_ci)
    if d.v0.sum() <= 0:  # no exhaustively found true instance: recall, and F1, are undefined (linear_parts)
        for k in ("r", "f1"):
            est[k], var[k] = np.full(m, np.nan), np.full(m, np.nan)
        r_ci = (np.full(m, np.nan), np.full(m, np.nan))
        parts.r_raw[:], parts.f1_raw[:] = np.nan, np.nan
    p, r = est["p"], est["r"]
    f_ci = f1_interval(p, r, p_ci, r_ci, var["p"], var["r"], var["f1"])
    metrics = _metrics(est, var, {"p": p_ci, "r": r_ci, "f1": f_ci}, n_labels, method, confidence,
                       {"p": "profile", "r": "wilson" if simple else "profile", "f1": "f1-region"})
    linear = {"linear": est["_linear"], "reps": est["_reps"], "var_votes": parts.var_votes} if keep else None
    return Scores(**metrics, ess=t.ess, n_labels=n_labels, theta=est["theta"], nu=est["nu"],
                  raw={"p": parts.p_raw, "r": parts.r_raw, "f1": parts.f1_raw},
                  var_parts={"design": parts.var_design, "votes": parts.var_votes, "rates": parts.var_rates},
                  rates={"sens": parts.mean_sens, "fpr": parts.mean_fpr}, linear=linear)
