"""``unpooled bench ingest|score|rescore|pages|shared-task|lease|controls|core|documents``: benchmarks that print their figures."""

from __future__ import annotations

from unpooled.core.names import WEIGHTS

from ..main import SEED


def register(sub) -> None:
    p = sub.add_parser("bench", help="run a benchmark and print its figures")
    bs = p.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    bs.required = True
    ing = bs.add_parser("ingest", help="validate and store a generated TAC KB of --lines lines "
                                       "(database from DATABASE_URL; default a fresh SQLite file)")
    ing.add_argument("--lines", type=int, default=1_000_000, help="lines of the generated KB (1,000,000)")
    ing.add_argument("--seed", type=SEED, default=0, help="random seed of the generated KB (0)")
    ing.add_argument("--json", action="store_true", help='print {"lines", "seconds", "peak_rss_mb", "database"}')
    ing.set_defaults(func=cmd_ingest)
    sc = bs.add_parser("score", help="estimate P/R/F1 with bootstrap intervals for many systems on one core")
    sc.add_argument("--systems", type=int, default=100, help="systems scored (100)")
    sc.add_argument("--labels", type=int, default=500, help="labelled draws per system")
    sc.add_argument("--exhaustive", type=int, default=1000, help="exhaustively found true instances")
    sc.add_argument("--replicates", type=int, default=1000, help="bootstrap replicates")
    sc.add_argument("--weights", choices=WEIGHTS, default="balance", help="how the joint estimator weights the systems' samples (balance)")
    sc.add_argument("--instances", type=int, default=3000, help="instances per system (about; the universe is "
                                                                "at least ten times that)")
    sc.add_argument("--votes", action="store_true", help="score from simulated crowd votes as the service does "
                                                         "(no bootstrap)")
    sc.add_argument("--json", action="store_true",
                    help='print {"systems", "replicates", "seconds", "instances", "votes", "peak_rss_mb"}')
    sc.set_defaults(func=cmd_score)
    dc = bs.add_parser("documents", help="the document-sample analysis (organiser page, corpus analyse) on "
                                         "Re-DocRED: read, analyse per scheme, page cold and cached")
    dc.add_argument("--copies", type=int, default=1, help="repeat Re-DocRED's 1,000 documents this many times")
    dc.add_argument("--size", type=int, default=100, help="documents per sample")
    dc.add_argument("--draws", type=int, default=3, help="samples per scheme")
    dc.add_argument("--json", action="store_true", help="print the figures as JSON")
    dc.set_defaults(func=cmd_documents)
    rs = bs.add_parser("rescore", help="re-score every submission of a corpus after a batch of new labels "
                                       "(incremental; database from DATABASE_URL, default a fresh SQLite file)")
    rs.add_argument("--systems", type=int, default=100, help="submissions")
    rs.add_argument("--instances", type=int, default=3000, help="instances per submission (about)")
    rs.add_argument("--labels", type=int, default=50, help="new labels per batch")
    rs.add_argument("--draws", type=int, default=150, help="draws per submission before the batches")
    rs.add_argument("--documents", type=int, default=30, help="exhaustively annotated documents")
    rs.add_argument("--exhaustive", type=int, default=0,
                    help="of them (at least as many), those with an entity layer (the entity scores' documents)")
    rs.add_argument("--repeats", type=int, default=3, help="label batches timed (the median is reported)")
    rs.add_argument("--seed", type=SEED, default=0, help="random seed of the generated corpus and labels (0)")
    rs.add_argument("--keep", action="store_true", help="keep the generated corpus in the database")
    rs.add_argument("--verbose", action="store_true", help="report progress on stderr")
    rs.add_argument("--json", action="store_true",
                    help='print {"rescore_seconds", "rescore_scoring_seconds", "from_scratch_seconds", "cold", ...}')
    rs.set_defaults(func=cmd_rescore)
    pg = bs.add_parser("pages", help="p50/p95/p99 latency of the leaderboard, submission and annotation task pages "
                                     "under concurrent clients, served by gunicorn (database from DATABASE_URL; "
                                     "default a fresh SQLite file)")
    pg.add_argument("--submissions", type=int, default=100, help="published submissions")
    pg.add_argument("--clients", type=int, default=20, help="concurrent clients in closed loop")
    pg.add_argument("--requests", type=int, default=1000, help="timed requests per page (after a warm-up)")
    pg.add_argument("--instances", type=int, default=3000, help="instances per submission (about)")
    pg.add_argument("--history", type=int, default=20, help="score generations per submission and level")
    pg.add_argument("--workers", type=int, default=None,
                    help="gunicorn worker processes (default as unpooled serve: 2 per CPU)")
    pg.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker (unpooled serve: 1)")
    pg.add_argument("--pages", help="comma-separated pages to drive (default all: leaderboard_instance, "
                                    "leaderboard_relation, leaderboard_entity, submission, task_verify, task_entities)")
    pg.add_argument("--seed", type=SEED, default=0, help="random seed of the generated data (0)")
    pg.add_argument("--keep", action="store_true", help="keep the database (PostgreSQL: unpooled_bench_pages; SQLite: "
                    "the data directory, named on stderr)")
    pg.add_argument("--verbose", action="store_true", help="report progress on stderr")
    pg.add_argument("--json", action="store_true", help='print {"pages": {PAGE: {"p50_ms", "p95_ms", ...}}, ...}')
    pg.set_defaults(func=cmd_pages)
    _register_shared_task(bs)
    _register_lease(bs)
    _register_controls(bs)
    co = bs.add_parser("core", help="throughput of the core's sentence splitters (MB/s), of the simulation "
                                    "world's generation (s) and of the TAC reader on hostile markup (s)")
    co.add_argument("--json", action="store_true",
                    help='print {"split_sentences_mb_per_s", "split_markup_sentences_mb_per_s", "make_world_seconds", '
                         '"hostile_tac_seconds"}')
    co.set_defaults(func=cmd_core)


