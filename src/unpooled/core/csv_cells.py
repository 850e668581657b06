"""CSV cells a spreadsheet shows as written: the one rule of every CSV the project writes (the service's downloads,
``unpooled score --csv``).

A spreadsheet runs a cell that starts with ``= + - @``, a tab, a carriage return or a line feed as a formula
(OWASP, "CSV injection"; some spreadsheets take the full-width ``＝ ＋ － ＠`` too): every text cell that does is
prefixed with ``'``, which spreadsheets show as text.  Numbers are written as numbers (``-0.5`` stays a number).
"""

from __future__ import annotations

import csv
from typing import IO, Iterable

FORMULA_STARTS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")


def cell(value) -> object:
    """``value`` as a CSV cell: ``None`` empty, a text that would start a formula prefixed with ``'``."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in FORMULA_STARTS:
        return "'" + value
    return value


def write_csv(out: IO[str], header: Iterable, rows: Iterable[Iterable], *, lineterminator: str = "\r\n") -> None:
    """``header`` and ``rows`` (iterables of values) as CSV to ``out``, every cell through :func:`cell`; lines end
    in ``lineterminator`` (RFC 4180's CRLF; ``"\n"`` on a terminal, which shows a carriage return escaped)."""
    w = csv.writer(out, lineterminator=lineterminator)
    w.writerow([cell(v) for v in header])
    w.writerows([cell(v) for v in row] for row in rows)
