"""``unpooled simulate EXPERIMENT``: simulations on synthetic TAC KBP 2015-like worlds.

Each experiment is an entry of :data:`EXPERIMENTS` (name -> :class:`Experiment`):
``add_arguments(parser)`` adds its own options next to the common ones
(``--trials``, ``--seed``, ``--json OUT``; ``--plot OUT.svg`` where it draws a chart, ``--spread PATH`` where it
runs on the TAC-like world),
and ``run(args)`` returns the exit status.  :func:`trial_worlds` gives every
experiment the same independent worlds for a seed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from unpooled.core.errors import file_problem
from unpooled.core.json_text import finite
from unpooled.progress import progress_bar

from ..main import REPLICATES, SEED, TRIALS, integer
from . import simulate_cells as _cells
from . import simulate_stopping as _stopping

SPREAD_FILE = Path("paper") / "pooling_bias" / "pooling_bias_anydoc.tsv"
PARAMETRIC = "parametric"


@dataclass(frozen=True)
class Experiment:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    trials: int = 20  # default --trials
    world: bool = False  # runs on the TAC-like world: --spread
    plot: bool = False  # draws a chart: --plot


def register(sub) -> None:
    p = sub.add_parser("simulate", help="run a simulation on synthetic TAC KBP 2015-like worlds",
                       description="Simulations on synthetic worlds like TAC KBP 2015 Cold Start slot filling "
                                   "(70 systems from 18 teams, about 11,000 judged instances).")
    es = p.add_subparsers(dest="experiment", metavar="EXPERIMENT")
    es.required = True
    for name, exp in EXPERIMENTS.items():
        e = es.add_parser(name, help=exp.help, description=exp.help.replace("%%", "%"))
        add_common_arguments(e, trials=exp.trials, spread=exp.world, plot=exp.plot)
        exp.add_arguments(e)
        e.set_defaults(func=exp.run)


def add_common_arguments(p: argparse.ArgumentParser, *, trials: int = 20, spread: bool = True,
                         plot: bool = True) -> None:
    """``--trials``, ``--seed``, ``--json``; ``--plot`` for an experiment that draws a chart, ``--spread`` for one
    on the TAC-like world (the others do without them: argparse refuses them as usage errors)."""
    p.add_argument("--trials", type=TRIALS, default=trials, metavar="N",
                   help=f"number of independent worlds (default {trials})")
    p.add_argument("--seed", type=SEED, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--json", metavar="OUT", help="write the results as JSON to OUT ('-': standard output, "
                                                 "instead of the table)")
    if plot:
        p.add_argument("--plot", metavar="OUT.svg", help="write an SVG chart to OUT.svg")
    if spread:
        p.add_argument("--spread", metavar="PATH",
                       help="per-system precision/recall targets: a pooling_bias_*.tsv file of the paper "
                            f"(default: shared/data/{SPREAD_FILE.as_posix()} when found), or "
                            f"'{PARAMETRIC}' for the built-in spread")


# ---------------------------------------------------------------------------------------------
# shared by the experiments


def default_spread() -> Path | None:
    """The TAC 2015 spread file of the shared data, when it is found (see ``unpooled.demo.find_shared_data``)."""
    from unpooled.demo import find_shared_data

    data = find_shared_data()
    if data is not None and (data / SPREAD_FILE).is_file():
        return data / SPREAD_FILE
    return None


def seeded_world(args):
    """``(spread, world)``: the world of ``--seed`` and ``--spread`` (the first child of the seed's sequence, so
    the trials' own stream stays the seed's)."""
    from unpooled.core.simulate import load_spread, make_world

    spread = resolve_spread(args)
    return spread, make_world(rng=np.random.default_rng(np.random.SeedSequence(args.seed).spawn(1)[0]),
                              spread=load_spread(spread) if spread is not None else None)


def resolve_spread(args) -> Path | None:
    """``--spread``: a path (which must exist), ``parametric`` (None) or, when omitted, :func:`default_spread`."""
    from ..main import CommandError

    if args.spread is None:
        found = default_spread()
        if found is None:
            print(f"simulate: the shared data's spread file (shared/data/{SPREAD_FILE.as_posix()}) was not found: the "
                  f"worlds use the built-in parametric spread (set UNPOOLED_SHARED_DATA, or pass --spread)",
                  file=sys.stderr)
        return found
    if args.spread == PARAMETRIC:
        return None
    path = Path(args.spread)
    if problem := file_problem(path):
        raise CommandError(f"--spread {args.spread}: {problem} (or use --spread {PARAMETRIC})")
    return path


def targets_line(spread: str) -> str:
    """The table line that names the world's targets (``spread`` as recorded in the payload)."""
    return "targets: " + ("built-in parametric spread" if spread == PARAMETRIC else spread)


