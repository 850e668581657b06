"""``unpooled annotate``: request, documents, controls, simulate, status (text and JSON), errors."""

from __future__ import annotations

import json

import pytest

from unpooled.cli.main import main


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def corpus_and_submission(shared_data, tmp_path, capsys):
    from unpooled.core.corpus import iter_documents
    from unpooled.core.kb.docred import docred_to_jsonl

    data = json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:12]
    path = tmp_path / "twelve.json"
    path.write_text(json.dumps(data))
    assert run(capsys, "corpus", "load", path, "--format", "docred", "--name", "cli-ann")[0] == 0
    kb = tmp_path / "kb.jsonl"
    with open(kb, "w") as out:
        docred_to_jsonl(iter_documents(path, "docred"), out)
    code, out, _ = run(capsys, "submit", kb, "--corpus", "cli-ann", "--team", "t", "--run", "r", "--json")
    assert code == 0
    return json.loads(out)["submission"]


@pytest.mark.django_db
def test_annotate_end_to_end(capsys, corpus_and_submission):
    sub = corpus_and_submission
    code, out, _ = run(capsys, "annotate", "request", sub, "--sample", 60, "--json")
    req = json.loads(out)
    assert code == 0 and req["created"] == req["keys"] and req["reused"] == 0
    code, out, _ = run(capsys, "annotate", "documents", "--corpus", "cli-ann", "--scheme", "uniform", "--size", 3, "--json")
    assert code == 0 and json.loads(out)["new_documents"] == 3
    code, _, err = run(capsys, "annotate", "controls", "--corpus", "cli-ann", "-n", 10)
    assert code == 0 and "10 gold control items" in err
    code, out, _ = run(capsys, "annotate", "simulate", "--corpus", "cli-ann", "--accuracy", 0.8, "--annotators", 5, "--json")
    sim = json.loads(out)
    assert code == 0 and sim["by_kind"]["verify"] >= 3 * req["created"]
    assert sim["verification"]["majority"]["items"] == req["created"]
    assert sim["exhaustive"]["documents"] == 3
    # the second request reuses every label
    code, out, _ = run(capsys, "annotate", "request", sub, "--sample", 60, "--json")
    again = json.loads(out)
    assert again["reused"] == again["keys"] and again["created"] == 0

    code, out, _ = run(capsys, "annotate", "status", "--corpus", "cli-ann", "--json")
    st = json.loads(out)
    kinds = {k["kind"]: k for k in st["kinds"]}
    assert kinds["verify"]["complete"] == req["created"] and kinds["verify"]["cost_cents"] > 0
    assert kinds["entities"]["complete"] == 3 and kinds["relations"]["items"] == 3
    assert st["agreement"]["overall"]["items"] == req["created"]
    assert -1 <= st["agreement"]["overall"]["fleiss_kappa"] <= 1
    assert len(st["annotators"]) == 5 and all(a["answers"] > 0 for a in st["annotators"])
    code, out, _ = run(capsys, "annotate", "status", "--corpus", "cli-ann")
    assert code == 0 and "verification agreement: Fleiss kappa" in out and "sim-01" in out
    assert out.splitlines()[1].split()[:2] == ["task", "type"]
    # the console's names and numbers: answers received / needed (counted, controls excluded) and all answers
    assert "received/needed" in out.splitlines()[1] and "all answers" in out.splitlines()[1]
    v = next(line.split() for line in out.splitlines() if line.startswith("verify "))
    assert f"{kinds['verify']['answers_received']:,}/{kinds['verify']['answers_needed']:,}" in v
    assert f"{kinds['verify']['answers']:,}" in v


@pytest.mark.django_db
def test_annotate_errors(capsys, corpus_and_submission):
    code, _, err = run(capsys, "annotate", "status", "--corpus", "nope")
    assert code == 3 and "--corpus 'nope': no such corpus (stored: cli-ann)" in err
    with pytest.raises(SystemExit) as exc:  # bounded where declared (cli.main.PROBABILITY): a usage error
        run(capsys, "annotate", "simulate", "--corpus", "cli-ann", "--accuracy", 1.5)
    assert exc.value.code == 2 and "argument --accuracy: expected a number from 0 to 1, got 1.5" in \
        capsys.readouterr().err
    code, _, err = run(capsys, "annotate", "simulate", "--corpus", "cli-ann", "--annotators", 2)
    assert code == 3 and "each item needs 3 different annotators" in err
    code, _, err = run(capsys, "annotate", "documents", "--corpus", "cli-ann", "--scheme", "tfidf", "--size", 3)
    assert code == 3 and "none yet" in err
    code, _, err = run(capsys, "annotate", "request", 999)
    assert code == 3 and "submission 999: no such submission" in err


@pytest.mark.django_db
def test_annotate_documents_warns_below_the_floor(capsys, corpus_and_submission):
    code, out, err = run(capsys, "annotate", "documents", "--corpus", "cli-ann", "--scheme", "uniform", "--size", 5)
    assert code == 0 and "5 documents sampled (uniform)" in out
    assert "warning: 5 documents (uniform) are few for recall" in err and "sample at least 15 documents" in err


@pytest.mark.django_db
def test_annotate_documents_of_the_whole_corpus_does_not_warn(capsys, corpus_and_submission):
    code, out, err = run(capsys, "annotate", "documents", "--corpus", "cli-ann", "--scheme", "uniform", "--size", 12)
    assert code == 0 and "12 documents sampled (uniform)" in out and "few for recall" not in err
