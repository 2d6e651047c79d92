"""What a person asks of a SKU's agent directly: check stock now, watch it on a timer, stop
watching, and deliver a message to the SKU's address.

Each is a write Restate keeps under the caller's idempotency key; the answers are the agent's
own, passed on as it gave them.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from replenisher.domain.documents import EVENT_PAYLOADS
from replenisher.loop import names
from replenisher.loop.request import describe
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.restate.http import valid_sku


def _path(sku: str, handler: str) -> str:
    return f"/{names.target(names.SKU_AGENT, sku, handler)}"


async def check(client: RestateClient, sku: str, idempotency_key: str) -> dict[str, Any]:
    """Read the SKU's stock now, and start a replenishment if it is low."""
    answer: dict[str, Any] = await client.ingress(
        "POST", _path(valid_sku(sku), "check"), idempotency_key=idempotency_key
    )
    return answer


async def watch(client: RestateClient, sku: str, every: float | None, idempotency_key: str) -> dict[str, Any]:
    """Check the SKU's stock every `every` business days (the agent's default without), on a durable timer."""
    body = {"interval_days": every} if every else {}
    answer: dict[str, Any] = await client.ingress(
        "POST", _path(valid_sku(sku), "watch"), body, idempotency_key=idempotency_key
    )
    return answer


async def unwatch(client: RestateClient, sku: str, idempotency_key: str) -> dict[str, Any]:
    """Stop the SKU's timed checks."""
    answer: dict[str, Any] = await client.ingress(
        "POST", _path(valid_sku(sku), "unwatch"), idempotency_key=idempotency_key
    )
    return answer


async def deliver(
    client: RestateClient, sku: str, event: str, payload: Any, idempotency_key: str | None
) -> dict[str, Any]:
    """A message to the SKU's address, checked against the agent's own model of it first:
    while the service is down, Restate would accept the message and its 400 would land later
    where nobody reads it."""
    if not isinstance(payload, dict):
        raise OperatorError("the payload must be a JSON object")
    try:
        EVENT_PAYLOADS[event].model_validate(payload)
    except ValidationError as e:
        raise OperatorError(f"bad request: payload for {event!r}: {describe(e)}") from e
    return await client.deliver(sku, event, payload, idempotency_key=idempotency_key)
