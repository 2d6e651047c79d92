"""Everything the world will do later, as asyncio tasks owned by one object.

Owning them in one place lets shutdown cancel them all, so no task outlives the world
and nothing fires into a closed HTTP client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from simulated_world.clock import Clock

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def at(self, when: float, action: Callable[[], None], name: str) -> None:
        """Run `action` at epoch time `when` (at once if that has passed)."""
        self.spawn(self._run_at(when, action, name), name)

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        if self._closed:
            work.close()
            raise RuntimeError("the scheduler is closed")
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._forget)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("scheduled task %s failed", task.get_name(), exc_info=task.exception())

    async def _run_at(self, when: float, action: Callable[[], None], name: str) -> None:
        delay = when - self._clock.now()
        if delay > 0:
            await asyncio.sleep(delay)
        action()

    async def aclose(self) -> None:
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
