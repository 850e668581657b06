"""Write the offline inputs of ``unpooled score`` from a DocRED-format corpus, under both recall protocols.

Real data for the two recall protocols (:mod:`unpooled.core.estimators.exhaustive`, 4): Re-DocRED's labels are
the truth; the systems are DocRED-format label files turned into submissions (e.g. the original DocRED labels,
``docred_hwe/dev_keys_new.json``), plus, per system, the same instances kept only where the two mentions share a
sentence (``NAME-within``: a system strong within sentences and blind across them).  It writes::

    OUT/submissions/NAME.jsonl        the systems
    OUT/labels.jsonl                  --draws draws per system from p_i (instance level), labelled by the truth
    OUT/exhaustive-sentence.jsonl     the exhaustive sample of --documents documents as the within-sentence
                                      protocol annotates it (one pair per sentence and cluster pair)
    OUT/exhaustive-document.jsonl     the same documents as the document protocol annotates them (one pair per
                                      cluster pair of the document)
    OUT/truth.json                    every system's true precision and true recall under both protocols

Both exhaustive files come from :func:`unpooled.core.annotation.answers.candidate_pairs`, the function that builds
the service's relations task, with a perfect annotator (every gold predicate between the pair's clusters).  Then::

    unpooled score --labels OUT/labels.jsonl --submissions OUT/submissions --corpus CORPUS \\
        --exhaustive OUT/exhaustive-sentence.jsonl --exhaustive-documents N --recall-protocol sentence
    unpooled score ... --exhaustive OUT/exhaustive-document.jsonl --recall-protocol document

Usage: ``python tools/recall_protocols.py CORPUS.json --system NAME=FILE.json ... --out DIR [--documents 100]
[--draws 300] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import numpy as np

from unpooled.core.annotation.answers import candidate_pairs
from unpooled.core.corpus import iter_documents
from unpooled.core.estimators.exhaustive import span_clusters, within_sentence
from unpooled.core.kb.docred import docred_to_jsonl
from unpooled.core.matching import InstanceRef


def gold_mentions(doc) -> list[dict]:
    """The document's gold mentions without overlaps, as the entity task aggregates them (first, longest kept)."""
    rows = sorted(((m.start, -m.end, e.index, e.type) for e in doc.entities for m in e.mentions))
    out, last = [], -1
    for s, neg_e, c, t in rows:
        if s >= last:
            out.append({"start": s, "end": -neg_e, "type": t, "cluster": c})
            last = -neg_e
    return out


def exhaustive(doc, protocol: str) -> list[dict]:
    """The document's true instances as the ``protocol``'s relations task finds them, by a perfect annotator."""
    ms = gold_mentions(doc)
    facts: dict = {}
    for r in doc.relations:
        facts.setdefault((r.subject, r.object), set()).add(r.predicate)
    out = []
    for a, b in candidate_pairs(ms, [s for s, _ in doc.sentences], [e for _, e in doc.sentences], protocol=protocol):
        for x, y in ((a, b), (b, a)):
            for pred in sorted(facts.get((ms[x]["cluster"], ms[y]["cluster"]), ())):
                out.append({"doc": doc.id, "subject": {"start": ms[x]["start"], "end": ms[x]["end"]},
                            "predicate": pred, "object": {"start": ms[y]["start"], "end": ms[y]["end"]}})
    return out


def truth_of(docs: dict) -> tuple[dict, set]:
    """The span map of the corpus's clusters and its true facts ``(doc, h, predicate, t)``."""
    ents = {d.id: [(m.start, m.end, e.index) for e in d.entities for m in e.mentions] for d in docs.values()}
    facts = {(d.id, r.subject, r.predicate, r.object) for d in docs.values() for r in d.relations}
    return ents, facts


def is_true(ref: InstanceRef, clusters: dict, facts: set) -> bool:
    hs, ts = clusters[(ref.doc, ref.s_start, ref.s_end)], clusters[(ref.doc, ref.o_start, ref.o_end)]
    hs = hs if isinstance(hs, frozenset) else {hs}
    ts = ts if isinstance(ts, frozenset) else {ts}
    return any((ref.doc, h, ref.predicate, t) in facts for h in hs for t in ts)


