"""The DBOS side: the loop as a DBOS workflow whose decider and tools are steps, messages by send/recv.

`python -m bench.peers.dbos_app --port P --database URL --world URL` (PostgreSQL or SQLite URL).
On start-up DBOS recovers every workflow left pending by an earlier process: it re-runs each
from the top, each recorded step returning its checkpointed output, until the run waits again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from dbos import DBOS, DBOSConfig, SetWorkflowID, WorkflowHandleAsync
from dbos._core import StepOptions
from pydantic import BaseModel

from bench.peers.gateway import Gateway, serve
from bench.peers.loop import PeerEngine, Rejected, StepFailed, offline_decision, replenish, run_effect
from bench.peers.shape import DAY_SECONDS, WAITS, decide_turn, woke_at
from replenisher.adapters.world import HttpWorld
from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.documents import EventKind, StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.domain.waits import WaitDays
from replenisher.loop import Effect

world: HttpWorld | None = None
T = TypeVar("T", bound=BaseModel)
FOREVER = 365 * 86_400.0
# A run this process started is awaited on its handle (the workflow's own task), as the other
# systems await theirs. Only a run recovered after a worker restart has no handle here: its
# result is polled from the database, at this interval (the cold wake's stamp is taken inside
# the run, so the poll moves only when the driver sees the end, not the measured latency).
RECOVERED_RESULT_POLL = 0.05


def retry_unless_rejected(error: BaseException) -> bool:
    return not isinstance(error, Rejected)


# The same policy as our steps: 6 attempts, from 2 s doubling (DBOS has no cap on the interval).
STEP: StepOptions = {
    "retries_allowed": True,
    "max_attempts": 6,
    "interval_seconds": 2.0,
    "backoff_rate": 2.0,
    "should_retry": retry_unless_rejected,
}


async def clock() -> float:
    import time

    return time.time()


class Steps(PeerEngine):
    """The loop's engine over DBOS steps, durable sleep and the workflow's message topics."""

    def __init__(self) -> None:
        # A message, once received, is the run's: asked for again (a late one judged after an
        # escalation), it is the same message, not the topic's next.
        self.received: dict[tuple[str, int], dict[str, Any]] = {}

    async def now(self) -> float:
        return await DBOS.run_step_async({"name": "now"}, clock)

    async def decide(self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]) -> Decision:
        return await DBOS.run_step_async({**STEP, "name": name}, self._decide, state, [t.name for t in allowed])

    @staticmethod
    async def _decide(state: State, allowed: list[str]) -> Decision:
        return offline_decision(state, allowed)

    async def step(self, name: str, effect: Effect[T]) -> T:
        assert world is not None
        try:
            raw = await DBOS.run_step_async({**STEP, "name": name}, run_effect, effect.to_json(), world)
        except Rejected as e:
            raise StepFailed(f"refused by the other side: {e.reason}") from e
        except Exception as e:
            raise StepFailed(str(e)) from e
        return effect.result.model_validate(raw)

    async def sleep(self, name: str, seconds: float) -> None:
        await DBOS.sleep_async(seconds)

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None:  # noqa: ASYNC109
        if (event, seq) not in self.received:
            wait = FOREVER if timeout is None else max(timeout, 0.0)
            message: dict[str, Any] | None = await DBOS.recv_async(topic=event, timeout_seconds=wait)
            if message is None:
                return None
            self.received[(event, seq)] = message
        return json.dumps(self.received[(event, seq)]).encode()


@DBOS.workflow(name="Replenish")
async def replenish_workflow(run_id: str, stock: dict[str, Any], day_seconds: float, waits: dict[str, Any]) -> dict:
    result = await replenish(
        Steps(), run_id, StockLevel.model_validate(stock), day_seconds, WaitDays.model_validate(waits)
    )
    return result.model_dump(mode="json")


async def _decide_turn(turn: int) -> dict[str, Any]:
    return decide_turn(turn)


async def _woke_at() -> float:
    return woke_at()


@DBOS.workflow(name="BenchRun")
async def bench_run(steps: int) -> float:
    for turn in range(steps):
        await DBOS.run_step_async({"name": f"decide {turn}"}, _decide_turn, turn)
    await DBOS.set_event_async("ready", True)
    await DBOS.recv_async(topic="approval", timeout_seconds=FOREVER)
    return await DBOS.run_step_async({"name": "after approval"}, _woke_at)


class DbosEngine:
    def __init__(self) -> None:
        self.handles: dict[str, WorkflowHandleAsync[Any]] = {}

    async def result(self, run_id: str) -> Any:
        handle = self.handles.pop(run_id, None)
        if handle is not None:
            return await handle.get_result()
        recovered = await DBOS.retrieve_workflow_async(run_id)
        return await recovered.get_result(polling_interval_sec=RECOVERED_RESULT_POLL)

    async def start_replenish(self, run_id: str, stock: StockLevel) -> None:
        with SetWorkflowID(run_id):
            self.handles[run_id] = await DBOS.start_workflow_async(
                replenish_workflow, run_id, stock.model_dump(mode="json"), DAY_SECONDS, WAITS.model_dump(mode="json")
            )

    async def send(self, run_id: str, event: EventKind, payload: dict[str, Any]) -> None:
        await DBOS.send_async(run_id, payload, topic=event)

    async def replenish_result(self, run_id: str) -> ReplenishmentResult:
        return ReplenishmentResult.model_validate(await self.result(run_id))

    async def start_bench(self, run_id: str, steps: int) -> None:
        with SetWorkflowID(run_id):
            self.handles[run_id] = await DBOS.start_workflow_async(bench_run, steps)

    async def bench_ready(self, run_id: str) -> bool:
        return bool(await DBOS.get_event_async(run_id, "ready", timeout_seconds=0))

    async def approve_bench(self, run_id: str, payload: dict[str, Any]) -> None:
        await DBOS.send_async(run_id, payload, topic="approval")

    async def bench_result(self, run_id: str) -> float:
        stamp: float = await self.result(run_id)
        return stamp


async def main() -> None:
    global world
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--world", required=True)
    options = parser.parse_args()
    world = HttpWorld(options.world)
    config: DBOSConfig = {"name": "replenisher-bench", "system_database_url": options.database, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    try:
        await serve(Gateway(DbosEngine(), options.world).app(), options.port)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    asyncio.run(main())
