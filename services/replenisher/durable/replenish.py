"""`Replenish`: one durable workflow per replenishment (id `replenish-<SKU>-<n>`).

The agentic loop. Each turn the decider picks one of the tools the rules allow; the
harness runs it (a journaled step, or a durable wait for the next message raced against
a durable timer) and `apply`s the result. After a crash Restate replays the journal:
recorded decisions and steps return their results without running again, and `apply`
rebuilds the same state.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import restate
from pydantic import BaseModel, Field, ValidationError
from restate import WorkflowContext, WorkflowSharedContext
from restate.exceptions import TerminalError
from restate.serde import BytesSerde

from replenisher.config import settings
from replenisher.domain.archive import RunArchive, TurnBuilder
from replenisher.domain.calendar import BusinessCalendar, CalendarClock, ClockOrigin
from replenisher.domain.decisions import DeciderTerms, Decision
from replenisher.domain.documents import (
    OPERATOR,
    Arrival,
    EventKind,
    OrderAck,
    PurchaseOrder,
    Sender,
    StockLevel,
)
from replenisher.domain.escalation import ApprovalPolicy, Reminder, ReminderSent
from replenisher.domain.memory import MemoryBrief
from replenisher.domain.outcomes import ReplenishmentResult, result_of
from replenisher.domain.security import SecurityNotes, without_secrets
from replenisher.domain.state import OrderProgress, State, TurnRecord
from replenisher.domain.tools import TOOLS, TOOLS_BY_NAME, Call, Done, Tool, Wait
from replenisher.domain.tools.limits import MAX_TURNS
from replenisher.domain.turns import decide_turn
from replenisher.domain.waits import WaitDays
from replenisher.durable.archive import send_begin, send_finish, send_turn
from replenisher.durable.deciders import current_decider, journaled_ask
from replenisher.durable.steps import outside_world, step
from replenisher.durable.stored import load_stored
from replenisher.durable.validation import bad_request, describe, validated

replenish = restate.Workflow("Replenish")

# Deployments are immutable, so this is the same on every replay of a run: it tells which
# code a turn ran on (a run that started before an upgrade finishes on the old code).
CODE = settings().code_version


class AdoptedOrder(BaseModel):
    """An order an earlier run placed and did not see through, found since by its PO number."""

    po: PurchaseOrder
    ack: OrderAck
    from_run: str
    progress: OrderProgress | None = Field(default=None, description="what the earlier run saw of it")


class RunRequest(BaseModel):
    stock: StockLevel
    day_seconds: float = Field(gt=0)
    waits: WaitDays = Field(default_factory=WaitDays)
    # The site calendar and the wall-to-calendar origin, fixed into the run here so later
    # settings changes never move a deadline it waits for. Absent (requests from before
    # calendars): every day counts whole from the run's start.
    calendar: BusinessCalendar = Field(default_factory=BusinessCalendar.every_day)
    origin: ClockOrigin | None = None
    approval_policy: ApprovalPolicy = Field(default_factory=ApprovalPolicy.none)
    memory: MemoryBrief | None = Field(default=None, description="what the SKU remembers, for the decider")
    decider_terms: DeciderTerms = Field(default_factory=DeciderTerms)
    adopt: AdoptedOrder | None = Field(default=None, description="follow up this order instead of buying anew")


class Message(BaseModel):
    """A message the SKU agent numbered for this run: the `seq`-th of its kind."""

    event: EventKind
    seq: int
    payload: dict[str, Any]
    sender: Sender | None = Field(default=None, description="None: an operator on the internal ingress")
    arrived_at: float | None = Field(default=None, description="when it reached the SKU's address")


class Envelope(BaseModel):
    """What a message promise holds: the payload and who sent it, when.

    Runs read it as untrusted (a bare payload, as older code resolved it, counts as from an
    operator): anything that does not parse is a security event, never a failed run.
    """

    payload: dict[str, Any]
    sender: Sender | None = None
    arrived_at: float | None = None

    @classmethod
    def read(cls, raw: Any) -> Envelope:
        if isinstance(raw, dict) and "payload" in raw and set(raw) <= {"payload", "sender", "arrived_at"}:
            return cls.model_validate(raw)
        return cls.model_validate({"payload": raw})

    @property
    def arrival(self) -> Arrival:
        return Arrival(sender=self.sender or OPERATOR, at=self.arrived_at)


class CurrentWait(BaseModel):
    tool: str
    event: EventKind
    seq: int
    deadline: float
    clock: CalendarClock | None = Field(default=None, description="the run's calendar, to show the deadline as a date")


class RunView(BaseModel):
    state: State | None
    waiting: CurrentWait | None


def message_promise(event: str, seq: int) -> str:
    return f"{event}-{seq}"


# Only the SKU agent starts a run and delivers its messages: through the ingress, a caller
# could start a SKU's next run with its own request, or fill a run's message slots first.
@validated(replenish.main, ingress_private=True)
async def run(ctx: WorkflowContext, request: RunRequest) -> ReplenishmentResult:
    started_at = await ctx.time()
    state = State.start(
        ctx.key(),
        request.stock,
        request.day_seconds,
        started_at,
        request.waits,
        calendar=request.calendar,
        origin=request.origin,
        approval_policy=request.approval_policy,
    )
    state.memory = request.memory
    if request.adopt is not None:
        state.adopt(request.adopt.po, request.adopt.ack, request.adopt.from_run, request.adopt.progress)
    report = SecurityReport()
    # Kept past the journal's retention, for `replenisher replay`.
    send_begin(
        ctx,
        RunArchive(
            run_id=ctx.key(),
            sku=state.sku,
            started_at=started_at,
            code=CODE,
            request=request.model_dump(mode="json"),
        ),
    )
    try:
        for turn in range(MAX_TURNS):
            # The rules that depend on time (a quote's validity) read this journaled clock.
            state.now = await ctx.time()
            allowed = [t for t in TOOLS if t.allowed(state)]
            if not allowed:
                break
            tool, args, decision = await decide(ctx, turn, state, allowed, request.decider_terms)
            archived = TurnBuilder(turn, state.now, [t.name for t in allowed], decision)
            if isinstance(tool, Done):
                state.history.append(TurnRecord(turn=turn, tool=tool.name, reason=decision.reason, code=CODE))
                send_turn(ctx, archived.done(None))
                break
            if isinstance(tool, Wait):
                summary = await wait(ctx, tool, state, report, archived)
            else:
                assert isinstance(tool, Call)
                summary = await call(ctx, turn, tool, args, state, archived)
            send_turn(ctx, archived.done(summary))
            state.history.append(
                TurnRecord(turn=turn, tool=tool.name, reason=decision.reason, summary=summary, code=CODE)
            )
            ctx.set("state", state)
            report.send(ctx, state)
    except TerminalError as e:
        # A bug or a refused journal entry must still end in a true outcome, never a silent stop.
        state.last_failure = f"run stopped: {e.message}"
    result = result_of(state, await ctx.time())
    send_finish(ctx, result.outcome, result.ended_at)
    ctx.set("state", state)
    report.send(ctx, state)
    report_outcome(ctx, result)
    return result


async def decide(
    ctx: WorkflowContext, turn: int, state: State, allowed: list[Tool], terms: DeciderTerms
) -> tuple[Tool, Any, Decision]:
    """The decider's pick, checked in code; refused picks are re-asked, then the offline policy decides."""
    ask = journaled_ask(ctx, turn, current_decider(), state, allowed)
    decision = await decide_turn(turn, state, allowed, ask, terms)
    tool = TOOLS_BY_NAME[decision.tool]
    return tool, tool.parse_args(decision.args), decision