def trial_worlds(args, spread: Path | None, *, desc: str) -> Iterator[tuple[int, object]]:
    """``(trial, world)`` for ``args.trials`` independent worlds, with a progress bar on standard error.

    Trial ``t`` always gets the same world for a seed, whatever the number of trials.
    """
    from unpooled.core.simulate import load_spread, make_world

    targets = load_spread(spread) if spread is not None else None
    seeds = np.random.SeedSequence(args.seed).spawn(args.trials)
    with progress_bar(total=args.trials, desc=desc, unit="world") as bar:
        for t, ss in enumerate(seeds):
            yield t, make_world(rng=np.random.default_rng(ss), spread=targets)
            bar.update(1)


def write_json(out: str, payload: dict) -> None:
    """``payload`` as JSON (RFC 8259: an undefined figure is ``null``) to the file ``out``, or standard output
    (``-``)."""
    text = json.dumps(finite(payload), indent=2, allow_nan=False) + "\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")


def write_svg(out: str, svg: str) -> None:
    Path(out).write_text(svg, encoding="utf-8")


def _stats(values) -> dict:
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "sd": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "min": float(a.min()), "max": float(a.max())}


# ---------------------------------------------------------------------------------------------
# pooling-bias


def add_pooling_bias_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top", type=integer(1, 10_000), default=40, metavar="K",
                   help="summarise over the K best systems by true F1 (default 40)")
    p.add_argument("--no-manual", action="store_true",
                   help="leave the human (LDC-like) run out of the pools")


def run_pooling_bias(args) -> int:
    """Leave-team-out pooling bias (method.md §4.1) over ``--trials`` worlds."""
    from unpooled.core.errors import InvalidInputError
    from unpooled.core.simulate import pooling_bias, reference_bias

    from ..main import Exit

    spread = resolve_spread(args)
    start = time.perf_counter()
    rows, rank_bias, sizes = [], [], []
    for t, world in trial_worlds(args, spread, desc="pooling-bias"):
        res = pooling_bias(world, top=args.top, manual=not args.no_manual)
        rows.append({"trial": t, "instances": world.n_instances, "true": world.n_true,
                     "median_bias_p": res.median_bias_p, "median_bias_r": res.median_bias_r,
                     "median_bias_f1": res.median_bias_f1, "largest_adjacent_gap_f1": res.largest_adjacent_gap_f1,
                     "fraction_above_gap": res.fraction_above_gap})
        rank_bias.append(res.bias_f1[res.top_systems])
        sizes.append(world.summary())
        m, n_teams = world.n_systems, world.n_teams
    seconds = time.perf_counter() - start
    keys = ("median_bias_p", "median_bias_r", "median_bias_f1", "largest_adjacent_gap_f1", "fraction_above_gap")
    summary = {k: _stats([r[k] for r in rows]) for k in keys}
    top = min(args.top, m)
    by_rank = np.array(rank_bias)  # (trials, top)
    reference = None
    if spread is not None:
        try:
            reference = reference_bias(spread, top=args.top)
        except (InvalidInputError, OSError):  # a spread file without the -lto columns: no reference
            reference = None
    payload = {
        "experiment": "pooling-bias", "trials": args.trials, "seed": args.seed, "top": top,
        "spread": str(spread) if spread is not None else PARAMETRIC, "manual_in_pool": not args.no_manual,
        "units": "fraction (bias = true - pooled, instance level)",
        **{k: summary[k]["mean"] for k in keys},
        "spread_over_trials": summary,
        "systems": m, "teams": n_teams,
        "world": {k: float(np.mean([s[k] for s in sizes])) for k in sizes[0]},
        "reference_tac2015": reference,
        "bias_f1_by_rank": {"mean": by_rank.mean(axis=0).tolist(), "p10": np.percentile(by_rank, 10, axis=0).tolist(),
                            "p90": np.percentile(by_rank, 90, axis=0).tolist()},
        "seconds": round(seconds, 3),
        "per_trial": rows,
    }
    if args.json:
        write_json(args.json, payload)
    if args.plot:
        write_svg(args.plot, pooling_bias_plot(by_rank, summary["largest_adjacent_gap_f1"]["mean"], args.trials))
    if args.json != "-":
        print(format_pooling_bias(payload))
    return Exit.OK


def pooling_bias_plot(by_rank: np.ndarray, gap: float, trials: int) -> str:
    """Per-rank F1 bias (mean and 10-90% over trials, in points) with the largest adjacent gap."""
    from unpooled.core.plots import interval_chart

    k = by_rank.shape[1]
    labels = [str(i + 1) for i in range(k)]
    pts = by_rank * 100
    lo, hi = (np.percentile(pts, 10, axis=0), np.percentile(pts, 90, axis=0)) if trials > 1 else (None, None)
    return interval_chart(
        labels, pts.mean(axis=0), lo, hi, orientation="vertical", item_label="rank by true F1",
        value_label="F1 bias (points)",
        title=f"Leave-team-out pooling bias of the top {k} systems ({trials} world{'s' if trials != 1 else ''})",
        series_label="F1 bias: mean" + (", bar 10-90% of worlds" if trials > 1 else ""),
        reference=[(0.0, ""), (gap * 100, f"largest adjacent gap {gap * 100:.2f}")],
    )


