"""The SQL reads the SKU lists make, through the real stack: each run's row says since when it
waits, read from Restate's journal by the run's invocation id."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from operator_support import setup_lasting_quotes

from e2e.scenario import Scenario
from replenisher.operations.overview import sku_rows
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.paused import RecentPaused
from replenisher.stack.runtime import RestateRuntime
from support import eventually

pytestmark = pytest.mark.e2e


async def waiting_for_approval(scenario: Scenario) -> str:
    """Start the scenario's run and return its id once the run has saved its wait for the manager."""
    run_id: str = (await scenario.check())["started"]
    await scenario.pending_approval()

    async def waits() -> bool:  # the inbox request is sent before the run saves its wait
        waiting = (await scenario.run_view(run_id)).get("waiting")
        return bool(waiting) and waiting["tool"] == "wait_for_approval"

    await eventually(waits, timeout=30, what=f"{run_id} to wait for the manager")
    return run_id


async def test_each_waiting_run_says_since_when_it_waits_and_not_another_runs_time(
    scenario: Scenario, ingress: httpx.AsyncClient, world_client: httpx.AsyncClient, restate_runtime: RestateRuntime
) -> None:
    # Two runs that begin waiting on either side of a known instant: a reading that lost a run,
    # or gave one run the other's time, fails the order asserted below.
    other = Scenario(ingress, world_client, "read-models-other")
    await scenario.setup()
    await other.setup()
    before = time.time()
    first = await waiting_for_approval(scenario)
    between = time.time()
    second = await waiting_for_approval(other)
    after = time.time()

    async with RestateClient(restate_runtime.ingress_url, restate_runtime.admin_url) as client:
        rows = {row.sku: row for row in await sku_rows(client)}
    mine, theirs = rows[scenario.sku], rows[other.sku]
    assert (mine.active_run, theirs.active_run) == (first, second)
    assert mine.waiting is not None and mine.waiting.tool == "wait_for_approval", mine
    # Restate stamps journal entries in milliseconds: a millisecond's slack either side.
    assert mine.waiting_since is not None and before - 0.001 <= mine.waiting_since <= between + 0.001, (
        before,
        mine.waiting_since,
        between,
    )
    assert theirs.waiting_since is not None and between - 0.001 <= theirs.waiting_since <= after + 0.001, (
        between,
        theirs.waiting_since,
        after,
    )


def scans(asked: list[str]) -> list[str]:
    """The queries that read every invocation Restate keeps: any over `sys_invocation` but by id."""
    return [q for q in asked if re.search(r"FROM sys_invocation(_status)?\b", q) and " id IN " not in q]


async def test_the_health_check_and_the_runs_retrying_are_read_without_a_scan_of_every_invocation(
    scenario: Scenario, restate_runtime: RestateRuntime
) -> None:
    """Each query over `sys_invocation` but by id reads every invocation Restate keeps (seconds at
    100,000 SKUs). Whether the service is down and which runs retry a step come from the invoker's
    own table, and a recent scan's paused calls are read by id: the one scan is the paused calls'."""
    await setup_lasting_quotes(scenario)
    run_id = await waiting_for_approval(scenario)
    asked: list[str] = []
    async with RestateClient(restate_runtime.ingress_url, restate_runtime.admin_url) as client:
        real = client.http.sql

        async def sql(query: str) -> list[dict[str, Any]]:
            asked.append(query)
            return await real(query)

        client.http.sql = sql  # type: ignore[method-assign]
        # Down or not (another test may leave a call refused): read without a scan either way.
        await client.health()
        recent = RecentPaused(fresh_s=3600.0)
        await recent.ids(client.http)  # the one scan, made at most every so often
        found = await client.troubled(recent)
        assert run_id not in found.retrying
        [scan] = scans(asked)
        assert "status = 'paused'" in scan, asked
        assert any("FROM sys_invocation_state" in q for q in asked), "positive control: the invoker's table was read"
        # Without the recent scan's ids, troubled() makes the scan itself.
        asked.clear()
        await client.troubled()
        assert len(scans(asked)) == 1, asked
