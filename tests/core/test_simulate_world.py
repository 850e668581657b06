"""The synthetic TAC KBP 2015-like world: determinism, sizes, target fidelity, structure, validation."""

from __future__ import annotations


import numpy as np
import pytest

from unpooled.core.errors import InvalidInputError
from unpooled.core.simulate import World, load_spread, make_world, parametric_spread, team_of_run
from unpooled.core.simulate.world import f1_score

from ..conftest import SHARED_DATA

SPREAD = SHARED_DATA / "paper" / "pooling_bias" / "pooling_bias_anydoc.tsv"
needs_spread = pytest.mark.skipif(not SPREAD.is_file(), reason=f"{SPREAD} not found")


@pytest.fixture(scope="module")
def world():
    return make_world(rng=11)


@pytest.fixture(scope="module")
def tac_world():
    if not SPREAD.is_file():
        pytest.skip(f"{SPREAD} not found")
    return make_world(rng=5, spread=SPREAD)


def _same(a: World, b: World) -> bool:
    return (all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("truth", "fill", "entity", "predicate",
                                                                        "doc", "team", "manual"))
            and len(a.systems) == len(b.systems) and all(np.array_equal(x, y) for x, y in zip(a.systems, b.systems))
            and a.system_names == b.system_names and a.team_names == b.team_names)


def test_same_seed_same_world():
    assert _same(make_world(rng=3), make_world(rng=3))
    assert _same(make_world(rng=np.random.default_rng(4)), make_world(rng=np.random.default_rng(4)))
    assert not _same(make_world(rng=3), make_world(rng=4))


def test_sizes_near_targets(world):
    assert world.n_systems == 70 and world.n_teams == 18 and len(world.team) == 70
    assert 9_000 <= world.n_instances <= 11_000
    assert world.n_true == round(0.12 * 11_000)
    assert 300 <= len(np.unique(world.entity)) <= 317
    s = world.summary()
    assert s["instances"] == world.n_instances and s["manual"] == len(world.manual) > 0
    for x in world.systems:
        assert len(x) > 0 and np.all(np.diff(x) > 0) and x[0] >= 0 and x[-1] < world.n_instances


def test_achieved_precision_recall_near_targets(world):
    p, r, f = world.true_scores()
    big = np.array([len(x) for x in world.systems]) >= 50
    assert np.corrcoef(p, world.target_p)[0, 1] > 0.999
    assert np.corrcoef(r, world.target_r)[0, 1] > 0.999
    assert np.max(np.abs(p - world.target_p)[big]) < 0.01
    assert np.max(np.abs(r - world.target_r)) < 0.01
    np.testing.assert_allclose(f, f1_score(p, r))


@needs_spread
def test_tac_spread_world(tac_world):
    w = tac_world
    p_t, r_t, _teams, names = load_spread(SPREAD)
    assert w.system_names == names and w.n_teams == 18 and w.n_systems == 70
    assert abs(w.n_instances - 11_000) <= 110
    p, r, _ = w.true_scores()
    np.testing.assert_allclose(r, r_t, atol=0.001)
    sized = np.array([len(x) for x in w.systems]) >= 50
    np.testing.assert_allclose(p[sized], p_t[sized], atol=0.005)


@needs_spread
def test_load_spread_teams():
    p, r, teams, names = load_spread(SPREAD)
    assert len(p) == len(r) == len(names) == 70 and "LDC" not in names
    assert len(set(teams)) == 18
    assert dict(zip(names, teams))["SF_UGENT_IBCN1"] == "UGENT_IBCN"
    assert np.all((p >= 0) & (p <= 1) & (r >= 0) & (r <= 1))


def test_load_spread_file(tmp_path):
    f = tmp_path / "s.tsv"
    f.write_text("system\tmicro-p\tmicro-r\tother\nSF_B2\t0.5\t0.2\tx\nLDC\t0.9\t0.24\tx\nKB_A_1\t0.25\t0.1\tx\n"
                 "SF_A_2\t0.3\t0.15\tx\n")
    p, _r, teams, names = load_spread(f)
    assert names == ("KB_A_1", "SF_A_2", "SF_B2") and teams == ("A", "A", "B")
    np.testing.assert_allclose(p, [0.25, 0.3, 0.5])
    w = make_world(rng=0, spread=f, n_instances=600, n_entities=40)
    assert w.n_systems == 3 and w.team_names == ("A", "B") and list(w.team) == [0, 0, 1]
    bad = tmp_path / "bad.tsv"
    bad.write_text("system\tmicro-p\nX1\t0.5\n")
    with pytest.raises(InvalidInputError, match="lacks micro-r"):
        load_spread(bad)
    bad.write_text("system\tmicro-p\tmicro-r\nX1\t1.5\t0.1\n")
    with pytest.raises(InvalidInputError, match=r"in \[0, 1\]"):
        load_spread(bad)


@pytest.mark.parametrize("run, team", [("SF_UGENT_IBCN1", "UGENT_IBCN"), ("KB_BBN5", "BBN"),
                                       ("SF_StaRAI20153", "StaRAI"), ("SF_IITD_20151", "IITD"), ("LDC", "LDC")])
def test_team_of_run(run, team):
    assert team_of_run(run) == team


def test_parametric_spread():
    p, r, teams, names = parametric_spread(rng=1)
    assert len(p) == 70 and len(set(teams)) == 18 and len(set(names)) == 70
    assert np.all((p >= 0.02) & (p <= 0.98) & (r >= 0.002) & (r <= 0.5))
    p2, *_ = parametric_spread(rng=1)
    np.testing.assert_array_equal(p, p2)
    with pytest.raises(InvalidInputError, match="n_systems"):
        parametric_spread(rng=1, n_teams=5, n_systems=3)


