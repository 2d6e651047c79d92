"""The world moves on while a run waits: an approval binds PO, supplier, quantity, price and expiry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from e2e.scenario import JSON, Scenario, ok
from support import eventually

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def manager_approving_everything(scenario: Scenario) -> AsyncIterator[list[JSON]]:
    """A manager who approves each request at its price as it comes in; yields what was approved."""
    approved: list[JSON] = []

    async def approve() -> None:
        while True:
            for entry in await scenario.approval_requests():
                if entry["status"] == "pending":
                    approved.append(entry["request"])
                    await scenario.decide(entry["request"]["po_number"], approved=True)
            await asyncio.sleep(0.1)

    task = asyncio.create_task(approve())
    try:
        yield approved
    finally:
        task.cancel()


async def history(scenario: Scenario, run_id: str) -> list[JSON]:
    return (await scenario.run_view(run_id))["state"]["history"]


async def test_a_price_rise_during_the_approval_wait_is_refused_and_approved_again(scenario: Scenario) -> None:
    await scenario.setup(price=4.0)
    run_id = (await scenario.check())["started"]
    first = await scenario.pending_approval()
    await scenario.fault(price_rise_pct=10)  # 4.40 from now on
    async with manager_approving_everything(scenario) as approved:
        outcome = await scenario.outcome(run_id, within=60)

    assert outcome["outcome"] == "received"
    assert outcome["unit_price"] == pytest.approx(4.4)
    turns = await history(scenario, run_id)
    refusals = [t for t in turns if t["tool"] == "place_order" and t["summary"].startswith("refused")]
    assert len(refusals) == 1 and "above the approved price" in refusals[0]["summary"]
    assert [r["unit_price"] for r in approved] == [pytest.approx(4.0), pytest.approx(4.4)]
    assert approved[0]["po_number"] == first["po_number"] != approved[1]["po_number"]
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == approved[1]["po_number"]
    assert orders[0]["order"]["unit_price"] == pytest.approx(4.4)


async def test_an_approval_that_expired_with_its_quote_is_refused_and_the_run_requotes(scenario: Scenario) -> None:
    await scenario.setup(quote_valid_days=12)  # 3 s: time to draft and ask, on a loaded machine too
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    async def quote_expired() -> bool:
        clock = ok(await scenario.world.get("/admin/clock"))
        return clock["now"] > request["expires_at"]

    await eventually(quote_expired, timeout=10, what="the quote behind the approval to expire")
    # The quote the run asks for next must outlast the approval round that follows, however loaded
    # the machine: a 3 s quote expired again under an always-replay pass (load 12), round after
    # round, until the run gave up. The supplier's terms change now; the expired quote keeps its own.
    await scenario.supplier_terms(quote_valid_days=120)
    await scenario.decide(request["po_number"], approved=True)
    async with manager_approving_everything(scenario):
        outcome = await scenario.outcome(run_id, within=60)

    assert outcome["outcome"] == "received", outcome
    turns = await history(scenario, run_id)
    refusal = next(t for t in turns if t["tool"] == "place_order")
    assert "expired" in refusal["summary"]
    assert [t["tool"] for t in turns].count("get_quotes") == 2
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] != request["po_number"]


async def test_an_approval_naming_another_po_is_refused_and_recorded(scenario: Scenario) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    other_po = {"po_number": "PO-SOMEONE-ELSE-1", "token": request["token"], "approved": True, "up_to": 9.0}
    ok(await scenario.deliver("approval", other_po))

    async def refused() -> list[str]:
        state = (await scenario.run_view(run_id))["state"]
        return [e["what"] for e in state["security"]["recent"]] if state else []

    events = await eventually(refused, timeout=20, what="the approval for another PO to be refused")
    assert "does not match" in events[0]
    view = await scenario.run_view(run_id)
    assert view["state"]["approval"]["status"] == "pending"
    assert view["waiting"]["tool"] == "wait_for_approval"
    assert await scenario.calls(op="place_order") == []

    await scenario.decide(request["po_number"], approved=True)
    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received" and outcome["unit_price"] == request["unit_price"]
