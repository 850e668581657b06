"""The ``unpooled`` command line.

Exit status: 0 ok, 1 findings (a rejected file), 2 usage error, 3 service or
input error.  ``--traceback`` shows the full Python traceback of an error.
"""

from __future__ import annotations

import argparse
import enum
import sys
from typing import Sequence

from unpooled import __version__
from unpooled.core.errors import UnpooledError


class Exit(enum.IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    ERROR = 3
    PIPE_CLOSED = 141  # the reader of the output stopped reading (``| head``), as a shell says of SIGPIPE: 128 + 13


class CommandError(UnpooledError):
    """An error to print as ``unpooled: error: ...`` with exit status 3."""


def integer(lo: int, hi: int):
    """An argparse ``type``: an integer from ``lo`` to ``hi``.  Counts, budgets, trials and seeds are bounded where
    they are declared: a negative seed or 10**12 replicates is a usage error naming the option (exit 2), not a
    traceback from numpy, an allocation of terabytes or a run without end."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer from {lo:,} to {hi:,}, got {text[:40]}")
        return v

    parse.__name__ = "integer"
    return parse


def number(lo: float, hi: float):
    """An argparse ``type``: a finite number from ``lo`` to ``hi`` (``nan`` and ``inf`` are refused)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
        if not lo <= v <= hi:  # nan fails both
            raise argparse.ArgumentTypeError(f"expected a number from {lo:g} to {hi:g}, got {text[:40]}")
        return v

    parse.__name__ = "number"
    return parse


#: a probability; a random seed (numpy's generators take non-negative integers)
PROBABILITY = number(0.0, 1.0)
SEED = integer(0, 2**63 - 1)
#: trials of a simulation, replicates of a bootstrap: a day's run at most
TRIALS, REPLICATES = integer(1, 100_000), integer(0, 100_000)


from unpooled.service.config.bootstrap import setup_django  # noqa: E402,F401 - the commands' entry to the service


class Parser(argparse.ArgumentParser):
    """argparse's parser, with a "did you mean" on a mistyped command or choice."""

    def error(self, message: str):
        import difflib
        import re

        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2))
            close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an epilog of examples keeps its lines (one command a line)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


#: examples shown at the end of each command's --help (a command group shows its actions' first examples)
EXAMPLES: dict[str, tuple[str, ...]] = {
    "corpus load": ("unpooled corpus load ../shared/data/redocred/dev_revised.json --name redocred-dev "
                    "--title 'Re-DocRED dev'",
                    "unpooled corpus load sources/ --format tac --name kbp2015 --schema tac-kbp"),
    "corpus list": ("unpooled corpus list", "unpooled corpus list --json"),
    "corpus audit": ("unpooled corpus audit redocred-dev",),
    "corpus analyse": ("unpooled corpus analyse redocred-dev --scheme uniform --scheme seed",
                       "unpooled corpus analyse ../shared/data/redocred/dev_revised.json --size 100 --svg figures/"),
    "schema list": ("unpooled schema list",),
    "schema show": ("unpooled schema show docred", "unpooled schema show my-schema.json --json"),
    "validate": ("unpooled validate run.jsonl --corpus redocred-dev",
                 "unpooled validate run.kb --corpus sources/ --corpus-format tac --json"),
    "submit": ("unpooled submit run.jsonl --corpus redocred-dev --team 'UX Lab' --run baseline-v2",
               "unpooled submit run.jsonl --corpus redocred-dev --server http://localhost:8000 --token $TOKEN --wait"),
    "submission list": ("unpooled submission list --corpus redocred-dev", "unpooled submission list --json"),
    "submission export": ("unpooled submission export 3 --format jsonl -o run3.jsonl",),
    "score": ("unpooled score --labels labels.jsonl --submissions runs/ --exhaustive exhaustive.jsonl "
              "--exhaustive-documents 30",),
    "annotate status": ("unpooled annotate status --corpus redocred-dev",),
    "annotate simulate": ("unpooled annotate simulate --corpus redocred-dev --accuracy 0.8 --max-answers 500",),
    "annotate request": ("unpooled annotate request 3 --sample 150",),
    "annotate documents": ("unpooled annotate documents --corpus redocred-dev --size 20 --scheme uniform",),
    "annotate controls": ("unpooled annotate controls --corpus redocred-dev -n 100",),
    "annotate mturk": ("unpooled annotate mturk publish --corpus redocred-dev --base-url https://unpooled.example.org",
                       "unpooled annotate mturk collect --corpus redocred-dev"),
    "annotate aggregate": ("unpooled annotate aggregate --corpus redocred-dev",),
    "annotate export": ("unpooled annotate export --corpus redocred-dev -o release/",
                        "unpooled annotate export --corpus redocred-dev -o release.zip --licence 'CC BY 4.0'"),
    "evaluate": ("unpooled evaluate --corpus redocred-dev --level instance",
                 "unpooled evaluate --corpus redocred-dev --coverage-trials 20 --json",
                 "unpooled evaluate --corpus redocred-dev --relation-accuracy 'P108,P463,P39=0.75/0.45; *=0.97/0.07'"),
    "bench ingest": ("unpooled bench ingest --lines 100000 --json",),
    "bench score": ("unpooled bench score --systems 100 --replicates 1000",),
    "bench rescore": ("unpooled bench rescore --systems 20 --verbose",),
    "bench pages": ("unpooled bench pages --submissions 20 --requests 200 --pages leaderboard_instance,submission",),
    "bench shared-task": ("unpooled bench shared-task --documents 60 --submissions 4 --draws 30   (SQLite, 1 worker)",
                          "unpooled bench shared-task --workers 1,2,4 --postgres postgres://postgres@127.0.0.1/test",
                          "unpooled bench shared-task --documents 50000 --submissions 100 --instances 20000-200000 "
                          "--draws 100 --exhaustive 200 --workers 1 --no-sqlite --limit 36000   (TAC KBP size)"),
    "bench lease": ("unpooled bench lease   (SQLite: 500 and 5,000 open items)",
                    "unpooled bench lease --open-tasks 500,20000 --postgres postgres://postgres@127.0.0.1/test --json"),
    "bench core": ("unpooled bench core --json",),
    "bench documents": ("unpooled bench documents --copies 5 --json",),
    "bench controls": ("unpooled bench controls", "unpooled bench controls --reloads 20 --json"),
    "serve": ("unpooled serve --port 8000", "unpooled serve --demo   (what ./dev up runs)",
              "unpooled serve --host 0.0.0.0 --task-workers 0   (web tier only; workers elsewhere)"),
    "worker": ("unpooled worker --slot 1", "unpooled worker --batch   (until the queue is empty)"),
    "simulate pooling-bias": ("unpooled simulate pooling-bias --trials 20 --plot pooling.svg",),
    "simulate estimators": ("unpooled simulate estimators --trials 500 --plot estimators.svg",
                            "unpooled simulate estimators --trials 100 --json -"),
    "simulate adaptive": ("unpooled simulate adaptive --trials 100 --plot adaptive.svg",),
    "simulate regimes": ("unpooled simulate regimes --trials 100 --json regimes.json",),
    "simulate reference": ("unpooled simulate reference --trials 100",
                           "unpooled simulate reference --trials 20 --cells 'crowd 0.9 / 60 instances' --json -"),
    "simulate unassessed": ("unpooled simulate unassessed --trials 100",),
    "simulate entities": ("unpooled simulate entities --trials 200", "unpooled simulate entities --trials 50 --cells "
                          "large-good,small-bad --json entities.json"),
    "simulate documents": ("unpooled simulate documents --trials 300", "unpooled simulate documents --quick --trials 100"),
    "simulate ranks": ("unpooled simulate ranks --trials 200",
                       "unpooled simulate ranks --trials 50 --cells 'coverage 6 close labels' --json -"),
    "simulate ppi": ("unpooled simulate ppi --trials 200", "unpooled simulate ppi --trials 50 --cells infor-5000x1-p50"),
    "simulate protocols": ("unpooled simulate protocols --trials 200",
                           "unpooled simulate protocols --trials 100 --documents 20 --json -"),
    "simulate precision": ("unpooled simulate precision --trials 300",
                           "unpooled simulate precision --trials 60 --cells 10x5000-n50-p95 --json -"),
    "simulate stopping": ("unpooled simulate stopping --trials 200",
                          "unpooled simulate stopping --trials 50 --rival-precision 0.3 --no-boundaries"),
    "user add": ("unpooled user add carol --role organiser",
                 "unpooled user add dave --role submitter --team 'UX Lab' --create-team",
                 "printf '%s\\n' \"$PASSWORD\" | unpooled user add erin --role annotator --password-stdin"),
}