async def call(
    ctx: WorkflowContext, turn: int, tool: Call[Any, Any], args: Any, state: State, archived: TurnBuilder
) -> str:
    delay = tool.delay_days(state)
    if delay > 0:
        now = await ctx.time()
        await ctx.sleep(timedelta(seconds=state.after(now, delay) - now), name=f"before {tool.name} {turn}")
    name = f"{tool.name} {turn}"
    try:
        result = await step(ctx, name, tool.Result, tool.execute, state, args, outside_world())
    except TerminalError as e:
        archived.step(name, failure=e.message)
        return tool.apply_failure(state, args, e.message)
    archived.step(name, result)
    return tool.apply(state, args, result)


async def wait(
    ctx: WorkflowContext, tool: Wait[Any], state: State, report: SecurityReport, archived: TurnBuilder
) -> str:
    """The next message of the tool's kind that counts, or its deadline, whichever comes first.

    A message that does not parse, or that the tool's rules refuse (wrong sender, token,
    PO), is consumed and recorded as a security event, and the wait goes on: no message can
    fail the run or spend its turns.
    """
    while True:
        seq = state.next_message_number(tool.event)
        raw = await next_message(ctx, tool, state, seq, archived)
        if raw is None:
            archived.deadline(tool.event)
            return tool.apply(state, None)
        state.mark_consumed(tool.event)
        try:
            envelope = Envelope.read(json.loads(raw))
            payload = tool.Payload.model_validate(envelope.payload)
        except ValidationError as e:
            refused: str | None = f"unreadable {tool.event} message #{seq} refused: {describe(e)}"
        except ValueError as e:
            refused = f"unreadable {tool.event} message #{seq} refused: not JSON ({e})"
        else:
            refused = tool.refusal(state, payload, envelope.arrival)
            if refused is None:
                arrival = envelope.arrival
                archived.message(tool.event, seq, payload, arrival.sender, arrival.at)
                return tool.apply(state, payload, arrival)
        archived.refused(tool.event, seq, refused)
        # Seen now, in the run's view and on the SKU's record, not when the wait ends.
        state.record_security_event(refused)
        ctx.set("state", state)
        report.send(ctx, state)


