"""A run's timeline: fetch what Restate and the run recorded, and build it (the faces render it)."""

from __future__ import annotations

from replenisher.domain.sku import SkuRecord, run_id_of
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import NotFound
from replenisher.operations.restate.http import valid_sku
from replenisher.timeline.build import build_timeline, group_outages, is_outage
from replenisher.timeline.journal import TransientFailure
from replenisher.timeline.model import Timeline

MAX_OUTAGES = 50  # look-ups of "when did it answer again" per timeline; older stretches merge


def chosen_run(record: SkuRecord, number: int | None) -> str:
    """Run `number` of the SKU, or the one that matters now: the active run, else the last one."""
    if number is not None:
        if not 1 <= number <= record.runs_started:
            had = f"only {record.runs_started} run{'s' if record.runs_started != 1 else ''}"
            raise NotFound(f"{record.sku} has had {had}: no run {number}")
        return run_id_of(record.sku, number)
    if record.active is not None:
        return record.active.run_id
    if record.runs_started == 0:
        raise NotFound(f"{record.sku} has had no replenishment yet")
    return run_id_of(record.sku, record.runs_started)


async def load_timeline(client: RestateClient, sku: str, number: int | None = None) -> Timeline:
    """Run `number` of the SKU (by default the one that matters now) as a timeline."""
    sku = valid_sku(sku)
    record = await client.sku_status(sku)
    run_id = chosen_run(record, number)
    return await load_run_timeline(client, record, run_id)


async def answered_times(client: RestateClient, failures: list[TransientFailure]) -> dict[float, float | None]:
    """For each outage, the first sign the service answered again: looked up one stretch at a
    time, since where one stretch ends decides where the next begins."""
    answered: dict[float, float | None] = {}
    for _ in range(MAX_OUTAGES):
        missing = [g.start for g in group_outages(failures, answered) if g.start not in answered]
        if not missing:
            break
        answered[missing[0]] = await client.answered_after(missing[0])
    return answered


async def load_run_timeline(client: RestateClient, record: SkuRecord, run_id: str) -> Timeline:
    """The run as a timeline; one still going is drawn up to now, as the client's clock tells it."""
    outcome = next((o for o in record.outcomes if o.run_id == run_id), None)
    view = await client.run_view(run_id)
    invocation = (await client.run_invocations([run_id])).get(run_id)
    entries = await client.journal(invocation.id) if invocation else []
    failures = await client.failures(invocation.id) if invocation else []
    begin = view.state.started_at if view.state else (outcome.started_at if outcome else None)
    if begin is None and invocation is not None:
        begin = invocation.created_at
    end = outcome.ended_at if outcome else client.now()
    related = [
        f
        for f in (await client.sku_agent_failures(record.sku) if entries or failures else [])
        if is_outage(f) and begin is not None and begin <= f.at <= end
    ]
    answered = await answered_times(client, [*failures, *related])
    health = client.degraded or (await client.health() if outcome is None else None)
    return build_timeline(
        run_id,
        record.sku,
        now=client.now(),
        invocation=invocation,
        entries=entries,
        failures=failures,
        state=view.state,
        waiting=view.waiting,
        outcome=outcome,
        answered=answered,
        related_failures=related,
        down_now=bool(health and health.service_down),
        decisions=await client.approval_messages(run_id),
    )
