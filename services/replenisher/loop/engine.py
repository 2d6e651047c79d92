"""What the loop needs from a durable engine: the `Engine` protocol.

"Engine" means one thing in this package: what the loop runs on, this protocol. Each of its
engines is named for what it is: Restate's (`replenisher.durable.restate_engine`), the one in
memory (`replenisher.in_memory.engine`) and the one that plays a recorded run back
(`replenisher.replay.playback`); the benchmark's peers have their own.

The loop (`replenisher.loop.run`) is the same on every engine; an engine only makes its
primitives durable (journaled, replayable) or, for the in-memory and replay engines, stands
in for them. Names come from the loop (`replenisher.loop.names`); an engine journals under
them and must not make up its own.

- `now()`: the run's clock, as the engine records it (Restate: `ctx.time()`). Every rule
  that depends on time reads this, never the host's clock.
- `decide(name, state, allowed, refusals)`: one ask of the run's decider, as one journaled
  step; which decider it asks is the engine's business (the composition root, a pinned one,
  a replay's new one). Raises `DeciderUnavailable` when it cannot answer (retries spent, or
  refused for good): the rules then take the turn.
- `decided(turn, state, allowed, decision)`: the turn's final decision (the decider's
  checked pick, or the rules' after refusals, an outage or a spent budget), before it is
  carried out. For engines that keep their own record of a run; Restate's journal already
  holds every ask, and the rules' pick follows from it.
- `step(name, effect)`: one side effect on the outside world (`Effect.run(world)`), with the
  engine's bounded retry. Raises `StepFailed` with the reason once it failed for good; the
  loop hands that to the tool's `apply_failure`. An engine that must ship the effect to
  another process (a Temporal activity) sends `effect.to_json()` and rebuilds it with
  `Effect.from_json`.
- `sleep(name, seconds)`: a durable delay.
- `receive(event, seq, timeout)`: the raw bytes of the `seq`-th message of a kind (its
  promise is `names.message_promise(event, seq)`), as sent (untrusted: the loop parses it).
  `timeout > 0`: wait at most that long, None if it has not come; `timeout <= 0`: only a
  message already there (a peek); `timeout is None`: wait until it comes.
  Once got, the message is the run's: asked for the same `seq` again (a late message judged
  again after an escalation) it is the same message, not the next one.
- `arrived_by(event, seq, deadline)`: whether that message reached the run's address by
  `deadline` though the run has not got it yet (after a downtime the engine's timer may have
  won the race). An engine that cannot hold a message up answers False.
- `checkpoint(state)`: make the state visible (the run's views, the SKU's security record);
  called after every turn and whenever a wait changes the state.
- `show_wait(wait)`: the wait the run is in now, or None when it ends (for the views).
- `finish(result)`: hand the outcome on (to the SKU); the last thing a run does.
- `patched(name)`: whether the code that first ran the run up to here knew the patch `name`
  (`replenisher.loop.patches`): a branch between old and new behaviour that replays as it first
  ran. Restate's engine reads it from the journal (the stamp of the last decision or step, or of
  the run's request), never from the process that asks; the others answer for the one code they
  run (the in-memory engine: the patches it was given; a replay: what the run recorded).

A run's archive, for `replenisher replay`, is not an engine's business: wrapping any engine in
`replenisher.loop.archiving.Archiving` notes every answer it gives the loop, and the replay
engine (`replenisher.replay.playback`) serves them back to the same loop.

Attributes: `run_id` (the run's id, e.g. `replenish-SKU-1`) and `code` (the code version
stamped on the turn being decided: the code that gave the run's last answer, as `patched` reads
it; "" when there is none).

Any other failure an engine cannot recover from (a refused journal entry) is raised as
`RunStopped`: the run then ends with a true outcome, never a silent stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from replenisher.domain.decisions import GOAL, Decider, Decision, Refusal
from replenisher.domain.documents import EventKind
from replenisher.domain.escalation import Reminder, ReminderSent
from replenisher.domain.ports import Rejected, World
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS_BY_NAME, Call, Tool, Wait
from replenisher.domain.turns import DeciderUnavailable

if TYPE_CHECKING:
    from replenisher.domain.outcomes import ReplenishmentResult
    from replenisher.loop.request import CurrentWait

T = TypeVar("T", bound=BaseModel)
EffectKind = Literal["call", "remind", "escalate"]


class StepFailed(Exception):
    """A step failed for good (retries spent, or refused by the other side)."""


class RunStopped(Exception):
    """The engine cannot go on with this run (a bug, a refused journal entry)."""


@dataclass(frozen=True)
class Effect(Generic[T]):
    """One side effect a turn has on the world: a call tool's `execute`, a wait's reminder or escalation."""

    kind: EffectKind
    tool: str
    state: State
    args: BaseModel | None = None
    """The call's arguments, or the `Reminder` to send; None for an escalation."""

    @property
    def result(self) -> type[T]:
        tool = TOOLS_BY_NAME[self.tool]
        if self.kind == "call":
            assert isinstance(tool, Call)
            return tool.Result  # type: ignore[no-any-return]
        if self.kind == "remind":
            return ReminderSent  # type: ignore[return-value]
        assert isinstance(tool, Wait)
        return tool.Escalation  # type: ignore[return-value]

    async def run(self, world: World) -> T:
        tool = TOOLS_BY_NAME[self.tool]
        if self.kind == "call":
            assert isinstance(tool, Call)
            return await tool.execute(self.state, self.args, world)  # type: ignore[no-any-return]
        assert isinstance(tool, Wait)
        if self.kind == "remind":
            assert isinstance(self.args, Reminder)
            return await tool.remind(self.state, self.args, world)  # type: ignore[return-value]
        return await tool.escalate(self.state, world)  # type: ignore[no-any-return]

    def to_json(self) -> dict[str, Any]:
        args = self.args.model_dump(mode="json") if self.args is not None else None
        return {"kind": self.kind, "tool": self.tool, "state": self.state.model_dump(mode="json"), "args": args}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Effect[Any]:
        kind, tool = data["kind"], TOOLS_BY_NAME[data["tool"]]
        raw = data.get("args")
        args: BaseModel | None = None
        if kind == "call":
            args = tool.parse_args(raw or {})
        elif kind == "remind":
            args = Reminder.model_validate(raw)
        return cls(kind=kind, tool=tool.name, state=State.model_validate(data["state"]), args=args)


