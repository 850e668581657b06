"""Offline scoring's readers on hostile input: offsets outside the corpus's documents, and properties of the
line parsers (no instance dropped or counted twice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unpooled.core.offline import InputFindings, load, read_exhaustive, read_labels, read_submission, score_files

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


# -- properties of the line readers -------------------------------------------------------------------------
SPANS = st.tuples(st.integers(0, 50), st.integers(1, 5)).map(lambda t: (t[0], t[0] + t[1]))
INSTANCES = st.tuples(st.sampled_from(["D1", "D2", "dé"]), SPANS, st.sampled_from(["p", "q:r"]), SPANS)
ENDINGS = st.sampled_from(["\n", "\r\n"])


def _file(path: Path, lines: list[str], ending: str, bom: bool, blank: list[bool]) -> Path:
    text = "".join(("\n" if b else "") + ln + ending for ln, b in zip(lines, blank + [False] * len(lines)))
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(INSTANCES, min_size=1, max_size=12), repeat=st.lists(st.integers(0, 11), max_size=4),
       ending=ENDINGS, bom=st.booleans(), blank=st.lists(st.booleans(), max_size=12))
def test_readers_keep_every_instance_once_and_every_draw(tmp_path, rows, repeat, ending, bom, blank):
    """A submission keeps each distinct instance once, in file order (a repeat is a located UP209 warning); the
    labels file keeps every line as a draw; the exhaustive file counts a repeat twice and says so: whatever the
    line ends, a BOM, or blank lines between."""
    rows = rows + [rows[k % len(rows)] for k in repeat]
    sub = _file(tmp_path / "A.jsonl", [json.dumps(inst(*r, entities=(f"s{r[1]}", f"o{r[3]}"))) for r in rows],
                ending, bom, blank)
    s, rep = read_submission(sub)
    keys, first = [], {}
    for n, r in enumerate(rows):
        ref = (r[0], *r[1], r[2], *r[3])
        if ref not in first:
            first[ref] = n
            keys.append(ref)
    assert rep.ok and [(i.doc, i.s_start, i.s_end, i.predicate, i.o_start, i.o_end) for i in s.instances] == keys
    assert len(rep.warnings) == len(rows) - len(keys) and {d.code for d in rep.warnings} <= {"UP209"}
    assert s.lines == tuple(sorted(s.lines)) and len(set(s.lines)) == len(keys)
    lab = _file(tmp_path / "L.jsonl", [json.dumps({"system": "A", **inst(*r), "label": k % 2})
                                       for k, r in enumerate(rows)], ending, bom, blank)
    draws, lrep = read_labels(lab, [s])
    assert lrep.ok and [d.label for d in draws] == [k % 2 for k in range(len(rows))]
    assert [d.key for d in draws] == [s.keys[keys.index((r[0], *r[1], r[2], *r[3]))] for r in rows]
    ex = _file(tmp_path / "E.jsonl", [json.dumps(inst(*r)) for r in rows], ending, bom, blank)
    true, erep = read_exhaustive(ex)
    assert erep.ok and len(true) == len(rows) and len(erep.warnings) == len(rows) - len(keys)


def test_a_submission_file_name_that_is_not_utf8_is_refused(toy):
    """The system is named by its file: a name of undecodable bytes made JSON output that was not UTF-8."""
    import os

    from unpooled.core.errors import LocatedError

    labels, subs, ex, _ = toy
    bad = subs / os.fsdecode(b"B\xff.jsonl")
    bad.write_bytes((subs / "A.jsonl").read_bytes())
    with pytest.raises(LocatedError, match=r"file name is not printable UTF-8 text \(a system is named by its file\)"):
        load(labels, subs, ex)


@pytest.mark.parametrize("key, what", [
    ("D1\t35-30\tp\t40-45", "span 35-30 is empty or reversed"),
    ("D1\t3-5\tp\t45-45", "span 45-45 is empty or reversed"),
    ("D1\t3-5\tp\t=", "the string filler after '=' is empty"),
    ("D1\t3-5\tp\t= ", "the string filler after '=' is empty"),
    ("\t3-5\tp\t=senator", "document and predicate must be non-empty"),
    ("D1\t3-5\t\t=senator", "document and predicate must be non-empty"),
    ("D1\t\u0663-5\tp\t40-45", "expected an instance key"),
    ("D1\t+3-5\tp\t40-45", "expected an instance key"),
    ("D1\t3-5\tp\t4_0-45", "expected an instance key"),
])
def test_an_instance_key_is_read_as_strictly_as_its_fields(toy, key, what):
    """A key the fields could not give (a reversed or empty span, an empty filler, no document) was a true instance
    nobody could match, lowering every recall silently; now a located error of the exhaustive file, as in labels."""
    labels, subs, ex, _ = toy
    with ex.open("a") as fh:
        fh.write(json.dumps({"key": key}) + "\n")
    with labels.open("a") as fh:
        fh.write(json.dumps({"system": "A", "key": key, "label": 1}) + "\n")
    data = load(labels, subs, ex)
    got = [(Path(r.path).name, d.line, d.code, d.field) for r in data.reports for d in r.errors]
    assert got == [("L.jsonl", 3, "UP107", "key"), ("E.jsonl", 3, "UP107", "key")]
    assert all(what in d.message for r in data.reports for d in r.errors)
