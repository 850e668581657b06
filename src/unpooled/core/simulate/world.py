r"""A synthetic evaluation world like TAC KBP 2015 Cold Start slot filling.

The world is the abstract setting of method.md §1.2 made concrete: a universe
:math:`\mathcal X` of relation instances (``U`` of them, indexed ``0..U-1``), the
correct ones :math:`\mathcal Y` (``truth``), and the predictions
:math:`X_1, \dots, X_m` of ``m`` systems grouped into teams.  Every instance
carries its subject (query) entity, predicate, fill (the (entity, predicate,
object) equivalence class: instances of one fill differ only in provenance) and
the document that holds it.

How :func:`make_world` builds it
--------------------------------
1. **Targets.** Per system a target precision :math:`P_i` and recall
   :math:`R_i`: the micro P/R of the 70 TAC KBP 2015 runs (``spread``: the
   ``pooling_bias_anydoc.tsv`` file of the paper, see :func:`load_spread`), or a
   parametric spread fitted to that file (:func:`parametric_spread`).
2. **Entities and documents.** Query entity ``e`` (rank ``k``) has weight
   :math:`w_e \propto k^{-1}` (Zipf); it is mentioned in :math:`\propto w_e`
   documents (at least one).
3. **Candidates.** Fills are drawn entity by entity (entity :math:`\propto w_e^{0.7}`),
   each with a heavy-tailed number of instances (:math:`\mathrm{Zipf}(2.3)`, at most 40 and
   the entity's documents), each instance in a different document of the
   entity.  True candidates come from true fills; false candidates are either a
   wrong provenance of a true fill (20%) or an instance of a false fill.
4. **Scores.** System ``k`` of team ``t`` scores candidate ``x``
   :math:`s_{kx} = \sqrt{a}\,G_x + \sqrt{b}\,H_{tx} + \sqrt{1-a-b}\,E_{kx}`,
   with a global easiness :math:`G_x` (half fill-level, half instance-level:
   every team finds the easy true instances and proposes the plausible false
   candidates), a team component :math:`H_{tx}` (half team x entity, e.g. the
   team's entity linker, half team x instance: the runs of a team share it, so
   they overlap heavily and the team has unique predictions) and run noise
   :math:`E_{kx}`; all standard normal.  A share ``private`` (0.57) of the true fills
   can only be found by one team (the others' scores drop by 4 standard
   deviations).  Truth found by a single team is what creates pooling bias: here
   about half of the true instances are; in TAC 2015 (anydoc, from the
   leave-team-out recall denominators) about a fifth of the true fills were.
5. **Predictions.** System ``k`` predicts its :math:`\mathrm{round}(R_k|\mathcal Y|)`
   best-scored true candidates and :math:`\mathrm{round}(R_k|\mathcal Y|(1-P_k)/P_k)`
   best-scored false ones, so it hits its targets up to rounding.  A human
   (LDC-like) "manual" run is drawn the same way (P 0.896, R 0.24, the LDC row
   of the same file) with mostly its own component; the pooling experiment puts
   it in every pool, as the paper does.
6. **Universe.** The candidate lists are cut so that the union of all
   predictions holds about ``(1 - unfound)`` of the true instances and the whole
   universe holds about ``n_instances`` instances; false candidates nobody
   predicted are dropped.  With ``unfound=0`` (the default) the truth is what the
   systems and the manual run found, as with the TAC judgements that the paper
   treats as the truth.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidInputError
from ..estimators.intervals import f1_score

# ---------------------------------------------------------------------------------------------
# Parametric spread, fitted to the micro P/R of the 70 runs in pooling_bias_anydoc.tsv
# (team = run name without KB_/SF_ and trailing digits; 18 teams of 1-9 runs).  The teams fall in
# two classes of 9 (split at a mean log R of -2): "main" teams (R 0.16-0.41) and "weak" ones
# (R 0.003-0.07, P anywhere).  Per class: team means (logit P, log R) bivariate normal
# (means, sds, correlation) and run deviations within a team (sds).
_SPREAD_CLASSES = (
    # share, mean logit P, sd, mean log R, sd, corr, run sd logit P, run sd log R
    (0.5, -0.37, 0.55, -1.41, 0.27, 0.30, 0.31, 0.18),  # main
    (0.5, -0.74, 1.67, -3.76, 1.27, 0.28, 0.78, 0.57),  # weak
)
# Team sizes: 1 + Multinomial(m - teams, shares), shares ~ Dirichlet(1.5) times 2 for main teams
# (the file: sizes 1,1,1,1,2,3,4,4,4,4,5,5,5,5,5,5,6,9; 45 runs from main teams, 25 from weak ones).
_MAIN_SIZE_RATIO = 2.0
# No run predicts more than 1.5 |Y| instances (the largest of the file, KB_UMass_IESL2: 1.08 |Y|).
_MAX_SIZE = 1.5
# The LDC (human) run of the same file: micro P 0.896, R 0.240; its score is mostly its own
# (variance shares: global easiness 0.15, own component 0.7).
_MANUAL_PR = (0.896, 0.240)
_MANUAL_SHARES = (0.15, 0.7)
# A system with target P = 0 (KB_UFV1: P = R = 0) gets this many false predictions per true instance.
_EMPTY_FALSE_PER_TRUE = 0.05

_ENTITY_ZIPF = 1.0  # document frequency of query entities ~ rank^-1
_FILLS_PER_ENTITY_EXP = 0.7  # fills of entity e ~ w_e^0.7
_FILL_ZIPF = 2.3  # instances per fill ~ Zipf(2.3), at least 1, capped
_MAX_FILL = 40
_WRONG_PROVENANCE = 0.2  # share of false candidates that are a bad provenance of a true fill
_PRIVATE_PENALTY = 4.0  # score penalty of a private true fill for every team but its owner


@dataclass(frozen=True, eq=False)  # numpy fields: compare worlds field by field
class World:
    r"""A universe of instances with their truth and the predictions of ``m`` systems.

    Attributes
    ----------
    truth : ndarray of bool, shape (U,)
        :math:`f(x)`: whether instance ``x`` is correct.
    fill, entity, predicate, doc : ndarray of int, shape (U,)
        Fill (equivalence class), subject entity, predicate and document of each instance.
    systems : tuple of ndarray of int
        Per system, the sorted unique instance indices :math:`X_i`.
    team : ndarray of int, shape (m,)
        Team id of each system (an index into ``team_names``).
    system_names, team_names : tuple of str
    manual : ndarray of int
        Sorted instance indices of a human (LDC-like) run that is not a system but joins
        every pool (method.md §4.1); may be empty.
    target_p, target_r : ndarray of float, shape (m,), or None
        The precision and recall each system was generated to have.
    """

    truth: np.ndarray
    fill: np.ndarray
    entity: np.ndarray
    predicate: np.ndarray
    doc: np.ndarray
    systems: tuple
    team: np.ndarray
    system_names: tuple
    team_names: tuple
    manual: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    target_p: np.ndarray | None = None
    target_r: np.ndarray | None = None

    def __post_init__(self) -> None:
        truth = np.asarray(self.truth, dtype=bool)
        U = truth.shape[0] if truth.ndim == 1 else -1
        if truth.ndim != 1:
            raise InvalidInputError(f"truth: expected a 1-d boolean array, got shape {truth.shape}")
        object.__setattr__(self, "truth", truth)
        for name in ("fill", "entity", "predicate", "doc"):
            a = np.asarray(getattr(self, name), dtype=np.int64)
            if a.shape != (U,):
                raise InvalidInputError(f"{name}: expected {U} integers (one per instance), got shape {a.shape}")
            object.__setattr__(self, name, a)
        systems = tuple(_index_array(s, U, f"systems[{i}]") for i, s in enumerate(self.systems))
        object.__setattr__(self, "systems", systems)
        team = np.asarray(self.team, dtype=np.int64)
        if team.shape != (len(systems),):
            raise InvalidInputError(f"team: expected {len(systems)} team ids (one per system), got shape {team.shape}")
        object.__setattr__(self, "team", team)
        if len(self.system_names) != len(systems):
            raise InvalidInputError(f"system_names: expected {len(systems)} names, got {len(self.system_names)}")
        if len(team) and (team.min() < 0 or team.max() >= len(self.team_names)):
            raise InvalidInputError(f"team: expected ids in 0..{len(self.team_names) - 1} (team_names), "
                                    f"got {team.min()}..{team.max()}")
        object.__setattr__(self, "system_names", tuple(self.system_names))
        object.__setattr__(self, "team_names", tuple(self.team_names))
        object.__setattr__(self, "manual", _index_array(self.manual, U, "manual"))

    @property
    def n_instances(self) -> int:
        """``U``, the size of the universe."""
        return int(self.truth.shape[0])

    @property
    def n_systems(self) -> int:
        return len(self.systems)

    @property
    def n_teams(self) -> int:
        return len(self.team_names)

    @property
    def n_true(self) -> int:
        r""":math:`|\mathcal Y|`."""
        return int(self.truth.sum())

    def membership(self) -> sp.csr_matrix:
        r"""The ``(m, U)`` boolean matrix :math:`g_i(x) = \mathbb I[x \in X_i]` (CSR)."""
        return _membership(self.systems, self.n_instances)

    def true_scores(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""Instance-level precision, recall and F1 of every system against the full truth.

        .. math:: P_i = \frac{|X_i\cap\mathcal Y|}{|X_i|},\qquad
                  R_i = \frac{|X_i\cap\mathcal Y|}{|\mathcal Y|},\qquad
                  F_{1,i} = \frac{2P_iR_i}{P_i+R_i}

        An empty system has :math:`P_i = 0`; with no true instance :math:`R_i = 0`;
        :math:`F_{1,i} = 0` when :math:`P_i + R_i = 0`.
        """
        hits = np.array([self.truth[s].sum() for s in self.systems], dtype=float)
        sizes = np.array([len(s) for s in self.systems], dtype=float)
        p = np.divide(hits, sizes, out=np.zeros_like(hits), where=sizes > 0)
        ny = float(self.n_true)
        r = hits / ny if ny > 0 else np.zeros_like(hits)
        return p, r, f1_score(p, r)

    def summary(self) -> dict:
        """Sizes of the world (for reports)."""
        return {"instances": self.n_instances, "true": self.n_true, "systems": self.n_systems,
                "teams": self.n_teams, "entities": len(np.unique(self.entity)),
                "fills": len(np.unique(self.fill)), "documents": len(np.unique(self.doc)),
                "manual": len(self.manual)}



