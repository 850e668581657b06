"""DocRED labels as a submission: the original DocRED annotation over Re-DocRED documents."""

from __future__ import annotations

import io
import json

from unpooled.core.corpus import iter_documents
from unpooled.core.kb import InMemoryCorpus, read_jsonl
from unpooled.core.kb.docred import docred_to_jsonl
from unpooled.core.schema import builtin_schema


def test_hwe_labels_become_valid_instances(shared_data):
    dev = InMemoryCorpus(iter_documents(shared_data / "redocred" / "dev_revised.json", "docred"))
    hwe = list(iter_documents(shared_data / "docred_hwe" / "dev_keys_new.json", "docred"))
    buf = io.StringIO()
    counts = docred_to_jsonl(hwe, buf, corpus_text=lambda d: dev.text(d) if d in dev else None)
    in_dev = [d for d in hwe if d.id in dev]
    assert counts["documents"] == len(in_dev) and counts["not_in_corpus"] == len(hwe) - len(in_dev)
    assert counts["text_differs"] == 0 and counts["skipped_relations"] == 0
    assert counts["instances"] == sum(len({(r.subject, r.predicate, r.object) for r in d.relations}) for d in in_dev)
    kb, rep = read_jsonl(io.BytesIO(buf.getvalue().encode()), dev, builtin_schema("docred"), path="hwe.jsonl")
    assert rep.ok and len(kb.instances) == counts["instances"]
    # every instance's mentions are gold mentions of the clusters it names, inside its provenance
    for line in buf.getvalue().splitlines()[:500]:
        row = json.loads(line)
        doc = next(d for d in in_dev if d.id == row["doc"])
        for arg in ("subject", "object"):
            idx = int(row[arg]["entity"].rsplit("/", 1)[1])
            spans = {(m.start, m.end) for m in doc.entities[idx].mentions}
            assert (row[arg]["start"], row[arg]["end"]) in spans
            assert any(p["start"] <= row[arg]["start"] and row[arg]["end"] <= p["end"] for p in row["provenance"])
