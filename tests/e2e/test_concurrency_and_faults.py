"""Racing checks start one replenishment; supplier faults never produce a second order."""

from __future__ import annotations

import asyncio

import pytest

from e2e.scenario import Scenario

pytestmark = pytest.mark.e2e


async def test_fifty_concurrent_checks_start_exactly_one_replenishment(scenario: Scenario, admin) -> None:
    await scenario.setup()
    results = await asyncio.gather(*(scenario.check() for _ in range(50)))
    started = [r["started"] for r in results if r["started"]]
    assert started == [f"replenish-{scenario.sku}-1"]
    assert {r["active"] for r in results} == {started[0]}

    await scenario.pending_approval()
    status = await scenario.status()
    assert status["runs_started"] == 1
    assert len(await scenario.approval_requests()) == 1
    runs = await admin.asql(
        "SELECT id FROM sys_invocation WHERE target_service_name = 'Replenish' AND target_handler_name = 'run' "
        f"AND target_service_key LIKE 'replenish-{scenario.sku}-%'"
    )
    assert len(runs) == 1


async def test_supplier_down_for_the_first_attempts_of_place_order_gives_one_order(scenario: Scenario) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.fault(down_calls=2)
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    refused = [c for c in await scenario.calls() if c["status"] == 503]
    assert len(refused) == 2
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == request["po_number"] and orders[0]["submissions"] == 1


async def test_reply_lost_after_the_order_was_taken_leaves_one_order_at_the_supplier(scenario: Scenario) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.fault(lose_reply_calls=1)
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    # The retry asks for the PO before sending it again, and finds the order.
    placements = await scenario.calls(op="place_order")
    assert [c["status"] for c in placements] == [503]
    lookups = await scenario.calls(op="find_order")
    assert [c["status"] for c in lookups][-1] == 200
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["submissions"] == 1
    assert outcome["quantity_received"] == orders[0]["quantity"]