def load_system(path: Path, docs: dict) -> list[dict]:
    buf = io.StringIO()
    docred_to_jsonl(iter_documents(path, "docred"), buf, corpus_text=lambda d: docs[d].text if d in docs else None)
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def ref_of(row: dict) -> InstanceRef:
    return InstanceRef(row["doc"], row["subject"]["start"], row["subject"]["end"], row["predicate"],
                       row["object"]["start"], row["object"]["end"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--system", action="append", required=True, metavar="NAME=FILE")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--documents", type=int, default=100)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    docs = {d.id: d for d in iter_documents(a.corpus, "docred")}
    ents, facts = truth_of(docs)
    sentences = {d.id: ([s for s, _ in d.sentences], [e for _, e in d.sentences]) for d in docs.values()}
    systems = {}
    for spec in a.system:
        name, path = spec.split("=", 1)
        rows = load_system(Path(path), docs)
        systems[name] = rows
        systems[f"{name}-within"] = [r for r in rows if within_sentence(ref_of(r), sentences)]
    (a.out / "submissions").mkdir(parents=True, exist_ok=True)
    refs = {n: [ref_of(r) for r in rows] for n, rows in systems.items()}
    spans = [(x.doc, x.s_start, x.s_end) for rs in refs.values() for x in rs]
    spans += [(x.doc, x.o_start, x.o_end) for rs in refs.values() for x in rs]
    clusters = span_clusters(ents, spans)
    sample = sorted(rng.choice(sorted(docs), size=a.documents, replace=False).tolist())
    truth = {"documents": a.documents, "systems": {}}
    with open(a.out / "labels.jsonl", "w") as lab:
        for name, rows in systems.items():
            with open(a.out / "submissions" / f"{name}.jsonl", "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            ok = np.array([is_true(x, clusters, facts) for x in refs[name]])
            for k in rng.integers(0, len(rows), size=a.draws).tolist():
                lab.write(json.dumps({"system": name, **{f: rows[k][f] for f in ("doc", "subject", "predicate",
                                                                               "object")}, "label": int(ok[k])}) + "\n")
            truth["systems"][name] = {"instances": len(rows), "precision": float(ok.mean())}
    for protocol in ("sentence", "document"):
        every = [row for d in docs.values() for row in exhaustive(d, protocol)]
        with open(a.out / f"exhaustive-{protocol}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in every if r["doc"] in set(sample))
        true_recall(truth, protocol, every, refs, ents, docs, facts)
    (a.out / "truth.json").write_text(json.dumps(truth, indent=1))
    print(json.dumps(truth, indent=1))
    return 0


def true_recall(truth: dict, protocol: str, every: list, refs: dict, ents: dict, docs: dict, facts: set) -> None:
    """Every system's true recall under ``protocol`` over the whole corpus: within-sentence, the share of the
    protocol's true instances a system matches by overlapping spans (the service's matching); document-level,
    the share of the corpus's true facts it states through any mention of the two clusters."""
    from unpooled.core.matching import GoldTriple, match_matrix

    names = list(refs)
    if protocol == "sentence":
        g = match_matrix([refs[n] for n in names], [ref_of(r) for r in every], policy="overlap")
        n = len(every)
    else:
        spans = [(x.doc, x.s_start, x.s_end) for rs in refs.values() for x in rs]
        spans += [(x.doc, x.o_start, x.o_end) for rs in refs.values() for x in rs]
        gold = [GoldTriple(*f) for f in sorted(facts, key=repr)]
        g = match_matrix([refs[n] for n in names], gold, policy="cluster", clusters=span_clusters(ents, spans))
        n = len(gold)
    for i, name in enumerate(names):
        truth["systems"][name][f"recall_{protocol}"] = float(g[i].sum() / n)
    truth[f"true_{protocol}"] = n


if __name__ == "__main__":
    raise SystemExit(main())
