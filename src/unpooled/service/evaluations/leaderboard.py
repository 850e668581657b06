"""The leaderboard of a corpus: the newest score of every submission, tie groups, an SVG chart."""

from __future__ import annotations

import math

import numpy as np

from unpooled.core.plots.svg import interval_chart
from unpooled.core.ranking import tie_groups
from unpooled.service.corpora.models import Corpus

from .models import Score


def leaderboard(corpus: Corpus, *, level: str = "instance") -> dict:
    """Rows (newest score per submission at ``level``) ranked by F1 with tie groups, and the chart."""
    newest: dict[int, Score] = {}
    for s in Score.objects.filter(submission__corpus=corpus, level=level).select_related("submission__team").order_by("id"):
        newest[s.submission_id] = s
    scores = list(newest.values())
    if not scores:
        return {"rows": [], "svg": "", "level": level}

    def arr(name):
        return np.array([getattr(s, name) if getattr(s, name) is not None else math.nan for s in scores], dtype=float)

    f1, lo, hi = arr("f1"), arr("f1_lo"), arr("f1_hi")
    groups = tie_groups(f1, lo, hi)
    order = sorted(range(len(scores)), key=lambda i: (groups[i], -(f1[i] if not math.isnan(f1[i]) else -1)))
    rows = []
    for i in order:
        s = scores[i]
        rows.append({"rank": int(groups[i]), "tied": int((groups == groups[i]).sum()) > 1, "score": s,
                     "submission": s.submission, "name": f"{s.submission.team.name}/{s.submission.run_id}"})
    svg = interval_chart([r["name"] for r in rows], [r["score"].f1 for r in rows],
                         [r["score"].f1_lo for r in rows], [r["score"].f1_hi for r in rows],
                         title=f"F1 with 90% intervals ({level} level)", value_label="F1", item_label="system",
                         value_range=(0.0, 1.0))
    return {"rows": rows, "svg": svg, "level": level}
