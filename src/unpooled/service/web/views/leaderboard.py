"""The leaderboard page of a corpus (``?level=``, ``?period=N`` for one evaluation period's board), its CSV
download, and the page that explains its numbers."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.utils.functional import SimpleLazyObject

from unpooled.service.corpora.models import Corpus, Period
from unpooled.service.evaluations.policy import SERVICE_LEVELS

from ..csv_download import csv_response
from ..page_cache import anonymous_reader, whole_page


def _corpus_level(request, name: str) -> tuple[Corpus, str]:
    corpus = get_object_or_404(Corpus, name=name)
    return corpus, _level(request)


def _level(request) -> str:
    level = request.GET.get("level", "instance")
    if level not in SERVICE_LEVELS:
        raise Http404("level must be instance, relation or entity")
    return level


def _periods(request, corpus: Corpus):
    """The corpus's periods and the one ``?period=N`` asks for (``None``: all periods); 404 for another."""
    periods = list(Period.objects.filter(corpus=corpus).order_by("number"))
    asked = request.GET.get("period", "")
    period = None
    if asked:
        period = next((p for p in periods if str(p.number) == asked), None)
        if period is None:
            raise Http404(f"corpus {corpus.name} has no period {asked[:20]!r}")
    return periods, period


def leaderboard(request, name: str):
    """The page; a reader not signed in gets it whole from the cache while the board's fingerprint (which covers
    everything the page shows) is unchanged (:mod:`..page_cache`): one query, no model instance."""
    from unpooled.service.evaluations.leaderboard import named_fingerprint

    if not anonymous_reader(request):
        corpus, level = _corpus_level(request, name)
        return _leaderboard(request, corpus, level)
    level = _level(request)
    found = named_fingerprint(name, level)
    if found is None:
        raise Http404("No Corpus matches the given query.")
    pk, fingerprint = found
    key = f"unpooled.page.leaderboard:{pk}:{name}:{level}:{request.GET.get('period', '')[:20]}:{fingerprint}"
    return whole_page(request, key, lambda: _leaderboard(request, get_object_or_404(Corpus, pk=pk), level))


def _leaderboard(request, corpus: Corpus, level: str):
    from unpooled.service.accounts.actions import is_organiser
    from unpooled.service.evaluations.leaderboard import CACHE_SECONDS, cache_key
    from unpooled.service.evaluations.leaderboard import leaderboard as build

    periods, period = _periods(request, corpus)
    # the rendered table is cached under the leaderboard's key (the viewer's scope is part of it: organisers,
    # who alone see the command-line hint, have their own); on a hit the rows are never needed
    key = cache_key(corpus, level, request.user, period)
    board = SimpleLazyObject(lambda: build(corpus, level=level, user=request.user, key=key, period=period))
    return render(request, "web/leaderboard.html", {
        "corpus": corpus, "level": level, "levels": SERVICE_LEVELS, "key": key, "board": board,
        "cache_seconds": CACHE_SECONDS, "organiser": is_organiser(request.user),
        "evaluated": _evaluated_levels(corpus), "periods": periods, "period": period})


def _evaluated_levels(corpus: Corpus) -> list[str]:
    """The levels the corpus's settings evaluate new submissions at (all of them when the settings are unreadable:
    the page then says nothing it cannot back)."""
    from unpooled.service.evaluations.lifecycle import LifecycleError, levels_for

    try:
        return levels_for(corpus)
    except LifecycleError:
        return list(SERVICE_LEVELS)


def leaderboard_csv(request, name: str):
    """The rows the viewer sees on the page, as CSV (the same visibility rules: private rows only for their team
    and the organisers)."""
    from unpooled.service.evaluations.leaderboard import CSV_COLUMNS, csv_rows
    from unpooled.service.evaluations.leaderboard import leaderboard as build

    corpus, level = _corpus_level(request, name)
    _, period = _periods(request, corpus)
    board = build(corpus, level=level, user=request.user, period=period)
    suffix = f"-period{period.number}" if period else ""
    return csv_response(CSV_COLUMNS, csv_rows(board), f"leaderboard-{corpus.name}-{level}{suffix}.csv")


def about_numbers(request):
    """What the leaderboard's and the submission pages' numbers are, in words."""
    from unpooled.service.evaluations.policy import CONFIDENCE

    return render(request, "web/about_numbers.html", {"confidence": round(CONFIDENCE * 100)})