def _register_lease(bs) -> None:
    le = bs.add_parser("lease", help="per call: a lease (the crowd's and the web queue's), an answer, the count of "
                                     "items left, as the open verification items grow (SQLite, and PostgreSQL with "
                                     "--postgres)")
    le.add_argument("--open-tasks", default="500,5000", metavar="N,N",
                    help="open verification items of each size measured, comma-separated (500,5000)")
    le.add_argument("--annotators", type=int, default=6, help="in-house annotators, every other one in a "
                                                              "submitting team (6)")
    le.add_argument("--rounds", type=int, default=5, help="timed rounds: each annotator calls each operation once "
                                                          "a round (5)")
    le.add_argument("--controls", type=int, default=20, help="gold controls (20)")
    le.add_argument("--postgres", default=None, metavar="URL",
                    help="the PostgreSQL server (a database unpooled_bench_lease is made and dropped there; the "
                         "URL's query is kept: ?options=-c%%20jit%%3Doff runs it with JIT off; default "
                         "DATABASE_URL when it is PostgreSQL; none: SQLite only)")
    le.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    le.add_argument("--seed", type=SEED, default=0, help="random seed of the generated corpus (0)")
    le.add_argument("--keep", action="store_true", help="PostgreSQL: keep the database unpooled_bench_lease")
    le.add_argument("--json", action="store_true",
                    help='print one object per database: {"sizes": [{"open_tasks", "ops": {OP: {"median_ms", '
                         '"p95_ms", "queries", ...}}}], ...}')
    le.set_defaults(func=cmd_lease)


def cmd_lease(args) -> int:
    import os

    from unpooled.bench.lease import run

    from ..main import CommandError

    try:
        sizes = sorted({int(n) for n in args.open_tasks.split(",") if n.strip()})
    except ValueError:
        raise CommandError(f"--open-tasks: expected comma-separated numbers, got {args.open_tasks!r}") from None
    if not sizes or min(sizes + [args.annotators, args.rounds]) < 1 or args.controls < 0:
        raise CommandError("--open-tasks, --annotators and --rounds must be positive, --controls not negative")
    url = os.environ.get("DATABASE_URL", "")
    postgres = args.postgres or (url if url.startswith(("postgres://", "postgresql://")) else None)
    if args.no_sqlite and not postgres:
        raise CommandError("--no-sqlite needs --postgres URL (or DATABASE_URL naming a PostgreSQL server)")
    return run(open_tasks=sizes, annotators=args.annotators, rounds=args.rounds, controls=args.controls,
               postgres=postgres, sqlite=not args.no_sqlite, seed=args.seed, keep=args.keep, as_json=args.json)


