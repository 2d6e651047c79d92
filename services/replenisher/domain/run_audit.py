"""What of a run's approval the audit log records, as the run goes: each signature, each decision,
and each approval it refused. Pure: the Restate glue sends what this returns from the run's journal
(one one-way send per record, exactly once), comparing the state with what it told before.
"""

from __future__ import annotations

from pydantic import BaseModel

from replenisher.domain.audit import AuditRecord
from replenisher.domain.security_log import SecurityNote
from replenisher.domain.state import State

REFUSED_DECISIONS = ("approval refused", "approval by ", "rejection by ")
"""How the approval wait words the decisions it refuses in the security log (domain.tools.approval)."""


class ApprovalTold(BaseModel):
    """How far the audit log has been told about a run's approval: which request, how many
    signatures, and its status then."""

    po_number: str | None = None
    requested_at: float | None = None
    signatures: int = 0
    status: str | None = None


def approval_news(
    told: ApprovalTold, state: State, security: list[SecurityNote]
) -> tuple[list[AuditRecord], ApprovalTold]:
    """The audit records since `told`, and what has been told after them. `security` is the run's
    security log news since its last checkpoint (the refused approvals among it are recorded)."""
    records: list[AuditRecord] = []
    approval = state.approval
    for note in security:
        if note.what.startswith(REFUSED_DECISIONS):
            times = f" ({note.count} times)" if note.count > 1 else ""
            records.append(
                AuditRecord(
                    at=note.last_at if note.last_at is not None else state.now,
                    event="approval_refused",
                    who=note.source[:200],
                    via=note.source[:100],
                    what=_terms(state),
                    outcome="refused",
                    reason=(note.what + times)[:1000],
                    run_id=state.run_id,
                )
            )
    if approval is None:
        return records, told
    request = approval.request
    same = told.po_number == request.po_number and told.requested_at == approval.requested_at
    seen = told.signatures if same else 0
    for signature in approval.signatures[seen:]:
        records.append(
            AuditRecord(
                at=signature.at,
                event="approval",
                who=signature.person,
                acting_for=signature.acting_for,
                limit=signature.limit,
                via=(approval.channel or "")[:100],
                what=_terms(state),
                outcome="done",
                reason="signed",
                run_id=state.run_id,
            )
        )
    decided = approval.status in ("approved", "rejected") and (not same or told.status != approval.status)
    if decided:
        records.append(
            AuditRecord(
                at=approval.decided_at if approval.decided_at is not None else state.now,
                event="approval" if approval.status == "approved" else "rejection",
                who=(approval.decided_by or approval.channel or "unknown")[:200],
                via=(approval.channel or "")[:100],
                what=_terms(state),
                outcome="done",
                reason=_verdict(approval.status, approval.approved_up_to, len(approval.signatures)),
                run_id=state.run_id,
            )
        )
    now_told = ApprovalTold(
        po_number=request.po_number,
        requested_at=approval.requested_at,
        signatures=len(approval.signatures),
        status=approval.status,
    )
    return records, now_told


def _terms(state: State) -> str:
    approval = state.approval
    if approval is None:
        return state.run_id
    r = approval.request
    total = r.quantity * r.unit_price
    return f"{r.po_number}: {r.quantity} x {state.sku} at {r.unit_price:.2f} from {r.supplier} ({total:,.2f})"


def _verdict(status: str, up_to: float | None, signatures: int) -> str:
    said = f"approved up to {up_to:.2f}" if status == "approved" and up_to else status
    return said + (f" ({signatures} signature{'s' if signatures != 1 else ''})" if signatures else "")
