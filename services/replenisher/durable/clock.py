"""The journaled clock: a reading of the wall clock as a `ctx.run` named `timestamp`.

`ctx.time()` journals the same step, but runs its plain function on the event loop's thread
pool, a thread hop for every reading; this one runs on the loop itself.
"""

from __future__ import annotations

import time

from restate import Context, RunOptions

_FLOAT = RunOptions(type_hint=float)


async def _wall() -> float:
    return time.time()


async def journaled_time(ctx: Context) -> float:
    return await ctx.run_typed("timestamp", _wall, _FLOAT)
