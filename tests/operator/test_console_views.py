"""The SKUs page's sort, search and filters, and the spend figures, from records as the agents
keep them, without starting anything."""

from __future__ import annotations

import re
from datetime import date

import pytest

from domain.factories import ack, new_state, quote
from replenisher.console.pages import InboxSettings, nice_ceiling, short_amount, sku_detail, skus, spend_page
from replenisher.domain.calendar import CalendarClock
from replenisher.domain.documents import PurchaseOrder
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security_log import SECURITY_LOG_BOUND
from replenisher.domain.sku import SkuRecord
from replenisher.operations.catalogue import Catalogue, ItemStock
from replenisher.operations.overview import SkuQuery, SkuRow, page_of, select_rows
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.spend import OrderMoney, SpendQuery, from_outcome, from_state, parsed_spend, summarise
from replenisher.timeline.model import Waiting

NOW = 1_800_000_000.0  # a Friday, 2027-01-15 08:00 UTC
DAY = 86_400.0


def item(sku: str, on_hand: int, safety: int, per_day: float) -> ItemStock:
    return ItemStock(
        sku=sku,
        on_hand=on_hand,
        safety_stock=safety,
        target_stock=safety * 4,
        suppliers=["acme"],
        daily_consumption=per_day,
    )


def rows() -> list[SkuRow]:
    approval = Waiting(tool="wait_for_approval", event="approval", seq=0, deadline=NOW + DAY)
    goods = Waiting(tool="wait_for_goods", event="goods", seq=0, deadline=NOW + 3 * DAY)
    gave_up = ReplenishmentResult(
        run_id="replenish-SKU-3-1",
        sku="SKU-3",
        outcome="gave_up",
        detail="no quote",
        started_at=NOW - DAY,
        ended_at=NOW,
    )
    return [
        SkuRow(
            sku="SKU-1",
            stock=item("SKU-1", 10, 50, 5),
            runs=1,
            active_run="replenish-SKU-1-1",
            waiting=approval,
            waiting_since=NOW - 600,
            asked_price=150.0,
            supplier="acme",
        ),
        SkuRow(
            sku="SKU-2",
            stock=item("SKU-2", 300, 100, 10),
            runs=2,
            active_run="replenish-SKU-2-2",
            waiting=goods,
            waiting_since=NOW - 6000,
            asked_price=5.0,
            supplier="bolt",
        ),
        SkuRow(sku="SKU-3", stock=item("SKU-3", 40, 30, 0), runs=1, last_outcome=gave_up),
        SkuRow(sku="SKU-4", stock=item("SKU-4", 1, 20, 4), has_agent=False),
    ]


def chosen(**params: str) -> list[str]:
    return [r.sku for r in select_rows(rows(), SkuQuery.parse(params), budget=120.0, now=NOW)]


def test_the_skus_page_searches_sorts_and_filters() -> None:
    assert chosen() == ["SKU-1", "SKU-2", "SKU-3", "SKU-4"]
    assert chosen(q="ku-2") == ["SKU-2"]
    assert chosen(waiting="manager") == ["SKU-1"]
    assert chosen(waiting="supplier") == ["SKU-2"]
    assert chosen(waiting="nobody") == ["SKU-3", "SKU-4"]
    assert chosen(flag="over-budget") == ["SKU-1"]
    assert chosen(flag="failing") == ["SKU-3"]
    assert set(chosen(flag="below-safety")) == {"SKU-1", "SKU-4"}
    assert chosen(sort="cover") == ["SKU-4", "SKU-1", "SKU-2", "SKU-3"], "no consumption: no cover figure, last"
    assert chosen(sort="stock") == ["SKU-4", "SKU-1", "SKU-3", "SKU-2"], "emptiest against safety stock first"
    assert chosen(sort="waiting")[:2] == ["SKU-2", "SKU-1"], "the longest wait first"
    assert chosen(sort="sku", order="desc") == ["SKU-4", "SKU-3", "SKU-2", "SKU-1"]


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"sort": "price"}, "sort='price'"),
        ({"flag": "bogus"}, "flag='bogus'"),
        ({"colour": "red"}, "unknown parameter 'colour'"),
        ({"q": "<script>"}, "q='<script>'"),
        ({"q": "x" * 65}, "q="),
        ({"page": "0"}, "page='0'"),
        ({"page": "two"}, "page='two'"),
        ({"per_page": "5"}, "per_page='5'"),
        ({"per_page": "100000"}, "per_page='100000'"),
    ],
)
def test_a_bad_skus_query_is_refused_with_its_reason(params: dict[str, str], reason: str) -> None:
    with pytest.raises(OperatorError, match="bad query") as e:
        SkuQuery.parse(params)
    assert reason in str(e.value)


