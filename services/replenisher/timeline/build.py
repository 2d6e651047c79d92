"""Assemble a run's timeline from Restate's records and the run's own state. Pure.

The journal gives the times: the workflow journals every decision (`decide N`), every step
(`<tool> N`), every delay (`before <tool> N`) and every wait (a durable promise raced
against a timer), so each turn's spans come out of it with their start and end. The run's
state (`history`) gives what people read: the tool, the decider's reason, the summary.

Outage bands come from the failed attempts Restate records per invocation
(sys_journal_events): a network error talking to the service (RT0010) means the service
was down or died mid-attempt. A band ends at the first journal command after it -- commands
are written by the service, so one proves it was back. Errors inside a step are retries of
that step, drawn on the step. A restate-server restart while a run slept leaves no trace in
the run's records, and needs none: nothing was due.

When the journal is gone (Restate keeps a finished run's journal about a day) the timeline
falls back to the run's history without times, and when that is gone too, to the outcome
the SKU's record keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS, Wait
from replenisher.timeline.journal import JournalEntry, TransientFailure
from replenisher.timeline.model import Band, Invocation, Span, Timeline, Turn, Waiting

STEP = re.compile(r"^(?P<tool>[a-z_]+) (?P<turn>\d+)$")
DELAY = re.compile(r"^before (?P<tool>[a-z_]+) (?P<turn>\d+)$")
WAIT_TOOL_FOR_EVENT = {t.event: t.name for t in TOOLS if isinstance(t, Wait)}
UNREACHABLE_CODES = {"RT0010"}
UNREACHABLE_WORDS = ("connection refused", "broken pipe", "stream closed", "connection reset", "trying to connect")

JOURNAL_GONE = (
    "Restate no longer holds this run's journal (it keeps a finished run's journal about a day), "
    "so turns are shown without their times"
)
STATE_GONE = "the run's own state is gone too: only the outcome kept in the SKU's record remains"


def is_outage(failure: TransientFailure) -> bool:
    """A failure of the service itself (down, or died mid-attempt), not of a step's outside call."""
    text = failure.message.lower()
    return failure.code in UNREACHABLE_CODES or any(word in text for word in UNREACHABLE_WORDS)


def outage_clusters(entries: list[JournalEntry], failures: list[TransientFailure]) -> list[list[TransientFailure]]:
    """Failures outside steps, grouped by the command that ended them (or none yet)."""
    commands = [e for e in entries if e.is_command]
    clusters: dict[int | None, list[TransientFailure]] = {}
    for failure in failures:
        if not _is_band_failure(failure, entries):
            continue
        after = next((c.index for c in commands if c.at > failure.at), None)
        clusters.setdefault(after, []).append(failure)
    return [sorted(c, key=lambda f: f.at) for c in clusters.values()]


def _is_band_failure(failure: TransientFailure, entries: list[JournalEntry]) -> bool:
    if is_outage(failure):
        return True
    steps = {e.name for e in entries if e.is_command and e.kind == "Run" and STEP.match(e.name)}
    return failure.command not in steps


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
    alive_after: Mapping[float, float] | None = None,
    related_failures: Iterable[TransientFailure] = (),
) -> Timeline:
    """`alive_after` maps the time of an outage's last recorded failure to the first command any
    invocation journaled after it: the earliest proof the service was back. `related_failures`
    are failed attempts of the SKU agent's own invocations during the run (a message that
    could not be delivered because the service was down): their outages are drawn too."""
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
        security_events=list(state.security_events) if state else [],
    )
    turns, steps, output_at = _turns_from_journal(entries)
    _add_history(turns, state)
    timeline.turns = [turns[n] for n in sorted(turns)]
    _add_step_errors(steps, failures, entries)
    timeline.bands = _bands(entries, failures, invocation, alive_after or {}, now)
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
            if entry.kind == "Run" and (m := STEP.match(entry.name)):
                n = int(m["turn"])
                if m["tool"] == "decide":
                    current = n
                    span = Span(kind="decision", name="decide", start=entry.at)
                    turn(n).spans.append(span)
                else:
                    span = Span(kind="step", name=m["tool"], start=entry.at)
                    turn(n, m["tool"]).spans.append(span)
                steps[entry.name] = span
                if cid is not None:
                    waiting_on[cid] = (span, "run")
            elif entry.kind == "Sleep" and (m := DELAY.match(entry.name)):
                span = Span(kind="delay", name=entry.name, start=entry.at, deadline=entry.wake_up_at)
                turn(int(m["turn"]), m["tool"]).spans.append(span)
                if cid is not None:
                    waiting_on[cid] = (span, "delay")
            elif entry.kind == "Sleep" and last_wait is not None and last_wait.deadline is None:
                last_wait.deadline = entry.wake_up_at  # the timer raced against the wait's promise
                if cid is not None:
                    waiting_on[cid] = (last_wait, "timer")
            elif (key := entry.promise_key) is not None:
                tool = WAIT_TOOL_FOR_EVENT.get(key.rsplit("-", 1)[0], "wait")
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


def _add_history(turns: dict[int, Turn], state: State | None) -> None:
    for record in state.history if state else []:
        t = turns.setdefault(record.turn, Turn(turn=record.turn, tool=record.tool))
        t.tool, t.reason, t.summary = record.tool, record.reason, record.summary
    for t in turns.values():
        if not t.tool:
            t.tool = "deciding" if t.end is None else "done"


def _add_step_errors(steps: dict[str, Span], failures: list[TransientFailure], entries: list[JournalEntry]) -> None:
    for failure in failures:
        if _is_band_failure(failure, entries) or failure.command is None:
            continue
        span = steps.get(failure.command)
        if span is not None and failure.message not in span.errors:
            span.errors.append(failure.message)


def _bands(
    entries: list[JournalEntry],
    failures: list[TransientFailure],
    invocation: Invocation | None,
    alive_after: Mapping[float, float],
    now: float,
) -> list[Band]:
    commands = [e for e in entries if e.is_command]
    bands = []
    for cluster in outage_clusters(entries, failures):
        last = cluster[-1].at
        ends = [c.at for c in commands if c.at > last][:1]
        if last in alive_after:
            ends.append(alive_after[last])
        band = Band(start=cluster[0].at, end=min(ends) if ends else None, errors=_distinct(f.message for f in cluster))
        if band.end is None and not (invocation and invocation.status == "backing-off"):
            band.end = last  # attempts stopped failing, but nothing shows when it was back
        bands.append(band)
    if invocation is not None and invocation.status == "backing-off":
        open_band = next((b for b in bands if b.end is None), None)
        if open_band is None:
            last_command = commands[-1].at if commands else (invocation.created_at or now)
            open_band = Band(start=last_command, end=None)
            bands.append(open_band)
        if invocation.last_failure and invocation.last_failure not in open_band.errors:
            open_band.errors.append(invocation.last_failure)
        open_band.retries = invocation.retry_count
    return sorted(bands, key=lambda b: b.start)


def _notes(
    timeline: Timeline, entries: list[JournalEntry], state: State | None, outcome: ReplenishmentResult | None
) -> list[str]:
    notes = []
    if not entries:
        notes.append(JOURNAL_GONE)
        if state is None:
            notes.append(STATE_GONE if outcome is not None else "nothing is known about this run")
    elif state is None:
        notes.append("the run's state could not be read: turns are shown without reasons or summaries")
    if outcome is not None and outcome.turns > len(timeline.turns) and timeline.source == "outcome":
        notes.append(f"it took {outcome.turns} turns")
    return notes


def _distinct(messages: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(messages))


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)
