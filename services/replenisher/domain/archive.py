"""A run's archive: what a replay needs, kept after Restate has dropped the run's journal.

Per turn: the tools the rules allowed, the decision taken (tool, arguments, reason, who
decided, model, tokens, cost), and what came of it: a call's result or failure, or a wait's
events in order (reminders, escalations, each message with its arrival and whether it
counted) and how the wait ended. With the run's request and start time that is enough to
rebuild the run's state turn by turn through the tools' own `apply`, and so to ask another
decider the same question at every turn without touching the world.

Compact and bounded: texts are cut, a run has at most `MAX_TURNS` turns, and a builder that
would outgrow `MAX_ARCHIVE_BYTES` stops adding turns and says where it was cut. Versioned by
`schema_version`, so a reader can refuse what it does not know.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from replenisher.domain.costs import TokenUsage
from replenisher.domain.decisions import Decision

ARCHIVE_SCHEMA_VERSION = 1
MAX_ARCHIVE_BYTES = 96_000
"""Upper bound on one archive as JSON: a full run of 30 turns is typically 10-20 kB."""
MAX_TEXT = 400
MAX_ARGS_CHARS = 2_000
MAX_WAIT_EVENTS = 40
"""Refused messages beyond this are counted, not kept: a flood must not grow the archive."""


SECRET_KEYS = frozenset({"token", "approval_token"})
WITHHELD = "withheld"


def redact(value: Any) -> Any:
    """Approval tokens blanked: whoever holds one can answer for the manager. A replay needs
    none (the rules already judged each message; the archive keeps only what counted)."""
    if isinstance(value, dict):
        return {k: (WITHHELD if k in SECRET_KEYS and v else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def dumped(model: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = redact(model.model_dump(mode="json"))
    return out


def cut(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


class ArchivedDecision(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    decider: str = "offline"
    model: str | None = None
    usage: TokenUsage | None = None
    usd: float = 0.0

    @classmethod
    def of(cls, decision: Decision) -> ArchivedDecision:
        args = decision.args if len(json.dumps(decision.args, default=str)) <= MAX_ARGS_CHARS else {"_cut": True}
        return cls(
            tool=decision.tool[:80],
            args=args,
            reason=cut(decision.reason) or "",
            decider=decision.decider[:40],
            model=cut(decision.model, 80),
            usage=decision.usage,
            usd=decision.usd,
        )


class StepOutcome(BaseModel):
    """A call tool's journaled step: its result as JSON, or why it failed for good."""

    name: str
    result: dict[str, Any] | None = None
    failure: str | None = None


class WaitEvent(BaseModel):
    kind: Literal["reminder", "escalation", "message", "refused"]
    seq: int | None = None
    detail: dict[str, Any] | None = Field(default=None, description="reminder/escalation result, message payload")
    sender: dict[str, Any] | None = None
    arrived_at: float | None = None
    refusal: str | None = None


class WaitOutcome(BaseModel):
    event: str
    events: list[WaitEvent] = Field(default_factory=list)
    ended: Literal["message", "deadline"] = "deadline"
    dropped: int = Field(default=0, description="refused messages beyond MAX_WAIT_EVENTS, counted only")


class ArchivedTurn(BaseModel):
    turn: int
    at: float = Field(description="the run's journaled clock when the turn began")
    allowed: list[str]
    decision: ArchivedDecision
    step: StepOutcome | None = None
    wait: WaitOutcome | None = None
    summary: str | None = None


class RunArchive(BaseModel):
    schema_version: int = ARCHIVE_SCHEMA_VERSION
    run_id: str
    sku: str
    started_at: float
    code: str | None = None
    request: dict[str, Any] = Field(description="the run's request as JSON: stock, waits, calendar, memory, terms")
    turns: list[ArchivedTurn] = Field(default_factory=list)
    outcome: str | None = Field(default=None, description="the run's outcome; None while it runs")
    ended_at: float | None = None
    cut_at_turn: int | None = Field(default=None, description="turns from here on did not fit the size bound")

    def size(self) -> int:
        return len(self.model_dump_json())

    def add_turn(self, turn: ArchivedTurn) -> None:
        """Keep the turn if the archive stays within its bound; otherwise mark where it was cut."""
        if self.cut_at_turn is not None or any(t.turn == turn.turn for t in self.turns):
            return  # a re-delivered turn, or past the cut
        self.turns.append(turn)
        self.turns.sort(key=lambda t: t.turn)
        if self.size() > MAX_ARCHIVE_BYTES - 1_000:  # room left for the outcome
            self.turns.remove(turn)
            self.cut_at_turn = turn.turn

    def finish(self, outcome: str, ended_at: float) -> None:
        self.outcome = cut(outcome, 80)
        self.ended_at = ended_at


class TurnBuilder:
    """Collects one turn as the loop runs it; `record()` is what gets sent to the archive."""

    def __init__(self, turn: int, at: float, allowed: list[str], decision: Decision) -> None:
        self.record = ArchivedTurn(turn=turn, at=at, allowed=allowed, decision=ArchivedDecision.of(decision))

    def step(self, name: str, result: BaseModel | None = None, failure: str | None = None) -> None:
        self.record.step = StepOutcome(
            name=name, result=None if result is None else dumped(result), failure=cut(failure)
        )

    def _wait(self, event: str) -> WaitOutcome:
        if self.record.wait is None:
            self.record.wait = WaitOutcome(event=event)
        return self.record.wait

    def _add(self, event: str, item: WaitEvent) -> None:
        wait = self._wait(event)
        if len(wait.events) >= MAX_WAIT_EVENTS:
            wait.dropped += 1
        else:
            wait.events.append(item)

    def reminder(self, event: str, sent: BaseModel) -> None:
        self._add(event, WaitEvent(kind="reminder", detail=dumped(sent)))

    def escalation(self, event: str, result: BaseModel) -> None:
        self._add(event, WaitEvent(kind="escalation", detail=dumped(result)))

    def escalation_failed(self, event: str, why: str) -> None:
        self._add(event, WaitEvent(kind="escalation", refusal=cut(why)))

    def refused(self, event: str, seq: int, why: str) -> None:
        self._add(event, WaitEvent(kind="refused", seq=seq, refusal=cut(why)))

    def message(self, event: str, seq: int, payload: BaseModel, sender: BaseModel, arrived_at: float | None) -> None:
        wait = self._wait(event)
        # The message that ends the wait is always kept, whatever was dropped before it.
        wait.events.append(
            WaitEvent(
                kind="message",
                seq=seq,
                detail=dumped(payload),
                sender=dumped(sender),
                arrived_at=arrived_at,
            )
        )
        wait.ended = "message"

    def deadline(self, event: str) -> None:
        self._wait(event).ended = "deadline"

    def done(self, summary: str | None) -> ArchivedTurn:
        self.record.summary = cut(summary)
        return self.record
