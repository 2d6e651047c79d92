"""What the model cost, per SKU and run, beside what was bought."""

from __future__ import annotations

from pydantic import BaseModel, Field

from replenisher.domain.costs import CostLedger
from replenisher.operations.records import records_of
from replenisher.operations.restate.client import RestateClient


class RunCost(BaseModel):
    run_id: str
    model: CostLedger
    bought: float


class SkuCost(BaseModel):
    sku: str
    runs: int
    model: CostLedger = Field(description="model spend over every finished run of the SKU")
    running_run_model: CostLedger | None = Field(description="the active run's spend so far")
    bought: float = Field(description="received quantity x unit price, over the kept outcomes")
    by_run: list[RunCost] = Field(default_factory=list)


async def costs(client: RestateClient, sku: str | None) -> list[SkuCost]:
    """Every SKU's spend (or the one SKU's, then with each kept run's), the active runs' so far."""
    records = await records_of(client, sku)
    states = await client.run_states([r.active.run_id for r in records if r.active])
    rows = []
    for r in records:
        running = states.get(r.active.run_id) if r.active else None
        by_run = [
            RunCost(run_id=o.run_id, model=o.cost, bought=round(o.quantity_received * (o.unit_price or 0.0), 2))
            for o in r.outcomes
        ]
        rows.append(
            SkuCost(
                sku=r.sku,
                runs=r.runs_started,
                model=r.costs,
                running_run_model=running.decider_cost if running else None,
                bought=round(sum(c.bought for c in by_run), 2),
                by_run=by_run if sku else [],
            )
        )
    return rows
