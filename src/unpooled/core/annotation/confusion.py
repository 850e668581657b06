r"""Annotators' confusions for binary verification: per worker, sensitivity and false-positive rate.

A verification answer says whether an instance is correct.  Worker :math:`w` answers "yes" with probability
:math:`s_w` (sensitivity) when it is and :math:`e_w` (false-positive rate) when it is not, independently of the
other answers given the item's class (Dawid & Skene 1979).  The confusions feed the estimator from crowd votes
(:mod:`unpooled.core.estimators.noisy`); their replicates carry their own uncertainty into its intervals.

**Sources** (:func:`fit_confusions`, ``source``):

``controls``
    gold control items: each worker's rates from their control answers.  Independent of the items scored,
    but few.
``dawid-skene``
    binary Dawid–Skene by EM over every answer (controls as unlabelled items); poorly identified with three
    answers per item and one dominant class.
``semi``
    Dawid–Skene with the controls held at their known class (semi-supervised): the controls anchor the
    confusions, every other answer adds to them.
``items``
    Dawid–Skene on the items alone (the controls' answers left out).

**Which source** (:func:`preferred_source`): ``semi``, unless the crowd answers the controls measurably
better or worse than the items (:func:`control_mismatch`: the answer-weighted sensitivity or false-positive
rate on the controls and, by Dawid–Skene on the items alone, on the items differ by more than
:data:`CONTROL_MISMATCH_Z` standard errors).  Controls easier than the real work are common (an obvious
control is answered carefully), and a fit anchored on them then believes the crowd too much: with a crowd of
accuracy 0.7 on items and 0.95 on controls, ``semi`` put a system of precision 0.70 at 0.80 and its 90%
intervals held the truth 60% of the time (``unpooled simulate regimes``).  The controls then only say that
they disagree; the rates come from ``items``.  But only when the items' own rates also explain their votes
better (a likelihood-ratio gate, :data:`ITEMS_MIN_LR`): items nearly all of one class -- a human reference's own
instances beside systems as good as it -- do not identify rates of their own, and their Dawid--Skene fit then
differs from the controls' anywhere along a flat likelihood.  Without the gate, at crowd accuracy 0.75 the
rates came from the items in 64 of 100 trials and the reference's 90% precision interval was 0.68 wide on average
(0.17 with the gate; ``unpooled simulate reference``, cell "crowd 0.75 / 1500 instances").

Each worker's rates are shrunk towards the crowd's by empirical Bayes (:func:`shrunk_rates`): a crowd whose
workers do not differ measurably is pooled, one with a spammer is not.  Replicates come from a bootstrap of
the control answers (by worker and class) or of the items (controls and others separately), each refitted;
:func:`shifted_replicates` moves stored replicates to a new point fit (the service's incremental path).

References
----------
A. P. Dawid, A. M. Skene. Maximum likelihood estimation of observer error-rates using the EM algorithm.
*Applied Statistics* 28(1):20-28, 1979.
R. DerSimonian, N. Laird. Meta-analysis in clinical trials. *Controlled Clinical Trials* 7:177-188, 1986.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import expit

from ..errors import check_choice
from .fixed_point import squarem
from .relation_groups import pool_thin_strata

#: workers' confusions are shrunk towards the crowd's: empirical Bayes (or a number of answers)
SHRINKAGE = "eb"
SOURCES = ("controls", "dawid-skene", "semi", "items")
#: the sources tried when none is named, in order: the first available (``semi`` needs answered controls of both
#: classes) unless :func:`control_mismatch` sends it to ``items`` (:func:`preferred_source`)
PREFERENCE = ("semi", "dawid-skene")
#: controls and items disagree about the crowd when their rates differ by more than this many standard errors
CONTROL_MISMATCH_Z = 4.0
#: a stratum whose sensitivity minus false-positive rate is below this is weak (its items' votes say little; the
#: items alone do not pin its rates, so :func:`control_mismatch` does not compare them there)
WEAK_SEPARATION = 0.4
#: the items' own rates must explain their votes better than the rates anchored by the controls by a likelihood
#: ratio statistic above this (the 99% point of chi-squared with 2 degrees of freedom; :func:`control_mismatch`)
ITEMS_MIN_LR = 9.21
#: bootstrap replicates of the confusions behind every published interval
REPLICATES = 100


@dataclass(frozen=True)
class VerifyAnswers:
    """Verification answers as arrays (one row per answer), items numbered ``0..n_items-1``."""

    item: np.ndarray        # item index
    worker: np.ndarray      # worker index
    yes: np.ndarray         # 1: the answer says "correct"
    item_keys: list         # per item: the instance key (controls: their control key)
    control: np.ndarray     # per item: -1 not a control, else the control's true class (0/1)
    n_workers: int
    #: per answer, the database ids of the answer, its task and its annotator (None: not from the database)
    answer_ids: np.ndarray | None = None
    task_ids: np.ndarray | None = None
    annotator_ids: np.ndarray | None = None
    #: per item, its stratum ``0..H-1`` (what makes items hard: the relation, or a group of relations; controls
    #: too); None: one stratum
    stratum: np.ndarray | None = None
    #: the number of strata (default: the highest stratum + 1); the confusion rows depend on it
    strata: int | None = None
    #: relation -> stratum, when the strata are relations (one the mapping does not name: the last stratum)
    relation_strata: dict | None = None
    #: per stratum, the set of rates it is judged with (:func:`~.relation_groups.pool_thin_strata`: strata with few gold controls
    #: share one); None: each stratum its own
    rate_group: np.ndarray | None = None

    @property
    def n_items(self) -> int:
        return len(self.item_keys)

    @property
    def n_strata(self) -> int:
        if self.stratum is None:
            return 1
        if self.strata is not None:
            return int(self.strata)
        return int(np.max(self.stratum)) + 1 if len(self.stratum) else 1

    @property
    def n_rate_groups(self) -> int:
        """The sets of rates per worker: one per stratum, or per :attr:`rate_group`."""
        if self.stratum is None:
            return 1
        if self.rate_group is None:
            return self.n_strata
        return int(np.max(self.rate_group)) + 1 if len(self.rate_group) else 1

    @property
    def n_rates(self) -> int:
        """Rows of the fitted confusions: one per (worker, rate group), ``worker * n_rate_groups + group``."""
        return self.n_workers * self.n_rate_groups

    def rate_rows(self) -> np.ndarray:
        """Per answer, the row of its confusions (:attr:`n_rates`): its worker's rates on its item's stratum."""
        w = np.asarray(self.worker, np.int64)
        if self.stratum is None:
            return w
        g = np.asarray(self.stratum, np.int64)[np.asarray(self.item, np.int64)]
        if self.rate_group is not None:
            g = np.asarray(self.rate_group, np.int64)[g]
        return w * self.n_rate_groups + g

    def rates(self, y: np.ndarray, n: np.ndarray, shrinkage) -> np.ndarray:
        """Rates per confusion row from per-row counts: :func:`shrunk_rates` with one set of rates per worker,
        else :func:`stratified_rates`.  ``(R, B)`` counts: ``B`` sets of rates, one per column."""
        G = self.n_rate_groups
        if G == 1:
            return shrunk_rates(y, n, shrinkage)
        shape = np.shape(y)
        return stratified_rates(y.reshape(-1, G, *shape[1:]), n.reshape(-1, G, *shape[1:]), shrinkage).reshape(shape)


def between_worker_variance(yes_c: np.ndarray, n_c: np.ndarray):
    r"""Method-of-moments variance of a rate between workers (beta-binomial; DerSimonian–Laird form).

    :math:`\hat\sigma^2_b = \max\bigl(0, [\sum_w n_w(\hat p_w - \bar p)^2 - \bar p(1-\bar p)(W-1)]
    / [N - \sum_w n_w^2 / N]\bigr)` over the :math:`W` workers with answers, :math:`N = \sum_w n_w`; 0 with
    fewer than two workers.  ``(W,)`` counts give a number, ``(W, H)`` counts one per column.
    """
    Y, N = np.asarray(yes_c, float), np.asarray(n_c, float)
    one = Y.ndim == 1
    if one:
        Y, N = Y[:, None], N[:, None]
    ok = N > 0  # workers without answers contribute nothing below (their N is 0, their rate set to 0)
    W = ok.sum(0)
    tot = N.sum(0)
    safe = np.where(tot > 0, tot, 1.0)
    pbar = Y.sum(0) / safe
    ph = np.divide(Y, N, out=np.zeros_like(Y), where=ok)
    num = (N * (ph - pbar) ** 2).sum(0) - pbar * (1 - pbar) * (W - 1)
    den = tot - (N * N).sum(0) / safe
    out = np.where((den > 0) & (W >= 2) & (tot > 0), np.maximum(num, 0) / np.where(den > 0, den, 1.0), 0.0)
    return float(out[0]) if one else out


#: bounds of the empirical-Bayes prior strength (answers' worth)
EB_MIN, EB_MAX = 1.0, 1e4


#: the most answers' worth a stratum's crowd rate borrows from the other strata's: a relation with a few dozen
#: answers keeps rates of its own even when most relations are alike (one variance between strata, estimated
#: by moments, pooled the two easy relations of a crowd with many hard ones entirely)
STRATUM_PRIOR_MAX = 20.0


def shrunk_rates(yes_c: np.ndarray, n_c: np.ndarray, shrinkage, smoothing: float = 0.01, *, prior=None,
                 tau_max: float = EB_MAX) -> np.ndarray:
    """Per worker ``(yes + s + τ·pooled) / (n + 2s + τ)`` with the pooled rate ``(Σyes + s) / (Σn + 2s)``.

    ``shrinkage`` τ in answers, or ``'eb'``: empirical Bayes, τ = p̄(1 − p̄)/σ²_b − 1 from the
    between-worker variance (:func:`between_worker_variance`), so a crowd whose workers do not
    differ measurably is pooled and one with a spammer is not.  ``(W, H)`` counts: per column;
    ``prior``: the means to shrink towards instead of the pooled rate (τ still from the column's spread);
    ``tau_max``: the largest τ.
    """
    yes_c, n_c = np.asarray(yes_c, float), np.asarray(n_c, float)
    pooled = (yes_c.sum(0) + smoothing) / (n_c.sum(0) + 2 * smoothing)
    if shrinkage == "eb":
        var_b = np.asarray(between_worker_variance(yes_c, n_c))
        with np.errstate(divide="ignore"):
            tau = np.where(var_b <= 0, tau_max,
                           np.clip(pooled * (1 - pooled) / np.where(var_b > 0, var_b, 1.0) - 1, EB_MIN, tau_max))
    else:
        tau = min(float(shrinkage), tau_max)
    mean = pooled if prior is None else prior
    return (yes_c + smoothing + tau * mean) / (n_c + 2 * smoothing + tau)


def stratified_rates(yes_c: np.ndarray, n_c: np.ndarray, shrinkage, smoothing: float = 0.01) -> np.ndarray:
    r"""Per (worker, stratum) rates from ``(W, H)`` counts, shrunk towards the worker's and the stratum's.

    The stratum's crowd rate :math:`r_h` (every worker's answers in the stratum, shrunk towards the crowd's by
    :func:`shrunk_rates` across strata, at most :data:`STRATUM_PRIOR_MAX` answers' worth) and the worker's overall rate :math:`r_w` (:func:`shrunk_rates` across
    workers, towards the crowd's rate at the worker's mix of strata :math:`\bar r_w = \sum_h n_{wh} r_h / n_w`)
    give the prior mean :math:`\operatorname{logit} m_{wh} = \operatorname{logit} r_h +
    \operatorname{logit} r_w - \operatorname{logit} \bar r_w` (a worker better than the crowd at its own mix is
    better in every stratum by as much on the logit scale); the cell's rate is ``(yes + s + τ_h m) / (n + 2s + τ_h)``
    with :math:`\tau_h` the empirical-Bayes strength of the between-worker variance within the stratum (or
    ``shrinkage`` answers).  A thin cell borrows from its worker and its stratum; a stratum without answers
    gets the worker's rates.  ``(W, H, B)`` counts: ``B`` independent sets (a bootstrap's refits, :func:`ds_fits`).
    """
    yes_c, n_c = np.asarray(yes_c, float), np.asarray(n_c, float)
    r_h = shrunk_rates(yes_c.sum(0), n_c.sum(0), shrinkage, smoothing, tau_max=STRATUM_PRIOR_MAX)
    n_w = n_c.sum(1)
    # the crowd's rate at each worker's mix of strata: a worker who answered mostly easy items is not better
    at_mix = np.where(n_w > 0, (n_c * r_h[None, :]).sum(1) / np.where(n_w > 0, n_w, 1), r_h.mean(0))
    r_w = shrunk_rates(yes_c.sum(1), n_w, shrinkage, smoothing, prior=at_mix)
    prior = 1.0 / (1.0 + np.exp(-(_logit(r_h)[None, :] + (_logit(r_w) - _logit(at_mix))[:, None])))
    return shrunk_rates(yes_c, n_c, shrinkage, smoothing, prior=prior)


def control_confusions(a: VerifyAnswers, weights: np.ndarray | None = None, *, shrinkage=SHRINKAGE
                       ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per worker (sensitivity, false-positive rate) from control answers; None without both kinds of controls.

    ``weights``: per-answer multiplicities (a bootstrap replicate).
    """
    w = np.ones(len(a.item)) if weights is None else weights
    truth = a.control[a.item]
    rows, R = a.rate_rows(), a.n_rates
    rates = []
    for z in (1, 0):
        sel = truth == z
        if not (sel & (w > 0)).any():
            return None
        n_c = np.bincount(rows[sel], weights=w[sel], minlength=R)
        y_c = np.bincount(rows[sel], weights=(w * a.yes)[sel], minlength=R)
        rates.append(a.rates(y_c, n_c, shrinkage))
    return rates[0], rates[1]