def format_pooling_bias(d: dict) -> str:
    s = d["spread_over_trials"]
    ref = d["reference_tac2015"]
    lines = [
        (f"pooling bias, leave-team-out: {d['trials']} world(s), seed {d['seed']}, {d['systems']} systems "
         f"from {d['teams']} teams, about {d['world']['instances']:,.0f} instances ({d['world']['true']:,.0f} true)"),
        f"{targets_line(d['spread'])}; human run in every pool: {'yes' if d['manual_in_pool'] else 'no'}",
        f"instance-level P/R/F1; bias = true - pooled, in points; medians over the top {d['top']} by true F1;",
        "mean, sd, min, max over worlds",
        "",
        f"{'':<34}{'mean':>7}{'sd':>7}{'min':>7}{'max':>7}" + (f"{'TAC 2015':>11}" if ref else ""),
    ]
    rows = [("median bias P", "median_bias_p", 100), ("median bias R", "median_bias_r", 100),
            ("median bias F1", "median_bias_f1", 100),
            ("largest adjacent gap (true F1)", "largest_adjacent_gap_f1", 100),
            ("share with F1 bias > gap (0-1)", "fraction_above_gap", 1)]
    for label, key, scale in rows:
        st = s[key]
        fmt = "{:>7.2f}"
        line = f"{label:<34}" + "".join(fmt.format(st[c] * scale) for c in ("mean", "sd", "min", "max"))
        if ref:
            line += f"{ref[key] * scale:>11.2f}"
        lines.append(line)
    if ref:
        lines.append(f"(TAC 2015: micro anydoc scores of {ref['systems']} runs, same medians, from the spread file)")
    lines.append(f"{d['seconds']:.1f} s")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# estimators


def add_estimators_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--labels", type=integer(1, 100_000), default=150, metavar="N", help="labelled draws per system (default 150)")
    p.add_argument("--exhaustive", type=integer(1, 100_000), default=150, metavar="N",
                   help="exhaustively found true instances per trial (default 150)")
    p.add_argument("--top", type=integer(1, 10_000), default=40, metavar="K",
                   help="summarise over the K best systems (default 40)")
    p.add_argument("--metric", choices=("instance", "fill"), default="instance",
                   help="instance-level scores, or TAC-official fill level (every fill counts once)")
    p.add_argument("--bootstrap", type=REPLICATES, default=0, metavar="B",
                   help="also compute bootstrap intervals with B replicates and their coverage (default 0: analytic only)")


ESTIMATOR_KEYS = ("bias_p", "bias_r", "bias_f1", "width_p", "width_r", "width_f1",
                  "coverage_p", "coverage_r", "coverage_f1")


def run_estimators_cli(args) -> int:
    """Pooling vs simple vs joint on one world over ``--trials`` draws (method.md §4.2)."""
    from unpooled.core.simulate.experiments import ESTIMATOR_VARIANTS, run_estimators

    from ..main import Exit

    spread, world = seeded_world(args)
    start = time.perf_counter()
    with progress_bar(total=args.trials, desc="estimators", unit="trial") as bar:
        res = run_estimators(world, trials=args.trials, labels=args.labels, exhaustive=args.exhaustive,
                             top=args.top, bootstrap=args.bootstrap, rng=args.seed, progress=bar.update,
                             metric=args.metric)
    seconds = time.perf_counter() - start
    summary = res["summary"]
    rows = []
    for name in ESTIMATOR_VARIANTS:
        row = {"estimator": name, **{k: v for k, v in summary[name].items()}}
        for k in ESTIMATOR_KEYS:
            row.setdefault(k, None)  # pooling has no interval: no coverage
        rows.append(row)
    ratio = {k: (summary["simple"][f"width_{k}"] / summary["joint-heuristic"][f"width_{k}"]
                 if summary["joint-heuristic"][f"width_{k}"] > 0 else None) for k in ("p", "r", "f1")}
    minvar_vs = {k: summary["joint-minvar"][f"width_{k}"] - summary["joint-heuristic"][f"width_{k}"]
                 for k in ("p", "r", "f1")}
    payload = {"experiment": "estimators", "trials": args.trials, "seed": args.seed, "metric": args.metric,
               "labels_per_system": args.labels, "exhaustive": args.exhaustive, "top": args.top,
               "spread": str(spread) if spread is not None else PARAMETRIC, "bootstrap": args.bootstrap,
               "estimators": rows, "width_ratio_simple_over_joint": ratio,
               "minvar_minus_heuristic_width": minvar_vs, "seconds": round(seconds, 2)}
    if args.json:
        write_json(args.json, payload)
    if args.plot:
        write_svg(args.plot, estimators_figure(payload))
    if args.json != "-":
        print(format_estimators(payload))
    return Exit.OK


