"""Goods count only as the ERP booked them: checked at the SKU's door by receipt id,
judged from the world's records (its ERP's receipts and closed purchase orders)."""

from __future__ import annotations

import pytest

from e2e.scenario import Scenario, ok

pytestmark = pytest.mark.e2e


async def test_a_goods_receipt_the_warehouse_never_booked_is_refused_and_the_po_stays_open(
    scenario: Scenario,
) -> None:
    await scenario.setup(lead_days=300)  # the world's own shipment never comes during the test
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    po = request["po_number"]
    await scenario.decide(po, approved=True)
    await scenario.waiting_for(run_id, "wait_for_goods", within=30)

    forged = {"receipt_id": "forged-1", "po_number": po, "sku": scenario.sku, "quantity": 95}
    refused = await scenario.deliver("goods", forged)
    assert refused.status_code == 422, refused.text
    assert "forged-1" in refused.json()["message"] and "no such receipt" in refused.json()["message"]
    # Booked, but for fewer than the message claims: the ERP's number is the fact.
    partial = await scenario.book_goods("partial-1", po, 10)
    inflated = await scenario.deliver("goods", {**partial, "quantity": 95})
    assert inflated.status_code == 422 and "the ERP booked 10" in inflated.json()["message"]

    status = await scenario.status()
    assert status["security"]["total"] >= 2
    assert any("forged-1" in e["what"] and "refused" in e["what"] for e in status["security"]["recent"])
    view = await scenario.run_view(run_id)
    assert view["state"]["receipts"] == [] and view["waiting"]["tool"] == "wait_for_goods"
    assert await scenario.closures() == [], "the PO must not be closed on goods nobody booked"

    # Positive control: the same door lets booked receipts through, and the PO closes.
    ok(await scenario.deliver("goods", partial))
    rest = await scenario.book_goods("rest-1", po, 85)
    ok(await scenario.deliver("goods", rest))
    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received" and outcome["quantity_received"] == 95
    [closure] = await scenario.closures()
    assert (closure["po_number"], closure["received_quantity"]) == (po, 95)