def ds_confusions(a: VerifyAnswers, item_weights: np.ndarray | None = None, *, clamp_controls: bool = False,
                  shrinkage=SHRINKAGE, max_iter: int = 2000, tol: float = 1e-8
                  ) -> tuple[np.ndarray, np.ndarray]:
    r"""Binary Dawid–Skene by EM: per worker (sensitivity, false-positive rate).

    As :func:`unpooled.core.annotation.dawid_skene` (each worker's confusion shrunk towards the
    pooled one by ``shrinkage`` answers), plus item multiplicities (``item_weights``, for the
    bootstrap) and, with ``clamp_controls``, controls held at their known class.  The class prior
    is fitted on the non-control items only (controls are balanced by construction).
    """
    sens, fpr, _ = ds_fit(a, item_weights, clamp_controls=clamp_controls, shrinkage=shrinkage, max_iter=max_iter,
                           tol=tol)
    return sens, fpr


def ds_fit(a: VerifyAnswers, item_weights=None, *, clamp_controls: bool = False, shrinkage=SHRINKAGE,
            max_iter: int = 2000, tol: float = 1e-8, patterns: AnswerPatterns | None = None):
    """:func:`ds_confusions` returning the posteriors too: :func:`ds_fits` with one set of item weights."""
    w = None if item_weights is None else np.asarray(item_weights, float)[:, None]
    x, post = ds_fits(a, w, clamp_controls=clamp_controls, shrinkage=shrinkage, max_iter=max_iter, tol=tol,
                      patterns=patterns, posteriors=True)
    R = a.n_rates
    return x[:R, 0], x[R:2 * R, 0], post[:, 0]


