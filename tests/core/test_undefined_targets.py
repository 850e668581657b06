"""A system no labelled draw weighs (core/estimators/joint.py ``precision_linear``, ``exhaustive_recall_targets``):
its precision and F1 are undefined (NaN, not 0), and its recall is the exhaustive sample's share of its output, by
labels, by crowd votes and by the bootstrap alike."""

import warnings

import numpy as np
import pytest

from unpooled.core.estimators import estimate, make_design
from unpooled.core.estimators.noisy import crowd_votes


def _design(labelled: bool = True, overlap: bool = False):
    """Two systems over 10 instances; system 1 has no draws of its own and finds 3 of the 5 true instances (system
    0: 2 of them).  With ``overlap`` system 1 also outputs instance 0, which system 0's draws reach."""
    P = np.zeros((2, 10))
    P[0, :5] = 0.2
    P[1, 5:] = 0.2
    if overlap:
        P[1, 5:] = 0.8 / 5
        P[1, 0] = 0.2
    g0 = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]], bool)
    if labelled:
        return make_design(P, [0, 0, 0], [0, 1, 2], [1, 1, 0], g0)
    return make_design(P, [], [], [], g0)


def _votes():
    return crowd_votes(np.repeat([0, 1, 2], 3), np.tile([0, 1, 2], 3), np.repeat([1, 1, 0], 3), np.full(3, 0.8),
                       np.full(3, 0.2), n_items=10)


def _fit(d, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate(d, **kw)


@pytest.mark.parametrize("kw", [{}, {"estimator": "simple"}, {"weights": "heuristic"}, {"weights": "minvar"},
                                {"votes": "crowd"}, {"votes": "crowd", "estimator": "simple"}])
def test_no_weighed_draw_leaves_precision_undefined_and_recall_from_the_exhaustive_sample(kw):
    if kw.get("votes"):
        kw = {**kw, "votes": _votes()}
    s = _fit(_design(), **kw)
    for e in (s.p, s.f1):
        assert np.isnan([e.value[1], e.lo[1], e.hi[1]]).all()  # was 0.000 [0, 0.949]
        assert np.isfinite(e.value[0])
    assert s.r.value[1] == pytest.approx(0.6)  # 3 of 5 (was 0.000 [0, 0.351] with the joint estimator)
    assert 0 < s.r.lo[1] < 0.6 < s.r.hi[1] < 1
    assert s.r.value[0] == pytest.approx(0.4)


def test_an_empty_labels_file_gives_no_precision_and_the_exhaustive_recalls():
    s = _fit(_design(labelled=False))
    assert np.isnan(s.p.value).all() and np.isnan(s.f1.value).all()
    assert s.r.value == pytest.approx([0.4, 0.6])


def test_a_system_others_draws_weigh_keeps_its_precision_and_gets_the_exhaustive_recall():
    s = _fit(_design(overlap=True))
    assert s.p.value[1] == pytest.approx(1.0)  # instance 0, drawn by system 0, correct
    assert s.r.value[1] == pytest.approx(0.6)  # not theta * nu over system 0's pool (0.4 * 1/2)
    assert s.f1.value[1] == pytest.approx(2 * 0.6 / 1.6)
    v = _fit(_design(overlap=True), votes=_votes())
    assert v.r.value[1] == pytest.approx(0.6) and np.isfinite(v.f1.value[1])
    assert v.var_parts["votes"]["r"][1] == 0 and v.var_parts["rates"]["r"][1] == 0


def test_the_bootstrap_agrees():
    s = _fit(_design(), bootstrap=40, rng=np.random.default_rng(1))
    assert np.isnan([s.boot["p"].lo[1], s.boot["p"].hi[1], s.boot["f1"].lo[1]]).all()
    assert s.boot["r"].hi[1] > 0.5  # the exhaustive share's spread, not [0, 0]


def test_the_covariances_of_a_bare_system_from_votes_are_its_exhaustive_recalls():
    """The leaderboard's comparisons read the fit's linear parts: a bare system's recall variance from them is the
    exhaustive share's, as its standard error says (they were the pool's nu's, of a recall no longer shown)."""
    from unpooled.core.estimators.from_votes import fitted_covariances

    d = _design(overlap=True)
    s = _fit(d, votes=_votes(), linear=True)
    cov, _ = fitted_covariances(d, s.linear["linear"], s.linear["reps"], s.linear["var_votes"], 0.9)
    assert cov["r"][1, 1] == pytest.approx(s.r.se[1] ** 2)
    assert cov["f1"][1, 1] == pytest.approx(s.f1.se[1] ** 2, rel=1e-6)


def _all_wrong(n0: bool = True):
    """Two systems whose 6 labelled draws are all wrong, while the exhaustive sample (4 true instances) shows each
    finding 2 of them (labels and exhaustive file disagree; or, without ``n0``, an exhaustive sample without any
    true instance)."""
    P = np.zeros((2, 10))
    P[0, :6] = 1 / 6
    P[1, 4:] = 1 / 6
    g0 = np.array([[1, 0, 1, 0], [0, 1, 1, 0]], bool) if n0 else np.zeros((2, 0), bool)
    return make_design(P, [0, 0, 0, 1, 1, 1], [0, 1, 4, 5, 8, 9], [0, 0, 0, 0, 0, 0] if n0 else [1, 0, 1, 1, 1, 0],
                       g0)


@pytest.mark.parametrize("kw", [{}, {"weights": "heuristic"}, {"votes": "crowd"}])
def test_no_positive_draw_in_the_pool_takes_recall_from_the_exhaustive_sample(kw):
    """nu = 0/0 was taken as 0: joint recall 0.000 [0, 0.403] beside the simple estimator's 0.5."""
    if kw.get("votes"):
        f = np.zeros(10)
        items = np.array([0, 1, 4, 5, 8, 9])
        it = np.repeat(items, 3)
        kw = {"votes": crowd_votes(it, np.tile([0, 1, 2], 6), np.zeros(len(it), int), np.full(3, 0.95),
                                   np.full(3, 0.05), n_items=len(f))}
    s = _fit(_all_wrong(), **kw)
    assert s.r.value == pytest.approx([0.5, 0.5]) and (s.r.lo > 0).all()
    assert s.p.value == pytest.approx([0, 0]) and s.f1.value == pytest.approx([0, 0])


@pytest.mark.parametrize("kw", [{}, {"estimator": "simple"}, {"votes": "crowd"}, {"bootstrap": 20}])
def test_no_exhaustive_true_instance_leaves_recall_undefined(kw):
    """Recall over an exhaustive sample without a true instance is 0/0: it was published as 0.000 [0, 0.949]."""
    if kw.get("votes"):
        kw = {"votes": crowd_votes(np.repeat([0, 1, 4, 5, 8, 9], 3), np.tile([0, 1, 2], 6),
                                   np.repeat([1, 0, 1, 1, 1, 0], 3), np.full(3, 0.8), np.full(3, 0.2), n_items=10)}
    if kw.get("bootstrap"):
        kw["rng"] = np.random.default_rng(0)
    s = _fit(_all_wrong(n0=False), **kw)
    assert np.isfinite(s.p.value).all()
    for e in (s.r, s.f1):
        assert np.isnan(e.value).all() and np.isnan(e.lo).all() and np.isnan(e.hi).all()
    if s.raw is not None:
        assert np.isnan(s.raw["r"]).all() and np.isnan(s.raw["f1"]).all()
    if s.boot:
        assert np.isnan(s.boot["r"].lo).all() and np.isnan(s.boot["f1"].hi).all()
