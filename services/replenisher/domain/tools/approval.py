"""The manager's approval: request_approval, wait_for_approval.

An approval binds supplier, quantity, unit price, quote and expiry of one PO, and comes
only through the manager's channel carrying the one-time token issued with the request.
Anything else is refused and recorded as a security event.

While the run waits, the approver is reminded at the policy's points of the window. When
the window lapses the same wait escalates, once, to the backup approver: the same PO with a
fresh window and a fresh one-time token, the first token void from then on. A rule, not a
choice: no decider can skip it. Only when that window lapses too does the wait time out,
and the run fails closed: nothing is ordered.
"""

from __future__ import annotations

import secrets
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from replenisher.domain.arrival import Arrival
from replenisher.domain.authority import Refusal, Signature, Standing, order_digest
from replenisher.domain.documents import (
    ApprovalDecision,
    ApprovalReminder,
    ApprovalRequest,
    new_approval_token,
    without_unset,
)
from replenisher.domain.escalation import PRIMARY_APPROVER, Reminder, ReminderSent, approver_of, asked_in
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


class Escalated(BaseModel):
    request: ApprovalRequest
    at: float


class ApprovalRequested(BaseModel):
    request: ApprovalRequest
    requested_at: float
    unrouted: str | None = Field(
        default=None, description="why the request asks no named person though a matrix is in force"
    )

    @model_serializer(mode="wrap")
    def _as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The run's archive (kept in its journaled state) writes this result again on every replay:
        # a result from before this field must come out byte for byte as it went in.
        return without_unset(handler(self), "unrouted")


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
        now = world.clock()
        total = state.po.quantity * state.po.unit_price
        # Under the matrix, whom to ask is read here, inside the journaled step: a replay asks the same people.
        asked, unrouted = routed(state, world, total, state.po.supplier, now)
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
            approver=approver_of(asked),
        )
        await world.manager.request_approval(request)
        return ApprovalRequested(request=request, requested_at=now, unrouted=unrouted)

    def apply(self, state: State, args: NoArgs, result: ApprovalRequested) -> str:
        request = result.request
        state.approval = Approval(request=request, requested_at=result.requested_at, approver=request.approver)
        state.approval_rounds += 1
        state.last_failure = result.unrouted
        who = "the manager" if request.approver == PRIMARY_APPROVER else request.approver
        return f"asked {who} to approve {request.po_number} at {request.unit_price:.2f}" + (
            f" ({result.unrouted})" if result.unrouted else ""
        )


