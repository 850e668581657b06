"""Result types shared by the estimators, the CLI and the service."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConfidenceInterval:
    low: float
    high: float
    level: float = 0.90
    method: str = "wilson"

    def to_dict(self) -> dict:
        return {"low": self.low, "high": self.high, "level": self.level, "method": self.method}

    @property
    def width(self) -> float:
        return self.high - self.low

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its standard error and interval.

    ``n`` is the number of labels that informed it; ``ess`` the effective sample size
    of the importance weights (Kish); ``method`` the estimator's registry name.
    """

    value: float
    se: float
    ci: ConfidenceInterval
    n: int = 0
    ess: float = math.nan
    method: str = ""
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"value": self.value, "se": self.se, "ci": self.ci.to_dict(), "n": self.n, "ess": self.ess,
                "method": self.method, "warnings": list(self.warnings)}
