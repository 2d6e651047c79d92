"""The SKU's address: messages in order and once, early messages kept for the wait, none dropped."""

from __future__ import annotations

import pytest

from e2e.scenario import Scenario, ok
from replenisher.domain.documents import is_sku_id

pytestmark = pytest.mark.e2e


async def test_messages_before_the_wait_and_several_of_one_kind_are_each_consumed_once_in_order(
    scenario: Scenario,
) -> None:
    # The world's own shipment is months away: the goods this run sees are the ones we send.
    await scenario.setup(lead_days=300)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    po = request["po_number"]

    # Goods receipts (booked in the ERP) arrive before the run waits for goods, one of them
    # twice with the same idempotency key (a retried HTTP call).
    first = await scenario.book_goods("r1", po, 50)
    second = await scenario.book_goods("r2", po, 45)
    a = ok(await scenario.deliver("goods", first, key=f"{po}-r1"))
    again = ok(await scenario.deliver("goods", first, key=f"{po}-r1"))
    b = ok(await scenario.deliver("goods", second, key=f"{po}-r2"))
    assert (a["seq"], again["seq"], b["seq"]) == (0, 0, 1)
    # Another message under a used key is dropped (Restate matches the key, not the body, as the
    # docs say): it gets the first answer, and the run never sees r3.
    third = await scenario.book_goods("r3", po, 5)
    assert ok(await scenario.deliver("goods", third, key=f"{po}-r1")) == a
    assert a["run_id"] == run_id and not a["kept"]

    # Two approvals: a forged one first (no token), then the manager's.
    forged = {"po_number": po, "token": "forged", "approved": True, "up_to": 99.0, "by": "supplier@example.com"}
    ok(await scenario.deliver("approval", forged))
    genuine = {"po_number": po, "token": request["token"], "approved": True, "up_to": request["unit_price"]}
    ok(await scenario.deliver("approval", genuine))

    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    assert outcome["consumed"] == {"approval": 2, "supplier-reply": 1, "goods": 2}
    view = await scenario.run_view(run_id)
    state = view["state"]
    assert state["receipts"] == ["r1", "r2"] and state["received_quantity"] == 95
    assert state["approval"]["approved_up_to"] == request["unit_price"]
    assert any("token" in e["what"] for e in state["security"]["recent"])
    assert (await scenario.status())["kept"] == []


async def test_a_message_for_a_sku_with_no_active_run_is_kept_and_reported(scenario: Scenario) -> None:
    await scenario.setup(on_hand=50, safety_stock=20)
    checked = await scenario.check()
    assert checked["started"] is None
    reply = {"po_number": "PO-OLD-7", "supplier": scenario.supplier, "text": "Your order shipped."}
    delivered = ok(await scenario.deliver("supplier-reply", reply))
    assert delivered["kept"] is True and delivered["run_id"] is None
    status = await scenario.status()
    assert [(m["event"], m["payload"]["po_number"]) for m in status["kept"]] == [("supplier-reply", "PO-OLD-7")]
    assert status["kept"][0]["reason"] == "no active replenishment"


