r"""Which gold control to offer next: the one whose stratum's answered controls fall furthest short of the items'.

The crowd's rates are fitted per stratum (a relation, or a group of them; :mod:`.confusion`), anchored on the
answered gold controls of that stratum, and a thinly anchored stratum whose crowd is weak drifts along the vote
likelihood's ridge: with 16 answers to wrong controls of a hard relation (0.75 / 0.45) beside 300 answers about
its items, the fitted false-positive rate averaged 0.40 and the precision of a system heavy in that relation came
out 5 points high (``unpooled simulate regimes``, cell "types hard-heavy / easy controls").  Controls are fewer than
items and seldom made in the items' mix; offered at random they are answered in their own mix.  So each control
answer goes where it is most needed:

.. math::

   \text{need}_{h,z} = \frac{d_h}{\sum_k d_k} \cdot \frac{C + 1}{2} - c_{h,z}

with :math:`d_h` the item answers planned in stratum :math:`h` (the demand), :math:`C` the control answers so far
and :math:`c_{h,z}` those on controls of stratum :math:`h` and class :math:`z` (correct, wrong): the controls'
answers follow the items' mix, half of each class.  Among the controls an annotator may still answer, those of the
neediest (stratum, class) come first, the least answered of them first (so that every control anchors), ties in a
random order.  One annotator answers a control at most once, so a stratum with few controls is bounded by them
(the organiser's console names the strata short of controls).

Blocking (:func:`should_block`) reads the same controls.  An annotator is blocked when, under a uniform prior on
their accuracy, the posterior probability that it lies below the bar exceeds 95% (a point estimate would block good
annotators on bad luck: at accuracy 0.8, 3 of 5 right happens 20% of the time).  The bar is relative to the
crowd (:func:`blocking_bar`): on a control of stratum :math:`h` it is

.. math::

   b_h = \min\Big(t,\; \max\Big(\tfrac12,\; \frac{R_h + k\,(t + m)}{N_h + k} - m\Big)\Big)

with :math:`t` the organiser's threshold, :math:`R_h / N_h` the other (unblocked) annotators' right answers of
their answers to controls of :math:`h`, :math:`k = 10` pseudo-answers at :math:`t + m` (so that, before the crowd
has answered, the bar is :math:`t`) and the margin :math:`m = 0.1`; an annotator's bar is the mean of
:math:`b_h` over the controls they answered.  A crowd that is honest but weak on a hard relation (0.75 / 0.45:
accuracy 0.65 on its controls) is not blocked for it when its controls follow the work (above) and so are mostly
of that relation, while a spammer is still blocked on the easy ones; the bar is never above :math:`t`, and never
below chance (:math:`\tfrac12`, unless :math:`t` is): a group of annotators answering a relation's controls wrong
on purpose cannot lower the bar that would block them.
"""

from __future__ import annotations

import numpy as np


def control_order(demand, stratum, positive, answers, available, rng=None) -> np.ndarray:
    """The available controls, neediest first (module docs).

    ``demand``: per stratum ``0..H-1``, its item answers (planned or given); per control: ``stratum`` (its code),
    ``positive`` (its true class), ``answers`` (its answers so far) and ``available`` (whether this annotator may
    be offered it).  Returns the indices of the available controls in the order to offer them.
    """
    st = np.asarray(stratum, np.int64)
    z = np.asarray(positive, bool).astype(np.int64)
    n = np.asarray(answers, float)
    avail = np.flatnonzero(np.asarray(available, bool))
    if not len(avail):
        return avail
    d = np.asarray(demand, float)
    H = max(len(d), int(st.max(initial=-1)) + 1)
    d = np.concatenate([d, np.zeros(H - len(d))])
    share = d / d.sum() if d.sum() > 0 else np.full(H, 1.0 / H)
    c = np.zeros((H, 2))
    np.add.at(c, (st, z), n)
    need = share[:, None] * (n.sum() + 1) / 2 - c
    gen = np.random.default_rng(rng)
    # lexsort: the last key is the first: need (descending), then answers (ascending), then a random tie-break
    order = np.lexsort((gen.random(len(avail)), n[avail], -need[st[avail], z[avail]]))
    return avail[order]


#: the crowd's accuracy on a stratum's controls less this margin is the most an annotator is asked for there
BLOCK_MARGIN = 0.1
#: the relative bar is never below chance (unless the organiser's threshold is)
BLOCK_FLOOR = 0.5
#: pseudo-answers at ``threshold + BLOCK_MARGIN`` behind each stratum's crowd accuracy
BLOCK_PRIOR_ANSWERS = 10.0
#: posterior probability of an accuracy below the bar beyond which an annotator is blocked
BLOCK_CONFIDENCE = 0.95


def blocking_bar(own, crowd_right, crowd_answered, threshold: float) -> float:
    """An annotator's blocking bar (module docs): ``own[h]`` their answers to controls of stratum ``h``,
    ``crowd_right[h]`` / ``crowd_answered[h]`` the other unblocked annotators' right answers and answers there."""
    own = np.asarray(own, float)
    if own.sum() <= 0:
        return float(threshold)
    right, n = np.asarray(crowd_right, float), np.asarray(crowd_answered, float)
    crowd = (right + BLOCK_PRIOR_ANSWERS * (threshold + BLOCK_MARGIN)) / (n + BLOCK_PRIOR_ANSWERS)
    bar = np.minimum(threshold, np.maximum(BLOCK_FLOOR, crowd - BLOCK_MARGIN))
    return float(own @ bar / own.sum())


def should_block(correct: int, answered: int, *, bar: float, min_controls: int) -> bool:
    """Whether ``correct`` right of ``answered`` control answers put the accuracy below ``bar`` with
    :data:`BLOCK_CONFIDENCE` under a uniform prior (never on fewer than ``min_controls``)."""
    from scipy.stats import beta

    if answered < min_controls:
        return False
    return float(beta.cdf(bar, correct + 1, answered - correct + 1)) > BLOCK_CONFIDENCE
