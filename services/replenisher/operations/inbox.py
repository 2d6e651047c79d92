"""The manager's approval inbox: the requests that still wait for a decision (`decide` gives one).

An approval request, with its one-time token, goes to one place only: the manager's inbox
(`GET <inbox>/manager/approval-requests`); a run's public view withholds the token, since
whoever holds it answers for the manager. So the inbox lists what the manager's inbox holds,
checked against the runs themselves: a request shows only while its run still waits for a
decision on that PO (a decision given elsewhere, a timeout or a re-quote retire it).
"""

from __future__ import annotations

import asyncio

import httpx
from pydantic import BaseModel, Field, ValidationError

from replenisher.domain.calendar import CalendarClock
from replenisher.domain.documents import ApprovalRequest, Quote
from replenisher.domain.escalation import asked_in
from replenisher.domain.security import without_secrets
from replenisher.domain.state import State
from replenisher.domain.tools.approval import approval_digest
from replenisher.domain.tools.quoting import rounds_left_to_requote
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError, Refused, Unreachable
from replenisher.operations.restate.http import valid_sku
from replenisher.operations.restate.read_models import RunView
from replenisher.timeline.model import decision_from_approval

_TIMEOUT = httpx.Timeout(15.0, connect=3.0)


class NoPendingApproval(OperatorError):
    pass


class InboxEntry(BaseModel):
    request: ApprovalRequest
    received_at: float
    status: str


class ManagerInbox:
    """The manager's inbox API (the simulated world's, or a real system behind the same API)."""

    def __init__(self, url: str, client: httpx.AsyncClient | None = None) -> None:
        self.url = url.rstrip("/")
        self._client = client or httpx.AsyncClient(timeout=_TIMEOUT)
        self._owns_client = client is None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def budget(self) -> float | None:
        """The manager's budget: the highest unit price the inbox's policy approves, if it has one."""
        try:
            response = await self._client.get(f"{self.url}/manager/policy")
            value = response.json().get("max_unit_price") if response.is_success else None
        except (httpx.TransportError, ValueError):
            return None
        return float(value) if isinstance(value, int | float) else None

    async def pending(self) -> list[InboxEntry]:
        url = f"{self.url}/manager/approval-requests"
        try:
            response = await self._client.get(url, params={"status": "pending"})
        except httpx.TransportError as e:
            raise Unreachable(f"cannot reach the manager's inbox at {self.url} ({type(e).__name__})") from e
        if response.is_error:
            raise Refused(response.status_code, f"the manager's inbox answered: {response.text[:200]}")
        try:
            return [InboxEntry.model_validate(e) for e in response.json()["requests"]]
        except (ValueError, KeyError, ValidationError) as e:
            raise Refused(502, f"the manager's inbox sent something unexpected: {e}") from e


class PastDecision(BaseModel):
    """How one of the SKU's earlier runs ended, and what the manager decided on it."""

    run_id: str
    outcome: str
    detail: str
    unit_price: float | None = Field(description="the price ordered at, else the price asked")
    decision: str | None = None
    ended_at: float


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
    calendar: CalendarClock | None = Field(default=None, description="the run's calendar, to show decide_by as a date")
    waiting: bool
    on_hand: int | None = None
    safety_stock: int | None = None
    target_stock: int | None = None
    quotes: list[Quote] = Field(default_factory=list, description="every quote of the round")
    past: list[PastDecision] = Field(default_factory=list, description="the SKU's last runs, newest first")
    approver: str = "manager"
    escalated: bool = False
    reminded: list[float] = Field(default_factory=list)
    requote_left: bool = Field(
        default=True, description="the run may still get fresh quotes and ask again (it has rounds left)"
    )
    digest: str = Field(default="", description="the digest of the PO's terms an approval under the matrix carries")
    signed: list[str] = Field(default_factory=list, description="who has signed it already (the authority matrix)")
    refusals_seen: int = Field(default=0, description="the run's security log total as read: a refusal adds one")

    @property
    def total(self) -> float:
        return self.quantity * self.unit_price

    @property
    def asked(self) -> list[str]:
        """The people the request asks by name (under the authority matrix, "a, b" when it needs two)."""
        return asked_in(self.approver)

    def age(self, now: float) -> float:
        """How long ago the quote behind it was put to the manager."""
        return max(now - self.requested_at, 0.0)

    def quote_expired(self, now: float) -> bool:
        return now >= self.quote_valid_until


