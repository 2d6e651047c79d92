"""World time: real epoch seconds, with one calendar day compressed to `day_seconds`.

The world and the replenisher agree on what calendar day it is by sharing one origin:
wall instant `wall_origin` is calendar instant `calendar_origin`, and from there a
calendar day lasts `day_seconds` of wall-clock time (the mapping of
`replenisher.domain.calendar.CalendarClock`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

DAY = 86_400.0


class Clock:
    def __init__(
        self,
        day_seconds: float,
        *,
        now: Callable[[], float] = time.time,
        started_at: float | None = None,
        wall_origin: float | None = None,
        calendar_origin: float | None = None,
    ) -> None:
        if not day_seconds > 0:
            raise ValueError(f"day_seconds must be positive, got {day_seconds!r}")
        self.day_seconds = day_seconds
        self._now = now
        self.started_at = now() if started_at is None else started_at
        if wall_origin is None:
            # A real day needs no shared origin: calendar time is wall time.
            wall_origin = 0.0 if day_seconds == DAY else self.started_at
        self.wall_origin = wall_origin
        self.calendar_origin = wall_origin if calendar_origin is None else calendar_origin

    def now(self) -> float:
        return self._now()

    def seconds(self, days: float) -> float:
        return days * self.day_seconds

    def days(self, seconds: float) -> float:
        return seconds / self.day_seconds

    def calendar(self, at: float) -> float:
        """The calendar instant (epoch seconds) at wall instant `at`."""
        return self.calendar_origin + (at - self.wall_origin) * DAY / self.day_seconds

    def date(self, at: float) -> str:
        """The calendar date at wall instant `at` (UTC), e.g. `2026-12-04`."""
        return datetime.fromtimestamp(self.calendar(at), UTC).date().isoformat()

    def day_number(self, at: float) -> int:
        """Whole calendar days since the world started: prices move once per day, not per call."""
        return math.floor((at - self.started_at) / self.day_seconds)
