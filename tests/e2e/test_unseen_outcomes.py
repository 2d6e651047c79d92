"""Outcomes nobody sees: the order may exist but the answer never came. Never recorded as failed."""

from __future__ import annotations

import asyncio

import pytest

from e2e.scenario import Scenario, ok
from e2e.test_crash_matrix import arm
from support import RegisteredService, eventually

pytestmark = pytest.mark.e2e


async def tools_of(scenario: Scenario, run_id: str) -> list[tuple[str, str]]:
    return [(t["tool"], t["summary"]) for t in (await scenario.run_view(run_id))["state"]["history"]]


async def test_order_never_reached_the_supplier_is_placed_again_with_the_same_po(scenario: Scenario) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.fault(down_calls=4)  # every attempt of place_order fails before the order is sent
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    turns = await tools_of(scenario, run_id)
    placements = [summary for tool, summary in turns if tool == "place_order"]
    assert "may exist" in placements[0] and placements[1].startswith("order ")
    assert ("check_order_status", "the supplier holds no order for our PO: it can be placed again") in turns
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == request["po_number"] and orders[0]["submissions"] == 1


async def test_order_taken_then_supplier_unreachable_is_found_when_it_is_back(scenario: Scenario) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    # Taken, answer lost, then down for the remaining 3 attempts and the first status check's 4.
    await scenario.fault(lose_reply_calls=1, down_after_order_calls=7)
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=60)
    assert outcome["outcome"] == "received"
    checks = [summary for tool, summary in await tools_of(scenario, run_id) if tool == "check_order_status"]
    assert checks[0].startswith("check_order_status failed") and checks[-1].startswith("the supplier holds")
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == request["po_number"]


async def test_a_run_that_ends_unknown_is_reconciled_by_the_sku_and_shows_unknown_only_until_then(
    scenario: Scenario,
) -> None:
    await scenario.setup(reply_days=0.5, lead_days=2)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.fault(lose_reply_calls=1, down_after_order_calls=100_000)
    await scenario.decide(request["po_number"], approved=True)

    ended = await scenario.outcome(run_id, within=90)
    assert ended["outcome"] == "unknown"
    status = await scenario.status()
    assert status["unresolved"]["run_id"] == run_id
    # While the supplier is still away, no new run starts: it could buy the stock twice.
    again = await scenario.check()
    assert again["started"] is None and again["active"] is None

    ok(await scenario.world.delete(f"/faults/suppliers/{scenario.supplier}"))
    # A check reconciles at once; the SKU's own timer would too (whichever comes first starts it).
    await scenario.check()
    follow_up = f"replenish-{scenario.sku}-2"
    followed = await scenario.outcome(follow_up, within=60)
    assert followed["outcome"] == "received" and followed["adopted_from"] == run_id

    status = await scenario.status()
    assert status["unresolved"] is None
    first = next(o for o in status["outcomes"] if o["run_id"] == run_id)
    assert first["outcome"] == "received" and first["detail"].startswith("reconciled")
    assert "unknown" not in status["stats"]["by_outcome"]
    assert status["kept"] == []  # the reply and goods that came while unknown went to the follow-up
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == request["po_number"]

    async def booked() -> bool:
        stock = ok(await scenario.world.get(f"/erp/stock/{scenario.sku}"))
        return stock["on_hand"] == 100

    await eventually(booked, timeout=5, what="the goods to be on hand")


async def test_a_retry_after_the_order_was_taken_does_not_refuse_it_when_the_price_has_risen(
    scenario: Scenario, service: RegisteredService
) -> None:
    # The service dies after the supplier took the order, before the step was journaled; while it
    # is down the price rises above the approval. The retry must find the order, not refuse it.
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    arm(run_id, "place_order", "after")

    async def price_rises_while_down() -> None:
        await eventually(lambda: not service.running, timeout=60, what="the service to die after placing")
        await scenario.fault(price_rise_pct=50)
        await asyncio.to_thread(service.restart)

    revive = asyncio.create_task(price_rises_while_down())
    await scenario.decide(request["po_number"], approved=True)
    outcome = await scenario.outcome(run_id, within=60)
    await asyncio.wait_for(revive, timeout=30)

    assert outcome["outcome"] == "received" and outcome["unit_price"] == request["unit_price"]
    placements = [summary for tool, summary in await tools_of(scenario, run_id) if tool == "place_order"]
    assert len(placements) == 1 and placements[0].startswith("order ")
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == request["po_number"]
