"""The SKU list as the product writes it, on the real stack: the agent puts its part when it changes
(a check that starts a run, the run's end) and the run its waits, so a page shows what the agent and
the run hold, read from the list alone."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from e2e.scenario import Scenario, ok
from replenisher.domain.sku_list import ListEntry, ShardQuery
from replenisher.operations.restate.http import RestateHttp
from replenisher.operations.restate.sku_list import list_page
from support import eventually

pytestmark = pytest.mark.e2e


async def entry_of(ingress: httpx.AsyncClient, sku: str, **params: Any) -> ListEntry | None:
    """The SKU's entry on a page of the list (searched by its name), or None when the page does not have it."""
    http = RestateHttp(str(ingress.base_url), "", client=ingress)
    page = await list_page(http, ShardQuery(now=0.0, upto=0, q=sku, **params), 0, 10)
    return next((e for e in page.entries if e.sku == sku), None)


async def test_a_run_waiting_for_the_manager_shows_on_the_list_and_its_end_clears_the_wait(
    scenario: Scenario,
) -> None:
    await scenario.setup(on_hand=5, safety_stock=20, target_stock=100, price=4.0)
    assert await entry_of(scenario.ingress, scenario.sku) is None, "no agent yet: not on the list"
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    async def waiting() -> ListEntry | None:
        return await entry_of(scenario.ingress, scenario.sku, waiting="manager")

    entry = await eventually(waiting, timeout=30, what="the run's wait on the list")
    assert (entry.active_run, entry.runs, entry.on_hand, entry.safety_stock) == (run_id, 1, 5, 20)
    assert (entry.waiting_tool, entry.asked_price) == ("wait_for_approval", request["unit_price"])
    assert entry.waiting_since is not None and entry.outcome is None
    # Until when it waits and whose price, as the run's own view says.
    view = await scenario.run_view(run_id)
    assert entry.waiting_until == round(view["waiting"]["deadline"]), (entry, view["waiting"])
    assert entry.supplier == request["supplier"]
    assert await entry_of(scenario.ingress, scenario.sku, waiting="nobody") is None

    await scenario.decide(request["po_number"], approved=True)
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"

    async def received() -> ListEntry | None:
        found = await entry_of(scenario.ingress, scenario.sku)
        return found if found is not None and found.outcome == "received" else None

    done = await eventually(received, timeout=30, what="the run's end on the list")
    assert (done.active_run, done.waiting_tool, done.asked_price, done.problem) == (None, None, None, None)
    assert done.revision == 2, (
        "one put as the check started the run, one at its end: none for what the list does not show"
    )
    assert await entry_of(scenario.ingress, scenario.sku, waiting="nobody") is not None


async def _commands(admin: Any, run_id: str) -> list[str]:
    """The run's journaled steps (their names) and sends to the SKU list (`SkuList/<handler>`), in order.
    Read by the run's invocation id: a join that renders `entry_json` makes Restate render every
    journal entry it holds."""
    found = await admin.asql(f"SELECT id FROM sys_invocation WHERE target = 'Replenish/{run_id}/run'")
    assert len(found) == 1, found
    rows = await admin.asql(
        f"SELECT entry_type, name, entry_lite_json FROM sys_journal WHERE id = '{found[0]['id']}' "
        "AND entry_type IN ('Command: Run', 'Command: OneWayCall') ORDER BY index"
    )
    commands = []
    for row in rows:
        if row["entry_type"] == "Command: Run":
            commands.append(row.get("name") or "")
            continue
        target = json.loads(row["entry_lite_json"])["Command"]["OneWayCall"]["invocation_target"]
        called = target.get("VirtualObject", {})
        if called.get("name") == "SkuList":
            commands.append(f"SkuList/{called['handler']}")
    return commands


async def _list_sends(admin: Any, run_id: str) -> list[str]:
    """The handlers of `SkuList` the run's journal sent to, in order."""
    return [c.removeprefix("SkuList/") for c in await _commands(admin, run_id) if c.startswith("SkuList/")]


