"""The peers run the project's own loop (`replenisher.loop.replenish`), the one `Replenish.run` runs.

Each peer's engine supplies the durable primitives of `replenisher.loop.Engine` its own way
(a journaled decider step, a journaled step per side effect, a durable sleep, a wait for the
next message of a kind raced against a deadline); `PeerEngine` fills in what the benchmark
does not measure (no views to update, no SKU to report to, no message held up by a downtime).
The rules, the decider's checks and re-asks, the tools' effects and the waits' reminders are
the project's own code, so every system takes the same turns for the same world.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.documents import EventKind, StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.policy import choose
from replenisher.domain.ports import Rejected, World
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.domain.waits import WaitDays
from replenisher.loop import Effect, RunRequest, StepFailed
from replenisher.loop import replenish as loop
from replenisher.loop.patches import here
from replenisher.loop.request import CurrentWait


class PeerEngine:
    """What every peer's engine does alike; each subclass makes the primitives durable on its engine."""

    run_id: str
    code = ""

    def decided(self, turn: int, state: State, allowed: Sequence[Tool], decision: Decision) -> None:
        pass

    def patched(self, name: str) -> bool:
        return here(self.code).knows(name)  # one code from start to end: its own patches

    async def arrived_by(self, event: EventKind, seq: int, deadline: float) -> bool:
        return False  # a peer's message waits in its inbox: none is ever held up past a deadline

    def checkpoint(self, state: State) -> None:
        pass

    def show_wait(self, wait: CurrentWait | None) -> None:
        pass

    def finish(self, result: ReplenishmentResult) -> None:
        pass


def offline_decision(state: State, allowed: Sequence[str], refusals: Sequence[Refusal] = ()) -> Decision:
    """The decider every system uses: the offline policy, as the body of one journaled step."""
    return choose(state, list(allowed))


async def run_effect(effect: dict[str, Any], world: World) -> dict[str, Any]:
    """A side effect (`Effect.to_json`) as the body of one step; `Rejected` means retrying will not help."""
    result = await Effect.from_json(effect).run(world)
    return result.model_dump(mode="json")


async def replenish(
    engine: Any, run_id: str, stock: StockLevel, day_seconds: float, waits: WaitDays
) -> ReplenishmentResult:
    engine.run_id = run_id
    return await loop(engine, RunRequest(stock=stock, day_seconds=day_seconds, waits=waits))


__all__ = ["PeerEngine", "Rejected", "StepFailed", "offline_decision", "replenish", "run_effect"]
