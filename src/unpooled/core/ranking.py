"""Ranks that respect uncertainty: tie groups of systems whose intervals overlap the group leader's."""

from __future__ import annotations

import numpy as np

from .errors import InvalidInputError


def tie_groups(values, low, high) -> np.ndarray:
    """Group number (1 = best) for each system, by decreasing ``values``.

    A system joins the current group while its interval reaches the group leader's lower
    bound (``high >= leader's low``): the data cannot tell it from the leader, so they share
    a rank.  Otherwise it starts the next group.  NaN values come last, in a group of their own.

    >>> tie_groups([0.9, 0.85, 0.5], [0.8, 0.75, 0.4], [0.95, 0.9, 0.6]).tolist()
    [1, 1, 2]
    """
    v, lo, hi = (np.asarray(a, dtype=float) for a in (values, low, high))
    if not (v.shape == lo.shape == hi.shape) or v.ndim != 1:
        raise InvalidInputError("values, low, high: expected 1-d arrays of one length")
    order = np.argsort(np.where(np.isnan(v), np.inf, -v), kind="stable")
    groups = np.zeros(len(v), dtype=np.int64)
    g, leader_low = 0, None
    for i in order:
        if np.isnan(v[i]):
            groups[i] = g + 1 if leader_low is not None else 1
            continue
        if leader_low is None or not (hi[i] >= leader_low):
            g += 1
            leader_low = lo[i]
        groups[i] = g
    return groups
