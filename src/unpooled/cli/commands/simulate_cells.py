"""``unpooled simulate`` experiments that print one table of cells (:func:`run_cell_table`): regimes, reference,
ranks, ppi and precision; each cell's Monte Carlo is its core module's ``run_cell`` (:mod:`unpooled.core.simulate`)."""

from __future__ import annotations

import time

from unpooled.progress import progress_bar

from ..main import integer


def run_cell_table(args, experiment: str, module, title: str, **options) -> int:
    """Run ``module``'s default cells (``--cells`` selects) with ``module.run_cell``, one seed per cell, and print
    ``module.format_table`` under ``title`` (or write ``--json``): the regimes, reference, ranks, ppi and precision experiments."""
    from .simulate import select_cells, write_json

    cells = select_cells(module.default_cells(), args.cells)
    rows = []
    t0 = time.time()
    with progress_bar(total=len(cells), desc=experiment, unit="cell") as bar:
        for j, cell in enumerate(cells):
            rows.append(module.run_cell(cell, args.trials, seed=args.seed + 1000 * j, **options).summary())
            bar.update(1)
    if args.json:
        write_json(args.json, {"experiment": experiment, "trials": args.trials, "seed": args.seed,
                               "seconds": round(time.time() - t0, 1), "cells": rows})
        if args.json == "-":
            return 0
    print(f"{title}: {args.trials} trials per cell, seed {args.seed}, {time.time() - t0:.0f} s")
    print(module.format_table(rows))
    return 0


def run_reference_cli(args) -> int:
    from unpooled.core.simulate import reference

    return run_cell_table(args, "reference", reference, "the human reference's precision")


def run_ranks_cli(args) -> int:
    from unpooled.core.simulate import ranks

    return run_cell_table(args, "ranks", ranks, "paired comparisons and rank intervals (F1, 90%)")


def run_ppi_cli(args) -> int:
    from unpooled.core.simulate import ppi

    try:
        import ppi_py as oracle  # the test oracle of the single-system mean, when installed
    except ImportError:
        oracle = None
    return run_cell_table(args, "ppi", ppi, "prediction-powered precision against labels alone"
                          + ("" if oracle else " (ppi_py not installed: no oracle columns)"), oracle=oracle)


def add_protocols_arguments(p) -> None:
    p.add_argument("--documents", type=integer(2, 300), default=40, metavar="N",
                   help="documents of each trial's exhaustive sample (default 40, of 300)")
    p.add_argument("--draws", type=integer(1, 100_000), default=300, metavar="N", help="labelled draws per system (default 300)")


def run_protocols_cli(args) -> int:
    """``unpooled simulate protocols``: recall under the within-sentence and document-level protocols
    (:mod:`unpooled.core.simulate.protocols`)."""
    from unpooled.core.simulate import protocols

    from .simulate import write_json

    t0 = time.time()
    rows = protocols.run(args.trials, seed=args.seed, documents=args.documents, draws=args.draws)
    if args.json:
        write_json(args.json, {"experiment": "protocols", "trials": args.trials, "seed": args.seed,
                               "seconds": round(time.time() - t0, 1), "rows": [r.__dict__ for r in rows]})
        if args.json == "-":
            return 0
    print(protocols.format_table(rows, args.trials) + f"\n({time.time() - t0:.0f} s, seed {args.seed})")
    return 0


def run_precision_cli(args) -> int:
    from unpooled.core.simulate import precision

    return run_cell_table(args, "precision", precision, "the joint precision from labels, overlapping systems")
