"""The simulated world in memory: the world's own core (`simulated_world`) behind the replenisher's ports.

Used by the in-memory engine (`replenisher.in_memory.engine`) for the suites and for
`scripts/claude_run.py`. There is one simulated world: its ERP, suppliers, manager, faults and
plans (`simulated_world.world.SimulatedWorld`) answer here as they answer over HTTP, without HTTP.
`MemoryWorld` implements the ports (`replenisher.domain.ports.World`) over it the way the HTTP
adapters do over the served world: a refusal is `Rejected` with its status, a supplier that is
down is a transient failure the step retries, and a quote or acknowledgement outside the
contract is `Malformed`. Time is a `Clock` the engine moves forward; the world's plans (replies,
shipments, the manager's decisions) wait on a `Timeline` and run at their own time once the clock
passes it, and what they send lands in a `Mailbox` that the `Inbox` hands to the run's waits.

Only the suites and scripts import this module: the service never does (the import contract
`service-without-world` in pyproject.toml), so the simulated world is no part of it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from replenisher.adapters.suppliers import malformed
from replenisher.domain.documents import (
    ApprovalDecision,
    ApprovalReminder,
    ApprovalRequest,
    CancelRequest,
    ChaseRequest,
    EventKind,
    GoodsReceipt,
    LivePrice,
    OrderAck,
    PurchaseOrder,
    PurchaseOrderClosure,
    Quote,
    QuoteRequest,
    StockLevel,
)
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.ports import Rejected, ReplyReader, Roster
from replenisher.domain.state import State
from replenisher.domain.tools import Wait
from replenisher.loop.request import Envelope
from simulated_world.calls import CallRecord, Service
from simulated_world.clock import Clock as WorldClock
from simulated_world.erp import ItemSetup
from simulated_world.errors import WorldError
from simulated_world.faults import QuoteOverride, SupplierFaults
from simulated_world.manager import ApprovalFilter, ManagerPolicy
from simulated_world.messenger import Ledger, Payload, PushedMessage
from simulated_world.suppliers import OrderFilter, SupplierOrder, SupplierSetup
from simulated_world.world import SimulatedWorld

DAY = 86_400.0
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SKU = "SKU-H1"
NEVER_DAYS = 365.0
"""A supplier that never delivers ships a year out (the longest lead a supplier may have): after any run's end."""

T = TypeVar("T")
D = TypeVar("D", bound=BaseModel)


class Clock:
    """The simulated time, epoch seconds: the engine and the inbox move it, the world reads it."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


@dataclass
class SupplierSpec:
    """A supplier as a suite sets it up: said as the world's setup and faults (`setup`, `faults`)."""

    price: float
    lead_days: float = 5.0
    """Business days to delivery, as quoted."""
    reply_days: float = 0.5
    late_days: float = 0.0
    """Business days the goods come after the quoted lead time: the supplier quotes `lead_days`
    (a `quote_override`) and ships on its real plan."""
    quiet: bool = False
    """No replies at all, chases ignored (the world's `quiet` fault)."""
    never_delivers: bool = False
    refuses_quote: str | None = None

    def setup(self, name: str, sku: str) -> SupplierSetup:
        ships = NEVER_DAYS if self.never_delivers else self.lead_days + self.late_days
        return SupplierSetup(name=name, prices={sku: self.price}, lead_days=ships, reply_days=self.reply_days)

    def faults(self) -> SupplierFaults:
        late = self.never_delivers or self.late_days > 0
        return SupplierFaults(
            quiet=self.quiet,
            refuse_quotes=self.refuses_quote,
            quote_override=QuoteOverride(lead_days=self.lead_days) if late else None,
        )