def _index_array(a, U: int, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise InvalidInputError(f"{name}: expected a 1-d array of instance indices, got {a.dtype} shape {a.shape}")
    a = np.unique(a.astype(np.int64))
    if a[0] < 0 or a[-1] >= U:
        raise InvalidInputError(f"{name}: expected instance indices in 0..{U - 1}, got {a[0]}..{a[-1]}")
    return a


def _membership(systems, U: int) -> sp.csr_matrix:
    lengths = np.array([len(s) for s in systems], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate(list(systems)) if len(systems) else np.zeros(0, dtype=np.int64)
    data = np.ones(len(indices), dtype=bool)
    return sp.csr_matrix((data, indices, indptr), shape=(len(systems), U))


# ---------------------------------------------------------------------------------------------
# Spreads of per-system precision and recall


def team_of_run(run: str) -> str:
    """Team of a TAC run name: without the ``KB_``/``SF_`` prefix and the trailing run digits.

    ``SF_UGENT_IBCN1`` -> ``UGENT_IBCN``; ``SF_StaRAI20153`` -> ``StaRAI``; ``SF_IITD_20151`` -> ``IITD``.
    """
    name = re.sub(r"^(KB|SF)_", "", run)
    team = re.sub(r"\d+$", "", name).rstrip("_")
    return team or name


#: the largest tab-separated file read (the paper's are 10 kB)
MAX_TSV_BYTES = 16 * 1024 * 1024


def read_tsv(path, columns, what: str) -> list[tuple[int, dict]]:
    """``(line, row)`` of a tab-separated file with a header naming at least ``columns`` (a UTF-8 BOM and CRLF line
    ends are read as plain; quotes are characters, as the paper's files hold no quoted fields).  A file that is not
    UTF-8, larger than :data:`MAX_TSV_BYTES`, lacks a column, names one twice, or has a row with other than the
    header's number of fields raises :class:`InvalidInputError` naming ``what``, the file and the line.  ``OSError``
    if it cannot be read."""
    import io

    path = Path(os.fspath(path))
    with open(path, "rb") as fh:
        data = fh.read(MAX_TSV_BYTES + 1)
    if len(data) > MAX_TSV_BYTES:
        raise InvalidInputError(f"{what}: {path} is larger than {MAX_TSV_BYTES:,} bytes")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InvalidInputError(f"{what}: not UTF-8 at {path}:{line} (byte 0x{data[exc.start]:02x})") from None
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        header = next(reader, None) or []
        twice = next((c for k, c in enumerate(header) if c in header[:k]), None)
        if twice is not None:
            raise InvalidInputError(f"{what}: column {twice!r} twice in the header at {path}:1")
        missing = set(columns) - set(header)
        if missing:
            raise InvalidInputError(f"{what}: expected a tsv file with columns {', '.join(columns)}; "
                                    f"{path} lacks {', '.join(sorted(missing))}")
        out = []
        for row in reader:
            if not row:  # a blank line
                continue
            if len(row) != len(header):
                raise InvalidInputError(f"{what}: a row of {len(row)} fields, the header {len(header)}, at "
                                        f"{path}:{reader.line_num}")
            out.append((reader.line_num, dict(zip(header, row))))
        return out
    except csv.Error as exc:
        raise InvalidInputError(f"{what}: {exc} at {path}:{reader.line_num}") from None


def load_spread(path) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], tuple[str, ...]]:
    """Per-system micro precision and recall from a ``pooling_bias_*.tsv`` file of the paper.

    Parameters
    ----------
    path : str or path-like
        A tab-separated file with columns ``system``, ``micro-p`` and ``micro-r``
        (``paper/pooling_bias/pooling_bias_anydoc.tsv`` of the shared data).  The
        ``LDC`` row (the human run) is skipped.

    Returns
    -------
    p, r : ndarray of float, shape (m,)
    team_names : tuple of str, length m
        The team of each system (:func:`team_of_run`).
    system_names : tuple of str, length m
        Systems are sorted by name.

    Raises
    ------
    InvalidInputError
        If a column is missing, a value is not a number in [0, 1], or the file has no system.
    OSError
        If the file cannot be read.
    """
    path = Path(os.fspath(path))
    rows = []
    first: dict[str, int] = {}
    for line, row in read_tsv(path, ("system", "micro-p", "micro-r"), "spread"):
        name = row["system"].strip()
        if not name:
            raise InvalidInputError(f"spread: expected a system name, got an empty system name at {path}:{line}")
        if name in first:
            raise InvalidInputError(f"spread: system {name!r} is also on line {first[name]}, at {path}:{line}")
        first[name] = line
        if name == "LDC":
            continue
        try:
            p, r = float(row["micro-p"]), float(row["micro-r"])
        except (TypeError, ValueError):
            raise InvalidInputError(f"spread: expected numbers in micro-p and micro-r, got "
                                    f"{row['micro-p']!r}, {row['micro-r']!r} at {path}:{line}") from None
        if not (0.0 <= p <= 1.0 and 0.0 <= r <= 1.0):
            raise InvalidInputError(f"spread: expected micro-p and micro-r in [0, 1], got {p}, {r} "
                                    f"at {path}:{line}")
        rows.append((name, p, r))
    if not rows:
        raise InvalidInputError(f"spread: expected at least one system row in {path}, got none")
    rows.sort()
    names = tuple(n for n, _, _ in rows)
    return (np.array([p for _, p, _ in rows]), np.array([r for _, _, r in rows]),
            tuple(team_of_run(n) for n in names), names)


