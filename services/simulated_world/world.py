"""The simulated world: ERP, suppliers and manager wired to the clock, faults and messenger.

Each public method is one thing an outside caller can do. The order of checks follows a
real system: an unknown supplier is 404 before anything else, a supplier that is down
answers 503 before it looks at the request, and a refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import httpx

from replenisher.domain.documents import (
    ApprovalDecision,
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
    SupplierReply,
)
from simulated_world.calls import CallLog
from simulated_world.clock import Clock
from simulated_world.erp import BookedReceipt, Erp, ItemSetup
from simulated_world.errors import BadRequest, NotFound, Unavailable, Unprocessable
from simulated_world.faults import FaultBook, SupplierFaults
from simulated_world.manager import ApprovalEntry, DecisionBody, ManagerInbox, ManagerPolicy
from simulated_world.messenger import Door, MessageFilter, Messenger, Payload, PushedMessage
from simulated_world.scheduler import Scheduler
from simulated_world.suppliers import (
    CHASE_REPLY_DAYS,
    OrderFilter,
    Reply,
    Shipment,
    Supplier,
    SupplierOrder,
    SupplierSetup,
    reply_text,
)


class Later(Protocol):
    """Where the world's plans wait for their time: asyncio tasks on the wall clock (`Scheduler`), or
    a timeline a simulated clock is moved along (the in-memory engine's)."""

    def at(self, when: float, action: Callable[[], None], name: str) -> None: ...

    async def aclose(self) -> None: ...


class Outbox(Protocol):
    """What the world sends the SKU agents: over HTTP (`Messenger`), or into memory."""

    def push(self, sku: str, event: EventKind, payload: Payload) -> PushedMessage: ...

    def find(self, where: MessageFilter) -> list[PushedMessage]: ...


class SimulatedWorld:
    def __init__(
        self, clock: Clock, scheduler: Later, messenger: Outbox, client: httpx.AsyncClient | None = None
    ) -> None:
        self.clock = clock
        self.client = client
        self.scheduler = scheduler
        self.messenger = messenger
        self.calls = CallLog()
        self.erp = Erp(clock.day_seconds)
        self.suppliers: dict[str, Supplier] = {}
        self.faults = FaultBook()
        self.held: list[tuple[SupplierOrder, Shipment]] = []  # fell due while their supplier held shipments
        self.manager = ManagerInbox()

    @classmethod
    def over_http(
        cls, clock: Clock, client: httpx.AsyncClient, ingress_url: str, door: Door | None = None
    ) -> SimulatedWorld:
        """The served world: plans on the wall clock, messages pushed over HTTP with `client`."""
        scheduler = Scheduler(clock)
        return cls(clock, scheduler, Messenger(ingress_url, client, scheduler, clock, door=door), client)

    async def aclose(self) -> None:
        await self.scheduler.aclose()
        if self.client is not None:
            await self.client.aclose()

    # --- setup -------------------------------------------------------------------------

    def set_supplier(self, supplier_id: str, setup: SupplierSetup) -> Supplier:
        supplier = self.suppliers.get(supplier_id)
        if supplier is None:
            supplier = Supplier(supplier_id, setup)
            self.suppliers[supplier_id] = supplier
        else:
            # Orders already taken keep their terms; only new quotes and orders see the change.
            supplier.setup = setup
        return supplier

    def set_item(self, sku: str, setup: ItemSetup) -> StockLevel:
        unknown = [sid for sid in setup.suppliers if sid not in self.suppliers]
        if unknown:
            raise BadRequest(f"unknown suppliers: {', '.join(unknown)}")
        self.erp.set_item(sku, setup, self.clock.now())
        return self.erp.stock(sku, self.clock.now())

    def orders(self, where: OrderFilter) -> list[SupplierOrder]:
        return [
            order
            for supplier in self.suppliers.values()
            if where.supplier is None or supplier.id == where.supplier
            for order in supplier.orders.values()
            if where.sku is None or order.sku == where.sku
        ]

    # --- ERP ---------------------------------------------------------------------------

    def stock(self, sku: str) -> StockLevel:
        return self.erp.stock(sku, self.clock.now())

    def close_purchase_order(self, po_number: str, closure: PurchaseOrderClosure) -> None:
        if closure.po_number != po_number:
            raise BadRequest(f"body is for PO {closure.po_number}, path for PO {po_number}")
        self.erp.close(closure)

    # --- suppliers ---------------------------------------------------------------------

    def supplier(self, supplier_id: str) -> Supplier:
        try:
            return self.suppliers[supplier_id]
        except KeyError:
            raise NotFound(f"unknown supplier {supplier_id}") from None

    def reach_supplier(self, supplier_id: str) -> Supplier:
        """The supplier, if it answers at all: every supplier call starts here."""
        supplier = self.supplier(supplier_id)
        if self.faults.of(supplier_id).take_down_call():
            raise Unavailable(f"supplier {supplier_id} is unavailable")
        return supplier

    def _price_inputs(self, supplier_id: str) -> tuple[float, int, float]:
        now = self.clock.now()
        return now, self.clock.day_number(now), self.faults.of(supplier_id).price_rise_pct

    def quote(self, supplier: Supplier, request: QuoteRequest) -> Quote | dict[str, Any]:
        """The quote, or what a faulty supplier sends instead (crafted fields, unvalidated)."""
        refusal = self.faults.of(supplier.id).refuse_quotes
        if refusal is not None:
            raise Unprocessable(refusal)
        now, day, rise = self._price_inputs(supplier.id)
        quote = supplier.quote(request, now, day, rise, self.clock.day_seconds)
        override = self.faults.of(supplier.id).quote_override
        if override is None:
            return quote
        return override.apply(quote.model_dump(mode="json"), now, self.clock.day_seconds)

    def _as_said(self, supplier: Supplier, ack: OrderAck) -> OrderAck | dict[str, Any]:
        """An acknowledgement as the supplier states it: the true one unless an override is set."""
        override = self.faults.of(supplier.id).ack_override
        return ack if override is None else override.apply(ack.model_dump(mode="json"))

    def live_price(self, supplier: Supplier, sku: str) -> LivePrice:
        _, day, rise = self._price_inputs(supplier.id)
        return LivePrice(supplier=supplier.id, sku=sku, unit_price=supplier.price(sku, day, rise))

    def place_order(
        self, supplier: Supplier, idempotency_key: str | None, po: PurchaseOrder
    ) -> tuple[OrderAck | dict[str, Any], bool]:
        """The acknowledgement and whether the order is new."""
        if idempotency_key != po.po_number:
            raise BadRequest("the Idempotency-Key header must be present and equal the PO number")
        order, created = supplier.take_order(po, self.clock.now(), self.clock)
        if created:
            # Confirmation first: when both fall due at once, the supplier writes before it ships.
            for reply in order.replies:
                self._plan_reply(supplier, order, reply)
            for shipment in order.shipments:
                self._plan_shipment(supplier, order, shipment)
            self.faults.of(supplier.id).go_down_after_order()
        if self.faults.of(supplier.id).take_lost_answer():
            raise Unavailable(f"supplier {supplier.id} took the order but its answer was lost")
        return self._as_said(supplier, order.ack), created

    def find_order(self, supplier: Supplier, po_number: str) -> OrderAck | dict[str, Any]:
        return self._as_said(supplier, supplier.order(po_number).ack)

    def sku_of_order(self, supplier_id: str, po_number: str) -> str | None:
        """The SKU of the order this supplier holds under this PO number, if it holds one."""
        supplier = self.suppliers.get(supplier_id)
        order = supplier.orders.get(po_number) if supplier else None
        return order.sku if order else None

    def chase(self, supplier: Supplier, po_number: str, chase: ChaseRequest, key: str | None = None) -> None:
        order = supplier.order(po_number)
        if key is not None:
            # A retried reminder is the same reminder: one more reply at most.
            if key in order.chase_keys:
                return
            order.chase_keys.append(key)
        order.chases += 1
        if self.faults.of(supplier.id).quiet or order.cancelled:
            return
        reply = order.add_reply("chase", self.clock.after(self.clock.now(), CHASE_REPLY_DAYS))
        self._plan_reply(supplier, order, reply)

    def cancel(self, supplier: Supplier, po_number: str, cancel: CancelRequest) -> SupplierOrder:
        order = supplier.order(po_number)
        order.cancel(cancel.reason, self.clock.now())
        return order

    def _plan_shipment(self, supplier: Supplier, order: SupplierOrder, shipment: Shipment) -> None:
        name = f"ship-{supplier.id}-{order.po_number}-{shipment.number}"
        self.scheduler.at(shipment.due_at, lambda: self._ship(order, shipment), name)

    def _plan_reply(self, supplier: Supplier, order: SupplierOrder, reply: Reply) -> None:
        name = f"reply-{supplier.id}-{order.po_number}-{reply.number}"
        self.scheduler.at(reply.due_at, lambda: self._send_reply(supplier, order, reply), name)

    def _ship(self, order: SupplierOrder, shipment: Shipment) -> None:
        if shipment.status != "scheduled":
            return
        if self.faults.of(order.supplier).hold_shipments:
            shipment.status = "held"
            self.held.append((order, shipment))
            return
        now = self.clock.now()
        receipt_id = f"{order.ack.order_id}-GR{shipment.number}"
        shipment.status = "delivered"
        shipment.receipt_id = receipt_id
        self.erp.book_goods(
            BookedReceipt(
                receipt_id=receipt_id,
                po_number=order.po_number,
                sku=order.sku,
                supplier=order.supplier,
                quantity=shipment.quantity,
                booked_at=now,
            )
        )
        receipt = GoodsReceipt(
            receipt_id=receipt_id, po_number=order.po_number, sku=order.sku, quantity=shipment.quantity
        )
        self.messenger.push(order.sku, "goods", receipt)

    def _send_reply(self, supplier: Supplier, order: SupplierOrder, reply: Reply) -> None:
        if reply.status != "scheduled":
            return
        faults = self.faults.of(supplier.id)
        if faults.quiet:
            reply.status, reply.why_not_sent = "dropped", "supplier is quiet"
            return
        if faults.take_dropped_reply():
            reply.status, reply.why_not_sent = "dropped", "reply dropped by fault injection"
            return
        text = faults.take_reply_text() or reply_text(
            supplier, order, reply.cause, self.clock.now(), self.clock, faults.delivery_days
        )
        reply.status = "sent"
        self.messenger.push(
            order.sku, "supplier-reply", SupplierReply(po_number=order.po_number, supplier=supplier.id, text=text)
        )

    # --- manager -----------------------------------------------------------------------

    def set_policy(self, update: ManagerPolicy) -> ManagerPolicy:
        self.manager.policy = self.manager.policy.merged(update)
        return self.manager.policy

    def request_approval(self, request: ApprovalRequest) -> tuple[ApprovalEntry, bool]:
        entry, created = self.manager.receive(request, self.clock.now())
        if created:
            policy = self.manager.policy
            decision = policy.decide(request)
            if decision is not None:
                when = entry.received_at + self.clock.seconds(policy.delay_days)
                self.scheduler.at(when, lambda: self._auto_decide(entry, decision), f"approve-{request.po_number}")
        return entry, created

    def _auto_decide(self, entry: ApprovalEntry, decision: ApprovalDecision) -> None:
        # A person may have decided first, or a newer request superseded this one.
        if self.manager.settle(entry, decision, self.clock.now()):
            self.messenger.push(entry.request.sku, "approval", decision)

    def decide(self, po_number: str, body: DecisionBody) -> ApprovalEntry:
        decision = self.manager.decide(po_number, body, self.clock.now())
        entry = self.manager.latest(po_number)
        self.messenger.push(entry.request.sku, "approval", decision)
        return entry

    # --- faults ------------------------------------------------------------------------

    def set_faults(self, supplier_id: str, update: SupplierFaults) -> SupplierFaults:
        self.supplier(supplier_id)
        merged = self.faults.merge(supplier_id, update)
        self._release_held(supplier_id)
        return merged

    def clear_faults(self, supplier_id: str) -> SupplierFaults:
        self.supplier(supplier_id)
        cleared = self.faults.clear(supplier_id)
        self._release_held(supplier_id)
        return cleared

    def _release_held(self, supplier_id: str) -> None:
        """Ship what fell due while this supplier held its shipments, once it no longer does."""
        if self.faults.of(supplier_id).hold_shipments:
            return
        going = [(order, shipment) for order, shipment in self.held if order.supplier == supplier_id]
        self.held = [(order, shipment) for order, shipment in self.held if order.supplier != supplier_id]
        for order, shipment in going:
            if shipment.status == "held":  # not cancelled meanwhile
                shipment.status = "scheduled"
                self._ship(order, shipment)

    def faults_of(self, supplier_id: str) -> SupplierFaults:
        self.supplier(supplier_id)
        return self.faults.of(supplier_id)