def estimators_figure(d: dict) -> str:
    """Six panels: bias with the 5-95% spread of the estimates (top) and the coverage of the 90% intervals (bottom),
    for P, R and F1, one row per estimator (pooling's bias in P and R shows; it has no interval to cover)."""
    from unpooled.core.plots import grid, interval_chart

    rows = d["estimators"]
    names = [r["estimator"] for r in rows]
    n = max(int(d["trials"]), 1)
    charts = []
    for k, metric in (("p", "P"), ("r", "R"), ("f1", "F1")):
        bias = np.array([r[f"bias_{k}"] for r in rows], dtype=float) * 100
        half = np.array([r[f"width_{k}"] for r in rows], dtype=float) * 50
        charts.append(interval_chart(
            names, bias, bias - half, bias + half, title=f"{metric}: bias and 5-95% spread",
            value_label=f"estimate - truth ({metric} points)", series_label="mean bias",
            reference=[(0.0, "no bias")], width=340))
    for k, metric in (("p", "P"), ("r", "R"), ("f1", "F1")):
        cov = np.array([np.nan if r.get(f"coverage_{k}") is None else r[f"coverage_{k}"] for r in rows]) * 100
        # Monte Carlo error of the coverage, trials as the unit (systems of one trial share its labels)
        se = np.sqrt(np.clip(cov / 100 * (1 - cov / 100), 0, None) / n) * 100
        charts.append(interval_chart(
            [f"{a} (no interval)" if np.isnan(c) else a for a, c in zip(names, cov)], cov,
            np.clip(cov - 1.645 * se, 0, 100), np.clip(cov + 1.645 * se, 0, 100),
            title=f"{metric}: coverage of 90% intervals", value_label="coverage (%)", series_label="coverage",
            reference=[(90.0, "nominal 90%")], value_range=(min(50.0, float(np.nanmin(cov, initial=100)) - 2), 100.0),
            width=340))
    return grid(charts, columns=3,
                title=f"Estimators over {d['trials']} trials ({d['labels_per_system']} labels per system, "
                      f"{d['exhaustive']} exhaustive, top {d['top']} systems)",
                desc="bias in points with the 5-95% spread of the point estimates, and the coverage of the computed "
                     "90% intervals with their Monte Carlo 90% interval, for precision, recall and F1")


def format_estimators(d: dict) -> str:
    lines = [f"estimators: {d['trials']} trials, {d['labels_per_system']} labels per system + {d['exhaustive']} "
             f"exhaustive, {d['metric']} level, top {d['top']} systems",
             targets_line(d["spread"]),
             f"{'estimator':<16}{'bias P':>8}{'R':>7}{'F1':>7}  {'5-95% width P':>14}{'R':>7}{'F1':>7}  "
             f"{'90% CI coverage P':>18}{'R':>7}{'F1':>7}"]

    def pts(v):
        return f"{v * 100:+.2f}" if v is not None else "-"

    def fr(v):
        return f"{v:.3f}" if v is not None else "-"

    for r in d["estimators"]:
        lines.append(f"{r['estimator']:<16}{pts(r['bias_p']):>8}{pts(r['bias_r']):>7}{pts(r['bias_f1']):>7}  "
                     f"{fr(r['width_p']):>14}{fr(r['width_r']):>7}{fr(r['width_f1']):>7}  "
                     f"{fr(r['coverage_p']):>18}{fr(r['coverage_r']):>7}{fr(r['coverage_f1']):>7}")
        if r.get("coverage_p_bootstrap") is not None:
            lines.append(f"{'  bootstrap':<16}{'':>22}  {'':>28}  {fr(r['coverage_p_bootstrap']):>18}"
                         f"{fr(r['coverage_r_bootstrap']):>7}{fr(r['coverage_f1_bootstrap']):>7}")
    ratio = d["width_ratio_simple_over_joint"]
    lines.append("bias in points (estimate - truth); width of the 5-95% spread of point estimates; coverage of the "
                 "computed 90% intervals")
    lines.append("simple/joint(heuristic) width ratio: "
                 + ", ".join(f"{k.upper()} {v:.2f}" if v is not None else f"{k.upper()} -" for k, v in ratio.items())
                 + "; "
                 "minvar - heuristic width: " + ", ".join(f"{k.upper()} {v:+.4f}"
                                                          for k, v in d["minvar_minus_heuristic_width"].items()))
    lines.append(f"{d['seconds']:.1f} s")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# adaptive


def add_adaptive_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--systems", type=integer(1, 10_000), default=40, metavar="K", help="systems arriving (default 40: the top 40)")
    p.add_argument("--own", type=integer(1, 100_000), default=500, metavar="N",
                   help="the fixed scheme's draws per system; the adaptive target is the variance N own draws give "
                        "(default 500)")


