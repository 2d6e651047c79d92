"""The one virtual object `bench.state_scan` fills: per key, a record and a small list entry, as an
agent keeps its record and would keep a list key beside it. Nothing of the product's code, so the
measurement is Restate's alone and can go upstream as it is."""

from __future__ import annotations

import restate
from pydantic import BaseModel, Field
from restate import ObjectContext, ObjectSharedContext

RECORD = "record"
LIST = "list"

probe = restate.VirtualObject("StateScanProbe")


class Put(BaseModel):
    record: str = Field(description="the stand-in for an agent's record (its size is what a scan reads)")
    entry: str = Field(description="a small sortable list entry")


@probe.handler()
async def put(ctx: ObjectContext, body: Put) -> None:
    ctx.set(RECORD, body.record)
    ctx.set(LIST, body.entry)


@probe.handler(kind="shared")
async def entry(ctx: ObjectSharedContext) -> str | None:
    """One key's list entry, read by the object itself: the point read that needs no scan."""
    return await ctx.get(LIST, type_hint=str)


app = restate.app([probe])
