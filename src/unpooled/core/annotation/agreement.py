r"""Inter-annotator agreement: Fleiss' κ and Krippendorff's α (nominal), per group.

Both use only answers with positive weight and items with at least two answers.
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

import numpy as np

from .aggregation import Answers


def _table(answers: Answers, n_classes: int | None) -> np.ndarray:
    k = n_classes or answers.n_classes
    keep = answers.weights > 0
    table = np.zeros((answers.n_items, k))
    np.add.at(table, (answers.items[keep], answers.labels[keep]), 1.0)
    return table[table.sum(axis=1) >= 2]


def fleiss_kappa(answers: Answers, *, n_classes: int | None = None) -> float:
    r"""Fleiss' κ, generalised to a varying number of raters per item.

    With :math:`n_{ic}` the raters putting item *i* in class *c* and :math:`n_i = \sum_c n_{ic}`:

    .. math::
        P_i = \frac{\sum_c n_{ic}(n_{ic} - 1)}{n_i (n_i - 1)}, \quad
        \bar P = \frac{1}{N}\sum_i P_i, \quad
        p_c = \frac{\sum_i n_{ic}}{\sum_i n_i}, \quad
        \bar P_e = \sum_c p_c^2, \quad
        \kappa = \frac{\bar P - \bar P_e}{1 - \bar P_e}.

    With a constant number of raters this is Fleiss (1971), *Psychological Bulletin* 76(5):378–382.
    NaN when undefined: no item with two answers, or every answer in one class (:math:`\bar P_e = 1`).
    """
    t = _table(answers, n_classes)
    if len(t) == 0:
        return math.nan
    n = t.sum(axis=1)
    p_i = (t * (t - 1)).sum(axis=1) / (n * (n - 1))
    p_bar = p_i.mean()
    p_c = t.sum(axis=0) / n.sum()
    p_e = float((p_c ** 2).sum())
    if p_e >= 1.0 - 1e-15:
        return math.nan
    return float((p_bar - p_e) / (1 - p_e))


def krippendorff_alpha(answers: Answers, *, n_classes: int | None = None) -> float:
    r"""Krippendorff's α for nominal data with missing answers, via the coincidence matrix.

    Items with fewer than two answers are not pairable and are dropped.  With
    :math:`o_{ck} = \sum_i \frac{n_{ic}(n_{ik} - [c=k])}{n_i - 1}`, :math:`n_c = \sum_k o_{ck}`,
    :math:`n = \sum_c n_c`:

    .. math:: \alpha = 1 - (n - 1)\,\frac{\sum_{c \ne k} o_{ck}}{\sum_{c \ne k} n_c n_k}.

    NaN when every pairable answer is in one class.  Reference: K. Krippendorff,
    *Content Analysis*, 4th ed., 2018, ch. 12.
    """
    t = _table(answers, n_classes)
    if len(t) == 0:
        return math.nan
    n_i = t.sum(axis=1)
    o = np.einsum("ic,ik->ck", t / (n_i - 1)[:, None], t) - np.diag((t / (n_i - 1)[:, None]).sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    d_o = o.sum() - np.trace(o)
    d_e = n_c.sum() ** 2 - (n_c ** 2).sum()
    if d_e <= 0:
        return math.nan
    return float(1 - (n - 1) * d_o / d_e)


def agreement_by_group(answers: Answers, groups: Sequence[Hashable], *, n_classes: int | None = None) -> dict:
    """Fleiss κ and Krippendorff α per group of items (``groups[i]`` is item *i*'s group).

    Returns ``{group: {"items", "answers", "fleiss_kappa", "krippendorff_alpha"}}``.
    """
    groups = list(groups)
    k = n_classes or answers.n_classes
    out = {}
    codes = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    item_group = np.array([codes[g] for g in groups], dtype=np.int64)
    for g, code in codes.items():
        mask_items = item_group == code
        sel = mask_items[answers.items]
        sub = Answers(answers.items[sel], answers.workers[sel], answers.labels[sel], answers.weights[sel],
                      answers.item_keys, answers.worker_keys, answers.classes)
        out[g] = {"items": int(mask_items.sum()), "answers": int(sel.sum()),
                  "fleiss_kappa": fleiss_kappa(sub, n_classes=k), "krippendorff_alpha": krippendorff_alpha(sub, n_classes=k)}
    return out
