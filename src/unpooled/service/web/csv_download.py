"""The one writer of the service's CSV downloads (the leaderboard's, a submission's scores).

Every cell goes through :func:`unpooled.core.csv_cells.cell`: a text that a spreadsheet would run as a formula is
written as text.  Team names, run names, descriptions and links are a submitter's; the service's own strings go
the same way, so no download depends on which of its columns a submitter can reach.
"""

from __future__ import annotations

import io

from django.http import HttpResponse

from unpooled.core.csv_cells import write_csv


def csv_response(header, rows, filename: str) -> HttpResponse:
    """A CSV attachment of ``header`` and ``rows`` (iterables of values), every cell through
    :func:`~unpooled.core.csv_cells.cell`."""
    buf = io.StringIO()
    write_csv(buf, header, rows)
    resp = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{filename}"'
    return resp
