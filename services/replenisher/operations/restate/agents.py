"""The agents' own answers over ingress: a SKU's record, a run's view, a message delivered.

A read the service cannot answer (it is down) is read from Restate's storage instead: what
the agent last saved. The ingress then stays marked degraded, so the faces can say so.
"""

from __future__ import annotations

import uuid
from typing import Any

from replenisher.domain.sku import SkuView
from replenisher.loop import names
from replenisher.operations.restate.errors import NotFound
from replenisher.operations.restate.health import ServiceDown
from replenisher.operations.restate.http import valid_sku
from replenisher.operations.restate.ingress import Ingress
from replenisher.operations.restate.read_models import RunView, stored_run_view, stored_sku_record


async def sku_status(ingress: Ingress, sku: str) -> SkuView:
    sku = valid_sku(sku)
    try:
        body = await ingress.call("GET", f"/{names.target(names.SKU_AGENT, sku, 'status')}")
    except NotFound as e:
        raise NotFound(f"unknown SKU {sku}: {e}") from None
    except ServiceDown as e:
        ingress.degraded = e.health
        # What the agent last saved: no time of day worked out (the service holds the calendar).
        return SkuView.model_construct(**dict(await stored_sku_record(ingress.http, sku)))
    return SkuView.model_validate(body)


async def run_view(ingress: Ingress, run_id: str) -> RunView:
    try:
        return RunView.model_validate(await ingress.call("POST", f"/{names.target(names.REPLENISH, run_id, 'state')}"))
    except ServiceDown as e:
        ingress.degraded = e.health
        return await stored_run_view(ingress.http, run_id)


async def deliver(
    ingress: Ingress, sku: str, event: str, payload: dict[str, Any], idempotency_key: str | None = None
) -> dict[str, Any]:
    sku = valid_sku(sku)
    body = {"event": event, "payload": payload}
    key = idempotency_key or f"operator-{uuid.uuid4()}"
    answer: dict[str, Any] = await ingress.call("POST", f"/{names.target(names.SKU_AGENT, sku, 'deliver')}", body, key)
    return answer
