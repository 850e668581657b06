r"""A simulated crowd over known truth (pure, vectorised).

An annotator with accuracy *a* and bias *b* answers a binary item whose true class is
1 ("correct") wrongly with probability :math:`(1-a)(1-b)` and one of class 0 wrongly with
probability :math:`(1-a)(1+b)` (clipped to [0, 1]); *b* = 0 gives accuracy exactly *a* on
both classes, *b* > 0 leans errors towards answering 1.  With more classes, a wrong answer
is uniform over the other classes (bias unused).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from ..errors import InvalidInputError
from .aggregation import Answers


@dataclass(frozen=True)
class SimulatedAnnotator:
    accuracy: float = 0.8
    bias: float = 0.0
    latency: float = 10.0   # mean seconds per answer (log-normal, sigma 0.5)

    def __post_init__(self):
        if not 0 <= self.accuracy <= 1:
            raise InvalidInputError(f"accuracy: expected a probability in [0, 1], got {self.accuracy}")
        if not -1 <= self.bias <= 1:
            raise InvalidInputError(f"bias: expected a value in [-1, 1], got {self.bias}")
        if self.latency <= 0:
            raise InvalidInputError(f"latency: expected > 0 seconds, got {self.latency}")

    def error_rate(self, truth: np.ndarray) -> np.ndarray:
        """Probability of a wrong answer for items of true class ``truth`` (binary)."""
        lean = np.where(truth == 1, 1 - self.bias, 1 + self.bias)
        return np.clip((1 - self.accuracy) * lean, 0.0, 1.0)


def simulate_answers(truth, annotators: list[SimulatedAnnotator], *, k: int = 3, n_classes: int = 2,
                     rng=None) -> tuple[Answers, np.ndarray]:
    """Each item answered by ``k`` distinct annotators drawn at random; returns answers and latencies."""
    truth = np.asarray(truth, dtype=np.int64)
    m = len(annotators)
    if k < 1 or k > m:
        raise InvalidInputError(f"k: expected 1..{m} (the number of annotators), got {k}")
    if len(truth) and (truth.min() < 0 or truth.max() >= n_classes):
        raise InvalidInputError(f"truth: expected classes 0..{n_classes - 1}")
    rng = np.random.default_rng(rng)
    n = len(truth)
    who = np.argsort(rng.random((n, m)), axis=1)[:, :k]          # k distinct annotators per item
    items = np.repeat(np.arange(n), k)
    workers = who.ravel()
    t = truth[items]
    err = np.empty(len(items))
    for w, ann in enumerate(annotators):
        sel = workers == w
        err[sel] = ann.error_rate(t[sel]) if n_classes == 2 else 1 - ann.accuracy
    wrong = rng.random(len(items)) < err
    if n_classes == 2:
        labels = np.where(wrong, 1 - t, t)
    else:
        shift = rng.integers(1, n_classes, size=len(items))
        labels = np.where(wrong, (t + shift) % n_classes, t)
    lat = np.array([annotators[w].latency for w in workers])
    latency = rng.lognormal(np.log(lat), 0.5)
    ans = Answers.from_arrays(items, workers, labels, n_items=n, n_workers=m, n_classes=n_classes)
    return ans, latency


def parse_relation_accuracy(spec: str) -> tuple:
    """A crowd whose accuracy depends on the relation, from ``"P108,P463=0.75/0.45; *=0.97/0.07"``: groups of
    relations separated by ``;``, each ``RELATIONS=ACCURACY`` (the same on both classes) or
    ``RELATIONS=SENSITIVITY/FALSE_POSITIVE_RATE``; ``*`` names every relation no group names.  Returns
    ``((relations or None for *, sensitivity, false-positive rate), ...)``.

    >>> parse_relation_accuracy("P17=0.95; *=0.75/0.45")
    ((frozenset({'P17'}), 0.95, 0.050000000000000044), (None, 0.75, 0.45))
    """
    out, seen = [], set()
    for n, part in enumerate(p for p in (spec or "").split(";") if p.strip()):
        rels, sep, value = part.partition("=")
        names = [r.strip() for r in rels.split(",") if r.strip()]
        where = f"relation accuracy, group {n + 1} ({part.strip()!r})"
        if not sep or not names:
            raise InvalidInputError(f"{where}: expected RELATIONS=ACCURACY or RELATIONS=SENSITIVITY/FPR")
        try:
            nums = [float(x) for x in value.split("/")]
        except ValueError:
            raise InvalidInputError(f"{where}: {value.strip()!r} is not a number or SENSITIVITY/FPR") from None
        if len(nums) not in (1, 2) or not all(0 <= x <= 1 for x in nums):
            raise InvalidInputError(f"{where}: expected one accuracy or SENSITIVITY/FPR, each in [0, 1]")
        sens, fpr = (nums[0], 1 - nums[0]) if len(nums) == 1 else nums
        again = seen.intersection(names)
        if again:
            raise InvalidInputError(f"{where}: {sorted(again)[0]} is named by an earlier group")
        seen.update(names)
        out.append((None if names == ["*"] else frozenset(names), sens, fpr))
        if "*" in names and names != ["*"]:
            raise InvalidInputError(f"{where}: '*' stands alone (every relation no other group names)")
    if not out:
        raise InvalidInputError("relation accuracy: expected at least one group RELATIONS=ACCURACY")
    return tuple(out)


def relation_rates(table: tuple, relation: str) -> tuple[float, float] | None:
    """The (sensitivity, false-positive rate) ``table`` (:func:`parse_relation_accuracy`) gives ``relation``,
    or None when no group names it and there is no ``*``."""
    default = None
    for names, sens, fpr in table:
        if names is None:
            default = (sens, fpr)
        elif relation in names:
            return sens, fpr
    return default


def expected_majority_accuracy(accuracy: float, k: int) -> float:
    r""":math:`P(\text{Binomial}(k, a) > k/2)`, ties at even *k* broken at random (half credit).

    For a = 0.8, k = 3: :math:`0.8^3 + 3 \cdot 0.8^2 \cdot 0.2 = 0.896`.
    """
    if k < 1:
        raise InvalidInputError(f"k: expected at least 1, got {k}")
    p = 0.0
    for j in range(k + 1):
        pj = comb(k, j) * accuracy ** j * (1 - accuracy) ** (k - j)
        if 2 * j > k:
            p += pj
        elif 2 * j == k:
            p += pj / 2
    return p
