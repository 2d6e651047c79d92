"""A SKU handler replayed on a service restarted with other settings goes on, never wedges.

Found by the 1,000-run soak: a tick that had started a run was cut off by a kill, the service
came back with another clock origin, and Restate refused the replayed tick because the run's
request it sent again differed from the journal's ("journal mismatch", RT0016). Restate paused
the tick, and the SKU's every later message queued behind it: approvals never delivered, the run
never accounted for. The request is now a journaled step of the SKU, so a replay sends what the
first attempt sent, whatever the restarted process is set to.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from e2e.scenario import Scenario, ok
from replenisher.loop import names
from replenisher.stack.admin import Admin
from support import APPROVAL_WAIT_DAYS, CRASH_POINTS, RegisteredService, eventually

pytestmark = pytest.mark.e2e

NEW_APPROVAL_WAIT_DAYS = APPROVAL_WAIT_DAYS + 37


def fired(line: str) -> bool:
    path = CRASH_POINTS.with_name(CRASH_POINTS.name + ".fired")
    return path.exists() and line in path.read_text().splitlines()


async def sku_invocations(admin: Admin, sku: str) -> list[dict[str, object]]:
    return await admin.asql(
        "SELECT id, target_handler_name, status, completion_result, last_failure_error_code, last_failure, "
        "created_at FROM sys_invocation "
        f"WHERE target_service_name = 'SkuAgent' AND target_service_key = '{sku}' ORDER BY created_at"
    )


async def test_a_tick_replayed_on_a_service_restarted_with_other_settings_completes_with_its_first_request(
    service: RegisteredService, admin: Admin, scenario: Scenario
) -> None:
    await scenario.setup()
    line = json.dumps({"scope": scenario.sku, "step": names.NEXT_CHECK, "phase": "after"})
    with CRASH_POINTS.open("a") as f:
        f.write(line + "\n")
    settings = service.process.env
    before = dict(settings)
    try:
        # The watch's first tick starts the run, schedules the next tick, and the service dies
        # there: both sends are in Restate's journal, the tick is not done.
        ok(await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/watch", json={}))
        await eventually(lambda: fired(line) and not service.running, timeout=60, what="the kill in the tick")
        settings["REPLENISHER_APPROVAL_WAIT_DAYS"] = str(NEW_APPROVAL_WAIT_DAYS)
        await asyncio.to_thread(service.restart)

        run_id = f"replenish-{scenario.sku}-1"

        async def replayed() -> bool:
            # Judged from the event itself: the tick that was cut off completed, on the restarted
            # service. A replay refused as a journal mismatch retries, then pauses: it never completes.
            rows = await sku_invocations(admin, scenario.sku)
            refused = [r for r in rows if r.get("status") == "paused" or r.get("last_failure_error_code") == "RT0016"]
            if refused:  # Restate's verdict on the replay: no need to wait out the timeout
                pytest.fail(f"the replay was refused: {refused}")
            troubled = [r for r in rows if r.get("status") in ("backing-off", "paused")]
            assert not troubled, troubled
            cut_off = next(r for r in rows if r.get("target_handler_name") == "tick")
            assert cut_off.get("status") == "completed" and cut_off.get("completion_result") == "success", cut_off
            return (await scenario.status())["active"]["run_id"] == run_id

        await eventually(replayed, timeout=60, what="the cut-off tick to complete on the restarted service")

        # The run the tick started writes its state once it runs: poll for it.
        async def run_state() -> dict[str, Any] | None:
            state: dict[str, Any] | None = (await scenario.run_view(run_id))["state"]
            return state

        state = await eventually(run_state, timeout=30, what=f"{run_id} to save its state")
        assert state["waits"]["approval"] == APPROVAL_WAIT_DAYS, state["waits"]
        # The SKU still takes messages: its run's approval reaches the run.
        request = await scenario.pending_approval(within=30)
        await scenario.decide(request["po_number"], approved=True)
        assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"

        # The control: the restarted service does run on the new setting, for a run it starts.
        control = Scenario(scenario.ingress, scenario.world, "settings-control")
        await control.setup()
        control_run = (await control.check())["started"]

        async def control_waits() -> dict[str, float] | None:
            state = (await control.run_view(control_run))["state"]
            return state["waits"] if state else None

        assert (await eventually(control_waits, timeout=30))["approval"] == NEW_APPROVAL_WAIT_DAYS
        await control.decide((await control.pending_approval(within=30))["po_number"], approved=False)
    finally:
        # Sent, not called: behind a wedged tick a call would hang, and hide why the test failed.
        ok(await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/unwatch/send"))
        settings.clear()
        settings.update(before)
        await asyncio.to_thread(service.restart)
