"""``unpooled evaluate``: run every pending submission of a corpus to a score; print the leaderboard."""

from __future__ import annotations

import json

from ..main import CommandError, setup_django


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="sample, annotate (simulated crowd by default) and score every pending "
                                        "submission of a corpus; print the leaderboard")
    p.add_argument("--corpus", required=True)
    p.add_argument("--crowd", choices=("simulated", "inhouse", "mturk"), default="simulated")
    p.add_argument("--accuracy", type=float, default=0.8, help="simulated annotators' accuracy (0.8)")
    p.add_argument("--annotators", type=int, default=5, help="simulated annotators (5)")
    p.add_argument("--labels", type=int, default=150, help="draws per pending submission in the first round (150)")
    p.add_argument("--documents", type=int, default=20, help="documents to annotate exhaustively when none are (20)")
    p.add_argument("--target-width", type=float, help="draw more until each pending F1 interval is at most this wide")
    p.add_argument("--level", choices=("instance", "relation", "entity"), default="instance")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)


def _fmt(v, lo, hi) -> str:
    if v is None:
        return f"{'-':>21}"
    return f"{v:6.3f} [{lo:5.3f}, {hi:5.3f}]"


def cmd_evaluate(args) -> int:
    if not 0 <= args.accuracy <= 1:
        raise CommandError(f"--accuracy {args.accuracy}: expected a probability in [0, 1]")
    if args.labels < 1:
        raise CommandError(f"--labels {args.labels}: at least 1")
    if args.target_width is not None and not 0 < args.target_width < 1:
        raise CommandError(f"--target-width {args.target_width}: expected a width in (0, 1)")
    setup_django()
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import InHouseBackend, MTurkCrowd, SimulatedBackend
    from unpooled.service.evaluations.actions import evaluate

    try:
        corpus = Corpus.objects.select_related("schema").get(name=args.corpus)
    except Corpus.DoesNotExist:
        names = ", ".join(Corpus.objects.values_list("name", flat=True)) or "none yet"
        raise CommandError(f"--corpus {args.corpus!r}: no such corpus (stored: {names})") from None
    if args.crowd == "simulated":
        if not corpus.has_gold:
            raise CommandError(f"--crowd simulated: corpus {corpus.name} has no gold layer to answer from")
        crowd = SimulatedBackend(annotators=args.annotators, accuracy=args.accuracy, seed=args.seed)
    elif args.crowd == "mturk":
        crowd = MTurkCrowd()
    else:
        crowd = InHouseBackend()
    rep = evaluate(corpus, crowd=crowd, labels=args.labels, documents=args.documents,
                   target_width=args.target_width, level=args.level, seed=args.seed)
    keys = ("submission", "team", "run", "level", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi",
            "labels_new", "labels_reused")
    if args.json:
        print(json.dumps([{k: r[k] for k in keys} for r in rep.rows]))
        return 0
    print(f"{'#':>3} {'team/run':<40} {'precision':>21} {'recall':>21} {'F1':>21} {'new':>5} {'reused':>6}")
    for r in rep.rows:
        print(f"{r['submission']:>3} {(r['team'] + '/' + r['run'])[:40]:<40} {_fmt(r['p'], r['p_lo'], r['p_hi'])} "
              f"{_fmt(r['r'], r['r_lo'], r['r_hi'])} {_fmt(r['f1'], r['f1_lo'], r['f1_hi'])} "
              f"{r['labels_new']:>5} {r['labels_reused']:>6}")
    print(f"90% intervals; {rep.rows[0]['estimator'] if rep.rows else ''} estimator; "
          f"{rep.rows[0]['exhaustive_documents'] if rep.rows else 0} exhaustive documents; {rep.rounds} round(s)")
    for w in rep.warnings:
        print(f"warning: {w}")
    return 0