def test_a_bad_spend_query_is_refused_with_its_reason() -> None:
    for params, reason in (
        ({"by": "month"}, "by='month'"),
        ({"periods": "0"}, "periods='0'"),
        ({"periods": "lots"}, "periods='lots'"),
        ({"supplier": "a/b"}, "supplier='a/b'"),
    ):
        with pytest.raises(OperatorError, match="bad query") as e:
            parsed_spend(params)
        assert reason in str(e.value), e.value


def many(n: int) -> list[SkuRow]:
    """n SKUs, every third waiting on the manager and every fifth without an agent."""
    approval = Waiting(tool="wait_for_approval", event="approval", seq=0, deadline=NOW + DAY)
    return [SkuRow(sku=f"P-{i:05d}", waiting=approval if i % 3 == 0 else None, has_agent=i % 5 != 0) for i in range(n)]


def test_a_page_holds_per_page_rows_in_the_querys_order_and_the_chips_count_every_sku() -> None:
    listed = many(250)
    first = page_of(listed, SkuQuery.parse({"sort": "sku", "order": "desc"}), None, NOW)
    assert (first.total, first.matching, first.page, first.pages) == (250, 250, 1, 3)
    assert [r.sku for r in first.rows][:2] == ["P-00249", "P-00248"] and len(first.rows) == 100
    assert (first.first, first.last) == (1, 100)
    last = page_of(listed, SkuQuery.parse({"sort": "sku", "order": "desc", "page": "3"}), None, NOW)
    assert [r.sku for r in last.rows] == [f"P-{i:05d}" for i in range(49, -1, -1)]
    assert (last.first, last.last, last.pages) == (201, 250, 3)
    # Filtered, the pages count the rows that match; the chips still count every SKU.
    manager = page_of(listed, SkuQuery.parse({"waiting": "manager", "per_page": "50", "page": "2"}), None, NOW)
    assert (manager.matching, manager.pages, manager.first, manager.last) == (84, 2, 51, 84)
    assert all(r.waiting is not None for r in manager.rows)
    assert manager.counts == {
        "all": 250,
        "manager": 84,
        "supplier": 0,
        "below-safety": 0,
        "over-budget": 0,
        "failing": 0,
    }
    assert page_of(rows(), SkuQuery(), 120.0, NOW).counts == {
        "all": 4,
        "manager": 1,
        "supplier": 1,
        "below-safety": 2,
        "over-budget": 1,
        "failing": 1,
    }
    empty = page_of(listed, SkuQuery.parse({"q": "nothing-like-it"}), None, NOW)
    assert (empty.matching, empty.pages, empty.first, empty.last, empty.rows) == (0, 1, 0, 0, [])


def test_a_page_past_the_last_is_refused_saying_how_many_there_are() -> None:
    with pytest.raises(OperatorError) as e:
        page_of(many(250), SkuQuery.parse({"page": "4"}), None, NOW)
    assert str(e.value) == "bad query: page=4: the 250 SKUs that match make 3 pages of 100"


def test_the_skus_page_links_the_pages_beside_it_and_keeps_the_query() -> None:
    query = SkuQuery.parse({"waiting": "nobody", "sort": "sku", "order": "desc", "page": "2", "per_page": "50"})
    html = skus(page_of(many(250), query, None, NOW), query, NOW, None, Catalogue())
    assert "rows 51-100 of 166 · page 2 of 4" in html
    assert "href='/skus?order=desc&amp;waiting=nobody&amp;per_page=50'>← previous" in html, "page 1: no page="
    assert "href='/skus?order=desc&amp;waiting=nobody&amp;page=3&amp;per_page=50'" in html, "next"
    assert "<input type=hidden name=per_page value=50>" in html, "the filter form keeps the page size"
    # Sorting again starts at the first page.
    assert "href='/skus?sort=stock&amp;waiting=nobody&amp;per_page=50'" in html
    assert "waiting on the manager <span class=count>84</span>" in html


def test_the_skus_page_shows_stock_cover_whom_a_run_waits_on_and_flags() -> None:
    catalogue = Catalogue(supplier_names={"bolt": "Bolt & Nut Express"})
    html = skus(page_of(rows(), SkuQuery(), 120.0, NOW), SkuQuery(), NOW, 120.0, catalogue)
    assert "2.0 d" in html and "30.0 d" in html, "days of cover"
    assert "waits on manager" in html and "waits on supplier" in html and "Bolt &amp; Nut Express" in html
    assert "asks 150.00 a unit, over the 120.00 budget" in html, "a unit price above the budget, not an overage"
    assert "data-flag=failing" in html and "last run gave up: no quote" in html
    assert "no agent yet" in html and "aria-sort=ascending" in html