def ds_fits(a: VerifyAnswers, item_weights=None, *, clamp_controls: bool = False, shrinkage=SHRINKAGE,
            max_iter: int = 2000, tol: float = 1e-8, patterns: AnswerPatterns | None = None,
            posteriors: bool = False):
    """Dawid--Skene fits of ``a`` under the columns of ``item_weights`` (``(n_items, B)``: a bootstrap's
    multiplicities; None: one fit, every item once), run together: ``(x, post)`` with ``x`` the ``(2R + H, B)``
    sensitivities (rows ``:R``), false-positive rates (``R:2R``) and class priors, ``post`` the ``(n_items, B)``
    posteriors (with ``posteriors``, else None).  Each column is the fit it would be alone: EM starts from the
    items' vote shares and runs to its fixed point (every rate and class prior still within ``tol``, at most
    ``max_iter`` EM steps), accelerated by :func:`~.fixed_point.squarem`: a stop on the log-likelihood's change left
    weakly judged strata far from it (the module :mod:`.fixed_point` says by how much).

    With strata (``a.stratum``) the confusions are per (worker, stratum) (:meth:`VerifyAnswers.rates`) and the
    class prior is per stratum with enough items (hard relations are both harder to judge and less often correct),
    the thin strata sharing one per rate group (:func:`class_prior_groups`).

    The EM runs on :func:`answer_patterns` (``patterns``: ``a``'s, when the caller has them): items answered alike
    have the same posterior, so each pattern stands for its items with their weights added.
    """
    import scipy.sparse as sp

    pt = answer_patterns(a) if patterns is None else patterns
    n_i, R = pt.n, a.n_rates
    st, H = pt.prior, pt.n_priors

    def summer(to, n):  # sums of (len(to), B) rows into n rows: a sparse one-hot (bincount has no columns)
        return sp.csr_matrix((np.ones(len(to)), (to, np.arange(len(to)))), shape=(n, len(to)))

    by_item, by_row, by_prior = summer(pt.item, n_i), summer(pt.rows, R), summer(st, H)
    W = np.ones((a.n_items, 1)) if item_weights is None else np.asarray(item_weights, float)
    iw = np.asarray(summer(pt.of_item, n_i) @ W)
    om = iw[pt.item]
    fixed = ((pt.control >= 0) if clamp_controls else np.zeros(n_i, bool))[:, None]
    ctrl = pt.control[:, None].astype(float)
    real = (pt.control < 0)[:, None]
    votes = np.bincount(pt.item, weights=pt.yes, minlength=n_i)
    total = np.bincount(pt.item, minlength=n_i)
    T = np.where(total > 0, votes / np.maximum(total, 1), 0.5)[:, None]
    T = np.where(fixed, ctrl, T) * np.ones((1, W.shape[1]))
    yes = pt.yes[:, None]
    said = yes == 1
    wr = iw * real
    wr_h = np.maximum(by_prior @ wr, 1e-12)

    def m_step(T, c):  # the rates and class priors of the columns c
        rho = np.clip((by_prior @ (wr[:, c] * T)) / wr_h[:, c], 1e-6, 1 - 1e-6)
        t_a = T[pt.item]
        w1, w0 = om[:, c] * t_a, om[:, c] * (1 - t_a)
        n1, y1 = by_row @ w1, by_row @ (w1 * yes)
        n0, y0 = by_row @ w0, by_row @ (w0 * yes)
        return np.concatenate([a.rates(y1, n1, shrinkage), a.rates(y0, n0, shrinkage), rho])

    def e_step(x):  # the posteriors (the logarithms once per rate row, not per answer: the same values)
        x = np.clip(x, 1e-9, 1 - 1e-9)  # an extrapolated point may leave (0, 1)
        lp1, lp0 = np.log(x), np.log1p(-x)
        l1 = np.where(said, lp1[:R][pt.rows], lp0[:R][pt.rows])
        l0 = np.where(said, lp1[R:2 * R][pt.rows], lp0[R:2 * R][pt.rows])
        s1 = by_item @ l1 + lp1[2 * R:][st]
        s0 = by_item @ l0 + lp0[2 * R:][st]
        return np.where(fixed, ctrl, expit(s1 - s0))

    # on the probability scale: a class prior or rate drifting to a bound is a geometric sequence there (which
    # the extrapolation jumps to the end of), an arithmetic one on the logit scale (which it cannot)
    x, _ = squarem(lambda x, c: m_step(e_step(x), c), m_step(T, np.arange(T.shape[1])), tol=tol,
                   max_steps=max_iter)
    return x, (e_step(x)[pt.of_item] if posteriors else None)


