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


class CommandError(UnpooledError):
    """An error to print as ``unpooled: error: ...`` with exit status 3."""


from unpooled.service.config.bootstrap import setup_django  # noqa: E402,F401 - the commands' entry to the service


def build_parser() -> argparse.ArgumentParser:
    from .commands import (annotate, bench, corpus, evaluate, schema, score, serve, simulate, submission, user,
                           validate)

    parser = argparse.ArgumentParser(
        prog="unpooled",
        description="On-demand, importance-sampled evaluation of knowledge base population.",
    )
    parser.add_argument("--version", action="version", version=f"unpooled {__version__}")
    parser.add_argument("--traceback", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (corpus, schema, validate, submission, score, annotate, evaluate, bench, serve, simulate, user):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("unpooled: interrupted", file=sys.stderr)
        return 130
    except UnpooledError as exc:
        if args.traceback:
            raise
        print(f"unpooled: error: {exc}", file=sys.stderr)
        return Exit.ERROR
    except OSError as exc:
        if args.traceback:
            raise
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"unpooled: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return Exit.ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