def _register_controls(bs) -> None:
    ct = bs.add_parser("controls", help="whether the server's time on a task page or an answer tells a gold control "
                                        "from a real item (Re-DocRED from UNPOOLED_SHARED_DATA; database from "
                                        "DATABASE_URL, default a fresh SQLite file)")
    ct.add_argument("--documents", type=int, default=10, help="Re-DocRED dev documents in the corpus")
    ct.add_argument("--items", type=int, default=150, help="verification items asked for")
    ct.add_argument("--controls", type=int, default=60, help="gold controls")
    ct.add_argument("--annotators", type=int, default=6, help="in-house annotators (each answers every item once)")
    ct.add_argument("--reloads", type=int, default=6, help="views of each task page before its answer")
    ct.add_argument("--seed", type=SEED, default=0, help="random seed of the controls and the answers (0)")
    ct.add_argument("--json", action="store_true",
                    help='print {"get": {"control_median_ms", "item_median_ms", "mann_whitney_p", "told_apart"}, '
                         '"post": {...}, ...}')
    ct.set_defaults(func=cmd_controls)


def cmd_controls(args) -> int:
    from unpooled.bench.controls import run

    if min(args.documents, args.items, args.controls, args.annotators, args.reloads) < 1:
        from ..main import CommandError

        raise CommandError("--documents, --items, --controls, --annotators and --reloads must be positive")
    return run(documents=args.documents, items=args.items, controls=args.controls, annotators=args.annotators,
               reloads=args.reloads, seed=args.seed, as_json=args.json)


def _register_shared_task(bs) -> None:
    st = bs.add_parser("shared-task", help="a shared task end to end: Re-DocRED documents with their gold layer, "
                                           "teams' KBs uploaded at once, evaluated by serve's task workers with the "
                                           "simulated crowd (SQLite with 1 worker, and PostgreSQL with each --workers)")
    st.add_argument("--documents", type=int, default=1000, help="documents (Re-DocRED's 1,000, repeated beyond)")
    st.add_argument("--submissions", type=int, default=20, help="teams' KBs uploaded at once (20)")
    st.add_argument("--draws", type=int, default=100, help="draws per submission (100)")
    st.add_argument("--exhaustive", type=int, default=20, help="documents annotated exhaustively (20)")
    st.add_argument("--instances", default=None, metavar="MIN-MAX",
                    help="each KB's size in instances, between MIN and MAX with density 1/size^2 (many small teams, "
                         "a few large), e.g. 20000-200000: 100 submissions of about 5.1M instances in all; default: "
                         "each team a random share of the corpus's gold relations (KBs grow with --documents)")
    st.add_argument("--limit", type=float, default=3600, metavar="SECONDS",
                    help="stop a run whose submissions are not all published after this long (3600)")
    st.add_argument("--workers", default="1,2,4", help="PostgreSQL task workers per run, comma-separated (1,2,4)")
    st.add_argument("--postgres", default=None, metavar="URL",
                    help="the PostgreSQL server (a database unpooled_bench_task is made and dropped there; default "
                         "DATABASE_URL when it is PostgreSQL; none: SQLite only)")
    st.add_argument("--no-sqlite", action="store_true", help="skip the embedded configuration (SQLite, 1 worker)")
    st.add_argument("--seed", type=SEED, default=0, help="random seed of the teams' KBs (0)")
    st.add_argument("--verbose", action="store_true", help="report progress on stderr")
    st.add_argument("--json", action="store_true", help="print one object per configuration")
    st.set_defaults(func=cmd_shared_task)


def cmd_core(args) -> int:
    from unpooled.bench.core import run

    return run(as_json=args.json)