@dataclass(frozen=True)
class AnswerPatterns:
    """The items of some :class:`VerifyAnswers` merged by how they were answered (:func:`answer_patterns`):
    ``of_item`` the pattern of each item; per pattern answer its pattern (``item``), its confusion row
    (``rows``) and what it says (``yes``); per pattern its class-prior group (``prior``, of ``n_priors``:
    :func:`class_prior_groups`) and its control class (``control``, -1 for an item to verify)."""

    of_item: np.ndarray
    item: np.ndarray
    rows: np.ndarray
    yes: np.ndarray
    prior: np.ndarray
    n_priors: int
    control: np.ndarray

    @property
    def n(self) -> int:
        return len(self.control)


#: items with more answers than this are patterns of their own (:func:`answer_patterns`)
MAX_PATTERN_ANSWERS = 32


def answer_patterns(a: VerifyAnswers) -> AnswerPatterns:
    """``a``'s items merged into patterns: the items with the same answers (as a multiset of (confusion row,
    answer)), the same class-prior group and the same control class.  Dawid--Skene's E step gives such items one
    posterior and its M step adds their answers' weights, so a fit on the patterns, each weighted by its items'
    weights, is the fit on the items (up to the order of the sums); with a dozen workers answering three times
    there are a few thousand patterns whatever the number of items, and the bootstrap's hundred refits
    (:func:`fit_confusions`) work on those.  An item with more than :data:`MAX_PATTERN_ANSWERS` answers (a gold
    control answered by every worker) is a pattern of its own."""
    item = np.asarray(a.item, np.int64)
    rows = np.asarray(a.rate_rows(), np.int64)
    yes = np.asarray(a.yes, np.int64)
    prior, H = class_prior_groups(a)
    control = np.asarray(a.control, np.int64)
    n_i = a.n_items
    k = np.bincount(item, minlength=n_i)
    width = int(min(k.max(initial=0), MAX_PATTERN_ANSWERS))
    order = np.lexsort((rows * 2 + yes, item))
    start = np.concatenate([[0], np.cumsum(k)[:-1]])
    pos = np.arange(len(item)) - start[item[order]]
    key = np.full((n_i, width + 4), -1, np.int64)
    on = pos < width
    key[item[order][on], pos[on]] = (rows * 2 + yes)[order][on]
    alone = k > MAX_PATTERN_ANSWERS
    key[alone, width] = np.flatnonzero(alone)  # each its own pattern
    key[:, width + 1], key[:, width + 2], key[:, width + 3] = prior, control, k
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    rep = np.zeros(n_i, bool)
    rep[first] = True
    sel = rep[item]  # the answers of each pattern's first item stand for its items'
    return AnswerPatterns(inv, inv[item[sel]], rows[sel], yes[sel], prior[first], H, control[first])


