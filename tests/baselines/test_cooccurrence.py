"""The spaCy + rules baseline: real NER, located rows, and a measured precision on Re-DocRED."""

from __future__ import annotations

import io
import json

import pytest

from unpooled.baselines.cooccurrence import RULES, _entities, extract, load_model
from unpooled.core.corpus import iter_documents
from unpooled.core.corpus.model import Document


@pytest.fixture(scope="module")
def nlp():
    return load_model()


def test_rules_on_a_sentence(nlp):
    text = "Barack Obama was born in Honolulu, Hawaii. Obama studied at Harvard University."
    doc = Document(id="d1", text=text, sentences=[(0, 42), (43, len(text))])
    out = io.StringIO()
    counts = extract([doc], out, nlp=nlp)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    got = {(text[r["subject"]["start"]:r["subject"]["end"]], r["predicate"], text[r["object"]["start"]:r["object"]["end"]])
           for r in rows}
    assert ("Barack Obama", "P19", "Honolulu") in got
    assert ("Honolulu", "P131", "Hawaii") in got
    assert ("Obama", "P69", "Harvard University") in got
    assert counts == {"documents": 1, "instances": len(rows)}
    # "Obama" joins "Barack Obama"'s entity
    ent = {r["subject"]["entity"] for r in rows if r["predicate"] in ("P19", "P69")}
    assert len(ent) == 1


def test_entity_linking_by_text_and_last_name():
    ents = [(0, 12, "PER", "Barack Obama"), (20, 25, "PER", "Obama"), (30, 38, "LOC", "Honolulu"), (40, 48, "LOC", "honolulu")]
    ids = _entities(ents)
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]


def test_every_rule_names_a_docred_relation():
    from unpooled.core.schema import load_schema

    schema = load_schema("docred")
    assert all(r.predicate in schema.relations for r in RULES)


def test_precision_on_redocred_sample(nlp, shared_data):
    docs = list(iter_documents(shared_data / "redocred" / "dev_revised.json", "docred"))[:80]
    out = io.StringIO()
    extract(docs, out, nlp=nlp)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert rows
    by_id = {d.id: d for d in docs}
    right = 0
    for r in rows:
        d = by_id[r["doc"]]
        ment = [(m.start, m.end, e.index) for e in d.entities for m in e.mentions]
        hs = {e for s, t, e in ment if s < r["subject"]["end"] and r["subject"]["start"] < t}
        ts = {e for s, t, e in ment if s < r["object"]["end"] and r["object"]["start"] < t}
        gold = {(g.subject, g.predicate, g.object) for g in d.relations}
        right += any((h, r["predicate"], t) in gold for h in hs for t in ts)
    precision = right / len(rows)
    print(f"\nbaseline on 80 Re-DocRED dev documents: {len(rows)} instances, precision {precision:.3f}")
    assert 0.3 < precision < 0.95
