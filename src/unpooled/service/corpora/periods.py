"""The open evaluation period of a corpus and the period an upload belongs to (the lowest layer that needs them:
the submissions app stores the period at upload).  Opening, closing and releasing are in
:mod:`unpooled.service.evaluations.periods`."""

from __future__ import annotations

from unpooled.core.errors import UnpooledError

from .models import Corpus, Period


class PeriodError(UnpooledError):
    """A period action refused: ``code`` is stable (API error codes), ``status`` the HTTP status."""

    def __init__(self, message: str, *, code: str = "invalid_request", status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def open_period(corpus: Corpus) -> Period | None:
    return Period.objects.filter(corpus=corpus, closed__isnull=True).first()


def period_for_upload(corpus: Corpus, *, lock: bool = False) -> Period | None:
    """The period a submission stored now belongs to; ``None`` for a corpus that has never had a period.

    Raises :class:`PeriodError` (409 ``period_closed``) when the corpus has had periods and none is open.
    ``lock``: inside a transaction, lock the open period's row, so that closing it waits for the upload being
    stored (the upload then belongs to the period, and its scores are frozen with the others')."""
    qs = Period.objects.filter(corpus=corpus, closed__isnull=True)
    current = (qs.select_for_update() if lock else qs).first()
    if current is not None:
        return current
    last = Period.objects.filter(corpus=corpus).order_by("-number").first()
    if last is None:
        return None
    raise PeriodError(f"corpus {corpus.name!r} takes no submissions now: its evaluation period {last.number} closed "
                      f"on {last.closed:%Y-%m-%d %H:%M} UTC and no new period is open; ask the organisers when the "
                      "next one opens", code="period_closed", status=409)
