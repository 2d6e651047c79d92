"""`RunArchive`: one virtual object per run (keyed by run id) holding its archive in K/V state.

A workflow's journal and state go when Restate's retention lapses (14 and 35 days after the
run ends: `retention`); an object's state stays until it is cleared, so the archive outlives the run. While the
run goes, its archive is its own workflow state (key `archive`), written before each wait or
delay, so a run still going has it up to the wait it is in; when it ends it hands the whole
archive over with one one-way send (journaled, so exactly once). Only the run writes it
(ingress-private); operators read it through the admin API's state table (`replenisher replay`).
"""

from __future__ import annotations

import restate
from restate import ObjectContext, ObjectSharedContext, WorkflowContext
from restate.serde import BytesSerde

from replenisher.domain.archive import Chunk, RunArchive
from replenisher.durable import retention
from replenisher.durable.stored import load_stored
from replenisher.durable.validation import validated
from replenisher.loop import names

run_archive = restate.VirtualObject("RunArchive", **retention.OBJECT)
STATE_KEY = "archive"


async def _load(ctx: ObjectContext) -> RunArchive:
    archive = await load_stored(ctx, STATE_KEY, RunArchive)
    return archive or RunArchive(run_id=ctx.key())


# Runs that started on code that sent the header on its own still call this.
@validated(run_archive.handler, ingress_private=True)
async def begin(ctx: ObjectContext, header: RunArchive) -> None:
    ctx.set(STATE_KEY, (await _load(ctx)).with_header(header))


@validated(run_archive.handler, ingress_private=True)
async def keep(ctx: ObjectContext, archive: RunArchive) -> None:
    """A finished run's archive, whole, as the run kept it (within the bound: the run's own copy
    was cut as it grew; one that somehow is not is cut here the same way)."""
    ctx.set(STATE_KEY, archive.model_copy(update={"run_id": ctx.key()}).within_bound())


# Runs that started on code that sent a chunk per turn still call this.
@validated(run_archive.handler, ingress_private=True)
async def add(ctx: ObjectContext, chunk: Chunk) -> None:
    archive = await _load(ctx)
    archive.add(chunk)
    ctx.set(STATE_KEY, archive)


@run_archive.handler(kind="shared", ingress_private=True)
async def get(ctx: ObjectSharedContext) -> RunArchive | None:
    return await load_stored(ctx, STATE_KEY, RunArchive)


class RestateArchiveSink:
    """The run's archive kept in its workflow state while it runs (one state write per chunk),
    and handed to its `RunArchive` object when it ends (one one-way send: the run never waits
    on it). A replayed invocation notes the same chunks, so it writes and sends the same."""

    def __init__(self, ctx: WorkflowContext) -> None:
        self.ctx = ctx
        self.archive = RunArchive(run_id=ctx.key())

    def begin(self, header: RunArchive) -> None:
        self.archive = self.archive.with_header(header)

    def send(self, chunk: Chunk) -> None:
        kept = self.archive.add(chunk)
        if chunk.outcome is None:
            # The bytes the SDK's serde would write (`model_dump_json`), dumped once, not twice.
            self.ctx.set(names.ARCHIVE, kept.encode("utf-8"), serde=BytesSerde())
        else:
            self.ctx.object_send(keep, self.ctx.key(), self.archive)
