"""Suppliers: what they charge, the orders they hold, and what they plan to ship and write.

Everything here is plain state and arithmetic; the world schedules the plans and sends the
messages. An order is keyed by its PO number (the caller's idempotency key), so however
often a PO is submitted the supplier holds one order for it.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from replenisher.domain.documents import OrderAck, Price, PurchaseOrder, Quote, QuoteRequest, Sku
from simulated_world.clock import Clock
from simulated_world.errors import BadRequest, Conflict, NotFound

CHASE_REPLY_DAYS = 0.5
"""How long a supplier takes to answer a chase, in business days."""


class SupplierSetup(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    prices: dict[Sku, Price] = Field(description="base unit price per SKU carried")
    lead_days: float = Field(ge=0, le=365, description="business days from the order to the first delivery")
    reply_days: float = Field(ge=0, le=365, description="business days from the order to its confirmation")
    quote_valid_days: float = Field(default=5.0, gt=0, le=365)
    price_drift: float = Field(default=0.0, ge=0, le=0.5)
    deliveries: int = Field(default=1, ge=1, le=50)
    delivery_gap_days: float = Field(default=1.0, ge=0, le=365, description="business days between deliveries")


def drift_factor(supplier: str, sku: str, day: int, drift: float) -> float:
    """A factor in [1 - drift, 1 + drift], fixed for a given supplier, SKU and day.

    Hashing instead of a random generator keeps prices reproducible across restarts and
    lets a test predict them.
    """
    if drift == 0:
        return 1.0
    digest = hashlib.sha256(f"{supplier}|{sku}|{day}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / float(2**64 - 1)
    return 1.0 + drift * (2.0 * unit - 1.0)


def unit_price(base: float, supplier: str, sku: str, day: int, drift: float, rise_pct: float) -> float:
    price = base * drift_factor(supplier, sku, day, drift) * (1.0 + rise_pct / 100.0)
    return max(0.01, round(price, 2))


def split_quantity(quantity: int, parts: int) -> list[int]:
    """Near-equal shipments, larger ones first, never an empty one."""
    parts = max(1, min(parts, quantity))
    size, extra = divmod(quantity, parts)
    return [size + 1 if i < extra else size for i in range(parts)]


class Shipment(BaseModel):
    number: int
    quantity: int
    due_at: float
    # held: due, but its supplier holds shipments (the `hold_shipments` fault); it goes out when released
    status: Literal["scheduled", "held", "delivered", "cancelled"] = "scheduled"
    receipt_id: str | None = None


class Reply(BaseModel):
    number: int
    cause: Literal["order", "chase"]
    due_at: float
    status: Literal["scheduled", "sent", "dropped", "cancelled"] = "scheduled"
    why_not_sent: str | None = None


class SupplierOrder(BaseModel):
    """One order as the supplier holds it, with its plan and what has happened so far."""

    supplier: str
    po_number: str
    sku: str
    quantity: int
    order: PurchaseOrder
    ack: OrderAck
    submissions: int = 1
    cancelled_at: float | None = None
    cancel_reason: str | None = None
    chases: int = 0
    chase_keys: list[str] = Field(default_factory=list)
    shipments: list[Shipment]
    replies: list[Reply] = Field(default_factory=list)

    @property
    def cancelled(self) -> bool:
        return self.cancelled_at is not None

    @property
    def shipped_quantity(self) -> int:
        return sum(s.quantity for s in self.shipments if s.status == "delivered")

    def add_reply(self, cause: Literal["order", "chase"], due_at: float) -> Reply:
        reply = Reply(number=len(self.replies) + 1, cause=cause, due_at=due_at)
        self.replies.append(reply)
        return reply

    def cancel(self, reason: str, now: float) -> None:
        if self.cancelled:
            return
        self.cancelled_at = now
        self.cancel_reason = reason
        for shipment in self.shipments:
            if shipment.status in ("scheduled", "held"):
                shipment.status = "cancelled"
        for reply in self.replies:
            if reply.status == "scheduled":
                reply.status = "cancelled"


class OrderFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    supplier: str | None = None
    sku: str | None = None


class OrderList(BaseModel):
    orders: list[SupplierOrder]


class SupplierView(BaseModel):
    id: str
    setup: SupplierSetup


class Supplier:
    def __init__(self, supplier_id: str, setup: SupplierSetup) -> None:
        self.id = supplier_id
        self.setup = setup
        self.orders: dict[str, SupplierOrder] = {}
        self._quotes_issued = 0

    def view(self) -> SupplierView:
        return SupplierView(id=self.id, setup=self.setup)

    def base_price(self, sku: str) -> float:
        try:
            return self.setup.prices[sku]
        except KeyError:
            raise NotFound(f"supplier {self.id} does not carry {sku}") from None

    def price(self, sku: str, day: int, rise_pct: float) -> float:
        return unit_price(self.base_price(sku), self.id, sku, day, self.setup.price_drift, rise_pct)

    def quote(self, request: QuoteRequest, now: float, day: int, rise_pct: float, day_seconds: float) -> Quote:
        price = self.price(request.sku, day, rise_pct)
        self._quotes_issued += 1
        return Quote(
            quote_id=f"{self.id}-Q{self._quotes_issued:05d}",
            supplier=self.id,
            sku=request.sku,
            quantity=request.quantity,
            unit_price=price,
            lead_days=self.setup.lead_days,
            valid_until=now + self.setup.quote_valid_days * day_seconds,
        )

    def take_order(self, po: PurchaseOrder, now: float, clock: Clock) -> tuple[SupplierOrder, bool]:
        """The order for this PO, and whether it is new. A repeat only counts the submission.
        Its deliveries and its confirmation fall due in business days on the clock's calendar."""
        if po.supplier != self.id:
            raise BadRequest(f"order is addressed to supplier {po.supplier}, not {self.id}")
        existing = self.orders.get(po.po_number)
        if existing is not None:
            if existing.order != po:
                raise Conflict(f"PO {po.po_number} was already submitted with different content")
            existing.submissions += 1
            return existing, False
        self.base_price(po.sku)
        lead, gap = self.setup.lead_days, self.setup.delivery_gap_days
        shipments = [
            Shipment(number=i + 1, quantity=qty, due_at=clock.after(now, lead + i * gap))
            for i, qty in enumerate(split_quantity(po.quantity, self.setup.deliveries))
        ]
        ack = OrderAck(
            order_id=f"{self.id}-O{len(self.orders) + 1:05d}",
            po_number=po.po_number,
            supplier=self.id,
            sku=po.sku,
            quantity=po.quantity,
            unit_price=po.unit_price,
            accepted_at=now,
        )
        order = SupplierOrder(
            supplier=self.id,
            po_number=po.po_number,
            sku=po.sku,
            quantity=po.quantity,
            order=po,
            ack=ack,
            shipments=shipments,
        )
        order.add_reply("order", clock.after(now, self.setup.reply_days))
        self.orders[po.po_number] = order
        return order, True

    def order(self, po_number: str) -> SupplierOrder:
        try:
            return self.orders[po_number]
        except KeyError:
            raise NotFound(f"supplier {self.id} has no order {po_number}") from None