#: a rate group's thin strata have a class prior of their own only with this many non-control items together;
#: fewer share one with the other such groups (a prior fitted on a handful of items sits at 0 or 1)
MIN_PRIOR_ITEMS = 10


def class_prior_groups(a: VerifyAnswers) -> tuple[np.ndarray, int]:
    """Per item, the class prior it shares in :func:`ds_fit`, and their number: its stratum's own with at least
    :data:`~unpooled.core.estimators.strata.MIN_ITEMS` non-control items, else one shared by the thin strata of
    its rate group (:attr:`VerifyAnswers.rate_group`) when they hold :data:`MIN_PRIOR_ITEMS` together, else one
    shared by the rest; one for all without strata.

    A prior fitted on two or three items sits at 0 or 1 and decides their class, and their answers then bend the
    rates (the human reference's items, nearly all correct, in 97 relations with 13 controls: false-positive rate
    0.35-0.40 against a true 0.2).  But one prior for every thin stratum gave hard items the easy relations'
    precision: hard items with few "yes" votes passed for correct ones and the hard group's false-positive rate
    came out low (0.41 against 0.45 on the Re-DocRED demo's designs; the spaCy baseline 2 points high)."""
    from ..estimators.strata import MIN_ITEMS

    if a.stratum is None or a.n_strata <= 1:
        return np.zeros(a.n_items, np.int64), 1
    st, H = np.asarray(a.stratum, np.int64), a.n_strata
    n = np.bincount(st[np.asarray(a.control) < 0], minlength=H)
    own = n >= MIN_ITEMS
    grp = np.zeros(H, np.int64) if a.rate_group is None else np.asarray(a.rate_group, np.int64)
    G = int(grp.max(initial=0)) + 1
    grp = np.where(np.bincount(grp[~own], weights=n[~own], minlength=G)[grp] >= MIN_PRIOR_ITEMS, grp, G)
    return np.where(own[st], st, H + grp[st]), H + G + 1


#: the sources that fit rates per stratum (:func:`model_answers`): gold controls anchor them (``items``: there
#: are controls, answered unlike the items; its per-stratum fit is kept, not measured against one set of rates)
ANCHORED = ("semi", "controls", "items")


def model_answers(a: VerifyAnswers, source: str) -> VerifyAnswers:
    """``a`` as the crowd model of ``source`` sees it: rates per (worker, stratum) only where gold controls anchor
    them (:data:`ANCHORED`; ``dawid-skene``, used when there are no controls of both classes, is not), strata with
    few controls sharing one set (:func:`~.relation_groups.pool_thin_strata`).
    Dawid--Skene on the items alone cannot tell, within a stratum, a crowd that errs
    from items of the other class, and with a stratum per relation it drifts along that ridge in every thin
    stratum: the human reference (every item correct, no controls, 30 Re-DocRED documents) had its precision,
    truly 1, at 0.77 [0.66, 0.86], and covered 2 runs in 6 (one set of rates per worker: 0.95 [0.61, 1.00], 3 in 3;
    per-type rates from the items alone drifted +25 points in the issue's check).  Without anchors the strata are
    dropped: one set of rates per worker, one prevalence per target."""
    if a.stratum is None:
        return a
    if source in ANCHORED:
        return pool_thin_strata(a)
    return replace(a, stratum=None, strata=None, relation_strata=None, rate_group=None)


def fit_confusions(a: VerifyAnswers, source: str, *, replicates: int = 0, rng=0, shrinkage=SHRINKAGE,
                    point_only: bool = False):
    """Per-worker confusions of ``source``: ``(point (sens, fpr), replicates [(sens, fpr), ...] or None)``;
    None when the source is not available (no answers; ``controls``/``semi`` without both kinds of controls).

    ``point_only``: the point fit alone (replicates None).
    """
    check_choice("source", source, SOURCES)
    if not len(a.item):
        return None
    return _fit_confusions(model_answers(a, source), source, replicates, rng, shrinkage, point_only)


