"""``unpooled bench ingest|score``: benchmarks that print their figures."""

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
    sc = bs.add_parser("score", help="estimate P/R/F1 with bootstrap intervals for many systems on one core")
    sc.add_argument("--systems", type=int, default=100)
    sc.add_argument("--labels", type=int, default=500, help="labelled draws per system")
    sc.add_argument("--exhaustive", type=int, default=1000, help="exhaustively found true instances")
    sc.add_argument("--replicates", type=int, default=1000, help="bootstrap replicates")
    sc.add_argument("--weights", choices=("balance", "heuristic", "minvar"), default="balance")
    sc.add_argument("--json", action="store_true", help='print {"systems", "replicates", "seconds"}')
    sc.set_defaults(func=cmd_score)


def cmd_ingest(args) -> int:
    from unpooled.bench.ingest import run

    if args.lines < 10:
        from ..main import CommandError

        raise CommandError("--lines must be at least 10")
    return run(args.lines, as_json=args.json, seed=args.seed)


def cmd_score(args) -> int:
    from unpooled.bench.score import run

    if min(args.systems, args.labels, args.exhaustive, args.replicates) < 1:
        from ..main import CommandError

        raise CommandError("--systems, --labels, --exhaustive and --replicates must be positive")
    return run(args.systems, args.labels, args.exhaustive, args.replicates, args.weights, as_json=args.json)
