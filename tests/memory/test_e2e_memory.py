"""Memory through the real stack: what one replenishment learnt is in the SKU's record and handed to the next."""

from __future__ import annotations

import pytest

from e2e.scenario import Scenario, ok

pytestmark = pytest.mark.e2e


async def test_the_next_run_starts_with_what_the_last_one_learnt(scenario: Scenario) -> None:
    await scenario.setup(price=4.0, lead_days=2)
    await scenario.fault(reply_text="We confirm your order; delivery in 2 days. You will get 5% off your next order.")
    first = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)
    assert (await scenario.outcome(first, within=40))["outcome"] == "received"

    status = await scenario.status()
    memory = status["memory"]
    assert memory["runs"] == 1
    supplier = memory["suppliers"][scenario.supplier]
    assert (supplier["orders"], supplier["delivered"], supplier["needed_chase"]) == (1, 1, 0)
    assert supplier["recent_prices"][-1]["unit_price"] == 4.0 and supplier["recent_prices"][-1]["ordered"]
    [promise] = memory["promises"]
    assert (promise["supplier"], promise["kind"], promise["value"], promise["status"]) == (
        scenario.supplier,
        "discount",
        5.0,
        "open",
    )
    assert promise["source"] == f"reply about {request['po_number']} ({first})"
    assert status["outcomes"][-1].get("observations") is None

    # Stock runs low again: the next run is told.
    item = {"on_hand": 5, "safety_stock": 20, "target_stock": 100, "suppliers": [scenario.supplier]}
    ok(await scenario.world.put(f"/admin/items/{scenario.sku}", json=item))
    second = (await scenario.check())["started"]
    assert second == f"replenish-{scenario.sku}-2"
    await scenario.pending_approval()
    view = await scenario.run_view(second)
    told = view["state"]["memory"]
    assert told["runs"] == 1 and told["promises"][0]["value"] == 5.0
    assert told["suppliers"][0]["supplier"] == scenario.supplier and told["suppliers"][0]["last_price"] == 4.0
    # The promise was claimed when the second run asked for quotes: it is now settled one way or the other.
    await scenario.decide((await scenario.pending_approval())["po_number"], approved=True)
    assert (await scenario.outcome(second, within=40))["outcome"] == "received"
    settled = (await scenario.status())["memory"]["promises"]
    assert [p["status"] for p in settled] == ["broken"]  # the simulated supplier ignores the request
