r"""Pooling bias: a system's true score against its score on a pool it did not help build.

The leave-team-out (LTO) experiment of method.md §4.1 (after Zobel 1998).  For a
system :math:`i` of team :math:`t`:

* its **true** score uses the full truth :math:`\mathcal Y`:
  :math:`P_i = |X_i\cap\mathcal Y|/|X_i|`, :math:`R_i = |X_i\cap\mathcal Y|/|\mathcal Y|`;
* its **pooled** score uses only the judged pool :math:`J_{-t}` of every *other*
  team's runs (and the human run, ``World.manual``, unless ``manual=False``):
  an instance outside the pool counts as wrong, and recall's denominator is the
  true instances in the pool,

  .. math:: \tilde P_i = \frac{|X_i\cap\mathcal Y\cap J_{-t}|}{|X_i|},\qquad
            \tilde R_i = \frac{|X_i\cap\mathcal Y\cap J_{-t}|}{|\mathcal Y\cap J_{-t}|};

* its **bias** is true minus pooled, for P, R and :math:`F_1 = 2PR/(P+R)`, as
  **fractions** (multiply by 100 for the points of method.md).

Instances are scored one by one (instance level, like the micro scores of the
paper's ``anydoc`` files).  The paper ranks systems by true F1 and reports
medians over the top 40; the largest F1 gap between adjacently ranked systems is
the yardstick: a bias above it can reorder systems.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from .world import World, f1_score, read_tsv


def pooled_scores(world: World, pooled_systems_mask, system, *, manual: bool = True):
    r"""Score systems on the pool built from the systems in ``pooled_systems_mask``.

    Parameters
    ----------
    world : World
    pooled_systems_mask : array_like of bool, shape (m,)
        The systems whose predictions are judged (the pool :math:`J`).
    system : int or array_like of int
        The system(s) to score; they may or may not be in the pool.
    manual : bool, default True
        Add the human run ``world.manual`` to the pool.

    Returns
    -------
    p, r, f1 : float or ndarray
        :math:`\tilde P_i = |X_i\cap\mathcal Y\cap J|/|X_i|`,
        :math:`\tilde R_i = |X_i\cap\mathcal Y\cap J|/|\mathcal Y\cap J|` and their F1;
        floats for one system, arrays for several.  An empty system has
        :math:`\tilde P = 0`; a pool without true instances gives :math:`\tilde R = 0`.

    Raises
    ------
    InvalidInputError
        If the mask has the wrong shape or a system index is out of range.
    """
    judged = pool_truth(world, pooled_systems_mask, manual=manual)
    idx = np.asarray(system)
    scalar = idx.ndim == 0
    idx = np.atleast_1d(idx)
    if not np.issubdtype(idx.dtype, np.integer) or idx.ndim != 1 or np.any((idx < 0) | (idx >= world.n_systems)):
        raise InvalidInputError(f"system: expected system indices in 0..{world.n_systems - 1}, got {system!r}")
    p, r = _scores_on(world, judged, idx)
    f = f1_score(p, r)
    if scalar:
        return float(p[0]), float(r[0]), float(f[0])
    return p, r, f


def pool_truth(world: World, pooled_systems_mask, *, manual: bool = True) -> np.ndarray:
    r"""Boolean ``(U,)``: the true instances the pool knows, :math:`\mathcal Y\cap J`."""
    mask = np.asarray(pooled_systems_mask)
    if mask.shape != (world.n_systems,) or mask.dtype != bool:
        raise InvalidInputError(f"pooled_systems_mask: expected {world.n_systems} booleans (one per system), "
                                f"got {mask.dtype} shape {mask.shape}")
    pool = np.zeros(world.n_instances, dtype=bool)
    for j in np.flatnonzero(mask):
        pool[world.systems[j]] = True
    if manual:
        pool[world.manual] = True
    return pool & world.truth


def _scores_on(world: World, judged: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hits = np.array([judged[world.systems[i]].sum() for i in idx], dtype=float)
    sizes = np.array([len(world.systems[i]) for i in idx], dtype=float)
    p = np.divide(hits, sizes, out=np.zeros_like(hits), where=sizes > 0)
    ny = float(judged.sum())
    r = hits / ny if ny > 0 else np.zeros_like(hits)
    return p, r


@dataclass(frozen=True, eq=False)  # numpy fields: compare worlds field by field
class PoolingBiasResult:
    r"""Per-system true and leave-team-out pooled scores, and the summary over the top systems.

    All scores and biases are fractions in [0, 1] (bias in [-1, 1]); bias = true − pooled.

    Attributes
    ----------
    system_names : tuple of str
    team : ndarray of int, shape (m,)
    true_p, true_r, true_f1, pooled_p, pooled_r, pooled_f1 : ndarray, shape (m,)
    rank : ndarray of int, shape (m,)
        System indices from best to worst true F1 (ties keep system order).
    top : int
        How many of the best systems the summary covers.
    median_bias_p, median_bias_r, median_bias_f1 : float
        Medians of the bias over the top ``top`` systems.
    largest_adjacent_gap_f1 : float
        The largest true-F1 difference between adjacently ranked systems among the top ``top``.
    fraction_above_gap : float
        Share of the top ``top`` systems whose F1 bias exceeds ``largest_adjacent_gap_f1``.
    """

    system_names: tuple
    team: np.ndarray
    true_p: np.ndarray
    true_r: np.ndarray
    true_f1: np.ndarray
    pooled_p: np.ndarray
    pooled_r: np.ndarray
    pooled_f1: np.ndarray
    rank: np.ndarray
    top: int
    median_bias_p: float
    median_bias_r: float
    median_bias_f1: float
    largest_adjacent_gap_f1: float
    fraction_above_gap: float

    @property
    def bias_p(self) -> np.ndarray:
        return self.true_p - self.pooled_p

    @property
    def bias_r(self) -> np.ndarray:
        return self.true_r - self.pooled_r

    @property
    def bias_f1(self) -> np.ndarray:
        return self.true_f1 - self.pooled_f1

    @property
    def top_systems(self) -> np.ndarray:
        """Indices of the top ``top`` systems, best first."""
        return self.rank[: self.top]

    def to_dict(self) -> dict:
        """JSON-ready: the summary (fractions) and one row per system, best first."""
        systems = []
        for pos, i in enumerate(self.rank):
            systems.append({
                "rank": pos + 1, "system": self.system_names[i], "team": int(self.team[i]),
                "true_p": float(self.true_p[i]), "true_r": float(self.true_r[i]), "true_f1": float(self.true_f1[i]),
                "pooled_p": float(self.pooled_p[i]), "pooled_r": float(self.pooled_r[i]),
                "pooled_f1": float(self.pooled_f1[i]), "bias_p": float(self.bias_p[i]),
                "bias_r": float(self.bias_r[i]), "bias_f1": float(self.bias_f1[i]),
            })
        return {"top": self.top, "median_bias_p": self.median_bias_p, "median_bias_r": self.median_bias_r,
                "median_bias_f1": self.median_bias_f1, "largest_adjacent_gap_f1": self.largest_adjacent_gap_f1,
                "fraction_above_gap": self.fraction_above_gap, "systems": systems}


def pooling_bias(world: World, *, top: int = 40, manual: bool = True) -> PoolingBiasResult:
    r"""The leave-team-out pooling-bias experiment (method.md §4.1).

    Parameters
    ----------
    world : World
    top : int, default 40
        Summarise over the ``top`` systems by true F1 (all of them if there are fewer).
    manual : bool, default True
        Put the human run ``world.manual`` in every pool (the paper's LDC run).

    Returns
    -------
    PoolingBiasResult

    Notes
    -----
    For each team :math:`t` the pool :math:`J_{-t}` is the union of the other teams'
    runs (and the manual run); each system :math:`i` of team :math:`t` gets
    :math:`\tilde P_i, \tilde R_i` from :func:`pooled_scores` on that pool, and the
    bias :math:`P_i - \tilde P_i`, :math:`R_i - \tilde R_i`, :math:`F_{1,i} - \tilde F_{1,i}`.
    A system all of whose true predictions some other team (or the manual run) also
    made, in a world where every true instance is in some pool, has zero bias.

    References
    ----------
    .. [1] Zobel, "How reliable are the results of large-scale information retrieval
       experiments?", SIGIR 1998.
    .. [2] Chaganty et al., "Importance sampling for unbiased on-demand evaluation of
       knowledge base population", EMNLP 2017, §2 (pooling bias).
    """
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InvalidInputError(f"top: expected a positive integer, got {top!r}")
    tp, tr, tf = world.true_scores()
    m = world.n_systems
    pp, pr = np.zeros(m), np.zeros(m)
    for t in np.unique(world.team):
        own = world.team == t
        judged = pool_truth(world, ~own, manual=manual)
        idx = np.flatnonzero(own)
        pp[idx], pr[idx] = _scores_on(world, judged, idx)
    pf = f1_score(pp, pr)
    rank = np.argsort(-tf, kind="stable")
    k = min(int(top), m)
    best = rank[:k]
    gaps = -np.diff(tf[best])
    gap = float(gaps.max()) if len(gaps) else 0.0
    bf = tf - pf
    return PoolingBiasResult(
        system_names=world.system_names, team=world.team, true_p=tp, true_r=tr, true_f1=tf,
        pooled_p=pp, pooled_r=pr, pooled_f1=pf, rank=rank, top=k,
        median_bias_p=float(np.median((tp - pp)[best])), median_bias_r=float(np.median((tr - pr)[best])),
        median_bias_f1=float(np.median(bf[best])), largest_adjacent_gap_f1=gap,
        fraction_above_gap=float(np.mean(bf[best] > gap)),
    )


def reference_bias(path, *, top: int = 40, level: str = "micro") -> dict:
    r"""The observed TAC 2015 leave-team-out bias from a ``pooling_bias_*.tsv`` file of the paper.

    Parameters
    ----------
    path : str or path-like
        A file with columns ``system``, ``{level}-p``, ``{level}-r``, ``{level}-f1`` and the
        same with ``-lto`` (the ``LDC`` row is skipped).
    top : int, default 40
        Summarise over the ``top`` runs by ``{level}-f1``.
    level : {'micro', 'macro'}
        ``micro`` is the instance-level score that :func:`pooling_bias` computes.

    Returns
    -------
    dict
        ``median_bias_p``, ``median_bias_r``, ``median_bias_f1``, ``largest_adjacent_gap_f1``,
        ``fraction_above_gap`` (fractions, like :class:`PoolingBiasResult`), ``top``, ``level``,
        ``systems``.  For ``pooling_bias_anydoc.tsv``, micro: 0.0467, 0.0256, 0.0319, 0.0338, 0.425.
    """
    if level not in ("micro", "macro"):
        raise InvalidInputError(f"level: expected 'micro' or 'macro', got {level!r}")
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InvalidInputError(f"top: expected a positive integer, got {top!r}")
    cols = [f"{level}-{k}{s}" for s in ("", "-lto") for k in ("p", "r", "f1")]
    rows = []
    for line, row in read_tsv(path, ["system", *cols], "path"):
        if row["system"] == "LDC":
            continue
        try:
            rows.append([float(row[c]) for c in cols])
        except (TypeError, ValueError):
            raise InvalidInputError(f"path: expected numbers in {', '.join(cols)} at {path}:{line}") from None
    rows = np.array(rows)
    if len(rows) == 0:
        raise InvalidInputError(f"path: expected at least one system row in {path}, got none")
    p, r, f, pl, rl, fl = rows.T
    best = np.argsort(-f, kind="stable")[: min(top, len(f))]
    gaps = -np.diff(f[best])
    gap = float(gaps.max()) if len(gaps) else 0.0
    return {"level": level, "top": len(best), "systems": len(f),
            "median_bias_p": float(np.median((p - pl)[best])), "median_bias_r": float(np.median((r - rl)[best])),
            "median_bias_f1": float(np.median((f - fl)[best])), "largest_adjacent_gap_f1": gap,
            "fraction_above_gap": float(np.mean((f - fl)[best] > gap))}
