"""The ERP over HTTP: stock levels in, closed purchase orders out."""

from __future__ import annotations

from replenisher.adapters.http import HttpEndpoint, check, document
from replenisher.domain.documents import PurchaseOrderClosure, StockLevel


class HttpErp(HttpEndpoint):
    async def get_stock(self, sku: str) -> StockLevel:
        return document(await self.get("erp", "stock", sku), StockLevel)

    async def close_purchase_order(self, closure: PurchaseOrderClosure) -> None:
        # Closing is idempotent on the ERP side, so a retried close is harmless.
        check(await self.post("erp", "purchase-orders", closure.po_number, "close", body=closure))