def parametric_spread(*, rng=None, n_teams: int = 18, n_systems: int = 70
                      ) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], tuple[str, ...]]:
    r"""Random per-system precision and recall like the TAC KBP 2015 runs (no data file needed).

    Teams are "main" or "weak" (probability 1/2 each, at least one main team).  Per team
    ``t``: :math:`(\operatorname{logit} P_t, \log R_t)` bivariate normal, main teams with means
    (-0.37, -1.41), sds (0.55, 0.27), weak ones (-0.74, -3.76), sds (1.67, 1.27), correlation
    about 0.3; each run adds normal noise (sds 0.31, 0.18 main; 0.78, 0.57 weak).  P is clipped
    to [0.02, 0.98] and R to [0.002, 0.5] and to at most 1.5 P (no run predicts more than
    1.5 times as many instances as there are true ones).  The constants are fitted to the 70 runs of
    ``pooling_bias_anydoc.tsv``; team sizes are :math:`1 + \mathrm{Multinomial}(m - n_t, s)`
    with shares :math:`s \propto \mathrm{Dirichlet}(1.5)`, doubled for main teams.

    Returns ``(p, r, team_names, system_names)`` like :func:`load_spread`.
    """
    rng = np.random.default_rng(rng)
    if n_teams < 1 or n_systems < n_teams:
        raise InvalidInputError(f"n_systems: expected at least n_teams ({n_teams}) >= 1 systems, got {n_systems}")
    cls = (rng.random(n_teams) >= _SPREAD_CLASSES[0][0]).astype(int)
    cls[rng.integers(n_teams)] = 0  # at least one main team
    share = rng.dirichlet(np.full(n_teams, 1.5)) * np.where(cls == 0, _MAIN_SIZE_RATIO, 1.0)
    sizes = 1 + rng.multinomial(n_systems - n_teams, share / share.sum())
    team_idx = np.repeat(np.arange(n_teams), sizes)
    lp, lr = np.empty(n_systems), np.empty(n_systems)
    for c, (_, mp, sp_, mr, sr, rho, wp, wr) in enumerate(_SPREAD_CLASSES):
        cov = np.array([[sp_ ** 2, rho * sp_ * sr], [rho * sp_ * sr, sr ** 2]])
        mu = rng.multivariate_normal([mp, mr], cov, size=n_teams)
        runs = cls[team_idx] == c
        lp[runs] = mu[team_idx[runs], 0] + rng.normal(0.0, wp, runs.sum())
        lr[runs] = mu[team_idx[runs], 1] + rng.normal(0.0, wr, runs.sum())
    p = np.clip(1.0 / (1.0 + np.exp(-lp)), 0.02, 0.98)
    r = np.minimum(np.clip(np.exp(lr), 0.002, 0.5), _MAX_SIZE * p)  # |X| = R |Y| / P <= _MAX_SIZE |Y|
    width = len(str(n_teams))
    teams = [f"team{t + 1:0{width}d}" for t in range(n_teams)]
    team_names = tuple(teams[t] for t in team_idx)
    run_no = np.concatenate([np.arange(1, s + 1) for s in sizes])
    system_names = tuple(f"{teams[t]}-{k}" for t, k in zip(team_idx, run_no))
    return p, r, team_names, system_names


