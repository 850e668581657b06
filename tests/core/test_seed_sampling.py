"""The seed's query-entity document scheme: inclusion probabilities exact by enumeration, Monte Carlo
against exact and against empirical frequencies, Horvitz–Thompson unbiasedness, input checks."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unpooled.core.errors import InvalidInputError
from unpooled.core.sampling.seed import (
    _run, mention_index, sample_seed, sample_seed_second_stage, seed_design, seed_inclusion, seed_inclusion_exact,
)

TEXTS = ["Obama visited Paris", "Paris is in France", "Obama met Merkel", "nothing here", "France and Paris",
         "Obama and France", "Paris Paris", "Merkel in Berlin", "Berlin wall", "a story"]


def enumerate_pi(design) -> np.ndarray:
    """P(d in S2 | S1) by walking every branch of stage 2 (entity order, documents drawn), exactly."""
    inc = design.incidence
    n, K, k, cap = len(design.candidates), design.n_entities, design.entity_budget, design.per_entity
    sets = [frozenset(inc.indices[inc.indptr[e]:inc.indptr[e + 1]].tolist()) for e in range(K)]
    pi = [Fraction(0)] * n

    def walk(remaining: frozenset, chosen: frozenset, p: Fraction) -> None:
        if len(chosen) >= k or not remaining:
            rest = [d for d in range(n) if d not in chosen]
            u = design.size - len(chosen)
            c = Fraction(u, len(rest)) if rest else Fraction(0)
            for d in range(n):
                pi[d] += p * (1 if d in chosen else c)
            return
        for e in remaining:
            pe = p / len(remaining)
            avail = sorted(sets[e] - chosen)
            t = min(cap, len(avail), k - len(chosen))
            if t == 0:
                walk(remaining - {e}, chosen, pe)
                continue
            subsets = list(itertools.combinations(avail, t))
            for sub in subsets:
                walk(remaining - {e}, chosen | set(sub), pe / len(subsets))

    walk(frozenset(range(K)), frozenset(), Fraction(1))
    return np.array([float(x) for x in pi])


def _design(mentions, n=10, first=(0,), size=5, per_entity=2, defensive=0.2, min_defensive=0):
    return seed_design(n, list(first), [np.array(m) for m in mentions], size=size, per_entity=per_entity,
                       defensive=defensive, min_defensive=min_defensive)


OVERLAPPING = [[1, 2, 4, 6], [2, 5], [1, 4, 5, 9], [7, 8]]


def test_mention_index_matches_token_sequences():
    idx = mention_index(TEXTS, ["Paris", ["Obama", "Merkel"], "Berlin wall", "nobody"])
    assert [m.tolist() for m in idx] == [[0, 1, 4, 6], [0, 2, 5, 7], [8], []]
    tokens = [t.lower().split() for t in TEXTS]
    assert [m.tolist() for m in mention_index(TEXTS, ["paris"], tokens=tokens)] == [[0, 1, 4, 6]]


def test_exact_formula_matches_enumeration_when_disjoint():
    d = _design([[1, 2, 3], [4], [5, 6]], size=8, per_entity=2)
    ex = seed_inclusion_exact(d)
    assert ex is not None
    assert np.allclose(ex, enumerate_pi(d), atol=1e-12)
    assert ex.sum() == pytest.approx(8)


def test_exact_is_refused_when_order_matters():
    assert seed_inclusion_exact(_design(OVERLAPPING)) is None          # overlapping sets
    assert seed_inclusion_exact(_design([[1, 2], [3, 4], [5, 6]], size=3, defensive=0)) is None   # budget binds


@pytest.mark.parametrize("mentions,size,per_entity,defensive", [
    (OVERLAPPING, 5, 2, 0.2), (OVERLAPPING, 4, 4, 0.25), ([[1, 2], [3, 4], [5, 6]], 3, 2, 0.0),
    ([[1, 2, 3, 4, 5]], 3, 4, 0.4),
])
def test_monte_carlo_matches_enumeration(mentions, size, per_entity, defensive):
    d = _design(mentions, size=size, per_entity=per_entity, defensive=defensive)
    exact = enumerate_pi(d)
    pi, se, method = seed_inclusion(d, replicates=3000, rng=7)
    assert method == "monte-carlo"
    assert np.all(np.abs(pi - exact) <= 4 * se + 1e-9)
    assert exact.sum() == pytest.approx(size)
    # Rao–Blackwellisation: far tighter than counting inclusions (binomial se)
    assert np.all(se <= np.sqrt(exact * (1 - exact) / 3000) + 1e-12)


def test_probabilities_match_empirical_inclusion_frequencies():
    d = _design(OVERLAPPING, size=5, per_entity=2, defensive=0.2)
    pi, se, _ = seed_inclusion(d, replicates=2000, rng=1)
    rng = np.random.default_rng(2)
    runs = 20000
    counts = np.zeros(len(d.candidates))
    for _ in range(runs):
        chosen, pick, _ = _run(d, rng, hazard=False)
        sample = np.concatenate([chosen, pick])
        assert len(sample) == 5 and len(set(sample.tolist())) == 5
        counts[sample] += 1
    freq = counts / runs
    tol = 4 * np.sqrt(pi * (1 - pi) / runs + se ** 2)
    assert np.all(np.abs(freq - pi) <= tol)


def test_horvitz_thompson_total_is_unbiased_given_stage_one():
    d = _design(OVERLAPPING, size=4, per_entity=2, defensive=0.25)
    pi = enumerate_pi(d)
    y = np.arange(1, len(d.candidates) + 1, dtype=float) ** 1.5
    # E[sum over S2 of y/pi] = sum y, by linearity, when every pi > 0: check every pi > 0 and the
    # expectation over the scheme's runs
    assert np.all(pi > 0)
    rng = np.random.default_rng(3)
    est = []
    for _ in range(20000):
        chosen, pick, _ = _run(d, rng, hazard=False)
        s = np.concatenate([chosen, pick])
        est.append((y[s] / pi[s]).sum())
    est = np.array(est)
    assert abs(est.mean() - y.sum()) <= 4 * est.std() / math.sqrt(len(est))


def test_without_the_defensive_part_unmentioned_documents_get_zero():
    d = _design(OVERLAPPING, size=4, defensive=0.0)
    pi = enumerate_pi(d)
    unmentioned = [j for j, doc in enumerate(d.candidates) if doc in (3,)]
    assert all(pi[j] == 0 for j in unmentioned)      # why the scheme keeps a defensive share


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(0, 14), min_size=0, max_size=6), min_size=0, max_size=6),
       st.integers(1, 10), st.integers(1, 4), st.sampled_from([0.1, 0.3, 1.0]), st.integers(0, 3),
       st.integers(0, 2 ** 31))
def test_probabilities_sum_to_the_sample_size_and_are_positive(mentions, size, per_entity, defensive, least, seed):
    d = seed_design(15, [0, 1], [np.array(m, dtype=np.int64) for m in mentions], size=size, per_entity=per_entity,
                    defensive=defensive, min_defensive=least)
    pi, se, method = seed_inclusion(d, replicates=300, rng=seed)
    assert np.all(pi > 0) and np.all(pi <= 1)
    # sum of pi is the (fixed) stage-2 size: exactly for the exact method, within Monte Carlo error otherwise
    # (sd of a sum <= sum of the sds, whatever the correlation)
    tol = 1e-9 if method == "exact" else 6 * se.sum() + 1e-9
    assert abs(pi.sum() - size) <= tol


def test_defensive_part_size():
    assert _design(OVERLAPPING, size=8, defensive=0.1).entity_budget == 7                   # ceil(0.8) = 1
    assert _design(OVERLAPPING, size=8, defensive=0.1, min_defensive=3).entity_budget == 5  # at least 3
    assert _design(OVERLAPPING, size=2, defensive=0.1, min_defensive=5).entity_budget == 0  # at most all
    assert _design(OVERLAPPING, size=8, defensive=0.0, min_defensive=5).entity_budget == 8  # 0: none at all
    d = seed_design(200, [0], [np.arange(1, 50)], size=80)                                 # the defaults
    assert d.size - d.entity_budget == 30
    assert seed_design(500, [0], [], size=200).entity_budget == 140                       # 30% of 200


def test_sample_seed_shapes_and_stage_one_weights():
    s = sample_seed(TEXTS, lambda first: ["Paris", "Obama", "France", "Merkel"], size=6, first_fraction=0.34, rng=0)
    assert len(s) == 6 and len(set(s.indices.tolist())) == 6 and s.scheme == "seed"
    assert np.all(np.diff(s.indices) > 0)
    assert np.all(s.inclusion[s.stage == 1] == 1.0) and (s.stage == 1).sum() == 2
    assert np.all((s.inclusion > 0) & (s.inclusion <= 1))
    assert s.to_dict()["inclusion_method"] in ("exact", "monte-carlo")
    again = sample_seed(TEXTS, lambda first: ["Paris", "Obama", "France", "Merkel"], size=6, first_fraction=0.34,
                        rng=0)
    assert np.array_equal(s.indices, again.indices) and np.array_equal(s.inclusion, again.inclusion)


def test_second_stage_alone():
    s2 = sample_seed_second_stage(TEXTS, [0, 3], [["Paris"], "Merkel"], size=4, rng=1)
    assert len(s2) == 4 and not {0, 3} & set(s2.indices.tolist()) and np.all(s2.stage == 2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(size=0), r"size: expected 1\.\.9"),
    (dict(size=4, per_entity=0), "per_entity: expected an integer of at least 1, got 0"),
    (dict(size=4, defensive=1.5), r"defensive: expected a share in \[0, 1\], got 1.5"),
    (dict(size=4, min_defensive=-1), "min_defensive: expected a non-negative integer, got -1"),
])
def test_seed_design_iv(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        seed_design(10, [0], [np.array([1, 2])], **kwargs)


def test_seed_iv_messages():
    with pytest.raises(InvalidInputError, match=r"first: expected indices in 0\.\.9"):
        seed_design(10, [12], [], size=2)
    with pytest.raises(InvalidInputError, match="replicates: expected an integer of at least 2, got 1"):
        seed_inclusion(_design(OVERLAPPING), replicates=1)
    with pytest.raises(InvalidInputError, match="queries: expected a name or a list of names per entity"):
        mention_index(TEXTS, [[3]])
    with pytest.raises(InvalidInputError, match=r"first_fraction: expected a share in \(0, 1\]"):
        sample_seed(TEXTS, lambda f: [], size=3, first_fraction=0)