def _fit_confusions(a: VerifyAnswers, source: str, replicates: int, rng, shrinkage, point_only: bool):
    """:func:`fit_confusions` on the answers as its source's model sees them (:func:`model_answers`)."""
    if source == "items":  # Dawid-Skene on the items alone, in the strata the controls anchored
        sub = items_only(a)
        if not len(sub.item):
            return None
        return _fit_confusions(sub, "dawid-skene", replicates, rng, shrinkage, point_only)
    if source == "controls":
        cw = control_mix_weights(a)
        cw = None if cw is None else cw[a.item]  # per answer
        got = control_confusions(a, cw, shrinkage=shrinkage)
        if got is None:
            return None

        def fits(w):  # the refits under the columns of w, answers' multiplicities
            return [control_confusions(a, w[:, j] if cw is None else w[:, j] * cw, shrinkage=shrinkage)
                    for j in range(w.shape[1])]
    else:
        if source == "semi" and not ((a.control == 0).any() and (a.control == 1).any()):
            return None
        clamp = source == "semi"
        cw = control_mix_weights(a) if clamp else None
        pt = answer_patterns(a)  # once for the point fit and every replicate
        got = ds_fit(a, cw, clamp_controls=clamp, shrinkage=shrinkage, patterns=pt)[:2]
        # each replicate starts where the point fit did (from the vote shares), not from its posteriors: where the
        # likelihood has a ridge (no controls, or a stratum with few controls and a weak crowd) a warm start kept
        # every replicate near the point fit's end of it and their spread understated the fit's (60 worlds,
        # precision coverage: crowd 0.7 on items, 0.95 on controls, rates from the items 0.67 -> 0.90; hard-heavy
        # relations with mostly easy controls 0.80 -> 0.95).  Strata without anchors share their rates
        # (:func:`~.relation_groups.pool_thin_strata`), so the refits have one optimum to return to

        def fits(w):  # the refits under the columns of w, items' multiplicities: run together (ds_fits)
            x, _ = ds_fits(a, w if cw is None else w * cw[:, None], clamp_controls=clamp, shrinkage=shrinkage,
                           patterns=pt)
            R = a.n_rates
            return [(x[:R, j], x[R:2 * R, j]) for j in range(x.shape[1])]
    point = tuple(got)
    if point_only or not replicates:
        return point, None
    gen = np.random.default_rng(rng)
    draw = _bootstrap_answers if source == "controls" else _bootstrap_items
    w = np.stack([draw(a, gen) for _ in range(replicates)], axis=1)
    reps = []
    for lo in range(0, replicates, REFITS_TOGETHER):
        reps += [tuple(conf) for conf in fits(w[:, lo:lo + REFITS_TOGETHER]) if conf is not None]
    return point, reps


#: bootstrap refits run together (:func:`ds_fits`'s columns): their arrays are answer patterns x this many
REFITS_TOGETHER = 50


def control_mix_weights(a: VerifyAnswers) -> np.ndarray | None:
    """Per item a weight: 1 for an item to verify; for a gold control, the weight that makes the controls of its
    class in its rate group (:func:`~.relation_groups.pool_thin_strata`) follow the mix of strata of the group's items (a control of
    a relation the group has no items of: 0).  A learned group's rates are anchored by its controls: unweighted,
    the controls of the rare easy relations that joined a hard one's group pulled its false-positive rate down
    (0.36 said by the group's wrong controls, 0.45 true for the hard relation that held 95% of its items).  The
    controls of each class keep their total weight.  None when no stratum shares its rates."""
    if a.rate_group is None or a.stratum is None:
        return None
    st = np.asarray(a.stratum, np.int64)
    grp = np.asarray(a.rate_group, np.int64)
    H, G = a.n_strata, a.n_rate_groups
    ctrl = np.asarray(a.control)
    answered = np.zeros(a.n_items, bool)
    answered[np.asarray(a.item, np.int64)] = True
    n_items = np.bincount(st[answered & (ctrl < 0)], minlength=H).astype(float)
    w = np.ones(a.n_items)
    for c in (0, 1):
        on = answered & (ctrl == c)
        n_ctrl = np.bincount(st[on], minlength=H).astype(float)
        covered = np.where(n_ctrl > 0, n_items, 0.0)           # items of strata that have such controls
        items_g = np.bincount(grp, weights=covered, minlength=G)
        ctrl_g = np.bincount(grp, weights=n_ctrl, minlength=G)
        target = np.where(items_g[grp] > 0, ctrl_g[grp] * covered / np.maximum(items_g[grp], 1e-12), n_ctrl)
        per = np.where(n_ctrl > 0, target / np.maximum(n_ctrl, 1e-12), 1.0)
        w[on] = per[st[on]]
    return w


def _bootstrap_answers(a: VerifyAnswers, gen) -> np.ndarray:
    """Multiplicities of the control answers, resampled within (worker, true class); other answers 0."""
    w = np.zeros(len(a.item))
    truth = a.control[a.item]
    strata = np.where(truth >= 0, a.worker * 2 + truth, -1)
    for s in np.unique(strata[strata >= 0]):
        idx = np.flatnonzero(strata == s)
        w[idx] = np.bincount(gen.integers(0, len(idx), len(idx)), minlength=len(idx))
    return w


def _bootstrap_items(a: VerifyAnswers, gen) -> np.ndarray:
    """Multiplicities of the items, resampled within controls and non-controls."""
    w = np.zeros(a.n_items)
    for sel in (a.control < 0, a.control >= 0):
        idx = np.flatnonzero(sel)
        if len(idx):
            w[idx] = np.bincount(gen.integers(0, len(idx), len(idx)), minlength=len(idx))
    return w


def _logit(p):
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


def shifted_replicates(base_point: tuple, base_reps: list, base_workers: int, point: tuple, n_workers: int) -> list:
    r"""The stored replicates moved to a new point fit: per worker, on the logit scale,
    :math:`\operatorname{logit}\hat c^{*}_{b} = \operatorname{logit}\hat c_{new} + (\operatorname{logit}
    \hat c^{*}_{b,old} - \operatorname{logit}\hat c_{old})`; workers new since the bootstrap get no deviation."""
    W0 = base_workers
    out = []
    base = [_logit(np.asarray(c, float)) for c in base_point]
    new = [_logit(np.asarray(c, float)) for c in point]
    for rep in base_reps:
        conf = []
        for j in range(2):
            dev = np.zeros(n_workers)
            dev[:W0] = _logit(np.asarray(rep[j], float)) - base[j]
            conf.append(1.0 / (1.0 + np.exp(-(new[j] + dev))))
        out.append(tuple(conf))
    return out



