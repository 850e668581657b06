"""``unpooled simulate estimators|adaptive``: the JSON the issue specifies, the table, the plot."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from unpooled.cli.main import main

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")


def test_estimators_json_and_plot(tmp_path, capsys):
    out, svg = tmp_path / "e.json", tmp_path / "e.svg"
    code = main(["simulate", "estimators", "--trials", "3", "--seed", "2", "--labels", "40", "--exhaustive", "40",
                 "--spread", "parametric", "--json", str(out), "--plot", str(svg)])
    assert code == 0
    table = capsys.readouterr().out
    assert "joint-balance" in table and "coverage" in table
    d = json.loads(out.read_text())
    names = [r["estimator"] for r in d["estimators"]]
    assert names == ["pooling", "simple", "joint-heuristic", "joint-balance", "joint-minvar"]
    keys = {"bias_p", "bias_r", "bias_f1", "width_p", "width_r", "width_f1", "coverage_p", "coverage_r", "coverage_f1"}
    for r in d["estimators"]:
        assert keys <= set(r)
    assert d["estimators"][0]["coverage_p"] is None  # pooling gives no interval
    assert all(0 <= r["coverage_f1"] <= 1 for r in d["estimators"][1:])
    ET.fromstring(svg.read_text())


def test_adaptive_json(tmp_path, capsys):
    out = tmp_path / "a.json"
    code = main(["simulate", "adaptive", "--trials", "2", "--systems", "6", "--own", "100", "--seed", "3",
                 "--spread", "parametric", "--json", str(out)])
    assert code == 0
    d = json.loads(out.read_text())
    lab = d["labels_by_system"]
    assert set(lab) == {"fixed", "fixed-reuse", "adaptive", "adaptive-draws"}
    assert lab["fixed"] == [100.0 * k for k in range(1, 7)]
    assert all(len(v) == 6 for v in lab.values())
    assert 0 <= d["adaptive_coverage_p_arrival"] <= 1 and 0 <= d["adaptive_coverage_p"] <= 1
    assert d["total"]["adaptive"] <= d["total"]["adaptive-draws"]  # reused labels cost nothing
    assert lab["adaptive-draws"] == sorted(lab["adaptive-draws"])  # cumulative
    out = capsys.readouterr().out
    assert "draws (range" in out and "cover the truth" in out


def test_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "estimators", "--trials", "0"])
    assert exc.value.code == 2
    assert "argument --trials: expected an integer from 1 to" in capsys.readouterr().err


def test_entities_table_and_json(tmp_path, capsys):
    out = tmp_path / "ent.json"
    code = main(["simulate", "entities", "--trials", "2", "--seed", "1", "--cells", "small-good,few-documents",
                 "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "mention_p" in text and "nil_b3_f1" in text and "cover90" in text
    data = json.loads(out.read_text())
    assert [c["cell"] for c in data["cells"]] == ["small-good", "few-documents"]
    row = data["cells"][0]["rows"][0]
    assert set(row) == {"metric", "bias_pts", "rmse_pts", "width", "coverage", "coverage_se", "defined", "intervals"}
    assert main(["simulate", "entities", "--trials", "1", "--cells", "nope"]) != 0


def test_reference_table_and_json(tmp_path, capsys):
    """``unpooled simulate reference``: the reference's and a system's precision per cell, the rates' sources."""
    out = tmp_path / "ref.json"
    code = main(["simulate", "reference", "--trials", "3", "--seed", "2", "--cells",
                 "crowd 0.9 / 60 instances,crowd 0.75 / 300 without controls", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "ref bias" in text and "rates from" in text and "dawid-skene 3" in text
    data = json.loads(out.read_text())
    assert [c["cell"] for c in data["cells"]] == ["crowd 0.9 / 60 instances", "crowd 0.75 / 300 without controls"]
    for cell in data["cells"]:
        for t in ("reference", "system"):
            assert 0 <= cell[t]["width"] <= cell[t]["width_max"] <= 1 and 0 <= cell[t]["coverage"] <= 1
            assert abs(cell[t]["bias"]) < 0.5
    assert data["cells"][0]["sources"] == {"semi": 3}
    assert main(["simulate", "reference", "--trials", "1", "--cells", "nope"]) != 0


def test_reference_trial_truth_and_routing():
    """One trial of the core experiment: the truth is each target's realised share of correct instances, and the
    estimates lie in their intervals."""
    import numpy as np

    from unpooled.core.simulate.reference import ReferenceCell, run_trial

    est, truth, source = run_trial(ReferenceCell("t", ref_size=40, draws=50, controls=40), np.random.default_rng(3))
    assert source in ("semi", "items") and set(est) == set(truth) == {"reference", "system"}
    for t, (p, lo, hi) in est.items():
        assert 0 <= lo <= p <= hi <= 1 and 0 <= truth[t] <= 1
    with pytest.raises(Exception, match="trials"):
        from unpooled.core.simulate.reference import run_cell

        run_cell(ReferenceCell("t"), 0)


def test_ranks_table_and_json(tmp_path, capsys):
    """``unpooled simulate ranks``: the paired comparison separates the issue's pair (98% shared, 2 points) where the
    marginal tie groups cannot; the JSON holds every column of the table."""
    out = tmp_path / "ranks.json"
    assert main(["simulate", "ranks", "--trials", "4", "--seed", "1", "--cells", "power ov98 d2 labels"]) == 0
    text = capsys.readouterr().out
    assert "paired right" in text and "rank cover" in text and "power ov98 d2 labels" in text
    assert main(["simulate", "ranks", "--trials", "4", "--seed", "1", "--cells", "power ov98 d2 labels",
                 "--json", str(out)]) == 0
    cell = json.loads(out.read_text())["cells"][0]
    assert cell["trials"] == 4 and cell["paired_right"] == 1.0 and cell["paired_wrong"] == 0.0
    assert cell["marginal_separate"] == 0.0 and cell["rank_coverage"] == 1.0
    assert main(["simulate", "ranks", "--trials", "1", "--cells", "nope"]) != 0


def test_ppi_table_and_json(tmp_path, capsys):
    """``unpooled simulate ppi``: PPI and labels alone per cell, with ppi_py's columns for one system."""
    out = tmp_path / "ppi.json"
    code = main(["simulate", "ppi", "--trials", "3", "--seed", "1", "--cells", "infor-5000x1-p50,adver-30x10-p95",
                 "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "PPI bias" in text and "ppi_py" in text and "infor-5000x1-p50" in text
    data = json.loads(out.read_text())
    one, many = data["cells"]
    assert one["intervals"] == 3 and many["intervals"] == 30
    assert one["oracle"]["max_diff"] < 1e-12 and "oracle" not in many
    for cell in data["cells"]:
        assert cell["ppi"]["width"] <= cell["labels"]["width"] and 0 <= cell["tuned"] <= 1
    assert main(["simulate", "ppi", "--trials", "1", "--cells", "nope"]) != 0


def test_precision_table_and_json(tmp_path, capsys):
    """``unpooled simulate precision``: per cell the bias, spread, reported standard error, coverage, width and the
    share of estimates above 1 of the label-only joint precision."""
    out = tmp_path / "precision.json"
    code = main(["simulate", "precision", "--trials", "3", "--seed", "1", "--cells",
                 "10x5000-n50-p95,1x5000-n150-p97", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "P>1" in text and "10x5000-n50-p95" in text
    many, one = json.loads(out.read_text())["cells"]
    assert many["intervals"] == 30 and one["intervals"] == 3
    for cell in (many, one):
        assert {"bias", "sd", "se", "coverage", "coverage_se", "width", "above_one"} <= set(cell)
        assert 0 <= cell["coverage"] <= 1 and 0 <= cell["above_one"] <= 1 and cell["se"] > 0
    assert main(["simulate", "precision", "--trials", "1", "--cells", "nope"]) != 0


def test_tables_name_their_world_and_say_when_the_shared_spread_is_missing(monkeypatch, capsys):
    from unpooled.cli.commands import simulate

    monkeypatch.setattr(simulate, "default_spread", lambda: None)  # as on a machine without shared/data
    code = main(["simulate", "unassessed", "--trials", "1", "--seed", "1"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "targets: built-in parametric spread" in out
    assert "was not found" in err and "parametric spread" in err
    spread = simulate.SPREAD_FILE.name
    monkeypatch.undo()
    if simulate.default_spread() is not None:  # the shared data are here: the table names the file
        assert main(["simulate", "unassessed", "--trials", "1", "--seed", "1"]) == 0
        out, err = capsys.readouterr()
        assert "targets: " in out and spread in out and "was not found" not in err
