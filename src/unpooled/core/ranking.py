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


def competition_ranks(values, low, high) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
    """The leaderboard order and ranks of :func:`tie_groups`: ``(order, rank, group, tied)``.

    ``order`` lists the indices by group, then by decreasing value (NaN last); ``rank[i]`` is the competition
    rank of ``i`` (the first row of its group's position, 1-based: 1, =2, =2, 4), ``group[i]`` its tie group and
    ``tied[i]`` whether it shares the group.

    >>> order, rank, group, tied = competition_ranks([0.5, 0.9, 0.85], [0.4, 0.8, 0.75], [0.6, 0.95, 0.9])
    >>> order, rank.tolist(), tied.tolist()
    ([1, 2, 0], [3, 1, 1], [False, True, True])
    """
    v = np.asarray(values, dtype=float)
    group = tie_groups(v, low, high)
    size = np.bincount(group) if len(group) else np.zeros(1, np.int64)
    order = sorted(range(len(v)), key=lambda i: (group[i], -(v[i] if not np.isnan(v[i]) else -1)))
    first: dict[int, int] = {}
    for k, i in enumerate(order):
        first.setdefault(int(group[i]), k + 1)
    rank = np.array([first[int(g)] for g in group], dtype=np.int64)
    tied = np.array([size[g] > 1 for g in group], dtype=bool)
    return order, rank, group, tied
