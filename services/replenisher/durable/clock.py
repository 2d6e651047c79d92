"""The journaled clock: a reading of the wall clock as a `ctx.run` named `timestamp`, or
taken inside a step that runs anyway and journaled with its result (`Timed`).

`ctx.time()` journals the same step, but runs its plain function on the event loop's thread
pool, a thread hop for every reading; this one runs on the loop itself.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer
from restate import Context, RunOptions

from replenisher.domain.documents import without_unset
from replenisher.loop import names
from replenisher.loop.patches import Stamp
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
    the run reads as its time next, without a `timestamp` entry of its own.

    A run's decisions and steps carry the stamp of the code that gave them too (`code`, `patches`:
    `replenisher.loop.patches`), which a replay reads back as written. Absent in what other handlers
    journal and in runs journaled before stamps, and then left out, so those keep their bytes."""

    value: T
    at: float
    code: str | None = None
    patches: tuple[str, ...] | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_unset(handler(self), "code", "patches")

    def stamped(self, stamp: Stamp) -> Timed[T]:
        """This result under the stamp of the code that gives it (no patches: left out)."""
        return self.model_copy(update={"code": stamp.code, "patches": stamp.patches or None})

    def stamp(self, fallback: str) -> Stamp:
        """The stamp it was journaled with; one journaled without (older code): `fallback`'s
        version, which that code stamped its turns with, and no patch, which it knew none of."""
        return Stamp(code=self.code if self.code is not None else fallback, patches=self.patches or ())
