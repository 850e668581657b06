"""The leaderboard page of a corpus."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.utils.functional import SimpleLazyObject

from unpooled.service.corpora.models import Corpus
from unpooled.service.evaluations.policy import SERVICE_LEVELS


def leaderboard(request, name: str):
    from unpooled.service.evaluations.leaderboard import CACHE_SECONDS, cache_key
    from unpooled.service.evaluations.leaderboard import leaderboard as build

    corpus = get_object_or_404(Corpus, name=name)
    level = request.GET.get("level", "instance")
    if level not in SERVICE_LEVELS:
        raise Http404("level must be instance, relation or entity")
    # the rendered table is cached under the leaderboard's key: on a hit the rows are never needed
    key = cache_key(corpus, level, request.user)
    board = SimpleLazyObject(lambda: build(corpus, level=level, user=request.user, key=key))
    return render(request, "web/leaderboard.html", {"corpus": corpus, "level": level, "key": key, "board": board,
                                                    "cache_seconds": CACHE_SECONDS})
