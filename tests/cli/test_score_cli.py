"""``unpooled score``: offline scoring from files (tested through a parser built with ``register``)."""

from __future__ import annotations

import argparse
import json

import pytest

from unpooled.cli.commands import score as score_cmd
from unpooled.cli.main import Exit
from unpooled.core.errors import UnpooledError
from unpooled.core.estimators import LEVELS

from ..core.test_offline import X1, X2, X3, X4, Y5, inst, write_jsonl

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")


def run(capsys, *argv) -> tuple[int, str, str]:
    """Parse with a parser holding only ``score``, and handle errors as ``unpooled.cli.main.main`` does."""
    parser = argparse.ArgumentParser(prog="unpooled")
    sub = parser.add_subparsers(dest="command")
    score_cmd.register(sub)
    args = parser.parse_args([str(a) for a in argv])
    try:
        code = int(args.func(args) or 0)
    except UnpooledError as exc:
        print(f"unpooled: error: {exc}", file=__import__("sys").stderr)
        code = Exit.ERROR
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def args(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_jsonl(subs / "A.jsonl", [inst(*X1, entities=("a1", "a2")), inst(*X2, entities=("a1", "a3")),
                                   inst(*X3, entities=("a4", None), value="Senator")])
    write_jsonl(subs / "B.jsonl", [inst(*X2, entities=("b1", "b2")), inst(*X4, entities=("b3", "b4"))])
    labels = write_jsonl(tmp_path / "L.jsonl", [
        {"system": "A", **inst(*X1), "label": 1}, {"system": "A", **inst(*X2), "label": 0},
        {"system": "A", "key": "D1\t30-35\tq\t=senator", "label": 1}, {"system": "A", **inst(*X1), "label": 1},
        {"system": "B", **inst(*X2), "label": 0}, {"system": "B", **inst(*X4), "label": 1},
    ])
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*X1), inst(X3[0], X3[1], X3[2], None, value="senator"),
                                            inst(*Y5), inst(*X4)])
    return ["score", "--labels", labels, "--submissions", subs, "--exhaustive", ex]


def test_json_rows(capsys, args):
    code, out, _ = run(capsys, *args, "--estimator", "simple", "--json")
    assert code == Exit.OK
    rows = json.loads(out)
    assert [r["system"] for r in rows] == ["A", "B"]
    assert set(rows[0]) == {"system", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "labels",
                            "estimator", "recall_protocol"}
    assert rows[0]["recall_protocol"] == "sentence"
    a = rows[0]
    # A drew x1 twice, x2 and x3: all three of its instances, so its precision is 2/3 exactly (estimators/finite.py)
    assert (a["p"], a["r"], a["f1"], a["labels"], a["estimator"]) == pytest.approx((2 / 3, 0.5, 4 / 7, 4, "simple"))
    assert a["p_lo"] <= a["p"] <= a["p_hi"]


def test_json_bootstrap_and_warnings(capsys, args):
    code, out, err = run(capsys, *args, "--json", "--bootstrap", "100", "--seed", "7", "--weights", "heuristic",
                         "--confidence", "0.8")
    rows = json.loads(out)
    assert code == 0 and rows[0]["estimator"] == "joint-heuristic"
    assert {"p_boot_lo", "p_boot_hi", "r_boot_lo", "r_boot_hi", "f1_boot_lo", "f1_boot_hi"} <= set(rows[0])
    # the same seed gives the same bootstrap bounds
    _, again, _ = run(capsys, *args, "--json", "--bootstrap", "100", "--seed", "7", "--weights", "heuristic",
                      "--confidence", "0.8")
    assert json.loads(again) == rows
    assert "unpooled: warning: A: importance weights degenerate" in err  # tiny example: few draws


def test_text_table(capsys, args):
    code, out, _ = run(capsys, *args, "--estimator", "simple", "--level", "entity", "--bootstrap", "20")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].startswith("estimator simple, level entity, match exact, recall: within-sentence: 2 systems, 6 labelled draws, "
                               "4 exhaustive true instances; intervals 90%")
    assert lines[1].split() == ["system", "P", "[90%]", "R", "[90%]", "F1", "[90%]", "labels", "ESS", "warnings"]
    assert lines[2].startswith("A ") and "0.500 [" in lines[2]
    assert "bootstrap percentile intervals (20 replicates, 90%):" in out