def money(
    run: str,
    supplier: str,
    ordered: float,
    at: float,
    received: float = 0.0,
    got_at: float | None = None,
    committed: float = 0.0,
) -> OrderMoney:
    return OrderMoney(
        run_id=run,
        sku="SKU-1",
        supplier=supplier,
        po_number=f"PO-{run}",
        ordered=ordered,
        ordered_at=at,
        received=received,
        received_at=got_at,
        committed=committed,
    )


def test_spend_counts_each_order_in_the_period_it_was_placed_and_goods_when_booked() -> None:
    lines = [
        money("a", "acme", 400.0, NOW - 2 * DAY, received=400.0, got_at=NOW - DAY),
        money("b", "bolt", 1000.0, NOW - DAY, received=250.0, got_at=NOW, committed=750.0),
        money("c", "acme", 99.0, NOW - 40 * DAY),  # before the window
    ]
    s = summarise(lines, SpendQuery(by="day", periods=3), NOW, calendar=None)
    assert [p.start for p in s.periods] == [date(2027, 1, 13), date(2027, 1, 14), date(2027, 1, 15)]
    assert [(p.ordered, p.committed, p.received) for p in s.periods] == [
        (400.0, 0.0, 0.0),
        (1000.0, 750.0, 400.0),
        (0.0, 0.0, 250.0),
    ]
    assert s.committed_now == 750.0 and s.orders == 2
    assert [(x.supplier, x.ordered, x.received) for x in s.suppliers] == [
        ("bolt", 1000.0, 250.0),
        ("acme", 400.0, 400.0),
    ]
    weekly = summarise(lines, SpendQuery(by="week", periods=2), NOW, calendar=None)
    assert weekly.periods[-1].start == date(2027, 1, 11) and weekly.periods[-1].ordered == 1400.0
    only_bolt = summarise(lines, SpendQuery(supplier="bolt"), NOW, calendar=None)
    assert [x.supplier for x in only_bolt.suppliers] == ["bolt"] and only_bolt.committed_now == 750.0


def test_spend_days_are_the_site_calendars_on_a_compressed_clock() -> None:
    fast = CalendarClock(day_seconds=10.0).model_copy(update={"origin": CalendarClock().origin.at(NOW, NOW)})
    lines = [money("a", "acme", 10.0, NOW - 15.0)]  # 1.5 calendar days before now, on a 10 s day
    s = summarise(lines, SpendQuery(periods=3), NOW, calendar=fast)
    assert [p.ordered for p in s.periods] == [10.0, 0.0, 0.0]


def test_an_order_followed_up_by_a_later_run_is_counted_once() -> None:
    po = PurchaseOrder(po_number="PO-1", sku="SKU-1", supplier="acme", quantity=100, unit_price=2.0, quote_id="q")
    first = ReplenishmentResult(
        run_id="replenish-SKU-1-1",
        sku="SKU-1",
        outcome="unknown",
        po=po,
        supplier="acme",
        quantity_ordered=100,
        quantity_received=30,
        unit_price=2.0,
        ordered_at=NOW - DAY,
        started_at=NOW - 2 * DAY,
        ended_at=NOW - DAY / 2,
    )
    second = first.model_copy(
        update={
            "run_id": "replenish-SKU-1-2",
            "outcome": "received",
            "adopted_from": first.run_id,
            "quantity_received": 100,
            "received_before": 30,
            "ended_at": NOW,
        }
    )
    alone = from_outcome(first, adopted=set())
    assert alone is not None and alone.committed == 140.0, "an order that may be open is committed"
    a, b = from_outcome(first, {first.run_id}), from_outcome(second, {first.run_id})
    assert a is not None and b is not None
    assert (a.ordered, a.received, a.committed) == (200.0, 60.0, 0.0)
    assert (b.ordered, b.received, b.committed) == (0.0, 140.0, 0.0)


def test_a_run_in_progress_commits_what_is_still_to_come() -> None:
    state = new_state()
    state.quotes = [quote(price=3.0, qty=80)]
    state.po = PurchaseOrder(
        po_number="PO-SKU-1-1-1", sku="SKU-1", supplier="acme", quantity=80, unit_price=3.0, quote_id="q"
    )
    state.order = ack(state)
    state.ordered_at = state.started_at + 5
    state.received_quantity = 20
    state.last_receipt_at = state.started_at + 50
    m = from_state(state)
    assert m is not None and (m.ordered, m.received, m.committed) == (240.0, 60.0, 180.0)
    state.cancelled = True
    cancelled = from_state(state)
    assert cancelled is not None and cancelled.committed == 0.0, "a cancelled order commits nothing more"


