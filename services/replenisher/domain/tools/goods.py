"""Seeing the goods in: wait_for_goods, close_purchase_order."""

from __future__ import annotations

from pydantic import BaseModel

from replenisher.domain.arrival import Arrival
from replenisher.domain.documents import GoodsReceipt, PurchaseOrderClosure
from replenisher.domain.ports import World
from replenisher.domain.state import State
from replenisher.domain.tools.base import Call, NoArgs, Wait
from replenisher.domain.tools.limits import MAX_CHASES, MAX_GOODS_OVERDUE
from replenisher.domain.tools.supplier import order_open
from replenisher.domain.tools.vetting import delivery_bound_days

GOODS_SENDERS = frozenset({"warehouse", "operator"})
"""Only the warehouse books goods in (an operator may relay it); either way the receipt must
exist in the ERP, which the SKU's address checks before routing it."""


class WaitForGoods(Wait[GoodsReceipt]):
    name = "wait_for_goods"
    description = "Wait for the warehouse to book the goods in (deliveries may come in parts)."
    event = "goods"
    Payload = GoodsReceipt

    def allowed(self, state: State) -> bool:
        heard_back = state.reply is not None or (state.chases >= MAX_CHASES and state.supplier_overdue)
        return (
            order_open(state)
            and not state.all_goods_in
            and heard_back
            and state.unread_reply is None
            and state.goods_overdue_count <= MAX_GOODS_OVERDUE
        )

    def deadline(self, state: State) -> float:
        assert state.ordered_at is not None
        grace = state.waits.goods_grace * (state.goods_overdue_count + 1)
        if state.reply is not None and state.reply.delivery_days is not None:
            # "Delivery in N days" counts from when the supplier said it, not from the order,
            # and is believed only up to the bound: a year away is a reason to follow up. The
            # grace then counts in business days from the promised delivery.
            stated = min(state.reply.delivery_days, delivery_bound_days(state))
            return state.after(state.after(state.reply.received_at, stated), grace)
        quoted = state.quoted_lead_days
        return state.after(state.after(state.ordered_at, quoted if quoted is not None else 10.0), grace)

    def refusal(self, state: State, payload: GoodsReceipt, arrival: Arrival) -> str | None:
        assert state.order is not None
        if arrival.sender.party not in GOODS_SENDERS:
            return f"goods receipt {payload.receipt_id!r} sent by {arrival.sender.party!r}, not by the warehouse"
        if payload.po_number != state.order.po_number or payload.sku != state.sku:
            return f"goods receipt {payload.receipt_id!r} is not for our PO"
        return None

    def apply(self, state: State, payload: GoodsReceipt | None, arrival: Arrival | None = None) -> str:
        if payload is None:
            state.goods_overdue_count += 1
            return f"goods overdue ({state.goods_overdue_count})"
        assert state.order is not None
        arrival = arrival or Arrival()
        refused = self.refusal(state, payload, arrival)
        if refused is not None:
            state.record_security_event(arrival.sender.party, refused, arrival.at)
            return "ignored a goods receipt for another PO"
        if payload.receipt_id in state.receipts:
            return f"receipt {payload.receipt_id} already booked"
        state.receipts.append(payload.receipt_id)
        state.received_quantity += payload.quantity
        # When it reached the SKU's address (our own stamp), else when the run took it up.
        state.last_receipt_at = arrival.at if arrival is not None and arrival.at is not None else state.now
        return f"received {payload.quantity} ({state.received_quantity} of {state.order.quantity})"


class CloseResult(BaseModel):
    closed: bool = True


class ClosePurchaseOrder(Call[NoArgs, CloseResult]):
    name = "close_purchase_order"
    description = (
        "Close the purchase order in the ERP once all goods are in (or short-close it when some "
        "goods came and the rest is long overdue)."
    )
    Args = NoArgs
    Result = CloseResult

    def allowed(self, state: State) -> bool:
        short_close = state.received_quantity > 0 and state.goods_overdue_count > MAX_GOODS_OVERDUE
        return order_open(state) and (state.all_goods_in or short_close)

    async def execute(self, state: State, args: NoArgs, world: World) -> CloseResult:
        assert state.order is not None
        await world.erp.close_purchase_order(
            PurchaseOrderClosure(
                sku=state.sku, po_number=state.order.po_number, received_quantity=state.received_quantity
            )
        )
        return CloseResult()

    def apply(self, state: State, args: NoArgs, result: CloseResult) -> str:
        state.closed = True
        state.last_failure = None
        return f"closed with {state.received_quantity} received"