def test_located_findings_exit_1(capsys, args, tmp_path):
    labels = args[2]
    with labels.open("a") as fh:
        fh.write(json.dumps({"system": "B", **inst(*X1), "label": 1}) + "\n")
        fh.write(json.dumps({"system": "A", **inst(*X1), "label": 2}) + "\n")
    code, out, _ = run(capsys, *args)
    assert code == Exit.FINDINGS
    first, second = [ln for ln in out.splitlines() if ln.startswith(str(labels))][:2]
    assert first.startswith(f"{labels}:7:1: UP231 ") and "[system]" in first
    assert second.startswith(f"{labels}:8:1: UP107 ") and "[label]" in second
    assert f"{labels}: rejected: 2 error(s)" in out
    code, out, _ = run(capsys, *args, "--json")
    rep = json.loads(out)
    assert code == 1 and rep["ok"] is False
    assert [(e["line"], e["code"]) for e in rep["reports"][0]["errors"]] == [(7, "UP231"), (8, "UP107")]


def test_input_errors_exit_3(capsys, args, tmp_path):
    bad = list(args)
    bad[4] = tmp_path / "nowhere"
    code, _, err = run(capsys, *bad)
    assert code == Exit.ERROR and "nowhere: not a folder" in err
    code, out, _ = run(capsys, *args, "--match", "overlap", "--json")
    assert code == 0 and len(json.loads(out)) == 2
    code, _, err = run(capsys, *args, "--confidence", "1.5")
    assert code == Exit.ERROR and "--confidence must be in (0, 1)" in err
    code, out, _ = run(capsys, *args, "--match", "overlap", "--estimator", "simple", "--json")
    assert code == 0 and len(json.loads(out)) == 2
    with pytest.raises(SystemExit) as exc:
        run(capsys, "score", "--labels", "x")
    assert exc.value.code == 2


def test_duplicate_warnings_go_to_stderr(capsys, args):
    subs = args[4]
    with (subs / "B.jsonl").open("a") as fh:
        fh.write(json.dumps(inst(*X4, entities=("b3", "b4"))) + "\n")
    code, out, err = run(capsys, *args, "--estimator", "simple", "--json")
    assert code == 0 and len(json.loads(out)) == 2
    assert f"{subs / 'B.jsonl'}:3:1: UP209 duplicate of the instance on line 2" in err


def test_levels_match_the_core():
    assert score_cmd.LEVELS == LEVELS


def _answers_file(tmp_path, rows):
    return write_jsonl(tmp_path / "A.answers.jsonl", rows)


def test_answers_give_the_estimates_from_the_votes(capsys, args, tmp_path):
    """--answers: the labelled keys' answers (and gold controls) -> scores from the votes, in [0, 1] and inside
    their intervals, with the labelled-sample figures and the fitted rates beside them."""
    labels = [json.loads(line) for line in open(args[2])]
    keys = {}
    for lab in labels:
        key = lab.get("key") or score_cmd_key(lab)
        keys[key] = lab["label"]
    rows, t = [], 0
    for key, label in keys.items():
        t += 1
        for w, agree in (("w1", True), ("w2", True), ("w3", t % 3 != 0)):
            rows.append({"kind": "verify", "task": t, "annotator": w, "key": key,
                         "correct": bool(label) if agree else not bool(label)})
    for c in range(12):  # gold controls of both classes
        for w, agree in (("w1", True), ("w2", c % 4 != 0), ("w3", c % 3 != 0)):
            rows.append({"kind": "verify", "task": f"c{c}", "annotator": w, "control": True,
                         "gold": {"correct": c % 2 == 0}, "correct": (c % 2 == 0) if agree else (c % 2 != 0)})
    rows.append({"kind": "entities", "task": 99, "annotator": "w1", "value": {}})  # other kinds are passed over
    path = _answers_file(tmp_path, rows)
    code, out, err = run(capsys, *args, "--answers", path, "--replicates", "20", "--json")
    assert code == Exit.OK, out + err
    got = json.loads(out)
    for r in got:
        for k in ("p", "r", "f1"):
            assert 0 <= r[f"{k}_lo"] <= r[k] <= r[f"{k}_hi"] <= 1
        assert set(r["sample"]) == {"p", "r", "f1"} and r["crowd_rates"]["source"] == "semi"
    code, out, _ = run(capsys, *args, "--answers", path, "--replicates", "20")
    assert code == Exit.OK and "from the votes: annotators' error rates by semi" in out


def score_cmd_key(lab):
    from unpooled.core.diagnostics import Report
    from unpooled.core.offline_files import _ref_or_key

    return _ref_or_key(lab, Report(path="x"), 1, "")[1]


def test_answers_file_problems_are_located(capsys, args, tmp_path):
    path = _answers_file(tmp_path, [
        {"task": 1, "annotator": "w1", "key": "D1\t0-5\tp\t10-15", "correct": "yes"},
        {"task": 2, "annotator": "w1", "correct": True},
        {"task": 3, "annotator": "w1", "control": True, "correct": True},
    ])
    code, out, _ = run(capsys, *args, "--answers", path)
    assert code == Exit.FINDINGS
    assert ":1:" in out and "'correct' must be true or false" in out
    assert ":2:" in out and "'key' (the instance answered about)" in out
    assert ":3:" in out and "gold control's 'gold'" in out


