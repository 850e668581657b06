"""``unpooled simulate pooling-bias``: table, JSON, SVG, determinism and errors.

Until ``unpooled.cli.main.build_parser`` registers the ``simulate`` module, the
``cli`` fixture adds it to the parser that ``main`` builds.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET

import pytest

import unpooled.cli.main as cli_main
from unpooled.cli.commands import simulate

from ..conftest import SHARED_DATA


@pytest.fixture
def cli(monkeypatch, capsys):
    original = cli_main.build_parser

    def build():
        parser = original()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if "simulate" not in sub.choices:
            simulate.register(sub)
        return parser

    monkeypatch.setattr(cli_main, "build_parser", build)

    def run(*argv):
        code = cli_main.main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _numbers(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "seconds"}


def test_pooling_bias_json_table_and_plot(cli, tmp_path):
    out, svg = tmp_path / "pb.json", tmp_path / "pb.svg"
    code, text, _ = cli("simulate", "pooling-bias", "--trials", 2, "--seed", 3, "--spread", "parametric",
                        "--json", out, "--plot", svg)
    assert code == 0
    d = json.loads(out.read_text())
    assert d["experiment"] == "pooling-bias" and d["trials"] == 2 and d["seed"] == 3 and d["top"] == 40
    assert d["spread"] == "parametric" and d["reference_tac2015"] is None
    for k in ("median_bias_p", "median_bias_r", "median_bias_f1", "largest_adjacent_gap_f1", "fraction_above_gap"):
        assert d[k] == pytest.approx(sum(r[k] for r in d["per_trial"]) / 2)
    assert 0 < d["median_bias_f1"] < 0.1 and [r["trial"] for r in d["per_trial"]] == [0, 1]
    assert len(d["bias_f1_by_rank"]["mean"]) == 40
    root = ET.fromstring(svg.read_text())
    assert "pooling bias" in root[0].text
    assert "median bias F1" in text and "largest adjacent gap" in text and "built-in parametric spread" in text


def test_same_seed_same_numbers_and_trials_are_independent(cli, tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    base = ("simulate", "pooling-bias", "--spread", "parametric", "--seed", 7, "--top", 20)
    assert cli(*base, "--trials", 2, "--json", a)[0] == 0
    assert cli(*base, "--trials", 2, "--json", b)[0] == 0
    assert cli(*base, "--trials", 1, "--json", c)[0] == 0
    da, db, dc = (json.loads(p.read_text()) for p in (a, b, c))
    assert _numbers(da) == _numbers(db)
    assert dc["per_trial"][0] == da["per_trial"][0]  # trial 0 does not depend on --trials


def test_json_to_stdout(cli):
    code, out, _ = cli("simulate", "pooling-bias", "--trials", 1, "--spread", "parametric", "--json", "-")
    assert code == 0 and json.loads(out)["trials"] == 1


@pytest.mark.skipif(not (SHARED_DATA / simulate.SPREAD_FILE).is_file(), reason="shared data not found")
def test_default_spread_is_the_tac_file(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("UNPOOLED_SHARED_DATA", str(SHARED_DATA))
    out = tmp_path / "pb.json"
    code, text, _ = cli("simulate", "pooling-bias", "--trials", 1, "--seed", 1, "--json", out)
    assert code == 0
    d = json.loads(out.read_text())
    assert d["spread"].endswith("pooling_bias_anydoc.tsv") and d["systems"] == 70 and d["teams"] == 18
    assert d["reference_tac2015"]["median_bias_f1"] == pytest.approx(0.0319, abs=1e-4)
    assert "TAC 2015" in text


def test_errors(cli, tmp_path):
    with pytest.raises(SystemExit) as exc:  # bounded where declared (cli.main.TRIALS): a usage error
        cli("simulate", "pooling-bias", "--trials", 0)
    assert exc.value.code == 2
    code, _, err = cli("simulate", "pooling-bias", "--spread", tmp_path / "nope.tsv")
    assert code == 3 and "nope.tsv: no such file" in err
    bad = tmp_path / "bad.tsv"
    bad.write_text("system\tprecision\nX1\t0.5\n")
    code, _, err = cli("simulate", "pooling-bias", "--trials", 1, "--spread", bad)
    assert code == 3 and "lacks micro-p, micro-r" in err
    with pytest.raises(SystemExit) as exc:
        cli("simulate", "no-such-experiment")
    assert exc.value.code == 2


def test_registry_frames_more_experiments():
    assert "pooling-bias" in simulate.EXPERIMENTS
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    simulate.register(sub)
    args = parser.parse_args(["simulate", "pooling-bias", "--trials", "3", "--spread", "parametric"])
    assert args.func is simulate.run_pooling_bias and args.trials == 3 and args.top == 40 and args.seed == 0


def test_each_experiment_offers_only_the_options_it_uses(capsys):
    """``--spread`` shapes the TAC-like world, ``--plot`` draws a chart: an experiment without either refuses the
    option as a usage error before it runs (it was accepted and silently ignored, or refused after every cell ran)."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    simulate.register(sub)
    world = {"pooling-bias", "estimators", "adaptive", "unassessed"}
    charts = {"pooling-bias", "estimators", "adaptive"}
    assert set(simulate.EXPERIMENTS) > world | charts
    for name in simulate.EXPERIMENTS:
        for option, users in (("--spread", world), ("--plot", charts)):
            value = "parametric" if option == "--spread" else "out.svg"
            if name in users:
                assert getattr(parser.parse_args(["simulate", name, option, value]), option[2:]) == value
                continue
            with pytest.raises(SystemExit) as exc:
                parser.parse_args(["simulate", name, option, value])
            assert exc.value.code == 2, (name, option)
            assert f"unrecognized arguments: {option} {value}" in capsys.readouterr().err