def items_only(a: VerifyAnswers) -> VerifyAnswers:
    """The answers about non-control items, items renumbered in order (workers keep their numbers)."""
    real_item = np.asarray(a.control) < 0
    keep = real_item[np.asarray(a.item)]
    new = np.cumsum(real_item) - 1
    pick = (lambda x: None if x is None else np.asarray(x)[keep])
    st = None if a.stratum is None else np.asarray(a.stratum)[real_item]
    return VerifyAnswers(new[np.asarray(a.item)[keep]], np.asarray(a.worker)[keep], np.asarray(a.yes)[keep],
                         [k for k, r in zip(a.item_keys, real_item) if r], np.full(int(real_item.sum()), -1),
                         a.n_workers, pick(a.answer_ids), pick(a.task_ids), pick(a.annotator_ids),
                         st, a.n_strata if st is not None else None, a.relation_strata, a.rate_group)


def real_items(a: VerifyAnswers) -> np.ndarray:
    """Per item, whether it is not a control."""
    return np.asarray(a.control) < 0


def items_loglik(a: VerifyAnswers, sens, fpr, rho) -> float:
    r"""The answers' mixture log-likelihood :math:`\sum_x \log(\rho L_1(x) + (1-\rho) L_0(x))` over the items
    of ``a`` (their classes unknown), with :math:`L_c(x)` the product over the item's answers of each worker's
    probability of that answer given class :math:`c` (its rates on the item's stratum); ``rho``: the class prior,
    one number or one per item."""
    sens = np.clip(np.asarray(sens, float), 1e-9, 1 - 1e-9)
    fpr = np.clip(np.asarray(fpr, float), 1e-9, 1 - 1e-9)
    rho = np.clip(np.asarray(rho, float), 1e-9, 1 - 1e-9)
    said = np.asarray(a.yes) == 1
    w = a.rate_rows()
    l1 = np.where(said, np.log(sens)[w], np.log1p(-sens)[w])
    l0 = np.where(said, np.log(fpr)[w], np.log1p(-fpr)[w])
    s1 = np.bincount(a.item, weights=l1, minlength=a.n_items) + np.log(rho)
    s0 = np.bincount(a.item, weights=l0, minlength=a.n_items) + np.log1p(-rho)
    return float(np.logaddexp(s1, s0).sum())


def _stratum_means(a: VerifyAnswers, post: np.ndarray) -> np.ndarray:
    """Per item, the mean posterior of the items that share its class prior (:func:`class_prior_groups`): the
    class prior Dawid--Skene fitted."""
    g, G = class_prior_groups(a)
    n = np.maximum(np.bincount(g, minlength=G), 1)
    return (np.bincount(g, weights=post, minlength=G) / n)[g]


def control_mismatch(a: VerifyAnswers, *, shrinkage=SHRINKAGE) -> float | None:
    r"""How many standard errors apart the crowd's rates on the gold controls and on the items are, within a
    stratum (the largest over the strata: controls mostly of easy relations beside items mostly of hard ones are
    no mismatch when each relation's controls and items agree).

    In a stratum, on the controls, the share of "yes" among the answers about correct controls (:math:`\hat s_c`) and about
    incorrect ones (:math:`\hat e_c`); on the items, the same shares weighted by the posteriors of
    Dawid–Skene fitted on the items alone (:math:`\hat s_x = \sum_a t_a y_a / \sum_a t_a`, :math:`\hat e_x`
    likewise with :math:`1 - t_a`).  Returns :math:`\max(|z_s|, |z_e|)` with
    :math:`z_s = (\hat s_c - \hat s_x)/\sqrt{\hat s_c(1-\hat s_c)/n_c + \hat s_x(1-\hat s_x)/n_x}` (binomial
    standard errors at the answers' counts; the Dawid–Skene fit's own uncertainty is not in them, so the
    threshold :data:`CONTROL_MISMATCH_Z` is high); None without answers about both kinds of control and about
    items; and None when the items' own fit explains their votes no better than the fit anchored by the
    controls: :math:`2(\ell_x - \ell_{semi}) \le` :data:`ITEMS_MIN_LR`, with :math:`\ell` the items' mixture
    log-likelihood :math:`\sum_x \log(\rho L_1(x) + (1-\rho) L_0(x))` under each fit's rates and class prior
    (:func:`items_loglik`).

    A difference of rates without a difference of likelihood is a fit the items do not identify.  It happens
    when the items are (nearly) all of one class, as when every verified instance is nearly always correct (a human
    reference's own and a system as good as it): the votes then say how often the crowd says "yes" to a correct
    item, but nothing separates a crowd that errs from a few incorrect items, and Dawid--Skene's likelihood is
    flat; EM stops anywhere on the ridge, e.g. where both classes are alike (:math:`\hat s_x = 0.79`,
    :math:`\hat e_x = 0.78` on 212 items of a Re-DocRED run at crowd accuracy 0.8).  Compared with the controls
    that fit gave :math:`z = 5.9` (likelihood ratio 0.2), and the rates from the items made every vote
    uninformative: the reference's precision 0 in [0, 1]; with ``semi`` 0.995 in [0.90, 1], truth 1.  A crowd
    truly worse on the items (0.7 or 0.65 against 0.95 on the controls; at chance) gives ratios of 10 to 19.
    """
    ctrl = np.asarray(a.control)[np.asarray(a.item)]
    yes = np.asarray(a.yes, float)
    pos, neg, real = ctrl == 1, ctrl == 0, ctrl < 0
    if not (pos.any() and neg.any() and real.any()):
        return None
    a = pool_thin_strata(a)  # the strata as the anchored fits see them
    sub = items_only(a)
    s_x, e_x, post = ds_fit(sub, shrinkage=shrinkage)
    s_a, e_a, anchored = ds_fit(a, clamp_controls=True, shrinkage=shrinkage)
    if 2 * (items_loglik(sub, s_x, e_x, _stratum_means(sub, post))
            - items_loglik(sub, s_a, e_a, _stratum_means(sub, anchored[real_items(a)]))) <= ITEMS_MIN_LR:
        return None  # the items do not identify rates of their own (docs)
    t = post[sub.item]
    ys = np.asarray(sub.yes, float)
    # per stratum: controls mostly of easy relations beside items mostly of hard ones differ in aggregate only
    h_c = _answer_strata(a)
    h_x = _answer_strata(sub)
    rows = a.rate_rows()
    z = 0.0
    for h in np.unique(h_c):
        on, mine = h_c == h, h_x == h
        # a weak stratum: the items alone do not pin its rates (Dawid-Skene stops anywhere along a ridge), and
        # the binomial errors below do not know it (400 controls beside hard relations judged at 0.75 / 0.45, the
        # same crowd on both: 6 of 20 worlds sent to the items' rates, precision +3 to +4 points, coverage 0.77)
        if float(np.mean(s_a[rows[on]] - e_a[rows[on]])) < WEAK_SEPARATION:
            continue
        for c_yes, w in ((yes[pos & on], t[mine]), (yes[neg & on], 1 - t[mine])):
            n_c, n_x = len(c_yes), float(w.sum())
            if n_c == 0 or n_x <= 0:
                continue
            r_c, r_x = float(c_yes.mean()), float((w * ys[mine]).sum() / n_x)
            se = math.sqrt(max(r_c * (1 - r_c), 0.25 / n_c) / n_c + max(r_x * (1 - r_x), 0.25 / n_x) / n_x)
            z = max(z, abs(r_c - r_x) / se)
    return z