def _confident_files(tmp_path, *, conf_of=None):
    """Two overlapping systems of 300 instances, 80 labelled draws each, confidences that follow correctness."""
    import numpy as np

    rng = np.random.default_rng(4)
    U = 450
    correct = rng.random(U) < 0.6
    conf = np.clip(np.where(correct, rng.beta(4, 2, U), rng.beta(2, 4, U)), 0.01, 1.0).round(4)
    conf_of = conf_of or (lambda u: float(conf[u]))
    x = [("D%d" % (u // 50), (u % 50 * 10, u % 50 * 10 + 3), "p", (u % 50 * 10 + 5, u % 50 * 10 + 8)) for u in range(U)]
    members = {"A": np.arange(0, 300), "B": np.arange(150, 450)}
    subs = tmp_path / "subs"
    subs.mkdir(parents=True)
    for name, ms in members.items():
        write_jsonl(subs / f"{name}.jsonl", [{**inst(*x[u], entities=(f"e{u}", f"f{u}")), "confidence": conf_of(u)}
                                             for u in ms])
    labels = []
    for name, ms in members.items():
        for u in rng.choice(ms, 80):
            labels.append({"system": name, **inst(*x[u]), "label": int(correct[u])})
    lab = write_jsonl(tmp_path / "L.jsonl", labels)
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*x[u]) for u in np.flatnonzero(correct)[:40]])
    return ["score", "--labels", lab, "--submissions", subs, "--exhaustive", ex]


def test_prediction_powered_precision_is_shown_beside(capsys, tmp_path):
    args = _confident_files(tmp_path)
    code, out, _ = run(capsys, *args, "--json")
    assert code == Exit.OK
    rows = json.loads(out)
    for r in rows:
        q = r["ppi"]
        assert q["method"] == "ppi++" and q["used"] is False and q["ppi_lambda"] > 0
        assert q["p_ppi_lo"] <= q["p_ppi"] <= q["p_ppi_hi"]
        assert q["p_ppi_hi"] - q["p_ppi_lo"] < r["p_hi"] - r["p_lo"]  # informative confidences: narrower
    code, text, _ = run(capsys, *args)
    assert code == Exit.OK and "prediction-powered precision (PPI++" in text and "not used" in text
    assert "A: P_ppi " in text and "against labels alone " in text and "% narrower" in text


def test_prediction_powered_precision_absent_without_confidences_and_bad_ones_located(capsys, tmp_path):
    code, out, _ = run(capsys, *_confident_files(tmp_path / "one", conf_of=lambda u: 1.0), "--json")
    assert code == Exit.OK and all("ppi" not in r for r in json.loads(out))
    code, out, _ = run(capsys, *_confident_files(tmp_path / "bad", conf_of=lambda u: 1.5 if u == 7 else 0.5))
    assert code == Exit.FINDINGS and "A.jsonl:8:" in out and "UP109" in out and "'confidence' must be" in out


def test_csv_rows_are_the_json_rows_with_formula_cells_escaped(capsys, args):
    """``--csv``: one row a system, the JSON row's fields and its warnings, for a spreadsheet; a system named by a
    file like ``=HYPERLINK(...).jsonl`` is a text cell there, not a formula (as the service's CSV downloads)."""
    import csv
    import io
    import shutil

    subs, labels = args[4], args[2]
    shutil.copy(subs / "B.jsonl", subs / "=1+2.jsonl")
    with labels.open("a") as fh:
        fh.write(json.dumps({"system": "=1+2", **inst(*X4), "label": 1}) + "\n")
    code, out, _ = run(capsys, *args, "--bootstrap", "10", "--seed", "1", "--json")
    rows = json.loads(out)
    code_csv, text, err = run(capsys, *args, "--bootstrap", "10", "--seed", "1", "--csv")
    assert code == code_csv == 0 and "unpooled: warning: " in err
    got = list(csv.DictReader(io.StringIO(text)))
    assert [r["system"] for r in got] == ["'=1+2", "A", "B"] == ["'" + rows[0]["system"], "A", "B"]
    for want, row in zip(rows, got):
        assert [k for k in row if k != "warnings"] == list(want)
        for k, v in want.items():
            if k != "system":
                assert row[k] == str(v), k
    assert "no labelled draws" not in got[1]["warnings"] and got[1]["warnings"].startswith("importance weights")
    # through the command line, whose standard output escapes control characters: lines end in a line feed
    from unpooled.cli.main import main

    assert main([str(a) for a in args] + ["--bootstrap", "10", "--seed", "1", "--csv"]) == 0
    printed = capsys.readouterr().out
    assert "\\u000d" not in printed and list(csv.DictReader(io.StringIO(printed))) == got
    with pytest.raises(SystemExit) as exc:
        run(capsys, *args, "--csv", "--json")
    assert exc.value.code == 2


