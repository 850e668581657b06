"""The leaderboard page of a corpus (``?level=``, and ``?period=N`` for one evaluation period's board)."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.utils.functional import SimpleLazyObject

from unpooled.service.corpora.models import Corpus, Period
from unpooled.service.evaluations.policy import SERVICE_LEVELS


def leaderboard(request, name: str):
    from unpooled.service.evaluations.leaderboard import CACHE_SECONDS, cache_key
    from unpooled.service.evaluations.leaderboard import leaderboard as build

    corpus = get_object_or_404(Corpus, name=name)
    level = request.GET.get("level", "instance")
    if level not in SERVICE_LEVELS:
        raise Http404("level must be instance, relation or entity")
    periods = list(Period.objects.filter(corpus=corpus).order_by("number"))
    period = None
    asked = request.GET.get("period", "")
    if asked:
        period = next((p for p in periods if str(p.number) == asked), None)
        if period is None:
            raise Http404(f"corpus {corpus.name} has no period {asked[:20]!r}")
    # the rendered table is cached under the leaderboard's key: on a hit the rows are never needed
    key = cache_key(corpus, level, request.user, period)
    board = SimpleLazyObject(lambda: build(corpus, level=level, user=request.user, key=key, period=period))
    return render(request, "web/leaderboard.html", {"corpus": corpus, "level": level, "key": key, "board": board,
                                                    "cache_seconds": CACHE_SECONDS, "periods": periods,
                                                    "period": period})
