"""``unpooled evaluate``: run every pending submission of a corpus to a score; print the leaderboard."""

from __future__ import annotations

import json
import sys

from unpooled.service.evaluations.policy import SERVICE_LEVELS

from ..main import PROBABILITY, REPLICATES, SEED, CommandError, integer, setup_django


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="sample, annotate (simulated crowd by default) and score every pending "
                                        "submission of a corpus; print the leaderboard")
    p.add_argument("--corpus", required=True, help="the stored corpus whose pending submissions are evaluated")
    p.add_argument("--crowd", choices=("simulated", "inhouse", "mturk"), default="simulated",
                   help="who answers the verification tasks: a simulated crowd (default), in-house annotators on "
                        "the web pages, or Mechanical Turk")
    p.add_argument("--accuracy", type=PROBABILITY, default=0.8, help="simulated annotators' accuracy (0.8)")
    p.add_argument("--relation-accuracy", metavar="SPEC",
                   help="simulated verification accuracy by relation, e.g. 'P108,P463=0.75/0.45; *=0.97/0.07': groups "
                        "of relations with one accuracy or SENSITIVITY/FALSE_POSITIVE_RATE ('*': every other "
                        "relation; relations no group names: --accuracy)")
    p.add_argument("--annotators", type=integer(1, 10_000), default=5, help="simulated annotators (5)")
    p.add_argument("--labels", type=integer(1, 1_000_000), default=150, help="draws per pending submission in the first round (150)")
    p.add_argument("--documents", type=integer(0, 1_000_000), default=40,
                   help="documents to annotate exhaustively when none are (40: fewer are warned about)")
    p.add_argument("--target-width", type=float, help="draw more until each pending F1 interval is at most this wide "
                                                      "(the anytime-valid interval unless --width-of fixed-n)")
    p.add_argument("--width-of", choices=("anytime", "fixed-n"), default="anytime",
                   help="which F1 interval --target-width is met by: the anytime-valid one, valid however often it "
                        "is looked at (default), or the fixed-n 90%% interval (fewer labels)")
    p.add_argument("--separate", type=int, nargs=2, metavar=("SUB_A", "SUB_B"),
                   help="instead: annotate these two submissions (ids) in rounds of 50 draws each until their "
                        "anytime-valid F1 intervals are disjoint (or --max-labels draws each), and report the labels "
                        "that saved against annotating both to --max-labels")
    p.add_argument("--max-labels", type=integer(1, 1_000_000), default=1000,
                   help="--separate: draws per submission at most, the plan the savings are counted against (1000)")
    p.add_argument("--level", choices=SERVICE_LEVELS, default="instance",
                   help="how instances are weighted: instance (micro precision), relation (macro over relations) or "
                        "entity (macro over subject entities) (instance)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the samples and of the simulated crowd (0)")
    p.add_argument("--controls", type=integer(0, 10_000), default=None,
                   help="gold control items to create first (corpus with a gold layer and none yet); they calibrate "
                        "the crowd's error rates (default: 100 with the simulated crowd, else 0)")
    p.add_argument("--coverage-trials", type=integer(1, 10_000), metavar="N",
                   help="instead: run the whole evaluation N times (seeds --seed ..) in a rolled-back transaction and "
                        "report how often each method's 90%% intervals hold the truth (gold-layer corpora)")
    p.add_argument("--replicates", type=REPLICATES, default=100,
                   help="bootstrap re-estimates of the error rates per coverage trial (100)")
    p.add_argument("--reference", action="store_true",
                   help="also score the human reference (the exhaustive annotation as a submission): its samples are "
                        "verified by annotators who did not annotate the document (the simulated crowd gets at "
                        "least 8 annotators for them)")
    p.add_argument("--json", action="store_true", help="print the leaderboard rows as JSON")
    p.set_defaults(func=cmd_evaluate)


def relation_accuracy_option(args) -> tuple:
    """``--relation-accuracy`` parsed (:func:`~unpooled.core.annotation.crowd.parse_relation_accuracy`); ()
    without it."""
    from unpooled.core.annotation.crowd import parse_relation_accuracy
    from unpooled.core.errors import InvalidInputError

    if not args.relation_accuracy:
        return ()
    try:
        return parse_relation_accuracy(args.relation_accuracy)
    except InvalidInputError as e:
        raise CommandError(f"--relation-accuracy: {e}") from None


