"""The command line's finish: help for every option and examples for every command, the other-format hint of
``validate``, ``submission list``'s table, the estimators figure."""

from __future__ import annotations

import argparse
import json
import shlex
import xml.etree.ElementTree as ET

import pytest

from unpooled.cli.main import EXAMPLES, build_parser, main

from ..conftest import FIXTURES

KB = FIXTURES / "kb" / "coldstart.kb"
SOURCES = FIXTURES / "kb" / "sources.xml"


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (path, parser) of the command tree, groups included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                yield from commands(sp, (*path, name))


ALL = [path for path, _ in commands(build_parser()) if path]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def help_of(capsys, path) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*path, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_the_tree_is_complete():
    names = {" ".join(p) for p in ALL}
    assert {"user add", "simulate unassessed", "simulate estimators", "submission list", "serve", "worker"} <= names
    leaves = {" ".join(p) for p, parser in commands(build_parser()) if p and not any(
        isinstance(a, argparse._SubParsersAction) for a in parser._actions)}
    assert leaves == set(EXAMPLES), "every command has its own examples, and no example names a missing command"


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_help_has_examples_option_help_and_no_doubled_percent(capsys, path):
    text = help_of(capsys, path)
    assert "%%" not in text
    assert "\nexamples:\n" in text, text
    examples = text.split("\nexamples:\n", 1)[1].splitlines()
    assert examples and all(ln.startswith("  ") and "unpooled " in ln for ln in examples if ln.strip()), examples
    parser = dict(commands(build_parser()))[path]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        assert action.help, f"unpooled {' '.join(path)}: {action.option_strings or action.dest} has no help text"


