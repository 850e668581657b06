"""``unpooled score --exhaustive-documents N --corpus PATH``: how the exhaustive sample was collected.

``--exhaustive-documents``: documents annotated (recall's variance is a cluster sample of them);
``--corpus``: the current corpus, whose sentence split restricts p0 to instances within one sentence and whose
documents recall's pool follows.
"""

from __future__ import annotations

import json

import pytest

from unpooled.cli.main import Exit

from ..core.test_offline import X1, X2, X3, X4, Y5, inst, write_jsonl
from .test_score_cli import run

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")

X6 = ("D2", (10, 12), "p", (20, 25))  # true, submitted by B, across two sentences of D2


@pytest.fixture
def args(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_jsonl(subs / "A.jsonl", [inst(*X1, entities=("a1", "a2")), inst(*X2, entities=("a1", "a3")),
                                   inst(*X3, entities=("a4", None), value="Senator")])
    write_jsonl(subs / "B.jsonl", [inst(*X2, entities=("b1", "b2")), inst(*X4, entities=("b3", "b4")),
                                   inst(*X6, entities=("b6", "b7"))])
    labels = write_jsonl(tmp_path / "L.jsonl", [
        {"system": "A", **inst(*X1), "label": 1}, {"system": "A", **inst(*X2), "label": 0},
        {"system": "A", "key": "D1\t30-35\tq\t=senator", "label": 1}, {"system": "B", **inst(*X4), "label": 1},
        {"system": "B", **inst(*X6), "label": 1}, {"system": "B", **inst(*X2), "label": 0},
    ])
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*X1), inst(X3[0], X3[1], X3[2], None, value="senator"),
                                            inst(*Y5), inst(*X4)])
    return ["score", "--labels", labels, "--submissions", subs, "--exhaustive", ex]


def corpus(tmp_path, d2=((0, 15), (15, 30)), name="corpus.jsonl"):
    return write_jsonl(tmp_path / name, [{"id": "D1", "text": "x" * 60, "sentences": [[0, 30], [30, 60]]},
                                         {"id": "D2", "text": "y" * 30, "sentences": [list(s) for s in d2]}])


def test_defaults_warn_about_both(capsys, args):
    code, out, err = run(capsys, *args, "--json")
    assert code == Exit.OK
    assert ("unpooled: warning: the number of exhaustively annotated documents is not given "
            "(--exhaustive-documents, documents=)") in err
    assert "unpooled: warning: no sentence split (--corpus, sentences=)" in err
    code, out, _ = run(capsys, *args)
    assert out.splitlines()[0].endswith("; intervals 90%; 2 exhaustive documents (with a true instance)")


def test_options_change_recall_only(capsys, args, tmp_path):
    _, plain, _ = run(capsys, *args, "--json")
    code, out, err = run(capsys, *args, "--json", "--exhaustive-documents", "12", "--corpus", corpus(tmp_path),
                         "--corpus-format", "jsonl")
    assert code == Exit.OK and "documents is not given" not in err and "sentence split" not in err
    a, b = json.loads(plain), json.loads(out)
    assert [r["p"] for r in a] == [r["p"] for r in b]
    # x6 (B's, across sentences) no longer in p0: A's share of the pool up, B's down
    assert b[0]["r"] > a[0]["r"] and b[1]["r"] < a[1]["r"]
    code, out, _ = run(capsys, *args, "--exhaustive-documents", "12", "--corpus", corpus(tmp_path))
    assert out.splitlines()[0].endswith("; intervals 90%; 12 exhaustive documents; "
                                        "p0 within one sentence of the corpus's documents (1 of 6 draws outside)")


def test_bad_exhaustive_documents(capsys, args):
    code, _, err = run(capsys, *args, "--exhaustive-documents", "1")
    ex = args[-1]
    assert code == Exit.ERROR
    assert err.strip() == (f"unpooled: error: --exhaustive-documents 1: expected the number of exhaustively "
                           f"annotated documents, an integer >= 2 (the exhaustive file has true instances in 2 "
                           f"documents), got 1 ({ex})")
    for bad in ("0", "many"):  # argparse's usage error
        with pytest.raises(SystemExit) as exc:
            run(capsys, *args, "--exhaustive-documents", bad)
        assert exc.value.code == 2


def test_bad_corpus_is_located(capsys, args, tmp_path):
    # a sentence overlapping the previous one: the corpus file, line and field
    bad = corpus(tmp_path, d2=((0, 15), (10, 30)), name="bad.jsonl")
    code, _, err = run(capsys, *args, "--corpus", bad)
    assert code == Exit.ERROR
    assert err.startswith(f"unpooled: error: {bad}:2: sentence 1: [10, 30] overlaps or precedes the previous "
                          "sentence") and err.rstrip().endswith("[sentences]")
    code, _, err = run(capsys, *args, "--corpus", tmp_path / "nowhere")
    assert code == Exit.ERROR and "nowhere: no such file or folder (the corpus)" in err
    code, _, err = run(capsys, *args, "--corpus-format", "jsonl")
    assert code == Exit.ERROR and "--corpus-format needs --corpus" in err


def test_the_exhaustive_sample_must_lie_in_the_current_corpus(capsys, args, tmp_path):
    only_d1 = write_jsonl(tmp_path / "d1.jsonl", [{"id": "D1", "text": "x" * 60}])
    ex = args[-1]
    code, out, _ = run(capsys, *args, "--corpus", only_d1)
    assert code == Exit.FINDINGS
    found = [ln for ln in out.splitlines() if ln.startswith(f"{ex}:4")]
    assert found == [f"{ex}:4:1: UP201 document 'D2' of this true instance is not in the corpus {only_d1}, the "
                     "documents the exhaustive sample was drawn from [doc]"]
    code, out, _ = run(capsys, *args, "--corpus", only_d1, "--json")
    rep = json.loads(out)
    assert code == Exit.FINDINGS and [(e["line"], e["code"], e["field"]) for e in rep["reports"][0]["errors"]] == [
        (4, "UP201", "doc")]


def test_labels_on_documents_no_longer_in_the_corpus_count_for_precision_only(capsys, args, tmp_path):
    # D2 was dropped from the corpus (D3 came in): B's labels of x4 and x6 are kept, the exhaustive sample is D1's
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*X1), inst(X3[0], X3[1], X3[2], None, value="senator"), inst(*Y5)])
    current = write_jsonl(tmp_path / "current.jsonl", [{"id": "D1", "text": "x" * 60, "sentences": [[0, 60]]},
                                                       {"id": "D3", "text": "z" * 20}])
    _, plain, err = run(capsys, *args, "--json")
    assert "without it, labels kept from documents no longer in the corpus also count in recall's pool" in err
    code, out, err = run(capsys, *args, "--json", "--corpus", current)
    assert code == Exit.OK
    assert ("unpooled: warning: 2 labelled draws (2 distinct instances) on 1 document outside the current corpus "
            "(D2) count for precision only: recall's pool follows the current documents, which the exhaustive "
            "sample covers (p0 = 0 there)") in err
    a, b = json.loads(plain), json.loads(out)
    assert [r["p"] for r in a] == [r["p"] for r in b] and b[1]["labels"] == 3
    assert b[0]["r"] > a[0]["r"]  # x4 and x6 no longer dilute A's share of the pool
    code, out, _ = run(capsys, *args, "--corpus", current)
    assert out.splitlines()[0].endswith("p0 within one sentence of the corpus's documents (2 of 6 draws outside)")