def _fmt(v, lo, hi) -> str:
    if v is None:
        return f"{'-':>21}"
    return f"{v:6.3f} [{lo:5.3f}, {hi:5.3f}]"


def _opt(v, fmt="6.3f") -> str:
    return "-" if v is None else format(v, fmt)


#: methods --coverage-trials prints without --json (every method is in the JSON)
SHOWN = ("current", "none/wilson", "dawid-skene/wilson", "controls+recall/raw-wilson+rates",
         "dawid-skene+recall/raw-wilson+rates", "semi+recall/raw-wilson+rates")


def cmd_coverage(args, corpus) -> int:
    from unpooled.progress import progress_bar
    from unpooled.bench.coverage import run_coverage

    if not corpus.has_gold:
        raise CommandError(f"--coverage-trials: corpus {corpus.name} has no gold layer to compare with")
    bar = progress_bar(total=args.coverage_trials, desc="coverage trials", unit="trial")
    rep = run_coverage(corpus, args.coverage_trials, accuracy=args.accuracy, annotators=args.annotators,
                       relation_rates=args.relation_rates,
                       labels=args.labels, documents=args.documents,
                       controls=100 if args.controls is None else args.controls, replicates=args.replicates,
                       seed=args.seed, level=args.level, progress=lambda k: bar.update(1))
    bar.close()
    rows = rep.table()
    if args.json:
        print(json.dumps({"trials": rep.trials, "settings": rep.settings, "truth": rep.truth,
                          "seconds": round(rep.seconds, 1), "rows": rows}))
        return 0
    print(f"coverage of the 90% intervals over {rep.trials} trial(s) of the whole evaluation "
          f"({rep.settings['labels']} draws per system, {rep.settings['documents']} exhaustive documents, "
          f"crowd {_crowd_said(rep.settings)}, {rep.settings['controls']} gold controls); truth from the "
          "gold layer")
    print(f"{'method':<36} {'system':<32} {'':<3} {'truth':>7} {'cover':>6} {'bias':>7} {'rmse':>6} {'width':>6}")
    for r in sorted(rows, key=lambda r: (SHOWN.index(r["method"]) if r["method"] in SHOWN else 99, r["method"],
                                         r["system"], ("p", "r", "f1").index(r["metric"]))):
        if r["method"] not in SHOWN:
            continue
        print(f"{r['method']:<36} {r['system'][:32]:<32} {r['metric']:<3} {r['truth']:7.4f} {r['coverage']:6.2f} "
              f"{r['bias']:+7.4f} {r['rmse']:6.4f} {r['width']:6.4f}")
    for method, (k, n) in sorted(rep.summary().items(), key=lambda kv: -kv[1][0]):
        if method in SHOWN:
            print(f"{method}: coverage at least 0.80 for {k} of {n} (system, metric) pairs")
    print(f"{len({r['method'] for r in rows})} methods compared (--json lists them all); {rep.seconds:.0f} s")
    return 0


def _reference(args, corpus, crowd) -> dict | None:
    """Score the human reference after the systems (``--reference``); its row as a dict, or None."""
    from unpooled.service.annotation.actions import reaggregate
    from unpooled.service.crowd.base import SimulatedBackend
    from unpooled.service.evaluations import reference

    got = reference.request(corpus, rng=args.seed)
    if got.get("reference") is None:
        print("warning: no completely annotated exhaustive document: no human reference")
        return None
    if isinstance(crowd, SimulatedBackend):  # the makers of a document's annotation may not verify it
        crowd = SimulatedBackend(annotators=max(args.annotators, 8), accuracy=args.accuracy, seed=args.seed + 1,
                                 relation_rates=args.relation_rates)
    crowd.publish(corpus)
    crowd.collect(corpus)
    reaggregate(corpus)
    s = reference.score(corpus)
    if s is None:
        return None
    return {"submission": s.submission_id, "team": "", "run": "human reference", "level": s.level, "p": s.p,
            "p_lo": s.p_lo, "p_hi": s.p_hi, "r": s.r, "r_lo": s.r_lo, "r_hi": s.r_hi, "f1": s.f1, "f1_lo": s.f1_lo,
            "f1_hi": s.f1_hi, "draws": s.draws, "truth": s.details.get("truth"), "sample": s.details.get("sample")}


