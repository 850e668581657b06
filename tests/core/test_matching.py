"""Recall matching policies: exact, overlap and cluster, hand-made cases and a real Re-DocRED document."""

from __future__ import annotations

import numpy as np
import pytest

from unpooled.core import matching
from unpooled.core.errors import InvalidInputError
from unpooled.core.kb.model import instance_key
from unpooled.core.matching import (
    ClusterGold, GoldTriple, cluster_gold, match_matrix, match_multiplicity, match_universe,
)
from unpooled.core.matching import InstanceRef as R

GOLD = [
    R("d", 0, 5, "p", 10, 15),              # 0: entity object
    R("d", 0, 5, "title", -1, -1, "The  Boss"),  # 1: string value, span unknown
    R("e", 0, 5, "p", 10, 15),              # 2: another document
]


def test_exact_is_instance_key_identity():
    a = [R("d", 0, 5, "p", 10, 15), R("d", 0, 5, "title", 3, 9, "the boss")]  # value span ignored
    b = [R("d", 0, 5, "p", 10, 16), R("d", 0, 5, "title", 3, 9, "boss"), R("d", 0, 5, "q", 10, 15)]
    c = [R("d", 10, 15, "p", 0, 5)]  # reversed arguments
    M = match_matrix([a, b, c], GOLD, policy="exact")
    assert M.tolist() == [[True, True, False], [False, False, False], [False, False, False]]
    # the same as comparing instance keys
    keys = [instance_key(*g) for g in GOLD]
    assert M.tolist() == [[k in {instance_key(*x) for x in s} for k in keys] for s in (a, b, c)]
    # symmetric predicates ignore the argument order
    M = match_matrix([a, b, c], GOLD, policy="exact", symmetric={"p"})
    assert M[2].tolist() == [True, False, False]


def test_overlap_needs_both_arguments_to_intersect():
    sysA = [R("d", 4, 6, "p", 14, 30)]                  # both intersect
    sysB = [R("d", 5, 9, "p", 10, 15)]                  # subject only touches [0, 5): end-exclusive
    sysC = [R("d", 0, 5, "p", 15, 20)]                  # object touches
    sysD = [R("d", 1, 2, "q", 11, 12), R("x", 1, 2, "p", 11, 12)]  # other predicate, other document
    sysE = [R("d", 2, 3, "title", 0, 1, "the BOSS"), R("d", 9, 12, "title", 0, 1, "the boss")]
    sysF = [R("d", 2, 3, "title", 10, 15)]             # entity object vs string value: no match
    M = match_matrix([sysA, sysB, sysC, sysD, sysE, sysF], GOLD, policy="overlap")
    assert M.tolist() == [
        [True, False, False], [False, False, False], [False, False, False],
        [False, False, False], [False, True, False], [False, False, False],
    ]
    # exact matches are overlap matches
    assert (match_matrix([GOLD], GOLD, policy="overlap") >= match_matrix([GOLD], GOLD)).all()
    sym = match_matrix([[R("d", 12, 13, "p", 3, 4)]], GOLD, policy="overlap", symmetric={"p"})
    assert sym.tolist() == [[True, False, False]]


def _brute_overlap(systems, gold, sym=frozenset()):
    def inter(a, b, c, d):
        return a < d and c < b

    def hit(x, g):
        if x.doc != g.doc or x.predicate != g.predicate:
            return False
        if x.value is not None or g.value is not None:
            return (x.value is not None and g.value is not None and inter(x.s_start, x.s_end, g.s_start, g.s_end)
                    and matching.normalise_value(x.value) == matching.normalise_value(g.value))
        ok = inter(x.s_start, x.s_end, g.s_start, g.s_end) and inter(x.o_start, x.o_end, g.o_start, g.o_end)
        if not ok and x.predicate in sym:
            ok = inter(x.o_start, x.o_end, g.s_start, g.s_end) and inter(x.s_start, x.s_end, g.o_start, g.o_end)
        return ok

    return np.array([[any(hit(x, g) for x in s) for g in gold] for s in systems], dtype=bool).reshape(
        len(systems), len(gold))