def _examples(lines) -> str:
    return "examples:\n" + "".join(f"  {ln}\n" for ln in lines)


def add_examples(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> None:
    """Give every command and command group an epilog of examples (from :data:`EXAMPLES`)."""
    firsts: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                firsts += add_examples(sp, (*path, name))[:1]
    key = " ".join(path)
    lines = list(EXAMPLES.get(key, ())) or firsts
    if path and lines:
        parser.epilog = _examples(lines)
        parser.formatter_class = HelpFormatter
    return lines


def build_parser() -> argparse.ArgumentParser:
    from .commands import (annotate, bench, corpus, evaluate, schema, score, serve, simulate, submission, user,
                           validate)

    parser = Parser(
        prog="unpooled",
        description="On-demand, importance-sampled evaluation of knowledge base population.",
    )
    parser.add_argument("--version", action="version", version=f"unpooled {__version__}")
    parser.add_argument("--traceback", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (corpus, schema, validate, submission, score, annotate, evaluate, bench, serve, simulate, user):
        module.register(sub)
    add_examples(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not str(w).startswith("-")]
    if words[:1] == ["worker"] and "numpy" not in sys.modules:
        # before the parser: registering the commands imports numpy, and BLAS reads its thread count then
        from unpooled.service.config.server import one_blas_thread

        one_blas_thread()
    parser = build_parser()
    args = parser.parse_args(argv)
    from .terminal import escaped_stdout

    try:
        with escaped_stdout():  # data printed never drives the terminal (security review N10)
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("unpooled: interrupted", file=sys.stderr)
        return 130
    except UnpooledError as exc:
        return _error(str(exc), args.traceback)
    except BrokenPipeError:  # the reader stopped reading (``| head``): no message, the status of a closed pipe
        _quiet_stdout()
        return Exit.PIPE_CLOSED
    except OSError as exc:
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        return _error(f"{exc.strerror or exc}{where}", args.traceback)


def _quiet_stdout() -> None:
    """Standard output to the null device: its descriptor's reader is gone, and Python's flush at exit would
    report the pipe again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no descriptor (an in-memory stdout): nothing left to flush to a pipe
        pass


def _error(message: str, traceback: bool) -> int:
    """An error that is not the input file's: its message (after the traceback with --traceback), exit status 3."""
    if traceback:
        import traceback as tb

        tb.print_exc()
    print(f"unpooled: error: {message}", file=sys.stderr)
    return Exit.ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
