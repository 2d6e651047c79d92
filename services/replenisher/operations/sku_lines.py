"""`replenisher skus`' lines: one per SKU agent, from the SKU list (`domain.sku_list`) or, while the
service is down, from the agents' records in Restate's storage (`operations.overview`). Either way the
same fields, so a script reading `--json` gets one shape."""

from __future__ import annotations

from pydantic import BaseModel, Field

from replenisher.domain.sku import run_id_of
from replenisher.domain.sku_list import ListEntry
from replenisher.operations.overview import SkuRow, retrying_of
from replenisher.timeline.model import Invocation


class LastOutcome(BaseModel):
    run_id: str
    outcome: str
    detail: str = Field(description="shortened on the list (`domain.sku_list.DETAIL`)")
    ended_at: float | None = None


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
    """A line from the list's entry. The last outcome is the run before the active one, or the last run."""
    last = None
    finished = entry.runs - (1 if entry.active_run else 0)
    if entry.outcome is not None and finished >= 1:
        last = LastOutcome(
            run_id=run_id_of(entry.sku, finished),
            outcome=entry.outcome,
            detail=entry.detail or "",
            ended_at=entry.ended_at,
        )
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
        last_outcome=last,
    )


def with_invocation(line: SkuLine, invocation: Invocation | None) -> SkuLine:
    """The line with what Restate says of its active run now."""
    if invocation is None:
        return line
    return line.model_copy(update={"run_status": invocation.status, "retrying": retrying_of(invocation)})


def line_of_row(row: SkuRow) -> SkuLine:
    """A line from the agents' records as Restate's storage holds them (the service down)."""
    o = row.last_outcome
    last = LastOutcome(run_id=o.run_id, outcome=o.outcome, detail=o.detail, ended_at=o.ended_at) if o else None
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
        last_outcome=last,
    )
