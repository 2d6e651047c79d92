"""`MemoryEngine`: the loop (`replenisher.loop`) in one process, against the simulated world in memory.

No Restate, no HTTP: the real loop, tools, rules, `decide_turn` and deciders, so what the
decider, memory and injection suites prove holds for the workflow too. Restate's bounded
step retry is stood in for by retrying the decider (`Rejected` is final); a step's
`Rejected` fails the step, as it does on Restate. Durable delays and waits move the
simulated `Clock`: a wait gets the next message from the `Inbox` or its deadline passes,
and tools that read the world's clock inside `execute` read the simulated one.

`run_in_memory` is a whole replenishment: it returns the run's state, outcome and what the
engine saw (each final decision, each tool run with whether the rules allowed it then).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from replenisher.domain.archive import RunArchive
from replenisher.domain.decisions import Decider, DeciderTerms, Decision, Refusal
from replenisher.domain.documents import EventKind, StockLevel
from replenisher.domain.escalation import ApprovalPolicy
from replenisher.domain.memory import MemoryBrief
from replenisher.domain.outcomes import ReplenishmentResult, result_of
from replenisher.domain.ports import Rejected
from replenisher.domain.sku import run_id_of
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS, Tool, Wait
from replenisher.domain.turns import Ask
from replenisher.in_memory.world import DAY, SKU, Inbox, MemoryWorld
from replenisher.loop import Effect, RunRequest, StepFailed, patches, replenish
from replenisher.loop.archiving import Archiving, MemorySink
from replenisher.loop.engine import ask_decider
from replenisher.loop.request import CurrentWait

T = TypeVar("T", bound=BaseModel)
WAITS_BY_EVENT: dict[str, Wait[Any]] = {t.event: t for t in TOOLS if isinstance(t, Wait)}
STEP_ATTEMPTS = 4
DECIDE_ATTEMPTS = 4
TURN_DAYS = 0.01
"""How far the clock moves on each turn, so that no two turns happen at the same instant."""


class Halt(Exception):
    """The caller's `until` holds: stop before the next turn, as a test that needs a state mid-run asks."""


def ask_with_retries(decider: Decider, state: State, allowed: Sequence[Tool], attempts: int = DECIDE_ATTEMPTS) -> Ask:
    """The decider asked as `decide_turn` asks it, with Restate's bounded step retry (`ask_decider`)."""

    async def ask(attempt: int, refusals: Sequence[Refusal] = ()) -> Decision:
        return await ask_decider(decider, state, allowed, refusals, attempts)

    return ask


@dataclass
class MemoryEngine:
    run_id: str
    decider: Decider
    world: MemoryWorld
    inbox: Inbox
    until: Callable[[State], bool] | None = None
    code: str = ""
    patches: tuple[str, ...] | None = None
    """The patches the run's code knew (`replenisher.loop.patches`); None: this code's own."""
    state: State | None = None
    decisions: list[Decision] = field(default_factory=list)
    executed: list[tuple[str, bool]] = field(default_factory=list)
    """Each tool taken, and whether the rules allowed it at that moment."""
    result: ReplenishmentResult | None = None
    archive: RunArchive | None = None
    """The run's archive, as Restate would keep it for a replay (`run_in_memory` records it)."""
    steps: list[str] = field(default_factory=list)
    """The name of each step taken, as Restate would journal it."""
    delays: list[tuple[str, float]] = field(default_factory=list)
    """Each durable delay: its name and length in seconds."""
    received: dict[tuple[str, int], bytes | None] = field(default_factory=dict)
    """Each message once taken: asked for again (a late one, after an escalation), it is the same one."""

    async def now(self) -> float:
        return self.world.clock.now

    def patched(self, name: str) -> bool:
        return patches.check(name) in (patches.known() if self.patches is None else self.patches)

    async def decide(self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]) -> Decision:
        self.state = state
        if self.until is not None and self.until(state):
            raise Halt
        return await ask_decider(self.decider, state, allowed, refusals, DECIDE_ATTEMPTS)

    def decided(self, turn: int, state: State, allowed: Sequence[Tool], decision: Decision) -> None:
        self.state = state
        self.decisions.append(decision)
        self.executed.append((decision.tool, decision.tool in {t.name for t in TOOLS if t.allowed(state)}))

    async def step(self, name: str, effect: Effect[T]) -> T:
        """Restate's bounded retry, without its backoff: an answer that will not change ends it at once."""
        self.steps.append(name)
        last: Exception | None = None
        for _ in range(STEP_ATTEMPTS):
            try:
                # The tools stamp their results with `world.clock()`: here, the simulated clock.
                return await effect.run(self.world)
            except Rejected as e:
                raise StepFailed(f"refused by the other side: {e.reason}") from e
            except Exception as e:
                last = e
        raise StepFailed(f"retries spent: {last}")

    async def sleep(self, name: str, seconds: float) -> None:
        self.delays.append((name, seconds))
        self.world.clock.now += max(seconds, 0.0)

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None:  # noqa: ASYNC109
        assert self.state is not None
        if self.received.get((event, seq)) is None:
            payload = self.inbox.next(WAITS_BY_EVENT[event], self.state)
            self.received[(event, seq)] = (
                None if payload is None else json.dumps(payload.model_dump(mode="json")).encode()
            )
        return self.received[(event, seq)]

    async def arrived_by(self, event: EventKind, seq: int, deadline: float) -> bool:
        return False

    def checkpoint(self, state: State) -> None:
        self.state = state
        self.world.clock.advance(TURN_DAYS)

    def show_wait(self, wait: CurrentWait | None) -> None:
        pass

    def finish(self, result: ReplenishmentResult) -> None:
        self.result = result


@dataclass
class Run:
    state: State
    result: ReplenishmentResult
    world: MemoryWorld
    inbox: Inbox
    decisions: list[Decision]
    executed: list[tuple[str, bool]]
    """Each tool run, and whether the rules allowed it at that moment."""
    engine: MemoryEngine


async def run_in_memory(
    decider: Decider,
    world: MemoryWorld,
    inbox: Inbox,
    *,
    suppliers: list[str],
    memory: MemoryBrief | None = None,
    terms: DeciderTerms | None = None,
    run_number: int = 1,
    on_hand: int = 5,
    until: Callable[[State], bool] | None = None,
    people_matrix: bool | None = None,
    approval_policy: ApprovalPolicy | None = None,
    patches: tuple[str, ...] | None = None,
) -> Run:
    """`people_matrix`: the run starts with an authority matrix in force (its approvals must name people);
    `approval_policy`: its reminders and backup approver (none, unless given); `patches`: those its code
    knows (`replenisher.loop.patches`; None: this code's own)."""
    stock = StockLevel(sku=SKU, on_hand=on_hand, safety_stock=20, target_stock=100, suppliers=suppliers)
    request = RunRequest(
        stock=stock,
        day_seconds=DAY,
        memory=memory,
        decider_terms=terms or DeciderTerms(),
        people_matrix=people_matrix,
        approval_policy=approval_policy or ApprovalPolicy.none(),
    )
    engine = MemoryEngine(run_id_of(SKU, run_number), decider, world, inbox, until=until, patches=patches)
    sink = MemorySink()
    try:
        # Archived as the workflow archives it, for the suites that replay it.
        result = await replenish(Archiving(engine, sink, request, SKU), request)
    except Halt:
        assert engine.state is not None
        result = result_of(engine.state, world.clock.now)
    assert engine.state is not None
    engine.archive = sink.archive
    return Run(engine.state, result, world, inbox, engine.decisions, engine.executed, engine)
