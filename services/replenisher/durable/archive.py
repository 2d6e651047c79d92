"""`RunArchive`: one virtual object per run (keyed by run id) holding its archive in K/V state.

A workflow's journal and state go when Restate's retention lapses (a day after the run
ends); an object's state stays until it is cleared, so the archive outlives the run. The
workflow writes it with one-way sends (journaled, so each exactly once), turn by turn: a run
still going has its archive up to its last turn. Only the workflow writes it (ingress-private);
operators read it through the admin API's state table (`replenisher replay`).
"""

from __future__ import annotations

import restate
from pydantic import BaseModel
from restate import ObjectContext, ObjectSharedContext, WorkflowContext

from replenisher.domain.archive import ArchivedTurn, RunArchive
from replenisher.durable.stored import load_stored
from replenisher.durable.validation import validated

run_archive = restate.VirtualObject("RunArchive")
STATE_KEY = "archive"


class ArchiveEnd(BaseModel):
    outcome: str
    ended_at: float


async def _load(ctx: ObjectContext) -> RunArchive:
    archive = await load_stored(ctx, STATE_KEY, RunArchive)
    return archive or RunArchive(run_id=ctx.key(), sku="", started_at=0.0, request={})


@validated(run_archive.handler, ingress_private=True)
async def begin(ctx: ObjectContext, header: RunArchive) -> None:
    archive = await _load(ctx)
    # Turns that overtook the header keep their place.
    fresh = header.model_copy(update={"run_id": ctx.key(), "turns": [], "cut_at_turn": None})
    for turn in archive.turns:
        fresh.add_turn(turn)
    ctx.set(STATE_KEY, fresh)


@validated(run_archive.handler, ingress_private=True)
async def add_turn(ctx: ObjectContext, turn: ArchivedTurn) -> None:
    archive = await _load(ctx)
    archive.add_turn(turn)
    ctx.set(STATE_KEY, archive)


@validated(run_archive.handler, ingress_private=True)
async def finish(ctx: ObjectContext, end: ArchiveEnd) -> None:
    archive = await _load(ctx)
    archive.finish(end.outcome, end.ended_at)
    ctx.set(STATE_KEY, archive)


@run_archive.handler(kind="shared", ingress_private=True)
async def get(ctx: ObjectSharedContext) -> RunArchive | None:
    return await load_stored(ctx, STATE_KEY, RunArchive)


def send_begin(ctx: WorkflowContext, header: RunArchive) -> None:
    ctx.object_send(begin, ctx.key(), header)


def send_turn(ctx: WorkflowContext, turn: ArchivedTurn) -> None:
    ctx.object_send(add_turn, ctx.key(), turn)


def send_finish(ctx: WorkflowContext, outcome: str, ended_at: float) -> None:
    ctx.object_send(finish, ctx.key(), ArchiveEnd(outcome=outcome, ended_at=ended_at))
