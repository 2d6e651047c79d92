"""Assemble a run's timeline from Restate's records and the run's own state. Pure.

The journal gives the times: the workflow journals every decision (`decide N`), every step
(`<tool> N`), every delay (`before <tool> N`) and every wait (a durable promise raced
against a timer), under the names `replenisher.loop.names` gives them (and parses back
here), so each turn's spans come out of it with their start and end. The run's
state (`history`) gives what people read: the tool, the decider's reason, the summary.

Outage bands come from the failed attempts Restate records per invocation
(sys_journal_events): a network error talking to the service (RT0010) means the service
was down or died mid-attempt. A band ends at the first sign the service answered again
(`operations/restate/health.answered_after`: its note that it answered an attempt after failed
ones, `durable/answered.py`; a command it journaled; an invocation it completed or suspended;
an attempt it is running), or failing a look-up at the run's own next command. The note is
what keeps the end right after the run has moved on: it marks when Restate's first attempt
after the outage reached the service, at most one retry interval (Restate's, capped at a
minute by default) after the service was back.
Errors inside a step are retries of
that step, drawn on the step. A restate-server restart while a run slept leaves no trace in
the run's records, and needs none: nothing was due.

When the journal is gone (Restate keeps a finished run's journal 14 days: `durable/retention.py`) the timeline
falls back to the run's history without times, and when that is gone too, to the outcome
the SKU's record keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel

from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security_log import SecurityLog
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS, Wait
from replenisher.loop import names
from replenisher.timeline.journal import JournalEntry, TransientFailure
from replenisher.timeline.model import Band, Decision, Invocation, Span, Timeline, Turn, Waiting, signed_by

WAIT_TOOL_FOR_EVENT = {t.event: t.name for t in TOOLS if isinstance(t, Wait)}
UNREACHABLE_CODES = {"RT0010"}
UNREACHABLE_WORDS = ("connection refused", "broken pipe", "stream closed", "connection reset", "trying to connect")

JOURNAL_GONE = (
    # durable/retention.py's JOURNAL (the timeline does not import the Restate glue)
    "Restate no longer holds this run's journal (it keeps a finished run's journal 14 days), "
    "so turns are shown without their times"
)
STATE_GONE = "the run's own state is gone too: only the outcome kept in the SKU's record remains"


def is_outage(failure: TransientFailure) -> bool:
    """A failure of the service itself (down, or died mid-attempt), not of a step's outside call."""
    return is_outage_text(failure.code, failure.message)


def is_outage_text(code: str | None, message: str | None) -> bool:
    text = (message or "").lower()
    return code in UNREACHABLE_CODES or any(word in text for word in UNREACHABLE_WORDS)


class OutageGroup(BaseModel):
    start: float
    failures: list[TransientFailure]


def group_outages(failures: Iterable[TransientFailure], answered: Mapping[float, float | None]) -> list[OutageGroup]:
    """Refused attempts in stretches: one starts at a refused attempt and lasts until the service
    answered again (`answered[start]`, the first sign of life after it); refusals before that
    belong to it. A start missing from `answered` is not looked up yet: the stretch is taken to
    run on, so the caller looks it up and groups again."""
    groups: list[OutageGroup] = []
    end: float | None = None
    for failure in sorted((f for f in failures if is_outage(f)), key=lambda f: f.at):
        if groups and (end is None or failure.at < end):
            groups[-1].failures.append(failure)
            continue
        groups.append(OutageGroup(start=failure.at, failures=[failure]))
        end = answered.get(failure.at)
    return groups


