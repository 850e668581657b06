"""``unpooled submit`` and ``unpooled submission list|export``."""

from __future__ import annotations

import json
import sys

from ..main import CommandError, Exit, setup_django


def register(sub) -> None:
    p = sub.add_parser("submit", help="validate and store a submission (atomically)")
    p.add_argument("file")
    p.add_argument("--corpus", required=True)
    p.add_argument("--team", required=True)
    p.add_argument("--run", help="run name (default: the TAC run id line, else the file name)")
    p.add_argument("--format", choices=("tac", "jsonl"), help="detected when omitted")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_submit)

    s = sub.add_parser("submission", help="list and export stored submissions")
    ss = s.add_subparsers(dest="submission_command", metavar="ACTION")
    ss.required = True
    ls = ss.add_parser("list", help="list stored submissions")
    ls.add_argument("--corpus")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
    ex = ss.add_parser("export", help="write a stored submission back as a file")
    ex.add_argument("id", type=int)
    ex.add_argument("--format", choices=("tac", "jsonl"), required=True)
    ex.add_argument("-o", "--output", help="output file (default: standard output)")
    ex.set_defaults(func=cmd_export)


def cmd_submit(args) -> int:
    from pathlib import Path

    if not Path(args.file).is_file():
        raise CommandError(f"{args.file}: no such file")
    setup_django()
    from unpooled.service.submissions.actions import do_ingest_submission

    res = do_ingest_submission(args.file, args.corpus, args.team, args.run, args.format)
    if args.json:
        print(json.dumps(res.to_dict()))
        return Exit.OK if res.ok else Exit.FINDINGS
    if not res.ok:
        res.report.write_text(sys.stdout)
        print("submission rejected: nothing was stored", file=sys.stderr)
        return Exit.FINDINGS
    sub = res.submission
    if res.duplicate_of is not None:
        print(f"already submitted: this file is submission {sub.pk} ({sub.team.name}/{sub.run_id}); nothing new stored")
        return Exit.OK
    if res.report.n_warnings:
        res.report.write_text(sys.stdout, limit=20)
    c = sub.counts
    print(f"submission {sub.pk}: {sub.team.name}/{sub.run_id} on {sub.corpus.name}: {c.get('instances', 0):,} instances, "
          f"{c.get('entities', 0):,} entities, {c.get('mentions', 0):,} mentions, "
          f"{res.report.n_warnings} warning(s)")
    return Exit.OK


def _row(s) -> dict:
    return {"id": s.pk, "corpus": s.corpus.name, "team": s.team.name, "run": s.run_id, "format": s.format,
            "status": s.status, "created": s.created.isoformat(), "counts": s.counts}


def cmd_list(args) -> int:
    setup_django()
    from unpooled.service.submissions.models import Submission

    qs = Submission.objects.select_related("corpus", "team")
    if args.corpus:
        qs = qs.filter(corpus__name=args.corpus)
    rows = [_row(s) for s in qs]
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        print(f"{r['id']:>5} {r['corpus']:<20} {r['team'] + '/' + r['run']:<40} {r['counts'].get('instances', 0):>9,} instances")
    return 0


def cmd_export(args) -> int:
    setup_django()
    from unpooled.service.submissions.actions import export_submission, get_submission

    sub = get_submission(args.id)
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="\n") as out:
            n = export_submission(sub, args.format, out)
        print(f"wrote {n:,} lines to {args.output}", file=sys.stderr)
    else:
        export_submission(sub, args.format, sys.stdout)
    return 0