def test_json_through_the_escaping_terminal_stays_json(capsys, args):
    """The CLI's standard output escapes control and invisible characters from data; the escape of U+0085 or U+007F
    quoted in a located problem was ``\\x85``, which JSON has not: the report printed was no JSON."""
    from unpooled.cli.main import main

    labels = args[2]
    with labels.open("a") as fh:
        fh.write(json.dumps({"note": "a\u0085b\u007fc\u202ed", "system": "A", **inst(*X1), "label": 5},
                            ensure_ascii=False) + "\n")
    assert main([str(a) for a in args] + ["--json"]) == Exit.FINDINGS
    out = capsys.readouterr().out
    assert not set(out) & {"\u0085", "\u007f", "\u202e"}
    (err,) = json.loads(out)["reports"][0]["errors"]
    assert err["line"] == 7 and "a\u0085b\u007fc\u202ed" in err["text"]


def test_the_labelled_sample_of_a_system_without_draws_is_undefined(capsys, tmp_path):
    """--answers: a system without labelled draws has no precision with the simple estimator (null), and the
    labelled sample's figure beside it was 0.0 (a 0/0 taken as 0); now null too, and the JSON is strict."""
    subs = tmp_path / "subs"
    subs.mkdir()
    write_jsonl(subs / "A.jsonl", [inst(*X1, entities=("a1", "a2")), inst(*X2, entities=("a1", "a3"))])
    write_jsonl(subs / "B.jsonl", [inst(*X4, entities=("b3", "b4"))])
    labs = [{"system": "A", **inst(*X1), "label": 1}, {"system": "A", **inst(*X2), "label": 0}]
    labels = write_jsonl(tmp_path / "L.jsonl", labs)
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*X1), inst(*Y5), inst(*X4)])
    rows = [{"task": t, "annotator": w, "key": score_cmd_key(lab), "correct": bool(lab["label"])}
            for t, lab in enumerate(labs) for w in ("w1", "w2", "w3")]
    for c in range(12):
        for w, agree in (("w1", True), ("w2", c % 4 != 0), ("w3", c % 3 != 0)):
            rows.append({"task": f"c{c}", "annotator": w, "control": True, "gold": {"correct": c % 2 == 0},
                         "correct": (c % 2 == 0) if agree else (c % 2 != 0)})
    answers = _answers_file(tmp_path, rows)
    argv = ["score", "--labels", labels, "--submissions", subs, "--exhaustive", ex, "--answers", answers,
            "--replicates", "5", "--estimator", "simple"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == Exit.OK

    def strict(name):
        raise AssertionError(f"{name} in the JSON output")

    a, b = json.loads(out, parse_constant=strict)
    assert a["sample"]["p"] == 0.5 and b["p"] is None
    assert b["sample"]["p"] is None and b["sample"]["f1"] is None and b["sample"]["r"] == pytest.approx(1 / 3)
    code, out, _ = run(capsys, *argv)
    assert code == Exit.OK and "  B: P n/a, R 0.333, F1 n/a" in out


def test_an_empty_labels_file_prints_no_precision_and_the_exhaustive_recall(capsys, args, tmp_path):
    """No labelled draw: the joint estimator printed P 0.000 [0, 0.949], R 0.000 [0, 0.351] for every system, while
    the exhaustive sample shows B finding 1 of 4 (joint.py ``precision_linear``); now P and F1 are undefined
    (n/a, null, empty cells) and R is the exhaustive sample's share, in the table, the JSON and the CSV."""
    (tmp_path / "L.jsonl").write_text("")
    code, out, _ = run(capsys, *args, "--json")
    assert code == Exit.OK
    rows = {r["system"]: r for r in json.loads(out)}
    for r in rows.values():
        assert r["p"] is None and r["p_lo"] is None and r["f1"] is None and r["f1_hi"] is None
    assert rows["B"]["r"] == pytest.approx(1 / 4) and rows["A"]["r"] == pytest.approx(2 / 4)
    code, out, _ = run(capsys, *args)
    line = next(ln for ln in out.splitlines() if ln.startswith("B "))
    assert line.split()[1:3] == ["n/a", "0.250"] and "precision and F1 are undefined" in line
    code, out, _ = run(capsys, *args, "--csv")
    head, *body = out.splitlines()
    cols = head.split(",")
    b = dict(zip(cols, next(r for r in body if r.startswith("B")).split(",")))
    assert b["p"] == "" and b["f1"] == "" and float(b["r"]) == pytest.approx(1 / 4)
