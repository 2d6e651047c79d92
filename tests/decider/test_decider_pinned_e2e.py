"""A run's decider is fixed when it starts; the ledger holds every model call the API answered.

A stack of its own (restate-server, the world, the scripted stand-in for the Messages API, the
replenisher service), whose service is restarted with other settings while runs are in
flight, and killed by an armed crash point after the API answered a decision but before
Restate journaled it. Everything is judged from the stand-in's log of the requests it
received and from the runs' own records.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from tests.decider.stand_in_stack import ClaudeStack, Clients, claude_stack, clients_of, model_requests

from e2e.scenario import Scenario
from support import CRASH_POINTS, eventually

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-6"
CLAUDE = {
    "REPLENISHER_DECIDER": "claude",
    "REPLENISHER_CLAUDE_MODEL": MODEL,
    "REPLENISHER_CLAUDE_MAX_RETRIES": "0",
    "REPLENISHER_CLAUDE_TIMEOUT_SECONDS": "10",
}
# The key stays in the environment throughout: an offline service that COULD call Claude
# still must not, for a run that started offline, and must still call it for one that did not.
OFFLINE = {"REPLENISHER_DECIDER": "offline"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, log_dir: Path) -> Iterator[ClaudeStack]:
    spool = {"REPLENISHER_MODEL_SPOOL_DIR": str(tmp_path_factory.mktemp("model-spool"))}
    with claude_stack(tmp_path_factory, log_dir, "pinned", {**spool, **OFFLINE}) as started:
        yield started


@pytest_asyncio.fixture(loop_scope="session")
async def clients(stack: ClaudeStack) -> AsyncIterator[Clients]:
    async with clients_of(stack) as all_three:
        yield all_three


def deciders_of(view: dict[str, Any]) -> set[str]:
    return {h["decided_by"] for h in view["state"]["history"]}


# Quotes outlive two restarts of the service on a loaded machine (a minute and more), so the
# approval the test gives is for the PO the run is still waiting on, not one re-quoted since.
VALID_DAYS = 365  # the world's bound: 91 s of test time


async def started_and_waiting_for_approval(scenario: Scenario) -> tuple[str, dict[str, Any]]:
    await scenario.setup(price=4.0, quote_valid_days=VALID_DAYS)
    run_id = (await scenario.check())["started"]
    # The manager answers only when the test says so: the run is held in this wait.
    await scenario.waiting_for(run_id, "wait_for_approval", within=60)
    return run_id, await scenario.pending_approval()


async def test_a_restart_with_another_decider_changes_new_runs_only(
    stack: ClaudeStack, clients: tuple[httpx.AsyncClient, ...]
) -> None:
    ingress, world, api = clients
    offline_run = Scenario(ingress, world, "pin-offline")
    claude_run = Scenario(ingress, world, "pin-claude")
    after_both = Scenario(ingress, world, "pin-after")

    offline_id, offline_approval = await started_and_waiting_for_approval(offline_run)
    await asyncio.to_thread(stack.restart_service_with, CLAUDE)
    claude_id, claude_approval = await started_and_waiting_for_approval(claude_run)
    # The positive control: this service does call the model, for a run started on it.
    assert await model_requests(api, claude_run.sku)
    await asyncio.to_thread(stack.restart_service_with, OFFLINE)
    calls_before_second_restart = len(await model_requests(api, claude_run.sku))

    await offline_run.decide(offline_approval["po_number"], approved=True, up_to=4.0)
    await claude_run.decide(claude_approval["po_number"], approved=True, up_to=4.0)
    assert (await offline_run.outcome(offline_id, within=90))["outcome"] == "received"
    assert (await claude_run.outcome(claude_id, within=90))["outcome"] == "received"
    await after_both.setup(price=4.0, quote_valid_days=VALID_DAYS)
    after_id = (await after_both.check())["started"]
    await after_both.decide((await after_both.pending_approval(within=60))["po_number"], approved=True, up_to=4.0)
    assert (await after_both.outcome(after_id, within=90))["outcome"] == "received"

    # The run that started offline finished offline, though a Claude service ran its later
    # turns: the stand-in never heard of its SKU, and every turn says who decided.
    offline_view = await offline_run.run_view(offline_id)
    assert await model_requests(api, offline_run.sku) == []
    assert offline_view["state"]["decider"]["decider"] == "offline"
    assert deciders_of(offline_view) == {"offline"}
    assert offline_view["state"]["decider_cost"]["calls"] == 0
    assert [h["tool"] for h in offline_view["state"]["history"]][-1] == "done"

    # The run that started on Claude kept asking Claude after the service went back to offline.
    claude_view = await claude_run.run_view(claude_id)
    calls = await model_requests(api, claude_run.sku)
    assert len(calls) > calls_before_second_restart
    assert claude_view["state"]["decider"] == {**claude_view["state"]["decider"], "decider": "claude", "model": MODEL}
    assert f"claude {MODEL}" in deciders_of(claude_view) and "offline" not in deciders_of(claude_view)
    assert claude_view["state"]["decider_cost"]["calls"] == len(calls)

    # And a run started after the second restart is offline again.
    assert await model_requests(api, after_both.sku) == []
    assert deciders_of(await after_both.run_view(after_id)) == {"offline"}


async def test_a_model_answer_lost_in_a_crash_before_the_journal_is_still_charged(
    stack: ClaudeStack, clients: tuple[httpx.AsyncClient, ...]
) -> None:
    ingress, world, api = clients
    await asyncio.to_thread(stack.restart_service_with, CLAUDE)
    scenario = Scenario(ingress, world, "pin-lost-call")
    await scenario.setup(price=4.0, quote_valid_days=VALID_DAYS)
    run_id = f"replenish-{scenario.sku}-1"
    # Turn 0 has get_quotes alone and asks no one: the first model call is `decide 1`. The
    # service dies after the API answered it, before the answer reaches the journal.
    point = json.dumps({"scope": run_id, "step": "decide 1", "phase": "after"})
    with CRASH_POINTS.open("a") as f:
        f.write(point + "\n")
    assert (await scenario.check())["started"] == run_id
    await eventually(lambda: not stack.service.running, timeout=60, what="the service to die after the model answered")
    fired = CRASH_POINTS.with_name(CRASH_POINTS.name + ".fired").read_text().splitlines()
    assert point in fired
    answered_then_lost = await model_requests(api, scenario.sku)
    assert len(answered_then_lost) == 1, "the kill was to land after exactly one answered call"
    await asyncio.to_thread(stack.service.restart)

    await scenario.decide((await scenario.pending_approval(within=60))["po_number"], approved=True, up_to=4.0)
    outcome = await scenario.outcome(run_id, within=90)
    assert outcome["outcome"] == "received"
    calls = await model_requests(api, scenario.sku)
    # The step ran again: the same turn was asked twice (same tools offered), and both calls
    # the API answered are in the ledger; the lost one is marked as recovered, none unpriced.
    assert [t["name"] for t in calls[0]["tools"]] == [t["name"] for t in calls[1]["tools"]]
    ledger = outcome["cost"]
    assert ledger["calls"] == len(calls) and (ledger["recovered"], ledger["unpriced"]) == (1, 0)
    assert (await scenario.status())["costs"]["calls"] == len(calls)
    history = (await scenario.run_view(run_id))["state"]["history"]
    decided = [h for h in history if h["decided_by"] != "only-allowed"]
    # One decision per asked turn in the run's record: the lost answer was charged, not taken.
    assert len(decided) == len([c for c in calls if c.get("tools")]) - 1
