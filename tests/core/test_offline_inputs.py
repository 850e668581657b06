"""Offline scoring's readers on hostile input: offsets outside the corpus's documents, and properties of the
line parsers (no instance dropped or counted twice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unpooled.core.offline import InputFindings, load, score_files

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")


def inst(doc, s, p, o, *, entities=None):
    subj, obj = {"start": s[0], "end": s[1]}, {"start": o[0], "end": o[1]}
    if entities:
        subj["entity"], obj["entity"] = entities
    return {"doc": doc, "subject": subj, "predicate": p, "object": obj}


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


X1 = ("D1", (0, 5), "p", (10, 15))
X2 = ("D1", (20, 25), "p", (30, 35))


@pytest.fixture
def toy(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_jsonl(subs / "A.jsonl", [inst(*X1, entities=("a1", "a2")), inst(*X2, entities=("a3", "a4"))])
    labels = write_jsonl(tmp_path / "L.jsonl", [{"system": "A", **inst(*X1), "label": 1},
                                                {"system": "A", **inst(*X2), "label": 0}])
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*X1), inst("D1", (40, 45), "p", (50, 55))])
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"id": "D1", "text": "x" * 60, "sentences": [[0, 60]]}])
    return labels, subs, ex, corpus


def _errors(reports):
    return [(Path(r.path).name, d.line, d.code, d.field, d.message) for r in reports for d in r.errors]


def test_offsets_outside_the_corpus_document_are_located_errors(toy, tmp_path):
    labels, subs, ex, corpus = toy
    assert score_files(labels, subs, ex, corpus=corpus).rows[0].precision.value == 0.5
    with (subs / "A.jsonl").open("a") as fh:
        fh.write(json.dumps(inst("D1", (50, 55), "q", (58, 61), entities=("a5", "a6"))) + "\n")
    with ex.open("a") as fh:
        fh.write(json.dumps(inst("D1", (70, 75), "p", (0, 5))) + "\n")
    data = load(labels, subs, ex, corpus=corpus)
    assert not data.ok
    assert _errors(data.reports) == [
        ("A.jsonl", 3, "UP202", "object.end",
         f"'object' span 58-61 is outside document 'D1' (60 characters) of the corpus {corpus}"),
        ("E.jsonl", 3, "UP202", "subject.start",
         f"'subject' span 70-75 is outside document 'D1' (60 characters) of the corpus {corpus}"),
    ]
    with pytest.raises(InputFindings):
        score_files(labels, subs, ex, corpus=corpus)
    # without a corpus the documents' lengths are unknown: nothing to check
    assert load(labels, subs, ex).ok
