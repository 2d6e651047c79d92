"""Committing money: place_order, check_order_status, cancel_purchase_order.

The PO number is the idempotency key: however often place_order is retried or replayed,
the supplier holds one order for it. If the supplier may have taken the order but we
never saw the answer, the order is "unknown" (never "failed") until check_order_status
finds out by PO number. The same goes for an answer whose terms differ from the PO: it is
recorded, never adopted, and the order stays unknown until the supplier confirms the PO.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from replenisher.domain.documents import CancelRequest, OrderAck
from replenisher.domain.ports import MALFORMED, World
from replenisher.domain.security_log import UNKNOWN_SOURCE, supplier_source
from replenisher.domain.state import State
from replenisher.domain.tools.base import Call, NoArgs
from replenisher.domain.tools.limits import MAX_CHASES, MAX_GOODS_OVERDUE, MAX_STATUS_CHECKS
from replenisher.domain.tools.vetting import ack_mismatches


def refused_ack(state: State, ack: OrderAck, what: str) -> bool:
    """True (and recorded) when a supplier's acknowledgement differs from our PO in its terms."""
    assert state.po is not None
    wrong = ack_mismatches(state.po, ack)
    if wrong:
        state.record_security_event(
            supplier_source(state.po.supplier),
            f"the supplier's {what} {state.po.po_number} differs from the PO: {'; '.join(wrong)}; not adopted"[:300],
        )
    return bool(wrong)


def supplier_of_po(state: State) -> str:
    """The source of an event about the answer of the PO's supplier."""
    return supplier_source(state.po.supplier) if state.po is not None else UNKNOWN_SOURCE


class PlaceOrderResult(BaseModel):
    status: Literal["placed", "price_above_approval", "approval_expired"]
    ack: OrderAck | None = None
    live_price: float | None = None
    at: float


class PlaceOrder(Call[NoArgs, PlaceOrderResult]):
    name = "place_order"
    description = (
        "Send the approved purchase order to the supplier. Re-checks the supplier's live price "
        "first and refuses if it is above the approved price or the approval has expired "
        "(unless the supplier already holds the order for this PO)."
    )
    Args = NoArgs
    Result = PlaceOrderResult

    def allowed(self, state: State) -> bool:
        approval = state.approval
        return (
            not state.is_finished
            and state.order_status in ("none", "not_found")
            and state.po is not None
            and approval is not None
            and approval.status == "approved"
            and approval.request.po_number == state.po.po_number
            and approval.approved_up_to is not None
            and state.po.unit_price <= approval.approved_up_to
        )

    async def execute(self, state: State, args: NoArgs, world: World) -> PlaceOrderResult:
        po, approval = state.po, state.approval
        assert po is not None and approval is not None and approval.approved_up_to is not None
        now = world.clock()
        # An earlier attempt of this step may have sent the order and lost the answer. The
        # gates below are for sending an order, not for one the supplier already holds: a
        # refusal now would record "not ordered" while the order exists.
        existing = await world.suppliers.find_order(po.supplier, po.po_number)
        if existing is not None:
            return PlaceOrderResult(status="placed", ack=existing, at=now)
        if now > approval.request.expires_at:
            return PlaceOrderResult(status="approval_expired", at=now)
        live = await world.suppliers.live_price(po.supplier, po.sku)
        if live.unit_price > approval.approved_up_to:
            return PlaceOrderResult(status="price_above_approval", live_price=live.unit_price, at=now)
        ack = await world.suppliers.place_order(po)
        return PlaceOrderResult(status="placed", ack=ack, at=now)

    def apply(self, state: State, args: NoArgs, result: PlaceOrderResult) -> str:
        if result.status == "placed":
            assert result.ack is not None and state.po is not None
            if refused_ack(state, result.ack, "confirmation"):
                # The supplier took something, but not what we ordered, or says so: nothing we
                # hold is overwritten, and only asking it by PO number can settle what it holds.
                state.order_status = "unknown"
                state.last_failure = (
                    f"the supplier's confirmation of {state.po.po_number} differs from the PO; "
                    "the order is unknown until the supplier confirms the PO's terms"
                )
                return f"confirmation of {state.po.po_number} refused: it differs from the PO"
            state.order = result.ack
            state.order_status = "placed"
            state.ordered_at = result.at
            state.last_failure = None
            return f"order {result.ack.order_id} placed for {result.ack.po_number}"
        # The approval no longer covers what the supplier would charge: it is spent, and
        # the quote it rested on is off the table. The model must re-quote or re-approve.
        state.price_refusals += 1
        refused_quote = state.po.quote_id if state.po else None
        state.quotes = [q for q in state.quotes if q.quote_id != refused_quote]
        state.po = None
        state.approval = None
        if result.status == "approval_expired":
            state.last_failure = "the approval expired with its quote before the order was placed"
        else:
            state.last_failure = f"live price {result.live_price:.2f} is above the approved price"
        return f"refused to order: {state.last_failure}"

    def apply_failure(self, state: State, args: NoArgs, error: str) -> str:
        # The supplier may have taken the order before the line went dead.
        state.order_status = "unknown"
        state.ordered_at = state.ordered_at or state.now
        if MALFORMED in error:
            state.record_security_event(
                supplier_of_po(state), f"place_order: the supplier's answer broke the contract: {error}"
            )
        state.last_failure = f"place_order got no answer ({error}); the order may exist"
        return state.last_failure


