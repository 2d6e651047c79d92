"""How a replenishment ended, read off its final state."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from replenisher.domain.costs import CostLedger
from replenisher.domain.documents import PurchaseOrder
from replenisher.domain.memory import RunObservations
from replenisher.domain.observations import observe
from replenisher.domain.state import OrderProgress, State

Outcome = Literal["received", "cancelled", "rejected", "gave_up", "unknown"]


class ReplenishmentResult(BaseModel):
    run_id: str
    sku: str
    outcome: Outcome
    detail: str = ""
    po_number: str | None = None
    supplier: str | None = None
    quantity_ordered: int = 0
    quantity_received: int = 0
    unit_price: float | None = None
    ordered_at: float | None = Field(default=None, description="when the order went out, for spend by period")
    turns: int = 0
    started_at: float
    ended_at: float
    consumed: dict[str, int] = {}
    security_events: int = 0
    po: PurchaseOrder | None = Field(default=None, description="the PO, so an unknown order can be reconciled")
    adopted_from: str | None = Field(default=None, description="the earlier run whose order this one followed up")
    progress: OrderProgress | None = Field(
        default=None, description="what this run saw of an order it left open, for the run that follows it up"
    )
    received_before: int = Field(default=0, description="of quantity_received, what earlier runs of the PO booked")
    cost: CostLedger = Field(default_factory=CostLedger)
    observations: RunObservations | None = Field(default=None, description="for the SKU's memory; not kept")


def outcome_of(state: State) -> tuple[Outcome, str]:
    if state.closed:
        return "received", f"{state.received_quantity} received"
    if state.rejected:
        return (
            "rejected",
            state.approval.note if state.approval and state.approval.note else "rejected by the manager",
        )
    if state.cancelled:
        return "cancelled", state.cancel_reason
    if state.order_status == "unknown":
        # Never "failed" while the supplier may hold our order: someone must reconcile it.
        return (
            "unknown",
            f"an order for {state.po.po_number if state.po else '?'} may exist; reconcile by PO number",
        )
    if state.order_status == "placed":
        # Turns used up (many partial deliveries) or the run was stopped: the order is still
        # open at the supplier, so the SKU must follow it up, never buy the stock again.
        why = f" ({state.last_failure})" if state.last_failure else ""
        return (
            "unknown",
            f"order {state.order.po_number if state.order else '?'} is still open at the supplier "
            f"({state.received_quantity} of {state.ordered_quantity} received){why}; follow it up by PO number",
        )
    return "gave_up", state.last_failure or "stopped before ordering"


def result_of(state: State, ended_at: float) -> ReplenishmentResult:
    outcome, detail = outcome_of(state)
    return ReplenishmentResult(
        run_id=state.run_id,
        sku=state.sku,
        outcome=outcome,
        detail=detail,
        po_number=state.po.po_number if state.po else None,
        supplier=state.po.supplier if state.po else None,
        quantity_ordered=state.ordered_quantity,
        quantity_received=state.received_quantity,
        unit_price=state.order.unit_price if state.order else None,
        ordered_at=state.ordered_at,
        turns=len(state.history),
        started_at=state.started_at,
        ended_at=ended_at,
        consumed=dict(state.consumed),
        security_events=state.security.total,
        po=state.po,
        adopted_from=state.adopted_from,
        progress=state.progress() if state.order_may_exist else None,
        received_before=state.carried.received_quantity if state.carried else 0,
        cost=state.decider_cost.model_copy(deep=True),
        observations=observe(state, ended_at),
    )
