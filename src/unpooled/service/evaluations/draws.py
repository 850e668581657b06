"""Draws from a submission's sampling distribution :math:`p_i` (method.md §2), stored in order."""

from __future__ import annotations

import numpy as np
from django.db import transaction
from django.db.models import Max

from unpooled.core.estimators.sampling import sampling_distribution
from unpooled.service.submissions.models import RelationInstance, Submission

from .models import Draw


def _codes(values) -> np.ndarray:
    index: dict = {}
    return np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64)


def draw(sub: Submission, n: int, *, level: str = "instance", rng=None) -> list[int]:
    """``n`` draws with replacement from the submission's sampling distribution; stored in order.

    Returns the drawn instance ids (repeats included).
    """
    rows = list(RelationInstance.objects.filter(submission=sub).order_by("pk")
                .values_list("pk", "predicate", "subject_id", "object_id", "value", "key", "key_hash"))
    if not rows:
        return []
    p = sampling_distribution(len(rows), level=level, predicate=_codes(r[1] for r in rows),
                              subject=_codes(r[2] for r in rows),
                              fill=_codes((r[2], r[1], r[3] if r[3] is not None else "=" + (r[4] or "")) for r in rows))
    picks = np.random.default_rng(rng).choice(len(rows), size=n, replace=True, p=p)
    with transaction.atomic():
        start = (Draw.objects.filter(submission=sub, level=level).aggregate(m=Max("seq"))["m"] or 0) + 1
        Draw.objects.bulk_create([Draw(submission=sub, level=level, seq=start + j, instance_id=rows[k][0],
                                       key=rows[k][5], key_hash=rows[k][6]) for j, k in enumerate(picks.tolist())])
    return [rows[k][0] for k in picks.tolist()]
