"""Business days on a site calendar, through a compressed clock, and every wait counted on it."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from pydantic import ValidationError

from domain.factories import T0, stock
from replenisher.domain.calendar import (
    DAY,
    BusinessCalendar,
    CalendarClock,
    ClockOrigin,
    parse_calendar,
    utc_instant,
)
from replenisher.domain.documents import ApprovalRequest, OrderAck, PurchaseOrder
from replenisher.domain.state import Approval, State
from replenisher.domain.tools.approval import WaitForApproval
from replenisher.domain.tools.goods import WaitForGoods
from replenisher.domain.tools.ordering import CheckOrderStatus
from replenisher.domain.tools.supplier import WaitForSupplierReply

# Friday 4 December 2026, 15:00 UTC; Christmas week follows three weeks later.
FRIDAY_3PM = utc_instant("2026-12-04T15:00")


def at(text: str) -> float:
    return utc_instant(text)


def weekday(instant: float, calendar: BusinessCalendar) -> str:
    return datetime.fromtimestamp(instant, calendar.zone).strftime("%a %Y-%m-%d %H:%M")


def test_the_default_calendar_is_monday_to_friday_all_day_in_utc() -> None:
    calendar = BusinessCalendar()
    assert calendar.timezone == "UTC" and calendar.holidays == ()
    assert calendar.working_days == ("Mon", "Tue", "Wed", "Thu", "Fri")
    assert calendar.day_length == DAY


def test_a_friday_request_with_three_business_days_lapses_on_wednesday() -> None:
    calendar = BusinessCalendar()
    assert weekday(calendar.add(FRIDAY_3PM, 3), calendar) == "Wed 2026-12-09 15:00"
    # A length of time would have lapsed on Monday.
    assert weekday(FRIDAY_3PM + 3 * DAY, calendar) == "Mon 2026-12-07 15:00"


def test_a_holiday_is_skipped() -> None:
    calendar = BusinessCalendar(holidays=(date(2026, 12, 7),))
    assert weekday(calendar.add(FRIDAY_3PM, 3), calendar) == "Thu 2026-12-10 15:00"


def test_a_request_made_on_a_weekend_counts_from_monday_morning() -> None:
    calendar = BusinessCalendar()
    assert weekday(calendar.add(at("2026-12-05T11:00"), 1), calendar) == "Tue 2026-12-08 00:00"


def test_working_hours_count_only_working_time_and_a_fraction_of_a_day_is_hours() -> None:
    calendar = BusinessCalendar(opens="09:00", closes="17:00")
    assert weekday(calendar.add(FRIDAY_3PM, 1), calendar) == "Mon 2026-12-07 15:00"
    # Half a business day is four working hours: two on Friday, two on Monday morning.
    assert weekday(calendar.add(FRIDAY_3PM, 0.5), calendar) == "Mon 2026-12-07 11:00"
    # Exactly to the close of the day, not to the next opening.
    assert weekday(calendar.add(at("2026-12-04T09:00"), 1), calendar) == "Fri 2026-12-04 17:00"
    # Before opening, the day counts from the opening.
    assert weekday(calendar.add(at("2026-12-04T06:00"), 1), calendar) == "Fri 2026-12-04 17:00"


def test_working_hours_are_in_the_sites_timezone_across_a_daylight_saving_change() -> None:
    calendar = BusinessCalendar(timezone="Europe/Berlin", opens="08:00", closes="17:00")
    # Friday 27 March 2026 15:00 in Berlin (CET); clocks go forward on Sunday 29 March.
    start = datetime(2026, 3, 27, 15, 0, tzinfo=calendar.zone).timestamp()
    end = calendar.add(start, 1)
    assert weekday(end, calendar) == "Mon 2026-03-30 15:00"
    assert datetime.fromtimestamp(end, UTC).hour == 13  # CEST is UTC+2


def test_zero_business_days_is_now_even_outside_working_hours() -> None:
    calendar = BusinessCalendar(opens="09:00", closes="17:00")
    saturday = at("2026-12-05T11:00")
    assert calendar.add(saturday, 0) == saturday


def test_business_days_between_is_the_inverse_of_add() -> None:
    calendar = BusinessCalendar(opens="08:00", closes="16:00", holidays=(date(2026, 12, 8),))
    for days in (0.25, 1, 2.5, 7):
        end = calendar.add(FRIDAY_3PM, days)
        assert calendar.business_days_between(FRIDAY_3PM, end) == pytest.approx(days)
    assert calendar.business_days_between(calendar.add(FRIDAY_3PM, 2), FRIDAY_3PM) == pytest.approx(-2)


def test_a_compressed_clock_maps_wall_time_through_the_same_calendar() -> None:
    # One calendar day lasts 10 wall seconds; wall second 1000 is Friday 15:00.
    clock = CalendarClock(
        calendar=BusinessCalendar(), day_seconds=10.0, origin=ClockOrigin(wall=1000.0, calendar=FRIDAY_3PM)
    )
    assert clock.to_wall(clock.to_calendar(1234.5)) == pytest.approx(1234.5)
    # Fri 15:00 + 3 business days = Wed 15:00: five calendar days, 50 wall seconds.
    assert clock.after(1000.0, 3) == pytest.approx(1050.0)
    assert clock.date_of(1050.0) == "Wed 2026-12-09 15:00"
    assert clock.due(1050.0, now=1000.0) == "Wed 2026-12-09 15:00 UTC (in 3 business days)"
    assert clock.due(1050.0, now=1040.0) == "Wed 2026-12-09 15:00 UTC (in 1 business day)"
    assert clock.due(1050.0, now=1051.0).endswith("(passed)")
    # A reader elsewhere sees whose 15:00 it is.
    berlin = clock.model_copy(update={"calendar": BusinessCalendar(timezone="Europe/Berlin")})
    assert berlin.due(1050.0, now=1000.0).endswith(" CET (in 3 business days)"), berlin.due(1050.0, now=1000.0)


def test_a_real_day_with_equal_origins_is_the_wall_clock_itself() -> None:
    clock = CalendarClock(calendar=BusinessCalendar.every_day(), origin=ClockOrigin.at(123.0))
    assert clock.to_calendar(FRIDAY_3PM) == FRIDAY_3PM
    assert clock.after(FRIDAY_3PM, 2) == FRIDAY_3PM + 2 * DAY


SITE = """
# Hamburg plant
timezone = Europe/Berlin
working_days = Mon Tue Wed Thu Fri
working_hours = 08:00-17:00

