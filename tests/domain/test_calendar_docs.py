"""The site calendar of the docs (docs/operating/settings.md, "Business days"), read by the service's
own parser, and the sums the page does with it."""

from __future__ import annotations

import re
from datetime import date, datetime
from zoneinfo import ZoneInfo

from replenisher.domain.calendar import BusinessCalendar, parse_calendar
from support import doc_section

SECTION = doc_section("operating/settings.md", "## Business days: the site calendar")
BERLIN = ZoneInfo("Europe/Berlin")


def documented() -> BusinessCalendar:
    [example] = re.findall(r"```text\n(.*?)```", SECTION, re.S)
    return parse_calendar(example, "docs/operating/settings.md")


def at(day: date, hour: int, minute: int = 0) -> float:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=BERLIN).timestamp()


def test_the_documented_calendar_is_the_hamburg_plant_it_says() -> None:
    hamburg = documented()
    assert hamburg.timezone == "Europe/Berlin"
    assert hamburg.working_days == ("Mon", "Tue", "Wed", "Thu", "Fri")
    assert (hamburg.opens, hamburg.closes) == ("08:00", "17:00")
    assert hamburg.holidays == tuple(
        date(*d) for d in ((2026, 12, 24), (2026, 12, 25), (2026, 12, 26), (2026, 12, 31), (2027, 1, 1))
    )


def test_the_pages_sums_hold_on_that_calendar() -> None:
    hamburg = documented()
    friday, wednesday, thursday = date(2026, 12, 4), date(2026, 12, 9), date(2026, 12, 10)
    assert "a request on Friday\nat 15:00 with a 3-day window lapses on Wednesday at 15:00" in SECTION
    assert hamburg.add(at(friday, 15), 3) == at(wednesday, 15)
    assert "on Thursday if Monday is a\nholiday" in SECTION
    monday_off = BusinessCalendar.model_validate(
        {**hamburg.model_dump(), "holidays": [*hamburg.holidays, date(2026, 12, 7)]}
    )
    assert monday_off.add(at(friday, 15), 3) == at(thursday, 15)
    assert "half a business day is four and a half working\nhours" in SECTION
    assert hamburg.day_length == 9 * 3600
    assert hamburg.add(at(wednesday, 8), 0.5) == at(wednesday, 12, 30)