def test_the_spend_page_draws_a_chart_and_names_suppliers() -> None:
    lines = [money("b", "bolt", 1000.0, NOW - DAY, received=250.0, got_at=NOW, committed=750.0)]
    s = summarise(lines, SpendQuery(periods=7), NOW, calendar=None)
    settings = InboxSettings(currency="EUR", catalogue=Catalogue(supplier_names={"bolt": "Bolt & Nut Express"}))
    html = spend_page(s, settings)
    assert "<svg class=chart" in html and "role=img" in html and html.count("<rect class=ordered") == 7
    assert "Committed now" in html and "750.00 EUR" in html and "Bolt &amp; Nut Express" in html
    assert "<script" not in html.split("<main>")[1], "the spend page needs no script"


def test_the_spend_chart_has_an_axis_of_round_amounts_and_names_the_years() -> None:
    assert [nice_ceiling(v) for v in (1.0, 1.2, 2.0, 2.1, 3.0, 5767.4, 0.07)] == [1, 2, 2, 2.5, 5, 10_000, 0.1]
    assert [short_amount(v) for v in (0, 750, 2500, 10_000, 1_200_000)] == ["0", "750", "2.5k", "10k", "1.2M"]
    # Four weeks back from NOW (Friday 15 Jan 2027) reach into December 2026.
    lines = [money("b", "bolt", 5767.4, NOW - DAY, received=2762.5, got_at=NOW, committed=3004.9)]
    s = summarise(lines, SpendQuery(by="week", periods=6), NOW, calendar=None)
    html = spend_page(s, InboxSettings(currency="EUR"))
    chart = html[html.index("<svg class=chart") : html.index("</svg>")]
    labels = re.findall(r">([^<>]+)</text>", chart)
    assert labels[:2] == ["5k", "10k"], "the axis: half and the top (the baseline is zero)"
    dates = ["07 Dec", "2026", "14 Dec", "21 Dec", "28 Dec", "04 Jan", "2027", "11 Jan"]
    assert labels[2:] == dates, "each year named once, under its first date"
    assert "the axis runs to 10,000.00 EUR" in chart and "amounts in EUR" in html
    assert "week of 11 Jan 2027" in html, "the table's periods name their year too"


def test_a_skus_page_shows_its_stock_and_security_events_or_why_the_stock_is_missing() -> None:
    record = SkuRecord(sku="SKU-1", runs_started=1)
    for i in range(12):
        record.security.record("manager", f"forged approval {i} <b>", NOW + i, run_id="replenish-SKU-1-1")
    for i in range(SECURITY_LOG_BOUND + 30):  # a flood: 30 of its own entries dropped, one collapsed 5 times
        record.security.record("supplier:rival", f"junk {i}", NOW + 20 + i, run_id="replenish-SKU-1-1")
    for i in range(4):
        record.security.record("supplier:rival", "same junk", NOW + 200 + i, run_id="replenish-SKU-1-1")
    record.security.record("supplier:rival", "same junk", NOW + 300, run_id="replenish-SKU-1-1")
    catalogue = Catalogue(
        items={"SKU-1": ItemStock(sku="SKU-1", on_hand=7, safety_stock=20, target_stock=100, suppliers=["acme"])}
    )
    html = sku_detail(record, None, None, catalogue=catalogue)
    stock = html[html.index("id=stock") :]
    assert "7</span> <span class=muted>/ 20 safety / 100 target" in stock and "no consumption recorded" in stock
    security = html[html.index("id=security") :]
    total = 12 + SECURITY_LOG_BOUND + 30 + 5
    assert f"{total} in all; the latest 10 of {SECURITY_LOG_BOUND} kept, newest first" in security
    assert "4 repeats collapsed into kept entries" in security
    assert "dropped to keep 50 entries (supplier:rival 43)" in security, "the flood dropped only its own"
    assert "same junk <span class=muted>(5 times, first " in security
    assert security.index("same junk") < security.index("junk 79"), "newest first"
    assert "junk 69" not in security, "only the latest 10 on show"
    assert "forged approval 11" not in security, "the manager's events are kept, though not among the latest 10"
    assert {e.what for e in record.security.recent} >= {f"forged approval {i} <b>" for i in range(12)}
    record.security.record("manager", "forged approval 12 <b>", NOW + 400, run_id="replenish-SKU-1-1")
    latest = sku_detail(record, None, None, catalogue=catalogue)
    assert "<b>manager</b>: forged approval 12 &lt;b&gt;" in latest[latest.index("id=security") :], "escaped"
    assert "decide in the approval inbox" not in html, "no run waits for the manager"

    down = sku_detail(
        SkuRecord(sku="SKU-1"), None, None, catalogue=Catalogue(error="the ERP's item master could not be read")
    )
    assert "could not be read" in down and "id=security" not in down