async def test_a_replenishment_tells_the_list_each_wait_once_and_its_end_hides_the_last(
    scenario: Scenario, admin: Any
) -> None:
    # Three waits (the manager, the supplier's reply, the goods): each put on the list when it begins; a
    # wait's end is not sent on its own, as the next wait replaces it and the run's end hides it.
    run_id = await scenario.approved_run()
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"
    assert await _list_sends(admin, run_id) == ["put_wait"] * 3

    async def ended() -> ListEntry | None:
        found = await entry_of(scenario.ingress, scenario.sku)
        return found if found is not None and found.outcome == "received" else None

    done = await eventually(ended, timeout=30, what="the run's end on the list")
    assert (done.active_run, done.waiting_tool, done.asked_price) == (None, None, None)
    assert await entry_of(scenario.ingress, scenario.sku, waiting="nobody") is not None
    assert await entry_of(scenario.ingress, scenario.sku, waiting="supplier") is None


async def test_a_run_kept_from_its_supplier_shows_on_the_list_as_active_and_waiting_for_nobody(
    scenario: Scenario, admin: Any
) -> None:
    # The order is taken but its answer lost, then the supplier stays away: the order fails after its
    # retries, and the run checks the order's status, resting a while (1, 2, 4, ... days) after each
    # failed check. Through all of it the list shows the run waiting for nobody, not for the manager.
    run_id = await scenario.approved_run(lose_reply_calls=1, down_after_order_calls=100_000)
    try:
        await _shown_resting(scenario, admin, run_id)
    finally:
        ok(await scenario.world.delete(f"/faults/suppliers/{scenario.supplier}"))


async def _shown_resting(scenario: Scenario, admin: Any, run_id: str) -> None:
    """The run on the list as active and waiting for nobody once its order failed, and in its history."""

    async def resting() -> ListEntry | None:
        # Waiting for nobody *after* a wait of this run: the list shows nobody too before the run's first
        # wait reaches it (the send is one-way), and a later word of the run's waits always wins.
        found = await entry_of(scenario.ingress, scenario.sku, waiting="nobody")
        heard = found is not None and found.active_run == run_id and found.wait_run is not None
        return found if heard else None

    entry = await eventually(resting, timeout=60, what="the run active and waiting for nobody on the list")
    assert (entry.waiting_tool, entry.asked_price, entry.outcome) == (None, None, None)
    assert await entry_of(scenario.ingress, scenario.sku, waiting="manager") is None
    # Told once it began, and its end once, when the order failed.
    assert await _list_sends(admin, run_id) == ["put_wait", "put_wait"]

    async def order_failed() -> list[str] | None:
        # Its turn is recorded right after the end is sent: read until it is.
        view = await scenario.run_view(run_id)
        assert view["waiting"] is None
        placed = [t["summary"] for t in view["state"]["history"] if t["tool"] == "place_order"]
        return placed or None

    placed = await eventually(order_failed, timeout=10, what="the failed order in the run's history")
    assert "may exist" in placed[0], placed


async def test_a_wait_that_ended_leaves_the_list_once_a_step_fails_after_its_retries(
    scenario: Scenario, admin: Any
) -> None:
    # Every attempt of the order fails (the supplier down), so the step fails after its retries: the
    # approval's end is told then, not left on the list through the steps that follow.
    run_id = await scenario.approved_run(down_calls=4)
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"

    commands = await _commands(admin, run_id)
    placed = [i for i, c in enumerate(commands) if c.startswith("place_order")]
    assert len(placed) == 2, commands  # the failed order, and the one placed again after the check
    # The approval's wait, its end right after the failed order, then the supplier's reply and the goods.
    assert commands[placed[0] + 1] == "SkuList/put_wait", commands
    assert await _list_sends(admin, run_id) == ["put_wait"] * 4
    turns = [(t["tool"], t["summary"]) for t in (await scenario.run_view(run_id))["state"]["history"]]
    assert "may exist" in next(summary for tool, summary in turns if tool == "place_order")