def run_adaptive_cli(args) -> int:
    """Cumulative labels as systems arrive, fixed vs adaptive (method.md §4.3)."""
    from unpooled.core.simulate.experiments import run_adaptive

    from ..main import Exit

    spread, world = seeded_world(args)
    start = time.perf_counter()
    with progress_bar(total=args.trials, desc="adaptive", unit="trial") as bar:
        res = run_adaptive(world, trials=args.trials, systems=args.systems, own=args.own, rng=args.seed,
                           progress=bar.update)
    payload = {"experiment": "adaptive", "trials": args.trials, "seed": args.seed, "systems": args.systems,
               "own": args.own, "spread": str(spread) if spread is not None else PARAMETRIC, **res,
               "seconds": round(time.perf_counter() - start, 2)}
    if args.json:
        write_json(args.json, payload)
    if args.plot:
        from unpooled.core.plots import line_chart

        x = np.arange(1, args.systems + 1)
        write_svg(args.plot, line_chart(x, res["labels_by_system"], title="Cumulative labels as systems arrive",
                                        xlabel="systems evaluated", ylabel="labels"))
    if args.json != "-":
        lab = res["labels_by_system"]
        marks = [k for k in (1, 2, 5, 10, 20, 30, 40) if k <= args.systems]
        lines = [f"adaptive: {args.trials} trials, {args.systems} systems in random order, target = the variance "
                 f"of {args.own} own draws",
                 targets_line(payload["spread"]),
                 f"{'systems':<16}" + "".join(f"{k:>9}" for k in marks)]
        for name, vals in lab.items():
            lines.append(f"{name:<16}" + "".join(f"{vals[k - 1]:>9,.0f}" for k in marks))
        tot, rng_ = res["total"], res["total_range"]
        lines.append(f"adaptive: {tot['adaptive-draws']:,.0f} draws (range {rng_['adaptive-draws'][0]:,.0f}-"
                     f"{rng_['adaptive-draws'][1]:,.0f}; the paper: 7,570) and {tot['adaptive']:,.0f} new labels (range "
                     f"{rng_['adaptive'][0]:,.0f}-{rng_['adaptive'][1]:,.0f}) in {res['rounds_mean']:.2f} rounds per "
                     f"system on average")
        lines.append(f"90% precision intervals after adaptive stopping cover the truth {res['adaptive_coverage_p_arrival']:.3f}"
                     f" of the time at arrival and {res['adaptive_coverage_p']:.3f} at the end (se {res['coverage_se']:.3f}); "
                     f"median half-width {res['adaptive_median_halfwidth_p_arrival']:.3f} at arrival (planned "
                     f"{res['planned_median_halfwidth_p']:.3f}; squared error over planned variance "
                     f"{res['error_over_planned_var']:.2f}), {res['adaptive_median_halfwidth_p']:.3f} at the end, "
                     f"target {res['target_median_halfwidth_p']:.3f}")
        lines.append(f"{payload['seconds']:.1f} s")
        print("\n".join(lines))
    return Exit.OK


# ---------------------------------------------------------------------------------------------
# regimes


def add_cells_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cells", metavar="NAMES",
                   help="comma-separated cell names to run (default: every cell; see the table's first column)")


def select_cells(cells: list, spec: str | None) -> list:
    """The cells ``--cells`` names (comma-separated, in its order); all of them without it."""
    from ..main import CommandError

    if not spec:
        return cells
    names = [c.strip() for c in spec.split(",") if c.strip()]
    known = {c.name: c for c in cells}
    bad = [n for n in names if n not in known]
    if bad:
        raise CommandError(f"--cells: unknown cell {bad[0]!r}; cells: {', '.join(known)}")
    return [known[n] for n in names]


def add_regimes_arguments(p: argparse.ArgumentParser) -> None:
    add_cells_argument(p)
    p.add_argument("--one-stratum", action="store_true",
                   help="fit one crowd model for every item (the estimator is not told the relation types): "
                        "the comparison for the cells whose crowd's accuracy depends on the relation type")


def run_regimes_cli(args) -> int:
    from unpooled.core.simulate import regimes

    return _cells.run_cell_table(args, "regimes", regimes, "coverage across regimes (fewer trials in the large cells)"
                           + (", one crowd model for every relation type" if args.one_stratum else ""),
                           use_strata=not args.one_stratum)


# ---------------------------------------------------------------------------------------------
# unassessed


def add_unassessed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-draws", type=integer(1, 100_000), default=20, metavar="N",
                   help="fewest draws in an agreement cell before it is merged into the next lower band (default 20)")


def run_unassessed_cli(args) -> int:
    """Recall from pooled and unassessed output (seed 002) against the joint estimator and the exhaustive sample."""
    from unpooled.core.simulate.experiments import UNASSESSED_VARIANTS, run_unassessed

    from ..main import Exit

    spread, world = seeded_world(args)
    start = time.perf_counter()
    with progress_bar(total=args.trials, desc="unassessed", unit="trial") as bar:
        res = run_unassessed(world, trials=args.trials, rng=args.seed, min_draws=args.min_draws, progress=bar.update)
    payload = {"experiment": "unassessed", "trials": args.trials, "seed": args.seed, "min_draws": args.min_draws,
               "spread": str(spread) if spread is not None else PARAMETRIC, **res,
               "seconds": round(time.perf_counter() - start, 2)}
    if args.json:
        write_json(args.json, payload)
    if args.json != "-":
        lines = [f"recall from pooled and unassessed output: {args.trials} trials, {res['intervals']} intervals, "
                 f"seed {args.seed}",
                 targets_line(payload["spread"]),
                 f"{'estimator':<24}{'|bias| mean':>12}{'max':>7}{'spread':>8}{'width':>7}{'cover':>7}"
                 f"{'RE/joint':>10}{'RE/exh.':>9}"]
        for k in UNASSESSED_VARIANTS:
            r = res["rows"][k]
            lines.append(f"{k:<24}{100 * r['mean_abs_bias']:>11.2f}p{100 * r['max_abs_bias']:>6.2f}p"
                         f"{100 * r['spread']:>7.2f}p{100 * r['width']:>6.2f}p{r['coverage']:>7.3f}"
                         f"{r['re_joint']:>10.2f}{r['re_exhaustive']:>9.2f}")
        lines.append("points of recall; spread: root mean per-system variance of the estimates; width and coverage of "
                     "the 90% intervals; RE: relative efficiency (ratio of variances); the seed predicted RE/exh. 3 "
                     "for pooled, 0.5 for unassessed and 4.5 for the hybrid")
        lines.append(f"mean weight of the exhaustive estimate in stratified+exhaustive: {res['exhaustive_weight']:.2f}; "
                     f"{payload['seconds']:.1f} s")
        print("\n".join(lines))
    return Exit.OK