def _spread_iv(spread, rng, n_teams, n_systems):
    if spread is None:
        return parametric_spread(rng=rng, n_teams=18 if n_teams is None else n_teams,
                                 n_systems=70 if n_systems is None else n_systems)
    if isinstance(spread, (str, os.PathLike)):
        spread = load_spread(spread)
    if not (isinstance(spread, tuple) and len(spread) == 4):
        raise InvalidInputError(f"spread: expected None, a path or a tuple (p, r, team_names, system_names), "
                                f"got {type(spread).__name__}")
    p, r = np.asarray(spread[0], dtype=float), np.asarray(spread[1], dtype=float)
    teams, names = tuple(spread[2]), tuple(spread[3])
    m = len(p)
    if m < 1 or r.shape != (m,) or len(teams) != m or len(names) != m:
        raise InvalidInputError(f"spread: expected p, r, team_names and system_names of one length >= 1, got "
                                f"{len(p)}, {len(r)}, {len(teams)}, {len(names)}")
    if np.any((p < 0) | (p > 1) | (r < 0) | (r > 1)) or not (np.all(np.isfinite(p)) and np.all(np.isfinite(r))):
        raise InvalidInputError("spread: expected p and r in [0, 1]")
    if n_systems is not None and n_systems != m:
        raise InvalidInputError(f"n_systems: expected None or {m} (the systems of spread), got {n_systems}")
    if n_teams is not None and n_teams != len(set(teams)):
        raise InvalidInputError(f"n_teams: expected None or {len(set(teams))} (the teams of spread), got {n_teams}")
    return p, r, teams, names


