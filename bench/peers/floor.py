"""The floor: the same loop as plain asyncio tasks in memory. Nothing is journaled, so nothing survives.

Whatever a durable engine costs on top of this is its price for surviving crashes.
`python -m bench.peers.floor --port P --world URL`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from bench.peers.gateway import Gateway, serve
from bench.peers.loop import PeerEngine, StepFailed, offline_decision, replenish
from bench.peers.shape import DAY_SECONDS, WAITS, decide_turn, woke_at
from replenisher.adapters.world import HttpWorld
from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.documents import EventKind, StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.ports import Rejected
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.loop import Effect

T = TypeVar("T", bound=BaseModel)


class Inbox:
    """Messages of one run by kind, in arrival order; waiters wake when one arrives."""

    def __init__(self) -> None:
        self.messages: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.arrived = asyncio.Condition()

    async def put(self, event: str, payload: dict[str, Any]) -> None:
        async with self.arrived:
            self.messages[event].append(payload)
            self.arrived.notify_all()

    async def get(self, event: str, seq: int, timeout: float | None) -> dict[str, Any] | None:  # noqa: ASYNC109
        if timeout is not None and timeout <= 0:
            got = self.messages[event]
            return got[seq] if len(got) > seq else None
        async with self.arrived:
            try:
                await asyncio.wait_for(self.arrived.wait_for(lambda: len(self.messages[event]) > seq), timeout)
            except TimeoutError:
                return None
            return self.messages[event][seq]


class InMemory(PeerEngine):
    """The loop's engine without the durability: steps are plain awaits, retried like the others'."""

    def __init__(self, world: HttpWorld, inbox: Inbox) -> None:
        self.world = world
        self.inbox = inbox

    async def now(self) -> float:
        return time.time()

    async def decide(self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]) -> Decision:
        return offline_decision(state, [t.name for t in allowed])

    async def step(self, name: str, effect: Effect[T]) -> T:
        delay = 2.0
        for attempt in range(6):
            try:
                return await effect.run(self.world)
            except Rejected as e:
                raise StepFailed(f"refused by the other side: {e.reason}") from e
            except Exception as e:
                if attempt == 5:
                    raise StepFailed(str(e)) from e
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60)
        raise AssertionError("unreachable")

    async def sleep(self, name: str, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None:  # noqa: ASYNC109
        message = await self.inbox.get(event, seq, timeout)
        return json.dumps(message).encode() if message is not None else None


class Floor:
    def __init__(self, world_url: str) -> None:
        self.world = HttpWorld(world_url)
        self.runs: dict[str, asyncio.Task[Any]] = {}
        self.inboxes: dict[str, Inbox] = defaultdict(Inbox)
        self.ready: set[str] = set()

    async def start_replenish(self, run_id: str, stock: StockLevel) -> None:
        engine = InMemory(self.world, self.inboxes[run_id])
        self.runs[run_id] = asyncio.create_task(replenish(engine, run_id, stock, DAY_SECONDS, WAITS))

    async def send(self, run_id: str, event: EventKind, payload: dict[str, Any]) -> None:
        await self.inboxes[run_id].put(event, payload)

    async def replenish_result(self, run_id: str) -> ReplenishmentResult:
        result: ReplenishmentResult = await self.runs.pop(run_id)
        self.inboxes.pop(run_id, None)
        return result

    async def start_bench(self, run_id: str, steps: int) -> None:
        self.runs[run_id] = asyncio.create_task(self._bench(run_id, steps))

    async def _bench(self, run_id: str, steps: int) -> float:
        for turn in range(steps):
            decide_turn(turn)
        self.ready.add(run_id)
        await self.inboxes[run_id].get("approval", 0, None)
        return woke_at()

    async def bench_ready(self, run_id: str) -> bool:
        return run_id in self.ready

    async def approve_bench(self, run_id: str, payload: dict[str, Any]) -> None:
        await self.inboxes[run_id].put("approval", payload)

    async def bench_result(self, run_id: str) -> float:
        stamp: float = await self.runs.pop(run_id)
        self.ready.discard(run_id)
        self.inboxes.pop(run_id, None)
        return stamp


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--world", required=True)
    options = parser.parse_args()
    await serve(Gateway(Floor(options.world), options.world).app(), options.port)


if __name__ == "__main__":
    asyncio.run(main())
