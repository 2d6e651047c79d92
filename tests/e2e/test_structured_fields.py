"""Crafted structured fields from a supplier, through the real stack (issue 10, item 4).

The world's fault knobs make a supplier send quotes, order acknowledgements and confirmation
emails with fields of its choosing; each test judges the agent by the world's records (who was
ordered from, how many orders, what was chased, cancelled or closed) and by how the run ended.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.scenario import Scenario, ok
from support import TEST_DAY_SECONDS, eventually

pytestmark = pytest.mark.e2e


async def with_a_rival(scenario: Scenario, rival_price: float) -> str:
    """A second, dearer approved supplier for the scenario's SKU: the one an honest choice skips."""
    rival = f"{scenario.supplier}-b"
    body = {"name": f"Supplier {rival}", "prices": {scenario.sku: rival_price}, "lead_days": 2, "reply_days": 0.5}
    ok(await scenario.world.put(f"/admin/suppliers/{rival}", json={**body, "quote_valid_days": 30}))
    item = {"on_hand": 5, "safety_stock": 20, "target_stock": 100, "suppliers": [scenario.supplier, rival]}
    ok(await scenario.world.put(f"/admin/items/{scenario.sku}", json=item))
    return rival


async def orders_of(scenario: Scenario, supplier: str) -> list[dict[str, Any]]:
    return ok(await scenario.world.get("/admin/orders", params={"supplier": supplier}))["orders"]


async def security_events(scenario: Scenario) -> list[str]:
    return [e["what"] for e in (await scenario.status())["security"]["recent"]]


CRAFTED_QUOTES = {
    # The cheap supplier's quote claims to come from the dearer one, to be ordered in its name.
    "impersonates the rival": ({"supplier": "<rival>"}, "names supplier"),
    "one unit instead of the quantity asked": ({"quantity": 1}, "units, not the"),
    "valid for ten years": ({"valid_until_offset_days": 3650}, "valid for"),
    "already expired": ({"valid_until_offset_days": -1}, "expired"),
    # Positive control: the same cheap supplier, honest, is the one ordered from.
    "control: honest": ({}, None),
}


@pytest.mark.parametrize(("override", "event"), CRAFTED_QUOTES.values(), ids=CRAFTED_QUOTES.keys())
async def test_a_crafted_quote_is_never_ordered_against(
    scenario: Scenario, override: dict[str, Any], event: str | None
) -> None:
    await scenario.setup(price=4.0)
    rival = await with_a_rival(scenario, rival_price=5.0)
    if override:
        crafted = {k: rival if v == "<rival>" else v for k, v in override.items()}
        await scenario.fault(quote_override=crafted)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)
    outcome = await scenario.outcome(run_id, within=60)

    assert outcome["outcome"] == "received"
    cheap, dear = await orders_of(scenario, scenario.supplier), await orders_of(scenario, rival)
    quoted = await scenario.calls(op="quote")
    assert [c["status"] for c in quoted] == [200]  # the crafted quote did reach the agent
    if event is None:
        assert [(o["quantity"], o["order"]["unit_price"]) for o in cheap] == [(95, 4.0)] and dear == []
        assert not any("quote" in e for e in await security_events(scenario))
    else:
        assert cheap == [] and [(o["quantity"], o["order"]["unit_price"]) for o in dear] == [(95, 5.0)]
        assert request["supplier"] == rival and request["unit_price"] == 5.0
        assert any(
            f"quote from {scenario.supplier} refused" in e and event in e for e in await security_events(scenario)
        )


CRAFTED_ACKS = {"another price": {"unit_price": 9.99}, "another quantity": {"quantity": 1000}}


@pytest.mark.parametrize("override", CRAFTED_ACKS.values(), ids=CRAFTED_ACKS.keys())
async def test_an_ack_with_other_terms_is_not_adopted_and_the_order_is_never_placed_twice(
    scenario: Scenario, override: dict[str, Any]
) -> None:
    # Goods months away: stock stays low, so only the unresolved order keeps a second run from buying.
    await scenario.setup(price=4.0, lead_days=300)
    await scenario.fault(ack_override=override)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)

    # Every answer about the PO (the order's and each lookup's) keeps lying: the run ends unknown.
    ended = await scenario.outcome(run_id, within=90)
    assert ended["outcome"] == "unknown" and ended["quantity_ordered"] == 0 and ended["unit_price"] is None
    assert len(await scenario.calls(op="find_order")) >= 5  # asked by PO number, again and again
    orders = await scenario.orders()
    assert [(o["po_number"], o["submissions"], o["cancelled_at"]) for o in orders] == [(request["po_number"], 1, None)]
    closures = ok(await scenario.world.get("/erp/closures", params={"sku": scenario.sku}))["closures"]
    assert closures == []
    events = await security_events(scenario)
    assert any("differs from the PO" in e for e in events)

    # The SKU neither adopts the order on the lie nor buys again while it is unresolved.
    again = await scenario.check()
    assert again["started"] is None and (await scenario.status())["unresolved"]["run_id"] == run_id
    assert any(e.startswith("reconcile:") for e in await security_events(scenario))
    assert len(await scenario.orders()) == 1

    # Positive control: once the supplier tells the truth, the SKU adopts the order (on a check,
    # or on its own reconciliation timer, whichever comes first).
    await scenario.fault(ack_override=None)
    await scenario.check()
    follow_up = f"replenish-{scenario.sku}-2"

    async def adopted() -> dict[str, Any] | None:
        state = (await scenario.run_view(follow_up))["state"]
        return state if state["order_status"] == "placed" and state["adopted_from"] == run_id else None

    state = await eventually(adopted, timeout=30, what="the follow-up run to adopt the order")
    assert (state["order"]["quantity"], state["order"]["unit_price"]) == (95, 4.0)
    assert len(await scenario.orders()) == 1


async def test_a_delivery_stated_a_year_away_is_chased_not_waited_for(scenario: Scenario) -> None:
    # The supplier quotes 2 days but will really take 300 and says "a year": the run chases (twice),
    # then waits only up to the bound (10 days for a 2-day quote) and gives up on the order.
    await scenario.setup(lead_days=300, reply_days=0.5)
    await scenario.fault(quote_override={"lead_days": 2}, delivery_days=365)
    await scenario.configure(reply_after_chase=1, goods_grace=1)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)

    async def cancelled() -> dict[str, Any] | None:
        (order,) = await scenario.orders()
        return order if order["cancelled_at"] is not None else None

    # Bounded well under the year the email states (365 days would be 90 s at test speed).
    order = await eventually(cancelled, timeout=60, what="the run to give up on an order a year away")
    waited_days = (order["cancelled_at"] - order["ack"]["accepted_at"]) / TEST_DAY_SECONDS
    assert order["chases"] == 2
    assert waited_days < 100, waited_days
    assert [r["cause"] for r in order["replies"] if r["status"] == "sent"] == ["order", "chase", "chase"]
    ended = await scenario.outcome(run_id, within=30)
    assert ended["outcome"] == "cancelled"
    assert any("beyond the bound" in e for e in await security_events(scenario))


async def test_a_delivery_stated_within_the_bound_is_waited_for_without_chasing(scenario: Scenario) -> None:
    # Positive control for the test above: same supplier, an honest date, no chase.
    await scenario.setup(lead_days=2, reply_days=0.5)
    await scenario.fault(delivery_days=3)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)
    ended = await scenario.outcome(run_id, within=60)
    assert ended["outcome"] == "received"
    (order,) = await scenario.orders()
    assert order["chases"] == 0