# ---------------------------------------------------------------------------------------------
# entities


add_entities_arguments = add_cells_argument


def run_entities_cli(args) -> int:
    """Entity detection, typing, linking and NIL-clustering scores: bias and 90% coverage across regimes."""
    from unpooled.core.simulate.entities import default_cells, format_table, run_cell

    cells = default_cells()
    cells = select_cells(cells, args.cells)
    t0 = time.time()
    rows = []
    with progress_bar(total=len(cells) * args.trials, desc="entities", unit="trial") as bar:
        for j, cell in enumerate(cells):
            rows.append(run_cell(cell, args.trials, seed=args.seed + 1000 * j, progress=bar.update))
    if args.json:
        write_json(args.json, {"experiment": "entities", "trials": args.trials, "seed": args.seed,
                               "seconds": round(time.time() - t0, 1), "cells": rows})
        if args.json == "-":
            return 0
    print(f"entity scores across regimes: {args.trials} trials per cell, 2 systems each, seed {args.seed}, "
          f"{time.time() - t0:.0f} s")
    print(format_table(rows))
    print("bias and rmse in points (estimate - truth); width and cover90: the 90% intervals; defined: share of "
          "systems x trials with a value")
    return 0


# ---------------------------------------------------------------------------------------------
# documents


def add_documents_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replicates", type=integer(2, 100_000), default=200, metavar="R",
                   help="Monte Carlo re-simulations per sample for the seed scheme's inclusion probabilities "
                        "(default 200)")
    p.add_argument("--quick", action="store_true", help="only the Re-DocRED seed-scheme regime at size 100")
    p.add_argument("--shares", action="store_true",
                   help="the defensive-share comparison instead of the regimes: the seed scheme at shares 0.1 to "
                        "0.3 and the two-stage scheme at 0.1 and 0.5 (how the defaults were chosen)")
    p.add_argument("--rows", metavar="I,J,...", help="only these rows of the table (1-based; to split the work "
                                                     "across processes)")
    p.add_argument("--size", type=integer(2, 100_000), metavar="N", help="run the rows at N documents instead of their own size "
                                                          "(same worlds, schemes and seeds: e.g. the 15-document rows "
                                                          "at 10 or 20)")


#: the sample sizes of the regimes table: few documents and the usual hundred, then (rows 65 on, so that the
#: first rows keep their seeds) 40, where :data:`unpooled.core.sampling.documents.FEW_DOCUMENTS` was decided
DOCUMENT_SIZES = ((15, 100), (40,))
#: the systems of the regimes table: (recall, tilt), tilt > 0 when the system finds more in documents about
#: frequent entities (the documents the entity-driven schemes prefer)
DOCUMENT_SYSTEMS = ((0.3, 0.0), (0.3, 1.0), (0.8, 0.0), (0.8, 1.0))


