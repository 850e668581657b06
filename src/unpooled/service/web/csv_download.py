"""The one writer of the service's CSV downloads (the leaderboard's, a submission's scores).

A spreadsheet runs a cell that starts with ``= + - @``, a tab, a carriage return or a line feed as a formula
(OWASP, "CSV injection"; some spreadsheets take the full-width ``＝ ＋ － ＠`` too): every text cell that does is
prefixed with ``'``, which spreadsheets show as text.  Numbers are written as numbers (``-0.5`` stays a number).
Team names, run names, descriptions and links are a submitter's; the service's own strings go the same way, so
no download depends on which of its columns a submitter can reach.
"""

from __future__ import annotations

import csv
import io

from django.http import HttpResponse

FORMULA_STARTS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")


def cell(value) -> object:
    """``value`` as a CSV cell: ``None`` empty, a text that would start a formula prefixed with ``'``."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in FORMULA_STARTS:
        return "'" + value
    return value


def csv_response(header, rows, filename: str) -> HttpResponse:
    """A CSV attachment of ``header`` and ``rows`` (iterables of values), every cell through :func:`cell`."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows([cell(v) for v in row] for row in rows)
    resp = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{filename}"'
    return resp