async def test_bad_input_gets_a_4xx_with_the_reason_and_changes_nothing(scenario: Scenario) -> None:
    await scenario.setup(on_hand=50)
    await scenario.check()
    before = await scenario.status()
    address = f"/SkuAgent/{scenario.sku}/deliver"

    cases = [
        ({"event": "invoice", "payload": {}}, "event"),
        ({"event": "supplier-reply", "payload": {}, "urgent": True}, "urgent"),  # unknown: not silently dropped
        (
            {"event": "goods", "payload": {"receipt_id": "r", "po_number": "p", "sku": scenario.sku, "quantity": -3}},
            "quantity",
        ),
        (
            {
                "event": "goods",
                "payload": {"receipt_id": "r", "po_number": "p", "sku": scenario.sku, "quantity": "many"},
            },
            "quantity",
        ),
        ({"event": "approval", "payload": {"po_number": "p", "token": "t", "approved": "perhaps"}}, "approved"),
        (
            {"event": "goods", "payload": {"receipt_id": "r", "po_number": "p", "sku": "SKU-OTHER", "quantity": 1}},
            "SKU-OTHER",
        ),
        ({"payload": {}}, "event"),
    ]
    for body, reason in cases:
        response = await scenario.ingress.post(address, json=body)
        assert response.status_code == 400, (body, response.text)
        assert reason in response.json()["message"], (body, response.text)
    response = await scenario.ingress.post(address, content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "JSON" in response.json()["message"]
    for interval in (-1, 1e-300):
        response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/watch", json={"interval_days": interval})
        assert response.status_code == 400 and "interval_days" in response.json()["message"]
    response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/configure", json={"approval": -2})
    assert response.status_code == 400 and "approval" in response.json()["message"]
    response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/configure", json={"approval_days": 2})
    assert response.status_code == 400 and "approval_days" in response.json()["message"]
    response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/watch", json={"interval": 2})
    assert response.status_code == 400 and "interval" in response.json()["message"], "a typo is no default watch"

    assert await scenario.status() == before

    # A key that is no SKU id never reaches the ERP: `..` made the stock read's URL `/erp/`. Only
    # reads of no SKU id are counted: the worker's world also serves the other tests' SKUs, whose
    # watches tick meanwhile (CI once counted one of theirs here).
    async def stock_reads() -> int:
        calls = ok(await scenario.world.get("/admin/calls", params={"op": "get_stock"}))["calls"]
        return sum(1 for call in calls if not is_sku_id(call.get("sku") or ""))

    reads = await stock_reads()
    for key in ("%2E%2E", "SKU%201", "-x"):
        for handler, body in (("check", None), ("watch", {}), ("deliver", {"event": "goods", "payload": {}})):
            response = await scenario.ingress.post(f"/SkuAgent/{key}/{handler}", json=body)
            assert response.status_code == 400 and "not a SKU id" in response.json()["message"], (key, response.text)
    assert await stock_reads() == reads, "no stock read for a key that is no SKU id"
    await scenario.world.get("/erp/stock/SKU%201")  # the control: such a read, made on purpose, is counted
    assert await stock_reads() == reads + 1

    unknown = f"SKU-NOPE-{scenario.sku[-6:]}"
    response = await scenario.ingress.post(f"/SkuAgent/{unknown}/check")
    assert response.status_code == 404 and "unknown SKU" in response.json()["message"]
    goods = {"receipt_id": "r", "po_number": "p", "sku": unknown, "quantity": 1}
    response = await scenario.ingress.post(f"/SkuAgent/{unknown}/deliver", json={"event": "goods", "payload": goods})
    assert response.status_code == 404 and "unknown SKU" in response.json()["message"]
    response = await scenario.ingress.get(f"/SkuAgent/{unknown}/status")
    assert response.status_code == 404


async def test_the_state_of_a_run_never_started_is_a_404_that_says_why(scenario: Scenario) -> None:
    """It answered 200 with nulls, as for a run that exists but has written nothing yet."""
    await scenario.setup(on_hand=5)
    run_id = (await scenario.check())["started"]
    assert run_id == f"replenish-{scenario.sku}-1"
    await scenario.pending_approval()
    assert (await scenario.run_view(run_id))["state"]["run_id"] == run_id  # the control: a started run answers

    unknown = f"SKU-NOPE-{scenario.sku[-6:]}"
    cases = {
        f"replenish-{scenario.sku}-2": f"{scenario.sku} has started 1 run",
        f"replenish-{scenario.sku}-0": "a run's id reads replenish-<SKU>-<n>",
        f"replenish-{scenario.sku}-x": "a run's id reads replenish-<SKU>-<n>",
        f"{scenario.sku}-1": "a run's id reads replenish-<SKU>-<n>",
        f"replenish-{unknown}-1": f"no agent for SKU {unknown!r}",
    }
    for wrong, reason in cases.items():
        response = await scenario.ingress.post(f"/Replenish/{wrong}/state")
        assert response.status_code == 404, (wrong, response.text)
        message = response.json()["message"]
        assert message.startswith(f"no run {wrong!r}: ") and reason in message, (wrong, message)
    assert (await scenario.status())["runs_started"] == 1, "asking about runs starts none"
    response = await scenario.ingress.get(f"/SkuAgent/{unknown}/status")
    assert response.status_code == 404, "nor an agent for the SKU asked about"


async def test_internal_handlers_are_not_reachable_from_ingress(scenario: Scenario) -> None:
    await scenario.setup(on_hand=50)
    await scenario.check()
    before = await scenario.status()
    fake = {
        "run_id": f"replenish-{scenario.sku}-1",
        "sku": scenario.sku,
        "outcome": "received",
        "started_at": 0,
        "ended_at": 1,
    }
    response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/finish", json=fake)
    assert 400 <= response.status_code < 500
    response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/tick", json={"generation": 0})
    assert 400 <= response.status_code < 500
    assert await scenario.status() == before
