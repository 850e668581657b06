"""The entity tab of a corpus's leaderboard: mention detection, typing, linking and NIL clustering scores
(``?period=N``: one evaluation period's, as the other tabs)."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, render

from unpooled.core.estimators.entities import LABELS, METRICS
from unpooled.service.corpora.models import Corpus


#: the metrics the table shows, one column each (the others are on the submission's page)
COLUMNS = ("mention_p", "mention_r", "mention_f1", "typing", "link_p", "link_r", "nil_b3_f1")


def unscored_columns(rows) -> list[dict]:
    """The metrics no system is scored at, each with the reason when all share one (a corpus without KB links
    scores no linking): said once above the table, not in every cell (UX review #15)."""
    out = []
    for key in COLUMNS:
        cells = [x for r in rows for x in r["rows"] if x["key"] == key]
        if cells and all(x["value"] is None for x in cells):
            reasons = {x.get("reason") or "" for x in cells}
            out.append({"label": LABELS[key], "reason": reasons.pop() if len(reasons) == 1 else ""})
    return out


def _board(request, name: str):
    """The corpus, metric, periods, period and entity board a request asks for (404: no such corpus or metric)."""
    from unpooled.service.evaluations.entities import leaderboard

    from .leaderboard import _periods

    corpus = get_object_or_404(Corpus, name=name)
    metric = request.GET.get("metric", "mention_f1")
    if metric not in METRICS:
        raise Http404(f"metric must be one of {', '.join(METRICS)}")
    periods, period = _periods(request, corpus)
    return corpus, metric, periods, period, leaderboard(corpus, metric=metric, user=request.user, period=period)


def entity_leaderboard(request, name: str):
    from unpooled.service.accounts.actions import is_organiser

    corpus, metric, periods, period, board = _board(request, name)
    return render(request, "web/leaderboard_entities.html", {
        "corpus": corpus, "metric": metric, "board": board, "unscored": unscored_columns(board["rows"]), "columns": COLUMNS,
        "metrics": [{"key": k, "label": LABELS[k]} for k in METRICS], "organiser": is_organiser(request.user),
        "periods": periods, "period": period})


def entity_leaderboard_csv(request, name: str):
    """The entity board the viewer sees (its metric and period, the same visibility rules), as CSV."""
    from unpooled.service.evaluations.entities import csv_columns, csv_rows

    from ..csv_download import csv_response

    corpus, metric, _, period, board = _board(request, name)
    suffix = f"-period{period.number}" if period else ""
    return csv_response(csv_columns(), csv_rows(board), f"leaderboard-{corpus.name}-entities-{metric}{suffix}.csv")
