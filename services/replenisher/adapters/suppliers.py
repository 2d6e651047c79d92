"""Suppliers over HTTP: quotes, live prices, orders keyed by PO number, chases, cancellations."""

from __future__ import annotations

from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from replenisher.adapters.http import HttpEndpoint, check, document
from replenisher.domain.documents import (
    CancelRequest,
    ChaseRequest,
    LivePrice,
    OrderAck,
    PurchaseOrder,
    Quote,
    QuoteRequest,
)
from replenisher.domain.ports import Malformed

D = TypeVar("D", bound=BaseModel)


def supplier_document(response: httpx.Response, model: type[D]) -> D:
    """A supplier's quote or order acknowledgement; one outside the contract is `Malformed`.

    Unlike a garbled answer from our own systems this is not retried: it is what the supplier
    chose to send, and the tools record it.
    """
    check(response)
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise malformed(model, response.request.url.path, exc) from exc


def malformed(model: type[BaseModel], path: str, exc: ValidationError) -> Malformed:
    """What a supplier's document outside the contract is said as: the model, where from, the first problems."""
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:3])
    return Malformed(f"{model.__name__} from {path[:80]}: {problems}"[:300])


class HttpSuppliers(HttpEndpoint):
    async def quote(self, supplier: str, request: QuoteRequest) -> Quote:
        return supplier_document(await self.post("suppliers", supplier, "quotes", body=request), Quote)

    async def live_price(self, supplier: str, sku: str) -> LivePrice:
        return document(await self.get("suppliers", supplier, "prices", sku), LivePrice)

    async def place_order(self, po: PurchaseOrder) -> OrderAck:
        # The PO number is the idempotency key: however often this is retried, the
        # supplier holds one order for the PO and answers each repeat with the same ack.
        response = await self.post(
            "suppliers", po.supplier, "orders", body=po, headers={"Idempotency-Key": po.po_number}
        )
        return supplier_document(response, OrderAck)

    async def find_order(self, supplier: str, po_number: str) -> OrderAck | None:
        """The supplier's acknowledgement of a PO, or None if it holds no order for it."""
        response = await self.get("suppliers", supplier, "orders", po_number)
        if response.status_code == 404:
            return None
        return supplier_document(response, OrderAck)

    async def chase(self, supplier: str, po_number: str, request: ChaseRequest, idempotency_key: str) -> None:
        headers = {"Idempotency-Key": idempotency_key}
        check(await self.post("suppliers", supplier, "orders", po_number, "chase", body=request, headers=headers))

    async def cancel(self, supplier: str, po_number: str, request: CancelRequest) -> None:
        check(await self.post("suppliers", supplier, "orders", po_number, "cancel", body=request))
