"""``unpooled bench ingest``: benchmarks that print their figures."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("bench", help="run a benchmark and print its figures")
    bs = p.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    bs.required = True
    ing = bs.add_parser("ingest", help="validate and store a generated TAC KB of --lines lines "
                                       "(database from DATABASE_URL; default a fresh SQLite file)")
    ing.add_argument("--lines", type=int, default=1_000_000)
    ing.add_argument("--seed", type=int, default=0)
    ing.add_argument("--json", action="store_true", help='print {"lines", "seconds", "peak_rss_mb", "database"}')
    ing.set_defaults(func=cmd_ingest)


def cmd_ingest(args) -> int:
    from unpooled.bench.ingest import run

    if args.lines < 10:
        from ..main import CommandError

        raise CommandError("--lines must be at least 10")
    return run(args.lines, as_json=args.json, seed=args.seed)
