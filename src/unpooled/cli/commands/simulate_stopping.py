"""``unpooled simulate stopping``: the glue of the stopping experiment (:mod:`unpooled.core.simulate.stopping`
and the boundaries' table of :mod:`unpooled.core.simulate.boundaries`)."""

from __future__ import annotations

import argparse
import time

from unpooled.progress import progress_bar

from ..main import integer


def add_stopping_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=integer(1, 100_000), default=25, metavar="N", help="draws per system per look (default 25)")
    p.add_argument("--max-draws", type=integer(1, 1_000_000), default=1000, metavar="N",
                   help="draws per system at the last look (default 1000)")
    p.add_argument("--width", type=float, default=0.10, metavar="W",
                   help="the width rule's target width of A's F1 interval (default 0.10)")
    p.add_argument("--rival-precision", type=float, default=0.55, metavar="P",
                   help="precision of the rival's own instances (default 0.55: about A's F1; 0.3: a clear gap)")
    p.add_argument("--no-boundaries", action="store_true",
                   help="skip the table comparing the boundaries (own draws, i.i.d. labels)")


def run_stopping_cli(args) -> int:
    """Coverage of P, R and F1 under stopping rules, fixed-n intervals beside confidence sequences."""
    from unpooled.core.errors import InvalidInputError
    from unpooled.core.simulate.boundaries import compare_boundaries, format_boundaries
    from unpooled.core.simulate.stopping import StoppingWorld, format_rules, rows_json, run_stopping

    from ..main import CommandError
    from .simulate import write_json

    try:
        w = StoppingWorld(batch=args.batch, max_draws=args.max_draws, width=args.width, p_b=args.rival_precision)
    except InvalidInputError as e:
        field, msg = str(e).split(": ", 1)
        raise CommandError(f"--{ {'p_b': 'rival_precision'}.get(field, field).replace('_', '-')}: {msg}") from e
    t0 = time.time()
    with progress_bar(total=args.trials, desc="stopping", unit="trial") as bar:
        rows = run_stopping(args.trials, seed=args.seed, world=w, progress=bar.update)
    bounds = [] if args.no_boundaries else [
        r for p in (0.5, 0.9) for r in compare_boundaries(args.trials, p=p, batch=args.batch,
                                                           max_draws=args.max_draws, seed=args.seed)]
    if args.json:
        write_json(args.json, {"experiment": "stopping", "trials": args.trials, "seed": args.seed,
                               "seconds": round(time.time() - t0, 1), "world": vars(w) | {},
                               "rules": rows_json(rows), "boundaries": rows_json(bounds)})
        if args.json == "-":
            return 0
    print(f"stopping rules: {args.trials} trials, seed {args.seed}, looks every {w.batch} draws per system up to "
          f"{w.max_draws}; A (P {w.p_a}) beside a rival sharing {w.shared} of its {w.size_a} instances; "
          f"the rival's own at P {w.p_b}; noise-free labels; {time.time() - t0:.0f} s")
    print(format_rules(rows, w))
    print("coverage of A's 90% intervals at the stop; draws: mean per system at the stop; widths in points. "
          "rival: stop once A's F1 interval excludes the rival's F1 estimate; value: once A's P interval "
          "excludes its true P; width: once A's F1 interval is at most "
          f"{100 * w.width:.0f} points wide; separate: once A's and the rival's F1 intervals are disjoint (wrong: "
          "share of runs stopped with them in the wrong order; saved: draws per system not made against the last "
          "look); fixed: no peeking; ever: every look covers")
    if bounds:
        print()
        print("boundaries (own draws, i.i.d. labels, looks as above): time-uniform coverage and mean width (points)")
        print(format_boundaries(bounds))
    return 0