async def next_message(
    ctx: WorkflowContext, tool: Wait[Any], state: State, seq: int, archived: TurnBuilder
) -> bytes | None:
    """The raw bytes of the `seq`-th message, or None at the deadline: parsed by the caller,
    so that no value anyone resolved the promise with can fail the run in the SDK's serde.

    Reminders the tool has due before the deadline are sent on the way, and at the deadline
    the tool may escalate (a fresh deadline) instead of timing out; each from its own
    durable timer and journaled step, so a replay or a crash never does one twice (and a
    retried step carries the same idempotency key).
    """
    promise = ctx.promise(message_promise(tool.event, seq), serde=BytesSerde())
    message = None
    raw: bytes | None = None
    first = True
    while True:
        deadline = tool.deadline(state)
        ctx.set("waiting", CurrentWait(tool=tool.name, event=tool.event, seq=seq, deadline=deadline, clock=state.clock))
        now = await ctx.time()
        # Past the deadline (the service was down through it) a reminder is moot.
        reminder = next((r for r in tool.reminders(state) if r.at < deadline), None) if now < deadline else None
        until = reminder.at if reminder is not None else deadline
        remaining = until - now
        late = False
        if remaining > 0:
            message = message or promise.value()
            match await restate.select(message=message, timeout=ctx.sleep(timedelta(seconds=remaining))):
                case ["message", value]:
                    # Taken while a reminder's timer ran, after a downtime that outlasted the
                    # deadline too, it counts only if it reached the SKU by the deadline.
                    if await ctx.time() <= deadline or await reached_in_time(ctx, state.sku, tool.event, seq, deadline):
                        raw = value
                        break
                    late = True
        elif reminder is None:
            # Out of time, but a message that already arrived still counts: on a wait that
            # began past its deadline, or one that reached the SKU by the deadline.
            raw = await promise.peek()
            if raw is not None:
                if first or await reached_in_time(ctx, state.sku, tool.event, seq, deadline):
                    break
                raw, late = None, True
        first = False
        if reminder is not None and not late:
            await send_reminder(ctx, tool, state, reminder, archived)
            continue
        if not late and await reached_in_time(ctx, state.sku, tool.event, seq, deadline):
            raw = await promise.value()  # the deliver that routed it has sent it on its way here
            break
        # The deadline passed: escalate (a late message is then judged against the new terms), or time out.
        if not tool.escalation_due(state) or not await escalate(ctx, tool, state, archived):
            break
    ctx.clear("waiting")
    return raw


