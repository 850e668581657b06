r"""Sampling distributions :math:`p_i` over one system's instances, and :math:`p_0` weights.

The choice of :math:`p_i` *defines* the precision metric (method.md §1.3):

========== ============================================================== ==========================
level      :math:`p_i(x)`                                                 precision becomes
========== ============================================================== ==========================
instance   :math:`1/|X_i|`                                                micro precision
relation   :math:`\frac{1}{|R_i|}\frac{1}{n_i(\mathrm{pred}(x))}`         macro over predicates
entity     :math:`\frac{1}{|S_i|}\frac{1}{n_i(\mathrm{subj}(x))}`         macro over subject entities
subj-rel   :math:`\propto \frac{u_i(s)}{n_i(s)\,n_i(r)}`, normalised       the paper's final choice
fill       :math:`\frac{1}{|F_i|}\frac{1}{n_i(\mathrm{fill}(x))}`         TAC-style: every fill counts once
========== ============================================================== ==========================

with :math:`n_i(\cdot)` counts of the system's instances, :math:`R_i, S_i, F_i` its
predicates, subjects and fills, and :math:`u_i(s)` the number of distinct fills
(predicate, object) of subject :math:`s`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError, check_choice

LEVELS = ("instance", "relation", "entity", "subj-rel", "fill")


def _inverse_counts(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Per element, 1 / (number of elements sharing its key); and the number of distinct keys."""
    uniq, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return 1.0 / counts[inv], len(uniq)


def sampling_distribution(
    n: int, *, level: str = "instance", predicate=None, subject=None, fill=None
) -> np.ndarray:
    """:math:`p_i` over a system's ``n`` instances (array of length ``n``, summing to 1).

    Parameters
    ----------
    n : int
        Number of instances of the system.
    level : {'instance', 'relation', 'entity', 'subj-rel', 'fill'}
    predicate, subject, fill : array_like of int, length ``n``
        Per-instance predicate ids, subject entity ids and fill ids, as the level needs.
    """
    check_choice("level", level, LEVELS)
    if n <= 0:
        raise InvalidInputError(f"n: a system needs at least one instance, got {n}")

    def need(name, arr):
        if arr is None:
            raise InvalidInputError(f"{name}: required for level {level!r}")
        arr = np.asarray(arr)
        if arr.shape != (n,):
            raise InvalidInputError(f"{name}: expected {n} values, got shape {arr.shape}")
        return arr

    if level == "instance":
        return np.full(n, 1.0 / n)
    if level == "relation":
        inv, k = _inverse_counts(need("predicate", predicate))
        return inv / k
    if level == "entity":
        inv, k = _inverse_counts(need("subject", subject))
        return inv / k
    if level == "fill":
        inv, k = _inverse_counts(need("fill", fill))
        return inv / k
    # subj-rel: u(s) / (n(s) n(r)), normalised
    s = need("subject", subject)
    r = need("predicate", predicate)
    f = need("fill", fill)
    inv_s, _ = _inverse_counts(s)
    inv_r, _ = _inverse_counts(r)
    pairs = np.unique(np.stack([s, f]), axis=1)
    us, uc = np.unique(pairs[0], return_counts=True)
    u = uc[np.searchsorted(us, s)]
    w = u * inv_s * inv_r
    return w / w.sum()


def distribution_matrix(
    systems, n_universe: int, *, level: str = "instance", predicate=None, subject=None, fill=None
) -> sp.csr_matrix:
    """Stack every system's :math:`p_i` as the rows of a sparse ``(m, U)`` matrix.

    ``systems`` is a sequence of arrays of instance indices (into a universe of
    ``n_universe`` instances); ``predicate``, ``subject``, ``fill`` are per-universe arrays.
    """
    rows, cols, vals = [], [], []
    for i, xs in enumerate(systems):
        xs = np.asarray(xs, dtype=np.int64)
        if len(np.unique(xs)) != len(xs):
            raise InvalidInputError(f"systems[{i}]: instance indices must be unique")
        pick = (lambda a: None if a is None else np.asarray(a)[xs])
        p = sampling_distribution(len(xs), level=level, predicate=pick(predicate), subject=pick(subject),
                                  fill=pick(fill))
        rows.append(np.full(len(xs), i))
        cols.append(xs)
        vals.append(p)
    m = len(rows)
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(m, n_universe))


def p0_weights(n: int, *, level: str = "instance", fill=None, inclusion=None) -> np.ndarray:
    r"""Unnormalised weights of exhaustively found true instances for recall.

    ``level='instance'``: every true instance counts once; ``'fill'``: every true fill
    counts once (weight :math:`1/|\text{instances of its fill}|` among those found).
    ``inclusion`` (optional): each instance's document inclusion probability
    :math:`\pi_d`; the weight is divided by it (Horvitz–Thompson), so recall stays
    unbiased when documents were not sampled uniformly.
    """
    if level == "instance":
        w = np.ones(n)
    elif level == "fill":
        if fill is None:
            raise InvalidInputError("fill: required for level 'fill'")
        w, _ = _inverse_counts(np.asarray(fill))
    else:
        raise InvalidInputError(f"level: expected 'instance' or 'fill', got {level!r}")
    if inclusion is not None:
        inc = np.asarray(inclusion, dtype=float)
        if inc.shape != (n,) or np.any(inc <= 0) or np.any(inc > 1):
            raise InvalidInputError("inclusion: expected n probabilities in (0, 1]")
        w = w / inc
    return w


def draw(p: np.ndarray, n: int, *, rng) -> np.ndarray:
    """``n`` i.i.d. draws (positions into ``p``) with replacement from distribution ``p``."""
    rng = np.random.default_rng(rng)
    return rng.choice(len(p), size=n, replace=True, p=p)