class Timeline:
    """The world's plans (`simulated_world.world.Later`) on the simulated clock, run in time order
    once the clock has passed them, each at its own time (the clock is set to it while it runs)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._plans: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def at(self, when: float, action: Callable[[], None], name: str) -> None:
        heapq.heappush(self._plans, (when, next(self._order), action))

    async def aclose(self) -> None:
        self._plans.clear()

    def next_at(self) -> float | None:
        return self._plans[0][0] if self._plans else None

    def run_until(self, until: float) -> None:
        while self._plans and self._plans[0][0] <= until:
            when, _, action = heapq.heappop(self._plans)
            moved = self._clock.now
            self._clock.now = when
            try:
                action()
            finally:
                self._clock.now = max(moved, when)


class Mailbox(Ledger):
    """What the world sends the SKU's address (`simulated_world.world.Outbox`), kept for the inbox:
    delivered at once, as a push the ingress took."""

    def __init__(self, clock: WorldClock) -> None:
        super().__init__(clock)
        self._world_clock = clock
        self._waiting: dict[int, tuple[PushedMessage, Payload]] = {}

    def push(self, sku: str, event: EventKind, payload: Payload) -> PushedMessage:
        message = self.record(sku, event, payload)
        message.status, message.delivered_at, message.attempts = "delivered", self._world_clock.now(), 1
        self._waiting[message.seq] = (message, payload)
        return message

    def take(self, sku: str, event: EventKind, po_number: str | None) -> Payload | None:
        """The first message of `event` about `po_number` (any, when None) for the SKU not yet taken."""
        for seq, (message, payload) in self._waiting.items():
            if message.sku == sku and message.event == event and po_number in (None, payload.po_number):
                del self._waiting[seq]
                return payload
        return None


class Unanswered(Exception):
    """The supplier did not answer (down, or its answer lost): the step retries, as over HTTP on a 503."""


class MemoryWorld:
    """The simulated world's core behind the ports: `erp`, `suppliers` and `manager` are this object."""

    def __init__(
        self,
        clock: Clock,
        suppliers: dict[str, SupplierSpec],
        reader: ReplyReader | None = None,
        *,
        sku: str = SKU,
        policy: ManagerPolicy | None = None,
        people: Roster | None = None,
    ) -> None:
        self.clock = clock
        self.timeline = Timeline(clock)
        world_clock = WorldClock(DAY, now=clock, started_at=clock.now)
        self.mailbox = Mailbox(world_clock)
        self.core = SimulatedWorld(world_clock, self.timeline, self.mailbox)
        for sid, spec in suppliers.items():
            self.core.set_supplier(sid, spec.setup(f"Supplier {sid}", sku))
            self.core.set_faults(sid, spec.faults())
        self.core.set_item(sku, ItemSetup(on_hand=5, safety_stock=20, target_stock=100, suppliers=list(suppliers)))
        # The manager approves every request half a day after it comes, unless told otherwise.
        self.core.set_policy(policy or ManagerPolicy(auto_approve=True, delay_days=0.5))
        self.erp = self
        self.suppliers = self
        self.manager = self
        self.reader: ReplyReader = reader or OfflineReplyReader()
        self.people: Roster | None = people
        """The authority matrix a request under one reads whom to ask from."""
        self.quote_requests: list[tuple[str, QuoteRequest]] = []
        """Each quote request as the agent sent it (the world keeps the call, not its note)."""

    # --- what the world holds, for the suites to judge a run by --------------------------

    @property
    def orders(self) -> list[SupplierOrder]:
        return self.core.orders(OrderFilter())

    @property
    def approval_requests(self) -> list[ApprovalRequest]:
        return [entry.request for entry in self.core.manager.find(ApprovalFilter())]

    @property
    def closed(self) -> list[str]:
        return list(self.core.erp.closures)

    def set_faults(self, supplier: str, **faults: Any) -> SupplierFaults:
        return self.core.set_faults(supplier, SupplierFaults.model_validate(faults))

    def catch_up(self) -> None:
        """Run every plan that fell due by now, so a call sees the world as it is at this instant."""
        self.timeline.run_until(self.clock.now)

    def _call(
        self,
        service: Service,
        op: str,
        answer: Callable[[], T],
        *,
        supplier: str | None = None,
        sku: str | None = None,
        po_number: str | None = None,
    ) -> T:
        """One call into the world, recorded in its call log as the served world records it, its
        refusal said as the HTTP adapters say it."""
        self.catch_up()
        status = 200
        try:
            return answer()
        except WorldError as refused:
            status = refused.status
            if status >= 500:
                raise Unanswered(refused.reason) from refused
            raise Rejected(status, refused.reason) from refused
        finally:
            if sku is None and supplier is not None and po_number is not None:
                sku = self.core.sku_of_order(supplier, po_number)
            self.core.calls.record(
                CallRecord(
                    at=self.clock.now,
                    service=service,
                    op=op,
                    supplier=supplier,
                    sku=sku,
                    po_number=po_number,
                    status=status,
                )
            )

    # --- ERP -----------------------------------------------------------------------------

    async def get_stock(self, sku: str) -> StockLevel:
        return self._call("erp", "get_stock", lambda: self.core.stock(sku), sku=sku)

    async def close_purchase_order(self, closure: PurchaseOrderClosure) -> None:
        self._call(
            "erp",
            "close_purchase_order",
            lambda: self.core.close_purchase_order(closure.po_number, closure),
            sku=closure.sku,
            po_number=closure.po_number,
        )

    async def find_receipt(self, receipt_id: str) -> GoodsReceipt | None:
        try:
            booked = self._call("erp", "goods_receipt", lambda: self.core.erp.receipt(receipt_id))
        except Rejected as e:
            if e.status == 404:
                return None
            raise
        return GoodsReceipt(
            receipt_id=booked.receipt_id, po_number=booked.po_number, sku=booked.sku, quantity=booked.quantity
        )

    # --- suppliers -----------------------------------------------------------------------

    async def quote(self, supplier: str, request: QuoteRequest) -> Quote:
        self.quote_requests.append((supplier, request))

        def answer() -> Quote | dict[str, Any]:
            return self.core.quote(self.core.reach_supplier(supplier), request)

        said = self._call("supplier", "quote", answer, supplier=supplier, sku=request.sku)
        return supplier_document(said, Quote, f"/suppliers/{supplier}/quotes")

    async def live_price(self, supplier: str, sku: str) -> LivePrice:
        def answer() -> LivePrice:
            return self.core.live_price(self.core.reach_supplier(supplier), sku)

        return self._call("supplier", "live_price", answer, supplier=supplier, sku=sku)

    async def place_order(self, po: PurchaseOrder) -> OrderAck:
        def answer() -> OrderAck | dict[str, Any]:
            # The PO number is the idempotency key, as the HTTP adapter sends it.
            return self.core.place_order(self.core.reach_supplier(po.supplier), po.po_number, po)[0]

        said = self._call("supplier", "place_order", answer, supplier=po.supplier, sku=po.sku, po_number=po.po_number)
        return supplier_document(said, OrderAck, f"/suppliers/{po.supplier}/orders")

    async def find_order(self, supplier: str, po_number: str) -> OrderAck | None:
        def answer() -> OrderAck | dict[str, Any]:
            return self.core.find_order(self.core.reach_supplier(supplier), po_number)

        try:
            said = self._call("supplier", "find_order", answer, supplier=supplier, po_number=po_number)
        except Rejected as e:
            if e.status == 404:
                return None
            raise
        return supplier_document(said, OrderAck, f"/suppliers/{supplier}/orders/{po_number}")

    async def chase(self, supplier: str, po_number: str, request: ChaseRequest, idempotency_key: str) -> None:
        def answer() -> None:
            self.core.chase(self.core.reach_supplier(supplier), po_number, request, idempotency_key)

        self._call("supplier", "chase", answer, supplier=supplier, po_number=po_number)

    async def cancel(self, supplier: str, po_number: str, request: CancelRequest) -> None:
        def answer() -> None:
            self.core.cancel(self.core.reach_supplier(supplier), po_number, request)

        self._call("supplier", "cancel", answer, supplier=supplier, po_number=po_number)

    # --- manager -------------------------------------------------------------------------

    async def request_approval(self, request: ApprovalRequest) -> None:
        self._call(
            "manager",
            "request_approval",
            lambda: self.core.request_approval(request),
            supplier=request.supplier,
            sku=request.sku,
            po_number=request.po_number,
        )

    async def remind(self, reminder: ApprovalReminder, key: str) -> None:
        self._call(
            "manager",
            "remind",
            lambda: self.core.manager.remind(key, reminder, self.clock.now),
            sku=reminder.sku,
            po_number=reminder.po_number,
        )


