"""The crash matrix: one full replenishment, killed with SIGKILL at every step boundary in turn.

For every kill point the run must reach the same outcome as an undisturbed run, the world
must have seen each side effect at most once per idempotency key, and no decision that
was already journaled may be taken again. The service kills itself at armed points
(`replenisher.durable.probes`): inside a step before its side effect, and after the side
effect but before the result is journaled; waits are interrupted from outside. A sample
of the same with restate-server killed instead. The table is printed at the end.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from e2e.crash_table import ROWS
from e2e.scenario import Scenario
from support import CRASH_POINTS, DECISION_LOG, HAPPY_PATH, RegisteredService, eventually

pytestmark = pytest.mark.e2e

STEPS = ["get_quotes", "draft_purchase_order", "request_approval", "place_order", "read_supplier_reply"]
STEPS += ["close_purchase_order"]
DECISIONS = ["decide 0", "decide 4"]  # the first decision, and the one that chooses to place the order
WAITS = ["wait_for_approval", "wait_for_supplier_reply", "wait_for_goods"]

SERVICE_KILLS = [("read stock", phase) for phase in ("before", "after")]
SERVICE_KILLS += [(step, phase) for step in STEPS + DECISIONS for phase in ("before", "after")]
SERVICE_KILLS += [(wait, "during") for wait in WAITS]
SERVER_KILLS = [(wait, "during") for wait in WAITS] + [("place_order", "during")]


def decisions_of(run_id: str) -> Counter[int]:
    lines = DECISION_LOG.read_text().splitlines() if DECISION_LOG.exists() else []
    return Counter(int(turn) for rid, turn in (line.split() for line in lines) if rid == run_id)


async def duplicate_effects(scenario: Scenario, po_number: str) -> int:
    orders = await scenario.orders()
    approvals = await scenario.approval_requests()
    closures = (await scenario.world.get("/erp/closures", params={"sku": scenario.sku})).json()["closures"]
    return (
        max(len(orders) - 1, 0)
        + sum(1 for o in orders if o["po_number"] != po_number)
        + max(len(approvals) - 1, 0)
        + max(len(closures) - 1, 0)
    )


async def run_with_a_crash(
    scenario: Scenario, crash: Callable[[str], Awaitable[None]], approve_after_crash: bool = False
) -> tuple[dict[str, Any], str]:
    """One replenishment; `crash(run_id)` runs beside it and does the killing."""
    # Replies and goods take a few test days, so a wait lasts long enough to be interrupted.
    await scenario.setup(reply_days=3, lead_days=6)
    run_id = f"replenish-{scenario.sku}-1"
    # Started first: the armed point may be inside `check` itself.
    killer = asyncio.create_task(crash(run_id))
    assert (await scenario.check())["started"] == run_id
    request = await scenario.pending_approval(within=40)
    if approve_after_crash:
        await asyncio.wait_for(killer, timeout=60)
    await scenario.decide(request["po_number"], approved=True)
    outcome = await scenario.outcome(run_id, within=90)
    await asyncio.wait_for(killer, timeout=30)
    return outcome, request["po_number"]


async def check_run(scenario: Scenario, point: str, outcome: dict[str, Any], po: str, redecided: int | None) -> None:
    duplicates = await duplicate_effects(scenario, po)
    decisions = decisions_of(outcome["run_id"])
    extra = sum(decisions.values()) - len(decisions)
    ROWS.append((point, outcome["outcome"], duplicates, extra))

    assert outcome["outcome"] == "received", point
    history = (await scenario.run_view(outcome["run_id"]))["state"]["history"]
    assert [t["tool"] for t in history] == HAPPY_PATH, point
    assert duplicates == 0, f"{point}: a side effect happened twice"
    repeated = {turn for turn, n in decisions.items() if n > 1}
    assert repeated <= ({redecided} if redecided is not None else set()), (
        f"{point}: journaled decisions were taken again: {dict(decisions)}"
    )
    assert len(await scenario.orders()) == 1


def arm(scope: str, step: str, phase: str) -> None:
    with CRASH_POINTS.open("a") as f:
        f.write(json.dumps({"scope": scope, "step": step, "phase": phase}) + "\n")


async def revive(service: RegisteredService) -> None:
    """Stand in for the process supervisor: bring the service back once it has died."""
    await eventually(lambda: not service.running, timeout=60, what="the service to kill itself at the armed point")
    await asyncio.to_thread(service.restart)


@pytest.mark.parametrize(("step", "phase"), SERVICE_KILLS, ids=[f"{s}:{p}" for s, p in SERVICE_KILLS])
async def test_service_killed(scenario: Scenario, service: RegisteredService, step: str, phase: str) -> None:
    async def crash(run_id: str) -> None:
        if phase == "during":
            await scenario.waiting_for(run_id, step, within=60)
            service.kill()
            await asyncio.to_thread(service.restart)
        else:
            await revive(service)

    if phase != "during":
        arm(scenario.sku if step == "read stock" else f"replenish-{scenario.sku}-1", step, phase)
    outcome, po = await run_with_a_crash(scenario, crash, approve_after_crash=step == "wait_for_approval")
    redecided = int(step.split()[1]) if step.startswith("decide") and phase == "after" else None
    await check_run(scenario, f"service {step}:{phase}", outcome, po, redecided)


@pytest.mark.parametrize(("step", "phase"), SERVER_KILLS, ids=[f"{s}:{p}" for s, p in SERVER_KILLS])
async def test_restate_server_killed(scenario: Scenario, restate_runtime: Any, step: str, phase: str) -> None:
    if not getattr(restate_runtime, "supports_crash", True):
        pytest.skip("this runtime cannot be killed and restarted on the same data (the Docker one)")

    async def crash(run_id: str) -> None:
        if step == "place_order":
            # Kill while the step runs: the supplier has been asked for its live price.
            await eventually(lambda: scenario.calls(op="live_price"), timeout=60, what="place_order to start")
        else:
            await scenario.waiting_for(run_id, step, within=60)
        restate_runtime.kill()
        await asyncio.to_thread(restate_runtime.restart)

    outcome, po = await run_with_a_crash(scenario, crash, approve_after_crash=step == "wait_for_approval")
    await check_run(scenario, f"restate-server {step}:{phase}", outcome, po, None)
