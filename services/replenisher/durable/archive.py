"""`RunArchive`: one virtual object per run (keyed by run id) holding its archive in K/V state.

A workflow's journal and state go when Restate's retention lapses (a day after the run
ends); an object's state stays until it is cleared, so the archive outlives the run. The
run writes it with one-way sends (journaled, so each chunk exactly once), a chunk per turn:
a run still going has its archive up to its last decision. Only the run writes it
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


@validated(run_archive.handler, ingress_private=True)
async def begin(ctx: ObjectContext, header: RunArchive) -> None:
    archive = await _load(ctx)
    fresh = header.model_copy(update={"run_id": ctx.key(), "chunks": [], "cut_at_chunk": None, "outcome": None})
    for chunk in archive.chunks:  # chunks that overtook the header keep their place
        fresh.add(chunk)
    ctx.set(STATE_KEY, fresh)


@validated(run_archive.handler, ingress_private=True)
async def add(ctx: ObjectContext, chunk: Chunk) -> None:
    archive = await _load(ctx)
    archive.add(chunk)
    ctx.set(STATE_KEY, archive)


@run_archive.handler(kind="shared", ingress_private=True)
async def get(ctx: ObjectSharedContext) -> RunArchive | None:
    return await load_stored(ctx, STATE_KEY, RunArchive)


class RestateArchiveSink:
    """The run's archive sent to its `RunArchive` object, one-way: the run never waits on it."""

    def __init__(self, ctx: WorkflowContext) -> None:
        self.ctx = ctx

    def begin(self, header: RunArchive) -> None:
        self.ctx.object_send(begin, self.ctx.key(), header)

    def send(self, chunk: Chunk) -> None:
        self.ctx.object_send(add, self.ctx.key(), chunk)
