"""``unpooled validate FILE --corpus NAME|PATH``: check a submission without storing it."""

from __future__ import annotations

import sys
from pathlib import Path

from unpooled.core.names import CORPUS_FORMATS, KB_FORMATS

from ..main import Exit


def register(sub) -> None:
    p = sub.add_parser(
        "validate", help="check a submission against a corpus and its schema",
        description="Check a submission. --corpus is a stored corpus name, or a corpus file/folder read offline "
                    "(no database) with --corpus-format and --schema.",
    )
    p.add_argument("file", help="the submission: a TAC KB file or JSONL instances (.gz also)")
    p.add_argument("--corpus", required=True, help="stored corpus name, or a corpus path (offline)")
    p.add_argument("--format", choices=KB_FORMATS, help="submission format (detected when omitted)")
    p.add_argument("--corpus-format", choices=CORPUS_FORMATS, help="offline corpus format")
    p.add_argument("--schema", help="schema for an offline corpus (default by corpus format)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_validate)


def offline_corpus(path: str, fmt: str | None, schema_name: str | None):
    from unpooled.core.corpus import detect_format, iter_documents
    from unpooled.core.kb import InMemoryCorpus
    from unpooled.core.schema import load_schema

    fmt = fmt or detect_format(path)
    default = "docred" if fmt == "docred" else "tac-kbp"
    return InMemoryCorpus(iter_documents(path, fmt)), load_schema(schema_name or default)


def cmd_validate(args) -> int:
    from unpooled.core.kb import read_kb
    from unpooled.core.kb.lines import Limits

    if not Path(args.file).exists():
        from ..main import CommandError

        raise CommandError(f"{args.file}: no such file")
    if Path(args.corpus).exists():
        view, schema = offline_corpus(args.corpus, args.corpus_format, args.schema)
        kb, report = read_kb(args.file, view, schema, fmt=args.format, path=args.file, limits=Limits.from_env())
    else:
        from ..main import setup_django

        setup_django()
        from unpooled.service.corpora.actions import get_corpus
        from unpooled.service.submissions.actions import check_submission

        kb, report = check_submission(args.file, get_corpus(args.corpus), args.format)
    if args.json:
        print(report.to_json())
    else:
        report.write_text(sys.stdout)
    return Exit.OK if report.ok else Exit.FINDINGS