def document_regimes(data, *, quick: bool = False, shares: bool = False) -> list[tuple]:
    """(world factory, scheme, size, defensive share or None for the scheme's default, fewest defensive documents)
    per row of the table; Re-DocRED when the shared data is at hand.

    The regimes table: per world (Re-DocRED and a synthetic power-law corpus, each with the systems of
    :data:`DOCUMENT_SYSTEMS`), every scheme at every size of :data:`DOCUMENT_SIZES`, at the service's defaults.
    ``shares``: the defensive-share comparison the defaults were chosen from."""
    from unpooled.core.simulate.documents import SCHEMES, synthetic_world, world_from_documents

    both = dev = None
    if data is not None:
        from unpooled.core.corpus import iter_documents

        dev = list(iter_documents(data / "redocred" / "dev_revised.json", "docred"))
        both = dev + list(iter_documents(data / "redocred" / "test_revised.json", "docred"))
    rd = lambda: world_from_documents("redocred r.5 tilt+1", both, recall=0.5, tilt=1.0, rng=11)  # noqa: E731
    syn = lambda: synthetic_world(2000, zipf=1.1, recall=0.5, tilt=1.0, rng=14)  # noqa: E731
    if quick:
        return [(rd, "seed", 100, None, 30)] if data is not None else [(syn, "seed", 100, None, 30)]
    if not shares:
        rows: list[tuple] = []
        worlds = []
        for j, (r, tilt) in enumerate(DOCUMENT_SYSTEMS):
            label = f"r.{round(10 * r)} tilt{tilt:+g}" if tilt else f"r.{round(10 * r)} tilt0"
            if data is not None:
                worlds.append(_world_factory(world_from_documents, f"redocred {label}", both, recall=r, tilt=tilt,
                                             rng=21 + j))
            worlds.append(_world_factory(synthetic_world, 2000, zipf=1.1, recall=r, tilt=tilt, rng=31 + j,
                                         name=f"zipf1.1 {label}"))
        for sizes in DOCUMENT_SIZES:
            for make in worlds:
                for size in sizes:
                    rows += [(make, scheme, size, None, 30) for scheme in SCHEMES]
        return rows
    rows = []
    if data is not None:
        rd_neg = lambda: world_from_documents("redocred r.3 tilt-1", both, recall=0.3, tilt=-1.0, rng=12)  # noqa: E731
        demo = lambda: world_from_documents("redocred-dev r.7 tilt+1", dev, recall=0.7, tilt=1.0, rng=13)  # noqa: E731
        rows += [(rd, "uniform", 100, None, 20), (rd, "two-stage", 100, 0.1, 20), (rd, "two-stage", 100, 0.5, 20),
                 (rd, "seed", 100, 0.1, 0), (rd, "seed", 100, 0.2, 0), (rd, "seed", 200, 0.2, 20),
                 (rd_neg, "seed", 100, 0.2, 20), (demo, "seed", 50, 0.2, 20)]
    rows += [(syn, "uniform", 100, None, 20), (syn, "seed", 100, 0.2, 20)]
    if data is not None:
        rows.append((rd, "seed", 100, 0.2, 20))
    rows += [(syn, "seed", 100, 0.3, 30)]       # the default (0.3, at least 30 documents)
    if data is not None:
        rows += [(rd, "seed", 100, 0.3, 30), (rd, "seed", 200, 0.3, 30), (rd_neg, "seed", 100, 0.3, 30),
                 (demo, "seed", 50, 0.3, 30)]
    return rows


def _world_factory(make, *args, name: str | None = None, **kwargs):
    """A world factory (one object per world, so that the runner builds each world once)."""
    def build():
        w = make(*args, **kwargs)
        if name is not None:
            w.name = name
        return w
    return build


def run_documents_cli(args) -> int:
    """Recall under the document-sampling schemes (uniform, two-stage, tfidf, the seed's): bias and coverage."""
    from unpooled.core.simulate.documents import format_summary, format_table, run_scheme
    from unpooled.demo import find_shared_data

    from ..main import CommandError, Exit

    if args.replicates < 2:
        raise CommandError(f"--replicates must be at least 2, got {args.replicates}")
    start = time.perf_counter()
    regimes = document_regimes(find_shared_data(), quick=args.quick, shares=args.shares)
    seeds = np.random.SeedSequence(args.seed).spawn(len(regimes))
    if args.rows:
        try:
            pick = [int(i) - 1 for i in args.rows.split(",")]
        except ValueError:
            raise CommandError(f"--rows: expected row numbers like 1,3, got {args.rows!r}") from None
        if any(not 0 <= i < len(regimes) for i in pick):
            raise CommandError(f"--rows: expected numbers in 1..{len(regimes)}, got {args.rows!r}")
        regimes, seeds = [regimes[i] for i in pick], [seeds[i] for i in pick]
    if args.size is not None:
        regimes = [(make, scheme, args.size, defensive, least) for make, scheme, _, defensive, least in regimes]
    worlds: dict = {}
    rows = []
    with progress_bar(total=args.trials * len(regimes), desc="documents", unit="trial") as bar:
        for (make, scheme, size, defensive, least), ss in zip(regimes, seeds):
            world = worlds.get(make) or worlds.setdefault(make, make())
            rows.append(run_scheme(world, scheme, size, trials=args.trials, defensive=defensive, min_defensive=least,
                                   replicates=args.replicates, rng=np.random.default_rng(ss), progress=bar.update))
    payload = {"experiment": "documents", "trials": args.trials, "seed": args.seed, "replicates": args.replicates,
               "rows": [dict(r.to_dict(), min_defensive=reg[4]) for r, reg in zip(rows, regimes)],
               "seconds": round(time.perf_counter() - start, 1)}
    if args.json:
        write_json(args.json, payload)
    if args.json != "-":
        print(f"recall under document-sampling schemes: {args.trials} samples per row, seed {args.seed}, "
              f"{args.replicates} re-simulations for the seed scheme's inclusion probabilities, {payload['seconds']} s")
        print(format_table(rows))
        if len(rows) > 1:
            print("\npooled over the worlds:")
            print(format_summary(rows))
        least = sorted({reg[4] for r, reg in zip(rows, regimes) if r.scheme == "seed"})
        if least:
            print("seed rows: at least " + " or ".join(map(str, least)) + " defensive documents (fewer when the "
                  "sample is smaller); tfidf: queries from the entities of a uniform pilot of 20% of the size")
    return Exit.OK


