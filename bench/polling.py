"""Waiting on a system that makes progress slowly: plain asyncio, importable without the bench's
measuring packages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def poll_progress(
    count: Callable[[], Awaitable[int]], target: int, stall: float, what: str, interval: float
) -> None:
    """Until `count()` reaches `target`. A slower system may take long over thousands of runs, so
    this fails (TimeoutError) only when the count has not grown for `stall` seconds, not after
    a fixed time."""
    best, grew = -1, time.monotonic()
    while (n := await count()) < target:
        if n > best:
            best, grew = n, time.monotonic()
        elif time.monotonic() - grew > stall:
            raise TimeoutError(f"{what}: {n} of {target}, and none more for {stall:g}s")
        await asyncio.sleep(interval)