def cmd_ingest(args) -> int:
    from unpooled.bench.ingest import run

    if args.lines < 10:
        from ..main import CommandError

        raise CommandError("--lines must be at least 10")
    return run(args.lines, as_json=args.json, seed=args.seed)


def cmd_score(args) -> int:
    from unpooled.bench.score import run

    if min(args.systems, args.labels, args.exhaustive, args.replicates, args.instances) < 1:
        from ..main import CommandError

        raise CommandError("--systems, --labels, --exhaustive, --replicates and --instances must be positive")
    return run(args.systems, args.labels, args.exhaustive, args.replicates, args.weights, as_json=args.json,
               instances=args.instances, votes=args.votes)


def cmd_documents(args) -> int:
    from unpooled.bench.documents import run

    if min(args.copies, args.size, args.draws) < 1:
        from ..main import CommandError

        raise CommandError("--copies, --size and --draws must be positive")
    return run(copies=args.copies, size=args.size, draws=args.draws, as_json=args.json)


def cmd_rescore(args) -> int:
    from unpooled.bench.rescore import run

    if min(args.systems, args.instances, args.labels, args.draws, args.documents, args.repeats) < 1:
        from ..main import CommandError

        raise CommandError("--systems, --instances, --labels, --draws, --documents and --repeats must be positive")
    if args.exhaustive < 0:
        from ..main import CommandError

        raise CommandError("--exhaustive must not be negative")
    return run(args.systems, args.instances, args.labels, draws=args.draws, documents=args.documents,
               exhaustive=args.exhaustive, repeats=args.repeats, seed=args.seed, as_json=args.json, keep=args.keep, verbose=args.verbose)


def cmd_pages(args) -> int:
    from unpooled.bench.pages import PAGES, run

    from ..main import CommandError

    if min(args.submissions, args.clients, args.requests, args.instances, args.history,
           1 if args.workers is None else args.workers, args.threads) < 1:
        raise CommandError("--submissions, --clients, --requests, --instances, --history, --workers and --threads "
                           "must be positive")
    pages = [p.strip() for p in args.pages.split(",") if p.strip()] if args.pages else None
    bad = [p for p in pages or [] if p not in PAGES]
    if bad:
        raise CommandError(f"--pages: unknown page(s) {', '.join(bad)}; expected some of {', '.join(PAGES)}")
    return run(args.submissions, args.clients, args.requests, as_json=args.json, instances=args.instances,
               history=args.history, workers=args.workers, threads=args.threads, pages=pages, seed=args.seed,
               keep=args.keep, verbose=args.verbose)


def cmd_shared_task(args) -> int:
    import os

    from unpooled.bench.shared_task import run

    from ..main import CommandError

    try:
        workers = [int(w) for w in args.workers.split(",") if w.strip()]
    except ValueError:
        raise CommandError(f"--workers: expected comma-separated numbers, got {args.workers!r}") from None
    if min([args.documents, args.submissions, args.draws, *workers] or [1]) < 1 or args.exhaustive < 0:
        raise CommandError("--documents, --submissions, --draws and --workers must be positive, --exhaustive not "
                           "negative")
    instances = None
    if args.instances is not None:
        lo, _, hi = args.instances.partition("-")
        try:
            instances = [int(lo), int(hi or lo)]
        except ValueError:
            raise CommandError(f"--instances: expected MIN-MAX, e.g. 20000-200000, got {args.instances!r}") from None
        if not 1 <= instances[0] <= instances[1]:
            raise CommandError(f"--instances: expected 1 <= MIN <= MAX, got {args.instances!r}")
    url = os.environ.get("DATABASE_URL", "")
    postgres = args.postgres or (url if url.startswith(("postgres://", "postgresql://")) else None)
    return run(documents=args.documents, submissions=args.submissions, draws=args.draws, exhaustive=args.exhaustive,
               instances=instances, limit=args.limit, workers=workers, postgres=postgres, sqlite=not args.no_sqlite,
               seed=args.seed, as_json=args.json, verbose=args.verbose)