# ---------------------------------------------------------------------------------------------
# The world


def make_world(*, rng, n_entities: int = 317, n_teams: int | None = None, n_systems: int | None = None,
               n_instances: int = 11_000, spread=None, n_docs: int | None = None, n_predicates: int = 41,
               true_fraction: float = 0.12, unfound: float = 0.0, shared: float = 0.4, shared_false: float = 0.2,
               team_share: float = 0.55, private: float = 0.57, manual: bool = True) -> World:
    r"""A synthetic TAC KBP 2015-like world (see the module docstring for the construction).

    Parameters
    ----------
    rng : numpy.random.Generator or int or None
        Randomness; the same seed gives the same world.
    n_entities : int, default 317
        Query (subject) entities, with Zipf-like document frequency.
    n_teams, n_systems : int or None
        Teams and systems; ``None``: those of ``spread``, else 18 and 70.  With a
        ``spread`` they must match it.
    n_instances : int, default 11,000
        Approximate size ``U`` of the universe (the judged instances of TAC 2015: 11,008).
    spread : None, path-like or tuple
        Target precision and recall: a ``pooling_bias_*.tsv`` file (:func:`load_spread`),
        a tuple ``(p, r, team_names, system_names)``, or ``None`` for
        :func:`parametric_spread`.
    n_docs : int, optional
        Documents; default ``n_instances // 4``.
    n_predicates : int, default 41
        Predicate ids, Zipf-distributed over fills (per:title-like skew).
    true_fraction : float, default 0.12
        :math:`|\mathcal Y| / U` (TAC 2015: the anydoc micro recalls have denominator 1,296,
        against 11,008 judged instances).
    unfound : float, default 0
        Share of the true instances that no system and not the manual run predicts.
    shared, shared_false, team_share : float, default 0.4, 0.2 and 0.55
        Variance shares of the global easiness (for true and for false candidates) and of
        the team component in a system's candidate score; the rest is run noise.  More
        ``team_share``: runs of a team overlap more; more ``shared_false``: teams agree
        more on false candidates (and the universe needs more candidates).
    private : float, default 0.57
        Share of the true fills that only one team's components can find (the team is drawn
        in proportion to its best recall; every other run's score for them drops by 4
        standard deviations).  This sets the pooling bias; the default is tuned so that with
        the TAC 2015 spread the top-40 median leave-team-out bias is about 5.0 / 2.2 / 3.1
        points (P / R / F1), against 4.7 / 2.6 / 3.2 for the micro anydoc scores of TAC 2015.
    manual : bool, default True
        Add a human (LDC-like) run, ``World.manual``, that joins every pool.

    Returns
    -------
    World

    Raises
    ------
    InvalidInputError
        For sizes below 1, shares outside [0, 1] or an inconsistent ``spread``.

    Notes
    -----
    System ``k`` predicts the :math:`\mathrm{round}(R_k T)` best-scored true candidates and
    :math:`\mathrm{round}(R_k T (1-P_k)/P_k)` best-scored false ones, :math:`T = |\mathcal Y|`,
    so :math:`P_k` and :math:`R_k` are met up to rounding and the calibration of ``T``
    (a system with target :math:`P_k = 0` gets :math:`0.05\,T` false predictions).

    The universe has ``n_instances`` instances when the systems' false predictions are
    numerous enough (always with the TAC 2015 spread); with few false predictions (some
    parametric spreads) it is smaller, down to about 9,000.

    Examples
    --------
    >>> w = make_world(rng=0)
    >>> w.n_systems, w.n_teams
    (70, 18)
    """
    gen = np.random.default_rng(rng)
    _make_world_iv(n_entities=n_entities, n_instances=n_instances, n_docs=n_docs, n_predicates=n_predicates,
                   true_fraction=true_fraction, unfound=unfound, shared=shared, shared_false=shared_false,
                   team_share=team_share, private=private)
    p_t, r_t, team_names_per_sys, sys_names = _spread_iv(spread, gen, n_teams, n_systems)
    team_names = tuple(sorted(set(team_names_per_sys)))
    team = np.array([team_names.index(t) for t in team_names_per_sys], dtype=np.int64)
    m, n_t = len(p_t), len(team_names)
    n_docs = max(1, n_instances // 4) if n_docs is None else n_docs

    T = max(1, round(true_fraction * n_instances))
    n_false_target = max(0, n_instances - T)

    # rows: the m systems, then the manual run (its own "team" n_t)
    rows_team = np.concatenate([team, [n_t]]) if manual else team
    P = np.concatenate([p_t, [_MANUAL_PR[0]]]) if manual else p_t
    R = np.concatenate([r_t, [_MANUAL_PR[1]]]) if manual else r_t
    k_true = np.rint(R * T).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        k_false = np.where(P > 0, np.rint(k_true * (1 - P) / np.where(P > 0, P, 1)), 0).astype(np.int64)
    k_false[P <= 0] = max(1, round(_EMPTY_FALSE_PER_TRUE * T))
    k_true = np.minimum(k_true, T)

    # entities, their documents
    w = 1.0 / np.arange(1, n_entities + 1) ** _ENTITY_ZIPF
    w = w[gen.permutation(n_entities)]
    w /= w.sum()
    df = np.clip(np.rint(w * 1.5 * n_docs), 1, n_docs).astype(np.int64)
    doc_off = np.concatenate([[0], np.cumsum(df)])
    ent_docs = gen.integers(0, n_docs, size=doc_off[-1])
    fill_w = w ** _FILLS_PER_ENTITY_EXP
    fill_w /= fill_w.sum()
    pred_w = 1.0 / np.arange(1, n_predicates + 1)
    pred_w /= pred_w.sum()

    # candidates: true ones, false ones (a prefix of each becomes the universe)
    T_max = max(3 * T, int(k_true.max()) + 10)
    N_max = max(3 * n_false_target, int(k_false.max()) + 10)
    t_fill_ent, t_fill_size = _draw_fills(gen, T_max, fill_w, df)
    t_ent, t_fill, t_doc = _expand_fills(gen, t_fill_ent, t_fill_size, doc_off, df, ent_docs)
    perm = gen.permutation(len(t_ent))[:T_max]
    t_ent, t_fill, t_doc = t_ent[perm], t_fill[perm], t_doc[perm]
    n_tf = len(t_fill_ent)

    n_wrong = round(_WRONG_PROVENANCE * N_max)
    src = gen.integers(0, len(t_fill), size=n_wrong)  # a true fill, chosen by size
    w_fill = t_fill[src]
    w_ent = t_ent[src]
    w_doc = ent_docs[doc_off[w_ent] + gen.integers(0, df[w_ent])]
    f_fill_ent, f_fill_size = _draw_fills(gen, N_max - n_wrong, fill_w, df)
    f_ent, f_fill, f_doc = _expand_fills(gen, f_fill_ent, f_fill_size, doc_off, df, ent_docs)
    f_fill = f_fill + n_tf
    f_ent = np.concatenate([w_ent, f_ent])[: N_max]
    f_fill = np.concatenate([w_fill, f_fill])[: N_max]
    f_doc = np.concatenate([w_doc, f_doc])[: N_max]
    perm = gen.permutation(len(f_ent))
    f_ent, f_fill, f_doc = f_ent[perm], f_fill[perm], f_doc[perm]
    n_fills = n_tf + len(f_fill_ent)
    fill_pred = gen.choice(n_predicates, size=n_fills, p=pred_w)

    # latent scores
    fill_eff = gen.standard_normal(n_fills, dtype=np.float32)
    team_ent = gen.standard_normal((n_t + 1, n_entities), dtype=np.float32)
    # private true fills: only their owner team's components find them (other rows pay a penalty)
    team_r = np.array([r_t[team == t].max() for t in range(n_t)])
    owner = np.where(gen.random(n_fills) < private, gen.choice(n_t, size=n_fills, p=team_r / team_r.sum())
                     if team_r.sum() > 0 else -1, -1)
    owner[n_tf:] = -1

    def order_of(ent, fil, shared_weight, k, min_fraction):
        n = len(ent)
        a = np.array([shared_weight] * m + ([_MANUAL_SHARES[0]] if manual else []), dtype=np.float32)
        b = np.array([team_share] * m + ([_MANUAL_SHARES[1]] if manual else []), dtype=np.float32)
        c = np.clip(1.0 - a - b, 0.0, None)
        g = np.sqrt(0.5) * fill_eff[fil] + np.sqrt(0.5) * gen.standard_normal(n, dtype=np.float32)
        h = np.sqrt(0.5) * team_ent[:, ent] + np.sqrt(0.5) * gen.standard_normal((n_t + 1, n), dtype=np.float32)
        s = gen.standard_normal((len(rows_team), n), dtype=np.float32)
        s *= np.sqrt(c)[:, None]
        s += np.sqrt(a)[:, None] * g[None, :]
        s += np.sqrt(b)[:, None] * h[rows_team]
        own = owner[fil]
        if np.any(own >= 0):
            s -= _PRIVATE_PENALTY * ((own >= 0)[None, :] & (rows_team[:, None] != own[None, :]))
        return s, _top_order(s, k, min_fraction)

    t_score, t_order = order_of(t_ent, t_fill, shared, k_true, T / T_max)
    f_score, f_order = order_of(f_ent, f_fill, shared_false, k_false, n_false_target / N_max)

    # cut the candidate lists: about (1 - unfound) T true instances found, n_instances in all
    found_target = max(int(k_true.max()), round((1.0 - unfound) * T))
    nt = _calibrate(t_order, k_true, found_target, lo=int(k_true.max()), hi=T_max)
    t_order, t_sel = _final_select(t_score, t_order, k_true, nt)
    found = np.zeros(T_max, dtype=bool)
    found[t_order[t_sel]] = True
    n_found = int(found.sum())
    n_unfound = max(0, T - n_found) if unfound > 0 else 0
    rest = np.flatnonzero(~found)
    keep_t = np.concatenate([np.flatnonzero(found), rest[:n_unfound]])
    n_true = len(keep_t)
    nf = _calibrate(f_order, k_false, max(int(k_false.max()), n_instances - n_true),
                    lo=int(k_false.max()), hi=N_max)
    f_order, f_sel = _final_select(f_score, f_order, k_false, nf)
    f_used = np.zeros(N_max, dtype=bool)
    f_used[f_order[f_sel]] = True
    keep_f = np.flatnonzero(f_used)

    # the universe, sorted by (entity, fill, document, random) so the index does not reveal the truth
    ent = np.concatenate([t_ent[keep_t], f_ent[keep_f]])
    fil = np.concatenate([t_fill[keep_t], f_fill[keep_f]])
    doc = np.concatenate([t_doc[keep_t], f_doc[keep_f]])
    truth = np.concatenate([np.ones(len(keep_t), bool), np.zeros(len(keep_f), bool)])
    U = len(ent)
    order = np.lexsort((gen.random(U), doc, fil, ent))
    new_index = np.empty(U, dtype=np.int64)
    new_index[order] = np.arange(U)
    t_map = np.full(T_max, -1, dtype=np.int64)
    t_map[keep_t] = new_index[: len(keep_t)]
    f_map = np.full(N_max, -1, dtype=np.int64)
    f_map[keep_f] = new_index[len(keep_t):]

    rows = []
    for k in range(len(rows_team)):
        xs = np.concatenate([t_map[t_order[k][t_sel[k]]], f_map[f_order[k][f_sel[k]]]])
        rows.append(np.sort(xs))
    _, fill_ids = np.unique(fil[order], return_inverse=True)
    return World(
        truth=truth[order], fill=fill_ids, entity=ent[order], predicate=fill_pred[fil[order]], doc=doc[order],
        systems=tuple(rows[:m]), team=team, system_names=sys_names, team_names=team_names,
        manual=rows[m] if manual else np.zeros(0, dtype=np.int64),
        target_p=np.asarray(p_t, dtype=float), target_r=np.asarray(r_t, dtype=float),
    )


def _make_world_iv(**kw) -> None:
    for name in ("n_entities", "n_instances", "n_predicates"):
        v = kw[name]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InvalidInputError(f"{name}: expected a positive integer, got {v!r}")
    if kw["n_instances"] < 20:
        raise InvalidInputError(f"n_instances: expected at least 20, got {kw['n_instances']!r}")
    nd = kw["n_docs"]
    if nd is not None and (isinstance(nd, bool) or not isinstance(nd, (int, np.integer)) or nd < 1):
        raise InvalidInputError(f"n_docs: expected None or a positive integer, got {nd!r}")
    tf = kw["true_fraction"]
    if not (0.0 < tf < 1.0):
        raise InvalidInputError(f"true_fraction: expected a number in (0, 1), got {tf!r}")
    for name in ("unfound", "shared", "shared_false", "team_share", "private"):
        if not (0.0 <= kw[name] <= 1.0):
            raise InvalidInputError(f"{name}: expected a number in [0, 1], got {kw[name]!r}")
    if not (kw["unfound"] < 1.0):
        raise InvalidInputError(f"unfound: expected a number in [0, 1), got {kw['unfound']!r}")
    for name in ("shared", "shared_false"):
        if kw[name] + kw["team_share"] > 1.0:
            raise InvalidInputError(f"team_share: expected at most 1 - {name} = {1 - kw[name]:g}, "
                                    f"got {kw['team_share']!r}")


def _draw_fills(gen, n_instances: int, fill_w: np.ndarray, df: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fills (entity, size) until their sizes add up to ``n_instances``: entity ~ fill_w, size heavy-tailed."""
    ents, sizes, total = [], [], 0
    while total < n_instances:
        n = max(16, int((n_instances - total) / 1.5))
        e = gen.choice(len(fill_w), size=n, p=fill_w)
        s = np.minimum(np.minimum(gen.zipf(_FILL_ZIPF, size=n), _MAX_FILL), df[e])
        ents.append(e)
        sizes.append(s)
        total += int(s.sum())
    e, s = np.concatenate(ents), np.concatenate(sizes)
    cut = int(np.searchsorted(np.cumsum(s), n_instances)) + 1
    e, s = e[:cut], s[:cut].copy()
    s[-1] -= int(s.sum()) - n_instances
    return e, s


def _expand_fills(gen, fill_ent, fill_size, doc_off, df, ent_docs):
    """One instance per (fill, j < size), in document ``(start + j) mod df`` of the fill's entity."""
    fill = np.repeat(np.arange(len(fill_ent)), fill_size)
    ent = fill_ent[fill]
    start = gen.integers(0, np.iinfo(np.int64).max, size=len(fill_ent)) % df[fill_ent]
    j = np.arange(len(fill)) - np.repeat(np.cumsum(fill_size) - fill_size, fill_size)
    doc = ent_docs[doc_off[ent] + (start[fill] + j) % df[ent]]
    return ent, fill, doc


def _top_order(s: np.ndarray, k: np.ndarray, min_fraction: float) -> np.ndarray:
    """Per row, candidate indices by decreasing score, enough of them for any prefix of
    ``min_fraction`` of the candidates or more (padded with ``n``, which no prefix holds)."""
    rows, n = s.shape
    width = np.minimum(n, np.ceil(k / max(min_fraction, 1e-9) * 1.25).astype(np.int64) + 64)
    out = np.full((rows, int(width.max()) if rows else 0), n, dtype=np.int64)
    for i in range(rows):
        w = int(width[i])
        if w < n:
            top = np.argpartition(-s[i], w - 1)[:w]
            out[i, :w] = top[np.argsort(-s[i, top])]
        else:
            out[i, :w] = np.argsort(-s[i])
    return out


def _final_select(s, order, k, n):
    """The selection for prefix ``n``, recomputing with full orders if a truncated row falls short."""
    sel = _select(order, k, n)
    if np.any(sel.sum(axis=1) < np.minimum(k, n)):
        order = np.argsort(-s, axis=1)
        sel = _select(order, k, n)
    return order, sel


def _select(order: np.ndarray, k: np.ndarray, n: int) -> np.ndarray:
    """Per row, the first ``k[row]`` entries of ``order[row]`` whose candidate index is below ``n``."""
    m = order < n
    return m & (np.cumsum(m, axis=1) <= k[:, None])


def _union_size(order, k, n) -> int:
    sel = _select(order, k, n)
    return int(np.count_nonzero(np.bincount(order[sel], minlength=1)))


def _calibrate(order, k, target: int, *, lo: int, hi: int) -> int:
    """The smallest prefix length ``n`` in [lo, hi] whose union of selections reaches ``target`` (bisection)."""
    lo = max(lo, 0)
    if _union_size(order, k, hi) <= target:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _union_size(order, k, mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi
