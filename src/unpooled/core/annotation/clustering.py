r"""The cross-document clustering task: answers, their validation, and their aggregation into clusters.

The task shows the canonical mention of every unlinked (NIL) entity cluster of the exhaustively annotated
documents (items ``0..n-1``); an annotator groups the items that name the same entity::

    {"groups": [[0, 3], [1], [2, 4]]}

every item in exactly one group (a singleton: an entity of its own).

**Aggregation** (:func:`aggregate_clusters`).  For every pair of items, the share of the :math:`k` answers that put
them in one group; a pair is *together* when a strict majority does, and the clusters are the connected components
of the together pairs (transitive closure, as the in-document coreference of
:func:`~unpooled.core.annotation.answers.aggregate_mentions`).

**Agreement figures.**  Over the :math:`\binom n2` pairs, with :math:`y_{pa} = 1` when answer :math:`a` puts pair
:math:`p` together:

* ``unanimous``: the share of pairs every answer decides alike;
* ``rand``: the mean Rand index between two answers (the share of pairs two answers decide alike), averaged over
  the answer pairs;
* ``kappa``: Fleiss' :math:`\kappa` of the binary pair decisions (Fleiss 1971), chance agreement from the
  overall share of "together" decisions; NaN when every decision is the same;
* ``support``: per aggregated cluster of two or more items, the mean share of answers putting its pairs together.

References
----------
J. L. Fleiss. Measuring nominal scale agreement among many raters. Psychological Bulletin 76(5), 1971.
W. M. Rand. Objective criteria for the evaluation of clustering methods. JASA 66(336), 1971.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .answers import AnswerError, quorum

#: the most items one clustering task shows (the page and the pair counts stay bounded)
MAX_ITEMS = 400


def validate_clusters(value: Any, *, n_items: int) -> dict:
    """Check a clustering answer: ``groups`` partition the items ``0..n_items-1`` (raises :class:`AnswerError`).

    Returns the normal form: groups sorted by their smallest item, items sorted within a group.
    """
    if not isinstance(value, Mapping) or not isinstance(value.get("groups"), list):
        raise AnswerError("groups", "expected an object with a list 'groups'")
    unknown = set(value) - {"groups"}
    if unknown:
        raise AnswerError(sorted(map(str, unknown))[0], "unknown field")
    seen: dict[int, int] = {}
    out = []
    for g, group in enumerate(value["groups"]):
        where = f"groups[{g}]"
        if not isinstance(group, list) or not group:
            raise AnswerError(where, "expected a non-empty list of item numbers")
        for item in group:
            if not isinstance(item, int) or isinstance(item, bool) or not 0 <= item < n_items:
                raise AnswerError(where, f"expected item numbers 0-{n_items - 1}, got {str(item)[:20]!r}")
            if item in seen:
                raise AnswerError(where, f"item {item} is already in groups[{seen[item]}]")
            seen[item] = g
        out.append(sorted(group))
    missing = [i for i in range(n_items) if i not in seen]
    if missing:
        raise AnswerError("groups", f"item {missing[0]} is in no group ({len(missing)} items missing)")
    out.sort(key=lambda grp: grp[0])
    return {"groups": out}


def _labels(groups: Sequence[Sequence[int]], n: int) -> np.ndarray:
    lab = np.empty(n, dtype=np.int64)
    for g, group in enumerate(groups):
        lab[list(group)] = g
    return lab


def aggregate_clusters(answers: Sequence[Mapping], n_items: int) -> dict:
    """Strict-majority pairwise clusters of ``answers`` (validated) over ``n_items``, with agreement figures.

    Returns ``{"clusters": [[items], ...], "agreement": {...}, "answers": k}`` (module docs); clusters sorted by
    their smallest item, singletons included; a figure that is undefined (one answer, one item) is None, so the
    result can be stored as JSON.

    Examples
    --------
    >>> a = {"groups": [[0, 1], [2]]}; b = {"groups": [[0, 1, 2]]}; c = {"groups": [[0], [1], [2]]}
    >>> aggregate_clusters([a, a, b], 3)["clusters"]
    [[0, 1], [2]]
    >>> aggregate_clusters([a, b, c], 3)["agreement"]["unanimous"]
    0.0
    """
    k = len(answers)
    n = int(n_items)
    if n == 0 or k == 0:
        return {"clusters": [[i] for i in range(n)], "answers": k,
                "agreement": {"unanimous": None, "rand": None, "kappa": None, "pairs": 0, "support": []}}
    labels = np.stack([_labels(a["groups"], n) for a in answers])  # (k, n)
    iu, ju = np.triu_indices(n, 1)
    Y = labels[:, iu] == labels[:, ju]  # (k, pairs)
    votes = Y.sum(0)
    need = quorum(k)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in np.flatnonzero(votes >= need).tolist():
        ri, rj = find(int(iu[p])), find(int(ju[p]))
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    comp: dict[int, list[int]] = {}
    for i in range(n):
        comp.setdefault(find(i), []).append(i)
    clusters = sorted(comp.values(), key=lambda c: c[0])
    P = Y.shape[1]
    unanimous = float(np.mean((votes == 0) | (votes == k))) if P else float("nan")
    if k >= 2 and P:
        same = [float(np.mean(Y[a] == Y[b])) for a in range(k) for b in range(a + 1, k)]
        rand = float(np.mean(same))
        # Fleiss' kappa over pairs (items) with two categories
        pj = votes.sum() / (P * k)
        Pi = (votes * (votes - 1) + (k - votes) * (k - votes - 1)) / (k * (k - 1))
        Pe = pj ** 2 + (1 - pj) ** 2
        kappa = float((Pi.mean() - Pe) / (1 - Pe)) if Pe < 1 else float("nan")
    else:
        rand = kappa = float("nan")
    share = votes / k
    support = []
    for c in clusters:
        if len(c) < 2:
            continue
        cs = set(c)
        inside = [share[p] for p in range(P) if int(iu[p]) in cs and int(ju[p]) in cs]
        support.append(round(float(np.mean(inside)), 4))
    return {"clusters": clusters, "answers": k,
            "agreement": {"unanimous": _num(unanimous), "rand": _num(rand), "kappa": _num(kappa), "pairs": int(P),
                          "support": support}}


def _num(x: float) -> float | None:
    """A figure for the stored result (JSON): None where it is undefined."""
    return None if x is None or x != x else float(x)


def b_cubed(system: Sequence, gold: Sequence) -> tuple[float, float]:
    """B-cubed precision and recall of a clustering of items (``system[i]``, ``gold[i]``: cluster labels).

    NaN for no items.

    >>> b_cubed([0, 0, 1], [0, 1, 1])
    (0.6666666666666666, 0.6666666666666666)
    """
    n = len(system)
    if n == 0:
        return float("nan"), float("nan")
    s = _codes(system)
    g = _codes(gold)
    same_s = s[:, None] == s[None, :]
    same_g = g[:, None] == g[None, :]
    both = (same_s & same_g).sum(1)
    return float(np.mean(both / same_s.sum(1))), float(np.mean(both / same_g.sum(1)))


def _codes(labels: Sequence) -> np.ndarray:
    """Cluster labels as integers, equal exactly when the labels are (Python's ``hash`` would make a collision,
    and so the figures, depend on ``PYTHONHASHSEED``)."""
    index: dict = {}
    return np.asarray([index.setdefault(x, len(index)) for x in labels], dtype=np.int64)


def _head(text: str) -> str:
    words = str(text).lower().split()
    return words[-1] if words else ""


def blocks(items: Sequence[Mapping], max_items: int = MAX_ITEMS) -> list[list[int]]:
    """The items split into clustering tasks of at most ``max_items`` each (indices into ``items``).

    All in one task when they fit.  Otherwise one task per entity ``type`` (items of two types are not asked
    about: blocking, as in record linkage), and a type with more than ``max_items`` items in consecutive runs of
    its items sorted by their last word, then their text ("Clinton", "Bill Clinton" and "Hillary Clinton" fall
    together), cut into runs of near-equal size; pairs across tasks are never asked, so the clusters never join
    them.  A type with one item needs no task (the caller drops blocks of one).

    >>> items = [{"type": "PER", "text": t} for t in ("Bill Clinton", "Paris", "Clinton", "Al Gore")]
    >>> blocks(items, 10), blocks(items, 2)
    ([[0, 1, 2, 3]], [[0, 2], [3, 1]])
    >>> blocks([{"type": "LOC", "text": "Paris"}, {"type": "PER", "text": "Paris Hilton"}], 1)
    [[0], [1]]
    """
    if max_items < 1:
        raise ValueError(f"max_items: expected at least 1, got {max_items}")
    n = len(items)
    if n <= max_items:
        return [list(range(n))] if n else []
    by_type: dict = {}
    for i, it in enumerate(items):
        by_type.setdefault(str(it.get("type", "")).upper(), []).append(i)
    out = []
    for t in sorted(by_type):
        text = {i: str(items[i].get("text", "")) for i in by_type[t]}
        idx = sorted(by_type[t], key=lambda i: (_head(text[i]), text[i].lower(), i))
        k = -(-len(idx) // max_items)  # runs of near-equal size: no lone item left at the end of a type
        cuts = [len(idx) * j // k for j in range(k + 1)]
        out += [idx[cuts[j]:cuts[j + 1]] for j in range(k)]
    return out


def combine_agreement(agreements: Sequence[Mapping]) -> dict:
    """The agreement figures of several blocks' :func:`aggregate_clusters` as one: ``pairs`` summed, ``unanimous``
    over all their pairs (exact: the pairs-weighted mean), ``rand`` and ``kappa`` the pairs-weighted means of the
    blocks' (a mean of per-block figures, not the figure of the pooled decisions), ``blocks`` their number.

    >>> combine_agreement([{"pairs": 10, "unanimous": 0.9, "rand": 0.95, "kappa": 0.5},
    ...                    {"pairs": 30, "unanimous": 0.7, "rand": 0.85, "kappa": None}])
    {'pairs': 40, 'unanimous': 0.75, 'rand': 0.875, 'kappa': 0.5, 'blocks': 2}
    """
    out: dict = {"pairs": int(sum(int(a.get("pairs") or 0) for a in agreements))}
    for key in ("unanimous", "rand", "kappa"):
        got = [(float(a[key]), int(a.get("pairs") or 0)) for a in agreements if a.get(key) is not None]
        w = sum(p for _, p in got)
        if len(got) == 1:  # one block: its own figure, exactly
            out[key] = _num(got[0][0])
        else:
            out[key] = _num(sum(v * p for v, p in got) / w) if w else None
    out["blocks"] = len(agreements)
    return out


__all__ = ["MAX_ITEMS", "aggregate_clusters", "b_cubed", "blocks", "combine_agreement", "validate_clusters"]

