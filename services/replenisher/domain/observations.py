"""What a finished run tells the SKU's memory, read off its final state."""

from __future__ import annotations

from replenisher.domain.memory import OrderSeen, QuoteSeen, RunObservations, claims_to_promises, discount_request_note
from replenisher.domain.state import State


def observe(state: State, ended_at: float) -> RunObservations:
    order = state.order
    seen_order: OrderSeen | None = None
    if order is not None and state.ordered_at is not None:
        quoted = state.quoted_lead_days
        ended = (
            "received"
            if state.closed
            else "cancelled"
            if state.cancelled
            else "unknown"
            if state.order_status == "unknown"
            else "open"
        )
        seen_order = OrderSeen(
            supplier=order.supplier,
            unit_price=order.unit_price,
            quantity=order.quantity,
            ordered_at=state.ordered_at,
            quoted_lead_days=quoted,
            confirmed=bool(state.reply and state.reply.confirmed),
            chases=state.chases,
            received=state.received_quantity,
            delivered_all=state.all_goods_in,
            goods_overdue=state.goods_overdue_count,
            lead_days_actual=lead_days(state),
            ended=ended,
            cancelled_for_lateness=state.cancelled and state.goods_overdue_count > 0,
        )
    promises = []
    # A reply carried over from the run before was learnt from by that run.
    carried_reply = state.carried is not None and state.carried.reply is not None
    if state.reply is not None and order is not None and not carried_reply:
        source = f"reply about {order.po_number} ({state.run_id})"
        promises = claims_to_promises(
            state.reply.promises, order.supplier, state.reply.received_at, source, order.unit_price
        )
    asked = (
        [s for s in state.suppliers if discount_request_note(state.memory, s, state.started_at)]
        if state.quote_rounds
        else []
    )
    return RunObservations(
        run_id=state.run_id,
        started_at=state.started_at,
        ended_at=ended_at,
        day_seconds=state.day_seconds,
        quotes=[QuoteSeen(supplier=q.supplier, unit_price=q.unit_price, lead_days=q.lead_days) for q in state.quotes],
        order=seen_order,
        promises=promises,
        asked_discount=asked,
    )


def lead_days(state: State) -> float | None:
    """From our sending the order to the last receipt reaching the run: both read off our own clock."""
    if not state.all_goods_in or state.ordered_at is None or state.last_receipt_at is None:
        return None
    return max(state.last_receipt_at - state.ordered_at, 0.0) / state.day_seconds