def test_universe_is_predictions_plus_truth(world):
    predicted = np.zeros(world.n_instances, bool)
    for x in world.systems:
        predicted[x] = True
    predicted[world.manual] = True
    assert predicted.all()  # false instances exist only if predicted; with unfound=0 every true one is found too


def test_unfound_truth():
    w = make_world(rng=2, unfound=0.2, n_instances=3000, n_entities=100)
    predicted = np.zeros(w.n_instances, bool)
    for x in list(w.systems) + [w.manual]:
        predicted[x] = True
    assert np.all(predicted[~w.truth])
    share = np.mean(~predicted[w.truth])
    assert 0.15 <= share <= 0.25


def test_structure_heavy_tails_and_team_overlap(world):
    docs_per_entity = np.array([len(np.unique(world.doc[world.entity == e])) for e in np.unique(world.entity)])
    assert docs_per_entity.max() > 10 * np.median(docs_per_entity)
    per_fill = np.bincount(world.fill)
    assert np.median(per_fill) <= 2 and per_fill.max() >= 20
    fills_per_entity = np.array([len(np.unique(world.fill[world.entity == e])) for e in np.unique(world.entity)])
    assert fills_per_entity.max() > 8 * np.median(fills_per_entity)
    # a fill belongs to one entity and one predicate
    for key in (world.entity, world.predicate):
        assert all(len(np.unique(key[world.fill == f])) == 1 for f in range(0, per_fill.size, 97))

    def overlap(i, j):
        a, b = world.systems[i], world.systems[j]
        return len(np.intersect1d(a, b)) / min(len(a), len(b))

    pairs = [(i, j) for i in range(70) for j in range(i + 1, 70)]
    within = np.median([overlap(i, j) for i, j in pairs if world.team[i] == world.team[j]])
    across = np.median([overlap(i, j) for i, j in pairs if world.team[i] != world.team[j]])
    assert within > 0.45 and within > 1.5 * across
    # teams have unique true predictions, and different teams share some
    team_hits = np.zeros((world.n_teams, world.n_instances), bool)
    for i, x in enumerate(world.systems):
        team_hits[world.team[i], x] = True
    n_teams = team_hits.sum(axis=0)[world.truth]
    assert 0.2 < np.mean(n_teams == 1) < 0.8 and np.mean(n_teams >= 3) > 0.1


def test_membership_and_true_scores_by_hand():
    w = World(truth=[1, 0, 1, 1], fill=[0, 0, 1, 2], entity=[0, 0, 0, 1], predicate=[0, 0, 1, 1], doc=[0, 1, 0, 2],
              systems=(np.array([0, 1]), np.array([3, 2]), np.array([], dtype=int)), team=[0, 1, 1],
              system_names=("a", "b", "c"), team_names=("A", "B"))
    M = w.membership()
    assert M.shape == (3, 4) and M.dtype == bool
    np.testing.assert_array_equal(M.toarray(), [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]])
    p, r, f = w.true_scores()
    np.testing.assert_allclose(p, [0.5, 1.0, 0.0])
    np.testing.assert_allclose(r, [1 / 3, 2 / 3, 0.0])
    np.testing.assert_allclose(f, [0.4, 0.8, 0.0])
    assert w.systems[1].tolist() == [2, 3] and w.n_instances == 4 and w.n_true == 3


def test_world_validation():
    base = {"truth": [1, 0], "fill": [0, 1], "entity": [0, 0], "predicate": [0, 0], "doc": [0, 0],
            "systems": (np.array([0]),), "team": [0], "system_names": ("a",), "team_names": ("A",)}
    with pytest.raises(InvalidInputError, match="fill: expected 2 integers"):
        World(**{**base, "fill": [0]})
    with pytest.raises(InvalidInputError, match=r"systems\[0\]: expected instance indices in 0..1, got 0..5"):
        World(**{**base, "systems": (np.array([0, 5]),)})
    with pytest.raises(InvalidInputError, match="team: expected ids in 0..0"):
        World(**{**base, "team": [3]})


def test_make_world_validation(tmp_path):
    with pytest.raises(InvalidInputError, match="n_instances: expected at least 20, got 5"):
        make_world(rng=0, n_instances=5)
    with pytest.raises(InvalidInputError, match="team_share: expected at most 1 - shared"):
        make_world(rng=0, shared=0.6, team_share=0.6)
    with pytest.raises(InvalidInputError, match=r"true_fraction: expected a number in \(0, 1\), got 1.5"):
        make_world(rng=0, true_fraction=1.5)
    spread = (np.array([0.5, 0.4]), np.array([0.2, 0.1]), ("A", "B"), ("a1", "b1"))
    with pytest.raises(InvalidInputError, match="n_systems: expected None or 2"):
        make_world(rng=0, spread=spread, n_systems=70)
    with pytest.raises(InvalidInputError, match="spread: expected None, a path or a tuple"):
        make_world(rng=0, spread=[1, 2])


def test_small_world_and_zero_precision_system():
    spread = (np.array([0.5, 0.0, 0.9, 0.3]), np.array([0.3, 0.0, 0.1, 0.2]), ("A", "A", "B", "C"),
              ("a1", "a2", "b1", "c1"))
    w = make_world(rng=1, spread=spread, n_instances=400, n_entities=20)
    assert w.n_systems == 4 and w.n_teams == 3
    p, r, _ = w.true_scores()
    assert len(w.systems[1]) > 0 and p[1] == 0 and r[1] == 0  # P = R = 0 still predicts something


def test_generation_is_deterministic_per_seed():
    """The same seed gives the same world (speed: ``unpooled bench core``)."""
    a, b = make_world(rng=3), make_world(rng=3)
    assert a.summary() == b.summary()