async def ask_decider(
    decider: Decider, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal], attempts: int
) -> Decision:
    """One ask with Restate's bounded step retry, for engines without a journal (in memory, replay):
    transient errors are retried, `Rejected` is final; either way out is `DeciderUnavailable`."""
    last: Exception | None = None
    for _ in range(attempts):
        try:
            return await decider.decide(GOAL, state, allowed, refusals)
        except Rejected as e:
            raise DeciderUnavailable(e.reason) from e
        except Exception as e:
            last = e
    raise DeciderUnavailable(f"retries spent: {last}")


class Engine(Protocol):
    run_id: str

    @property
    def code(self) -> str: ...

    def patched(self, name: str) -> bool: ...

    async def now(self) -> float: ...

    async def decide(
        self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]
    ) -> Decision: ...

    def decided(self, turn: int, state: State, allowed: Sequence[Tool], decision: Decision) -> None: ...

    async def step(self, name: str, effect: Effect[T]) -> T: ...

    async def sleep(self, name: str, seconds: float) -> None: ...

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None: ...  # noqa: ASYNC109

    async def arrived_by(self, event: EventKind, seq: int, deadline: float) -> bool: ...

    def checkpoint(self, state: State) -> None: ...

    def show_wait(self, wait: CurrentWait | None) -> None: ...

    def finish(self, result: ReplenishmentResult) -> None: ...
