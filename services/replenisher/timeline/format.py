"""Small formatting helpers shared by the text and HTML timelines."""

from __future__ import annotations

from datetime import UTC, datetime

from replenisher.domain.calendar import DAY, CalendarClock
from replenisher.domain.security_log import SECURITY_LOG_BOUND, SecurityEntry, SecurityLog


def clock(t: float | None) -> str:
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def until(deadline: float, calendar: CalendarClock | None, now: float) -> str:
    """A deadline as its date on the run's calendar, how many business days away, and when on the wall clock.

    On a compressed clock the calendar date is what the deadline means and the wall-clock
    time is when it fires; on a real clock they are the same instant.
    """
    if calendar is None:
        return clock(deadline)
    due = calendar.due(deadline, now)
    if calendar.day_seconds != DAY:
        return f"{due} on the calendar; {clock(deadline)} real time"
    return due


def fast_time_note(calendar: CalendarClock | None) -> str:
    """On a compressed clock, what its two kinds of time mean; nothing on a real one."""
    if calendar is None or calendar.day_seconds == DAY:
        return ""
    return (
        f"Time runs fast here: a calendar day lasts {duration(calendar.day_seconds)} of real time. Dates are on "
        "the site's calendar; countdowns and 'real time' are this machine's clock."
    )


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}min"
    if seconds < 86_400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86_400:.1f}d"


def days(n: float | None) -> str:
    if n is None:
        return ""
    return f"{n:.1f} day{'s' if round(n, 1) != 1 else ''}"


def shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def received(quantity_received: int, quantity_ordered: int) -> str:
    """What came of the order: `80 of 80 received`, or `nothing ordered` when no PO was placed."""
    if quantity_ordered == 0 and quantity_received == 0:
        return "nothing ordered"
    return f"{quantity_received} of {quantity_ordered} received"


def security_entry(e: SecurityEntry, run: bool = False) -> str:
    """One kept security entry: when (the latest), the run, who it is about, what; and, for
    repeats collapsed into it, how many and since when."""
    run_id = f" {e.run_id}" if run and e.run_id else ""
    repeats = f" ({e.count} times, first {clock(e.first_at)})" if e.count > 1 else ""
    # The count before the text, which a narrow view may cut short.
    return f"{clock(e.last_at)}{run_id} {e.source}{repeats}: {e.what}"


def security_tally(log: SecurityLog) -> str:
    """What the kept entries do not show one by one: repeats collapsed, and entries dropped
    (per source) to keep the latest; empty when neither happened."""
    parts = []
    if log.collapsed:
        parts.append(f"{log.collapsed} repeats collapsed into kept entries")
    if log.dropped:
        by = ", ".join(f"{source} {n}" for source, n in sorted(log.dropped.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"{log.dropped_total} dropped to keep {SECURITY_LOG_BOUND} entries ({by})")
    return "; ".join(parts)
