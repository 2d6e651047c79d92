"""`ReplayEngine`: the loop's engine that serves a recorded run back to it.

Every clock reading, step result or failure, message (or timeout) and arrival answer comes
from the archive, in the order the loop asks; nothing is executed (an `Effect` is never run:
this engine holds no world). Only `decide` is live: it asks the decider under test, and
`decided` compares the loop's final choice with the recorded one.

At the first divergence it raises `Diverged`, unless told to keep going; then the loop
carries on with the new choice for as long as the record still answers what the loop asks
(the same step by name, the same message by its promise). When it asks for something the
record does not hold, the engine raises `RecordEnds`: the replay stops there, and says why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, Field

from replenisher.domain.archive import ArchivedDecision, Entry, Op, RunArchive
from replenisher.domain.decisions import Decider, Decision, Refusal
from replenisher.domain.documents import EventKind
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS_BY_NAME, Tool
from replenisher.loop import names
from replenisher.loop.engine import Effect, StepFailed, ask_decider
from replenisher.loop.patches import check
from replenisher.loop.request import CurrentWait

if TYPE_CHECKING:
    from replenisher.domain.outcomes import ReplenishmentResult

T = TypeVar("T", bound=BaseModel)
ASK_ATTEMPTS = 3


class Choice(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    decider: str = ""
    model: str | None = None

    @classmethod
    def of(cls, decision: Decision | ArchivedDecision) -> Choice:
        # The fields both kinds of decision have, read by name: no list of them to keep in step.
        return cls.model_validate(decision, from_attributes=True)


class Divergence(BaseModel):
    turn: int
    recorded: Choice
    replayed: Choice


class TurnPair(BaseModel):
    """One turn as the record has it and as the replay chose it: a row of the side-by-side timeline."""

    turn: int
    at: float | None = None
    recorded: str
    replayed: str
    agree: bool
    replayed_why: str = ""
    replayed_by: str = Field(default="", description="the decider, or the rules when it could not answer")


Stop = Literal["end of record", "diverged", "record no longer applies"]


class ReplayReport(BaseModel):
    run_id: str
    sku: str
    decider: str
    model: str | None = None
    turns: int = Field(default=0, description="turns compared")
    agree: int = 0
    diverged: int = 0
    first_divergence: Divergence | None = None
    divergences: list[Divergence] = Field(default_factory=list)
    pairs: list[TurnPair] = Field(default_factory=list, description="every compared turn, both choices")
    stopped: Stop = "end of record"
    stop_detail: str = ""
    rules_took: int = Field(
        default=0, description="turns the rules decided: the decider could not answer, or was refused"
    )
    usd: float = Field(default=0.0, description="what the replay's model calls cost")
    input_tokens: int = 0
    output_tokens: int = 0
    recorded_outcome: str | None = None
    replayed_outcome: str | None = Field(default=None, description="the loop's outcome, when it got to the end")


class Diverged(Exception):
    """The decider parted from the record, and the replay stops there."""


class RecordEnds(Exception):
    """The loop asks for something the record does not hold."""


def canonical_args(tool_name: str, args: dict[str, Any]) -> str:
    tool = TOOLS_BY_NAME.get(tool_name)
    try:
        parsed = tool.parse_args(args).model_dump(mode="json") if tool is not None else args
    except ValueError:
        parsed = args
    return json.dumps(parsed, sort_keys=True, default=str)


def same_choice(recorded: ArchivedDecision, replayed: Decision) -> bool:
    return recorded.tool == replayed.tool and canonical_args(recorded.tool, recorded.args) == canonical_args(
        replayed.tool, replayed.args
    )


class ReplayEngine:
    def __init__(self, archive: RunArchive, decider: Decider, *, keep_going: bool = False) -> None:
        self.run_id = archive.run_id
        self.code = archive.code or ""
        self.entries = archive.entries
        self.at = 0
        self.decider = decider
        self.keep_going = keep_going
        self.report = ReplayReport(
            run_id=archive.run_id,
            sku=archive.sku,
            decider=decider.name,
            model=getattr(decider, "model", None),
            recorded_outcome=archive.outcome,
        )

    def _next(self, op: Op, name: str | None = None) -> Entry:
        if self.at >= len(self.entries):
            raise RecordEnds(f"the record ends where the run asks for {op} {name or ''}".rstrip())
        entry = self.entries[self.at]
        if entry.op != op or (name is not None and entry.name != name):
            asked, held = f"{op} {name or ''}".rstrip(), f"{entry.op} {entry.name or ''}".rstrip()
            raise RecordEnds(f"the run asks for {asked}, the record holds {held}")
        self.at += 1
        return entry

    async def now(self) -> float:
        return float(self._next("now").value)

    def patched(self, name: str) -> bool:
        """As the run answered: the archive notes each new branch it took, and nothing for an old one."""
        check(name)
        if self.at < len(self.entries) and (entry := self.entries[self.at]).op == "patched" and entry.name == name:
            self.at += 1
            return True
        return False

    async def decide(self, name: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal]) -> Decision:
        # A transient failure is retried, as the workflow's step is.
        decision = await ask_decider(self.decider, state, allowed, refusals, ASK_ATTEMPTS)
        self.report.usd += decision.usd
        if decision.usage is not None:
            self.report.input_tokens += decision.usage.input_tokens
            self.report.output_tokens += decision.usage.output_tokens
        return decision

    def decided(self, turn: int, state: State, allowed: Sequence[Tool], decision: Decision) -> None:
        recorded = self._next("decided")
        assert recorded.decision is not None
        offered = [t.name for t in allowed]
        if offered != recorded.allowed:
            raise RecordEnds(f"turn {turn}: the rules offer {offered}, the record {recorded.allowed}")
        self.report.turns += 1
        if decision.decider != self.decider.name:
            self.report.rules_took += 1
        agree = same_choice(recorded.decision, decision)
        by = decision.decider + (f" {decision.model}" if decision.model else "")
        pair = TurnPair(
            turn=turn,
            at=state.now,
            recorded=recorded.decision.tool,
            replayed=decision.tool,
            agree=agree,
            replayed_why=decision.reason,
            replayed_by=by,
        )
        self.report.pairs.append(pair)
        if agree:
            self.report.agree += 1
            return
        self.report.diverged += 1
        divergence = Divergence(turn=turn, recorded=Choice.of(recorded.decision), replayed=Choice.of(decision))
        self.report.divergences.append(divergence)
        self.report.first_divergence = self.report.first_divergence or divergence
        if not self.keep_going:
            raise Diverged(f"turn {turn}")

    async def step(self, name: str, effect: Effect[T]) -> T:
        entry = self._next("step", name)
        if entry.failure is not None:
            raise StepFailed(entry.failure)
        return effect.result.model_validate(entry.value)

    async def sleep(self, name: str, seconds: float) -> None:
        return None  # the record's next clock reading is already past it

    async def receive(self, event: EventKind, seq: int, timeout: float | None) -> bytes | None:  # noqa: ASYNC109
        entry = self._next("receive", names.message_promise(event, seq))
        return None if entry.value is None else str(entry.value).encode()

    async def arrived_by(self, event: EventKind, seq: int, deadline: float) -> bool:
        return bool(self._next("arrived_by", names.message_promise(event, seq)).value)

    def checkpoint(self, state: State) -> None:
        return None

    def show_wait(self, wait: CurrentWait | None) -> None:
        return None

    def finish(self, result: ReplenishmentResult) -> None:
        self.report.replayed_outcome = result.outcome
