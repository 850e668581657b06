"""Counts, seeds, budgets and trials are bounded where the options are declared (unpooled.cli.main.integer): a
negative seed or an absurd count is a usage error naming the option (exit 2), never a traceback, an allocation of
terabytes (score --bootstrap 10**12) or a run without end (simulate --trials 10**12)."""

from __future__ import annotations

import pytest

from unpooled.cli.main import build_parser, main

from ..core.test_offline import X1, X2, inst, write_jsonl

HUGE = str(10**12)
SCORE = ["score", "--labels", "L", "--submissions", "S", "--exhaustive", "E"]


def _seed_options():
    """Every ``--seed`` of every command, as (argv before the option, its required positionals/options)."""
    import argparse

    out = []

    def walk(parser, path):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    walk(sp, [*path, name])
            elif "--seed" in a.option_strings:
                out.append(" ".join(path))

    walk(build_parser(), [])
    return out


def test_every_seed_option_is_found():
    assert len(_seed_options()) >= 20  # simulate's experiments, annotate, bench, corpus analyse, evaluate, score


@pytest.mark.parametrize("command", _seed_options())
def test_a_negative_seed_is_a_usage_error(command, capsys):
    words = command.split()
    parser = build_parser()
    argv = [*words, "--seed", "-1"]
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(argv)
    assert exc.value.code == 2
    assert "argument --seed: expected an integer from 0 to" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    [*SCORE, "--bootstrap", HUGE], [*SCORE, "--bootstrap", "-1"], [*SCORE, "--replicates", HUGE],
    [*SCORE, "--exhaustive-documents", HUGE], [*SCORE, "--exhaustive-documents", "0"],
    ["simulate", "pooling-bias", "--trials", HUGE], ["simulate", "estimators", "--trials", "0"],
    ["simulate", "stopping", "--trials", HUGE], ["simulate", "ppi", "--trials", "-3"],
    ["simulate", "estimators", "--labels", HUGE], ["simulate", "estimators", "--exhaustive", HUGE],
    ["simulate", "estimators", "--bootstrap", "-1"], ["simulate", "estimators", "--bootstrap", HUGE],
    ["simulate", "estimators", "--top", HUGE], ["simulate", "pooling-bias", "--top", HUGE],
    ["simulate", "adaptive", "--systems", HUGE], ["simulate", "adaptive", "--own", HUGE],
    ["simulate", "unassessed", "--min-draws", HUGE], ["simulate", "documents", "--replicates", HUGE],
    ["simulate", "documents", "--size", HUGE], ["simulate", "protocols", "--draws", HUGE],
    ["simulate", "stopping", "--max-draws", HUGE], ["simulate", "stopping", "--batch", HUGE],
    ["corpus", "analyse", "x", "--size", HUGE], ["corpus", "analyse", "x", "--draws", HUGE],
    ["annotate", "simulate", "--corpus", "c", "--annotators", HUGE],  # 37 s, then MemoryError
    ["annotate", "simulate", "--corpus", "c", "--latency", "nan"], ["annotate", "simulate", "--corpus", "c",
                                                                    "--latency=-1"],
    ["annotate", "simulate", "--corpus", "c", "--max-answers", "-1"],
    ["annotate", "simulate", "--corpus", "c", "--accuracy", "nan"], ["annotate", "simulate", "--corpus", "c",
                                                                     "--bias", "inf"],
    ["annotate", "request", "1", "--sample", "-4"],  # a traceback from numpy
    ["annotate", "controls", "--corpus", "c", "-n", HUGE],  # one control a loop turn, without end
    ["annotate", "controls", "--corpus", "c", "-n", "-1"],
    ["evaluate", "--corpus", "c", "--controls", HUGE], ["evaluate", "--corpus", "c", "--coverage-trials", HUGE],
    ["evaluate", "--corpus", "c", "--replicates", HUGE], ["evaluate", "--corpus", "c", "--labels", HUGE],
    ["evaluate", "--corpus", "c", "--documents", HUGE], ["evaluate", "--corpus", "c", "--max-labels", HUGE],
    ["evaluate", "--corpus", "c", "--annotators", HUGE], ["evaluate", "--corpus", "c", "--accuracy", "nan"],
    ["submit", "f", "--corpus", "c", "--timeout", "nan"],  # int(nan) in the wait loop: a traceback
    ["serve", "--port", "99999"], ["serve", "--task-workers", HUGE], ["serve", "--web-workers", "0"],
    ["worker", "--slot", "-1"],
])

def test_absurd_counts_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    option, value = argv[-1].split("=") if "=" in argv[-1] else argv[-2:]
    assert f"argument {option}: expected a" in err and value in err and "from" in err


def test_score_with_a_negative_seed_end_to_end(tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_jsonl(subs / "A.jsonl", [inst(*X1, entities=("a1", "a2")), inst(*X2, entities=("a1", "a3"))])
    labels = write_jsonl(tmp_path / "L.jsonl", [{"system": "A", **inst(*X1), "label": 1}])
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*X1)])
    with pytest.raises(SystemExit) as exc:  # a traceback from numpy's generator before
        main(["score", "--labels", str(labels), "--submissions", str(subs), "--exhaustive", str(ex),
              "--bootstrap", "10", "--seed", "-1"])
    assert exc.value.code == 2 and "Traceback" not in capsys.readouterr().err


def test_a_bad_port_in_the_environment_is_a_usage_error_of_serve_only(monkeypatch, capsys):
    """UNPOOLED_PORT=abc made every command, --help too, a traceback (the default was converted at start)."""
    monkeypatch.setenv("UNPOOLED_PORT", "abc")
    parser = build_parser()
    assert parser.parse_args(["schema", "list"]).command == "schema"
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["serve"])
    assert exc.value.code == 2 and "argument --port: expected an integer, got 'abc'" in capsys.readouterr().err
