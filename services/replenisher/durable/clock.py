"""The journaled clock: a reading of the wall clock as a `ctx.run` named `timestamp`, or
taken inside a step that runs anyway and journaled with its result (`Timed`).

`ctx.time()` journals the same step, but runs its plain function on the event loop's thread
pool, a thread hop for every reading; this one runs on the loop itself.
"""

from __future__ import annotations

import time
from typing import Generic, TypeVar

from pydantic import BaseModel
from restate import Context, RunOptions

from replenisher.loop import names

T = TypeVar("T")

_FLOAT = RunOptions(type_hint=float)


async def _wall() -> float:
    return time.time()


async def journaled_time(ctx: Context) -> float:
    return await ctx.run_typed(names.TIMESTAMP, _wall, _FLOAT)


class Timed(BaseModel, Generic[T]):
    """A step's result with the wall clock read as the step ended, journaled together: what
    the run reads as its time next, without a `timestamp` entry of its own."""

    value: T
    at: float
