"""Approval reminders and escalation to the backup approver, through the real stack.

Judged from the world's records: the manager's inbox (requests, who was asked, reminders
kept once per key however often they were posted) and the supplier's orders.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from e2e.scenario import Scenario, ok
from support import CRASH_POINTS, RegisteredService, eventually

pytestmark = pytest.mark.e2e

BACKUP = "backup-approver"
# Long enough for a crash and restart to fit in the first window and for the test to act
# in the backup's; reminders fall half-way and at 90% of each.
WINDOW_DAYS = 80


async def reminders(scenario: Scenario, po_number: str) -> list[dict[str, Any]]:
    return ok(await scenario.world.get("/manager/reminders", params={"po_number": po_number}))["reminders"]


@pytest.mark.slow
async def test_a_reminder_is_sent_once_across_a_crash_and_the_backup_approves_after_the_first_token_is_void(
    scenario: Scenario, service: RegisteredService
) -> None:
    await scenario.setup()
    await scenario.configure(approval=WINDOW_DAYS)
    run_id = f"replenish-{scenario.sku}-1"
    # The service dies right after the world took the half-way reminder, before the step
    # that sent it was journaled: the retry after the restart posts it again.
    with CRASH_POINTS.open("a") as f:
        f.write(json.dumps({"scope": run_id, "step": "remind", "phase": "after"}) + "\n")
    assert (await scenario.check())["started"] == run_id
    first = await scenario.pending_approval()
    po = first["po_number"]

    await eventually(lambda: not service.running, timeout=60, what="the service to die at the reminder")
    await asyncio.to_thread(service.restart)

    async def both_reminded() -> list[dict[str, Any]] | None:
        mine = [r for r in await reminders(scenario, po) if r["reminder"]["approver"] == "manager"]
        return mine if len(mine) == 2 else None

    sent = await eventually(both_reminded, timeout=90, what="both reminders to the manager")
    by_point = {r["reminder"]["point"]: r for r in sent}
    assert sorted(by_point) == [0.5, 0.9]
    # The crash made the half-way reminder go out again on the wire (positive control: the
    # retry after the restart re-posted it) and the manager still has it once.
    assert by_point[0.5]["posts"] >= 2 and by_point[0.9]["posts"] >= 1
    assert all("token" not in json.dumps(r["reminder"]) for r in sent)

    # The window lapses: the same PO goes to the backup approver with a fresh token.
    async def escalated() -> dict[str, Any] | None:
        requests = await scenario.approval_requests()
        return next((r for r in requests if r["request"]["approver"] == BACKUP), None)

    backup = (await eventually(escalated, timeout=60, what="the escalation to the backup approver"))["request"]
    assert backup["po_number"] == po and backup["token"] != first["token"]
    assert (backup["unit_price"], backup["quantity"], backup["supplier"]) == (
        first["unit_price"],
        first["quantity"],
        first["supplier"],
    )

    # The request reaches the world before the run checkpoints its state: poll for the state.
    async def waits_on_backup() -> dict[str, Any] | None:
        view = await scenario.run_view(run_id)
        waiting = view["waiting"] and view["waiting"]["tool"] == "wait_for_approval"
        return view if waiting and view["state"]["approval"]["approver"] == BACKUP else None

    view = await eventually(waits_on_backup, timeout=30, what="the run to wait on the backup approver")
    assert view["state"]["approval"]["request"]["token"] == "<withheld>"

    # The first approver answers late with the first token: refused, nothing ordered.
    late = {"po_number": po, "token": first["token"], "approved": True, "up_to": first["unit_price"], "by": "manager"}
    ok(await scenario.deliver("approval", late))

    async def refused() -> list[str] | None:
        view = await scenario.run_view(run_id)
        events = [e["what"] for e in view["state"]["security"]["recent"] if "token or PO does not match" in e["what"]]
        return events or None

    events = await eventually(refused, timeout=30, what="the late first token to be refused")
    # Who sent it is the door's word (the internal ingress: an operator), not the payload's "by".
    assert events[-1].endswith("(sent by 'operator', it claims 'manager')"), events
    assert await scenario.orders() == []
    still = await scenario.run_view(run_id)
    assert still["waiting"] and still["waiting"]["tool"] == "wait_for_approval"

    # The backup approver decides through the manager's inbox: that one counts.
    await scenario.decide(po, approved=True)
    outcome = await scenario.outcome(run_id, within=60)
    assert outcome["outcome"] == "received"
    orders = await scenario.orders()
    assert [o["po_number"] for o in orders] == [po]
    final = await scenario.run_view(run_id)
    approval = final["state"]["approval"]
    assert approval["status"] == "approved" and approval["approver"] == BACKUP
    wait = next(t for t in final["state"]["history"] if t["tool"] == "wait_for_approval")
    assert "escalated to backup-approver" in wait["summary"]
