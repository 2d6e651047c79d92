"""The journaled clock: a reading of the wall clock as a `ctx.run` named `timestamp`, or
taken inside a step that runs anyway and journaled with its result (`Timed`).

`ctx.time()` journals the same step, but runs its plain function on the event loop's thread
pool, a thread hop for every reading; this one runs on the loop itself.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel
from restate import Context, RunOptions

from replenisher.loop import names
from replenisher.wiring import wiring

T = TypeVar("T")

_FLOAT = RunOptions(type_hint=float)


async def journaled_time(ctx: Context) -> float:
    """The serving app's clock (`Wiring.clock`: the wall clock unless a test gives another), journaled."""
    clock = wiring().clock

    async def wall() -> float:
        return clock()

    return await ctx.run_typed(names.TIMESTAMP, wall, _FLOAT)


class Timed(BaseModel, Generic[T]):
    """A step's result with the wall clock read as the step ended, journaled together: what
    the run reads as its time next, without a `timestamp` entry of its own."""

    value: T
    at: float
