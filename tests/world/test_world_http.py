"""The world over real HTTP (hypercorn subprocess), driven through the agent's own adapters."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from replenisher.adapters import HttpWorld, Rejected
from replenisher.domain.documents import (
    CancelRequest,
    ChaseRequest,
    PurchaseOrder,
    PurchaseOrderClosure,
    QuoteRequest,
)

from .support import DAY_SECONDS, Names, WorldAdmin, eventually


def order_for(names: Names, k: int = 1, quantity: int = 10, unit_price: float = 10.0) -> PurchaseOrder:
    return PurchaseOrder(
        po_number=names.po(k),
        sku=names.sku,
        supplier=names.supplier,
        quantity=quantity,
        unit_price=unit_price,
        quote_id="q-1",
    )


async def arrange(
    world_admin: WorldAdmin, names: Names, *, price: float = 10.0, on_hand: int = 10, **supplier: object
) -> None:
    await world_admin.supplier(names.supplier, {names.sku: price}, **supplier)
    await world_admin.item(names.sku, [names.supplier], on_hand=on_hand)


# --- routing -------------------------------------------------------------------------


async def test_health_unknown_routes_and_wrong_methods(world_http: httpx.AsyncClient) -> None:
    assert (await world_http.get("/health")).json() == {"ok": True}
    missing = await world_http.get("/no/such/thing")
    assert missing.status_code == 404 and "error" in missing.json()
    wrong = await world_http.delete("/health")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET" and "error" in wrong.json()


async def test_every_method_of_a_path_is_allowed_and_the_schema_is_served(world_http: httpx.AsyncClient) -> None:
    wrong = await world_http.post("/faults/suppliers/acme", json={})
    assert wrong.status_code == 405 and wrong.headers["allow"] == "DELETE, GET, PUT", wrong.headers
    assert wrong.json() == {"error": "method POST not allowed here"}
    schema = (await world_http.get("/openapi.json")).json()
    assert set(schema["paths"]["/faults/suppliers/{sid}"]) == {"get", "put", "delete"}
    # Refusals are documented in the world's shape, not as FastAPI's 422 validation body.
    quote = schema["paths"]["/suppliers/{sid}/quotes"]["post"]["responses"]
    assert "422" not in quote and quote["4XX"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


async def test_a_po_number_with_a_slash_is_one_segment_and_found_again(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    po = order_for(names).model_copy(update={"po_number": f"{names.po()}/a 50%"})
    ack = await adapters.suppliers.place_order(po)
    assert ack.po_number == po.po_number
    assert await adapters.suppliers.find_order(names.supplier, po.po_number) == ack
    [call] = await world_admin.calls(supplier=names.supplier, op="find_order")
    assert (call["po_number"], call["sku"], call["status"]) == (po.po_number, names.sku, 200)


async def test_a_supplier_that_is_down_answers_503_before_it_reads_the_request(
    world_admin: WorldAdmin, world_http: httpx.AsyncClient, names: Names
) -> None:
    await arrange(world_admin, names)
    await world_admin.faults(names.supplier, down_calls=1)
    down = await world_http.post(f"/suppliers/{names.supplier}/quotes", content=b"{not json")
    assert down.status_code == 503 and "unavailable" in down.json()["error"]
    bad = await world_http.post(f"/suppliers/{names.supplier}/quotes", content=b"{not json")
    assert bad.status_code == 400 and "error" in bad.json()
    unknown = await world_http.post("/suppliers/nobody/quotes", content=b"{not json")
    assert unknown.status_code == 404 and "unknown supplier nobody" in unknown.json()["error"]
    assert (await world_admin.ok("GET", f"/faults/suppliers/{names.supplier}"))["down_calls"] == 0
    too_big = await world_http.post(f"/suppliers/{names.supplier}/quotes", content=b" " * 1_000_001)
    assert too_big.status_code == 413 and "larger than" in too_big.json()["error"]
    calls = await world_admin.calls(supplier=names.supplier, op="quote")
    assert [c["status"] for c in calls] == [503, 400]


# --- quotes and prices ---------------------------------------------------------------


async def test_quote_and_live_price_follow_base_price_and_price_rise(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names, price=12.5, lead_days=3.0, quote_valid_days=2.0)
    before = time.time()
    quote = await adapters.suppliers.quote(names.supplier, QuoteRequest(sku=names.sku, quantity=40))
    assert (quote.supplier, quote.sku, quote.quantity, quote.unit_price, quote.lead_days) == (
        names.supplier,
        names.sku,
        40,
        12.5,
        3.0,
    )
    assert before + 2 * DAY_SECONDS <= quote.valid_until <= time.time() + 2 * DAY_SECONDS
    assert (await adapters.suppliers.live_price(names.supplier, names.sku)).unit_price == 12.5

    await world_admin.faults(names.supplier, price_rise_pct=20)
    assert (await adapters.suppliers.live_price(names.supplier, names.sku)).unit_price == 15.0
    risen = await adapters.suppliers.quote(names.supplier, QuoteRequest(sku=names.sku, quantity=40))
    assert risen.unit_price == 15.0 and risen.quote_id != quote.quote_id


async def test_the_first_call_of_an_operation_is_found_by_key_or_waited_for(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names, world_http: httpx.AsyncClient
) -> None:
    await arrange(world_admin, names, price=3.0)
    query = {"sku": names.sku, "op": "live_price"}
    assert (await world_http.get("/admin/first-call", params=query)).json()["at"] is None

    # A question nobody's call answers is held to its deadline, the test's, and answered then.
    began = time.monotonic()
    lapsed = (await world_http.get("/admin/first-call", params={**query, "wait": "0.3"})).json()
    assert lapsed["at"] is None and lapsed["waiting"] == 0 and time.monotonic() - began >= 0.3

    # Held open by the world until the call comes: one question, no polling. The call is made once
    # the world says it holds the question (so the call, not the look-up, answers it).
    waiting = asyncio.create_task(world_http.get("/admin/first-call", params={**query, "wait": "30"}, timeout=40))

    async def held() -> bool:
        return (await world_http.get("/admin/first-call", params=query)).json()["waiting"] == 1

    await eventually(held, timeout=10, what="the world to hold the question open")
    assert not waiting.done()
    before = time.time()
    await adapters.suppliers.live_price(names.supplier, names.sku)
    # Answered by the call, well before the question's own 30 s deadline.
    first = (await asyncio.wait_for(waiting, 10)).json()
    assert first["op"] == "live_price" and before - 1 <= first["at"] <= time.time() and first["waiting"] == 0

    await adapters.suppliers.live_price(names.supplier, names.sku)
    again = (await world_http.get("/admin/first-call", params=query)).json()
    assert again["at"] == first["at"], "the first call stays the first"
    bad = await world_http.get("/admin/first-call", params={**query, "wait": "3600"})
    assert bad.status_code == 400 and "wait" in bad.text


async def test_drifting_prices_stay_within_the_drift(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names, price=100.0, price_drift=0.1)
    price = await adapters.suppliers.live_price(names.supplier, names.sku)
    assert 90.0 <= price.unit_price <= 110.0


async def test_unknown_supplier_or_sku_is_rejected(world_admin: WorldAdmin, adapters: HttpWorld, names: Names) -> None:
    await arrange(world_admin, names)
    with pytest.raises(Rejected) as not_carried:
        await adapters.suppliers.quote(names.supplier, QuoteRequest(sku="SKU-NOT-CARRIED", quantity=1))
    assert not_carried.value.status == 404 and "does not carry" in not_carried.value.reason
    with pytest.raises(Rejected) as no_supplier:
        await adapters.suppliers.live_price("nobody", names.sku)
    assert no_supplier.value.status == 404 and "unknown supplier" in no_supplier.value.reason
    with pytest.raises(Rejected) as no_sku:
        await adapters.erp.get_stock("SKU-NEVER-SET-UP")
    assert no_sku.value.status == 404


# --- orders --------------------------------------------------------------------------


async def test_same_po_twice_makes_one_order(world_admin: WorldAdmin, adapters: HttpWorld, names: Names) -> None:
    await arrange(world_admin, names)
    first = await adapters.suppliers.place_order(order_for(names))
    again = await adapters.suppliers.place_order(order_for(names))
    assert again == first
    orders = await world_admin.orders(supplier=names.supplier)
    assert [(o["po_number"], o["submissions"]) for o in orders] == [(names.po(), 2)]
    calls = await world_admin.calls(supplier=names.supplier, op="place_order")
    assert [c["status"] for c in calls] == [201, 200]
    assert await adapters.suppliers.find_order(names.supplier, names.po()) == first


async def test_lookups_and_chases_are_logged_with_the_sku_of_the_order(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    await adapters.suppliers.place_order(order_for(names))
    assert await adapters.suppliers.find_order(names.supplier, names.po()) is not None
    assert await adapters.suppliers.find_order(names.supplier, "PO-NOPE") is None
    found = await world_admin.calls(supplier=names.supplier, op="find_order")
    assert [(c["po_number"], c["sku"], c["status"]) for c in found] == [
        (names.po(), names.sku, 200),
        ("PO-NOPE", None, 404),  # no order, so no SKU to name: the world invents none
    ]
    by_sku = await world_admin.calls(sku=names.sku)
    assert [c["op"] for c in by_sku] == ["place_order", "find_order"]


async def test_same_po_with_other_content_is_a_conflict(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    ack = await adapters.suppliers.place_order(order_for(names, quantity=10))
    with pytest.raises(Rejected) as conflict:
        await adapters.suppliers.place_order(order_for(names, quantity=99))
    assert conflict.value.status == 409
    assert await adapters.suppliers.find_order(names.supplier, names.po()) == ack
    assert [o["submissions"] for o in await world_admin.orders(supplier=names.supplier)] == [1]


async def test_idempotency_key_is_required_and_must_match(
    world_admin: WorldAdmin, world_http: httpx.AsyncClient, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    body = order_for(names).model_dump(mode="json")
    missing = await world_http.post(f"/suppliers/{names.supplier}/orders", json=body)
    other = await world_http.post(f"/suppliers/{names.supplier}/orders", json=body, headers={"Idempotency-Key": "PO-X"})
    assert (missing.status_code, other.status_code) == (400, 400)
    assert "Idempotency-Key" in missing.json()["error"] and "Idempotency-Key" in other.json()["error"]
    assert await world_admin.orders(supplier=names.supplier) == []
    assert await adapters.suppliers.find_order(names.supplier, names.po()) is None


async def test_find_chase_and_cancel_of_an_unknown_order_are_refused(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    assert await adapters.suppliers.find_order(names.supplier, "PO-NOPE") is None
    with pytest.raises(Rejected) as chase:
        await adapters.suppliers.chase(names.supplier, "PO-NOPE", ChaseRequest(message="where is it?"), "k-1")
    with pytest.raises(Rejected) as cancel:
        await adapters.suppliers.cancel(names.supplier, "PO-NOPE", CancelRequest(reason="not needed"))
    assert (chase.value.status, cancel.value.status) == (404, 404)


async def test_po_numbers_with_odd_characters_survive_the_round_trip(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    po = order_for(names).model_copy(update={"po_number": "PO 7/2026?x#1"})
    ack = await adapters.suppliers.place_order(po)
    assert ack.po_number == "PO 7/2026?x#1"
    assert await adapters.suppliers.find_order(names.supplier, "PO 7/2026?x#1") == ack


# --- faults --------------------------------------------------------------------------


async def test_a_supplier_that_is_down_answers_503_changes_nothing_then_recovers(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    await world_admin.faults(names.supplier, down_calls=2)
    for _ in range(2):
        with pytest.raises(httpx.HTTPStatusError) as down:
            await adapters.suppliers.place_order(order_for(names))
        assert down.value.response.status_code == 503
    assert await world_admin.orders(supplier=names.supplier) == []
    ack = await adapters.suppliers.place_order(order_for(names))
    assert ack.po_number == names.po()
    calls = await world_admin.calls(supplier=names.supplier, op="place_order")
    assert [c["status"] for c in calls] == [503, 503, 201]
    assert (await world_admin.ok("GET", f"/faults/suppliers/{names.supplier}"))["down_calls"] == 0


async def test_an_order_whose_answer_was_lost_exists_and_can_be_found(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    await world_admin.faults(names.supplier, lose_reply_calls=1)
    with pytest.raises(httpx.HTTPStatusError) as lost:
        await adapters.suppliers.place_order(order_for(names))
    assert lost.value.response.status_code == 503
    found = await adapters.suppliers.find_order(names.supplier, names.po())
    assert found is not None and found.quantity == 10
    assert await adapters.suppliers.place_order(order_for(names)) == found
    assert [o["submissions"] for o in await world_admin.orders(supplier=names.supplier)] == [2]


async def test_faults_can_be_read_and_cleared(
    world_admin: WorldAdmin, world_http: httpx.AsyncClient, names: Names
) -> None:
    await arrange(world_admin, names)
    await world_admin.faults(names.supplier, quiet=True, price_rise_pct=5)
    merged = await world_admin.faults(names.supplier, drop_replies=1)
    assert (merged["quiet"], merged["price_rise_pct"], merged["drop_replies"]) == (True, 5.0, 1)
    cleared = (await world_http.delete(f"/faults/suppliers/{names.supplier}")).json()
    assert (cleared["quiet"], cleared["price_rise_pct"], cleared["drop_replies"]) == (False, 0.0, 0)
    assert (await world_http.put("/faults/suppliers/nobody", json={"quiet": True})).status_code == 404


async def test_quote_override_sends_crafted_fields_until_cleared(
    world_admin: WorldAdmin, world_http: httpx.AsyncClient, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names, price=10.0, lead_days=2.0)
    crafted = {"supplier": "someone-else", "quantity": -5, "quote_id": "Q" * 5000, "lead_days": 0}
    await world_admin.faults(names.supplier, quote_override={**crafted, "valid_until_offset_days": 3650})
    before = time.time()
    sent = await world_admin.ok("POST", f"/suppliers/{names.supplier}/quotes", json={"sku": names.sku, "quantity": 7})
    assert {k: sent[k] for k in crafted} == crafted
    assert (sent["sku"], sent["unit_price"]) == (names.sku, 10.0)  # fields not overridden stay true
    assert sent["valid_until"] >= before + 3650 * DAY_SECONDS
    await world_admin.faults(names.supplier, quote_override=None)
    honest = await adapters.suppliers.quote(names.supplier, QuoteRequest(sku=names.sku, quantity=7))
    assert (honest.supplier, honest.quantity, honest.lead_days) == (names.supplier, 7, 2.0)
    too_long = {"quote_override": {"sku": "x" * 100_001}}
    assert (await world_http.put(f"/faults/suppliers/{names.supplier}", json=too_long)).status_code == 400


async def test_ack_override_changes_what_is_said_not_the_order_held(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names)
    await world_admin.faults(names.supplier, ack_override={"unit_price": 99.0, "quantity": 1000, "order_id": "X-1"})
    placed = await adapters.suppliers.place_order(order_for(names, quantity=10, unit_price=10.0))
    found = await adapters.suppliers.find_order(names.supplier, names.po())
    assert placed == found and (placed.unit_price, placed.quantity, placed.order_id) == (99.0, 1000, "X-1")
    (order,) = await world_admin.orders(supplier=names.supplier)
    assert (order["quantity"], order["order"]["unit_price"], order["ack"]["unit_price"]) == (10, 10.0, 10.0)
    await world_admin.ok("DELETE", f"/faults/suppliers/{names.supplier}")
    honest = await adapters.suppliers.find_order(names.supplier, names.po())
    assert honest is not None and (honest.unit_price, honest.quantity) == (10.0, 10)


# --- deliveries and the ERP ----------------------------------------------------------


async def test_partial_deliveries_are_booked_into_erp_stock(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names, on_hand=5, lead_days=0.5, deliveries=3, delivery_gap_days=0.5)
    await adapters.suppliers.place_order(order_for(names, quantity=10))

    async def all_booked() -> list[dict[str, object]] | None:
        receipts = await world_admin.receipts(names.sku)
        return receipts if len(receipts) == 3 else None

    receipts = await eventually(all_booked, what="three shipments")
    assert [r["quantity"] for r in receipts] == [4, 3, 3]
    assert all(r["po_number"] == names.po() for r in receipts)
    assert (await adapters.erp.get_stock(names.sku)).on_hand == 15


async def test_cancel_stops_the_shipments_still_to_come(
    world_admin: WorldAdmin, adapters: HttpWorld, names: Names
) -> None:
    await arrange(world_admin, names, lead_days=0.5, deliveries=2, delivery_gap_days=3.0)
    await adapters.suppliers.place_order(order_for(names, quantity=10))
    await eventually(lambda: world_admin.receipts(names.sku), what="the first shipment")
    await adapters.suppliers.cancel(names.supplier, names.po(), CancelRequest(reason="found stock elsewhere"))
    await adapters.suppliers.cancel(names.supplier, names.po(), CancelRequest(reason="again"))
    (order,) = await world_admin.orders(supplier=names.supplier)
    assert [s["status"] for s in order["shipments"]] == ["delivered", "cancelled"]
    assert order["cancel_reason"] == "found stock elsewhere"
    assert [r["quantity"] for r in await world_admin.receipts(names.sku)] == [5]


async def test_stock_is_consumed_as_days_pass(world_admin: WorldAdmin, adapters: HttpWorld, names: Names) -> None:
    await world_admin.supplier(names.supplier, {names.sku: 1.0})
    await world_admin.item(names.sku, [names.supplier], on_hand=100, daily_consumption=20)

    async def consumed() -> bool:
        return (await adapters.erp.get_stock(names.sku)).on_hand <= 80

    await eventually(consumed, what="a day of consumption")
    stock = await adapters.erp.get_stock(names.sku)
    assert 0 <= stock.on_hand <= 80 and (stock.safety_stock, stock.target_stock) == (20, 100)


async def test_closing_a_po_is_idempotent_and_checks_the_po_number(
    world_admin: WorldAdmin, adapters: HttpWorld, world_http: httpx.AsyncClient, names: Names
) -> None:
    await arrange(world_admin, names)
    closure = PurchaseOrderClosure(sku=names.sku, po_number=names.po(), received_quantity=10)
    await adapters.erp.close_purchase_order(closure)
    await adapters.erp.close_purchase_order(closure)
    mismatch = await world_http.post(f"/erp/purchase-orders/{names.po(2)}/close", json=closure.model_dump())
    assert mismatch.status_code == 400 and names.po() in mismatch.json()["error"]
    closures = (await world_admin.ok("GET", "/erp/closures", params={"sku": names.sku}))["closures"]
    assert closures == [closure.model_dump()]
    calls = await world_admin.calls(sku=names.sku, op="close_purchase_order")
    assert [c["status"] for c in calls] == [200, 200, 400]


# --- bad input -----------------------------------------------------------------------


async def test_bad_input_is_refused_with_a_reason_and_changes_nothing(
    world_admin: WorldAdmin, world_http: httpx.AsyncClient, names: Names
) -> None:
    await arrange(world_admin, names, price=10.0)
    policy_before = (await world_http.get("/manager/policy")).json()
    cases = [
        ("PUT", f"/admin/suppliers/{names.supplier}", {"name": "X", "prices": {}, "lead_days": -1, "reply_days": 1}),
        ("PUT", f"/admin/suppliers/{names.supplier}", {"name": "X", "prices": {names.sku: 1.0}, "lead_days": 1}),
        (
            "PUT",
            f"/admin/items/{names.sku}",
            {"on_hand": 1, "safety_stock": 1, "target_stock": 5, "suppliers": ["nobody"]},
        ),
        ("PUT", f"/admin/items/{names.sku}", {"on_hand": -1, "safety_stock": 1, "target_stock": 5, "suppliers": []}),
        (
            "PUT",
            "/admin/items/bad sku!",
            {"on_hand": 1, "safety_stock": 1, "target_stock": 5, "suppliers": [names.supplier]},
        ),
        ("POST", f"/suppliers/{names.supplier}/quotes", {"sku": names.sku, "quantity": 0}),
        ("POST", f"/suppliers/{names.supplier}/quotes", {"sku": names.sku, "quantity": 1, "discount": 50}),
        ("PUT", f"/faults/suppliers/{names.supplier}", {"down_calls": -3}),
        ("PUT", "/manager/policy", {"auto_approve": True, "over_budget": "shrug"}),
        # Strict types: a typo is refused, never read as a value (these were accepted: "yes" approved).
        ("PUT", "/manager/policy", {"auto_approve": "yes"}),
        ("PUT", "/manager/policy", {"auto_approve": 0}),
        ("PUT", "/manager/policy", {"max_unit_price": "120"}),
        (
            "PUT",
            f"/admin/items/{names.sku}",
            {"on_hand": "40", "safety_stock": 1, "target_stock": 5, "suppliers": [names.supplier]},
        ),
        ("POST", f"/suppliers/{names.supplier}/quotes", {"sku": names.sku, "quantity": "5"}),
        ("GET", "/manager/approval-requests?status=maybe", None),
    ]
    for method, path, body in cases:
        response = await world_http.request(method, path, json=body)
        assert response.status_code == 400, (method, path, response.text)
        assert response.json()["error"], (method, path)
    not_json = await world_http.post(f"/suppliers/{names.supplier}/quotes", content=b"{not json")
    assert not_json.status_code == 400 and "error" in not_json.json()

    supplier = await world_admin.ok("GET", f"/faults/suppliers/{names.supplier}")
    assert supplier["down_calls"] == 0
    stock = await world_admin.ok("GET", f"/erp/stock/{names.sku}")
    assert (stock["on_hand"], stock["suppliers"]) == (10, [names.supplier])
    quote = await world_admin.ok("POST", f"/suppliers/{names.supplier}/quotes", json={"sku": names.sku, "quantity": 1})
    assert (quote["unit_price"], quote["lead_days"]) == (10.0, 1.0)
    assert (await world_http.get("/manager/policy")).json() == policy_before


async def test_the_clock_reports_the_day_length(world_http: httpx.AsyncClient) -> None:
    clock = (await world_http.get("/admin/clock")).json()
    assert clock["day_seconds"] == DAY_SECONDS and abs(clock["now"] - time.time()) < 5
    assert clock["day"] >= 0


async def test_a_policy_change_keeps_the_fields_it_leaves_out(world_admin: WorldAdmin) -> None:
    # The docs' `{"auto_approve": false}` used to drop the budget too, which turned off every
    # over-budget flag the inbox shows.
    before = await world_admin.ok("GET", "/manager/policy")
    try:
        await world_admin.policy(auto_approve=True, max_unit_price=120.0, delay_days=0.5, over_budget="hold")
        changed = await world_admin.policy(auto_approve=False)
        assert changed == {"auto_approve": False, "max_unit_price": 120.0, "delay_days": 0.5, "over_budget": "hold"}
        assert await world_admin.ok("GET", "/manager/policy") == changed
        dropped = await world_admin.policy(max_unit_price=None)
        assert dropped["max_unit_price"] is None and dropped["over_budget"] == "hold"
    finally:
        await world_admin.policy(**before)


async def test_a_receipt_booked_by_hand_for_a_sku_the_erp_does_not_list_is_refused_and_books_nothing(
    world_admin: WorldAdmin, world_http: httpx.AsyncClient, names: Names
) -> None:
    await arrange(world_admin, names)
    unlisted = f"{names.sku}-TYPO"
    body = {"receipt_id": f"r-{unlisted}", "po_number": names.po(), "sku": unlisted, "quantity": 40}
    refused = await world_http.post("/admin/goods-receipts", json=body)
    assert refused.status_code == 404 and unlisted in refused.json()["error"], refused.text
    assert (await world_http.get(f"/erp/goods-receipts/r-{unlisted}")).status_code == 404
    listed = await world_http.post("/admin/goods-receipts", json={**body, "sku": names.sku})
    assert listed.status_code == 200, listed.text
    assert (await world_admin.ok("GET", f"/erp/stock/{names.sku}"))["on_hand"] == 50
