"""The ERP over HTTP: stock levels in, closed purchase orders out."""

from __future__ import annotations

from pydantic import BaseModel

from replenisher.adapters.http import HttpEndpoint, check, document
from replenisher.domain.documents import GoodsReceipt, PurchaseOrderClosure, StockLevel


class HttpErp(HttpEndpoint):
    async def get_stock(self, sku: str) -> StockLevel:
        return document(await self.get("erp", "stock", sku), StockLevel)

    async def close_purchase_order(self, closure: PurchaseOrderClosure) -> None:
        # Closing is idempotent on the ERP side, so a retried close is harmless.
        check(await self.post("erp", "purchase-orders", closure.po_number, "close", body=closure))

    async def find_receipt(self, receipt_id: str) -> GoodsReceipt | None:
        """The ERP's record of a goods receipt, or None when the warehouse never booked it."""
        response = await self.get("erp", "goods-receipts", receipt_id)
        if response.status_code == 404:
            return None
        booked = document(response, BookedReceipt)
        return GoodsReceipt(
            receipt_id=booked.receipt_id, po_number=booked.po_number, sku=booked.sku, quantity=booked.quantity
        )


class BookedReceipt(BaseModel):
    """The ERP's answer; fields beyond these (supplier, booking time) are not ours to trust or need."""

    receipt_id: str
    po_number: str
    sku: str
    quantity: int
