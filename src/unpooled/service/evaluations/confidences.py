"""The submitted confidences, read into the core's input for the prediction-powered precision.

Every stored instance keeps the confidence its submission gave (1 when it gave none).  After a scoring,
:func:`ppi_details` reads them for the scored systems into the ``(systems x universe)`` matrix of
:func:`unpooled.core.estimators.ppi.confidence_matrix` and returns the core's PPI++ precision
(:func:`~unpooled.core.estimators.ppi.ppi_precision`) on the same design and weights, per system, for
``Score.details['ppi']``.  It is shown beside the label-only figure, not used: its basis is the labelled sample
with every majority label taken as certain (the design's labels), so it stands beside ``details['sample']``, the
label-only figure of the same draws; the published precision comes from the crowd's votes.
"""

from __future__ import annotations

import math

from unpooled.core.estimators.ppi import confidence_matrix, ppi_precision
from unpooled.service.submissions.models import RelationInstance

from .policy import CONFIDENCE


def confidences_of(result, by_name: dict, universe: list):
    """The confidence matrix of the scored systems (``result.systems``, rows of ``result.design.P``) over
    ``universe`` (its columns), or None when every confidence is 1 (the PPI estimate would be the label-only one)."""
    subs = [by_name[name] for name in result.systems]
    if not RelationInstance.objects.filter(submission__in=subs, confidence__lt=1.0).exists():
        return None
    index = {ref.key: u for u, ref in enumerate(universe)}
    row_of = {sub.pk: i for i, sub in enumerate(subs)}
    seen: dict[tuple[int, int], float] = {}
    for sid, key, conf in (RelationInstance.objects.filter(submission__in=subs).order_by("pk")
                           .values_list("submission_id", "key", "confidence").iterator()):
        u = index.get(key)
        if u is not None:
            seen.setdefault((row_of[sid], u), float(conf))  # a repeated instance: its first confidence
    rows, cols = zip(*seen) if seen else ((), ())
    return confidence_matrix(result.design.P, rows, cols, list(seen.values()))


def ppi_details(scored) -> list[dict | None]:
    """Per scored system (the order of ``scored.result.rows``), its ``details['ppi']``: the PPI++ precision with
    its interval and coefficient beside the label-only figure of the same draws; None for every system when the
    submissions gave no confidences."""
    res = scored.result
    K = confidences_of(res, scored.by_name, scored.universe)
    if K is None:
        return [None] * len(res.rows)
    q = ppi_precision(res.design, K, W=res.scores.weights, confidence=CONFIDENCE)

    def num(x):  # published figures are clipped to [0, 1], as the scores are
        x = float(x)
        return None if math.isnan(x) else min(1.0, max(0.0, x))

    out = []
    for i in range(len(res.rows)):
        w, wl = q.width[i], q.width_labels[i]
        out.append({"p": num(q.p[i]), "lo": num(q.ci[0][i]), "hi": num(q.ci[1][i]), "se": float(q.se[i]),
                    "lambda": float(q.lam[i]), "conf_mean": float(q.conf_mean[i]),
                    "labels": {"p": num(q.p_labels[i]), "lo": num(q.ci_labels[0][i]), "hi": num(q.ci_labels[1][i])},
                    "narrower": round(100 * (1 - w / wl)) if wl > 0 and q.lam[i] != 0 else 0,
                    "method": q.method, "used": False, "basis": "majority labels taken as certain"})
    return out
