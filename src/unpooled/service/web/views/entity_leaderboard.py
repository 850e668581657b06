"""The entity tab of a corpus's leaderboard: mention detection, typing, linking and NIL clustering scores."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, render

from unpooled.core.estimators.entities import LABELS, METRICS
from unpooled.service.corpora.models import Corpus


def entity_leaderboard(request, name: str):
    from unpooled.service.accounts.actions import is_organiser
    from unpooled.service.evaluations.entities import leaderboard

    corpus = get_object_or_404(Corpus, name=name)
    metric = request.GET.get("metric", "mention_f1")
    if metric not in METRICS:
        raise Http404(f"metric must be one of {', '.join(METRICS)}")
    board = leaderboard(corpus, metric=metric, user=request.user)
    return render(request, "web/leaderboard_entities.html", {
        "corpus": corpus, "metric": metric, "board": board,
        "metrics": [{"key": k, "label": LABELS[k]} for k in METRICS], "organiser": is_organiser(request.user)})