def cmd_evaluate(args) -> int:
    if args.target_width is not None and not 0 < args.target_width < 1:
        raise CommandError(f"--target-width {args.target_width}: expected a width in (0, 1)")
    args.relation_rates = relation_accuracy_option(args)
    setup_django()
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import InHouseBackend, MTurkCrowd, SimulatedBackend
    from unpooled.service.evaluations.run import evaluate

    try:
        corpus = Corpus.objects.select_related("schema").get(name=args.corpus)
    except Corpus.DoesNotExist:
        names = ", ".join(Corpus.objects.values_list("name", flat=True)) or "none yet"
        raise CommandError(f"--corpus {args.corpus!r}: no such corpus (stored: {names})") from None
    from unpooled.service.annotation.sampling import sample_size_warning

    few = sample_size_warning(corpus, args.documents)
    if few:
        print(f"warning: {few}", file=sys.stderr)
    if args.coverage_trials is not None:
        return cmd_coverage(args, corpus)
    controls = args.controls if args.controls is not None else (100 if args.crowd == "simulated" else 0)
    if args.crowd == "simulated":
        if not corpus.has_gold:
            raise CommandError(f"--crowd simulated: corpus {corpus.name} has no gold layer to answer from")
        crowd = SimulatedBackend(annotators=args.annotators, accuracy=args.accuracy, seed=args.seed,
                                 relation_rates=args.relation_rates)
    elif args.crowd == "mturk":
        crowd = MTurkCrowd()
        if not crowd.base_url:
            raise CommandError("--crowd mturk: set UNPOOLED_PUBLIC_URL, the public URL of this service (HITs send "
                               "workers to its task pages)")
    else:
        crowd = InHouseBackend()
    if args.separate:
        return cmd_separate(args, corpus, crowd, controls)
    rep = evaluate(corpus, crowd=crowd, labels=args.labels, documents=args.documents,
                   target_width=args.target_width, level=args.level, seed=args.seed, width_of=args.width_of,
                   controls=controls)
    human = _reference(args, corpus, crowd) if args.reference else None
    keys = ("submission", "team", "run", "level", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi",
            "labels_new", "labels_reused", "p_cs_lo", "p_cs_hi", "r_cs_lo", "r_cs_hi", "f1_cs_lo", "f1_cs_hi")
    inside = None
    if corpus.has_gold and rep.rows:
        from unpooled.service.evaluations.truth import attach_truth

        inside = attach_truth(corpus, rep.rows, level=args.level)
        keys += ("p_true", "r_true", "f1_true")
    if args.json:
        print(json.dumps([{k: r.get(k) for k in keys} for r in rep.rows]
                         + ([{"reference": True, **human}] if human else [])))
        return 0
    _print_report(args, rep, human, inside)
    return 0


