"""`RunArchive`: one virtual object per run (keyed by run id) holding its archive in K/V state.

A workflow's journal and state go when Restate's retention lapses (a day after the run
ends); an object's state stays until it is cleared, so the archive outlives the run. The
run writes it with one-way sends (journaled, so each chunk exactly once): a chunk before each
wait or delay, the first one carrying the run's header, and one at the end. A run still going
has its archive up to the wait it is in (or its last one). Only the run writes it
(ingress-private); operators read it through the admin API's state table (`replenisher replay`).
"""

from __future__ import annotations

import restate
from restate import ObjectContext, ObjectSharedContext, WorkflowContext

from replenisher.domain.archive import Chunk, RunArchive
from replenisher.durable.stored import load_stored
from replenisher.durable.validation import validated

run_archive = restate.VirtualObject("RunArchive")
STATE_KEY = "archive"


async def _load(ctx: ObjectContext) -> RunArchive:
    archive = await load_stored(ctx, STATE_KEY, RunArchive)
    return archive or RunArchive(run_id=ctx.key())


# Runs that started on code that sent the header on its own still call this.
@validated(run_archive.handler, ingress_private=True)
async def begin(ctx: ObjectContext, header: RunArchive) -> None:
    ctx.set(STATE_KEY, (await _load(ctx)).with_header(header))


@validated(run_archive.handler, ingress_private=True)
async def add(ctx: ObjectContext, chunk: Chunk) -> None:
    archive = await _load(ctx)
    if chunk.header is not None:
        archive = archive.with_header(chunk.header)
    archive.add(chunk)
    ctx.set(STATE_KEY, archive)


@run_archive.handler(kind="shared", ingress_private=True)
async def get(ctx: ObjectSharedContext) -> RunArchive | None:
    return await load_stored(ctx, STATE_KEY, RunArchive)


class RestateArchiveSink:
    """The run's archive sent to its `RunArchive` object, one-way: the run never waits on it.
    The header goes with the first chunk: one invocation fewer per run."""

    def __init__(self, ctx: WorkflowContext) -> None:
        self.ctx = ctx
        self.header: RunArchive | None = None

    def begin(self, header: RunArchive) -> None:
        self.header = header

    def send(self, chunk: Chunk) -> None:
        if self.header is not None:
            chunk = chunk.model_copy(update={"header": self.header})
            self.header = None
        self.ctx.object_send(add, self.ctx.key(), chunk)
