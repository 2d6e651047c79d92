"""The manager's approval inbox and the auto-approval policy that stands in for the manager.

Requests are keyed by their one-time token: posting the same request again is a no-op,
and a fresh request for the same PO (a re-approval after a price change) supersedes the
older one still waiting, so a person never decides on stale terms.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from replenisher.domain.documents import ApprovalDecision, ApprovalReminder, ApprovalRequest, Price
from simulated_world.errors import Conflict, NotFound

AUTO_APPROVER = "auto-approval"


class ManagerPolicy(BaseModel):
    """Both the PUT body (only the fields sent change, as with a supplier's faults) and the standing policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    auto_approve: bool = False
    max_unit_price: Price | None = None
    delay_days: float = Field(default=0.5, ge=0, le=365)
    over_budget: Literal["reject", "hold"] = "reject"

    def merged(self, update: ManagerPolicy) -> ManagerPolicy:
        # `{"auto_approve": false}` must not also drop the budget: a field left out keeps its value,
        # and `{"max_unit_price": null}` is how the budget is dropped.
        return self.model_copy(update={name: getattr(update, name) for name in update.model_fields_set})

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """What the policy answers, or None when a person has to decide."""
        if not self.auto_approve:
            return None
        if self.max_unit_price is None or request.unit_price <= self.max_unit_price:
            return ApprovalDecision(
                po_number=request.po_number,
                token=request.token,
                approved=True,
                up_to=request.unit_price,
                by=AUTO_APPROVER,
                note="within the standing budget",
            )
        if self.over_budget == "hold":
            return None
        return ApprovalDecision(
            po_number=request.po_number,
            token=request.token,
            approved=False,
            by=AUTO_APPROVER,
            note=f"unit price {request.unit_price:.2f} is above the budget of {self.max_unit_price:.2f}",
        )


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    approved: bool
    up_to: Price | None = None
    note: str = Field(default="", max_length=2000)
    by: str = Field(default="manager", min_length=1, max_length=200)


ApprovalStatus = Literal["pending", "decided", "superseded"]


class ApprovalEntry(BaseModel):
    request: ApprovalRequest
    received_at: float
    posts: int = 1
    status: ApprovalStatus = "pending"
    decision: ApprovalDecision | None = None
    decided_at: float | None = None


class ReminderEntry(BaseModel):
    """One reminder as the approver sees it: once per idempotency key, however often it was posted."""

    key: str
    reminder: ApprovalReminder
    received_at: float
    posts: int = 1


class ReminderFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    po_number: str | None = None


class ReminderList(BaseModel):
    reminders: list[ReminderEntry]


class ApprovalFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["pending", "decided", "all"] = "all"


class ApprovalList(BaseModel):
    requests: list[ApprovalEntry]


class ManagerInbox:
    def __init__(self) -> None:
        self.policy = ManagerPolicy()
        self._by_token: dict[str, ApprovalEntry] = {}
        self._reminders: dict[str, ReminderEntry] = {}

    def receive(self, request: ApprovalRequest, now: float) -> tuple[ApprovalEntry, bool]:
        """The entry for this request, and whether it is new."""
        existing = self._by_token.get(request.token)
        if existing is not None:
            if existing.request != request:
                raise Conflict(f"token of PO {existing.request.po_number} was already used for another request")
            existing.posts += 1
            return existing, False
        for entry in self._by_token.values():
            if entry.request.po_number == request.po_number and entry.status == "pending":
                entry.status = "superseded"
        entry = ApprovalEntry(request=request, received_at=now)
        self._by_token[request.token] = entry
        return entry, True

    def latest(self, po_number: str) -> ApprovalEntry:
        entries = [e for e in self._by_token.values() if e.request.po_number == po_number]
        if not entries:
            raise NotFound(f"no approval request for PO {po_number}")
        return entries[-1]  # dicts keep insertion order: the last one posted is the one that counts

    def decide(self, po_number: str, body: DecisionBody, now: float) -> ApprovalDecision:
        """A person's decision on the latest request for the PO, bound to that request's token."""
        entry = self.latest(po_number)
        if entry.status != "pending":
            raise Conflict(f"approval request for PO {po_number} is {entry.status}")
        up_to = body.up_to
        if body.approved and up_to is None:
            # An approval names its price limit explicitly, so the agent never has to guess it.
            up_to = entry.request.unit_price
        decision = ApprovalDecision(
            po_number=po_number,
            token=entry.request.token,
            approved=body.approved,
            up_to=up_to,
            by=body.by,
            note=body.note,
        )
        self.settle(entry, decision, now)
        return decision

    def settle(self, entry: ApprovalEntry, decision: ApprovalDecision, now: float) -> bool:
        """Record a decision if the entry still waits for one; False if someone got there first."""
        if entry.status != "pending":
            return False
        entry.status = "decided"
        entry.decision = decision
        entry.decided_at = now
        return True

    def remind(self, key: str, reminder: ApprovalReminder, now: float) -> tuple[ReminderEntry, bool]:
        """Keep a reminder about a known PO; the same key again is the same reminder."""
        self.latest(reminder.po_number)
        existing = self._reminders.get(key)
        if existing is not None:
            if existing.reminder != reminder:
                raise Conflict(f"reminder key {key!r} was already used for another reminder")
            existing.posts += 1
            return existing, False
        entry = ReminderEntry(key=key, reminder=reminder, received_at=now)
        self._reminders[key] = entry
        return entry, True

    def reminders(self, where: ReminderFilter) -> list[ReminderEntry]:
        return [e for e in self._reminders.values() if where.po_number in (None, e.reminder.po_number)]

    def find(self, where: ApprovalFilter) -> list[ApprovalEntry]:
        entries = list(self._by_token.values())
        if where.status == "all":
            return entries
        return [e for e in entries if e.status == where.status]
