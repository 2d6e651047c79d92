"""The manager's approval inbox, read from the agents themselves, and the manager's decision.

Pending approvals come from the runs' own state (the request `request_approval` issued,
with its one-time token), so the inbox is true whatever the manager's mail system says.
A decision goes where every manager decision goes: the SKU's address on Restate's ingress
(`SkuAgent/<SKU>/deliver`, event `approval`), which resolves the run's durable promise.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel

from replenisher.domain.documents import ApprovalDecision
from replenisher.domain.state import State
from replenisher.timeline.restate import OperatorError, RestateClient, valid_sku


class NoPendingApproval(OperatorError):
    pass


class BadDecision(OperatorError):
    pass


class PendingApproval(BaseModel):
    sku: str
    run_id: str
    po_number: str
    supplier: str
    quantity: int
    unit_price: float
    quote_id: str
    quote_valid_until: float
    token: str
    requested_at: float
    decide_by: float
    waiting: bool

    @property
    def total(self) -> float:
        return self.quantity * self.unit_price

    def age(self, now: float) -> float:
        """How long ago the quote behind it was put to the manager."""
        return max(now - self.requested_at, 0.0)

    def quote_expired(self, now: float) -> bool:
        return now >= self.quote_valid_until


class Decided(BaseModel):
    sku: str
    run_id: str
    po_number: str
    token: str
    approved: bool
    up_to: float | None
    routed_to: str | None
    kept: bool


def pending_of(state: State, waiting_tool: str | None) -> PendingApproval | None:
    approval = state.approval
    if approval is None or approval.status != "pending":
        return None
    request = approval.request
    return PendingApproval(
        sku=state.sku,
        run_id=state.run_id,
        po_number=request.po_number,
        supplier=request.supplier,
        quantity=request.quantity,
        unit_price=request.unit_price,
        quote_id=request.quote_id,
        quote_valid_until=request.expires_at,
        token=request.token,
        requested_at=approval.requested_at,
        decide_by=approval.requested_at + state.days(state.waits.approval),
        waiting=waiting_tool == "wait_for_approval",
    )


async def pending_approvals(client: RestateClient) -> list[PendingApproval]:
    """Every run whose approval request is still open, oldest first."""
    records = await client.sku_records()
    active = [r.active.run_id for r in records if r.active is not None]
    states = await client.run_states(active)
    waiting = await client.waiting_runs()
    pending = [
        p for run_id, state in states.items() if (p := pending_of(state, _tool(waiting.get(run_id)))) is not None
    ]
    return sorted(pending, key=lambda p: p.requested_at)


def _tool(waiting: object) -> str | None:
    return getattr(waiting, "tool", None)


async def pending_for(client: RestateClient, sku: str) -> PendingApproval:
    sku = valid_sku(sku)
    record = await client.sku_status(sku)
    if record.active is None:
        raise NoPendingApproval(f"{sku} has no replenishment running, so nothing waits for approval")
    view = await client.run_view(record.active.run_id)
    pending = pending_of(view.state, view.waiting.tool if view.waiting else None) if view.state else None
    if pending is None:
        status = view.state.approval.status if view.state and view.state.approval else "not asked for yet"
        raise NoPendingApproval(f"{record.active.run_id} has no pending approval (approval: {status})")
    return pending


async def decide(
    client: RestateClient,
    sku: str,
    *,
    approved: bool,
    up_to: float | None = None,
    note: str = "",
    by: str = "manager",
    token: str | None = None,
) -> Decided:
    """Approve (up to a price) or reject the SKU's pending PO. `token`, when given, must still be
    the pending request's: a page loaded before a re-quote must not approve the new terms."""
    pending = await pending_for(client, sku)
    if token is not None and token != pending.token:
        raise NoPendingApproval(
            f"that token is not the one of {pending.sku}'s pending approval request (now {pending.po_number} at "
            f"{pending.unit_price:.2f}): it was answered or replaced; look again before deciding"
        )
    if approved:
        up_to = pending.unit_price if up_to is None else up_to
        if up_to < pending.unit_price:
            raise BadDecision(
                f"up to {up_to:.2f} is below the asked {pending.unit_price:.2f}: the agent would take it as a "
                "rejection; reject instead, or approve at least the asked price"
            )
    else:
        up_to = None
    decision = ApprovalDecision(
        po_number=pending.po_number, token=pending.token, approved=approved, up_to=up_to, by=by, note=note
    )
    # One key per token and decision: a double click or a retried request delivers once.
    key = f"manager-{pending.token}-{'approve' if approved else 'reject'}-{up_to}"
    answer = await client.deliver(pending.sku, "approval", decision.model_dump(mode="json"), idempotency_key=key)
    return Decided(
        sku=pending.sku,
        run_id=pending.run_id,
        po_number=pending.po_number,
        token=pending.token,
        approved=approved,
        up_to=up_to,
        routed_to=answer.get("run_id"),
        kept=bool(answer.get("kept")),
    )


async def wait_until_taken(client: RestateClient, decided: Decided, timeout: float = 30.0) -> State | None:  # noqa: ASYNC109
    """Poll the run until it has read the decision; its state then, or None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = await client.run_view(decided.run_id)
        state = view.state
        approval = state.approval if state is not None else None
        if state is not None and (
            state.is_finished
            or approval is None
            or approval.status != "pending"
            or approval.request.token != decided.token
        ):
            return state
        await asyncio.sleep(0.2)
    return None
