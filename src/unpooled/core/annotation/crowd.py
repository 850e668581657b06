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
