"""Crashes during a multi-day wait: nothing before the crash runs again, and the run finishes."""

from __future__ import annotations

import pytest

from e2e.scenario import Scenario

pytestmark = pytest.mark.e2e


async def calls_so_far(scenario: Scenario) -> dict[str, int]:
    counts: dict[str, int] = {"get_stock": await scenario.stock_reads()}
    for call in await scenario.calls():
        counts[call["op"]] = counts.get(call["op"], 0) + 1
    for entry in await scenario.approval_requests():
        counts["approval_posts"] = entry["posts"]
    return counts


async def test_service_killed_while_waiting_for_approval(scenario: Scenario, service) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.waiting_for(run_id, "wait_for_approval")
    before = await calls_so_far(scenario)
    assert before == {"get_stock": 1, "quote": 1, "request_approval": 1, "approval_posts": 1}

    service.kill()
    service.restart()
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=60)
    assert outcome["outcome"] == "received"
    after = await calls_so_far(scenario)
    for op, n in before.items():
        assert after[op] == n, f"{op} ran again after the crash: {before} -> {after}"
    assert len(await scenario.orders()) == 1


async def test_restate_server_killed_while_waiting_for_approval(scenario: Scenario, restate_runtime) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.waiting_for(run_id, "wait_for_approval")
    before = await calls_so_far(scenario)

    restate_runtime.kill()
    restate_runtime.restart()
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=60)
    assert outcome["outcome"] == "received"
    after = await calls_so_far(scenario)
    for op, n in before.items():
        assert after[op] == n, f"{op} ran again after the crash: {before} -> {after}"
    assert len(await scenario.orders()) == 1
