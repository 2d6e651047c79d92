"""The inbox's decision screen as HTML, from a pending request, without starting anything."""

from __future__ import annotations

from replenisher.console.pages import InboxSettings, countdown, inbox, inbox_fragment, request_card
from replenisher.domain.calendar import BusinessCalendar, CalendarClock, ClockOrigin
from replenisher.domain.documents import Quote
from replenisher.operations.inbox import PastDecision, PendingApproval
from replenisher.timeline.format import clock, until

NOW = 1_800_000_000.0


def pending(**changes: object) -> PendingApproval:
    quotes = [
        Quote(
            quote_id="q-acme",
            supplier="acme",
            sku="SKU-9",
            quantity=100,
            unit_price=4.1,
            lead_days=3,
            valid_until=NOW + 600,
        ),
        Quote(
            quote_id="q-bolt",
            supplier="bolt",
            sku="SKU-9",
            quantity=100,
            unit_price=4.6,
            lead_days=1,
            valid_until=NOW + 600,
        ),
    ]
    base = PendingApproval(
        sku="SKU-9",
        run_id="replenish-SKU-9-2",
        po_number="PO-SKU-9-2-1",
        supplier="acme",
        quantity=100,
        unit_price=4.1,
        quote_id="q-acme",
        quote_valid_until=NOW + 600,
        token="tok",
        requested_at=NOW - 60,
        decide_by=NOW + 5400,
        waiting=True,
        on_hand=12,
        safety_stock=40,
        target_stock=112,
        quotes=quotes,
        past=[
            PastDecision(
                run_id="replenish-SKU-9-1",
                outcome="rejected",
                detail="over budget",
                unit_price=3.9,
                decision="rejected (PO-SKU-9-1-1) · by Dana · note: over budget",
                ended_at=NOW - 86_400,
            )
        ],
    )
    return base.model_copy(update=changes)


def test_a_request_card_has_what_the_decision_needs() -> None:
    html = request_card(pending(), NOW, InboxSettings(currency="EUR", budget=4.0))

    assert "100 x 4.10 EUR = <b>410.00 EUR</b>" in html
    assert "data-flag=over-budget" in html and "over budget (4.00)" in html
    assert f"data-until='{NOW + 5400:.0f}'" in html and "1h 30m left" in html
    assert "on hand <b>12</b> · safety 40 · target 112" in html
    assert "<tr class=chosen><td>acme</td><td class=num>4.10</td><td class=num>3 d</td>" in html
    chosen = next(q for q in pending().quotes if q.supplier == "acme")
    day, hour = clock(chosen.valid_until)[:16].split(" ")
    valid = f"<td class='num when'><span>{day}</span> <span>{hour} UTC</span></td>"
    assert valid in html, "valid until: with its year and zone, wrapping between the date and the time"
    assert "<td>bolt</td><td class=num>4.60</td><td class=num>1 d</td>" in html
    assert "Earlier on SKU-9" in html and "rejected" in html and "at 3.90" in html and "by Dana" in html
    assert "<label for='up-PO-SKU-9-2-1'>approve up to (EUR per unit)</label>" in html
    assert "aria-label='Approve PO-SKU-9-2-1'" in html and "aria-label='Reject PO-SKU-9-2-1'" in html


def test_an_expired_quote_offers_fresh_quotes_not_approval_and_requests_come_nearest_deadline_first() -> None:
    expired = request_card(pending(quote_valid_until=NOW - 1), NOW, InboxSettings())
    assert "data-flag=quote-expired" in expired and "approve up to" not in expired and "Approve " not in expired
    assert "aria-label='Get fresh quotes for PO-SKU-9-2-1'" in expired and "value=reject" in expired
    assert "nothing can be ordered on it" in expired and "ends this replenishment" in expired
    last = request_card(pending(quote_valid_until=NOW - 1, requote_left=False), NOW, InboxSettings())
    assert "Get fresh quotes" not in last and "value=approve" not in last, "the run cannot ask again"
    assert "last approval round" in last and "value=reject" in last
    soon = request_card(pending(quote_valid_until=NOW + 150, decide_by=NOW + 500), NOW, InboxSettings())
    assert "its quote:</span> <span class='countdown urgent' data-quote-until" in soon and "2m 30s left" in soon
    later = pending(quote_valid_until=NOW + 900, decide_by=NOW + 500)
    assert "data-quote-until" not in request_card(later, NOW, InboxSettings())
    within_budget = request_card(pending(), NOW, InboxSettings(budget=5.0))
    assert "over-budget" not in within_budget

    later = pending(po_number="PO-LATER", decide_by=NOW + 9000)
    sooner = pending(po_number="PO-SOONER", decide_by=NOW + 100)
    html = inbox_fragment([later, sooner], NOW)
    assert html.index("PO-SOONER") < html.index("PO-LATER")


