"""``unpooled simulate regimes`` (core/simulate/regimes.py): the worlds, the table, and coverage where it is known."""

import numpy as np
import pytest
from scipy.stats import binomtest

from unpooled.core.errors import InvalidInputError
from unpooled.core.simulate.regimes import Cell, _world, default_cells, format_table, run_cell


def test_world_truth_and_sharing():
    rng = np.random.default_rng(0)
    cell = Cell("x", (200, 300, 100), (0.2, 0.5, 0.9), shared=0.5)
    P, members, f, missed, tp, tr, st = _world(cell, rng)
    assert not st.any()  # one stratum
    assert P.shape[0] == 3 and np.allclose(np.asarray(P.sum(1)).ravel(), 1)
    assert [len(x) for x in members] == [200, 300, 100]
    assert len(set(members[0]) & set(members[1])) > 0  # shared instances: labels are reused
    for i, x in enumerate(members):
        assert tp[i] == pytest.approx(f[x].mean())
        assert tr[i] == pytest.approx(f[x].sum() / (f.sum() + missed))
    assert missed > 0


def test_default_cells_cover_every_factor():
    names = [c.name for c in default_cells()]
    for want in ("size 5", "size 10000", "precision 0.05", "precision 0.99", "crowd 0.6", "crowd 0.95",
                 "crowd 0.8 / controls 0.9", "crowd 0.9 / controls 0.8", "2 systems", "40 systems", "300 systems",
                 "label reuse 80%", "adaptive stopping"):
        assert want in names
    assert len(next(c for c in default_cells() if c.name == "300 systems").sizes) == 300


def test_table_and_summary():
    res = run_cell(Cell("tiny", (5, 400), (0.6, 0.6), report=2, replicates=5), 3, seed=1)
    s = res.summary()
    assert s["intervals"] == 6 and set(s) >= {"p", "r", "f1", "draws"}
    assert 0 <= s["p"]["coverage"] <= 1
    text = format_table([s])
    assert text.splitlines()[1].startswith("tiny") and "coverage of the 90% intervals" in text
    # the bias's standard error is by trial: the mean over a trial's systems, then their spread over the trials
    per_trial = np.asarray(res.errors["p"]).reshape(3, 2).mean(1)
    assert s["p"]["bias_se"] == pytest.approx(per_trial.std(ddof=1) / np.sqrt(3))
    assert f"({s['p']['bias_se']:.3f})" in text.splitlines()[1]
    with pytest.raises(InvalidInputError, match="trials: expected at least 1"):
        run_cell(Cell("x", (5,), (0.5,)), 0)


def test_known_rates_cover_at_the_nominal_level():
    """With the annotators' true accuracy given, the precision intervals of a 500- and a 2,000-instance system
    hold the truth about 90% of the time (a binomial test, not a fixed threshold)."""
    res = run_cell(Cell("known", (500, 2000), (0.7, 0.6), believed=0.8, report=2), 40, seed=7)
    hits = np.asarray(res.hits["p"])
    assert binomtest(int(hits.sum()), len(hits), 0.9).pvalue > 0.001


def test_controls_answered_at_their_own_accuracy():
    """A crowd better or worse on its controls than on the items: the controls' answers follow control_accuracy."""
    from unpooled.core.simulate.regimes import _answers

    rng = np.random.default_rng(3)
    truth = np.arange(4000) % 2 == 0
    for acc in (0.6, 0.95):
        it, _, yes = _answers(np.arange(4000), truth, acc, 1 - acc, 10, rng)
        assert np.mean(yes == truth[it]) == pytest.approx(acc, abs=0.02)
    cell = next(c for c in default_cells() if c.name == "crowd 0.8 / controls 0.9")
    assert (cell.accuracy, cell.control_accuracy) == (0.8, 0.9)


def test_a_low_precision_system_s_recall_interval_reaches_its_truth():
    """Precision 0.05 beside a system of 2,000 with a crowd of 0.8: the numerator's votes often put recall at 0,
    where Wilson's interval at the exhaustive sample's size stopped short of the truth (coverage 0.82); the
    likelihood-ratio bound of the numerator reaches it (a binomial test against 0.9, not a threshold)."""
    res = run_cell(Cell("p05", (500, 2000), (0.05, 0.6), replicates=10), 60, seed=11)
    hits = np.asarray(res.hits["r"])
    assert binomtest(int(hits.sum()), len(hits), 0.9, alternative="less").pvalue > 0.001


def test_changing_world_keeps_the_output_on_kept_documents():
    from unpooled.core.simulate.regimes import CORPUS_DOCUMENTS, _changing_world

    cell = Cell("x", (100, 40), (0.5, 0.9), replaced=0.5)
    P, members, f, doc = _changing_world(cell, np.random.default_rng(0))
    assert P.shape == (4, len(f)) and np.allclose(np.asarray(P.sum(1)).ravel(), 1)
    (cur_a, cur_b, old_a, old_b), cut = members, CORPUS_DOCUMENTS // 2
    assert [len(x) for x in members] == [100, 40, 100, 40]
    for cur, old in ((cur_a, old_a), (cur_b, old_b)):
        kept = np.intersect1d(cur, old)
        assert len(kept) == len(cur) // 2 and ((doc[kept] >= cut) & (doc[kept] < CORPUS_DOCUMENTS)).all()
        assert (doc[np.setdiff1d(old, kept)] < cut).all() and (doc[np.setdiff1d(cur, kept)] >= CORPUS_DOCUMENTS).all()
    assert not set(cur_a) & set(cur_b)


def test_labels_kept_from_replaced_documents_bias_recall_unless_the_pool_follows_the_corpus():
    """Half the corpus replaced, the first period's labels reused (the crowd's accuracy told): with p0 = 1 on the
    dropped documents recall is far too low; restricted to the current documents it is not, and precision, which
    still uses every label, is the same estimate."""
    runs = {how: run_cell(Cell(how, (300, 600), (0.7, 0.6), believed=0.8, replaced=0.5, reuse=how, report=2), 8,
                          seed=5) for how in ("all", "current", "none")}
    bias = {how: float(np.mean(r.errors["r"])) for how, r in runs.items()}
    assert bias["all"] < -0.08 and abs(bias["current"]) < 0.02 and abs(bias["none"]) < 0.02
    assert runs["all"].errors["p"] == runs["current"].errors["p"]
    assert np.mean(runs["all"].hits["r"]) < 0.5 <= np.mean(runs["current"].hits["r"])
    names = [c.name for c in default_cells()]
    assert {"replaced 50% / all", "replaced 50% / current", "replaced 50% / none"} <= set(names)
    with pytest.raises(InvalidInputError, match="reuse: expected one of all, current, none"):
        run_cell(Cell("x", (50,), (0.5,), replaced=0.5, reuse="some"), 1)


def test_every_cell_can_be_named_on_the_command_line():
    """``--cells`` takes comma-separated names: no cell's name holds a comma (two type cells did)."""
    from unpooled.core.simulate.regimes import default_cells

    names = [c.name for c in default_cells()]
    assert len(set(names)) == len(names) and not [n for n in names if "," in n]
