"""`replenisher skus`' lines: one per SKU agent, from the SKU list (`domain.sku_list`) or, while the
service is down, from the agents' records in Restate's storage (`operations.overview`). Either way the
same fields, so a script reading `--json` gets one shape."""

from __future__ import annotations

from pydantic import BaseModel, Field

from replenisher.domain.sku_list import ListEntry
from replenisher.operations.overview import LastOutcome, SkuRow, retrying_of
from replenisher.operations.sku_page import last_outcome_of
from replenisher.timeline.model import Invocation


class SkuLine(BaseModel):
    sku: str
    watching: bool
    runs: int = Field(description="runs started, the active one included")
    active_run: str | None = None
    run_status: str | None = Field(default=None, description="Restate's status of the active run, when read")
    retrying: str | None = Field(default=None, description="the active run's step being retried, when read")
    waiting_tool: str | None = None
    waiting_since: float | None = None
    asked_price: float | None = None
    on_hand: int | None = Field(default=None, description="stock at the agent's last check")
    safety_stock: int | None = None
    last_outcome: LastOutcome | None = None


def line_of_entry(entry: ListEntry) -> SkuLine:
    """A line from the list's entry."""
    return SkuLine(
        sku=entry.sku,
        watching=entry.watched,
        runs=entry.runs,
        active_run=entry.active_run,
        waiting_tool=entry.waiting_tool,
        waiting_since=entry.waiting_since,
        asked_price=entry.asked_price,
        on_hand=entry.on_hand,
        safety_stock=entry.safety_stock,
        last_outcome=last_outcome_of(entry),
    )


def with_invocation(line: SkuLine, invocation: Invocation | None) -> SkuLine:
    """The line with what Restate says of its active run now."""
    if invocation is None:
        return line
    return line.model_copy(update={"run_status": invocation.status, "retrying": retrying_of(invocation)})


def line_of_row(row: SkuRow) -> SkuLine:
    """A line from the agents' records as Restate's storage holds them (the service down)."""
    return SkuLine(
        sku=row.sku,
        watching=row.watching,
        runs=row.runs,
        active_run=row.active_run,
        run_status=row.run_status,
        retrying=row.retrying,
        waiting_tool=row.waiting.tool if row.waiting is not None else None,
        waiting_since=row.waiting_since,
        asked_price=row.asked_price,
        last_outcome=row.last_outcome,
    )
