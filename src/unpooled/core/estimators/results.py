"""One result type for every estimate: :class:`Estimate` (value, standard error, interval, the sample size behind
it, the method that produced it) and its :class:`ConfidenceInterval` (bounds, level, construction).

Both are frozen.  The fields are plain floats for one estimate, or arrays of one length for the systems of one fit
(the joint estimators score every system at once): ``est[i]`` is then system ``i``'s scalar :class:`Estimate`.  An
estimate that cannot be given is :meth:`Estimate.undefined`: NaN figures and a ``reason`` readers are shown.

The method is recorded where the estimate is made (``'joint-balance'``, ``'ppi++'``, ``'capture'``, ...) and the
interval's construction beside it (:data:`INTERVALS`), so that no reader rebuilds either from a string.

>>> e = Estimate(0.8, 0.05, ConfidenceInterval(0.7, 0.88, 0.9, "wilson"), 150, "joint-balance")
>>> e.to_dict()
{'value': 0.8, 'se': 0.05, 'lo': 0.7, 'hi': 0.88, 'n': 150, 'level': 0.9, 'method': 'joint-balance', \
'interval': 'wilson'}
>>> Estimate.undefined("no verified draw yet").to_dict()["reason"]
'no verified draw yet'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: how an interval was built: Wilson's score interval at the effective sample size (with the Poisson bound near 0 and
#: 1), the hull of Wilson's and the crowd votes' calibrated likelihood-ratio (profile) interval, a normal interval, the hull of Wilson's and the normal one, F1's
#: extremes over P's and R's joint region, the bootstrap's percentiles, a confidence sequence (anytime-valid), one of
#: a family of simultaneous intervals (the pairwise differences of :mod:`unpooled.core.ranking`), bounds only (the
#: value is not identified), or none (an undefined estimate)
INTERVALS = ("wilson", "profile", "normal", "hull", "f1-region", "bootstrap", "anytime", "simultaneous", "bounds",
             "none")


def _num(x, digits: int | None):
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    return round(x, digits) if digits is not None else x


def _count(n):
    """``n`` as JSON: an int when it is a whole number (labels, documents), else a float (an effective size)."""
    n = _num(n, None)
    return int(n) if n is not None and n.is_integer() else n


@dataclass(frozen=True)
class ConfidenceInterval:
    """Bounds ``lo``, ``hi`` at confidence ``level``, built by ``method`` (:data:`INTERVALS`)."""

    lo: float | np.ndarray
    hi: float | np.ndarray
    level: float
    method: str

    def __post_init__(self):
        if self.method not in INTERVALS:
            raise ValueError(f"method: expected one of {', '.join(INTERVALS)}, got {self.method!r}")

    @property
    def width(self):
        return self.hi - self.lo

    def __getitem__(self, i) -> ConfidenceInterval:
        return ConfidenceInterval(float(self.lo[i]), float(self.hi[i]), self.level, self.method)

    def contains(self, x):
        return (self.lo <= x) & (x <= self.hi)


@dataclass(frozen=True)
class Estimate:
    """An estimate: ``value``, standard error ``se``, ``interval`` (:class:`ConfidenceInterval`), ``n`` (the sample
    size behind it: labels, effective draws or documents, as ``method`` says), ``method`` (the estimator), and
    ``reason`` when it is undefined (NaN figures)."""

    value: float | np.ndarray
    se: float | np.ndarray
    interval: ConfidenceInterval
    n: float | np.ndarray
    method: str
    reason: str = ""

    @classmethod
    def undefined(cls, reason: str, method: str = "", level: float = math.nan) -> Estimate:
        nan = math.nan
        return cls(nan, nan, ConfidenceInterval(nan, nan, level, "none"), 0, method, reason)

    @classmethod
    def of(cls, value, se, lo, hi, *, level: float, interval: str, n, method: str) -> Estimate:
        """The estimate from its parts (arrays or floats)."""
        return cls(value, se, ConfidenceInterval(lo, hi, level, interval), n, method)

    @property
    def lo(self):
        return self.interval.lo

    @property
    def hi(self):
        return self.interval.hi

    @property
    def defined(self) -> bool:
        return bool(np.all(np.isfinite(self.value)))

    def __len__(self) -> int:
        return len(self.value)

    def __getitem__(self, i) -> Estimate:
        """System ``i``'s estimate (of an array estimate)."""
        n = self.n if np.ndim(self.n) == 0 else self.n[i]
        return Estimate(float(self.value[i]), float(self.se[i]), self.interval[i], float(n), self.method, self.reason)

    def to_dict(self, digits: int | None = None) -> dict:
        """A scalar estimate's JSON: value, se, lo, hi, n, level, method, interval (NaN -> None; ``digits``: rounded),
        and ``reason`` when there is one."""
        if np.ndim(self.value):
            raise TypeError("to_dict: an array estimate; take one system's first (est[i])")
        out = {"value": _num(self.value, digits), "se": _num(self.se, digits), "lo": _num(self.lo, digits),
               "hi": _num(self.hi, digits), "n": _count(self.n), "level": _num(self.interval.level, None),
               "method": self.method, "interval": self.interval.method}
        if self.reason:
            out["reason"] = self.reason
        return out


__all__ = ["INTERVALS", "ConfidenceInterval", "Estimate"]
