"""`Replenish`: one durable workflow per replenishment (id `replenish-<SKU>-<n>`).

The agentic loop (`replenisher.loop`) on Restate: each turn the decider picks one of the
tools the rules allow; the loop runs it (a journaled step, or a durable wait for the next
message raced against a durable timer) and `apply`s the result. After a crash Restate
replays the journal: recorded decisions and steps return their results without running
again, and `apply` rebuilds the same state.
"""

from __future__ import annotations

import restate
from pydantic import BaseModel
from restate import WorkflowContext, WorkflowSharedContext
from restate.exceptions import TerminalError

from replenisher import loop
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security import without_secrets
from replenisher.domain.sku import parse_run_id
from replenisher.domain.state import State
from replenisher.durable import retention
from replenisher.durable.archive import RestateArchiveSink
from replenisher.durable.contracts import REPLENISH, SKU_STATUS, Message
from replenisher.durable.restate_engine import RestateEngine
from replenisher.durable.stored import load_stored
from replenisher.durable.validation import bad_request, validated
from replenisher.loop import names
from replenisher.loop.archiving import Archiving
from replenisher.loop.request import AdoptedOrder, CurrentWait, Envelope, RunRequest
from replenisher.wiring import wiring

__all__ = ["AdoptedOrder", "CurrentWait", "Envelope", "Message", "RunRequest", "RunView", "replenish"]

replenish = restate.Workflow(REPLENISH, **retention.OBJECT)


class RunView(BaseModel):
    state: State | None
    waiting: CurrentWait | None


# Only the SKU agent starts a run and delivers its messages: through the ingress, a caller
# could start a SKU's next run with its own request, or fill a run's message slots first.
@validated(replenish.main, ingress_private=True, workflow_retention=retention.WORKFLOW)
async def run(ctx: WorkflowContext, request: RunRequest) -> ReplenishmentResult:
    engine = RestateEngine(
        ctx, sku=request.stock.sku, terms=request.decider_terms, clock=request.started_at, start=request.stamp
    )
    # Kept past the journal's retention, for `replenisher replay`.
    archive = wiring().archive
    sink = archive(ctx) if archive is not None else RestateArchiveSink(ctx)
    archived = Archiving(engine, sink, request, request.stock.sku)
    return await loop.replenish(archived, request)


@validated(replenish.handler, ingress_private=True)
async def deliver(ctx: WorkflowSharedContext, message: Message) -> None:
    """Resolve the promise the run waits on (or will wait on) for this message."""
    if message.seq < 0:
        raise bad_request("seq must not be negative")
    envelope = Envelope(
        payload=message.payload, sender=message.sender, arrived_at=message.arrived_at, standing=message.standing
    )
    await ctx.promise(names.message_promise(message.event, message.seq), type_hint=dict).resolve(
        envelope.model_dump(mode="json")
    )


@replenish.handler(name="state")
async def view_state(ctx: WorkflowSharedContext) -> RunView:
    """The run's state and current wait. Both empty: a run just started (nothing written yet)
    or one whose state Restate dropped after its retention; a 404 if no such run was started."""
    state = await load_stored(ctx, names.STATE, State)
    waiting = await ctx.get(names.WAITING, type_hint=CurrentWait)
    if state is None and waiting is None:
        await started(ctx, ctx.key())
    return RunView(state=without_secrets(state) if state else None, waiting=waiting)


async def started(ctx: WorkflowSharedContext, run_id: str) -> None:
    """Raise a 404 unless the SKU agent the id names has started this run (it numbers them)."""
    parsed = parse_run_id(run_id)
    if parsed is None:
        raise TerminalError(f"no run {run_id!r}: a run's id reads replenish-<SKU>-<n>", status_code=404)
    sku, number = parsed
    try:
        record = await SKU_STATUS.call(ctx, sku, None)
    except TerminalError as e:
        if e.status_code != 404:
            raise
        raise TerminalError(f"no run {run_id!r}: {e.message}", status_code=404) from None
    if number > record.runs_started:
        runs = f"{record.runs_started} run{'' if record.runs_started == 1 else 's'}"
        raise TerminalError(f"no run {run_id!r}: {sku} has started {runs}", status_code=404)


@replenish.handler(name="current_wait")
async def view_current_wait(ctx: WorkflowSharedContext) -> CurrentWait | None:
    return await ctx.get(names.WAITING, type_hint=CurrentWait)