class WaitForApproval(Wait[ApprovalDecision]):
    name = "wait_for_approval"
    description = "Wait for the manager's decision on the price, until the approval deadline."
    event = "approval"
    Payload = ApprovalDecision
    Escalation = Escalated

    def allowed(self, state: State) -> bool:
        return open_for_buying(state) and state.approval is not None and state.approval.status == "pending"

    def deadline(self, state: State) -> float:
        assert state.approval is not None
        return state.after(state.approval.requested_at, state.waits.approval)

    def reminders(self, state: State) -> list[Reminder]:
        approval = state.approval
        assert approval is not None
        return [
            Reminder(
                point=point,
                at=state.after(approval.requested_at, point * state.waits.approval),
                approver=approval.approver,
                po_number=approval.request.po_number,
            )
            for point in state.approval_policy.reminders
            if point not in approval.reminded
        ]

    async def remind(self, state: State, reminder: Reminder, world: World) -> ReminderSent:
        approval = state.approval
        assert approval is not None
        decide_by = self.deadline(state)
        due = state.clock.due(decide_by, reminder.at)
        text = (
            f"Reminder: purchase order {reminder.po_number} ({approval.request.quantity} x {state.sku} at "
            f"{approval.request.unit_price:.2f} from {approval.request.supplier}) still waits for your decision; "
            f"without one by {due} "
            + ("it goes to the backup approver." if escalates(state) else "nothing will be ordered.")
        )
        await world.manager.remind(
            ApprovalReminder(
                po_number=reminder.po_number,
                sku=state.sku,
                run_id=state.run_id,
                approver=reminder.approver,
                point=reminder.point,
                decide_by=decide_by,
                text=text,
            ),
            reminder.key,
        )
        return ReminderSent(point=reminder.point, at=world.clock())

    def apply_reminder(self, state: State, sent: ReminderSent) -> None:
        assert state.approval is not None
        if sent.point not in state.approval.reminded:
            state.approval.reminded.append(sent.point)
        if not sent.delivered:
            state.last_failure = f"reminder at {round(sent.point * 100)}% not delivered: {sent.error}"

    def refusal(self, state: State, payload: ApprovalDecision, arrival: Arrival) -> str | None:
        assert state.approval is not None
        request = state.approval.request
        party = arrival.sender.party
        # The party is who the door authenticated; `by` is only what the message says of itself.
        if party not in APPROVAL_CHANNELS:
            return f"approval refused: sent by {party!r}, not through the manager's channel (it claims {payload.by!r})"
        if payload.po_number != request.po_number or not same_token(payload.token, request.token):
            return (
                f"approval refused: token or PO does not match {request.po_number} "
                f"(sent by {party!r}, it claims {payload.by!r})"
            )
        return None

    def apply(self, state: State, payload: ApprovalDecision | None, arrival: Arrival | None = None) -> str:
        approval = state.approval
        assert approval is not None
        if payload is None:
            approval.status = "timed_out"
            return f"no decision in time{self._story(approval)}: nothing will be ordered on this request"
        arrival = arrival or Arrival()
        refused = self.refusal(state, payload, arrival)
        if refused is not None:
            state.record_security_event(arrival.sender.party, refused, arrival.at)
            return "refused an approval without the matching one-time token"
        request = approval.request
        if state.people_matrix:
            bound = self._bind(state, approval, payload, arrival)
            if bound is not None:
                return bound
        else:
            approval.decided_by = payload.by
        approval.note = payload.note
        approval.decided_at = arrival.at
        approval.channel = arrival.sender.label
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
        return f"approved up to {up_to:.2f}{self._story(approval)}"

    def still_waiting(self, state: State) -> bool:
        return state.approval is not None and state.approval.status == "pending"

    @staticmethod
    def _bind(state: State, approval: Approval, payload: ApprovalDecision, arrival: Arrival) -> str | None:
        """Under the authority matrix: the person's signature, if their standing allows it. A summary
        when the run goes on waiting (refused, or a first of two signatures); None when the decision
        is taken as before (a rejection by an approver, or the last signature the PO needed)."""
        request = approval.request
        who = payload.person or payload.by
        what = "approval" if payload.approved else "rejection"
        standing = arrival.standing
        signed: tuple[Signature, ...] | Refusal
        if payload.person is None:
            signed = Refusal(reason="it names no person of the authority matrix (replenisher approve --as PERSON)")
        elif standing is None or standing.person != payload.person:
            signed = Refusal(reason=f"no standing was read for {payload.person} from the authority matrix")
        elif not standing.approver:
            signed = standing.authority(float("inf"), request.supplier)
            assert isinstance(signed, Refusal)
        elif not payload.approved:
            signed = tuple(approval.signatures)  # an approver's rejection ends it, as before
        else:
            signed = standing.sign(
                tuple(approval.signatures),
                total=order_total(approval),
                supplier=request.supplier,
                digest=payload.digest,
                expected_digest=approval_digest(state),
                at=arrival.at if arrival.at is not None else state.now,
            )
        if isinstance(signed, Refusal):
            reason = f"{what} by {who} refused for {request.po_number}: {signed.reason}"
            state.record_security_event(arrival.sender.party, reason, arrival.at)
            return reason
        approval.signatures = list(signed)
        approval.decided_by = ", ".join(s.person for s in signed) if payload.approved else who
        if not payload.approved:
            return None
        assert standing is not None
        needed = standing.signatures_needed(order_total(approval))
        approval.still_needed = still_needed(approval, standing) if len(signed) < needed else ""
        if approval.still_needed:
            return f"{who} signed {request.po_number} ({len(signed)} of {needed}): {approval.still_needed}"
        return None

    @staticmethod
    def _story(approval: Approval) -> str:
        """What happened during the wait besides the decision: reminders, an escalation."""
        parts = []
        if approval.reminded:
            parts.append("reminded at " + ", ".join(f"{round(p * 100)}%" for p in approval.reminded))
        if approval.escalated_at is not None:
            parts.append(f"escalated to {approval.approver}")
        return f" ({'; '.join(parts)})" if parts else ""

    def escalation_due(self, state: State) -> bool:
        return escalates(state)

    async def escalate(self, state: State, world: World) -> Escalated:
        approval = state.approval
        assert approval is not None and state.approval_policy.backup_approver is not None
        # Under the matrix: the next people whose limit covers the order, not yet asked; then the backup.
        backup = state.approval_policy.backup_approver
        if state.people_matrix and world.people is not None:
            request, total = approval.request, order_total(approval)
            day = state.clock.local(world.clock()).date()
            skip = frozenset({*asked_in(approval.approver), *(s.person for s in approval.signatures)})
            wanted = max(world.people.signatures_needed(total) - len(approval.signatures), 1)
            nxt = world.people.to_ask(total, request.supplier, day, skip=skip, wanted=wanted)
            backup = approver_of(nxt) if nxt else backup
        # Drawn inside the journaled step: a replay reads the same token back, never a new one.
        request = approval.request.model_copy(update={"token": new_approval_token(), "approver": backup})
        await world.manager.request_approval(request)
        return Escalated(request=request, at=world.clock())

    def apply_escalation(self, state: State, result: Escalated) -> None:
        """The backup approver's request replaces the first: its token is the only one that counts now."""
        approval = state.approval
        assert approval is not None
        approval.request = result.request
        approval.requested_at = result.at
        approval.approver = result.request.approver
        approval.reminded = []
        approval.escalated_at = result.at
        state.approval_token = result.request.token