EXPERIMENTS: dict[str, Experiment] = {
    "pooling-bias": Experiment(
        help="leave-team-out pooling bias (method.md §4.1): each system scored on a pool of the other teams' runs",
        add_arguments=add_pooling_bias_arguments, run=run_pooling_bias, world=True, plot=True),
    "estimators": Experiment(
        help="pooling vs simple vs joint estimators (method.md §4.2): bias, spread and coverage of 90%% intervals",
        add_arguments=add_estimators_arguments, run=run_estimators_cli, trials=500, world=True,
        plot=True),
    "adaptive": Experiment(
        help="labels needed as systems arrive: fixed vs adaptive sample sizes with label reuse (method.md §4.3)",
        add_arguments=add_adaptive_arguments, run=run_adaptive_cli, trials=100, world=True, plot=True),
    "regimes": Experiment(
        help="bias, width and coverage of the 90%% intervals of P, R and F1 across regimes: system size (5 to "
             "10,000 instances), precision (0.05 to 0.99), crowd accuracy (0.6 to 0.95, and rates the estimator "
             "is told wrongly), 2 to 300 systems, label reuse (also across a corpus half replaced between two "
             "periods) and adaptive stopping; scored as the service scores "
             "(from the crowd's votes, error rates fitted with gold controls)",
        add_arguments=add_regimes_arguments, run=run_regimes_cli, trials=100),
    "reference": Experiment(
        help="the human reference's precision (the exhaustive annotation verified by the crowd, its items routed "
             "away from their makers) beside a system's of as many draws: bias, width and coverage of the 90%% "
             "intervals for good and poor crowds, few and many reference instances, with and without gold controls",
        add_arguments=add_cells_argument, run=_cells.run_reference_cli, trials=100),
    "ranks": Experiment(
        help="is A better than B: paired F1 differences (max-|t| simultaneous) against the old marginal tie groups, "
             "and the coverage of six systems' rank intervals; labels and crowd votes",
        add_arguments=add_cells_argument, run=_cells.run_ranks_cli, trials=200),
    "unassessed": Experiment(
        help="recall from pooled and unassessed output (seed 002): agreement-stratified recall and its combination "
             "with the exhaustive sample against the joint estimator: bias, width, coverage, relative efficiency",
        add_arguments=add_unassessed_arguments, run=run_unassessed_cli, trials=100, world=True),
    "entities": Experiment(
        help="entity detection, typing, linking and NIL clustering scores (core/estimators/entities.py): bias and "
             "coverage of their 90%% intervals for small and large systems, good and poor crowds, few documents",
        add_arguments=add_entities_arguments, run=run_entities_cli, trials=200),
    "documents": Experiment(
        help="recall under the document-sampling schemes (uniform, two-stage TF-IDF, single-stage tfidf, the seed's "
             "query-entity scheme with Monte Carlo inclusion probabilities) at 15, 100 and 40 documents, for systems "
             "of low and high recall, tilted or not, on Re-DocRED and a power-law corpus: bias, coverage and width "
             "of 90%% intervals, and the bias of the naive ratio that ignores inclusion probabilities",
        add_arguments=add_documents_arguments, run=run_documents_cli, trials=400),
    "ppi": Experiment(
        help="prediction-powered (PPI++) precision from the submitted confidences against labels alone: bias, width "
             "and coverage of 90%% intervals for informative, uninformative, adversarial and miscalibrated "
             "confidences, small and large systems, one and ten systems sharing draws, precision 0.5 and 0.95; "
             "ppi_py's interval beside one system's",
        add_arguments=add_cells_argument, run=_cells.run_ppi_cli, trials=200),
    "protocols": Experiment(
        help="recall under the within-sentence and document-level recall protocols, for a system strong within "
             "sentences and weak across them beside an even one: bias and coverage of 90%% intervals against each "
             "protocol's truth, and how often a within-sentence interval holds the document-level recall",
        add_arguments=_cells.add_protocols_arguments, run=_cells.run_protocols_cli, trials=200),
    "precision": Experiment(
        help="the joint precision from labels when systems overlap and share draws (balance heuristic): bias, "
             "spread, reported standard error, coverage and width of 90%% intervals and the share of estimates "
             "above 1, for ten, three and one systems near precision 0.95, 0.99 and 0.05",
        add_arguments=add_cells_argument, run=_cells.run_precision_cli, trials=300),
    "stopping": Experiment(
        help="coverage of P, R and F1 when the watcher stops on what the intervals show (once A's F1 interval "
             "excludes a rival's estimate, once P's excludes a value, on width, at a fixed n): 90%% fixed-n "
             "intervals beside the confidence sequences, and the boundaries compared",
        add_arguments=_stopping.add_stopping_arguments, run=_stopping.run_stopping_cli, trials=200),
}
