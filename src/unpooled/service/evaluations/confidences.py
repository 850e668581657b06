"""The prediction-powered precision beside each score, from the submitted confidences.

Every stored instance keeps the confidence its submission gave (1 when it gave none); the corpus's inputs read them
with the pool (:func:`.inputs.confidences`, the ``(systems x universe)`` matrix of
:func:`unpooled.core.estimators.ppi.confidence_matrix`).  After a scoring, :func:`ppi_details` returns the core's
PPI++ precision (:func:`~unpooled.core.estimators.ppi.ppi_precision`) on the same design and weights, per system,
for ``Score.details['ppi']``.  It is shown beside the label-only figure, not used: its basis is the labelled sample
with every majority label taken as certain (the design's labels), so it stands beside ``details['sample']``, the
label-only figure of the same draws; the published precision comes from the crowd's votes.
"""

from __future__ import annotations

import math

from unpooled.core.estimators.ppi import ppi_precision

from .policy import CONFIDENCE


def ppi_details(scored) -> list[dict | None]:
    """Per scored system (the order of ``scored.result.rows``), its ``details['ppi']``: the PPI++ precision with
    its interval and coefficient beside the label-only figure of the same draws; None for every system when the
    submissions gave no confidences."""
    res = scored.result
    K = scored.confidences
    if K is None:
        return [None] * len(res.rows)
    q = ppi_precision(res.design, K, W=res.scores.weights, confidence=CONFIDENCE)

    def num(x):  # published figures are clipped to [0, 1], as the scores are
        x = float(x)
        return None if math.isnan(x) else min(1.0, max(0.0, x))

    out = []
    for i in range(len(res.rows)):
        e, el = q.p[i], q.labels[i]
        w, wl = e.interval.width, el.interval.width
        out.append({"p": num(e.value), "lo": num(e.lo), "hi": num(e.hi), "se": e.se,
                    "lambda": float(q.lam[i]), "conf_mean": float(q.conf_mean[i]),
                    "labels": {"p": num(el.value), "lo": num(el.lo), "hi": num(el.hi)},
                    "narrower": round(100 * (1 - w / wl)) if wl > 0 and q.lam[i] != 0 else 0,
                    "method": e.method, "used": False, "basis": "majority labels taken as certain"})
    return out
