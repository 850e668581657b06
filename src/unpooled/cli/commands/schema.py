"""``unpooled schema list|show``: the relation schemas."""

from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("schema", help="list and show relation schemas")
    ss = p.add_subparsers(dest="schema_command", metavar="ACTION")
    ss.required = True
    ls = ss.add_parser("list", help="list the built-in schemas")
    ls.add_argument("--json", action="store_true", help="print the schemas as JSON")
    ls.set_defaults(func=cmd_list)
    show = ss.add_parser("show", help="show a schema's relations (a built-in name or a schema file)")
    show.add_argument("schema", help="a built-in schema name (see schema list) or a schema JSON file")
    show.add_argument("--json", action="store_true", help="print the schema file")
    show.set_defaults(func=cmd_show)


def cmd_list(args) -> int:
    from unpooled.core.schema import BUILTIN_SCHEMAS, builtin_schema

    rows = []
    for name in BUILTIN_SCHEMAS:
        s = builtin_schema(name)
        rows.append({"name": name, "schema": s.name, "title": s.title, "relations": len(s.relations),
                     "canonical": len(s.canonical_relations)})
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['name']:<10} {r['relations']:>4} relations ({r['canonical']} canonical)  {r['title']}")
    return 0


def cmd_show(args) -> int:
    from unpooled.core.schema import load_schema

    s = load_schema(args.schema)
    if args.json:
        print(s.to_json())
        return 0
    out = sys.stdout
    out.write(f"{s.name} {s.version}: {s.title}\n")
    out.write(f"entity types: {', '.join(s.entity_types)}; value types: {', '.join(s.value_types) or '-'}; "
              f"type check: {s.type_check}\n")
    rows = [("RELATION", "NAME", "SUBJECT", "OBJECT", "FLAGS", "DIRECTION")]
    for r in sorted(s.relations.values(), key=_relation_order):
        flags = [r.cardinality]
        if r.string_valued:
            flags.append("string")
        if r.symmetric:
            flags.append("symmetric")
        rows.append((r.name, r.description or "-", "/".join(sorted(r.subject_types)), "/".join(sorted(r.object_types)),
                     ", ".join(flags), f"inverse of {r.inverse_of}" if r.inverse_of else "canonical"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    widths[1] = min(widths[1], 40)
    for row in rows:
        cells = [c if len(c) <= widths[i] else c[:widths[i] - 1] + "…" for i, c in enumerate(row)]
        out.write("  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip() + "\n")
    return 0


def _relation_order(r) -> tuple:
    """Wikidata codes by number (P6 before P17), other names alphabetically, each after its kind."""
    import re

    m = re.fullmatch(r"P(\d+)", r.name)
    return (0, int(m.group(1)), "") if m else (1, 0, r.name)
