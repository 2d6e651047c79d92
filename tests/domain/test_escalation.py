"""Approval reminders and escalation to the backup approver, as pure rules on a calendar."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from domain.factories import T0, stock
from replenisher.config import Settings
from replenisher.domain.arrival import Arrival
from replenisher.domain.calendar import BusinessCalendar, ClockOrigin, utc_instant
from replenisher.domain.documents import ApprovalDecision, ApprovalReminder, ApprovalRequest, Sender
from replenisher.domain.escalation import ApprovalPolicy, ReminderSent
from replenisher.domain.state import Approval, State
from replenisher.domain.tools.approval import Escalated, WaitForApproval

FRIDAY_3PM = utc_instant("2026-12-04T15:00")
DAY_SECONDS = 10.0
FIRST_TOKEN = "first-token-" + "x" * 20
BACKUP = "backup-approver"
wait = WaitForApproval()


def pending(policy: ApprovalPolicy | None = None, window: float = 3.0) -> State:
    state = State.start(
        "replenish-SKU-1-1",
        stock(),
        day_seconds=DAY_SECONDS,
        started_at=T0,
        calendar=BusinessCalendar(),
        origin=ClockOrigin(wall=T0, calendar=FRIDAY_3PM),
        approval_policy=policy or ApprovalPolicy(),
    )
    state.waits = state.waits.model_copy(update={"approval": window})
    request = ApprovalRequest(
        po_number="PO-1", sku="SKU-1", supplier="acme", quantity=95, unit_price=4.0, quote_id="q",
        expires_at=T0 + 100 * DAY_SECONDS, token=FIRST_TOKEN, run_id=state.run_id,
    )  # fmt: skip
    state.approval = Approval(request=request, requested_at=T0)
    state.approval_token = FIRST_TOKEN
    return state


def decision(token: str) -> ApprovalDecision:
    return ApprovalDecision(po_number="PO-1", token=token, approved=True, up_to=4.0, by="someone")


MANAGER = Arrival(sender=Sender(party="manager"))


def escalated(state: State) -> State:
    backup_request = state.approval.request.model_copy(update={"token": "second-token-" + "y" * 20, "approver": BACKUP})  # type: ignore[union-attr]
    state.approval.status = "pending"  # type: ignore[union-attr]
    wait.apply_escalation(state, Escalated(request=backup_request, at=T0 + 5 * DAY_SECONDS))
    return state


def test_reminders_fall_half_way_and_at_90_percent_of_the_window_in_business_days() -> None:
    state = pending()
    due = {r.label: state.clock.date_of(r.at) for r in wait.reminders(state)}
    # Friday 15:00 + 1.5 business days (weekend skipped) and + 2.7 business days.
    assert due == {"50%": "Tue 2026-12-08 03:00", "90%": "Wed 2026-12-09 07:48"}
    assert state.clock.date_of(wait.deadline(state)) == "Wed 2026-12-09 15:00"
    assert all(r.approver == "manager" and r.po_number == "PO-1" for r in wait.reminders(state))


def test_a_reminder_once_recorded_is_never_due_again_even_if_it_failed() -> None:
    state = pending()
    first, second = wait.reminders(state)
    wait.apply_reminder(state, ReminderSent(point=first.point, at=first.at))
    wait.apply_reminder(state, ReminderSent(point=first.point, at=first.at))  # a replayed apply changes nothing
    assert [r.point for r in wait.reminders(state)] == [second.point]
    wait.apply_reminder(state, ReminderSent(point=second.point, at=second.at, delivered=False, error="inbox down"))
    assert wait.reminders(state) == []
    assert state.approval is not None and state.approval.reminded == [0.5, 0.9]
    assert "not delivered" in (state.last_failure or "")


def test_each_reminder_has_its_own_idempotency_key_per_approver_and_po() -> None:
    state = pending()
    keys = {r.key for r in wait.reminders(state)}
    assert keys == {"PO-1-manager-remind-50%", "PO-1-manager-remind-90%"}
    assert {r.key for r in wait.reminders(escalated(state))} == {
        "PO-1-backup-approver-remind-50%",
        "PO-1-backup-approver-remind-90%",
    }


def test_a_lapsed_window_escalates_once_with_a_fresh_window_and_token_and_voids_the_first() -> None:
    state = pending()
    assert wait.escalation_due(state)
    escalated(state)
    approval = state.approval
    assert approval is not None
    assert approval.approver == BACKUP and approval.request.token != FIRST_TOKEN
    assert approval.request.po_number == "PO-1" and approval.reminded == []
    assert state.approval_token == approval.request.token
    # A fresh window of three business days from the escalation (Wednesday + 3 = Monday).
    assert state.clock.date_of(approval.requested_at) == "Wed 2026-12-09 15:00"
    assert state.clock.date_of(wait.deadline(state)) == "Mon 2026-12-14 15:00"
    # The first approver's token is void; the backup's counts.
    assert wait.refusal(state, decision(FIRST_TOKEN), MANAGER) is not None
    assert wait.refusal(state, decision(approval.request.token), MANAGER) is None
    # Only once: when the backup's window lapses too, the wait times out and the run fails closed.
    assert not wait.escalation_due(state)
    summary = wait.apply(state, None)
    assert approval.status == "timed_out" and "escalated to backup-approver" in summary


def test_without_a_backup_approver_a_lapse_fails_closed_at_once() -> None:
    state = pending(ApprovalPolicy(backup_approver=None))
    assert not wait.escalation_due(state)
    wait.apply(state, None)
    assert state.approval is not None and state.approval.status == "timed_out"


def test_runs_without_a_policy_neither_remind_nor_escalate() -> None:
    state = pending(ApprovalPolicy.none())
    assert wait.reminders(state) == [] and not wait.escalation_due(state)


def test_the_approval_story_is_in_the_waits_summary() -> None:
    state = escalated(pending())
    wait.apply_reminder(state, ReminderSent(point=0.5, at=T0))
    summary = wait.apply(state, decision(state.approval.request.token), MANAGER)  # type: ignore[union-attr]
    assert summary == "approved up to 4.00 (reminded at 50%; escalated to backup-approver)"


@pytest.mark.parametrize("points", [(0.0,), (1.0,), (0.5, 1.2)])
def test_reminder_points_lie_inside_the_window(points: tuple[float, ...]) -> None:
    with pytest.raises(ValidationError, match="between 0 and 1"):
        ApprovalPolicy(reminders=points)


def test_settings_read_reminders_and_the_backup_approver() -> None:
    default = Settings().approval_policy
    assert default.reminders == (0.5, 0.9) and default.backup_approver == BACKUP
    custom = Settings.model_validate({"approval_reminders": "0.75, 0.25", "backup_approver": "cfo"}).approval_policy
    assert custom.reminders == (0.25, 0.75) and custom.backup_approver == "cfo"
    off = Settings.model_validate({"approval_reminders": "none", "backup_approver": "none"}).approval_policy
    assert off == ApprovalPolicy.none()


def test_a_reminder_carries_no_token() -> None:
    assert "token" not in ApprovalReminder.model_fields