def _print_report(args, rep, human, inside) -> None:
    """:func:`cmd_evaluate`'s table: every submission's intervals (the truth beside where the gold layer gives it),
    the human reference, the anytime-valid F1 intervals and the warnings."""
    truth_col = f" {'true P/R/F1':>20}" if inside is not None else ""
    print(f"{'#':>3} {'team/run':<40} {'precision':>21} {'recall':>21} {'F1':>21}{truth_col} {'new':>5} {'reused':>6}")
    for r in rep.rows:
        true = (f" {_opt(r.get('p_true'), '.3f'):>6}/{_opt(r.get('r_true'), '.3f'):>6}/{_opt(r.get('f1_true'), '.3f'):>6}"
                if inside is not None else "")
        print(f"{r['submission']:>3} {(r['team'] + '/' + r['run'])[:40]:<40} {_fmt(r['p'], r['p_lo'], r['p_hi'])} "
              f"{_fmt(r['r'], r['r_lo'], r['r_hi'])} {_fmt(r['f1'], r['f1_lo'], r['f1_hi'])}{true} "
              f"{r['labels_new']:>5} {r['labels_reused']:>6}")
    if human:
        tr = human.get("truth") or {}
        true = (f" {_opt(tr.get('p'), '.3f'):>6}/{_opt(tr.get('r'), '.3f'):>6}/{_opt(tr.get('f1'), '.3f'):>6}"
                if inside is not None else "")
        print(f"{'-':>3} {'human reference (exhaustive annotation)':<40} {_fmt(human['p'], human['p_lo'], human['p_hi'])} "
              f"{_fmt(human['r'], human['r_lo'], human['r_hi'])} {_fmt(human['f1'], human['f1_lo'], human['f1_hi'])}"
              f"{true} {human['draws']:>5} {'':>6}")
    print(f"90% intervals; {rep.rows[0]['estimator'] if rep.rows else ''} estimator; "
          f"{rep.rows[0]['exhaustive_documents'] if rep.rows else 0} exhaustive documents; {rep.rounds} round(s)"
          + (f" until the {rep.width_of} F1 interval was at most {args.target_width:g} wide (or 1,000 draws)"
             if args.target_width is not None else ""))
    if rep.rows and rep.rows[0].get("f1_cs_lo") is not None:
        print("anytime-valid 90% F1 intervals (valid however often they are looked at): " + "; ".join(
            f"{r['submission']} [{r['f1_cs_lo']:.3f}, {r['f1_cs_hi']:.3f}]" for r in rep.rows[:10]
            if r.get("f1_cs_lo") is not None) + (" ..." if len(rep.rows) > 10 else ""))
    if inside is not None:
        print(f"truth inside the 90% interval: {inside[0]} of {inside[1]} (system, metric) pairs "
              "(truth from the gold layer: unpooled.service.evaluations.truth)")
    for w in rep.warnings:
        print(f"warning: {w}")


def cmd_separate(args, corpus, crowd, controls: int) -> int:
    """``--separate A B``: annotate the pair until their anytime-valid F1 intervals are disjoint; the report."""
    from unpooled.service.evaluations.run import separate
    from unpooled.service.submissions.models import Submission

    subs = {s.pk: s for s in Submission.objects.filter(corpus=corpus, pk__in=args.separate)}
    missing = [pk for pk in args.separate if pk not in subs]
    if missing or args.separate[0] == args.separate[1]:
        raise CommandError(f"--separate {args.separate[0]} {args.separate[1]}: expected two different submissions of "
                           f"corpus {corpus.name}" + (f" (no submission {missing[0]} there)" if missing else ""))
    rep = separate(corpus, subs[args.separate[0]], subs[args.separate[1]], crowd=crowd, level=args.level,
                   max_labels=args.max_labels, seed=args.seed, documents=args.documents, controls=controls)
    if args.json:
        print(json.dumps({"submissions": list(rep.submissions), "separated": rep.separated, "better": rep.better,
                          "rounds": rep.rounds, "draws": rep.draws, "planned": rep.planned,
                          "labels_saved": rep.labels_saved, "f1_cs": rep.f1_cs}))
        return 0
    for pk in rep.submissions:
        lo, hi = rep.f1_cs[pk]
        say = "-" if lo is None else f"[{lo:.3f}, {hi:.3f}]"
        print(f"submission {pk} ({subs[pk].team.name}/{subs[pk].run_id}): {rep.draws[pk]} draws, anytime-valid 90% "
              f"F1 interval {say}")
    if rep.separated:
        print(f"separated after {rep.rounds} round(s): submission {rep.better} is better; {rep.labels_saved} labels "
              f"saved against annotating both to {rep.planned} draws (draws not made: an upper bound, a draw of a "
              "labelled instance costs none)")
    else:
        print(f"not separated at {rep.planned} draws each ({rep.rounds} round(s)): no labels saved")
    return 0


def _crowd_said(settings: dict) -> str:
    """The simulated crowd of a coverage run in words: its accuracy, or its rates by relation."""
    groups = settings.get("relation_rates") or []
    if not groups:
        return f"accuracy {settings['accuracy']}"
    return "by relation " + "; ".join(f"{','.join(n) if isinstance(n, list) else n}={a:g}/{b:g}"
                                      for n, a, b in groups)
