"""``unpooled simulate stopping``: the table, the JSON, the errors."""

from __future__ import annotations

import json

from unpooled.cli.main import main


def _no_constant(name: str):
    raise AssertionError(f"{name} in the JSON output")


def test_stopping_table_and_json(tmp_path, capsys):
    out = tmp_path / "s.json"
    code = main(["simulate", "stopping", "--trials", "2", "--seed", "1", "--max-draws", "75", "--json", str(out)])
    assert code == 0
    table = capsys.readouterr().out
    assert "rival" in table and "anytime" in table and "betting" in table
    d = json.loads(out.read_text(), parse_constant=_no_constant)  # JSON (RFC 8259) has no NaN: null
    assert all(r["wrong"] is None for r in d["rules"] if r["rule"] != "separate")
    assert {(r["rule"], r["kind"]) for r in d["rules"]} == {(a, b) for a in ("rival", "value", "width", "separate", "fixed", "ever")
                                                            for b in ("fixed-n", "anytime")}
    assert all(0 <= r["cover_f1"] <= 1 and r["draws"] <= 75 for r in d["rules"])
    assert {r["boundary"] for r in d["boundaries"]} >= {"mixture", "eb", "betting"}


def test_stopping_errors(capsys):
    assert main(["simulate", "stopping", "--trials", "1", "--batch", "50", "--max-draws", "25"]) != 0
    assert "--max-draws" in capsys.readouterr().err
    assert main(["simulate", "stopping", "--trials", "1", "--width", "2", "--no-boundaries"]) != 0
    assert "--width" in capsys.readouterr().err
