"""Percentiles as every bench reports them, with the standard library alone."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (no interpolation: with few samples p99 is the largest one)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]
