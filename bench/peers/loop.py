"""The replenishment loop of the peers, line for line the loop of `replenisher.durable.replenish.run`.

Each engine supplies the four durable primitives (`Durable`): a journaled decider step, a
journaled tool step, a durable sleep, and a wait for the next message of a kind raced against a
deadline. The rules, the decider and the tools' effects are the project's own pure domain code,
so every system takes the same turns for the same world.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel

from replenisher.domain.decisions import Decision
from replenisher.domain.documents import EventKind, StockLevel
from replenisher.domain.outcomes import ReplenishmentResult, result_of
from replenisher.domain.policy import choose
from replenisher.domain.ports import Rejected, World
from replenisher.domain.state import State, TurnRecord
from replenisher.domain.tools import TOOLS, TOOLS_BY_NAME, Call, Done, Wait
from replenisher.domain.tools.limits import MAX_TURNS
from replenisher.domain.waits import WaitDays


class StepFailed(Exception):
    """A tool step failed for good (retries spent, or refused): the decider sees it."""


class Durable(Protocol):
    async def now(self) -> float: ...

    async def decide(self, turn: int, state: State, allowed: list[str]) -> Decision: ...

    async def execute(self, turn: int, tool: Call[Any, Any], state: State, args: BaseModel) -> BaseModel: ...

    async def sleep(self, name: str, seconds: float) -> None: ...

    async def receive(self, event: EventKind, seq: int, timeout: float) -> dict[str, Any] | None: ...  # noqa: ASYNC109


def offline_decision(state: State, allowed: list[str]) -> Decision:
    return choose(state, allowed)


async def execute_tool(tool_name: str, state: State, args: dict[str, Any], world: World) -> dict[str, Any]:
    """A tool's side effect, as the body of one step; `Rejected` means retrying will not help."""
    tool = TOOLS_BY_NAME[tool_name]
    assert isinstance(tool, Call)
    result = await tool.execute(state, tool.parse_args(args), world)
    return result.model_dump(mode="json")


__all__ = ["Durable", "Rejected", "StepFailed", "execute_tool", "offline_decision", "replenish"]


async def replenish(
    engine: Durable, run_id: str, stock: StockLevel, day_seconds: float, waits: WaitDays
) -> ReplenishmentResult:
    state = State.start(run_id, stock, day_seconds, await engine.now(), waits)
    for turn in range(MAX_TURNS):
        state.now = await engine.now()  # as the service's loop: the rules read a journaled clock
        allowed = [t for t in TOOLS if t.allowed(state)]
        if not allowed:
            break
        decision = await engine.decide(turn, state, [t.name for t in allowed])
        tool = TOOLS_BY_NAME[decision.tool]
        args = tool.parse_args(decision.args)
        if isinstance(tool, Done):
            state.history.append(TurnRecord(turn=turn, tool=tool.name, reason=decision.reason))
            break
        if isinstance(tool, Wait):
            summary = await wait(engine, tool, state)
        else:
            assert isinstance(tool, Call)
            summary = await call(engine, turn, tool, args, state)
        state.history.append(TurnRecord(turn=turn, tool=tool.name, reason=decision.reason, summary=summary))
    return result_of(state, await engine.now())


async def call(engine: Durable, turn: int, tool: Call[Any, Any], args: BaseModel, state: State) -> str:
    delay = tool.delay_days(state)
    if delay > 0:
        await engine.sleep(f"before {tool.name} {turn}", state.days(delay))
    try:
        result = await engine.execute(turn, tool, state, args)
    except StepFailed as e:
        return tool.apply_failure(state, args, str(e))
    return tool.apply(state, args, result)


async def wait(engine: Durable, tool: Wait[Any], state: State) -> str:
    seq = state.next_message_number(tool.event)
    state.now = await engine.now()
    remaining = tool.deadline(state) - state.now
    raw = await engine.receive(tool.event, seq, max(remaining, 0.0))
    if raw is None:
        return tool.apply(state, None)
    state.now = await engine.now()
    state.mark_consumed(tool.event)
    return tool.apply(state, tool.Payload.model_validate(raw))
