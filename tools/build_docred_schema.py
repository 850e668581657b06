"""Build the built-in DocRED/Wikidata relation schema from DocRED's relation list and Re-DocRED.

The schema has one canonical relation per DocRED relation id (``P19`` ...), named by
the P-id and described by its label from ``rel_info.json``.  Subject and object
types are the entity types observed for that relation in the given DocRED-format
files: every type of every mention of the head (subject) and tail (object) entity,
since an entity's mentions may carry several types.  Its usual type pairs
(``usual_pairs``, what annotators are offered first) leave out the pairs of a few
noisy triples (:data:`USUAL_MIN_TRIPLES`, :data:`USUAL_MIN_SHARE`).  There are no inverses and no
symmetric relations (DocRED labels both directions of e.g. P26 ``spouse`` as
separate triples, and scores must stay comparable with DocRED's), every relation
is list-valued, and ``type_check`` is ``warning`` because DocRED's types are noisy.

Usage (from the repository root)::

    python tools/build_docred_schema.py \\
        --rel-info ../shared/data/meta/rel_info.json \\
        ../shared/data/redocred/dev_revised.json ../shared/data/redocred/test_revised.json \\
        -o src/unpooled/core/schema/data/docred.json

The output is checked by loading it with :meth:`unpooled.core.schema.Schema.from_dict`
before it is written.  The script only reads the data files; it never copies them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ENTITY_TYPES = {
    "PER": "person",
    "ORG": "organization",
    "LOC": "location (including countries and other geopolitical entities)",
    "TIME": "time expression (date, year, period)",
    "NUM": "number",
    "MISC": "other named thing (event, work, nationality, award, ...)",
}


def observed_types(paths: list[Path]) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, int], dict]:
    """Per relation id: subject types, object types, the number of triples and the number of triples of each
    (subject type, object type) pair, over ``paths``.

    Parameters
    ----------
    paths : list of Path
        DocRED-format JSON files (a list of documents with ``vertexSet`` and ``labels``).

    Returns
    -------
    tuple of dict
        ``(subject_types, object_types, counts, pair_counts)``, each keyed by relation id.
    """
    subj: dict[str, set[str]] = {}
    obj: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    pairs: dict[str, dict[tuple[str, str], int]] = {}
    for path in paths:
        docs = json.loads(path.read_text(encoding="utf-8"))
        for doc in docs:
            types = [{m["type"] for m in entity} for entity in doc["vertexSet"]]
            for label in doc.get("labels", []):
                r = label["r"]
                subj.setdefault(r, set()).update(types[label["h"]])
                obj.setdefault(r, set()).update(types[label["t"]])
                counts[r] = counts.get(r, 0) + 1
                seen = pairs.setdefault(r, {})
                for pair in {(a, b) for a in types[label["h"]] for b in types[label["t"]]}:
                    seen[pair] = seen.get(pair, 0) + 1
    return subj, obj, counts, pairs


#: a (subject type, object type) pair is usual for a relation when at least this many of its triples, and this
#: share of them, have it (the most frequent pair always is); rarer pairs are the data's noise (P17 'country':
#: TIME -> LOC in 5 of 5,505 triples)
USUAL_MIN_TRIPLES, USUAL_MIN_SHARE = 3, 0.01


def usual_pairs(pair_counts: dict[tuple[str, str], int], n: int) -> list[list[str]]:
    """The usual (subject type, object type) pairs of a relation of ``n`` triples, in the order of the types."""
    order = list(ENTITY_TYPES)
    top = max(pair_counts.values())
    keep = [p for p, c in pair_counts.items()
            if c == top or (c >= USUAL_MIN_TRIPLES and c >= USUAL_MIN_SHARE * n)]
    return [list(p) for p in sorted(keep, key=lambda p: (order.index(p[0]), order.index(p[1])))]


def build_schema(rel_info: dict[str, str], paths: list[Path]) -> dict:
    """The schema as a JSON-ready dict.

    Parameters
    ----------
    rel_info : dict
        Relation id -> label (DocRED's ``rel_info.json``).
    paths : list of Path
        DocRED-format files whose entity types define the relations' argument types.

    Returns
    -------
    dict
        A schema in the format of :mod:`unpooled.core.schema.model`.

    Raises
    ------
    ValueError
        If a relation of ``rel_info`` never occurs in ``paths`` (its types would be unknown),
        or a file uses a relation id or entity type the schema does not define.
    """
    subj, obj, counts, pairs = observed_types(paths)
    unknown = sorted(set(counts) - set(rel_info))
    if unknown:
        raise ValueError(f"relation ids {unknown} occur in the data but not in rel_info")
    unseen = sorted(set(rel_info) - set(counts), key=lambda p: int(p[1:]))
    if unseen:
        raise ValueError(f"relation ids {unseen} never occur in {', '.join(map(str, paths))}: "
                         "their argument types are unknown")
    bad_types = sorted(set().union(*subj.values(), *obj.values()) - set(ENTITY_TYPES))
    if bad_types:
        raise ValueError(f"entity types {bad_types} are not DocRED types ({', '.join(ENTITY_TYPES)})")
    order = sorted(rel_info, key=lambda p: int(p[1:]))
    relations = [
        {
            "name": pid,
            "subject": [t for t in ENTITY_TYPES if t in subj[pid]],
            "object": [t for t in ENTITY_TYPES if t in obj[pid]],
            "cardinality": "list",
            "description": rel_info[pid],
            "usual_pairs": usual_pairs(pairs[pid], counts[pid]),
        }
        for pid in order
    ]
    sources = ", ".join(p.name for p in paths)
    return {
        "name": "docred",
        "version": "2019",
        "title": f"DocRED / Wikidata relations ({len(relations)}), argument types as observed in Re-DocRED",
        "notes": (
            f"Generated by tools/build_docred_schema.py from rel_info.json and {sources} "
            f"({sum(counts.values())} triples). No inverses or symmetric relations: DocRED labels both "
            "directions as separate triples. Types are every mention type of the head/tail entities of the "
            "relation's triples; they are noisy, so type_check is 'warning'. usual_pairs: the (subject, object) "
            f"type pairs of at least {USUAL_MIN_TRIPLES} triples and {USUAL_MIN_SHARE:.0%} of the relation's (and its "
            "most frequent pair): what annotators are offered first."
        ),
        "type_check": "warning",
        "entity_types": dict(ENTITY_TYPES),
        "value_types": {},
        "aliases": {},
        "relations": relations,
    }


def dump_schema(data: dict) -> str:
    """Schema JSON text with one relation per line (readable diffs); otherwise indented.

    Parameters
    ----------
    data : dict
        A schema dict whose last key is ``relations``.

    Returns
    -------
    str
        The JSON text, ending in a newline.
    """
    head = {k: v for k, v in data.items() if k != "relations"}
    text = json.dumps(head, ensure_ascii=False, indent=1)
    rels = ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in data["relations"])
    return text[:-2] + ',\n "relations": [\n' + rels + "\n ]\n}\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rel-info", required=True, type=Path, help="DocRED's meta/rel_info.json")
    p.add_argument("data", nargs="+", type=Path, help="Re-DocRED *_revised.json files")
    p.add_argument("-o", "--output", required=True, type=Path, help="schema JSON file to write")
    args = p.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from unpooled.core.schema import Schema

    rel_info = json.loads(args.rel_info.read_text(encoding="utf-8"))
    try:
        data = build_schema(rel_info, args.data)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    schema = Schema.from_dict(data, path=str(args.output))
    args.output.write_text(dump_schema(data), encoding="utf-8")
    print(f"wrote {args.output}: {len(schema.relations)} relations", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