def _answer_strata(a: VerifyAnswers) -> np.ndarray:
    """Per answer, its item's stratum (0 without strata)."""
    if a.stratum is None:
        return np.zeros(len(a.item), np.int64)
    return np.asarray(a.stratum, np.int64)[np.asarray(a.item, np.int64)]


def preferred_source(a: VerifyAnswers, *, shrinkage=SHRINKAGE) -> str | None:
    """The source of the confusions when none is named (module docs): the first available of
    :data:`PREFERENCE`, but ``items`` instead of ``semi`` when :func:`control_mismatch` exceeds
    :data:`CONTROL_MISMATCH_Z`; None without answers."""
    if not len(a.item):
        return None
    has_controls = (np.asarray(a.control) == 0).any() and (np.asarray(a.control) == 1).any()
    if has_controls:
        z = control_mismatch(a, shrinkage=shrinkage)
        return "items" if z is not None and z > CONTROL_MISMATCH_Z else "semi"
    return "dawid-skene"


def fit_preferred(a: VerifyAnswers, *, replicates: int = REPLICATES, rng=0, shrinkage=SHRINKAGE):
    """:func:`fit_confusions` from :func:`preferred_source`: ``(source, (sens, fpr), [(sens, fpr), ...])``, or
    None without answers."""
    source = preferred_source(a, shrinkage=shrinkage)
    if source is None:
        return None
    got = fit_confusions(a, source, replicates=replicates, rng=rng, shrinkage=shrinkage)
    if got is None:
        return None
    return source, got[0], got[1] or []


def fitted_view(a: VerifyAnswers, n_rates: int) -> VerifyAnswers | None:
    """``a`` as the fit that gave ``n_rates`` confusion rows saw it (:func:`model_answers`): as it is, with its thin
    strata pooled, or without strata (no anchors); None when none has that many rows."""
    return next((m for m in (a, model_answers(a, "semi"), model_answers(a, "dawid-skene")) if m.n_rates == n_rates),
                None)


def keyed_answers(a: VerifyAnswers, point: tuple, reps: list):
    """The non-control answers of ``a`` by instance key with the confusions ``point`` and their replicates
    ``reps``: the estimator's input (:class:`unpooled.core.estimators.noisy.KeyedAnswers`); each answer's
    "worker" is its confusion row (:meth:`VerifyAnswers.rate_rows`); with ``a.relation_strata`` the estimator
    places the universe's instances in strata by their relation."""
    from ..estimators.noisy import KeyedAnswers

    a = fitted_view(a, len(point[0])) or a
    real = np.asarray(a.control)[a.item] < 0
    keys = tuple(a.item_keys[i] for i in np.asarray(a.item)[real].tolist())
    sens, fpr = (np.clip(np.asarray(x, float), 1e-9, 1 - 1e-9) for x in point)
    sr = fr = None
    if len(reps) > 1:
        sr = np.array([r[0] for r in reps])
        fr = np.array([r[1] for r in reps])
    return KeyedAnswers(keys, a.rate_rows()[real], np.asarray(a.yes)[real].astype(bool), sens, fpr, sr, fr,
                        a.relation_strata if a.stratum is not None else None)