def test_top_level_help_has_no_doubled_percent(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "%%" not in capsys.readouterr().out


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_every_example_is_a_valid_command_line(key):
    for line in EXAMPLES[key]:
        cmd = line.rsplit("| ", 1)[-1].split("   (", 1)[0]  # after a pipe; without the comment in brackets
        argv = shlex.split(cmd)
        assert argv[0] == "unpooled" and " ".join(argv[1:]).startswith(key), line
        args = build_parser().parse_args(argv[1:])  # argparse exits (a failure here) on a bad line
        assert callable(args.func)


# ---------------------------------------------------------------------------- validate: the other format

@pytest.fixture
def jsonl_run(tmp_path):
    """The fixture TAC run written as JSONL (valid on the fixture corpus)."""
    from unpooled.core.kb import write_jsonl
    from unpooled.core.kb.lines import Limits

    from unpooled.cli.commands.validate import offline_corpus
    from unpooled.core.kb import read_kb

    view, schema = offline_corpus(str(SOURCES), "tac", None)
    kb, rep = read_kb(KB, view, schema, limits=Limits())
    assert rep.ok
    path = tmp_path / "good.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        write_jsonl(out, kb.entities, kb.instances)
    return path


def test_validate_says_a_jsonl_file_read_as_tac_looks_like_jsonl(capsys, jsonl_run):
    code, out, _ = run(capsys, "validate", jsonl_run, "--corpus", SOURCES, "--corpus-format", "tac")
    assert code == 0 and "UP113" not in out  # detected: fine
    code, out, _ = run(capsys, "validate", jsonl_run, "--corpus", SOURCES, "--corpus-format", "tac", "--format", "tac")
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == (f"{jsonl_run}:0:0: UP113 this file looks like JSONL (one JSON object a line), but it was read "
                        "as a TAC KB (a run id line, then tab-separated lines): the errors below may all come from that")
    assert lines[1] == ("  = help: read it as jsonl: give the format jsonl (--format jsonl), or leave the format out "
                        "to have it detected")
    code, out, _ = run(capsys, "validate", jsonl_run, "--corpus", SOURCES, "--format", "tac", "--json")
    assert json.loads(out)["errors"][0]["code"] == "UP113"


def test_validate_says_a_tac_file_read_as_jsonl_looks_like_tac(capsys, tmp_path):
    named = tmp_path / "run.jsonl"  # a TAC KB under a JSONL name: detection trusts the name
    named.write_bytes(KB.read_bytes())
    code, out, _ = run(capsys, "validate", named, "--corpus", SOURCES, "--corpus-format", "tac")
    assert code == 1 and out.splitlines()[0].endswith(
        "UP113 this file looks like a TAC KB (a run id line, then tab-separated lines), but it was read as JSONL "
        "(one JSON object a line): the errors below may all come from that")
    assert out.splitlines()[1] == "  = help: read it as tac: give the format tac (--format tac), or rename it (its " \
                                  "name says jsonl)"
    code, out, _ = run(capsys, "validate", named, "--corpus", SOURCES, "--corpus-format", "tac", "--format", "tac")
    assert code == 0 and "UP113" not in out


def test_no_hint_on_a_file_of_the_right_format(capsys, tmp_path):
    bad = tmp_path / "bad.kb"
    bad.write_text(KB.read_text().replace("per:spouse\t:Paul_Simon", "per:spouse\t:Carrie_Fisher", 1))
    code, out, _ = run(capsys, "validate", bad, "--corpus", SOURCES, "--format", "tac")
    assert code == 1 and "UP206" in out and "UP113" not in out
    garbage = tmp_path / "notes.txt"
    garbage.write_text("some notes, not a run at all\nreally\n")
    code, out, _ = run(capsys, "validate", garbage, "--corpus", SOURCES)
    assert code == 1 and "UP113" not in out  # looks like neither format: no guess


# ---------------------------------------------------------------------------- submission list

@pytest.mark.django_db
def test_submission_list_has_a_header_the_stage_and_scores(capsys, tmp_path):
    from unpooled.service.evaluations.models import Score
    from unpooled.service.submissions.models import Submission

    code, out, _ = run(capsys, "submission", "list")
    assert code == 0 and out.startswith("no submissions yet")
    run(capsys, "corpus", "load", SOURCES, "--format", "tac", "--name", "fx")
    code, out, _ = run(capsys, "submit", KB, "--corpus", "fx", "--team", "Red Lab", "--run", "r1", "--json")
    sid = json.loads(out)["submission"]
    other = tmp_path / "other.kb"
    other.write_text(KB.read_text().replace("fixture_run_1", "other_run", 1))
    code, out, err = run(capsys, "submit", other, "--corpus", "fx", "--team", "Blue", "--run", "r2", "--private")
    assert code == 0, (out, err)
    sub = Submission.objects.get(pk=sid)
    Score.objects.create(submission=sub, level="instance", estimator="joint", p=0.9, p_lo=0.85, p_hi=0.93,
                         r=0.5, r_lo=0.42, r_hi=0.61, f1=0.643, f1_lo=0.58, f1_hi=0.7)
    old = Score.objects.create(submission=sub, level="relation", estimator="joint", p=0.1, p_lo=0.0, p_hi=0.2,
                               r=0.1, r_lo=0.0, r_hi=0.2, f1=0.1, f1_lo=0.0, f1_hi=0.2)
    Score.objects.create(submission=sub, level="relation", estimator="joint", p=0.8, p_lo=0.7, p_hi=0.85,
                         r=0.4, r_lo=0.3, r_hi=0.5, f1=0.533, f1_lo=0.45, f1_hi=0.6)
    Submission.objects.filter(pk=sid).update(status="published")
    code, out, _ = run(capsys, "submission", "list")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["ID", "CORPUS", "TEAM/RUN", "INSTANCES", "STAGE", "P", "(instance)", "R", "(instance)",
                                "F1", "(instance)"]
    row = lines[1].split("  ")
    cells = [c.strip() for c in row if c.strip()]
    assert cells == [str(sid), "fx", "Red Lab/r1", "9", "scored and published", "0.900 [0.850, 0.930]",
                     "0.500 [0.420, 0.610]", "0.643 [0.580, 0.700]"], lines
    cells = [c.strip() for c in lines[2].split("  ") if c.strip()]
    assert cells[1:] == ["fx", "Blue/r2", "9", "validated and stored (private)", "-", "-", "-"], lines
    assert lines[-1].startswith("scores: the latest estimate at the instance level")
    code, out, _ = run(capsys, "submission", "list", "--level", "relation")
    assert "0.800 [0.700, 0.850]" in out and "0.100 [0.000, 0.200]" not in out  # the latest score, not an older one
    code, out, _ = run(capsys, "submission", "list", "--json")
    got = json.loads(out)[0]
    assert got["stage"] == "scored and published" and got["scores"]["relation"]["p"] == 0.8
    assert got["scores"]["instance"]["f1_hi"] == 0.7 and old.pk < Score.objects.latest("id").pk
    code, _, err = run(capsys, "submission", "list", "--corpus", "nope")
    assert code == 3 and "unknown corpus 'nope' (corpora: fx)" in err


# ---------------------------------------------------------------------------- the estimators figure

@pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")
def test_estimators_plot_shows_bias_and_coverage_of_p_r_and_f1(tmp_path, capsys):
    svg = tmp_path / "e.svg"
    code = main(["simulate", "estimators", "--trials", "4", "--seed", "2", "--labels", "40", "--exhaustive", "40",
                 "--spread", "parametric", "--plot", str(svg)])
    assert code == 0
    capsys.readouterr()
    root = ET.fromstring(svg.read_text())
    ns = {"s": "http://www.w3.org/2000/svg"}
    panels = root.findall("s:svg", ns)
    titles = [p.find("s:title", ns).text for p in panels]
    assert titles == ["P: bias and 5-95% spread", "R: bias and 5-95% spread", "F1: bias and 5-95% spread",
                      "P: coverage of 90% intervals", "R: coverage of 90% intervals", "F1: coverage of 90% intervals"]
    ids = [el.get("id") for el in root.iter() if el.get("id")]
    assert len(ids) == len(set(ids))  # each panel's title and description keep unique ids
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert texts.count("pooling") == 3 and texts.count("pooling (no interval)") == 3
    tips = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title") if t.text and t.text.startswith("pooling:")]
    assert any("mean bias" in t for t in tips)


@pytest.mark.parametrize("argv, hint", [
    (["valdate", "x"], "did you mean 'validate'?"),
    (["corpus", "lst"], "did you mean 'list'?"),
    (["evaluate", "--corpus", "c", "--crowd", "simulatd"], "did you mean 'simulated'?"),
    (["zzz"], None),
])
def test_a_typo_gets_a_did_you_mean(capsys, argv, hint):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice" in err
    assert (hint in err) if hint else "did you mean" not in err


def test_schema_show_names_each_relation_in_aligned_columns(capsys):
    code, out, _ = run(capsys, "schema", "show", "docred")
    lines = out.splitlines()
    assert code == 0 and lines[2].split() == ["RELATION", "NAME", "SUBJECT", "OBJECT", "FLAGS", "DIRECTION"]
    birth = next(ln for ln in lines if ln.split()[0] == "P569")
    assert "date of birth" in birth
    codes = [ln.split()[0] for ln in lines[3:]]
    assert codes.index("P6") < codes.index("P17") < codes.index("P569")  # by number, not as strings
    starts = {ln.index(" PER ") for ln in lines[3:] if " PER " in ln and ln.split()[0] in ("P19", "P20", "P569")}
    assert len(starts) == 1  # the subject column is aligned
