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


@pytest.mark.parametrize("victim", ["service", "restate_runtime"])
async def test_killed_while_waiting_for_approval_resumes_without_repeating_a_step(
    scenario: Scenario, victim: str, request: pytest.FixtureRequest
) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    approval = await scenario.pending_approval()
    await scenario.waiting_for(run_id, "wait_for_approval")
    before = await calls_so_far(scenario)
    assert before == {"get_stock": 1, "quote": 1, "request_approval": 1, "approval_posts": 1}

    process = request.getfixturevalue(victim)
    if not getattr(process, "supports_crash", True):
        pytest.skip("this runtime cannot be killed and restarted on the same data (the Docker one)")
    process.kill()  # SIGKILL: no goodbye, nothing flushed
    process.restart()
    await scenario.decide(approval["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=60)
    assert outcome["outcome"] == "received"
    after = await calls_so_far(scenario)
    for op, n in before.items():
        assert after[op] == n, f"{op} ran again after {victim} was killed: {before} -> {after}"
    assert len(await scenario.orders()) == 1
