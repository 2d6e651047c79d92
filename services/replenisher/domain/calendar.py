"""Business days on a site's calendar, and the compressed clock that maps onto it.

A business day is not a length of time: it is one working day's worth of working hours on
the site's calendar (its working weekdays, working hours, holidays and timezone). Adding
3 business days to a Friday 15:00 request gives Wednesday 15:00; a holiday in between
moves it to Thursday.

The demo and the tests compress time: one calendar day lasts `day_seconds` of wall-clock
time. A `CalendarClock` fixes the mapping with an origin: wall instant `wall` maps to
calendar instant `calendar`, and from there calendar = calendar + (w - wall) * 86400 /
day_seconds. With a real day (86400 s) and equal origins, calendar time is wall time.
Every run fixes its clock when it starts, so a settings change or a replay never moves a
deadline it is already waiting for.

Everything here is pure: times in, times out, no clock read.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

DAY = 86_400.0
Weekday = Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
WEEKDAYS: tuple[Weekday, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# No wait is longer than a few years of working days; a calendar with (almost) no working
# day left must fail loudly rather than loop.
_MAX_DAYS_SCANNED = 366 * 30
_HOURS = re.compile(r"^(\d{2}):(\d{2})$")


@lru_cache(maxsize=256)
def _minutes(text: str) -> int:
    match = _HOURS.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a time of day (HH:MM)")
    hours, minutes = int(match.group(1)), int(match.group(2))
    if minutes > 59 or hours > 24 or (hours == 24 and minutes):
        raise ValueError(f"{text!r} is not a time of day between 00:00 and 24:00")
    return hours * 60 + minutes


class BusinessCalendar(BaseModel):
    """When a site works. Defaults: Monday to Friday, all day, no holidays, UTC."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timezone: str = "UTC"
    working_days: tuple[Weekday, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri")
    opens: str = Field(default="00:00", description="start of working hours, local time (HH:MM)")
    closes: str = Field(default="24:00", description="end of working hours, local time (HH:MM, up to 24:00)")
    holidays: tuple[date, ...] = ()

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown timezone {value!r} (an IANA name such as Europe/Berlin)") from e
        return value

    @field_validator("working_days")
    @classmethod
    def _some_days(cls, value: tuple[Weekday, ...]) -> tuple[Weekday, ...]:
        if not value:
            raise ValueError("a calendar needs at least one working day")
        return tuple(d for d in WEEKDAYS if d in value)

    @field_validator("holidays")
    @classmethod
    def _sorted(cls, value: tuple[date, ...]) -> tuple[date, ...]:
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _hours(self) -> BusinessCalendar:
        if _minutes(self.opens) >= _minutes(self.closes):
            raise ValueError(f"working hours {self.opens}-{self.closes} must open before they close")
        return self

    @classmethod
    def every_day(cls) -> BusinessCalendar:
        """Every day works, all day: a business day is then exactly a day (how runs counted before calendars)."""
        return cls(working_days=WEEKDAYS)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def day_length(self) -> float:
        """Seconds of working time in one business day."""
        return (_minutes(self.closes) - _minutes(self.opens)) * 60.0

    def is_working_day(self, day: date) -> bool:
        return WEEKDAYS[day.weekday()] in self.working_days and day not in self.holidays

    def _window(self, day: date) -> tuple[float, float]:
        """The working hours of `day` as epoch seconds (DST-aware: each end is placed in local time)."""

        def at(minutes: int) -> float:
            extra, minutes = divmod(minutes, 24 * 60)
            local = datetime.combine(day + timedelta(days=extra), time(minutes // 60, minutes % 60), self.zone)
            return local.timestamp()

        return at(_minutes(self.opens)), at(_minutes(self.closes))

    def _plain_week(self, day: date) -> bool:
        """Whether the seven days from `day` hold no holiday and no change of UTC offset: their
        working time is then exactly `len(working_days)` business days, and can be skipped at once."""
        end = day + timedelta(days=7)
        i = bisect_left(self.holidays, day)
        if i < len(self.holidays) and self.holidays[i] < end:
            return False
        if self.timezone == "UTC":
            return True
        zone = self.zone
        return datetime.combine(day, time(0), zone).utcoffset() == datetime.combine(end, time(0), zone).utcoffset()

    def add(self, start: float, days: float) -> float:
        """The instant `days` business days of working time after `start` (epoch seconds).

        Day by day, but whole plain weeks at a time once past the first day: a wait of years
        costs a few hundred steps, not one per calendar day. Remembered per calendar, start and
        length: a run works out the same deadline again at every message it receives, and at
        every replay of its journal, which was a sixth of the service's CPU in a replay."""
        return _added(self, start, days)

    def _add(self, start: float, days: float) -> float:
        if days <= 0:
            return start
        needed = days * self.day_length
        week = len(self.working_days) * self.day_length
        cursor = start
        day = datetime.fromtimestamp(start, self.zone).date()
        scanned = 0
        while scanned < _MAX_DAYS_SCANNED:
            # Past the first day the cursor is before the day's start, so a plain week ahead
            # holds exactly `week` of working time; strictly more needed: the end lies beyond it.
            if scanned and needed > week and self._plain_week(day):
                needed -= week
                day += timedelta(days=7)
                scanned += 7
                continue
            if self.is_working_day(day):
                opens, closes = self._window(day)
                cursor = max(cursor, opens)
                if cursor < closes:
                    available = closes - cursor
                    if needed <= available:
                        return cursor + needed
                    needed -= available
            day += timedelta(days=1)
            scanned += 1
        raise ValueError(f"no {days:g} business days within {_MAX_DAYS_SCANNED} days on this calendar")

    def _working_day(self, day: date, step: int) -> date:
        """`day` if it is a working day, else the nearest one in the direction of `step` (+1 or -1)."""
        for _ in range(_MAX_DAYS_SCANNED):
            if self.is_working_day(day):
                return day
            day += timedelta(days=step)
        raise ValueError(f"no working day within {_MAX_DAYS_SCANNED} days on this calendar")

    def slot(self, day: date, fraction: float) -> float:
        """The instant `fraction` (0 to 1) of the way through `day`'s working hours."""
        opens, closes = self._window(day)
        return opens + fraction * (closes - opens)

    def time_of(self, fraction: float) -> str:
        """`fraction` of a working day's hours as the site's time of day: `13:42`."""
        minutes = _minutes(self.opens) + int(fraction * (_minutes(self.closes) - _minutes(self.opens)))
        return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"

    def slot_near(self, target: float, fraction: float) -> float:
        """The instant `fraction` of the way through a working day's hours, on the working day that
        puts it nearest to `target` in working time: the day's own, or the one before or after."""
        day = datetime.fromtimestamp(target, self.zone).date()
        on_or_before = self._working_day(day, -1)
        candidates = (
            self._working_day(on_or_before - timedelta(days=1), -1),
            on_or_before,
            self._working_day(day + timedelta(days=1), 1),
        )
        slots = [self.slot(d, fraction) for d in candidates]
        return min(slots, key=lambda at: (abs(self.business_days_between(target, at)), at))

    def business_days_between(self, start: float, end: float) -> float:
        """Working time from `start` to `end`, in business days (negative if `end` is earlier)."""
        if end < start:
            return -self.business_days_between(end, start)
        worked = 0.0
        week = len(self.working_days) * self.day_length
        day = datetime.fromtimestamp(start, self.zone).date()
        last = datetime.fromtimestamp(end, self.zone).date()
        first = True
        while day <= last:
            # A plain week wholly after the start's day and before the end's: all of it counts.
            if not first and day + timedelta(days=7) <= last and self._plain_week(day):
                worked += week
                day += timedelta(days=7)
                continue
            first = False
            if self.is_working_day(day):
                opens, closes = self._window(day)
                worked += max(0.0, min(closes, end) - max(opens, start))
            day += timedelta(days=1)
        return worked / self.day_length


@lru_cache(maxsize=4096)
def _added(calendar: BusinessCalendar, start: float, days: float) -> float:
    """`calendar.add`, remembered: the calendar is frozen and the sum pure."""
    return calendar._add(start, days)


class ClockOrigin(BaseModel):
    """Wall instant `wall` is calendar instant `calendar` (both epoch seconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall: float
    calendar: float

    @classmethod
    def at(cls, wall: float, calendar: float | None = None) -> ClockOrigin:
        return cls(wall=wall, calendar=wall if calendar is None else calendar)


class CalendarClock(BaseModel):
    """A site calendar seen through a (possibly compressed) wall clock. Fixed per run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calendar: BusinessCalendar = Field(default_factory=BusinessCalendar)
    day_seconds: float = Field(default=DAY, gt=0)
    origin: ClockOrigin = Field(default_factory=lambda: ClockOrigin(wall=0.0, calendar=0.0))

    def to_calendar(self, wall: float) -> float:
        return self.origin.calendar + (wall - self.origin.wall) * DAY / self.day_seconds

    def to_wall(self, calendar: float) -> float:
        return self.origin.wall + (calendar - self.origin.calendar) * self.day_seconds / DAY

    def after(self, wall: float, days: float) -> float:
        """The wall instant `days` business days after wall instant `wall`."""
        if days <= 0:
            return wall
        return self.to_wall(self.calendar.add(self.to_calendar(wall), days))

    def spread_after(self, wall: float, days: float, fraction: float) -> float:
        """The wall instant about `days` business days after `wall`, moved to `fraction` of the way
        through that working day's hours: the nearest such instant, so a check made on time comes
        back exactly `days` later and one made late by less than half a day stays on its day.
        Intervals under a business day are not moved (they fall several times a day)."""
        if days < 1:
            return self.after(wall, days)
        target = self.calendar.add(self.to_calendar(wall), days)
        return self.to_wall(self.calendar.slot_near(target, fraction))

    def business_days(self, wall_start: float, wall_end: float) -> float:
        return self.calendar.business_days_between(self.to_calendar(wall_start), self.to_calendar(wall_end))

    def local(self, wall: float) -> datetime:
        """The site's local date and time at wall instant `wall`."""
        return datetime.fromtimestamp(self.to_calendar(wall), self.calendar.zone)

    def date_of(self, wall: float) -> str:
        """`Wed 2026-12-09 15:00` in the site's timezone."""
        return self.local(wall).strftime("%a %Y-%m-%d %H:%M")

    def due(self, deadline: float, now: float) -> str:
        """A deadline for people: its date and time in the site's zone (named, since the reader
        may sit elsewhere), and how far off it is in business days."""
        when = self.local(deadline).strftime("%a %Y-%m-%d %H:%M %Z")
        if deadline <= now:
            return f"{when} (passed)"
        left = round(self.business_days(now, deadline), 1)
        return f"{when} (in {left:g} business day{'' if left == 1 else 's'})"


# --- the site calendar file -------------------------------------------------------------

_KEYS = {"timezone", "working_days", "working_hours"}


def parse_calendar(text: str, source: str = "calendar") -> BusinessCalendar:
    """Read a site calendar: `key = value` settings and holidays, one ISO date per line.

    `#` starts a comment. Keys: timezone, working_days (e.g. `Mon Tue Wed Thu Fri`),
    working_hours (e.g. `08:00-17:00`). Any key left out keeps its default.
    """
    values: dict[str, object] = {}
    holidays: list[date] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}, line {number}"
        if "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            if key not in _KEYS:
                raise ValueError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(_KEYS))})")
            if key == "timezone":
                values["timezone"] = value
            elif key == "working_days":
                days = [d.strip().capitalize()[:3] for d in re.split(r"[\s,]+", value) if d.strip()]
                unknown = [d for d in days if d not in WEEKDAYS]
                if unknown:
                    raise ValueError(f"{where}: {', '.join(unknown)} not a weekday (Mon ... Sun)")
                values["working_days"] = tuple(days)
            else:
                opens, sep, closes = value.partition("-")
                if not sep:
                    raise ValueError(f"{where}: working_hours must look like 08:00-17:00")
                values["opens"], values["closes"] = opens.strip(), closes.strip()
            continue
        try:
            holidays.append(date.fromisoformat(line))
        except ValueError:
            raise ValueError(f"{where}: {line!r} is neither `key = value` nor an ISO date (YYYY-MM-DD)") from None
    try:
        return BusinessCalendar.model_validate({**values, "holidays": holidays})
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from e


def load_calendar(path: Path) -> BusinessCalendar:
    return parse_calendar(path.read_text(encoding="utf-8"), str(path))


def utc_instant(text: str) -> float:
    """An ISO date-time (`2026-12-04T09:00`, `...+01:00`) as epoch seconds; without an offset, UTC."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _seconds_or_iso(value: object) -> object:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return utc_instant(value)
    return value


Instant = Annotated[float, BeforeValidator(_seconds_or_iso)]
"""A setting naming an instant: epoch seconds, or an ISO date-time (UTC without an offset)."""
