"""The agentic loop, once, for every engine.

Each turn the decider picks one of the tools the rules allow; the loop runs it (a step, or
a wait for the next message raced against its deadline) and `apply`s the result. The
engine (`replenisher.loop.engine.Engine`) makes each of those durable: on Restate a crash
replays the journal, recorded decisions and steps return their results without running
again, and `apply` rebuilds the same state. The rules stay pure in `domain/tools`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from replenisher.domain.decisions import DeciderTerms, Decision, Refusal
from replenisher.domain.escalation import Reminder, ReminderSent
from replenisher.domain.outcomes import ReplenishmentResult, result_of
from replenisher.domain.security_log import UNKNOWN_SOURCE
from replenisher.domain.state import State, TurnRecord
from replenisher.domain.tools import TOOLS, TOOLS_BY_NAME, Call, Done, Tool, Wait
from replenisher.domain.tools.limits import MAX_TURNS
from replenisher.domain.turns import decide_turn
from replenisher.loop import names
from replenisher.loop.engine import Effect, Engine, RunStopped, StepFailed
from replenisher.loop.request import CurrentWait, Envelope, RunRequest, describe


async def replenish(engine: Engine, request: RunRequest) -> ReplenishmentResult:
    state = start(engine.run_id, request, await engine.now())
    try:
        for turn in range(MAX_TURNS):
            # The rules that depend on time (a quote's validity) read the engine's recorded clock.
            state.now = await engine.now()
            allowed = [t for t in TOOLS if t.allowed(state)]
            if not allowed:
                break
            tool, args, decision = await decide(engine, turn, state, allowed, request.decider_terms)
            by = decision.decided_by
            record = TurnRecord(turn=turn, tool=tool.name, reason=decision.reason, decided_by=by, code=engine.code)
            if isinstance(tool, Done):
                state.history.append(record)
                break
            if isinstance(tool, Wait):
                record.summary = await wait(engine, tool, state)
            else:
                assert isinstance(tool, Call)
                record.summary = await call(engine, turn, tool, args, state)
            state.history.append(record)
            engine.checkpoint(state)
    except RunStopped as e:
        # A bug or a refused journal entry must still end in a true outcome, never a silent stop.
        state.last_failure = f"run stopped: {e}"
    result = result_of(state, await engine.now())
    engine.checkpoint(state)
    engine.finish(result)
    return result


def start(run_id: str, request: RunRequest, now: float) -> State:
    state = State.start(
        run_id,
        request.stock,
        request.day_seconds,
        now,
        request.waits,
        calendar=request.calendar,
        origin=request.origin,
        approval_policy=request.approval_policy,
    )
    state.memory = request.memory
    # An authority matrix in force at the start binds the run's approvals to people to its end.
    state.people_matrix = bool(request.people_matrix)
    # The decider fixed at the run's start (the engine asks it); a request from before
    # pinning has none, and the run follows the service's decider as it always did.
    state.decider = request.decider_terms if request.decider_terms.decider else None
    if request.adopt is not None:
        state.adopt(request.adopt.po, request.adopt.ack, request.adopt.from_run, request.adopt.progress)
    return state


async def decide(
    engine: Engine, turn: int, state: State, allowed: list[Tool], terms: DeciderTerms
) -> tuple[Tool, Any, Decision]:
    """The decider's pick, checked in code; refused picks are re-asked, then the offline policy decides."""

    async def ask(attempt: int, refusals: Sequence[Refusal]) -> Decision:
        return await engine.decide(names.decide(turn, attempt), state, allowed, refusals)

    decision = await decide_turn(turn, state, allowed, ask, terms)
    engine.decided(turn, state, allowed, decision)
    tool = TOOLS_BY_NAME[decision.tool]
    return tool, tool.parse_args(decision.args), decision


async def call(engine: Engine, turn: int, tool: Call[Any, Any], args: Any, state: State) -> str:
    delay = tool.delay_days(state)
    if delay > 0:
        now = await engine.now()
        await engine.sleep(names.delay(tool.name, turn), state.after(now, delay) - now)
    name = names.step(tool.name, turn)
    try:
        result = await engine.step(name, Effect("call", tool.name, state, args))
    except StepFailed as e:
        return tool.apply_failure(state, args, str(e))
    return tool.apply(state, args, result)


