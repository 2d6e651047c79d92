"""Stock checks spread over the working day (#36): each SKU checks at its own time of day, a hash
of its name, so 100,000 SKUs put under watch together make a steady load instead of a burst."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime

import pytest

from replenisher.domain.calendar import BusinessCalendar, CalendarClock, ClockOrigin
from replenisher.domain.sku import check_fraction

BERLIN = BusinessCalendar(timezone="Europe/Berlin", opens="08:00", closes="17:00", holidays=(date(2026, 12, 8),))
REAL = CalendarClock(calendar=BERLIN, day_seconds=86_400, origin=ClockOrigin.at(0.0))


def at(text: str, clock: CalendarClock = REAL) -> float:
    """A wall instant from the site's local time, `2026-12-04 11:00`."""
    local = datetime.fromisoformat(text).replace(tzinfo=clock.calendar.zone)
    return clock.to_wall(local.timestamp())


def local(wall: float, clock: CalendarClock = REAL) -> str:
    return clock.local(wall).strftime("%a %Y-%m-%d %H:%M")


def test_a_skus_time_of_day_is_a_fixed_hash_of_its_name() -> None:
    assert check_fraction("SKU-1") == check_fraction("SKU-1") == pytest.approx(0.4598, abs=1e-4)
    assert BERLIN.time_of(check_fraction("SKU-1")) == "12:08", "08:00 + 0.46 of 9 working hours"
    assert BERLIN.time_of(0.0) == "08:00" and BusinessCalendar().time_of(0.5) == "12:00"


def test_ten_thousand_skus_fall_evenly_over_the_working_day() -> None:
    hours = Counter(int(check_fraction(f"PART-{i:06d}") * 9) for i in range(10_000))
    assert sorted(hours) == list(range(9)), "every working hour has checks"
    assert all(1_000 <= n <= 1_230 for n in hours.values()), hours  # 1,111 each when even


def test_the_next_check_is_the_skus_slot_nearest_to_the_interval() -> None:
    f = check_fraction("SKU-1")  # 12:08 on the site's clock
    # Put under watch on Friday 09:00: about a business day later is Monday 09:00; its slot that day
    # lies nearer (3 working hours) than Friday's (6 hours before it).
    assert local(REAL.spread_after(at("2026-12-04 09:00"), 1, f)) == "Mon 2026-12-07 12:08"
    # A SKU whose time is 15:27, put under watch that morning, checks again that afternoon (0.7 of a
    # business day on: nearer the interval than Monday's slot, 1.7 on), then every day at 15:27.
    assert BERLIN.time_of(check_fraction("SKU-7")) == "15:27"
    assert local(REAL.spread_after(at("2026-12-04 09:00"), 1, check_fraction("SKU-7"))) == "Fri 2026-12-04 15:27"
    # A check made on its slot comes back exactly a business day later, skipping the holiday (Tue).
    assert local(REAL.spread_after(at("2026-12-07 12:08"), 1, f)) == "Wed 2026-12-09 12:08"
    # Late by a few hours, it stays on its day rather than drifting to the next.
    assert local(REAL.spread_after(at("2026-12-09 15:30"), 1, f)) == "Thu 2026-12-10 12:08"
    # Every 3 business days: the slot on the third.
    assert local(REAL.spread_after(at("2026-12-10 12:08"), 3, f)) == "Tue 2026-12-15 12:08"
    # Under a business day, checks fall several times a day: not moved.
    wall = at("2026-12-09 10:00")
    assert REAL.spread_after(wall, 0.25, f) == REAL.after(wall, 0.25)


def test_on_a_compressed_clock_the_slot_is_the_same_time_of_the_site_day() -> None:
    fast = CalendarClock(calendar=BERLIN, day_seconds=0.25, origin=ClockOrigin.at(1_800_000_000.0, 1_796_000_000.0))
    for sku in ("SKU-1", "SKU-7", "PART-000042"):
        f = check_fraction(sku)
        start = at("2026-12-04 09:00", fast)
        nxt = fast.spread_after(start, 1, f)
        assert local(nxt, fast).endswith(BERLIN.time_of(f)), (sku, local(nxt, fast))
        # The nearest slot: within half a business day of the interval, either way.
        assert 0.5 <= fast.business_days(start, nxt) <= 1.5, (sku, local(nxt, fast))
        again = fast.spread_after(nxt, 1, f)
        assert fast.business_days(nxt, again) == pytest.approx(1, abs=1e-6), "then exactly every business day"
