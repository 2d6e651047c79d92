"""One replenishment drawn as a timeline: turns, their steps and waits, outage bands, the outcome.

Plain data, built by `build.py` from what Restate recorded and the run's own state, and
drawn by `text.py` (the terminal) and `html.py` (a self-contained page). Times are epoch
seconds (UTC).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from replenisher.domain.calendar import CalendarClock
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security_log import SecurityLog
from replenisher.loop import names
from replenisher.timeline.format import clock, until

SpanKind = Literal["decision", "step", "wait", "delay"]
EndedBy = Literal["message", "timeout"]
Source = Literal["journal", "history", "outcome"]


class Span(BaseModel):
    """Something that took time in one turn: the decision, a journaled step, a wait, a delay."""

    kind: SpanKind
    name: str
    start: float
    end: float | None = Field(default=None, description="None while it is still going on")
    errors: list[str] = Field(default_factory=list, description="distinct errors Restate recorded while retrying")
    failed: bool = Field(default=False, description="gave up after its retries; the decider saw the failure")
    promise: str | None = Field(default=None, description="for a wait: the durable promise it waited on")
    deadline: float | None = Field(default=None, description="for a wait: when its timer would fire")
    ended_by: EndedBy | None = Field(default=None, description="for a wait: the message arrived, or the timer")
    retrying: bool = Field(default=False, description="Restate is retrying it now: its last attempt failed")
    attempts: int | None = Field(default=None, description="attempts so far, while it is being retried")
    next_attempt_at: float | None = Field(default=None, description="when Restate tries it again")
    details: list[str] = Field(default_factory=list, description="the full error texts (tracebacks), for a toggle")

    @property
    def retried(self) -> bool:
        return bool(self.errors)


class Decision(BaseModel):
    """The manager's answer to one approval round, as the run received it (never its token)."""

    round: int = Field(description="the approval message's number: approval-<round>")
    po_number: str | None = None
    approved: bool | None = None
    up_to: float | None = None
    by: str | None = None
    note: str = ""
    channel: str | None = Field(default=None, description="the sender's party: operator, manager, ...")
    at: float | None = Field(default=None, description="when the run received it")
    status: str | None = Field(default=None, description="what the run made of it: approved, rejected, refused")
    signatures: list[str] = Field(
        default_factory=list, description="under the authority matrix: who signed, on which limit (signature_words)"
    )
    still_needed: str = Field(default="", description="what a PO with a first signature still needs")

    @property
    def verdict(self) -> str:
        if self.status == "refused":
            return "refused (token or PO did not match)"
        if self.status == "timed_out":
            return "no decision before the deadline"
        if self.status == "pending":
            return "waiting for the manager"
        if self.approved is None:
            return self.status or "unknown"
        if self.approved:
            return f"approved up to {self.up_to:.2f}" if self.up_to is not None else "approved at the asked price"
        return "rejected"

    def line(self) -> str:
        """One line for people: verdict, who, channel, when, note."""
        parts = [self.verdict + (f" ({self.po_number})" if self.po_number else "")]
        signed = [f"signed by {', '.join(self.signatures)}"] if self.signatures else []
        if self.status in ("timed_out", "pending"):
            return " · ".join([parts[0], *signed, *([self.still_needed] if self.still_needed else [])])
        if signed and self.approved:
            parts += signed
        else:
            parts.append(f"by {self.by}" if self.by else "by (not recorded)")
        if self.channel:
            parts.append(channel_words(self.channel))
        if self.at is not None:
            parts.append(f"at {clock(self.at)}")
        if self.note:
            parts.append(f"note: {self.note}")
        return " · ".join(parts)


def channel_words(party: str) -> str:
    """Where a decision came in, in words that do not read as a second decider: the internal
    ingress (the console or the CLI), or the inbound door, signed with the party's key."""
    if party == "operator":
        return "through the console or CLI"
    if party.startswith("operator (said: "):
        said = party.removeprefix("operator (said: ").removesuffix(")")
        return f"through the internal ingress, by an operator who said it was {said}"
    return f"signed by the {party}'s key"


class Turn(BaseModel):
    turn: int
    tool: str
    reason: str = ""
    summary: str = ""
    spans: list[Span] = Field(default_factory=list)
    decision: Decision | None = Field(default=None, description="for an approval wait: the manager's answer")

    @property
    def start(self) -> float | None:
        return min((s.start for s in self.spans), default=None)

    @property
    def end(self) -> float | None:
        ends = [s.end for s in self.spans]
        if not ends or any(e is None for e in ends):
            return None
        return max(e for e in ends if e is not None)

    @property
    def action(self) -> Span | None:
        """The step or wait the turn was for (not its decision, nor a reminder or an escalation
        its wait sent while it waited)."""
        return next(
            (
                s
                for s in reversed(self.spans)
                if s.kind == "wait" or (s.kind == "step" and not names.is_during_wait(s.name))
            ),
            None,
        )


class Band(BaseModel):
    """A stretch when Restate could not run the workflow: the service down or failing."""

    start: float
    end: float | None = Field(default=None, description="None while attempts still fail")
    errors: list[str] = Field(default_factory=list)
    retries: int | None = Field(default=None, description="attempts so far, for an outage still going on")
    next_attempt_at: float | None = Field(default=None, description="for an outage still going on")
    ended_by: str | None = Field(default=None, description="the evidence the service answered again")


class Waiting(BaseModel):
    tool: str
    event: str
    seq: int
    deadline: float
    clock: CalendarClock | None = None

    def until(self, now: float) -> str:
        return until(self.deadline, self.clock, now)


