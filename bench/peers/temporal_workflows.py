"""Temporal workflows of the benchmark: deterministic orchestration, every side effect an activity.

`Replenish` runs the project's loop with Temporal's primitives: the decider and each side effect are
activities (retried by the server with the same bounded backoff as ours), messages arrive as
signals into the workflow's inbox, and a wait is `workflow.wait_condition` with a timeout (a
durable timer). `BenchRun` is the wake-up shape: K activities, a signal, one activity after it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    import json
    from collections.abc import Sequence

    from pydantic import BaseModel

    from bench.peers.loop import PeerEngine, StepFailed, replenish
    from replenisher.domain.decisions import Decision, Refusal
    from replenisher.domain.documents import EventKind, StockLevel
    from replenisher.domain.state import State
    from replenisher.domain.tools import Tool
    from replenisher.domain.waits import WaitDays
    from replenisher.loop import Effect

T = TypeVar("T", bound="BaseModel")

# The same policy as our steps: 6 attempts, from 2 s doubling to at most 60 s.
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=6,
)
STEP_TIMEOUT = timedelta(seconds=30)


class Activities(PeerEngine):
    """The loop's engine over activities, signals and timers, for one workflow instance."""

    def __init__(self, inbox: dict[str, list[dict[str, Any]]]) -> None:
        self.inbox = inbox

    async def now(self) -> float:
        return workflow.now().timestamp()

    async def decide(self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]) -> Decision:
        raw = await workflow.execute_activity(
            "decide",
            args=[state.model_dump(mode="json"), [t.name for t in allowed]],
            start_to_close_timeout=STEP_TIMEOUT,
            retry_policy=RETRY,
            summary=name,
        )
        return Decision.model_validate(raw)

    async def step(self, name: str, effect: Effect[T]) -> T:
        try:
            raw = await workflow.execute_activity(
                "run_effect",
                args=[effect.to_json()],
                start_to_close_timeout=STEP_TIMEOUT,
                retry_policy=RETRY,
                summary=name,
            )
        except ActivityError as e:
            raise StepFailed(str(e.cause or e)) from e
        return effect.result.model_validate(raw)

    async def sleep(self, name: str, seconds: float) -> None:
        await workflow.sleep(seconds, summary=name)

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None:  # noqa: ASYNC109
        messages = self.inbox[event]
        if timeout is None or timeout > 0:
            try:
                await workflow.wait_condition(lambda: len(messages) > seq, timeout=timeout)
            except TimeoutError:
                return None
        return json.dumps(messages[seq]).encode() if len(messages) > seq else None


@workflow.defn(name="Replenish")
class ReplenishWorkflow:
    def __init__(self) -> None:
        self.inbox: dict[str, list[dict[str, Any]]] = defaultdict(list)

    @workflow.run
    async def run(
        self, run_id: str, stock: dict[str, Any], day_seconds: float, waits: dict[str, Any]
    ) -> dict[str, Any]:
        result = await replenish(
            Activities(self.inbox),
            run_id,
            StockLevel.model_validate(stock),
            day_seconds,
            WaitDays.model_validate(waits),
        )
        return result.model_dump(mode="json")

    @workflow.signal
    def deliver(self, message: dict[str, Any]) -> None:
        self.inbox[message["event"]].append(message["payload"])


@workflow.defn(name="BenchRun")
class BenchRunWorkflow:
    def __init__(self) -> None:
        self.ready = False
        self.approval: dict[str, Any] | None = None

    @workflow.run
    async def run(self, steps: int) -> float:
        for turn in range(steps):
            await workflow.execute_activity(
                "decide_turn", turn, start_to_close_timeout=STEP_TIMEOUT, retry_policy=RETRY
            )
        self.ready = True
        await workflow.wait_condition(lambda: self.approval is not None)
        stamp: float = await workflow.execute_activity("woke_at", start_to_close_timeout=STEP_TIMEOUT)
        return stamp

    @workflow.signal
    def approve(self, payload: dict[str, Any]) -> None:
        self.approval = payload

    @workflow.query
    def is_ready(self) -> bool:
        return self.ready


__all__ = ["BenchRunWorkflow", "ReplenishWorkflow", "asyncio"]
