"""``unpooled corpus load|list``."""

from __future__ import annotations

import json
import sys

from ..main import setup_django
from unpooled.progress import progress_bar

from unpooled.core.corpus import FORMATS


def register(sub) -> None:
    p = sub.add_parser("corpus", help="load and list corpora")
    cs = p.add_subparsers(dest="corpus_command", metavar="ACTION")
    cs.required = True
    load = cs.add_parser("load", help="load documents from a file or folder into a new corpus")
    load.add_argument("path", help="a corpus file or folder (DocRED JSON, TAC source XML folder, JSONL)")
    load.add_argument("--format", choices=FORMATS, help="source format (detected when omitted)")
    load.add_argument("--name", required=True, help="corpus name (letters, digits, - and _)")
    load.add_argument("--schema", help="relation schema: tac-kbp, docred or a schema JSON file "
                                       "(default: docred for DocRED sources, else tac-kbp)")
    load.add_argument("--title", default="", help="a human title shown on the corpus page")
    load.add_argument("--json", action="store_true", help="print the stored corpus as JSON")
    load.set_defaults(func=cmd_load)
    ls = cs.add_parser("list", help="list stored corpora")
    ls.add_argument("--json", action="store_true", help="print the corpora as JSON")
    ls.set_defaults(func=cmd_list)


def cmd_load(args) -> int:
    import re

    from unpooled.core.corpus import detect_format

    from ..main import CommandError

    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.name):
        raise CommandError(f"--name {args.name!r}: use letters, digits, '-' and '_' only")
    fmt = args.format or detect_format(args.path)
    setup_django()
    from unpooled.service.corpora.actions import do_load_corpus

    with progress_bar(desc=f"loading {args.name}", unit="doc") as bar:
        corpus = do_load_corpus(args.path, fmt, args.name, schema=args.schema, title=args.title, progress=bar.update)
    row = _row(corpus)
    if args.json:
        print(json.dumps(row))
    else:
        print(f"loaded corpus {corpus.name}: {row['documents']:,} documents, {row['sentences']:,} sentences, "
              f"{row['gold_relations']:,} gold relations; schema {row['schema']}")
    return 0


def _row(c) -> dict:
    return {"name": c.name, "title": c.title, "format": c.source_format, "schema": c.schema.name,
            "documents": c.n_documents, "sentences": c.n_sentences, "gold_relations": c.n_gold_relations,
            "source": c.source}


def cmd_list(args) -> int:
    setup_django()
    from unpooled.service.corpora.models import Corpus

    rows = [_row(c) for c in Corpus.objects.select_related("schema")]
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no corpora yet: `unpooled corpus load PATH --format docred --name NAME`", file=sys.stderr)
        return 0
    print(f"{'name':<24} {'format':<7} {'schema':<26} {'documents':>9} {'gold rel.':>9}")
    for r in rows:
        print(f"{r['name']:<24} {r['format']:<7} {r['schema']:<26} {r['documents']:>9,} {r['gold_relations']:>9,}")
    return 0
