"""The probe's statistics: small samples, so every rate comes with its interval.

* :func:`wilson`: the Wilson score interval (95%), which stays inside [0, 1]
  and is honest at n = 5 where the normal approximation is not.
* :func:`macro_f1`: the Decide family's three-way score (call / answer / ask),
  the mean of per-class F1, so always answering one way scores badly.
* pass^k (tasks): a task counts only if all k runs passed (tau-bench).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

__all__ = ["Rate", "macro_f1", "rate", "wilson"]

_Z = 1.959963984540054  # 95%


class Rate(BaseModel):
    """``passed`` of ``total``, the rate, and its 95% Wilson interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    passed: int
    total: int
    rate: float
    low: float
    high: float

    def __str__(self) -> str:
        if self.total == 0:
            return "n/a"
        return f"{self.passed}/{self.total} {self.rate:.0%} [{self.low:.0%}-{self.high:.0%}]"


def wilson(passed: int, total: int, z: float = _Z) -> tuple[float, float]:
    if total <= 0:
        return 0.0, 1.0
    p = passed / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(outcomes: Iterable[bool]) -> Rate:
    values = list(outcomes)
    n, k = len(values), sum(1 for v in values if v)
    low, high = wilson(k, n)
    return Rate(passed=k, total=n, rate=k / n if n else 0.0, low=round(low, 4), high=round(high, 4))


def macro_f1(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Mean F1 over the classes that occur in ``gold``."""
    if len(gold) != len(predicted):
        raise ValueError("gold and predicted differ in length")
    classes = sorted(set(gold))
    if not classes:
        return 0.0
    scores = []
    for c in classes:
        tp = sum(1 for g, p in zip(gold, predicted) if g == c and p == c)
        fp = sum(1 for g, p in zip(gold, predicted) if g != c and p == c)
        fn = sum(1 for g, p in zip(gold, predicted) if g == c and p != c)
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return sum(scores) / len(scores)
