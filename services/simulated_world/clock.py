"""World time: real epoch seconds, with one business day compressed to `day_seconds`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class Clock:
    def __init__(
        self,
        day_seconds: float,
        *,
        now: Callable[[], float] = time.time,
        started_at: float | None = None,
    ) -> None:
        if not day_seconds > 0:
            raise ValueError(f"day_seconds must be positive, got {day_seconds!r}")
        self.day_seconds = day_seconds
        self._now = now
        self.started_at = now() if started_at is None else started_at

    def now(self) -> float:
        return self._now()

    def seconds(self, days: float) -> float:
        return days * self.day_seconds

    def days(self, seconds: float) -> float:
        return seconds / self.day_seconds

    def day_number(self, at: float) -> int:
        """Whole business days since the world started: prices move once per day, not per call."""
        return math.floor((at - self.started_at) / self.day_seconds)