def routed(state: State, world: World, total: float, supplier: str, now: float) -> tuple[tuple[str, ...], str | None]:
    """Whom a new request asks, under the run's authority matrix: the people `Roster.to_ask` names on
    the site date (a delegate for one away). Outside a matrix, or when no one may approve the total,
    it asks the manager's channel as before, and the second part says why no one was named."""
    if not state.people_matrix:
        return (), None
    if world.people is None:
        return (), "no authority matrix on this service to name an approver from"
    asked = world.people.to_ask(total, supplier, state.clock.local(now).date())
    if not asked:
        return (), f"no one in the authority matrix may approve a total of {total:,.2f} from {supplier}"
    return asked, None


def order_total(approval: Approval) -> float:
    return approval.request.quantity * approval.request.unit_price


def approval_digest(state: State) -> str:
    """The digest of the PO the run waits on (`authority.order_digest`): an approval must carry it."""
    assert state.approval is not None
    request = state.approval.request
    return order_digest(
        po_number=request.po_number,
        revision=state.po_revision,
        supplier=request.supplier,
        quantity=request.quantity,
        unit_price=request.unit_price,
        quote_id=request.quote_id,
    )


def still_needed(approval: Approval, standing: Standing) -> str:
    """What the PO still needs, in words: `needs a second approver above 20,000`."""
    threshold = standing.two_person_threshold
    missing = standing.signatures_needed(order_total(approval)) - len(approval.signatures)
    if missing <= 0:
        return "has the signatures it needs"
    if threshold is not None and missing == 1 and approval.signatures:
        return f"needs a second approver above {threshold:,.0f}"
    return f"needs {missing} approver{'s' if missing > 1 else ''}"


def escalates(state: State) -> bool:
    """A lapse of the current request goes to the backup approver (once), rather than failing closed."""
    backup = state.approval_policy.backup_approver
    return backup is not None and state.approval is not None and state.approval.escalated_at is None