def test_countdowns_read_as_time_left() -> None:
    assert countdown(-5) == "deadline passed"
    assert countdown(75) == "1m 15s left"
    assert countdown(3 * 3600 + 120) == "3h 2m left"
    assert countdown(2 * 86_400 + 3600) == "2d 1h left"


def test_a_run_completed_before_its_outcome_is_recorded_keeps_refreshing() -> None:
    from replenisher.console.pages import settled
    from replenisher.domain.outcomes import ReplenishmentResult
    from replenisher.timeline.model import Invocation, Timeline

    done = Invocation(id="inv_1", status="completed", completed_at=NOW - 2)
    t = Timeline(run_id="replenish-SKU-9-1", sku="SKU-9", source="journal", now=NOW, invocation=done)
    assert t.finished and not settled(t), "the outcome is on its way to the SKU's record"
    assert settled(t.model_copy(update={"now": NOW + 120})), "but not refreshed for ever"
    outcome = ReplenishmentResult(
        run_id="replenish-SKU-9-1", sku="SKU-9", outcome="received", started_at=NOW - 50, ended_at=NOW - 2
    )
    assert settled(t.model_copy(update={"outcome": outcome}))


def test_a_request_card_names_suppliers_and_gives_the_stock_now_with_its_days_of_cover() -> None:
    from replenisher.operations.catalogue import Catalogue, ItemStock

    now_in_erp = ItemStock(
        sku="SKU-9", on_hand=10, safety_stock=40, target_stock=112, suppliers=["acme"], daily_consumption=4
    )
    names = {"acme": "Acme Industrial Supply", "bolt": "Bolt & Nut Express"}
    settings = InboxSettings(catalogue=Catalogue(items={"SKU-9": now_in_erp}, supplier_names=names))
    html = request_card(pending(), NOW, settings)
    assert "· Acme Industrial Supply" in html and "<td>Bolt &amp; Nut Express</td>" in html
    assert "<td>acme</td>" not in html, "names, not ids"
    assert "now 10</span> · <b>2.5 days of cover at 4/day</b>" in html
    unknown = request_card(pending(), NOW, InboxSettings())
    assert "<td>acme</td>" in unknown and "days of cover" not in unknown, "without the ERP: the ids, no cover"


def test_on_a_compressed_clock_the_inbox_says_which_time_is_which() -> None:
    # A day of 10 minutes: the 90 minutes left to decide are 9 calendar days.
    fast = CalendarClock(calendar=BusinessCalendar(), day_seconds=600.0, origin=ClockOrigin(wall=NOW, calendar=NOW))
    card = pending(calendar=fast)
    # The deadline: the calendar's date, then when it fires on this machine.
    due = until(card.decide_by, fast, NOW)
    assert due == f"Sun 2027-01-24 08:00 UTC (in 5.7 business days) on the calendar; {clock(NOW + 5400)} real time"
    html = inbox([card], NOW)
    assert f"valid until {clock(NOW + 600)}" in html, "a quote's validity: when it runs out on this machine"
    note = html[html.index("id=fast-time") :]
    assert "a calendar day lasts 10.0min of real time" in note
    # On a real clock, no note, and a date is a date.
    real = CalendarClock(calendar=BusinessCalendar(), origin=ClockOrigin.at(NOW))
    html = inbox([pending(calendar=real)], NOW)
    assert "id=fast-time" not in html and "real time" not in html
