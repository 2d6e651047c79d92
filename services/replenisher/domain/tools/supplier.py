"""Following up with the supplier: wait_for_supplier_reply, read_supplier_reply, chase_supplier.

A supplier's email is untrusted data. It can confirm facts about the order; it cannot
approve, change a price limit, or enable a tool. A delivery date it states beyond the bound
(`vetting.delivery_bound_days`) makes the run chase, not wait that long.
"""

from __future__ import annotations

from pydantic import BaseModel

from replenisher.domain.arrival import Arrival
from replenisher.domain.documents import ChaseRequest, SupplierReply
from replenisher.domain.ports import World
from replenisher.domain.security_log import UNKNOWN_SOURCE, supplier_source
from replenisher.domain.state import ReplyFacts, State
from replenisher.domain.tools.base import Call, NoArgs, Wait
from replenisher.domain.tools.limits import MAX_CHASES
from replenisher.domain.tools.vetting import delivery_bound_days


def order_open(state: State) -> bool:
    return not state.is_finished and state.order_status == "placed"


def chased_since_reply(state: State) -> bool:
    """The reply read so far did not settle things (see `ReadSupplierReply`) and we chased since."""
    return (
        state.reply is not None and state.last_chase_at is not None and state.last_chase_at >= state.reply.received_at
    )


class WaitForSupplierReply(Wait[SupplierReply]):
    name = "wait_for_supplier_reply"
    description = "Wait for the supplier to confirm the order, until the reply is overdue."
    event = "supplier-reply"
    Payload = SupplierReply

    def allowed(self, state: State) -> bool:
        return (
            order_open(state)
            and (state.reply is None or state.reply_unsettled)
            and state.unread_reply is None
            and not state.supplier_overdue
            and not state.all_goods_in
        )

    def deadline(self, state: State) -> float:
        if state.last_chase_at is not None:
            return state.after(state.last_chase_at, state.waits.reply_after_chase)
        assert state.ordered_at is not None
        return state.after(state.ordered_at, state.waits.supplier_reply)

    def refusal(self, state: State, payload: SupplierReply, arrival: Arrival) -> str | None:
        assert state.order is not None
        if payload.po_number != state.order.po_number or payload.supplier != state.order.supplier:
            return f"reply from {payload.supplier!r} about {payload.po_number!r} does not match our order"
        sender = arrival.sender
        if not sender.is_operator and sender.supplier != state.order.supplier:
            return (
                f"reply about {payload.po_number!r} sent by {sender.party!r}, "
                f"not by the order's supplier {state.order.supplier!r}"
            )
        return None

    def apply(self, state: State, payload: SupplierReply | None, arrival: Arrival | None = None) -> str:
        if payload is None:
            state.supplier_overdue = True
            return "the supplier has not replied in time"
        arrival = arrival or Arrival()
        refused = self.refusal(state, payload, arrival)
        if refused is not None:
            state.record_security_event(arrival.sender.party, refused, arrival.at)
            return "ignored a reply that is not about our order"
        state.unread_reply = payload
        return "the supplier replied"


class ReadSupplierReply(Call[NoArgs, ReplyFacts]):
    name = "read_supplier_reply"
    description = "Read the supplier's reply and pull out the facts it states (confirmation, delivery time, price)."
    Args = NoArgs
    Result = ReplyFacts

    def allowed(self, state: State) -> bool:
        return state.unread_reply is not None and not state.is_finished

    async def execute(self, state: State, args: NoArgs, world: World) -> ReplyFacts:
        assert state.unread_reply is not None
        # The reader (patterns, or a model in a tool-less call) returns typed facts only.
        return await world.reader.read(state, world.clock())

    def apply(self, state: State, args: NoArgs, result: ReplyFacts) -> str:
        state.reply = result
        state.unread_reply = None
        state.supplier_overdue = False
        state.last_failure = None
        if result.usage is not None:
            state.decider_cost.charge(result.usage, result.usd)
        # What the reply states is about the order's supplier: only its reply is read.
        source = supplier_source(state.order.supplier) if state.order else UNKNOWN_SOURCE
        for note in result.notes:
            state.record_security_event(source, f"reading the reply: {note}")
        if state.order and result.quantity is not None and result.quantity != state.order.quantity:
            state.record_security_event(
                source, f"reply states quantity {result.quantity}, not the ordered {state.order.quantity}: ignored"
            )
        if state.order and result.unit_price is not None and result.unit_price > state.order.unit_price:
            # A price in an email changes nothing: it is noted for the people, not acted on.
            state.record_security_event(
                source, f"reply quotes {result.unit_price:.2f}, above the ordered {state.order.unit_price:.2f}: ignored"
            )
        bound = delivery_bound_days(state)
        beyond = result.delivery_days is not None and result.delivery_days > bound
        if beyond:
            # A date that far off is not the terms we ordered on: follow up (chase while chases
            # are left) and never wait longer than the bound (see `WaitForGoods.deadline`).
            state.record_security_event(
                source,
                f"reply states delivery in {result.delivery_days:g} days, beyond the bound of {bound:g}: "
                "followed up, not waited for",
            )
        state.reply_unsettled = beyond and state.chases < MAX_CHASES
        state.supplier_overdue = state.reply_unsettled
        when = f", delivery in {result.delivery_days:g} days" if result.delivery_days is not None else ""
        return ("confirmed" if result.confirmed else "not a confirmation") + when


class ChaseResult(BaseModel):
    at: float


class ChaseSupplier(Call[NoArgs, ChaseResult]):
    name = "chase_supplier"
    description = f"Remind the supplier about the order after it went quiet (at most {MAX_CHASES} times)."
    Args = NoArgs
    Result = ChaseResult

    def allowed(self, state: State) -> bool:
        return order_open(state) and state.supplier_overdue and state.chases < MAX_CHASES

    async def execute(self, state: State, args: NoArgs, world: World) -> ChaseResult:
        assert state.order is not None
        message = f"Please confirm purchase order {state.order.po_number} ({state.order.quantity} x {state.sku})."
        key = f"{state.order.po_number}-chase-{state.chases + 1}"
        await world.suppliers.chase(state.order.supplier, state.order.po_number, ChaseRequest(message=message), key)
        return ChaseResult(at=world.clock())

    def apply(self, state: State, args: NoArgs, result: ChaseResult) -> str:
        state.chases += 1
        state.last_chase_at = result.at
        state.supplier_overdue = False
        state.last_failure = None
        return f"chased the supplier (chase {state.chases} of {MAX_CHASES})"