class OrderStatusResult(BaseModel):
    found: bool
    ack: OrderAck | None = None
    at: float


class CheckOrderStatus(Call[NoArgs, OrderStatusResult]):
    name = "check_order_status"
    description = "Ask the supplier whether it holds an order for our PO number (after an unseen outcome)."
    Args = NoArgs
    Result = OrderStatusResult

    def allowed(self, state: State) -> bool:
        return not state.is_finished and state.order_status == "unknown" and state.status_checks < MAX_STATUS_CHECKS

    def delay_days(self, state: State) -> float:
        # Straight away the first time; after a failed check give the supplier a day.
        # The first check at once; after failures, back off: 1, 2, 4, 8, ... days.
        if state.failed_status_checks == 0:
            return 0.0
        return state.waits.status_recheck * 2 ** min(state.failed_status_checks - 1, 4)

    async def execute(self, state: State, args: NoArgs, world: World) -> OrderStatusResult:
        assert state.po is not None
        ack = await world.suppliers.find_order(state.po.supplier, state.po.po_number)
        return OrderStatusResult(found=ack is not None, ack=ack, at=world.clock())

    def apply(self, state: State, args: NoArgs, result: OrderStatusResult) -> str:
        state.status_checks += 1
        assert state.po is not None
        if result.found and result.ack is not None and refused_ack(state, result.ack, "answer about"):
            # Still unknown: asked again later (backing off), and left for reconciliation once the
            # checks are spent. Never adopted, so never received or cancelled on its word.
            state.failed_status_checks += 1
            state.last_failure = f"the supplier's answer about {state.po.po_number} differs from the PO"
            return f"the supplier's answer about {state.po.po_number} differs from the PO: still unknown"
        state.failed_status_checks = 0
        state.last_failure = None
        if result.found:
            assert result.ack is not None
            state.order = result.ack
            state.order_status = "placed"
            # Not later than we asked: a time in the future would push every deadline out.
            state.ordered_at = state.ordered_at or min(result.ack.accepted_at, result.at)
            return f"the supplier holds {result.ack.po_number} as order {result.ack.order_id}"
        # No order exists: placing again with the same PO number is safe.
        state.order_status = "not_found"
        return "the supplier holds no order for our PO: it can be placed again"

    def apply_failure(self, state: State, args: NoArgs, error: str) -> str:
        state.status_checks += 1
        state.failed_status_checks += 1
        if MALFORMED in error:
            state.record_security_event(
                supplier_of_po(state), f"check_order_status: the supplier's answer broke the contract: {error}"
            )
        state.last_failure = f"check_order_status failed: {error}"
        return state.last_failure


class CancelArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1, max_length=500, description="why the purchase order is cancelled")


class CancelResult(BaseModel):
    told_supplier: bool


class CancelPurchaseOrder(Call[CancelArgs, CancelResult]):
    name = "cancel_purchase_order"
    description = (
        "Cancel the purchase order. Before it is placed: at any time. Once the supplier holds it: only "
        "after the supplier failed (goods long overdue, or no word after every chase). Never once goods arrived."
    )
    Args = CancelArgs
    Result = CancelResult

    def allowed(self, state: State) -> bool:
        if state.is_finished or state.po is None or state.received_quantity > 0:
            return False
        if state.order_status in ("none", "not_found"):
            return True
        # A placed order is money committed with the manager's approval: whoever is deciding
        # (a persuaded model included) may walk away from it only once the supplier has failed.
        silent = state.supplier_overdue and state.chases >= MAX_CHASES and state.reply is None
        return state.order_status == "placed" and (state.goods_overdue_count > MAX_GOODS_OVERDUE or silent)

    async def execute(self, state: State, args: CancelArgs, world: World) -> CancelResult:
        assert state.po is not None
        if not state.order_may_exist:
            return CancelResult(told_supplier=False)
        await world.suppliers.cancel(state.po.supplier, state.po.po_number, CancelRequest(reason=args.reason))
        return CancelResult(told_supplier=True)

    def apply(self, state: State, args: CancelArgs, result: CancelResult) -> str:
        state.cancelled = True
        state.cancel_reason = args.reason
        if state.order_may_exist:
            state.order_status = "cancelled"
        return f"cancelled: {args.reason}"
