r"""NIL clustering's B-cubed across the exhaustive documents (:mod:`.entities`, with ``nil_identity``): the
unlinked mentions' gold entities span documents, so the figure is not a sum over them.

References
----------
A. Bagga, B. Baldwin. Algorithms for scoring coreference chains. LREC 1998 workshop.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import scipy.sparse as sp


def _b3_counts(less: np.ndarray, sys_code: np.ndarray, gold_code: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                      np.ndarray]:
    r"""B-cubed P and R of each row of ``less`` (contingency counts: ``less[r, k]`` mentions in cell :math:`k` of
    system cluster ``sys_code[k]`` and gold cluster ``gold_code[k]``):
    :math:`P = \frac1n\sum_{s,g} c_{sg}^2/c_s`, :math:`R = \frac1n\sum_{s,g} c_{sg}^2/c_g` (NaN where
    :math:`n = 0`), the sums taken cell by cell in order (``cumsum``: the sums of a loop over the cells); and n."""
    n = less.sum(1)
    out = []
    for code in (sys_code, gold_code):
        one = sp.csr_matrix((np.ones(len(code), np.int64), (np.arange(len(code)), code)),
                            shape=(len(code), int(code.max()) + 1 if len(code) else 1))
        size = np.asarray(less @ one)[:, code]  # c_s (c_g) of every cell
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(less > 0, (less * less) / np.where(size > 0, size, 1), 0.0)
        total = np.cumsum(t, axis=1)[:, -1] if t.shape[1] else np.zeros(len(less))
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(n > 0, total / np.where(n > 0, n, 1), np.nan))
    return out[0], out[1], n


def cross_document_b3(per_doc: Sequence[Sequence[tuple]]) -> dict:
    r"""B-cubed of the NIL mentions of all exhaustive documents together, gold clusters across documents.

    ``per_doc``: per document, ``(system entity, gold cross-document entity)`` of each gold NIL mention the system
    found.  The figure is over the exhaustive documents' NIL mentions (a system entity and a gold entity both span
    documents, so it is not a sum over documents); its variance is the delete-one-document jackknife
    :math:`\frac{N-1}{N}\sum_d (\hat\theta_{(d)} - \bar\theta)^2` (Efron & Stein 1981), every replicate's
    contingency table the full one less the document's counts (in blocks of documents).

    Returns ``{'p': (value, var), 'r': ..., 'f1': ..., 'n': mentions}``.

    >>> out = cross_document_b3([[("e1", "g")], [("e1", "g")], [("e2", "g")]])
    >>> round(out["p"][0], 3), round(out["r"][0], 3)
    (1.0, 0.556)
    """
    cell: dict = {}
    sys_id: dict = {}
    gold_id: dict = {}
    rows, cols = [], []
    for d, got in enumerate(per_doc):
        for a, b in got:
            k = cell.setdefault((a, b), len(cell))
            sys_id.setdefault(a, len(sys_id))
            gold_id.setdefault(b, len(gold_id))
            rows.append(d)
            cols.append(k)
    N, K = len(per_doc), len(cell)
    sys_code = np.array([sys_id[a] for a, _ in cell], dtype=np.int64)
    gold_code = np.array([gold_id[b] for _, b in cell], dtype=np.int64)
    mine = sp.csr_matrix((np.ones(len(rows), np.int64), (rows, cols)), shape=(N, K))
    full = np.asarray(mine.sum(0), dtype=np.int64).reshape(1, K)
    p, r, n = (float(x[0]) if i < 2 else int(x[0]) for i, x in enumerate(_b3_counts(full, sys_code, gold_code)))

    def f1(x, y):
        return 2 * x * y / (x + y) if x + y > 0 else 0.0

    out = {"n": n}
    full_f = {"p": p, "r": r, "f1": f1(p, r) if n else float("nan")}
    reps = {"p": [], "r": [], "f1": []}
    if n and N >= 2:
        step = max(1, 2_000_000 // max(K, 1))
        for lo in range(0, N, step):
            less = full - mine[lo:lo + step].toarray()
            pp, rr, nn = _b3_counts(less, sys_code, gold_code)
            for x, y, m in zip(pp.tolist(), rr.tolist(), nn.tolist()):
                reps["p"].append(x)
                reps["r"].append(y)
                reps["f1"].append(f1(x, y) if m else float("nan"))
    for k in ("p", "r", "f1"):
        v = np.array([x for x in reps[k] if not math.isnan(x)])
        var = (len(v) - 1) / len(v) * float(((v - v.mean()) ** 2).sum()) if len(v) >= 2 else float("nan")
        out[k] = (full_f[k], var)
    return out
