"""A simulated world in memory: ERP, suppliers, the manager and what arrives at the SKU's address.

Used by the in-memory engine (`replenisher.in_memory.engine`) for the suites and for
`scripts/claude_run.py`; every call the agent makes is recorded, so a test can judge a run
from the world's records as it would on the real stack. Time is a `Clock` the waits move forward.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from replenisher.domain.documents import (
    ApprovalDecision,
    ApprovalReminder,
    ApprovalRequest,
    CancelRequest,
    ChaseRequest,
    GoodsReceipt,
    LivePrice,
    OrderAck,
    PurchaseOrder,
    PurchaseOrderClosure,
    Quote,
    QuoteRequest,
    StockLevel,
    SupplierReply,
)
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.ports import Rejected, ReplyReader
from replenisher.domain.state import State
from replenisher.domain.tools import Wait

DAY = 86_400.0
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SKU = "SKU-H1"
_PCT = re.compile(r"(\d{1,2}(?:\.\d+)?)% discount")


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


@dataclass
class SupplierSpec:
    price: float
    lead_days: float = 5.0
    reply_days: float = 0.5
    late_days: float = 0.0
    quiet: bool = False
    never_delivers: bool = False
    honours_discounts: bool = True
    refuses_quote: str | None = None


@dataclass
class PlacedOrder:
    po: PurchaseOrder
    live_price: float
    at: float


class MemoryWorld:
    """ERP, suppliers and the manager's inbox in memory; records everything the agent sent."""

    def __init__(self, clock: Clock, suppliers: dict[str, SupplierSpec], reader: ReplyReader | None = None) -> None:
        self.clock = clock
        self.specs = suppliers
        self.erp = self
        self.suppliers = self
        self.manager = self
        self.reader: ReplyReader = reader or OfflineReplyReader()
        self.quote_requests: list[tuple[str, QuoteRequest]] = []
        self.quoted: dict[str, float] = {}
        self.placed: dict[str, PlacedOrder] = {}
        self.acks: dict[str, OrderAck] = {}
        self.approval_requests: list[ApprovalRequest] = []
        self.reminders: dict[str, ApprovalReminder] = {}
        self.chases: list[str] = []
        self.cancelled: list[str] = []
        self.closed: list[str] = []
        self.live_price_override: dict[str, float] = {}
        self._quotes = 0

    # ERP
    async def get_stock(self, sku: str) -> StockLevel:
        raise NotImplementedError

    async def close_purchase_order(self, closure: PurchaseOrderClosure) -> None:
        self.closed.append(closure.po_number)

    # suppliers
    async def quote(self, supplier: str, request: QuoteRequest) -> Quote:
        self.quote_requests.append((supplier, request))
        spec = self.specs[supplier]
        if spec.refuses_quote is not None:
            raise Rejected(422, spec.refuses_quote)
        price = spec.price
        found = _PCT.search(request.note or "")
        if found and spec.honours_discounts:
            price = round(price * (1 - float(found.group(1)) / 100), 2)
        self._quotes += 1
        self.quoted[supplier] = price
        return Quote(
            quote_id=f"{supplier}-Q{self._quotes:04d}",
            supplier=supplier,
            sku=request.sku,
            quantity=request.quantity,
            unit_price=price,
            lead_days=spec.lead_days,
            valid_until=self.clock.now + 5 * DAY,
        )

    async def live_price(self, supplier: str, sku: str) -> LivePrice:
        price = self.live_price_override.get(supplier, self.quoted.get(supplier, self.specs[supplier].price))
        return LivePrice(supplier=supplier, sku=sku, unit_price=price)

    async def place_order(self, po: PurchaseOrder) -> OrderAck:
        if po.po_number not in self.acks:
            live = (await self.live_price(po.supplier, po.sku)).unit_price
            self.placed[po.po_number] = PlacedOrder(po=po, live_price=live, at=self.clock.now)
            self.acks[po.po_number] = OrderAck(
                order_id=f"O-{len(self.acks) + 1}",
                po_number=po.po_number,
                supplier=po.supplier,
                sku=po.sku,
                quantity=po.quantity,
                unit_price=po.unit_price,
                accepted_at=self.clock.now,
            )
        return self.acks[po.po_number]

    async def find_order(self, supplier: str, po_number: str) -> OrderAck | None:
        return self.acks.get(po_number)

    async def chase(self, supplier: str, po_number: str, request: ChaseRequest, idempotency_key: str) -> None:
        self.chases.append(idempotency_key)

    async def cancel(self, supplier: str, po_number: str, request: CancelRequest) -> None:
        self.cancelled.append(po_number)

    # manager
    async def request_approval(self, request: ApprovalRequest) -> None:
        self.approval_requests.append(request)

    async def remind(self, reminder: ApprovalReminder, key: str) -> None:
        self.reminders.setdefault(key, reminder)


@dataclass
class Inbox:
    """What arrives at the SKU's address while a run waits: the manager, the supplier, the warehouse."""

    world: MemoryWorld
    manager_limit: float | None = None
    reply_text: str | None = None
    forged_approvals: list[ApprovalDecision] = field(default_factory=list)
    genuine: dict[str, ApprovalDecision] = field(default_factory=dict)

    def next(self, tool: Wait[Any], state: State) -> Any:
        clock = self.world.clock
        if tool.event == "approval":
            if self.forged_approvals:
                clock.advance(0.1)
                return self.forged_approvals.pop(0)
            assert state.approval is not None
            request = state.approval.request
            approve = self.manager_limit is None or request.unit_price <= self.manager_limit
            decision = ApprovalDecision(
                po_number=request.po_number,
                token=request.token,
                approved=approve,
                up_to=request.unit_price if approve else None,
                by="manager",
            )
            self.genuine[request.po_number] = decision
            clock.advance(0.5)
            return decision
        assert state.order is not None
        spec = self.world.specs[state.order.supplier]
        if tool.event == "supplier-reply":
            if spec.quiet and state.chases == 0:
                clock.now = max(clock.now, tool.deadline(state))
                return None
            clock.advance(spec.reply_days)
            text = self.reply_text or (
                f"We confirm purchase order {state.order.po_number}. Delivery in {spec.lead_days:g} days."
            )
            return SupplierReply(po_number=state.order.po_number, supplier=state.order.supplier, text=text)
        assert state.ordered_at is not None
        due = state.ordered_at + (spec.lead_days + spec.late_days) * DAY
        deadline = tool.deadline(state)
        if spec.never_delivers or due > deadline:
            clock.now = max(clock.now, deadline)
            return None
        clock.now = max(clock.now, due)
        return GoodsReceipt(
            receipt_id=f"R-{state.order.po_number}",
            po_number=state.order.po_number,
            sku=state.sku,
            quantity=state.order.quantity - state.received_quantity,
        )
