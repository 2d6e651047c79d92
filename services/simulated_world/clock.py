"""World time: real epoch seconds, with one calendar day compressed to `day_seconds`.

The world and the replenisher agree on what calendar day it is by sharing one origin:
wall instant `wall_origin` is calendar instant `calendar_origin`, and from there a
calendar day lasts `day_seconds` of wall-clock time (the mapping of
`replenisher.domain.calendar.CalendarClock`). Suppliers count their reply and lead times in
business days on the site's calendar (its working days and holidays), as the replenisher
counts its waits: a reply due in one business day on a Friday comes on Monday.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from replenisher.domain.calendar import BusinessCalendar, CalendarClock, ClockOrigin

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
        calendar: BusinessCalendar | None = None,
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
        self.site = CalendarClock(
            calendar=calendar or BusinessCalendar(),
            day_seconds=day_seconds,
            origin=ClockOrigin(wall=self.wall_origin, calendar=self.calendar_origin),
        )

    def now(self) -> float:
        return self._now()

    def seconds(self, days: float) -> float:
        return days * self.day_seconds

    def days(self, seconds: float) -> float:
        return seconds / self.day_seconds

    def after(self, at: float, business_days: float) -> float:
        """The wall instant `business_days` business days after wall instant `at`, on the site's calendar."""
        return self.site.after(at, business_days)

    def business_days(self, start: float, end: float) -> float:
        """Business days of working time from wall instant `start` to `end`."""
        return self.site.business_days(start, end)

    def calendar(self, at: float) -> float:
        """The calendar instant (epoch seconds) at wall instant `at`."""
        return self.site.to_calendar(at)

    def date(self, at: float) -> str:
        """The calendar date at wall instant `at` (UTC), e.g. `2026-12-04`."""
        return datetime.fromtimestamp(self.calendar(at), UTC).date().isoformat()

    def day_number(self, at: float) -> int:
        """Whole calendar days since the world started: prices move once per day, not per call."""
        return math.floor((at - self.started_at) / self.day_seconds)
