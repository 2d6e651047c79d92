"""Every SKU agent at a glance: its active run, what that run waits for and since when, the last
outcome. Four SQL queries over Restate's state and invocation tables, however many SKUs."""

from __future__ import annotations

from pydantic import BaseModel

from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import SkuRecord
from replenisher.timeline.build import is_outage_text
from replenisher.timeline.format import clock
from replenisher.timeline.model import Invocation, Waiting
from replenisher.timeline.restate import RestateClient


class SkuRow(BaseModel):
    sku: str
    watching: bool
    runs: int
    active_run: str | None = None
    run_status: str | None = None
    retrying: str | None = None
    waiting: Waiting | None = None
    waiting_since: float | None = None
    last_outcome: ReplenishmentResult | None = None
    kept_messages: int = 0
    held_until: float | None = None

    @property
    def awaiting_approval(self) -> bool:
        return self.waiting is not None and self.waiting.tool == "wait_for_approval"


def row_of(
    record: SkuRecord,
    waiting: dict[str, Waiting],
    invocations: dict[str, Invocation],
    since: dict[str, float],
) -> SkuRow:
    run = record.active.run_id if record.active else None
    inv = invocations.get(run) if run else None
    retrying = None
    if inv is not None and inv.backing_off:
        tries = inv.retry_count or 1
        next_at = f", next {clock(inv.next_retry_at)[11:19]}" if inv.next_retry_at else ""
        if is_outage_text(inv.last_failure_code, inv.last_failure):
            retrying = f"service down: {tries} attempts refused{next_at}: {inv.last_failure}"
        else:
            step = (inv.last_failure_command or "the run").rsplit(" ", 1)[0]
            retrying = f"retrying {step}: {tries} attempts failed{next_at}; last error: {inv.last_failure}"
    return SkuRow(
        sku=record.sku,
        watching=record.watch.watching,
        runs=record.runs_started,
        active_run=run,
        run_status=inv.status if inv else None,
        retrying=retrying,
        waiting=waiting.get(run) if run else None,
        waiting_since=since.get(run) if run else None,
        last_outcome=record.last_outcome,
        kept_messages=len(record.kept) + record.kept_overflow,
        held_until=record.hold_until,
    )


async def sku_rows(client: RestateClient) -> list[SkuRow]:
    records = await client.sku_records()
    active = [r.active.run_id for r in records if r.active is not None]
    waiting = await client.waiting_runs()
    invocations = await client.run_invocations(active)
    since = await client.waiting_since([r for r in active if r in waiting])
    return [row_of(r, waiting, invocations, since) for r in records]
