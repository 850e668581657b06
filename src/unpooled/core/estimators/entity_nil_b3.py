r"""NIL clustering's B-cubed across the exhaustive documents (:mod:`.entities`, with ``nil_identity``): the
unlinked mentions' gold entities span documents, so the figure is not a sum over them.

References
----------
A. Bagga, B. Baldwin. Algorithms for scoring coreference chains. LREC 1998 workshop.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Mapping, Sequence

import numpy as np


def _b3_counts(cells: Mapping) -> tuple[float, float, int]:
    r"""B-cubed P and R from the contingency counts ``(system cluster, gold cluster) -> c``:
    :math:`P = \frac1n\sum_{s,g} c_{sg}^2/c_s`, :math:`R = \frac1n\sum_{s,g} c_{sg}^2/c_g`."""
    cs: dict = defaultdict(int)
    cg: dict = defaultdict(int)
    n = 0
    for (a, b), c in cells.items():
        cs[a] += c
        cg[b] += c
        n += c
    if n == 0:
        return float("nan"), float("nan"), 0
    p = sum(c * c / cs[a] for (a, b), c in cells.items() if c) / n
    r = sum(c * c / cg[b] for (a, b), c in cells.items() if c) / n
    return p, r, n


def cross_document_b3(per_doc: Sequence[Sequence[tuple]]) -> dict:
    r"""B-cubed of the NIL mentions of all exhaustive documents together, gold clusters across documents.

    ``per_doc``: per document, ``(system entity, gold cross-document entity)`` of each gold NIL mention the system
    found.  The figure is over the exhaustive documents' NIL mentions (a system entity and a gold entity both span
    documents, so it is not a sum over documents); its variance is the delete-one-document jackknife
    :math:`\frac{N-1}{N}\sum_d (\hat\theta_{(d)} - \bar\theta)^2` (Efron & Stein 1981).

    Returns ``{'p': (value, var), 'r': ..., 'f1': ..., 'n': mentions}``.

    >>> out = cross_document_b3([[("e1", "g")], [("e1", "g")], [("e2", "g")]])
    >>> round(out["p"][0], 3), round(out["r"][0], 3)
    (1.0, 0.556)
    """
    cells: dict = defaultdict(int)
    docs = []
    for rows in per_doc:
        mine: dict = defaultdict(int)
        for a, b in rows:
            mine[(a, b)] += 1
            cells[(a, b)] += 1
        docs.append(mine)
    p, r, n = _b3_counts(cells)

    def f1(x, y):
        return 2 * x * y / (x + y) if x + y > 0 else 0.0

    out = {"n": n}
    full = {"p": p, "r": r, "f1": f1(p, r) if n else float("nan")}
    N = len(docs)
    reps = {"p": [], "r": [], "f1": []}
    if n and N >= 2:
        for mine in docs:
            less = {k: c - mine.get(k, 0) for k, c in cells.items()}
            pp, rr, nn = _b3_counts(less)
            if nn == 0:
                pp = rr = float("nan")
            reps["p"].append(pp)
            reps["r"].append(rr)
            reps["f1"].append(f1(pp, rr) if nn else float("nan"))
    for k in ("p", "r", "f1"):
        v = np.array([x for x in reps[k] if not math.isnan(x)])
        var = (len(v) - 1) / len(v) * float(((v - v.mean()) ** 2).sum()) if len(v) >= 2 else float("nan")
        out[k] = (full[k], var)
    return out
