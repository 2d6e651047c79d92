"""The manager's decision on a SKU's pending PO: approve (up to a price) or reject.

A decision goes where every manager decision goes: the SKU's address on Restate's ingress
(`SkuAgent/<SKU>/deliver`, event `approval`), which resolves the run's durable promise.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time

from pydantic import BaseModel, Field

from replenisher.domain.documents import ApprovalDecision
from replenisher.domain.state import State
from replenisher.domain.tools.limits import MAX_APPROVAL_ROUNDS
from replenisher.operations.inbox import ManagerInbox, NoPendingApproval, pending_for
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.restate.ingress import Accepted
from replenisher.timeline.format import clock


class BadDecision(OperatorError):
    pass


FRESH_QUOTES_NOTE = "the quote had expired: get fresh quotes"


class Decided(BaseModel):
    sku: str
    run_id: str
    po_number: str
    token: str
    requested_at: float
    approved: bool
    up_to: float | None
    routed_to: str | None
    kept: bool
    accepted_as: str | None = Field(
        default=None, description="the service is down: the invocation Restate holds, to run when it is back"
    )
    service_down_since: float | None = None
    fresh_quotes: bool = Field(default=False, description="approved on an expired quote: the run re-quotes")
    person: str | None = Field(default=None, description="the person of the authority matrix the decision is for")
    refusals_before: int = Field(default=0, description="the run's security log total before it was sent")

    @property
    def verdict(self) -> str:
        if self.fresh_quotes:
            return "sent back for fresh quotes (its quote had expired: nothing is ordered on it)"
        return f"approved up to {self.up_to:.2f}" if self.approved and self.up_to is not None else "rejected"

    def accepted_line(self) -> str:
        """What to say when the service is down: Restate holds the decision, nothing failed."""
        since = f" since {clock(self.service_down_since)}" if self.service_down_since else ""
        ident = f" (invocation {self.accepted_as})" if self.accepted_as else ""
        return (
            f"{self.po_number} {self.verdict}: Restate accepted the decision{ident}. The replenisher service is "
            f"down{since}; {self.run_id} will read the decision when the service is back."
        )


async def decide(
    client: RestateClient,
    inbox: ManagerInbox,
    sku: str,
    *,
    approved: bool,
    up_to: float | None = None,
    note: str = "",
    by: str = "manager",
    token: str | None = None,
    person: str | None = None,
    credential: str | None = None,
    now: float,
) -> Decided:
    """Approve (up to a price) or reject the SKU's pending PO. `token`, when given, must be the
    pending request's: a page or a `status` read before a re-quote must not approve new terms.
    `person`: the person of the authority matrix it is for, sent with the digest of the PO as the
    run's view shows it (a run under the matrix counts only such decisions, checked against it)."""
    pending = await pending_for(client, inbox, sku, token)
    if token is not None and token != pending.token:
        raise NoPendingApproval(
            f"that token is not the one of {pending.sku}'s pending approval request (now {pending.po_number} at "
            f"{pending.unit_price:.2f}): it was answered or replaced; look again before deciding"
        )
    # An approval of an expired quote orders nothing: the run's `place_order` refuses it, and the
    # run gets fresh quotes and asks again. That is the manager's only way to new terms: the
    # run otherwise waits out the approval window on a request nothing can be ordered on.
    if approved and up_to is not None:
        if not math.isfinite(up_to) or up_to <= 0:
            raise BadDecision(f"up to {up_to} is no unit price: approve a price above 0 (at least the asked one)")
        if up_to < pending.unit_price:
            raise BadDecision(
                f"up to {up_to:.2f} is below the asked {pending.unit_price:.2f}: the agent would take it as a "
                "rejection; reject instead, or approve at least the asked price"
            )
    fresh_quotes = approved and pending.quote_expired(now)
    if fresh_quotes:
        if not pending.requote_left:
            raise BadDecision(
                f"{pending.po_number}'s quote expired, and {pending.run_id} has used its {MAX_APPROVAL_ROUNDS} "
                "approval requests (or its rounds of quotes): it cannot get fresh quotes, so approving orders "
                "nothing. Reject it to end the run now (the SKU starts another after its rest: "
                "REPLENISHER_REST_AFTER_FAILURE_DAYS)"
            )
        up_to, note = pending.unit_price, note or FRESH_QUOTES_NOTE
    if approved:
        up_to = pending.unit_price if up_to is None else up_to
    else:
        up_to = None
    decision = ApprovalDecision(
        po_number=pending.po_number,
        token=pending.token,
        approved=approved,
        up_to=up_to,
        by=by,
        note=note,
        person=person,
        digest=(pending.digest or None) if person is not None else None,
        credential=credential,
    )
    sent = Decided(
        sku=pending.sku,
        run_id=pending.run_id,
        po_number=pending.po_number,
        token=pending.token,
        requested_at=pending.requested_at,
        approved=approved,
        up_to=up_to,
        routed_to=None,
        kept=False,
        fresh_quotes=fresh_quotes,
        person=person,
        refusals_before=pending.refusals_seen,
    )
    # One key per token and decision (and person: two people sign one request): a double click or a
    # retried request delivers once.
    key = f"manager-{pending.token}-{'approve' if approved else 'reject'}-{up_to}"
    key += f"-{person}" if person is not None else ""
    # And per token of theirs: sent again with a new one (the first had expired), it is a new delivery.
    key += f"-{hashlib.sha256(credential.encode()).hexdigest()[:16]}" if credential else ""
    try:
        answer = await client.deliver(pending.sku, "approval", decision.model_dump(mode="json"), idempotency_key=key)
    except Accepted as e:
        return sent.model_copy(update={"accepted_as": e.invocation_id or "", "service_down_since": e.health.since})
    return sent.model_copy(update={"routed_to": answer.get("run_id"), "kept": bool(answer.get("kept"))})


async def wait_until_taken(client: RestateClient, decided: Decided, timeout: float = 30.0) -> State | None:  # noqa: ASYNC109
    """Poll the run until it has read the decision; its state then, or None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = (await client.run_view(decided.run_id)).state
        approval = state.approval if state is not None else None
        if state is not None and (
            state.is_finished
            or approval is None
            or approval.status != "pending"
            or approval.requested_at != decided.requested_at
            # A person's decision the run took in and went on waiting: signed, or refused.
            or (decided.person is not None and decided.person in {s.person for s in approval.signatures})
            or (decided.person is not None and state.security.total > decided.refusals_before)
        ):
            return state
        await asyncio.sleep(0.2)
    return None
