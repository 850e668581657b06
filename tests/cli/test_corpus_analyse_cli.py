"""``unpooled corpus analyse``: offline on a corpus file, on a stored corpus, JSON, SVG files, errors; and
``unpooled simulate documents --quick``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from unpooled.cli.main import main


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def forty(shared_data, tmp_path):
    data = json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:40]
    path = tmp_path / "forty.json"
    path.write_text(json.dumps(data))
    return path


def test_offline_on_a_file_with_svg(capsys, forty, tmp_path):
    svg = tmp_path / "svg"
    code, out, _ = run(capsys, "corpus", "analyse", forty, "--scheme", "seed", "--scheme", "uniform", "--size", 10,
                       "--draws", 2, "--svg", svg)
    assert code == 0
    assert "40 documents" in out and "entities from the gold layer" in out
    assert "Entities mentioned, by frequency bin" in out and "Relation types" in out
    lines = [ln.split()[0] for ln in out.splitlines() if ln.startswith(("corpus ", "seed ", "uniform "))]
    assert lines[:3] == ["corpus", "seed", "uniform"]
    for name in ("histogram", "clusters", "relations"):
        ET.fromstring((svg / f"{name}.svg").read_text())


def test_json_is_reproducible(capsys, forty):
    code, out, _ = run(capsys, "corpus", "analyse", forty, "--size", 8, "--draws", 1, "--json")
    a = json.loads(out)
    assert code == 0 and [x["label"] for x in a["analyses"]] == ["uniform", "two-stage", "tfidf", "seed"]
    b = json.loads(run(capsys, "corpus", "analyse", forty, "--size", 8, "--draws", 1, "--json")[1])
    assert a["analyses"] == b["analyses"] and len(a["thresholds"]) == 2


@pytest.mark.django_db
def test_on_a_stored_corpus(capsys, forty):
    assert run(capsys, "corpus", "load", forty, "--format", "docred", "--name", "cli-an")[0] == 0
    code, out, _ = run(capsys, "corpus", "analyse", "cli-an", "--scheme", "seed", "--size", 10, "--draws", 1)
    assert code == 0 and out.startswith("cli-an: 1 scheme(s)") and "seed" in out


@pytest.mark.django_db
def test_errors(capsys, forty):
    code, _, err = run(capsys, "corpus", "analyse", "no-such-corpus")
    assert code == 3 and "no corpus or file 'no-such-corpus'" in err
    code, _, err = run(capsys, "corpus", "analyse", forty, "--draws", 0)
    assert code == 3 and "--draws must be 1..100, got 0" in err
    with pytest.raises(SystemExit):
        main(["corpus", "analyse", str(forty), "--scheme", "magic"])


def test_simulate_documents_quick(capsys, tmp_path):
    out = tmp_path / "d.json"
    code, table, _ = run(capsys, "simulate", "documents", "--quick", "--trials", 4, "--replicates", 20,
                         "--json", out)
    assert code == 0 and "naive bias" in table
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(0 <= r["coverage"] <= 1 and r["trials"] == 4 for r in rows)