def build_timeline(
    run_id: str,
    sku: str,
    *,
    now: float,
    invocation: Invocation | None = None,
    entries: Iterable[JournalEntry] = (),
    failures: Iterable[TransientFailure] = (),
    state: State | None = None,
    waiting: Waiting | None = None,
    outcome: ReplenishmentResult | None = None,
    answered: Mapping[float, float | None] | None = None,
    related_failures: Iterable[TransientFailure] = (),
    down_now: bool = False,
    decisions: Iterable[Decision] = (),
) -> Timeline:
    """`answered` maps the start of each outage (its first refused attempt) to the first sign
    after it that the service answered again (see `group_outages`). `related_failures` are
    failed attempts of the SKU agent's own invocations during the run (a message that could
    not be delivered because the service was down): their outages are drawn too. `down_now`:
    Restate's attempts to reach the service are being refused right now. `decisions`: the
    manager's answers the run received, one per approval message."""
    entries = sorted(entries, key=lambda e: e.index)
    failures = sorted([*failures, *(f for f in related_failures if is_outage(f))], key=lambda f: f.at)
    timeline = Timeline(
        run_id=run_id,
        sku=sku,
        source="journal" if entries else ("history" if state is not None else "outcome"),
        now=now,
        invocation=invocation,
        waiting=waiting if outcome is None else None,
        outcome=outcome,
        day_seconds=state.day_seconds if state else None,
        security=state.security.model_copy(deep=True) if state else SecurityLog(),
    )
    turns, steps, output_at = _turns_from_journal(entries)
    _add_history(turns, state)
    _add_step_errors(turns, steps, failures, entries)
    _add_live_retry(turns, steps, invocation, entries)
    timeline.decisions = _decisions(turns, list(decisions), state)
    timeline.turns = [turns[n] for n in sorted(turns)]
    timeline.bands = _bands(entries, failures, invocation, answered or {}, down_now, now)
    timeline.started_at = _first(
        state.started_at if state else None,
        outcome.started_at if outcome else None,
        invocation.created_at if invocation else None,
        entries[0].at if entries else None,
    )
    timeline.ended_at = _first(
        outcome.ended_at if outcome else None,
        output_at,
        invocation.completed_at if invocation else None,
    )
    timeline.notes = _notes(timeline, entries, state, outcome)
    return timeline


def _turns_from_journal(entries: list[JournalEntry]) -> tuple[dict[int, Turn], dict[str, Span], float | None]:
    turns: dict[int, Turn] = {}
    steps: dict[str, Span] = {}
    waiting_on: dict[int, tuple[Span, str]] = {}  # completion id -> the span it ends, and how
    current = 0
    last_wait: Span | None = None
    output_at: float | None = None

    def turn(n: int, tool: str | None = None) -> Turn:
        t = turns.setdefault(n, Turn(turn=n, tool=tool or ""))
        if tool and not t.tool:
            t.tool = tool
        return t

    for entry in entries:
        cid = entry.completion_id
        if entry.is_command:
            if entry.kind == "Run" and (m := names.parse_step(entry.name)):
                n = m.turn
                if m.tool == names.DECIDE:
                    current = n
                    span = Span(kind="decision", name="decide", start=entry.at)
                    turn(n).spans.append(span)
                else:
                    span = Span(kind="step", name=m.tool, start=entry.at)
                    turn(n, m.tool).spans.append(span)
                steps[entry.name] = span
                if cid is not None:
                    waiting_on[cid] = (span, "run")
            elif entry.kind == "Run" and names.is_during_wait(entry.name):
                # A step the wait took while it waited: a reminder, an escalation at its end.
                span = Span(kind="step", name=entry.name, start=entry.at)
                turn(current).spans.append(span)
                steps[entry.name] = span
                if cid is not None:
                    waiting_on[cid] = (span, "run")
                if last_wait is not None and last_wait.ended_by == "timeout":
                    # The timer that fired was the reminder's (or the first window's): still waiting.
                    last_wait.end = last_wait.ended_by = last_wait.deadline = None
            elif entry.kind == "Sleep" and (m := names.parse_delay(entry.name)):
                span = Span(kind="delay", name=entry.name, start=entry.at, deadline=entry.wake_up_at)
                turn(m.turn, m.tool).spans.append(span)
                if cid is not None:
                    waiting_on[cid] = (span, "delay")
            elif entry.kind == "Sleep" and last_wait is not None and last_wait.deadline is None:
                last_wait.deadline = entry.wake_up_at  # the timer raced against the wait's promise
                if cid is not None:
                    waiting_on[cid] = (last_wait, "timer")
            elif (
                entry.kind == "Sleep"
                and last_wait is not None
                and last_wait.end is not None
                and not any(s.kind == "wait" for s in getattr(turns.get(current), "spans", []))
            ):
                # A later turn waits again for the same message (after a chase): the run reads the
                # promise once, so this wait journals only its new timer, raced against that read.
                span = Span(kind="wait", name=last_wait.name, start=entry.at, promise=last_wait.promise)
                span.deadline = entry.wake_up_at
                turn(current, last_wait.name).spans.append(span)
                for key, (old, role) in list(waiting_on.items()):
                    if old is last_wait and role == "promise":
                        waiting_on[key] = (span, "promise")  # the message, should it come now, ends this wait
                last_wait = span
                if cid is not None:
                    waiting_on[cid] = (span, "timer")
            elif (key := entry.promise_key) is not None:
                tool = WAIT_TOOL_FOR_EVENT.get(names.promise_event(key), "wait")
                if _belongs_to_next_turn(turns.get(current), tool):
                    # A turn with one allowed tool journals no decision: the wait opened it.
                    current += 1
                span = Span(kind="wait", name=tool, start=entry.at, promise=key)
                if entry.kind == "PeekPromise":
                    # The deadline had passed when the run got here: it took a message already there, or none.
                    span.deadline = entry.at
                turn(current, tool).spans.append(span)
                last_wait = span
                if cid is not None:
                    waiting_on[cid] = (span, "peek" if entry.kind == "PeekPromise" else "promise")
            elif entry.kind == "Output":
                output_at = entry.at
        elif cid is not None and cid in waiting_on:
            span, role = waiting_on[cid]
            if span.end is not None:
                continue  # the timer that lost the race, firing later
            span.end = entry.at
            if role == "run" and entry.result == "Failure":
                span.failed = True
            elif role == "promise":
                span.ended_by = "message"
            elif role == "peek":
                span.ended_by = "timeout" if entry.result == "Void" else "message"
            elif role == "timer":
                span.ended_by = "timeout"
    return turns, steps, output_at


