"""The SKU list as the product writes it, on the real stack: the agent puts its part when it changes
(a check that starts a run, the run's end) and the run its waits, so a page shows what the agent and
the run hold, read from the list alone."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from e2e.scenario import Scenario
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