async def reached_in_time(ctx: WorkflowContext, sku: str, event: EventKind, seq: int, deadline: float) -> bool:
    """Whether the message reached the SKU's address by the deadline, though it is not here yet.

    While the service was down, Restate held the deliver and this run's timer alike; when it
    came back the timer may have won. The call is to an exclusive handler of the SKU, so it
    runs after every deliver Restate accepted for the SKU before it: what it reports routed is
    all that arrived, with when it arrived (the inbound endpoint's stamp, else the SKU's clock).
    """
    from replenisher.durable.sku_agent import RoutedQuery, arrival_of

    arrival = await ctx.object_call(arrival_of, sku, RoutedQuery(run_id=ctx.key(), event=event, seq=seq))
    return arrival.arrived_at is not None and arrival.arrived_at <= deadline


async def escalate(ctx: WorkflowContext, tool: Wait[Any], state: State, archived: TurnBuilder) -> bool:
    """Hand the wait over (e.g. to the backup approver); False if that could not be done."""
    try:
        result = await step(ctx, f"escalate {tool.name}", tool.Escalation, tool.escalate, state, outside_world())
    except TerminalError as e:
        state.last_failure = f"could not escalate {tool.name}: {e.message}"
        archived.escalation_failed(tool.event, state.last_failure)
        return False
    archived.escalation(tool.event, result)
    tool.apply_escalation(state, result)
    ctx.set("state", state)
    return True


async def send_reminder(
    ctx: WorkflowContext, tool: Wait[Any], state: State, reminder: Reminder, archived: TurnBuilder
) -> None:
    name = f"remind {reminder.approver} {reminder.label}"
    try:
        sent = await step(ctx, name, ReminderSent, tool.remind, state, reminder, outside_world())
    except TerminalError as e:
        # Retries spent: noted, and not tried again, so a dead inbox cannot hold the wait up.
        sent = ReminderSent(point=reminder.point, at=reminder.at, delivered=False, error=e.message)
    archived.reminder(tool.event, sent)
    tool.apply_reminder(state, sent)
    ctx.set("state", state)


class SecurityReport:
    """Security events the SKU has not heard of yet go to its record now, not when the run ends."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, ctx: WorkflowContext, state: State) -> None:
        from replenisher.durable.sku_agent import note_security

        fresh = state.security_events[self.sent :]
        if fresh:
            ctx.object_send(note_security, state.sku, SecurityNotes(run_id=state.run_id, events=fresh))
        self.sent = len(state.security_events)


def report_outcome(ctx: WorkflowContext, result: ReplenishmentResult) -> None:
    from replenisher.durable.sku_agent import finish

    ctx.object_send(finish, result.sku, result)


@validated(replenish.handler, ingress_private=True)
async def deliver(ctx: WorkflowSharedContext, message: Message) -> None:
    """Resolve the promise the run waits on (or will wait on) for this message."""
    if message.seq < 0:
        raise bad_request("seq must not be negative")
    envelope = Envelope(payload=message.payload, sender=message.sender, arrived_at=message.arrived_at)
    await ctx.promise(message_promise(message.event, message.seq), type_hint=dict).resolve(
        envelope.model_dump(mode="json")
    )


@replenish.handler(name="state")
async def view_state(ctx: WorkflowSharedContext) -> RunView:
    state = await load_stored(ctx, "state", State)
    return RunView(
        state=without_secrets(state) if state else None,
        waiting=await ctx.get("waiting", type_hint=CurrentWait),
    )


@replenish.handler(name="current_wait")
async def view_current_wait(ctx: WorkflowSharedContext) -> CurrentWait | None:
    return await ctx.get("waiting", type_hint=CurrentWait)
