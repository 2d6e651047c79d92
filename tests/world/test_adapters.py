"""The adapters' error contract and client handling, against canned answers (no server)."""

from __future__ import annotations

import httpx
import pytest

from replenisher.adapters import HttpWorld, LoopClient, Rejected, UnexpectedResponse
from replenisher.adapters.errors import Unavailable, Unreachable
from replenisher.domain import ports
from replenisher.domain.documents import ApprovalRequest, PurchaseOrder, QuoteRequest

ACK = {
    "order_id": "O-1",
    "po_number": "PO 1/a",
    "supplier": "acme",
    "sku": "SKU-1",
    "quantity": 5,
    "unit_price": 2.5,
    "accepted_at": 1.0,
}


def world_answering(status: int, body: object = None, seen: list[httpx.Request] | None = None) -> HttpWorld:
    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, json=body)

    return HttpWorld("http://world/", httpx.AsyncClient(transport=httpx.MockTransport(answer)))


def purchase_order() -> PurchaseOrder:
    return PurchaseOrder(po_number="PO 1/a", sku="SKU-1", supplier="acme", quantity=5, unit_price=2.5, quote_id="q")


async def test_place_order_sends_the_po_number_as_idempotency_key() -> None:
    seen: list[httpx.Request] = []
    ack = await world_answering(201, ACK, seen).suppliers.place_order(purchase_order())
    assert ack.order_id == "O-1"
    (request,) = seen
    assert request.headers["idempotency-key"] == "PO 1/a"
    assert request.url.raw_path == b"/suppliers/acme/orders"
    assert PurchaseOrder.model_validate_json(request.content) == purchase_order()


async def test_a_final_4xx_is_rejected_with_the_servers_reason() -> None:
    world = world_answering(409, {"error": "PO already submitted with different content"})
    with pytest.raises(Rejected) as refused:
        await world.suppliers.place_order(purchase_order())
    assert (refused.value.status, refused.value.reason) == (409, "PO already submitted with different content")
    # The durable layer catches the domain's Rejected: it must be that very class.
    assert isinstance(refused.value, ports.Rejected)


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_5xx_and_try_later_4xx_propagate_as_httpx_errors(status: int) -> None:
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await world_answering(status, {"error": "busy"}).erp.get_stock("SKU-1")
    assert failed.value.response.status_code == status


async def test_a_transient_answer_names_the_party_the_call_and_the_reason_in_its_repr() -> None:
    # Restate records a failed attempt's repr; the console and timelines show that line.
    with pytest.raises(Unavailable) as down:
        await world_answering(503, {"error": "supplier down"}).suppliers.quote(
            "acme", QuoteRequest(sku="SKU-1", quantity=1)
        )
    assert (
        repr(down.value)
        == "Unavailable: supplier acme answered 503 Service Unavailable to POST /suppliers/acme/quotes: supplier down"
    )
    with pytest.raises(Unavailable) as busy:
        await world_answering(429, {"error": "slow down"}).manager.request_approval(approval_request())
    assert repr(busy.value).startswith(
        "Unavailable: the manager's inbox answered 429 Too Many Requests to POST /manager/"
    )
    with pytest.raises(UnexpectedResponse) as garbled:
        await world_answering(200, {"sku": "SKU-1"}).erp.get_stock("SKU-1")
    assert repr(garbled.value).startswith(
        "UnexpectedResponse: unexpected answer 200 from the ERP (http://world/erp/stock/SKU-1)"
    )


async def test_no_answer_at_all_names_the_party_and_the_address_and_is_still_a_transport_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    world = HttpWorld("http://world/", httpx.AsyncClient(transport=httpx.MockTransport(refuse)))
    with pytest.raises(Unreachable) as unreachable:
        await world.erp.get_stock("SKU-1")
    assert isinstance(unreachable.value, httpx.TransportError), "callers that catch httpx's errors still do"
    assert repr(unreachable.value) == (
        "Unreachable: the ERP could not be reached (ConnectError: connection refused) at GET http://world/erp/stock/SKU-1"
    )


async def test_answers_outside_the_contract_are_unexpected() -> None:
    with pytest.raises(UnexpectedResponse) as wrong_shape:
        await world_answering(200, {"sku": "SKU-1"}).erp.get_stock("SKU-1")
    assert wrong_shape.value.status == 200
    with pytest.raises(UnexpectedResponse) as redirect:
        await world_answering(302, None).suppliers.quote("acme", QuoteRequest(sku="SKU-1", quantity=1))
    assert redirect.value.status == 302


async def test_find_order_maps_404_to_none_and_quotes_path_segments() -> None:
    seen: list[httpx.Request] = []
    assert await world_answering(404, {"error": "no order"}, seen).suppliers.find_order("acme", "PO 1/a") is None
    assert seen[0].url.raw_path == b"/suppliers/acme/orders/PO%201%2Fa"
    found = await world_answering(200, ACK).suppliers.find_order("acme", "PO 1/a")
    assert found is not None and found.po_number == "PO 1/a"


async def test_a_loop_client_is_reused_until_closed() -> None:
    holder = LoopClient()
    first = holder.get()
    assert holder.get() is first
    await holder.aclose()
    assert first.is_closed
    second = holder.get()
    assert second is not first and not second.is_closed
    await holder.aclose()


async def test_a_worlds_adapters_share_one_client_and_read_its_clock() -> None:
    holder = LoopClient()
    world = HttpWorld("http://world/", holder, clock=lambda: 123.0)
    assert world.erp.client is world.suppliers.client is world.manager.client is holder.get()
    assert world.clock() == 123.0
    await holder.aclose()


def approval_request() -> ApprovalRequest:
    return ApprovalRequest(
        po_number="PO-1",
        sku="SKU-1",
        supplier="acme",
        quantity=5,
        unit_price=2.5,
        quote_id="q",
        expires_at=1.0,
        token="t",
        run_id="r",
    )
