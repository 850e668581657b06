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
    with pytest.raises(SystemExit) as exc:  # bounded where declared (cli.main.integer): a usage error
        run(capsys, "corpus", "analyse", forty, "--draws", 0)
    assert exc.value.code == 2 and "argument --draws: expected an integer from 1 to 100, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["corpus", "analyse", str(forty), "--scheme", "magic"])


def test_simulate_documents_quick(capsys, tmp_path):
    out = tmp_path / "d.json"
    code, table, _ = run(capsys, "simulate", "documents", "--quick", "--trials", 4, "--replicates", 20,
                         "--json", out)
    assert code == 0 and "naive bias" in table
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(0 <= r["coverage"] <= 1 and r["trials"] == 4 for r in rows)


def test_simulate_documents_regimes_cover_every_scheme_size_and_system():
    from unpooled.cli.commands.simulate import DOCUMENT_SIZES, DOCUMENT_SYSTEMS, document_regimes
    from unpooled.core.simulate.documents import SCHEMES

    rows = document_regimes(None)          # without the shared data: the synthetic world only
    sizes = [n for block in DOCUMENT_SIZES for n in block]
    assert len(rows) == len(DOCUMENT_SYSTEMS) * len(sizes) * len(SCHEMES)
    assert {(r[1], r[2]) for r in rows} == {(s, n) for s in SCHEMES for n in sizes}
    first = len(DOCUMENT_SYSTEMS) * len(DOCUMENT_SIZES[0]) * len(SCHEMES)
    assert {r[2] for r in rows[:first]} == set(DOCUMENT_SIZES[0])     # later sizes come after (earlier seeds kept)
    assert all(r[3] is None for r in rows)           # the service's defaults
    assert len({r[0] for r in rows}) == len(DOCUMENT_SYSTEMS)
    recalls = sorted({r for r, _ in DOCUMENT_SYSTEMS})
    tilts = sorted({t for _, t in DOCUMENT_SYSTEMS})
    assert recalls[0] <= 0.3 and recalls[-1] >= 0.8 and tilts[0] == 0 and tilts[-1] > 0
    assert min(sizes) <= 20 and max(sizes) >= 60
    shares = document_regimes(None, shares=True)
    assert {r[3] for r in shares if r[1] == "seed"} == {0.2, 0.3}


def test_simulate_documents_rows_print_the_share(capsys, tmp_path):
    out = tmp_path / "d.json"
    code, table, _ = run(capsys, "simulate", "documents", "--rows", "3", "--trials", 3, "--json", out)
    rows = json.loads(out.read_text())["rows"]
    assert code == 0 and len(rows) == 1 and rows[0]["scheme"] == "tfidf" and rows[0]["size"] == 15
    assert "share" in table and "tfidf" in table


def test_simulate_documents_size_runs_the_rows_at_another_size(capsys, tmp_path):
    out = tmp_path / "d.json"
    code, _, _ = run(capsys, "simulate", "documents", "--rows", "1,3", "--size", 10, "--trials", 3, "--json", out)
    rows = json.loads(out.read_text())["rows"]
    assert code == 0 and [(r["scheme"], r["size"]) for r in rows] == [("uniform", 10), ("tfidf", 10)]
    with pytest.raises(SystemExit) as exc:
        run(capsys, "simulate", "documents", "--rows", "1", "--size", 1, "--trials", 3)
    assert exc.value.code == 2 and "argument --size: expected an integer from 2 to" in capsys.readouterr().err