def _belongs_to_next_turn(turn: Turn | None, wait_tool: str) -> bool:
    """A wait's promise after a turn that ran a call, or waited for something else, is a new turn."""
    if turn is None:
        return False
    ran_a_call = any(s.kind == "delay" or (s.kind == "step" and not names.is_during_wait(s.name)) for s in turn.spans)
    return ran_a_call or turn.tool not in ("", wait_tool)


def _add_history(turns: dict[int, Turn], state: State | None) -> None:
    for record in state.history if state else []:
        t = turns.setdefault(record.turn, Turn(turn=record.turn, tool=record.tool))
        t.tool, t.reason, t.summary = record.tool, record.reason, record.summary
    for t in turns.values():
        if not t.tool:
            t.tool = "deciding" if t.end is None else "done"


def _add_step_errors(
    turns: dict[int, Turn], steps: dict[str, Span], failures: list[TransientFailure], entries: list[JournalEntry]
) -> None:
    """Errors of a step's own work (an outside call failing) go on that step; a step that has
    not succeeded yet is not in the journal, so it is drawn from its first failure."""
    for failure in failures:
        if is_outage(failure) or failure.command is None:
            continue
        span = steps.get(failure.command) or _unjournaled_step(turns, steps, failure.command, failure.at, entries)
        if span is None:
            continue
        if failure.message not in span.errors:
            span.errors.append(failure.message)
        if failure.details and failure.details not in span.details:
            span.details.append(failure.details)


def _unjournaled_step(
    turns: dict[int, Turn], steps: dict[str, Span], command: str, at: float, entries: list[JournalEntry]
) -> Span | None:
    m = names.parse_step(command)
    if m is None or m.tool == names.DECIDE:
        return None
    before = [e.at for e in entries if e.at <= at]
    span = Span(kind="step", name=m.tool, start=max(before) if before else at)
    n = m.turn
    turn = turns.setdefault(n, Turn(turn=n, tool=m.tool))
    turn.spans.append(span)
    steps[command] = span
    return span


def _add_live_retry(
    turns: dict[int, Turn], steps: dict[str, Span], invocation: Invocation | None, entries: list[JournalEntry]
) -> None:
    """The step Restate is retrying right now: its attempts, last error and next attempt."""
    inv = invocation
    if inv is None or not inv.backing_off or is_outage_text(inv.last_failure_code, inv.last_failure):
        return
    command = inv.last_failure_command
    if command is None:
        return
    span = steps.get(command) or _unjournaled_step(turns, steps, command, inv.last_start_at or 0.0, entries)
    if span is None or span.end is not None:
        return
    span.retrying = True
    span.attempts = inv.retry_count
    span.next_attempt_at = inv.next_retry_at
    if inv.last_failure and inv.last_failure not in span.errors:
        span.errors.append(inv.last_failure)
    if inv.last_failure_details and inv.last_failure_details not in span.details:
        span.details.append(inv.last_failure_details)


