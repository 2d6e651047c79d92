"""Replay a run's archive against a decider: every result and message comes from the record.

Each recorded turn, the run's state is as it was then (rebuilt through the tools' own
`apply` from recorded results, never from the world); the rules offer the same tools, the
decider under test is asked through the same `decide_turn`, and its choice is compared with
the recorded one. Nothing here holds an HTTP client for the world: the only outside call a
replay can make is the decider's own (the model, for Claude).

At the first divergence the replay stops and reports the turn, both choices and both
reasons. With `keep_going` it follows the recorded choice after a divergence (its results
are the only ones there are) and goes on comparing until the record runs out or no longer
applies (the rules offer other tools than the record shows).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from replenisher.domain.archive import ARCHIVE_SCHEMA_VERSION, ArchivedDecision, ArchivedTurn, RunArchive
from replenisher.domain.decisions import GOAL, Decider, Decision, Refusal
from replenisher.domain.documents import Arrival, Sender
from replenisher.domain.escalation import ReminderSent
from replenisher.domain.ports import Rejected
from replenisher.domain.state import State, TurnRecord
from replenisher.domain.tools import TOOLS, TOOLS_BY_NAME, Call, Done, Tool, Wait
from replenisher.domain.turns import Ask, DeciderUnavailable, decide_turn

ASK_ATTEMPTS = 3


class ArchiveUnreadable(ValueError):
    """An archive this code cannot replay (a newer schema, or damaged)."""


class Choice(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    decider: str = ""
    model: str | None = None


class Divergence(BaseModel):
    turn: int
    recorded: Choice
    replayed: Choice


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
    stopped: Literal["end of record", "diverged", "record no longer applies"] = "end of record"
    stop_detail: str = ""
    usd: float = Field(default=0.0, description="what the replay's model calls cost")
    input_tokens: int = 0
    output_tokens: int = 0
    recorded_outcome: str | None = None


def read_archive(raw: dict[str, Any]) -> RunArchive:
    version = raw.get("schema_version")
    if version != ARCHIVE_SCHEMA_VERSION:
        raise ArchiveUnreadable(f"archive schema_version {version!r}; this code reads {ARCHIVE_SCHEMA_VERSION}")
    return RunArchive.model_validate(raw)


def start_state(archive: RunArchive) -> State:
    """The run's state before its first turn, as the workflow builds it from the same request."""
    from replenisher.durable.replenish import RunRequest

    request = RunRequest.model_validate(archive.request)
    state = State.start(
        archive.run_id,
        request.stock,
        request.day_seconds,
        archive.started_at,
        request.waits,
        calendar=request.calendar,
        origin=request.origin,
        approval_policy=request.approval_policy,
    )
    state.memory = request.memory
    if request.adopt is not None:
        state.adopt(request.adopt.po, request.adopt.ack, request.adopt.from_run, request.adopt.progress)
    return state


def decider_terms(archive: RunArchive) -> Any:
    from replenisher.durable.replenish import RunRequest

    return RunRequest.model_validate(archive.request).decider_terms


def direct_ask(decider: Decider, state: State, allowed: Sequence[Tool]) -> Ask:
    """The decider asked directly, a transient failure retried a few times (as the workflow's step is)."""

    async def ask(attempt: int, refusals: Sequence[Refusal]) -> Decision:
        last: Exception | None = None
        for _ in range(ASK_ATTEMPTS):
            try:
                return await decider.decide(GOAL, state, allowed, refusals)
            except Rejected as e:
                raise DeciderUnavailable(e.reason) from e
            except Exception as e:  # a transient failure, as the step's retry sees it
                last = e
        raise DeciderUnavailable(f"retries spent: {last}")

    return ask


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


def apply_recorded(state: State, record: ArchivedTurn) -> str | None:
    """Fold the recorded turn's result into the state, as the workflow did when it ran."""
    tool = TOOLS_BY_NAME[record.decision.tool]
    if isinstance(tool, Done):
        return None
    args = tool.parse_args(record.decision.args)
    if isinstance(tool, Call):
        step = record.step
        if step is None:
            raise ArchiveUnreadable(f"turn {record.turn}: {tool.name} has no recorded step")
        if step.failure is not None:
            return tool.apply_failure(state, args, step.failure)
        return tool.apply(state, args, tool.Result.model_validate(step.result))
    assert isinstance(tool, Wait)
    wait = record.wait
    # Refused messages a flooded record only counted were consumed and noted all the same.
    for _ in range(wait.dropped if wait is not None else 0):
        state.mark_consumed(tool.event)
        state.record_security_event("refused message (counted, not kept, in the archive)")
    for event in wait.events if wait is not None else []:
        if event.kind == "reminder":
            tool.apply_reminder(state, ReminderSent.model_validate(event.detail))
        elif event.kind == "escalation":
            if event.detail is None:
                state.last_failure = event.refusal
            else:
                tool.apply_escalation(state, tool.Escalation.model_validate(event.detail))
        elif event.kind == "refused":
            state.mark_consumed(tool.event)
            state.record_security_event(event.refusal or "refused message")
        else:
            state.mark_consumed(tool.event)
            sender = Sender.model_validate(event.sender) if event.sender else None
            arrival = Arrival(sender=sender, at=event.arrived_at) if sender else Arrival(at=event.arrived_at)
            return tool.apply(state, tool.Payload.model_validate(event.detail), arrival)
    return tool.apply(state, None)


def choice_of(decision: Decision | ArchivedDecision) -> Choice:
    return Choice(
        tool=decision.tool, args=decision.args, reason=decision.reason, decider=decision.decider, model=decision.model
    )


async def replay(archive: RunArchive, decider: Decider, *, keep_going: bool = False) -> ReplayReport:
    state = start_state(archive)
    terms = decider_terms(archive)
    report = ReplayReport(
        run_id=archive.run_id,
        sku=archive.sku,
        decider=decider.name,
        model=getattr(decider, "model", None),
        recorded_outcome=archive.outcome,
    )
    for record in archive.turns:
        state.now = record.at
        allowed = [t for t in TOOLS if t.allowed(state)]
        offered = [t.name for t in allowed]
        if offered != record.allowed:
            report.stopped = "record no longer applies"
            report.stop_detail = f"turn {record.turn}: the rules offer {offered}, the record {record.allowed}"
            break
        decision = await decide_turn(record.turn, state, allowed, direct_ask(decider, state, allowed), terms)
        report.turns += 1
        report.usd += decision.usd
        if decision.usage is not None:
            report.input_tokens += decision.usage.input_tokens
            report.output_tokens += decision.usage.output_tokens
        if same_choice(record.decision, decision):
            report.agree += 1
        else:
            report.diverged += 1
            divergence = Divergence(turn=record.turn, recorded=choice_of(record.decision), replayed=choice_of(decision))
            report.divergences.append(divergence)
            report.first_divergence = report.first_divergence or divergence
            if not keep_going:
                report.stopped = "diverged"
                break
        summary = apply_recorded(state, record)
        turn = TurnRecord(turn=record.turn, tool=record.decision.tool, reason=record.decision.reason)
        if summary is None:  # done: the run ends here, as the workflow's loop does
            state.history.append(turn)
            break
        state.history.append(turn.model_copy(update={"summary": summary}))
    return report