def reply_text(
    supplier: Supplier,
    order: SupplierOrder,
    cause: Literal["order", "chase"],
    now: float,
    clock: Clock,
    stated_days: float | None = None,
) -> str:
    """The plain email a supplier sends about an order: what it confirms and when goods come
    (in business days, as it plans them).

    `stated_days` (the `delivery_days` fault) replaces the delivery the plan would state: a
    supplier may promise anything, the shipments still follow the plan.
    """
    po = order.order
    pending = [s for s in order.shipments if s.status in ("scheduled", "held")]
    if order.cancelled:
        status = "This order was cancelled at your request; nothing further will ship."
    elif pending:
        days = stated_days if stated_days is not None else max(0.0, clock.business_days(now, pending[-1].due_at))
        parts = f" in {len(pending)} shipments" if len(pending) > 1 else ""
        status = f"Expected delivery in {days:.1f} days{parts}."
    else:
        status = f"All {order.shipped_quantity} units have been delivered."
    opening = (
        f"Thank you for purchase order {po.po_number}."
        if cause == "order"
        else f"Following up on your message about purchase order {po.po_number}."
    )
    return (
        f"Dear customer,\n\n{opening} We confirm {po.quantity} x {po.sku} at {po.unit_price:.2f} per unit "
        f"(our order {order.ack.order_id}). {status}\n\nKind regards,\n{supplier.setup.name}"
    )
