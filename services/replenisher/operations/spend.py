"""Money: what was ordered, what is committed (ordered, not yet received) and what was received,
per day or week of the site calendar and per supplier.

Read from what the SKU agents keep (each SKU's recent outcomes, with the order's price and
quantities) and the active runs' states: two SQL queries over Restate's state, however many
SKUs and runs. An order is counted once: a run that follows up an earlier run's order (found
by PO number) adds the goods it saw come in, not the order again.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from replenisher.domain.calendar import CalendarClock
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import SkuRecord
from replenisher.domain.state import State
from replenisher.operations.overview import parsed
from replenisher.operations.restate.client import RestateClient


class SpendQuery(BaseModel):
    """The spend page's query parameters. Anything else is refused with the reason."""

    model_config = ConfigDict(extra="forbid")

    by: Literal["day", "week"] = "day"
    periods: int = Field(default=14, ge=1, le=90, description="how many days or weeks, up to the current one")
    supplier: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9._-]*$")


def parsed_spend(params: dict[str, str]) -> SpendQuery:
    return parsed(SpendQuery, params)


class OrderMoney(BaseModel):
    """One order's money, as far as one run saw it."""

    run_id: str
    sku: str
    supplier: str
    po_number: str
    ordered: float = Field(description="0 when an earlier run placed the order and counted it")
    ordered_at: float
    received: float
    received_at: float | None
    committed: float = Field(description="ordered and still to come: the order is open")


class Period(BaseModel):
    label: str
    start: date
    ordered: float = 0.0
    committed: float = 0.0
    received: float = 0.0


class SupplierSpend(BaseModel):
    supplier: str
    orders: int = 0
    ordered: float = 0.0
    committed: float = 0.0
    received: float = 0.0


class Spend(BaseModel):
    query: SpendQuery
    periods: list[Period]
    suppliers: list[SupplierSpend]
    committed_now: float = Field(description="every open order's remainder, whenever it was ordered")
    orders: int
    calendar: str = Field(description="which calendar the periods are days of")
    ever_ordered_from: list[str] = Field(default_factory=list, description="every supplier of a recorded order")


def from_outcome(o: ReplenishmentResult, adopted: set[str]) -> OrderMoney | None:
    if o.quantity_ordered <= 0 or o.unit_price is None or o.po is None:
        return None
    price = o.unit_price
    got = o.quantity_received - o.received_before
    # An order that may still be open counts as committed, unless a later run followed it up.
    still = o.outcome == "unknown" and o.run_id not in adopted
    return OrderMoney(
        run_id=o.run_id,
        sku=o.sku,
        supplier=o.supplier or o.po.supplier,
        po_number=o.po.po_number,
        ordered=0.0 if o.adopted_from else o.quantity_ordered * price,
        ordered_at=o.ordered_at if o.ordered_at is not None else o.started_at,
        received=got * price,
        received_at=o.ended_at if got else None,
        committed=max(o.quantity_ordered - o.quantity_received, 0) * price if still else 0.0,
    )


def from_state(s: State) -> OrderMoney | None:
    order = s.order
    if order is None:
        return None
    before = s.carried.received_quantity if s.carried else 0
    got = s.received_quantity - before
    is_open = not (s.cancelled or s.closed)
    return OrderMoney(
        run_id=s.run_id,
        sku=s.sku,
        supplier=order.supplier,
        po_number=order.po_number,
        ordered=0.0 if s.adopted_from else order.quantity * order.unit_price,
        ordered_at=s.ordered_at if s.ordered_at is not None else s.started_at,
        received=got * order.unit_price,
        received_at=s.last_receipt_at if got else None,
        committed=max(order.quantity - s.received_quantity, 0) * order.unit_price if is_open else 0.0,
    )


def orders_of(records: list[SkuRecord], active: dict[str, State]) -> list[OrderMoney]:
    adopted = {o.adopted_from for r in records for o in r.outcomes if o.adopted_from}
    adopted |= {s.adopted_from for s in active.values() if s.adopted_from}
    lines = [m for r in records for o in r.outcomes if (m := from_outcome(o, adopted)) is not None]
    lines += [m for s in active.values() if (m := from_state(s)) is not None]
    return lines


def _day(t: float, calendar: CalendarClock | None) -> date:
    return calendar.local(t).date() if calendar is not None else datetime.fromtimestamp(t, tz=UTC).date()


def period_start(day: date, by: str) -> date:
    return day - timedelta(days=day.weekday()) if by == "week" else day


def summarise(lines: list[OrderMoney], query: SpendQuery, now: float, calendar: CalendarClock | None) -> Spend:
    step = timedelta(days=7 if query.by == "week" else 1)
    last = period_start(_day(now, calendar), query.by)
    starts = [last - step * i for i in range(query.periods - 1, -1, -1)]
    periods = {
        d: Period(label=f"week of {d:%d %b %Y}" if query.by == "week" else f"{d:%a %d %b %Y}", start=d) for d in starts
    }
    suppliers: dict[str, SupplierSpend] = {}
    chosen = [m for m in lines if not query.supplier or m.supplier == query.supplier]
    counted = 0
    for m in chosen:
        ordered_in = periods.get(period_start(_day(m.ordered_at, calendar), query.by))
        received_in = (
            periods.get(period_start(_day(m.received_at, calendar), query.by)) if m.received_at is not None else None
        )
        if ordered_in is None and received_in is None:
            continue
        counted += 1
        who = suppliers.setdefault(m.supplier, SupplierSpend(supplier=m.supplier))
        if ordered_in is not None:
            ordered_in.ordered += m.ordered
            ordered_in.committed += m.committed
            who.ordered += m.ordered
            who.committed += m.committed
            who.orders += 1 if m.ordered else 0
        if received_in is not None:
            received_in.received += m.received
            who.received += m.received
    name = "UTC days" if calendar is None else f"the site calendar ({calendar.calendar.timezone})"
    return Spend(
        query=query,
        periods=list(periods.values()),
        suppliers=sorted(suppliers.values(), key=lambda s: -(s.ordered + s.received)),
        committed_now=sum(m.committed for m in chosen),
        orders=counted,
        calendar=name,
        ever_ordered_from=sorted({m.supplier for m in lines}),
    )


async def spend(client: RestateClient, query: SpendQuery, now: float) -> Spend:
    records = await client.sku_records()
    active = await client.run_states([r.active.run_id for r in records if r.active is not None])
    calendar = next((s.clock for s in active.values()), None) or await any_calendar(client)
    return summarise(orders_of(records, active), query, now, calendar)


async def any_calendar(client: RestateClient) -> CalendarClock | None:
    """The site calendar, from any run Restate still holds (every run carries the service's)."""
    rows = await client.sql("SELECT value_utf8 FROM state WHERE service_name = 'Replenish' AND key = 'state' LIMIT 1")
    for row in rows:
        if row.get("value_utf8"):
            return State.model_validate_json(row["value_utf8"]).clock
    return None
