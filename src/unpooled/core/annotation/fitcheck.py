r"""Does the crowd model fit, stratum by stratum (the relation types of :mod:`unpooled.core.estimators.strata`)?

For each stratum: how many items, answers and gold controls it has; the crowd's sensitivity and false-positive
rate there (the fitted rates of :func:`~unpooled.core.annotation.confusion.fit_preferred`, averaged over the
stratum's answers) and their difference, the *separation* (0: answers say nothing about the truth; 1: perfect);
and the observed against the model's distribution of the number of "correct" answers among the stratum's items
answered :math:`k` times (:math:`k` the stratum's most common number of answers).  Under the model an item's
count of "yes" is a mixture over its class, with the stratum's prevalence :math:`\hat\rho_h` (the maximiser of
the items' mixture likelihood, :func:`~unpooled.core.estimators.noisy.prevalence`), of the Poisson-binomial laws
of its own workers' rates; the expected counts are their sums over the items.  Pearson's statistic over the
counts (tails merged until every expected count is at least 5) with ``bins - 2`` degrees of freedom (the
prevalence fitted) tells a misfit: items of one stratum that differ in difficulty, workers who copy each other,
rates that drifted.  With three answers per item there are four counts and the check has little power (half the
items judged near chance went unnoticed; with five answers, p < 0.001).  A weak stratum (separation below
:data:`WEAK_SEPARATION`, or its bootstrap replicates' :data:`WEAK_QUANTILE` quantile below it) gives wide intervals however
well it fits; more answers per item there narrow them; a stratum with many items and few gold controls
(:data:`FEW_CONTROLS`) has rates anchored mostly by its own items and the other strata (three answers of a crowd at 0.75/0.45 carry about as much
as one answer at 0.95/0.05).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2 as chi2_dist

from .confusion import WEAK_SEPARATION, VerifyAnswers, fitted_view
#: merge the tail bins of the fit check until each expects at least this many items
MIN_EXPECTED = 5.0
#: a stratum with at least :data:`FEW_CONTROLS_ITEMS` items and fewer gold controls than this has rates anchored
#: mostly by its items and the other strata (the controls should follow the items' mix of strata)
FEW_CONTROLS = 6
FEW_CONTROLS_ITEMS = 20
#: a stratum is weak when this quantile of its separation over the bootstrap replicates is below the bar
WEAK_QUANTILE = 0.1


@dataclass(frozen=True)
class StratumFit:
    """The fit check of one stratum (module docs)."""

    stratum: int
    items: int
    answers: int
    controls: int
    sens: float
    fpr: float
    prevalence: float
    k: int                      # the number of answers per item the counts are about
    observed: tuple             # items with 0..k "correct" answers
    expected: tuple             # the model's expected counts
    chi2: float
    df: int
    p_value: float
    #: its rates are shared with other strata that have few gold controls (:func:`~.relation_groups.pool_thin_strata`)
    pooled: bool = False
    #: the :data:`WEAK_QUANTILE` quantile of the separation over the fit's bootstrap replicates (None without)
    separation_lo: float | None = None

    @property
    def separation(self) -> float:
        return self.sens - self.fpr

    @property
    def weak(self) -> bool:
        """The crowd may judge this stratum weakly: its separation, or its replicates' lower quantile, is below
        :data:`WEAK_SEPARATION` (a hard relation anchored by few controls fits along the likelihood's ridge, often
        more separated than it is: 0.42 fitted against a true 0.30 in a Re-DocRED world)."""
        return self.separation < WEAK_SEPARATION or (self.separation_lo is not None
                                                     and self.separation_lo < WEAK_SEPARATION)

    @property
    def few_controls(self) -> bool:
        return self.items >= FEW_CONTROLS_ITEMS and self.controls < FEW_CONTROLS

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("stratum", "items", "answers", "controls", "sens", "fpr", "prevalence",
                                            "k", "chi2", "df", "p_value", "pooled", "separation_lo")}
        return {**out, "observed": list(self.observed), "expected": [round(x, 2) for x in self.expected],
                "separation": self.separation, "weak": self.weak, "few_controls": self.few_controls}


def _poisson_binomial(p: np.ndarray) -> np.ndarray:
    """``(n, k+1)``: per row of ``p`` (``(n, k)`` success probabilities) the law of the number of successes."""
    n, k = p.shape
    out = np.zeros((n, k + 1))
    out[:, 0] = 1.0
    for j in range(k):
        out[:, 1:] = out[:, 1:] * (1 - p[:, j:j + 1]) + out[:, :-1] * p[:, j:j + 1]
        out[:, 0] *= 1 - p[:, j]
    return out


def _pearson(obs: np.ndarray, exp: np.ndarray) -> tuple[float, int, float]:
    """Pearson's statistic with the tails merged until every bin expects :data:`MIN_EXPECTED` (df = bins - 2)."""
    obs, exp = list(obs.astype(float)), list(exp.astype(float))
    while len(exp) > 2 and exp[0] < MIN_EXPECTED:
        obs[1] += obs.pop(0)
        exp[1] += exp.pop(0)
    while len(exp) > 2 and exp[-1] < MIN_EXPECTED:
        obs[-2] += obs.pop()
        exp[-2] += exp.pop()
    o, e = np.array(obs), np.array(exp)
    df = len(e) - 2
    if df < 1 or np.any(e <= 0):
        return float("nan"), max(df, 0), float("nan")
    stat = float(((o - e) ** 2 / e).sum())
    return stat, df, float(chi2_dist.sf(stat, df))