# Holidays, one ISO date a line
2026-12-24  # Christmas Eve
2026-12-25
2026-12-31
"""


def test_a_site_calendar_file_reads_settings_and_holidays() -> None:
    calendar = parse_calendar(SITE, "hamburg.calendar")
    assert calendar.timezone == "Europe/Berlin"
    assert (calendar.opens, calendar.closes) == ("08:00", "17:00")
    assert calendar.holidays == (date(2026, 12, 24), date(2026, 12, 25), date(2026, 12, 31))
    assert not calendar.is_working_day(date(2026, 12, 24)) and calendar.is_working_day(date(2026, 12, 23))


def test_an_empty_calendar_file_is_the_default() -> None:
    assert parse_calendar("# nothing\n") == BusinessCalendar()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-13-01", "line 1: '2026-13-01' is neither"),
        ("timezone = Mars/Olympus", "unknown timezone"),
        ("working_days = Mon Funday", "Fun not a weekday"),
        ("working_hours = 17:00-08:00", "must open before they close"),
        ("working_hours = 8-17", "not a time of day"),
        ("shift = night", "unknown setting 'shift'"),
        ("working_days = ", "at least one working day"),
    ],
)
def test_a_bad_calendar_file_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_calendar(text)


def test_a_calendar_with_no_working_day_left_fails_rather_than_loops() -> None:
    with pytest.raises(ValidationError):
        BusinessCalendar(working_days=())


# --- every wait of a run is counted on its calendar ---------------------------------------

CLOCK_ORIGIN = ClockOrigin(wall=T0, calendar=FRIDAY_3PM)
DAY_SECONDS = 10.0


def run_on_calendar(calendar: BusinessCalendar | None = None) -> State:
    return State.start(
        "replenish-SKU-1-1",
        stock(),
        day_seconds=DAY_SECONDS,
        started_at=T0,
        calendar=calendar or BusinessCalendar(),
        origin=CLOCK_ORIGIN,
    )


def on_calendar(state: State, wall: float) -> str:
    return state.clock.date_of(wall)


def with_order(state: State, ordered_at: float) -> State:
    po = PurchaseOrder(po_number="PO-1", sku="SKU-1", supplier="acme", quantity=95, unit_price=4.0, quote_id="q")
    state.adopt(
        po,
        OrderAck(
            order_id="o-1",
            po_number="PO-1",
            supplier="acme",
            sku="SKU-1",
            quantity=95,
            unit_price=4.0,
            accepted_at=ordered_at,
        ),
        "r",
    )
    return state


def test_the_approval_window_skips_the_weekend() -> None:
    state = run_on_calendar()
    request = ApprovalRequest(
        po_number="PO-1", sku="SKU-1", supplier="acme", quantity=95, unit_price=4.0, quote_id="q",
        expires_at=T0 + 100 * DAY_SECONDS, token="t" * 32, run_id=state.run_id,
    )  # fmt: skip
    state.approval = Approval(request=request, requested_at=T0)
    state.waits = state.waits.model_copy(update={"approval": 3.0})
    assert on_calendar(state, WaitForApproval().deadline(state)) == "Wed 2026-12-09 15:00"


def test_the_supplier_reply_window_skips_weekends_and_holidays() -> None:
    state = with_order(run_on_calendar(BusinessCalendar(holidays=(date(2026, 12, 8),))), ordered_at=T0)
    # 7 business days from Friday 15:00, Tuesday 8th a holiday: Mon 7, Wed 9 .. Fri 11, Mon 14 .. Wed 16.
    assert on_calendar(state, WaitForSupplierReply().deadline(state)) == "Wed 2026-12-16 15:00"
    # After a chase, the shorter window counts from the chase.
    state.last_chase_at = state.clock.to_wall(utc_instant("2026-12-11T10:00"))
    assert on_calendar(state, WaitForSupplierReply().deadline(state)) == "Tue 2026-12-15 10:00"


def test_the_goods_deadline_counts_delivery_and_grace_in_business_days() -> None:
    state = with_order(run_on_calendar(), ordered_at=T0)
    state.waits = state.waits.model_copy(update={"goods_grace": 1.0})
    state.reply = None
    state.chases = 99
    state.supplier_overdue = True
    # No reply: the fallback lead of 10 business days from Friday is Fri 18th, grace 1 more: Mon 21st.
    assert on_calendar(state, WaitForGoods().deadline(state)) == "Mon 2026-12-21 15:00"


def test_the_status_recheck_backoff_is_in_business_days() -> None:
    state = run_on_calendar()
    state.failed_status_checks = 1
    delay = CheckOrderStatus().delay_days(state)
    assert on_calendar(state, state.after(T0, delay)) == "Mon 2026-12-07 15:00"


def test_the_goods_deadline_counts_from_the_suppliers_stated_delivery_on_the_calendar() -> None:
    from replenisher.domain.state import ReplyFacts

    state = with_order(run_on_calendar(BusinessCalendar(holidays=(date(2026, 12, 8),))), ordered_at=T0)
    state.waits = state.waits.model_copy(update={"goods_grace": 1.0})
    # Friday: "delivery in 2 days" means Monday, then Wednesday (Tuesday a holiday); the grace
    # of one business day more makes it Thursday.
    state.reply = ReplyFacts(confirmed=True, delivery_days=2, received_at=T0)
    assert on_calendar(state, WaitForGoods().deadline(state)) == "Thu 2026-12-10 15:00"
    # A second overdue wait doubles the grace, still in business days.
    state.goods_overdue_count = 1
    assert on_calendar(state, WaitForGoods().deadline(state)) == "Fri 2026-12-11 15:00"


def test_the_skus_reconciliation_backoff_counts_business_days_on_the_calendar() -> None:
    from domain.test_tools import ordered
    from replenisher.domain.outcomes import result_of
    from replenisher.domain.sku import SkuRecord

    clock = CalendarClock(calendar=BusinessCalendar(), day_seconds=DAY_SECONDS, origin=CLOCK_ORIGIN)
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    state = ordered()
    state.run_id, state.order_status = run.run_id, "unknown"
    record.finish(result_of(state, T0))
    delays = [record.next_reconcile(T0, 1.0, DAY_SECONDS, clock) for _ in range(3)]
    # From Friday 15:00: at once, then one business day (Monday), then two (Tuesday).
    assert [clock.date_of(T0 + d) for d in delays] == [
        "Fri 2026-12-04 15:00",
        "Mon 2026-12-07 15:00",
        "Tue 2026-12-08 15:00",
    ]


def _add_day_by_day(calendar: BusinessCalendar, start: float, days: float) -> float:
    """The plain definition: working time summed one calendar day at a time."""
    needed, cursor = days * calendar.day_length, start
    day = datetime.fromtimestamp(start, calendar.zone).date()
    while True:
        if calendar.is_working_day(day):
            opens, closes = calendar._window(day)
            cursor = max(cursor, opens)
            if cursor < closes:
                if needed <= closes - cursor:
                    return cursor + needed
                needed -= closes - cursor
        day = date.fromordinal(day.toordinal() + 1)


def _between_day_by_day(calendar: BusinessCalendar, start: float, end: float) -> float:
    worked, day = 0.0, datetime.fromtimestamp(start, calendar.zone).date()
    while day <= datetime.fromtimestamp(end, calendar.zone).date():
        if calendar.is_working_day(day):
            opens, closes = calendar._window(day)
            worked += max(0.0, min(closes, end) - max(opens, start))
        day = date.fromordinal(day.toordinal() + 1)
    return worked / calendar.day_length


WEEKDAYS_ALL = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def test_skipping_whole_weeks_gives_what_counting_every_day_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    # Every True answer is a whole week skipped: `add` and `business_days_between` ask only
    # when they would skip one (see their conditions), so the count shows the path really ran.
    plain_week = BusinessCalendar._plain_week
    skips = 0

    def counted(calendar: BusinessCalendar, day: date) -> bool:
        nonlocal skips
        answer = plain_week(calendar, day)
        skips += answer
        return answer

    monkeypatch.setattr(BusinessCalendar, "_plain_week", counted)
    rng = random.Random(16)
    calendars = [
        BusinessCalendar(),
        BusinessCalendar.every_day(),
        BusinessCalendar(timezone="Europe/Berlin", opens="08:00", closes="17:00"),
        BusinessCalendar(timezone="America/New_York", working_days=("Mon", "Wed", "Thu"), opens="00:00"),
        # Clocks change on a Sunday: a site that works Sundays, all day, has days of 23 and 25 hours.
        BusinessCalendar(timezone="Europe/Berlin", working_days=WEEKDAYS_ALL),
        BusinessCalendar(
            timezone="Europe/Berlin",
            holidays=tuple(
                date(2026, 12, 1).fromordinal(date(2026, 12, 1).toordinal() + rng.randrange(900)) for _ in range(40)
            ),
        ),
    ]
    skipped = 0
    for calendar in calendars:
        for _ in range(150):
            start = FRIDAY_3PM + rng.uniform(-400, 400) * DAY
            days = rng.choice([0.3, 1, 2.5, 7, 11.75, 40, 200, 1000]) * rng.uniform(0.5, 1.5)
            end = calendar.add(start, days)
            assert abs(end - _add_day_by_day(calendar, start, days)) < 1e-3, (calendar, start, days)
            later = start + rng.uniform(0, 900) * DAY
            assert (
                abs(calendar.business_days_between(start, later) - _between_day_by_day(calendar, start, later)) < 1e-6
            )
            skipped += days > 14
    assert skipped > 100  # the long waits, the ones a week at a time serves, were among them
    assert skips > 10_000, f"only {skips} weeks were skipped: the comparison did not exercise the skipping"


def test_a_remembered_sum_belongs_to_its_own_calendar() -> None:
    """`add` remembers its sums; calendars that differ in a field never share one, and an equal
    calendar built anew gets the same answer."""
    plain = BusinessCalendar()
    christmas = BusinessCalendar(holidays=(date(2026, 12, 25),))
    office_utc = BusinessCalendar(holidays=(date(2026, 12, 25),), opens="09:00", closes="17:00")
    office_berlin = office_utc.model_copy(update={"timezone": "Europe/Berlin"})
    calendars = (plain, christmas, office_utc, office_berlin)
    evening = FRIDAY_3PM + 5 * 3600  # after both offices have closed
    answers = [cal.add(evening, 20) for cal in calendars]
    assert answers == [cal._add(evening, 20) for cal in calendars]
    assert len(set(answers)) == 4, answers
    assert answers[1] > answers[0], "the holiday moves the end later"
    again = BusinessCalendar(holidays=(date(2026, 12, 25),))
    assert again is not christmas and again.add(evening, 20) == answers[1]