def _random_refs(rng, n, n_docs=3, n_preds=2):
    out = []
    for _ in range(n):
        s = int(rng.integers(0, 40))
        o = int(rng.integers(0, 40))
        value = None if rng.random() < 0.8 else ["a b", "A  b", "c"][int(rng.integers(0, 3))]
        out.append(R(f"d{rng.integers(0, n_docs)}", s, s + int(rng.integers(1, 12)), f"p{rng.integers(0, n_preds)}",
                     o, o + int(rng.integers(1, 12)), value))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_overlap_kernel_equals_brute_force(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    gold = _random_refs(rng, 60)
    systems = [_random_refs(rng, int(rng.integers(0, 80))) for _ in range(5)]
    monkeypatch.setattr(matching, "_BLOCK", 7)  # many small blocks
    for sym in (frozenset(), frozenset({"p0"})):
        M = match_matrix(systems, gold, policy="overlap", symmetric=sym)
        assert (M == _brute_overlap(systems, gold, sym)).all()


def test_cluster_policy_hand_made():
    clusters = {("d", 0, 4): 1, ("d", 20, 24): 1, ("d", 40, 45): 2, ("d", 60, 62): 2, ("d", 70, 75): 3,
                ("d", 80, 85): frozenset({3, 4})}
    gold = [GoldTriple("d", 1, "p", 2), GoldTriple("d", 2, "p", 1), GoldTriple("d", 1, "q", 4),
            GoldTriple("d", 3, "title", None, "Mayor")]
    a = [R("d", 20, 24, "p", 60, 62)]        # other mentions of the same clusters -> (1, p, 2)
    b = [R("d", 0, 4, "p", 41, 45)]          # object span is not a gold mention -> nothing
    c = [R("d", 0, 4, "q", 80, 85)]          # span shared by clusters 3 and 4 -> (1, q, 4)
    d = [R("d", 80, 85, "title", 0, 1, " mayor")]  # string value, normalised; subject in cluster 3 (and 4)
    M = match_matrix([a, b, c, d], gold, policy="cluster", clusters=clusters)
    assert M.tolist() == [[True, False, False, False], [False] * 4, [False, False, True, False],
                          [False, False, False, True]]
    # a symmetric predicate matches both directions
    M = match_matrix([a], gold, policy="cluster", clusters=clusters, symmetric={"p"})
    assert M.tolist() == [[True, True, False, False]]


def test_cluster_policy_on_redocred(shared_data):
    from unpooled.core.corpus import iter_documents

    docs = list(iter_documents(shared_data / "redocred" / "dev_revised.json", "docred"))[:40]
    cg = cluster_gold(docs)
    assert isinstance(cg, ClusterGold) and len(cg.triples) == sum(
        len({(r.subject, r.predicate, r.object) for r in d.relations}) for d in docs)
    # a document with a relation whose head and tail both have several mentions
    doc, rel = next((d, r) for d in docs for r in d.relations
                    if len(d.entities[r.subject].mentions) > 1 and len(d.entities[r.object].mentions) > 1)
    h, t = doc.entities[rel.subject], doc.entities[rel.object]
    k = cg.triples.index(GoldTriple(doc.id, rel.subject, rel.predicate, rel.object))
    first = R(doc.id, h.mentions[0].start, h.mentions[0].end, rel.predicate, t.mentions[0].start, t.mentions[0].end)
    last = R(doc.id, h.mentions[-1].start, h.mentions[-1].end, rel.predicate, t.mentions[-1].start,
             t.mentions[-1].end)
    wrong_pred = last._replace(predicate="P0")
    reversed_args = R(doc.id, t.mentions[-1].start, t.mentions[-1].end, rel.predicate, h.mentions[-1].start,
                      h.mentions[-1].end)
    M = match_matrix([[last], [wrong_pred], [reversed_args]], cg.triples, policy="cluster", clusters=cg.clusters)
    assert M[0, k] and not M[1].any()
    # reversed arguments are the triple (t, r, h): found only if the document states it
    inverse = GoldTriple(doc.id, rel.object, rel.predicate, rel.subject)
    assert not M[2, k] and M[2].any() == (inverse in cg.triples)
    # exact matching of the same prediction against the first-mention instance fails: the point of clusters
    assert not match_matrix([[last]], [first])[0, 0]
    # a "system" stating every triple once, between first mentions, finds every triple
    everything = [R(tr.doc, *_first(docs, tr)) for tr in cg.triples]
    assert match_matrix([everything], cg.triples, policy="cluster", clusters=cg.clusters).all()


def _first(docs, tr):
    d = next(x for x in docs if x.id == tr.doc)
    a, b = d.entities[tr.subject].mentions[0], d.entities[tr.object].mentions[0]
    return a.start, a.end, tr.predicate, b.start, b.end


def test_match_universe():
    U = [R("d", 0, 5, "p", 10, 15), R("d", 1, 4, "p", 12, 14), R("d", 30, 35, "p", 40, 45),
         R("e", 0, 5, "p", 10, 15)]
    members = [np.array([0, 2]), np.array([1]), np.array([3])]
    exact = match_universe(U, members)
    assert exact.shape == (3, 4) and exact.toarray().tolist() == [
        [True, False, True, False], [False, True, False, False], [False, False, False, True]]
    ov = match_universe(U, members, policy="overlap").toarray()
    assert ov.tolist() == [[True, True, True, False], [True, True, False, False], [False, False, False, True]]
    # only some targets (the drawn instances), in the given order, repeats allowed
    sub = match_universe(U, members, policy="overlap", targets=[1, 1, 3]).toarray()
    assert (sub == ov[:, [1, 1, 3]]).all()
    # cluster: instances resolving to one triple match each other; unresolvable ones only themselves
    clusters = {("d", 0, 5): 1, ("d", 1, 4): 1, ("d", 10, 15): 2, ("d", 12, 14): 2}
    cl = match_universe(U, members, policy="cluster", clusters=clusters).toarray()
    assert cl.tolist() == [[True, True, True, False], [True, True, False, False], [False, False, False, True]]
    with pytest.raises(InvalidInputError, match="targets"):
        match_universe(U, members, targets=[4])


def test_instance_ref_keys_round_trip():
    for x in (R("doc\twith tab", 0, 5, "p", 10, 15), R("d", 0, 5, "title", -1, -1, "senator")):
        assert R.from_key(x.key) == x and x.key == instance_key(*x)
    assert R.from_key(R("d", 1, 2, "t", 7, 9, "The  Boss").key).value == "the boss"
    for bad in ("d\t0-5\tp", "d\tx-5\tp\t1-2", 3, "\t0-5\tp\t1-2"):
        with pytest.raises(InvalidInputError, match="key"):
            R.from_key(bad)


def test_invalid_arguments():
    with pytest.raises(InvalidInputError, match="policy: expected one of exact, overlap, cluster, got 'fuzzy'"):
        match_matrix([[]], GOLD, policy="fuzzy")
    with pytest.raises(InvalidInputError, match="clusters: required"):
        match_matrix([[]], [GoldTriple("d", 1, "p", 2)], policy="cluster")
    with pytest.raises(InvalidInputError, match="GoldTriple"):
        match_matrix([[GOLD[0]]], GOLD, policy="cluster", clusters={})
    with pytest.raises(InvalidInputError, match="system_instances"):
        match_matrix([[object()]], GOLD)
    # plain tuples are accepted; empty inputs give an empty matrix
    assert match_matrix([[tuple(GOLD[0])]], [tuple(g) for g in GOLD]).tolist() == [[True, False, False]]
    assert match_matrix([], GOLD).shape == (0, 3) and match_matrix([[GOLD[0]]], []).shape == (1, 0)


def test_match_multiplicity():
    U = [R("d", 0, 5, "p", 10, 15), R("d", 1, 4, "p", 12, 14), R("d", 3, 9, "p", 14, 20), R("e", 0, 5, "p", 10, 15)]
    assert match_multiplicity(U).tolist() == [1, 1, 1, 1]
    # 0 overlaps 1 and 2; 1 and 2 overlap only 0 (not transitive: [1, 4) and [3, 9) intersect, [12, 14), [14, 20) not)
    assert match_multiplicity(U, policy="overlap").tolist() == [3, 2, 2, 1]
    assert match_multiplicity(U, policy="overlap", targets=[2, 0]).tolist() == [2, 3]
    clusters = {("d", 0, 5): 1, ("d", 1, 4): 1, ("d", 10, 15): 2, ("d", 12, 14): 2}
    assert match_multiplicity(U, policy="cluster", clusters=clusters).tolist() == [2, 2, 1, 1]
    sym = [R("d", 0, 5, "p", 10, 15), R("d", 10, 15, "p", 0, 5)]
    assert match_multiplicity(sym, symmetric={"p"}).tolist() == [2, 2]


def _estimator_takes_g() -> bool:
    from inspect import signature

    from unpooled.core.estimators import make_design

    return "gs" in signature(make_design).parameters


@pytest.mark.skipif(not _estimator_takes_g(), reason="make_design has no G (policy g_i of the draws) yet")
@pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")
def test_joint_recall_with_overlap_needs_g_and_fact_weights():
    """The recipe of the module documentation: G from match_universe, p0 divided by match_multiplicity."""
    from unpooled.core.estimators import distribution_matrix, estimate, make_design

    rng = np.random.default_rng(0)
    F = 800
    gold = [R(f"d{k % 100}", 100 * (k // 100), 100 * (k // 100) + 10, "p", 100 * (k // 100) + 50,
              100 * (k // 100) + 60) for k in range(F)]
    systems, true_r = [], []
    for r in (0.7, 0.5, 0.3):
        found = rng.random(F) < r
        shift = np.where(rng.random(F) < 0.5, 0, rng.integers(1, 3, F))
        xs = [gold[k]._replace(s_start=gold[k].s_start + int(shift[k]), o_end=gold[k].o_end + int(shift[k]))
              for k in np.flatnonzero(found)]
        xs += [R(f"d{rng.integers(0, 100)}", 20000 + 10 * int(a), 20000 + 10 * int(a) + 5, "p", 0, 5)
               for a in rng.choice(10**5, 300, replace=False)]
        systems.append(xs)
        true_r.append(found.mean())
    ids: dict = {}
    members = [np.array([ids.setdefault(x, len(ids)) for x in s]) for s in systems]
    U = list(ids)
    truth = np.array([x.s_start < 20000 for x in U], float)
    P = distribution_matrix(members, len(U))
    G = match_universe(U, members, policy="overlap")
    p0 = 1.0 / match_multiplicity(U, policy="overlap")
    mixed, fixed = [], []
    for _ in range(60):
        src = np.repeat(np.arange(3), 200)
        xs = np.concatenate([rng.choice(mb, 200) for mb in members])
        g0 = match_matrix(systems, [gold[k] for k in rng.integers(0, F, 200)], policy="overlap")
        mixed.append(estimate(make_design(P, src, xs, truth[xs], g0)).r.value)
        fixed.append(estimate(make_design(P, src, xs, truth[xs], g0, p0=p0, gs=G[:, xs].toarray())).r.value)
    assert np.abs(np.mean(fixed, 0) - true_r).max() < 0.02
    assert (np.mean(mixed, 0) < np.array(true_r) - 0.05).all()  # key identity in nu: biased low