def stratum_fits(a: VerifyAnswers, sens, fpr, reps=()) -> list[StratumFit]:
    """:class:`StratumFit` of every stratum of ``a`` with answers about items (module docs); ``sens``/``fpr``: the
    fitted rates per confusion row (:attr:`VerifyAnswers.n_rates`), or per worker when they were fitted without
    the strata (no gold controls to anchor them, :func:`~.confusion.model_answers`): each stratum's votes are then
    checked against the one model.  ``reps``: the fit's bootstrap replicates ``[(sens, fpr), ...]`` (for
    :attr:`StratumFit.separation_lo`)."""
    from ..estimators.noisy import prevalence

    sens = np.clip(np.asarray(sens, float), 1e-9, 1 - 1e-9)
    fpr = np.clip(np.asarray(fpr, float), 1e-9, 1 - 1e-9)
    item, yes = np.asarray(a.item), np.asarray(a.yes)
    m = fitted_view(a, len(sens))  # the rows as the fit saw them (thin strata pooled, or one set per worker)
    rows = m.rate_rows() if m is not None else np.asarray(a.worker, np.int64)
    shared = (np.zeros(a.n_strata, bool) if m is None or m.rate_group is None
              else np.bincount(m.rate_group, minlength=m.n_rate_groups)[m.rate_group] > 1)
    st_item = np.zeros(a.n_items, np.int64) if a.stratum is None else np.asarray(a.stratum, np.int64)
    control = np.asarray(a.control)
    lam = np.bincount(item, weights=np.where(yes == 1, np.log(sens[rows]) - np.log(fpr[rows]),
                                             np.log1p(-sens[rows]) - np.log1p(-fpr[rows])), minlength=a.n_items)
    n_ans = np.bincount(item, minlength=a.n_items)
    reps = [(np.asarray(r[0], float), np.asarray(r[1], float)) for r in reps if len(r[0]) == len(sens)]
    out = []
    for h in range(a.n_strata):
        on = st_item[item] == h
        real = np.flatnonzero((st_item == h) & (control < 0) & (n_ans > 0))
        if not len(real):
            continue
        rho = float(np.nan_to_num(prevalence(np.ones((1, len(real))), lam[real])[0][0]))
        k = int(np.bincount(n_ans[real]).argmax())
        these = real[n_ans[real] == k]
        sel = np.flatnonzero(np.isin(item, these))
        order = sel[np.argsort(item[sel], kind="stable")]
        r = rows[order].reshape(len(these), k)  # items in increasing order, their k answers each
        law = rho * _poisson_binomial(sens[r]) + (1 - rho) * _poisson_binomial(fpr[r])
        obs = np.bincount(np.bincount(item[sel], weights=yes[sel], minlength=a.n_items)[these].astype(int),
                          minlength=k + 1)
        stat, df, p = _pearson(obs, law.sum(0))
        out.append(StratumFit(h, len(real), int(on.sum()), int(((st_item == h) & (control >= 0)).sum()),
                              float(sens[rows[on]].mean()), float(fpr[rows[on]].mean()), rho, k,
                              tuple(int(x) for x in obs), tuple(float(x) for x in law.sum(0)), stat, df, p,
                              bool(shared[h]), _separation_lo(reps, rows[on])))
    return out


def _separation_lo(reps: list, rows: np.ndarray) -> float | None:
    """The :data:`WEAK_QUANTILE` quantile over ``reps`` of the mean separation of the answers' confusion ``rows``."""
    if len(reps) < 2 or not len(rows):
        return None
    return float(np.quantile([float(np.mean(s[rows] - f[rows])) for s, f in reps], WEAK_QUANTILE))


__all__ = ["FEW_CONTROLS", "MIN_EXPECTED", "StratumFit", "WEAK_QUANTILE", "WEAK_SEPARATION", "stratum_fits"]
