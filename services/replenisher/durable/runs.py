"""How a SKU starts a run: the run's request, fixed as a journaled step, then a one-way send to
`Replenish.run` (the SKU stays free for messages while the run takes weeks).

Both ways a run starts go through here: a check that finds the stock low (`sku_agent`) and a
lookup that finds an order a run left unresolved (`reconcile`), whose run follows it up.
"""

from __future__ import annotations

import restate
from restate import ObjectContext

from replenisher.domain.documents import StockLevel
from replenisher.domain.sku import SkuRecord
from replenisher.durable.contracts import START_RUN, AdoptedOrder, RunRequest
from replenisher.loop import names
from replenisher.loop.patches import known
from replenisher.wiring import settings, wiring


def run_request(record: SkuRecord, stock: StockLevel, at: float, adopt: AdoptedOrder | None = None) -> RunRequest:
    return RunRequest(
        stock=stock,
        day_seconds=settings().day_seconds,
        waits=settings().waits.overridden(record.waits),
        calendar=settings().calendar,
        origin=settings().clock.origin,
        approval_policy=settings().approval_policy,
        memory=record.memory.brief(at, settings().day_seconds),
        decider_terms=wiring().decider_terms(),
        adopt=adopt,
        started_at=at,
        people_matrix=True if wiring().authority is not None else None,
        code=settings().code_version,
        patches=known() or None,
    )


async def fixed_request(
    ctx: ObjectContext, record: SkuRecord, stock: StockLevel, at: float, adopt: AdoptedOrder | None = None
) -> RunRequest:
    """The run's request, as a journaled step.

    It carries this process's settings (waits, calendar, clock origin, decider terms). Restate
    compares a replayed send with the journal's, so a SKU handler replayed on a service
    restarted with other settings would otherwise be refused as non-deterministic, and paused:
    the SKU wedged, its messages queued behind it. Journaled, the replay sends what was sent.
    """

    async def build() -> RunRequest:
        return run_request(record, stock, at, adopt)

    return await ctx.run_typed(names.RUN_REQUEST, build, restate.RunOptions(type_hint=RunRequest))


async def start_run(
    ctx: ObjectContext, run_id: str, record: SkuRecord, stock: StockLevel, at: float, adopt: AdoptedOrder | None = None
) -> None:
    """Start the run `run_id` (the record has numbered it) with its request fixed now."""
    START_RUN.send(ctx, run_id, await fixed_request(ctx, record, stock, at, adopt))
