"""The model's vocabulary: every tool by its model-facing name."""

from replenisher.domain.tools.approval import RequestApproval, WaitForApproval
from replenisher.domain.tools.base import Call, Done, Tool, Wait
from replenisher.domain.tools.goods import ClosePurchaseOrder, WaitForGoods
from replenisher.domain.tools.ordering import CancelPurchaseOrder, CheckOrderStatus, PlaceOrder
from replenisher.domain.tools.quoting import DraftPurchaseOrder, GetQuotes
from replenisher.domain.tools.supplier import ChaseSupplier, ReadSupplierReply, WaitForSupplierReply

TOOLS: tuple[Tool, ...] = (
    GetQuotes(),
    DraftPurchaseOrder(),
    RequestApproval(),
    WaitForApproval(),
    PlaceOrder(),
    WaitForSupplierReply(),
    ReadSupplierReply(),
    ChaseSupplier(),
    CheckOrderStatus(),
    WaitForGoods(),
    ClosePurchaseOrder(),
    CancelPurchaseOrder(),
    Done(),
)
TOOLS_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}

__all__ = ["TOOLS", "TOOLS_BY_NAME", "Call", "Done", "Tool", "Wait"]
