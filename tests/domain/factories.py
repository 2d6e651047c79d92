"""Small builders for domain tests: documents and states as a run would have them."""

from __future__ import annotations

from replenisher.domain.documents import ApprovalDecision, GoodsReceipt, OrderAck, Quote, StockLevel, SupplierReply
from replenisher.domain.state import State

T0 = 1_000_000.0
DAY = 10.0


def stock(on_hand: int = 5, safety: int = 20, target: int = 100, suppliers: tuple[str, ...] = ("acme", "bolt")):
    return StockLevel(sku="SKU-1", on_hand=on_hand, safety_stock=safety, target_stock=target, suppliers=list(suppliers))


def new_state(**kw: object) -> State:
    return State.start("replenish-SKU-1-1", stock(**kw), day_seconds=DAY, started_at=T0)  # type: ignore[arg-type]


def quote(supplier: str = "acme", price: float = 4.0, qty: int = 95, lead: float = 5) -> Quote:
    return Quote(
        quote_id=f"q-{supplier}-{price}",
        supplier=supplier,
        sku="SKU-1",
        quantity=qty,
        unit_price=price,
        lead_days=lead,
        valid_until=T0 + 5 * DAY,
    )


def ack(state: State) -> OrderAck:
    assert state.po is not None
    po = state.po
    return OrderAck(
        order_id="ord-1",
        po_number=po.po_number,
        supplier=po.supplier,
        sku=po.sku,
        quantity=po.quantity,
        unit_price=po.unit_price,
        accepted_at=T0 + DAY,
    )


def approval(state: State, approved: bool = True, up_to: float | None = None, token: str | None = None):
    assert state.approval is not None
    req = state.approval.request
    return ApprovalDecision(
        po_number=req.po_number, token=token or req.token, approved=approved, up_to=up_to, by="manager"
    )


def reply(state: State, text: str = "We confirm the order; delivery in 4 days.") -> SupplierReply:
    assert state.order is not None
    return SupplierReply(po_number=state.order.po_number, supplier=state.order.supplier, text=text)


def goods(state: State, qty: int, receipt: str = "r1") -> GoodsReceipt:
    assert state.order is not None
    return GoodsReceipt(receipt_id=receipt, po_number=state.order.po_number, sku="SKU-1", quantity=qty)
