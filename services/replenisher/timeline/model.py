"""One replenishment drawn as a timeline: turns, their steps and waits, outage bands, the outcome.

Plain data, built by `build.py` from what Restate recorded and the run's own state, and
drawn by `text.py` (the terminal) and `html.py` (a self-contained page). Times are epoch
seconds (UTC).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from replenisher.domain.outcomes import ReplenishmentResult

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

    @property
    def retried(self) -> bool:
        return bool(self.errors)


class Turn(BaseModel):
    turn: int
    tool: str
    reason: str = ""
    summary: str = ""
    spans: list[Span] = Field(default_factory=list)

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
        """The step or wait the turn was for (not its decision)."""
        return next((s for s in reversed(self.spans) if s.kind in ("step", "wait")), None)


class Band(BaseModel):
    """A stretch when Restate could not run the workflow: the service down or failing."""

    start: float
    end: float | None = Field(default=None, description="None while attempts still fail")
    errors: list[str] = Field(default_factory=list)
    retries: int | None = Field(default=None, description="attempts so far, for an outage still going on")


class Waiting(BaseModel):
    tool: str
    event: str
    seq: int
    deadline: float


class Invocation(BaseModel):
    """The run's workflow invocation, as sys_invocation shows it now."""

    id: str
    status: str
    created_at: float | None = None
    completed_at: float | None = None
    retry_count: int | None = None
    last_failure: str | None = None
    next_retry_at: float | None = None


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
    security_events: list[str] = Field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.outcome is not None or (self.invocation is not None and self.invocation.status == "completed")

    @property
    def status(self) -> str:
        """One line for people: how the run stands now."""
        if self.outcome is not None:
            return f"ended {self.outcome.outcome}: {self.outcome.detail}"
        if self.invocation is not None and self.invocation.status == "backing-off":
            tries = self.invocation.retry_count or 0
            return f"retrying (attempt {tries + 1}): {self.invocation.last_failure or 'no error recorded'}"
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
        """Business days since the start, at this run's day length."""
        if self.day_seconds is None or self.started_at is None:
            return None
        return (t - self.started_at) / self.day_seconds
