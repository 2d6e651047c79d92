"""The Temporal side: a worker for the workflows and activities, and the gateway in front of it.

`python -m bench.peers.temporal_worker --port P --temporal HOST:PORT --world URL`
The gateway starts workflows, signals them and awaits their results through the Temporal client.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from bench.peers.gateway import Gateway, serve
from bench.peers.loop import Rejected, offline_decision, run_effect
from bench.peers.shape import DAY_SECONDS, TASK_QUEUE, WAITS, decide_turn, woke_at
from bench.peers.temporal_workflows import BenchRunWorkflow, ReplenishWorkflow
from replenisher.adapters.world import HttpWorld
from replenisher.domain.documents import EventKind, StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.state import State


class ReplenishActivities:
    def __init__(self, world: HttpWorld) -> None:
        self.world = world

    @activity.defn(name="decide")
    async def decide(self, state: dict[str, Any], allowed: list[str]) -> dict[str, Any]:
        return offline_decision(State.model_validate(state), allowed).model_dump(mode="json")

    @activity.defn(name="run_effect")
    async def run_effect(self, effect: dict[str, Any]) -> dict[str, Any]:
        try:
            return await run_effect(effect, self.world)
        except Rejected as e:
            raise ApplicationError(f"refused by the other side: {e.reason}", non_retryable=True) from e

    @activity.defn(name="decide_turn")
    async def decide_turn(self, turn: int) -> dict[str, Any]:
        return decide_turn(turn)

    @activity.defn(name="woke_at")
    async def woke_at(self) -> float:
        return woke_at()


class TemporalEngine:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def start_replenish(self, run_id: str, stock: StockLevel) -> None:
        await self.client.start_workflow(
            ReplenishWorkflow.run,
            args=[run_id, stock.model_dump(mode="json"), DAY_SECONDS, WAITS.model_dump(mode="json")],
            id=run_id,
            task_queue=TASK_QUEUE,
        )

    async def send(self, run_id: str, event: EventKind, payload: dict[str, Any]) -> None:
        handle = self.client.get_workflow_handle(run_id)
        await handle.signal(ReplenishWorkflow.deliver, {"event": event, "payload": payload})

    async def replenish_result(self, run_id: str) -> ReplenishmentResult:
        raw = await self.client.get_workflow_handle(run_id).result()
        return ReplenishmentResult.model_validate(raw)

    async def start_bench(self, run_id: str, steps: int) -> None:
        await self.client.start_workflow(BenchRunWorkflow.run, steps, id=run_id, task_queue=TASK_QUEUE)

    async def bench_ready(self, run_id: str) -> bool:
        ready: bool = await self.client.get_workflow_handle(run_id).query(BenchRunWorkflow.is_ready)
        return ready

    async def approve_bench(self, run_id: str, payload: dict[str, Any]) -> None:
        await self.client.get_workflow_handle(run_id).signal(BenchRunWorkflow.approve, payload)

    async def bench_result(self, run_id: str) -> float:
        stamp: float = await self.client.get_workflow_handle(run_id).result()
        return stamp


async def connect(address: str, attempts: int = 60) -> Client:
    for attempt in range(attempts):
        try:
            return await Client.connect(address)
        except RuntimeError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--temporal", required=True)
    parser.add_argument("--world", required=True)
    options = parser.parse_args()
    client = await connect(options.temporal)
    activities = ReplenishActivities(HttpWorld(options.world))
    worker = Worker(
        client,
        task_queue=TASK_QUEUE,
        workflows=[ReplenishWorkflow, BenchRunWorkflow],
        activities=[activities.decide, activities.run_effect, activities.decide_turn, activities.woke_at],
    )
    gateway = Gateway(TemporalEngine(client), options.world)
    async with worker:
        await serve(gateway.app(), options.port)


if __name__ == "__main__":
    asyncio.run(main())
