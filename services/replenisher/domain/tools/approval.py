"""The manager's approval: request_approval, wait_for_approval.

An approval binds supplier, quantity, unit price, quote and expiry of one PO, and comes
only through the manager's channel carrying the one-time token issued with the request.
Anything else is refused and recorded as a security event. A wait that times out fails
closed: nothing is ordered.
"""

from __future__ import annotations

import secrets
import time

from pydantic import BaseModel

from replenisher.domain.documents import ApprovalDecision, ApprovalRequest, Arrival
from replenisher.domain.ports import World
from replenisher.domain.state import Approval, State
from replenisher.domain.tools.base import Call, NoArgs, Wait
from replenisher.domain.tools.limits import MAX_APPROVAL_ROUNDS
from replenisher.domain.tools.quoting import drafted_quote_expired, open_for_buying

APPROVAL_CHANNELS = frozenset({"manager", "operator"})
"""Who may carry the manager's decision: the manager's own system through the inbound
endpoint, or an operator tool (CLI, console) on the internal ingress. Both still need the token."""


def same_token(given: str, issued: str) -> bool:
    """Constant-time, and for any string: `compare_digest` refuses non-ASCII `str`, bytes it takes."""
    return secrets.compare_digest(given.encode("utf-8", "surrogatepass"), issued.encode("utf-8", "surrogatepass"))


class ApprovalRequested(BaseModel):
    request: ApprovalRequest
    requested_at: float


class RequestApproval(Call[NoArgs, ApprovalRequested]):
    name = "request_approval"
    description = "Send the drafted purchase order to the manager for price approval (only while its quote is valid)."
    Args = NoArgs
    Result = ApprovalRequested

    def allowed(self, state: State) -> bool:
        return (
            open_for_buying(state)
            and state.po is not None
            and state.approval is None
            and not drafted_quote_expired(state)
            and state.approval_rounds < MAX_APPROVAL_ROUNDS
        )

    async def execute(self, state: State, args: NoArgs, world: World) -> ApprovalRequested:
        assert state.po is not None and state.approval_token
        quote = next((q for q in state.quotes if q.quote_id == state.po.quote_id), None)
        now = time.time()
        request = ApprovalRequest(
            po_number=state.po.po_number,
            sku=state.sku,
            supplier=state.po.supplier,
            quantity=state.po.quantity,
            unit_price=state.po.unit_price,
            quote_id=state.po.quote_id,
            expires_at=quote.valid_until if quote else now,
            token=state.approval_token or "",
            run_id=state.run_id,
        )
        await world.manager.request_approval(request)
        return ApprovalRequested(request=request, requested_at=now)

    def apply(self, state: State, args: NoArgs, result: ApprovalRequested) -> str:
        state.approval = Approval(request=result.request, requested_at=result.requested_at)
        state.approval_rounds += 1
        state.last_failure = None
        return f"asked the manager to approve {result.request.po_number} at {result.request.unit_price:.2f}"


class WaitForApproval(Wait[ApprovalDecision]):
    name = "wait_for_approval"
    description = "Wait for the manager's decision on the price, until the approval deadline."
    event = "approval"
    Payload = ApprovalDecision

    def allowed(self, state: State) -> bool:
        return open_for_buying(state) and state.approval is not None and state.approval.status == "pending"

    def deadline(self, state: State) -> float:
        assert state.approval is not None
        return state.after(state.approval.requested_at, state.waits.approval)

    def refusal(self, state: State, payload: ApprovalDecision, arrival: Arrival) -> str | None:
        assert state.approval is not None
        request = state.approval.request
        party = arrival.sender.party
        if party not in APPROVAL_CHANNELS:
            return f"approval refused: sent by {party!r}, not through the manager's channel (by {payload.by!r})"
        if payload.po_number != request.po_number or not same_token(payload.token, request.token):
            return f"approval refused: token or PO does not match {request.po_number} (by {payload.by!r})"
        return None

    def apply(self, state: State, payload: ApprovalDecision | None, arrival: Arrival | None = None) -> str:
        approval = state.approval
        assert approval is not None
        if payload is None:
            approval.status = "timed_out"
            return "no decision in time: nothing will be ordered on this request"
        arrival = arrival or Arrival()
        refused = self.refusal(state, payload, arrival)
        if refused is not None:
            state.record_security_event(refused)
            return "refused an approval without the matching one-time token"
        request = approval.request
        approval.decided_by = payload.by
        approval.note = payload.note
        approval.decided_at = arrival.at
        approval.channel = arrival.sender.party
        if not payload.approved:
            approval.status = "rejected"
            state.rejected = True
            return f"the manager rejected {request.po_number}"
        up_to = payload.up_to if payload.up_to is not None else request.unit_price
        if up_to < request.unit_price:
            approval.status = "rejected"
            state.rejected = True
            return f"approved only up to {up_to:.2f}, below the price {request.unit_price:.2f}"
        approval.status = "approved"
        approval.approved_up_to = up_to
        return f"approved up to {up_to:.2f}"