def still_pending(entry: InboxEntry, view: RunView) -> PendingApproval | None:
    """The inbox's request, if its run still waits for a decision on exactly these terms."""
    state: State | None = view.state
    approval = state.approval if state else None
    request = entry.request
    if state is None or state.is_finished or approval is None or approval.status != "pending":
        return None
    asked = approval.request
    if (asked.po_number, asked.quantity, asked.unit_price, asked.supplier) != (
        request.po_number,
        request.quantity,
        request.unit_price,
        request.supplier,
    ):
        return None
    return PendingApproval(
        sku=request.sku,
        run_id=request.run_id,
        po_number=request.po_number,
        supplier=request.supplier,
        quantity=request.quantity,
        unit_price=request.unit_price,
        quote_id=request.quote_id,
        quote_valid_until=request.expires_at,
        token=request.token,
        requested_at=approval.requested_at,
        decide_by=state.after(approval.requested_at, state.waits.approval),
        calendar=state.clock,
        approver=approval.approver,
        escalated=approval.escalated_at is not None,
        reminded=list(approval.reminded),
        waiting=view.waiting is not None and view.waiting.tool == "wait_for_approval",
        on_hand=state.on_hand,
        safety_stock=state.safety_stock,
        target_stock=state.target_stock,
        quotes=sorted(state.quotes, key=lambda q: q.unit_price),
        requote_left=rounds_left_to_requote(state),
        digest=approval_digest(state),
        signed=[s.person for s in approval.signatures],
        refusals_seen=state.security.total,
    )


async def pending_approvals(client: RestateClient, inbox: ManagerInbox) -> list[PendingApproval]:
    """Every request in the manager's inbox whose run still waits for it, the nearest deadline
    first. The runs are read with two SQL queries over Restate's storage, however many
    requests: no invocation per request, and it works while the service is down."""
    entries = await inbox.pending()
    run_ids = sorted({e.request.run_id for e in entries})
    states, waiting = await asyncio.gather(client.run_states(run_ids), client.waiting_runs())
    views = {
        r: RunView(state=without_secrets(states[r]) if r in states else None, waiting=waiting.get(r)) for r in run_ids
    }
    pending = [p for e in entries if (p := still_pending(e, views[e.request.run_id])) is not None]
    await _add_past(client, pending)
    return sorted(pending, key=lambda p: (p.decide_by, p.requested_at))


PAST_SHOWN = 3


async def _add_past(client: RestateClient, pending: list[PendingApproval]) -> None:
    """Each SKU's last runs and decisions: two more queries, for all the SKUs at once."""
    if not pending:
        return
    records = {r.sku: r for r in await client.sku_records_of(sorted({p.sku for p in pending}))}
    recent = {sku: r.outcomes[-PAST_SHOWN:][::-1] for sku, r in records.items()}
    states = await client.run_states([o.run_id for outcomes in recent.values() for o in outcomes])
    for p in pending:
        p.past = []
        for o in recent.get(p.sku, []):
            st = states.get(o.run_id)
            decided = decision_from_approval(st.approval) if st is not None else None
            price = o.unit_price if o.unit_price is not None else (o.po.unit_price if o.po else None)
            p.past.append(
                PastDecision(
                    run_id=o.run_id,
                    outcome=o.outcome,
                    detail=o.detail,
                    unit_price=price,
                    decision=decided.line() if decided else None,
                    ended_at=o.ended_at,
                )
            )


async def pending_for(
    client: RestateClient, inbox: ManagerInbox, sku: str, token: str | None = None
) -> PendingApproval:
    """The SKU's pending approval with its token: from the manager's inbox, or `token` when the
    inbox cannot be reached (the run checks the token itself)."""
    sku = valid_sku(sku)
    record = await client.sku_status(sku)
    if record.active is None:
        raise NoPendingApproval(f"{sku} has no replenishment running, so nothing waits for approval")
    run_id = record.active.run_id
    view = await client.run_view(run_id)
    approval = view.state.approval if view.state else None
    if approval is None or approval.status != "pending":
        raise NoPendingApproval(
            f"{run_id} has no pending approval (approval: {approval.status if approval else 'not asked for yet'})"
        )
    try:
        entries = [e for e in await inbox.pending() if e.request.run_id == run_id]
    except Unreachable:
        if token is None:
            raise
        entries = [InboxEntry(request=approval.request.model_copy(update={"token": token}), received_at=0, status="")]
    found = [p for e in entries if (p := still_pending(e, view)) is not None]
    if not found:
        raise NoPendingApproval(f"the manager's inbox holds no open request for {approval.request.po_number}")
    return found[-1]
