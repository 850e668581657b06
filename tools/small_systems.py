"""Write small systems of known size and precision from a DocRED-format corpus, for coverage runs.

Each system is ``size`` relation instances: ``round(size * precision)`` gold relations (correct) and the rest
wrong ones (a gold entity pair of the document with a relation of the corpus that does not hold between them),
drawn from the whole corpus in a random order. The true precision is exact by construction (the corpus's gold
layer is its truth). Used to check that the published intervals of small systems cover their truth when they are
evaluated beside a large system through the whole service pipeline::

    unpooled corpus load ../shared/data/redocred/dev_revised.json --format docred --name cov
    python tools/small_systems.py ../shared/data/redocred/dev_revised.json --out small/ \\
        --sizes 6,15,30,60 --precisions 0.3,0.5,0.7,0.92
    for f in small/*.jsonl; do unpooled submit "$f" --corpus cov --team "$(basename "$f" .jsonl)"; done
    unpooled evaluate --corpus cov --coverage-trials 100 --json

Usage: ``python tools/small_systems.py CORPUS.json --out DIR [--sizes ...] [--precisions ...] [--seed S]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from unpooled.core.corpus import iter_documents


def candidates(path: Path):
    """Every gold relation and every wrong (pair, relation) of the corpus, as JSONL rows."""
    docs = list(iter_documents(path, "docred"))
    preds = sorted({r.predicate for d in docs for r in d.relations})
    right, wrong = [], []

    def row(doc, h, p, t):
        a, b = doc.entities[h].mentions[0], doc.entities[t].mentions[0]
        return {"doc": doc.id, "predicate": p, "subject": {"start": a.start, "end": a.end, "entity": f"{doc.id}/{h}"},
                "object": {"start": b.start, "end": b.end, "entity": f"{doc.id}/{t}"}}

    for doc in docs:
        holds = {}
        for r in doc.relations:
            holds.setdefault((r.subject, r.object), set()).add(r.predicate)
            right.append(row(doc, r.subject, r.predicate, r.object))
        for (h, t) in list(holds)[:3]:  # pairs of the gold layer, with a relation that does not hold
            for p in preds[:5]:
                if p not in holds[(h, t)]:
                    wrong.append(row(doc, h, p, t))
    return right, wrong


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", default="6,15,30,60")
    ap.add_argument("--precisions", default="0.3,0.5,0.7,0.92")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    right, wrong = candidates(a.corpus)
    a.out.mkdir(parents=True, exist_ok=True)
    for n in (int(x) for x in a.sizes.split(",")):
        for p in (float(x) for x in a.precisions.split(",")):
            k = int(round(n * p))
            rows = [right[i] for i in rng.choice(len(right), k, replace=False)]
            rows += [wrong[i] for i in rng.choice(len(wrong), n - k, replace=False)]
            path = a.out / f"small-{n}-p{round(100 * k / n)}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            print(f"{path}: {n} instances, true precision {k / n:.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