async def wait(engine: Engine, tool: Wait[Any], state: State) -> str:
    """The next message of the tool's kind that counts, or its deadline, whichever comes first.

    A message that does not parse, or that the tool's rules refuse (wrong sender, token,
    PO), is consumed and recorded as a security event, and the wait goes on: no message can
    fail the run or spend its turns.
    """
    notes: list[str] = []
    while True:
        seq = state.next_message_number(tool.event)
        raw = await next_message(engine, tool, state, seq)
        if raw is None:
            return told(notes, tool.apply(state, None))
        state.mark_consumed(tool.event)
        # Who sent it and when, as the SKU's address stamped it: unknown only if the envelope is broken.
        source, at = UNKNOWN_SOURCE, None
        try:
            envelope = Envelope.read(json.loads(raw))
            arrival = envelope.arrival
            source, at = arrival.sender.party, arrival.at
            payload = tool.Payload.model_validate(envelope.payload)
        except ValidationError as e:
            refused: str | None = f"unreadable {tool.event} message #{seq} refused: {describe(e)}"
        except ValueError as e:
            refused = f"unreadable {tool.event} message #{seq} refused: not JSON ({e})"
        else:
            refused = tool.refusal(state, payload, arrival)
            if refused is None:
                summary = tool.apply(state, payload, arrival)
                if not tool.still_waiting(state):
                    return told(notes, summary)
                # Counted, and the wait goes on (a first of two signatures, a person the matrix refused).
                notes.append(summary)
                engine.checkpoint(state)
                continue
        # Seen now, in the run's view and on the SKU's record, not when the wait ends.
        state.record_security_event(source, refused, at)
        engine.checkpoint(state)


MAX_NOTES = 5


def told(notes: list[str], summary: str) -> str:
    """The wait's summary, after what it took in on the way (the first few of it, and how many more)."""
    if not notes:
        return summary
    shown = notes[:MAX_NOTES] + ([f"{len(notes) - MAX_NOTES} more"] if len(notes) > MAX_NOTES else [])
    return "; ".join([*shown, summary])


async def next_message(engine: Engine, tool: Wait[Any], state: State, seq: int) -> bytes | None:
    """The raw bytes of the `seq`-th message, or None at the deadline: parsed by the caller,
    so that no value anyone sent can fail the run before the rules judge it.

    Reminders the tool has due before the deadline are sent on the way, and at the deadline
    the tool may escalate (a fresh deadline) instead of timing out; each from its own
    durable timer and step, so a replay or a crash never does one twice (and a retried step
    carries the same idempotency key).
    """
    raw: bytes | None = None
    first = True
    while True:
        deadline = tool.deadline(state)
        engine.show_wait(CurrentWait(tool=tool.name, event=tool.event, seq=seq, deadline=deadline, clock=state.clock))
        now = await engine.now()
        # Past the deadline (the service was down through it) a reminder is moot.
        reminder = next((r for r in tool.reminders(state) if r.at < deadline), None) if now < deadline else None
        until = reminder.at if reminder is not None else deadline
        remaining = until - now
        late = False
        if remaining > 0:
            value = await engine.receive(tool.event, seq, remaining)
            if value is not None:
                # Taken while a reminder's timer ran, after a downtime that outlasted the
                # deadline too, it counts only if it reached the SKU by the deadline.
                if await engine.now() <= deadline or await engine.arrived_by(tool.event, seq, deadline):
                    raw = value
                    break
                late = True
        elif reminder is None:
            # Out of time, but a message that already arrived still counts: on a wait that
            # began past its deadline, or one that reached the SKU by the deadline.
            raw = await engine.receive(tool.event, seq, 0)
            if raw is not None:
                if first or await engine.arrived_by(tool.event, seq, deadline):
                    break
                raw, late = None, True
        first = False
        if reminder is not None and not late:
            await send_reminder(engine, tool, state, reminder)
            continue
        if not late and await engine.arrived_by(tool.event, seq, deadline):
            raw = await engine.receive(tool.event, seq, None)  # on its way here: the SKU routed it
            break
        # The deadline passed: escalate (a late message is then judged against the new terms), or time out.
        if not tool.escalation_due(state) or not await escalate(engine, tool, state):
            break
    engine.show_wait(None)
    return raw


async def escalate(engine: Engine, tool: Wait[Any], state: State) -> bool:
    """Hand the wait over (e.g. to the backup approver); False if that could not be done."""
    try:
        result = await engine.step(names.escalate(tool.name), Effect[Any]("escalate", tool.name, state))
    except StepFailed as e:
        state.last_failure = f"could not escalate {tool.name}: {e}"
        return False
    tool.apply_escalation(state, result)
    engine.checkpoint(state)
    return True


async def send_reminder(engine: Engine, tool: Wait[Any], state: State, reminder: Reminder) -> None:
    name = names.remind(reminder.approver, reminder.label)
    try:
        sent = await engine.step(name, Effect[ReminderSent]("remind", tool.name, state, reminder))
    except StepFailed as e:
        # Retries spent: noted, and not tried again, so a dead inbox cannot hold the wait up.
        sent = ReminderSent(point=reminder.point, at=reminder.at, delivered=False, error=str(e))
    tool.apply_reminder(state, sent)
    engine.checkpoint(state)
