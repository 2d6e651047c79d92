"""The SKU records a question is about: one SKU's (asked of its agent), or every agent's."""

from __future__ import annotations

from replenisher.domain.sku import SkuRecord
from replenisher.operations.restate.client import RestateClient


async def records_of(client: RestateClient, sku: str | None) -> list[SkuRecord]:
    """The SKU's record, or every SKU's (from Restate's storage) when no SKU is named."""
    if sku is not None:
        return [await client.sku_status(sku)]
    return await client.sku_records()
