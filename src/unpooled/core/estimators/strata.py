r"""Strata of the crowd model: what makes items hard to judge, and each target's known mass in each.

Crowd workers judge some relations well (``country``) and others badly (``employer``, titles), and hard relations
are also less often correct.  A vote likelihood with one prevalence per target then shrinks the items of a hard
stratum towards the target's overall precision (their votes are weak), and rates fitted over every item are the
average over strata.  So the items are split into strata :math:`h` (the relation, or groups of relations), each
worker has rates per stratum (:func:`unpooled.core.annotation.confusion.stratified_rates`), and every functional
:math:`T_i = \sum_s c_{is} f(x_s)` of :mod:`.noisy` is fitted per (target, stratum):
:math:`\hat T_i = \sum_h \bar c_{ih}\,\hat\rho_{ih}`, :math:`\hat\rho_{ih}` the mixture-likelihood prevalence of the
target's items in the stratum.  Precision weighs the strata by the target's *known* sampling mass
:math:`m_{ih} = \sum_{x \in h} p_i(x)` instead of the draws' :math:`\bar c_{ih}/\bar c_i` (post-stratification:
:math:`\hat\pi_i = \sum_h m_{ih}\hat\rho_{ih} / \sum_{h \in H_i} m_{ih}` over the strata :math:`H_i` where the target
has items; a stratum without any of its items lends its mass to the others).  Recall's numerator and denominator
weigh the strata by :math:`\bar c_{ih}`, their unbiased estimates of the strata's mass of true instances.

A stratum with fewer than :data:`MIN_ITEMS` distinct labelled items is fitted together with the other thin ones
(one *rest* group): a prevalence needs items to be identified; a target with fewer than :data:`MIN_TARGET_ITEMS`
of its own items in one of its groups is fitted in one group (its workers' rates stay per stratum).  Linearisation gives every influence value of
:mod:`.noisy` per (target, group): an item in group :math:`g` enters target :math:`i`'s estimate through
:math:`\rho_{ig}` and :math:`w_{ig}/J_{ig}` where one stratum had :math:`\rho_i` and :math:`1/J_i`; the variances
of independent groups add.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from .rows import group_totals

#: a stratum with fewer distinct labelled items is fitted with the other thin strata (one "rest" group)
MIN_ITEMS = 40
#: a target with fewer of its own items in one of its groups is fitted in one group (its prevalences per group
#: would sit at a bound too often: bounded estimates of small groups add up to a bias).  Fitting in one group has a
#: bias of its own, the larger: items of a hard relation carry weak votes *and* a low precision, so one prevalence
#: leans on the easy relations' items.  ``simulate regimes``, 40 trials, at 20 / 6 / 3 / 1: a 25-instance system
#: mostly of hard relations +15.6 / +9.7 / +6.0 / +5.5 points of precision (coverage 0.78 / 0.82 / 0.85 / 0.85);
#: 8 relation types +1.4 / +1.3 / +0.4 / -0.6 (0.89 / 0.89 / 0.94 / 0.96, width 0.146 / 0.147 / 0.164 / 0.199);
#: a near-perfect system is held by the rule near a bound (:mod:`.from_votes`), whatever this is
MIN_TARGET_ITEMS = 3


@dataclass(frozen=True)
class Groups:
    """The groups of strata an estimate is fitted in.

    Attributes
    ----------
    item : ndarray of int, shape (K,)
        The group of each labelled item (the design's distinct drawn instances, in universe order).
    universe : ndarray of int, shape (U,)
        The group of every universe instance.
    n : int
        The number of groups (1: no strata).
    """

    item: np.ndarray
    universe: np.ndarray
    n: int

    def sums(self, M: np.ndarray) -> np.ndarray:
        """``(rows, n)``: the row sums of ``M`` (rows x items) within each group."""
        return group_totals(M, self.item, self.n) if len(self.item) else np.zeros((M.shape[0], self.n))

    def masses(self, P: sp.csr_matrix) -> np.ndarray:
        """``(m, n)``: each target's sampling mass :math:`m_{ig} = \\sum_{x \\in g} p_i(x)` in each group."""
        U = len(self.universe)
        G1 = sp.csr_matrix((np.ones(U), (np.arange(U), self.universe)), shape=(U, self.n))
        return np.asarray((P @ G1).todense())


def groups(strata, codes: np.ndarray, n_universe: int, *, min_items: int = MIN_ITEMS) -> Groups:
    """:class:`Groups` from the stratum of every universe instance (``strata``, None: one group) and the labelled
    items ``codes`` (sorted universe indices): strata with at least ``min_items`` labelled items are groups of
    their own, in stratum order, the others one rest group after them."""
    K = len(codes)
    if strata is None:
        return Groups(np.zeros(K, np.int64), np.zeros(n_universe, np.int64), 1)
    st = np.asarray(strata)
    if st.shape != (n_universe,) or (st.size and (not np.issubdtype(st.dtype, np.integer) or st.min() < 0)):
        raise InvalidInputError(f"strata: expected a non-negative integer stratum for each of the {n_universe} "
                                f"universe instances, got shape {st.shape}")
    st = st.astype(np.int64)
    H = int(st.max()) + 1 if st.size else 1
    full = np.bincount(st[codes], minlength=H) >= min_items
    gid = np.full(H, int(full.sum()), np.int64)
    gid[full] = np.arange(int(full.sum()))
    n = int(full.sum()) + int((~full).any())
    if n <= 1:
        return Groups(np.zeros(K, np.int64), np.zeros(n_universe, np.int64), 1)
    return Groups(gid[st[codes]], gid[st], n)


def precision_weights(masses: np.ndarray, support: np.ndarray) -> np.ndarray:
    """``(m, G)``: each target's weight of each group, its mass share among the groups where it has items
    (``support``); 0 for a target without items."""
    w = np.where(support, masses, 0.0)
    tot = w.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tot > 0, w / np.where(tot > 0, tot, 1.0), 0.0)


__all__ = ["Groups", "MIN_ITEMS", "MIN_TARGET_ITEMS", "groups", "precision_weights"]