def supplier_document(said: D | dict[str, Any], model: type[D], where: str) -> D:
    """A supplier's quote or acknowledgement; one outside the contract is `Malformed`, as over HTTP
    (`replenisher.adapters.suppliers.supplier_document`)."""
    if isinstance(said, model):
        return said
    try:
        return model.model_validate(said)
    except ValidationError as exc:
        raise malformed(model, where, exc) from exc


@dataclass
class Inbox:
    """What arrives at the SKU's address while a run waits: what the world sent (the manager's
    decision, the supplier's reply, the warehouse's goods), taken in the order sent; the clock
    moves to each plan of the world in turn until one sends what the wait is for, or to its deadline.

    `reply_text` is the text of the next reply of the supplier the run ordered from (the world's
    `reply_text` fault); `manager_limit` the manager's budget (above it, a request is rejected);
    `forged_approvals` come from outside the world, ahead of anything it sends: a bare decision (an
    operator's), a whole envelope (a sender, the person's standing), or one made from the run's state
    as it waits (to carry its token and the digest of the PO it waits on)."""

    world: MemoryWorld
    manager_limit: float | None = None
    reply_text: str | None = None
    forged_approvals: list[ApprovalDecision | Envelope | Callable[[State], Envelope]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.manager_limit is not None:
            self.world.core.set_policy(ManagerPolicy(max_unit_price=self.manager_limit, over_budget="reject"))

    def next(self, tool: Wait[Any], state: State) -> Payload | Envelope | None:
        world, clock = self.world, self.world.clock
        if tool.event == "approval" and self.forged_approvals:
            clock.advance(0.1)
            forged = self.forged_approvals.pop(0)
            return forged(state) if callable(forged) else forged
        about = state.approval.request.po_number if tool.event == "approval" and state.approval else None
        if tool.event != "approval" and state.order is not None:
            about = state.order.po_number
            if self.reply_text is not None:
                world.set_faults(state.order.supplier, reply_text=self.reply_text)
                self.reply_text = None
        deadline = tool.deadline(state)
        while True:
            world.catch_up()
            payload = world.mailbox.take(state.sku, tool.event, about)
            if payload is not None:
                return payload
            due = world.timeline.next_at()
            if due is None or due > deadline:
                clock.now = max(clock.now, deadline)
                return None
            clock.now = max(clock.now, due)
