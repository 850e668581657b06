"""``unpooled score --recall-protocol {sentence,document}``: which true instances recall counts, and the report says so.

A two-document DocRED corpus: Alice (three mentions, one per sentence), Bob (sentences 0 and 2), Paris (sentence
1); facts (Alice, P1, Bob) within sentences 0 and 2, and (Bob, P2, Paris) across sentences.  System S1 states
both facts, the first through the mentions of sentence 2; S2 states the first only, in sentence 0.
"""

from __future__ import annotations

import json

import pytest

from unpooled.cli.main import Exit

from .test_score_cli import run

SENTS = [["Alice", "met", "Bob", "."], ["Alice", "lives", "in", "Paris", "."], ["She", "likes", "Bob", "."]]
VERTICES = [[{"name": "Alice", "pos": [0, 1], "sent_id": s, "type": "PER"} for s in (0, 1, 2)],
            [{"name": "Bob", "pos": [2, 3], "sent_id": s, "type": "PER"} for s in (0, 2)],
            [{"name": "Paris", "pos": [3, 4], "sent_id": 1, "type": "LOC"}]]


def span(sent: int, tok: int) -> tuple[int, int]:
    """Character span of token ``tok`` of sentence ``sent`` (tokens joined by single spaces)."""
    flat = [t for s in SENTS[:sent] for t in s] + SENTS[sent][:tok]
    start = sum(len(t) + 1 for t in flat)
    return start, start + len(SENTS[sent][tok])


def inst(doc, s, pred, o):
    return {"doc": doc, "subject": dict(zip(("start", "end"), span(*s))), "predicate": pred,
            "object": dict(zip(("start", "end"), span(*o)))}


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def files(tmp_path):
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": t, "sents": SENTS, "vertexSet": VERTICES,
                                   "labels": [{"h": 0, "t": 1, "r": "P1", "evidence": [0]},
                                              {"h": 1, "t": 2, "r": "P2", "evidence": [0, 1]}]} for t in "AB"]))
    subs = tmp_path / "subs"
    subs.mkdir()
    s1 = [inst(d, (2, 0), "P1", (2, 2)) for d in "AB"] + [inst(d, (0, 2), "P2", (1, 3)) for d in "AB"]
    s2 = [inst(d, (0, 0), "P1", (0, 2)) for d in "AB"]
    ent = lambda x: {**x, "subject": {**x["subject"], "entity": "e1"}, "object": {**x["object"], "entity": "e2"}}  # noqa: E731
    write(subs / "S1.jsonl", map(ent, s1))
    write(subs / "S2.jsonl", map(ent, s2))
    labels = write(tmp_path / "L.jsonl", [{"system": "S1", **x, "label": 1} for x in s1]
                   + [{"system": "S2", **x, "label": 1} for x in s2])
    # as each protocol's relations task finds the facts (core.annotation.answers.candidate_pairs)
    sentence = write(tmp_path / "E-sentence.jsonl", [inst(d, (0, 0), "P1", (0, 2)) for d in "AB"]
                     + [inst(d, (2, 0), "P1", (2, 2)) for d in "AB"])
    document = write(tmp_path / "E-document.jsonl", [inst(d, (0, 0), "P1", (0, 2)) for d in "AB"]
                     + [inst(d, (0, 2), "P2", (1, 3)) for d in "AB"])
    base = ["score", "--labels", labels, "--submissions", subs, "--exhaustive-documents", "2", "--estimator", "simple"]
    return {"base": base, "corpus": corpus, "sentence": sentence, "document": document, "tmp": tmp_path}


def test_both_protocols_recall_and_report(capsys, files):
    got = {}
    for protocol in ("sentence", "document"):
        code, out, _ = run(capsys, *files["base"], "--exhaustive", files[protocol], "--corpus", files["corpus"],
                           "--recall-protocol", protocol, "--json")
        assert code == Exit.OK
        rows = json.loads(out)
        assert {r["recall_protocol"] for r in rows} == {protocol}
        got[protocol] = {r["system"]: r["r"] for r in rows}
    # within sentences: two true instances per document, each system matches one of them exactly
    assert got["sentence"] == pytest.approx({"S1": 0.5, "S2": 0.5})
    # document-level: two facts per document; S1 states both (the first through other mentions), S2 one
    assert got["document"] == pytest.approx({"S1": 1.0, "S2": 0.5})
    code, out, _ = run(capsys, *files["base"], "--exhaustive", files["document"], "--corpus", files["corpus"],
                       "--recall-protocol", "document")
    assert code == Exit.OK
    assert out.splitlines()[0].startswith("estimator simple, level instance, match cluster, recall: document-level: "
                                          "2 systems, 6 labelled draws, 4 exhaustive true instances")
    code, out, _ = run(capsys, *files["base"], "--exhaustive", files["sentence"], "--corpus", files["corpus"])
    assert "match exact, recall: within-sentence:" in out.splitlines()[0]


def test_document_protocol_needs_a_corpus_with_clusters(capsys, files):
    code, _, err = run(capsys, *files["base"], "--exhaustive", files["document"], "--recall-protocol", "document")
    assert code == Exit.ERROR
    assert "unpooled: error: --recall-protocol document: 'document' needs the corpus (--corpus" in err
    plain = write(files["tmp"] / "plain.jsonl", [{"id": d, "text": " ".join(t for s in SENTS for t in s)}
                                                 for d in "AB"])
    code, _, err = run(capsys, *files["base"], "--exhaustive", files["document"], "--recall-protocol", "document",
                       "--corpus", plain)
    assert code == Exit.ERROR
    assert f"--recall-protocol document --corpus {plain}: the document recall protocol counts facts between" in err


def test_document_protocol_refuses_another_match(capsys, files):
    code, _, err = run(capsys, *files["base"], "--exhaustive", files["document"], "--corpus", files["corpus"],
                       "--recall-protocol", "document", "--match", "overlap")
    assert code == Exit.ERROR
    assert "--match: the document recall protocol matches facts between the corpus's entity clusters" in err