class Invocation(BaseModel):
    """The run's workflow invocation, as sys_invocation shows it now."""

    id: str
    status: str
    created_at: float | None = None
    completed_at: float | None = None
    retry_count: int | None = None
    last_failure: str | None = Field(default=None, description="the last failed attempt's error, one line")
    last_failure_details: str | None = Field(default=None, description="that error in full (a traceback)")
    last_failure_code: str | None = None
    last_failure_command: str | None = Field(default=None, description="the step it failed in, if any")
    last_start_at: float | None = None
    next_retry_at: float | None = None

    @property
    def backing_off(self) -> bool:
        return self.status == "backing-off"


TIMELINE_SECURITY_SHOWN = 10
"""The latest security entries a timeline lists (the total and what was collapsed or dropped come with them)."""


class Timeline(BaseModel):
    run_id: str
    sku: str
    source: Source = Field(description="journal: timed from Restate's journal; history/outcome: what was kept")
    notes: list[str] = Field(default_factory=list, description="what the timeline could not show, and why")
    now: float
    started_at: float | None = None
    ended_at: float | None = None
    day_seconds: float | None = None
    invocation: Invocation | None = None
    waiting: Waiting | None = None
    turns: list[Turn] = Field(default_factory=list)
    bands: list[Band] = Field(default_factory=list)
    outcome: ReplenishmentResult | None = None
    security: SecurityLog = Field(default_factory=SecurityLog, description="the run's security log")
    decisions: list[Decision] = Field(default_factory=list, description="every approval round's answer")

    @property
    def open_outage(self) -> Band | None:
        return next((b for b in self.bands if b.end is None), None)

    @property
    def retrying_step(self) -> Span | None:
        return next((s for t in self.turns for s in t.spans if s.retrying), None)

    @property
    def finished(self) -> bool:
        return self.outcome is not None or (self.invocation is not None and self.invocation.status == "completed")

    @property
    def status(self) -> str:
        """One line for people: how the run stands now."""
        if self.outcome is not None:
            return f"ended {self.outcome.outcome}: {self.outcome.detail}"
        if (band := self.open_outage) is not None:
            return f"service down since {clock(band.start)}: Restate's attempts to reach it are refused"
        if (step := self.retrying_step) is not None:
            return f"retrying {step.name}: {retry_line(step)}"
        if self.invocation is not None and self.invocation.backing_off:
            inv = self.invocation
            return f"retrying (attempt {inv.retry_count or 1} failed): {inv.last_failure or 'no error recorded'}"
        if self.waiting is not None:
            return f"waiting in {self.waiting.tool} (the next {self.waiting.event} message)"
        last = self.turns[-1].action if self.turns else None
        if last is not None and last.kind == "wait" and last.end is None:
            return f"waiting in {last.name} (on {last.promise})"
        if self.invocation is not None:
            return self.invocation.status
        return "unknown"

    @property
    def span(self) -> tuple[float, float] | None:
        """The time range to draw: from the start to the end, or to now while it runs."""
        times = [t.start for t in self.turns if t.start is not None]
        start = self.started_at if self.started_at is not None else min(times, default=None)
        if start is None:
            return None
        end = self.ended_at if self.ended_at is not None else self.now
        for turn in self.turns:
            for s in turn.spans:
                end = max(end, s.end or s.start)
        for band in self.bands:
            end = max(end, band.end or self.now)
        return start, max(end, start)

    def day_of(self, t: float) -> float | None:
        """Calendar days since the start, at this run's day length (weekends and holidays count:
        they are not business days)."""
        if self.day_seconds is None or self.started_at is None:
            return None
        return (t - self.started_at) / self.day_seconds


def retried_line(step: Span) -> str:
    """A step that was retried and is not being retried now: how it ended, after which errors."""
    errors = "; ".join(step.errors)
    if step.failed:
        return f"{step.name} gave up after retries: {errors}"
    if step.end is not None:
        return f"{step.name} retried after: {errors}; then it succeeded"
    return f"{step.name} retried after: {errors}"


def retry_line(step: Span) -> str:
    """A retrying step in one line: attempts, the last error, the next attempt."""
    parts = []
    if step.attempts:
        parts.append(f"{step.attempts} attempt{'s' if step.attempts != 1 else ''} failed")
    if step.errors:
        parts.append(f"last error: {step.errors[-1]}")
    if step.next_attempt_at is not None:
        parts.append(f"next attempt {clock(step.next_attempt_at)[11:19]}")
    return "; ".join(parts) or "retrying"


def signature_words(signature: Any) -> str:
    """One signature as people read it: `pia for dee (limit 100,000.00)`."""
    acting = f" for {signature.acting_for}" if signature.acting_for else ""
    return f"{signature.person}{acting} (limit {signature.limit:,.2f})"


def signed_by(approval: Any) -> list[str]:
    return [signature_words(s) for s in getattr(approval, "signatures", None) or []]


def decision_from_approval(approval: Any, round_: int = -1) -> Decision | None:
    """The run's record of a decided approval round (`state.approval`) as a Decision; None while
    it is pending. `decided_at` and `channel` are read when the state has them."""
    if approval is None or approval.status == "pending":
        return None
    approved = approval.status == "approved"
    return Decision(
        round=round_,
        po_number=approval.request.po_number,
        approved=approved if approval.status in ("approved", "rejected") else None,
        up_to=approval.approved_up_to if approved else None,
        by=approval.decided_by,
        note=approval.note or "",
        channel=getattr(approval, "channel", None),
        at=getattr(approval, "decided_at", None),
        status=approval.status,
        signatures=signed_by(approval),
    )