def _decisions(turns: dict[int, Turn], decisions: list[Decision], state: State | None) -> list[Decision]:
    """Each approval round's answer on the turn that waited for it, completed from the run's
    own record of the round it is in (who decided, when, on which channel)."""
    by_round = {d.round: d.model_copy() for d in decisions}
    approval = state.approval if state else None
    if approval is not None and approval.status in ("approved", "rejected"):
        current = state.next_message_number("approval") - 1 if state else -1
        found = by_round.get(current)
        if found is None or found.po_number in (None, approval.request.po_number):
            d = found or Decision(round=current, po_number=approval.request.po_number)
            d.status = approval.status
            d.by = approval.decided_by or d.by
            d.note = approval.note or d.note
            d.up_to = approval.approved_up_to if approval.status == "approved" else d.up_to
            d.approved = approval.status == "approved"
            d.at = getattr(approval, "decided_at", None) or d.at
            d.channel = getattr(approval, "channel", None) or d.channel
            d.signatures = signed_by(approval)
            by_round[current] = d
    for turn in turns.values():
        action = turn.action
        promise = names.parse_promise(action.promise or "") if action is not None and action.kind == "wait" else None
        if promise is None or promise.event != "approval":
            continue
        n = promise.seq
        d = by_round.get(n)
        if d is None and action.end is None:
            d = by_round[n] = Decision(round=n, status="pending")
            if approval is not None and approval.status == "pending":
                d.signatures, d.still_needed = signed_by(approval), getattr(approval, "still_needed", "")
        elif d is None and action.ended_by == "timeout":
            d = by_round[n] = Decision(round=n, status="timed_out")
        if d is None:
            continue
        if d.at is None and action.end is not None and action.ended_by == "message":
            d.at = action.end
        if d.status is None and "refused" in turn.summary:
            d.status = "refused"
        turn.decision = d
    return [by_round[n] for n in sorted(by_round) if n >= 0]


def _bands(
    entries: list[JournalEntry],
    failures: list[TransientFailure],
    invocation: Invocation | None,
    answered: Mapping[float, float | None],
    down_now: bool,
    now: float,
) -> list[Band]:
    inv = invocation
    run_refused = inv is not None and inv.backing_off and is_outage_text(inv.last_failure_code, inv.last_failure)
    bands = []
    commands = [e.at for e in entries if e.is_command]
    for group in group_outages(failures, answered):
        if group.start in answered:
            end = answered[group.start]
        else:  # not looked up: the run's own next command at least shows the service was back
            end = next((at for at in commands if at > group.failures[-1].at), None)
        band = Band(start=group.start, end=end, errors=_distinct(f.message for f in group.failures))
        if end is not None:
            band.ended_by = "the service answered again"
        elif not (down_now or run_refused):
            band.end = group.failures[-1].at  # attempts stopped failing, but nothing shows when it was back
        bands.append(band)
    if run_refused and inv is not None:
        open_band = next((b for b in bands if b.end is None), None)
        if open_band is None:
            commands = [e for e in entries if e.is_command]
            last_command = commands[-1].at if commands else (inv.created_at or now)
            open_band = Band(start=last_command, end=None)
            bands.append(open_band)
        if inv.last_failure and inv.last_failure not in open_band.errors:
            open_band.errors.append(inv.last_failure)
        open_band.retries = inv.retry_count
        open_band.next_attempt_at = inv.next_retry_at
    return sorted(bands, key=lambda b: b.start)


def _notes(
    timeline: Timeline, entries: list[JournalEntry], state: State | None, outcome: ReplenishmentResult | None
) -> list[str]:
    notes = []
    if not entries:
        notes.append(JOURNAL_GONE)
        if state is None:
            notes.append(STATE_GONE if outcome is not None else "nothing is known about this run")
    elif state is None and not timeline.finished and len(timeline.turns) <= 1:
        notes.append("the run has not finished its first turn yet: reasons and summaries come with it")
    elif state is None:
        notes.append("the run's state could not be read: turns are shown without reasons or summaries")
    if outcome is not None and outcome.turns > len(timeline.turns) and timeline.source == "outcome":
        notes.append(f"it took {outcome.turns} turns")
    return notes


def _distinct(messages: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(messages))


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)
