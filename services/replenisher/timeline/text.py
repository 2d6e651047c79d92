"""The timeline in a terminal: one row per turn on a shared time axis, outages as bands.

turn  at      tool                  |█   ═══════════════◆           | took    ...
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from replenisher.timeline.format import clock, days, duration, received, security_entry, security_tally, shorten
from replenisher.timeline.model import (
    TIMELINE_SECURITY_SHOWN,
    Band,
    Span,
    Timeline,
    Turn,
    retried_line,
    retry_line,
)

Col = Callable[[float], int]

SOURCES = {
    "journal": "Restate's journal and the run's state",
    "history": "the run's own history (no times)",
    "outcome": "the outcome kept in the SKU's record",
}


def render_text(timeline: Timeline, width: int = 110, bar_width: int = 36) -> str:
    lines = _header(timeline, width)
    span = timeline.span
    if timeline.source == "journal" and span is not None:
        lines += _chart(timeline, span, width, bar_width)
    else:
        lines += _listing(timeline, width)
    lines += _footer(timeline, width)
    return "\n".join(line if len(line) <= width else line[: width - 1] + "…" for line in "\n".join(lines).split("\n"))


def _header(t: Timeline, width: int) -> list[str]:
    lines = [f"{t.run_id}  ({t.sku})  {t.status}"]
    facts = [f"started {clock(t.started_at)}"]
    if t.started_at is not None:
        end = t.ended_at if t.ended_at is not None else t.now
        length = duration(end - t.started_at)
        in_days = days(t.day_of(end))
        verb = "took" if t.ended_at is not None else "running for"
        facts.append(f"{verb} {length}" + (f" ({in_days})" if in_days else ""))
    if t.day_seconds is not None:
        facts.append(f"a day is {duration(t.day_seconds)}")
    lines.append(" · ".join(facts))
    lines.append(f"from {SOURCES[t.source]}")
    lines += [textwrap.fill(f"note: {note}", width, subsequent_indent="      ") for note in t.notes]
    lines.append("")
    return lines


def _chart(t: Timeline, span: tuple[float, float], width: int, bar_width: int) -> list[str]:
    start, end = span
    total = max(end - start, 1e-6)

    def col(x: float) -> int:
        return min(bar_width - 1, max(0, int((x - start) / total * bar_width)))

    axis_end = f"{duration(total)}" + (f" = {t.day_of(end):.1f}d" if t.day_of(end) is not None else "")
    axis = f"0{'─' * (bar_width - len(axis_end) - 2)} {axis_end}"
    lines = [f"{'turn':>4}  {'at':>7}  {'tool':<24} |{axis[:bar_width]:<{bar_width}}| {'took':>7}  what happened"]
    rows: list[tuple[float, list[str]]] = []
    for turn in t.turns:
        rows.append((turn.start if turn.start is not None else end, _turn_rows(t, turn, col, bar_width, width)))
    for band in t.bands:
        rows.append((band.start, _band_rows(t, band, col, bar_width, width)))
    for _, block in sorted(rows, key=lambda r: r[0]):
        lines += block
    lines.append("")
    key = "key: █ step  ═ wait  ◆ ended by a message  ✗ ended by its timeout  ▶ still going  ░ service down"
    if len(key) > width:
        cut = key.index("  ✗")
        key = key[:cut] + "\n    " + key[cut + 2 :]
    lines.append(key)
    return lines


def _turn_rows(t: Timeline, turn: Turn, col: Col, bar_width: int, width: int) -> list[str]:
    bar = [" "] * bar_width
    for s in turn.spans:
        _draw(bar, s, col, t.now)
    for s in turn.spans:
        _mark_end(bar, s, col, t.now)  # over a reminder that shares the wait's last cell
    start = turn.start
    at = _at(t, start)
    took = duration((turn.end if turn.end is not None else t.now) - start) if start is not None else "-"
    head = f"{turn.turn:>4}  {at:>7}  {shorten(turn.tool, 24):<24} |{''.join(bar)}| {took:>7}"
    indent = " " * 15
    happened = _happened(turn)
    if width - len(head) >= 42:
        lines = [head + "  " + shorten(happened, width - len(head) - 2)]
    else:
        lines = [head, indent + shorten(happened, width - 15)]
    if turn.decision is not None:
        lines.append(indent + shorten(f"decision: {turn.decision.line()}", width - 15))
    elif turn.reason:
        lines.append(indent + shorten(f"why: {turn.reason}", width - 15))
    for s in turn.spans:
        if s.retrying:
            lines.append(indent + shorten(f"{s.name} is being retried: {retry_line(s)}", width - 15))
        elif s.errors:
            lines.append(indent + shorten(retried_line(s), width - 15))
    return lines


def _happened(turn: Turn) -> str:
    action = turn.action
    parts = []
    if action is not None and action.kind == "wait":
        if action.end is None:
            parts.append(f"waiting on {action.promise}")
        elif action.ended_by == "timeout":
            parts.append("timed out")
        elif action.ended_by == "message":
            parts.append(f"message {action.promise}")
    if action is not None and action.failed:
        parts.append("failed after retries")
    if turn.summary:
        parts.append(turn.summary)
    elif turn.tool == "done":
        parts.append("the run ends here")
    elif action is not None and action.end is None:
        parts.append("in progress")
    return ": ".join(parts) if parts else "-"


def _band_rows(t: Timeline, band: Band, col: Col, bar_width: int, width: int) -> list[str]:
    bar = [" "] * bar_width
    end = band.end if band.end is not None else t.now
    for i in range(col(band.start), col(end) + 1):
        bar[i] = "░"
    label = "service down" if band.end is not None else "service down now"
    took = duration(end - band.start)
    head = f"{'':>4}  {_at(t, band.start):>7}  {label:<24} |{''.join(bar)}| {took:>7}"
    what = band_line(band)
    if width - len(head) >= 42:
        return [head + "  " + shorten(what, width - len(head) - 2)]
    return [head, " " * 15 + shorten(what, width - 15)]


def band_line(band: Band) -> str:
    """An outage in one line: since when, until when (or the next attempt), what Restate got."""
    if band.end is not None:
        head = f"{clock(band.start)[11:19]} to {clock(band.end)[11:19]}, when the service answered again"
        if band.ended_by is None:
            head = f"{clock(band.start)[11:19]} to {clock(band.end)[11:19]} (the last refused attempt)"
    else:
        head = f"since {clock(band.start)[11:19]}"
        if band.retries:
            head += f", {band.retries} attempts refused"
        if band.next_attempt_at is not None:
            head += f", next attempt {clock(band.next_attempt_at)[11:19]}"
    errors = "; ".join(band.errors)
    return f"{head}: {errors}" if errors else head


def _draw(bar: list[str], s: Span, col: Col, now: float) -> None:
    a = col(s.start)
    b = col(s.end if s.end is not None else now)
    if s.kind == "decision":
        return  # decisions take milliseconds; the turn's row starts with them
    fill = "═" if s.kind == "wait" else ("·" if s.kind == "delay" else "█")
    for i in range(a, b + 1):
        bar[i] = fill


def _mark_end(bar: list[str], s: Span, col: Col, now: float) -> None:
    """How a wait ended (or that a span is still going), drawn over the fills of its turn."""
    b = col(s.end if s.end is not None else now)
    if s.kind == "wait":
        bar[b] = "▶" if s.end is None else ("✗" if s.ended_by == "timeout" else "◆")
    elif s.end is None and s.kind != "decision":
        bar[b] = "▶"


def _at(t: Timeline, x: float | None) -> str:
    if x is None or t.started_at is None:
        return "-"
    d = t.day_of(x)
    return f"d{max(d, 0.0):.1f}" if d is not None else f"+{max(x - t.started_at, 0.0):.1f}s"


def _listing(t: Timeline, width: int) -> list[str]:
    if not t.turns:
        return ["(the run's turns are no longer kept)" if t.source == "outcome" else "(no turns yet)"]
    lines = [f"{'turn':>4}  {'tool':<24}  what happened"]
    for turn in t.turns:
        lines.append(f"{turn.turn:>4}  {shorten(turn.tool, 24):<24}  " + shorten(turn.summary or "-", width - 32))
        if turn.decision is not None:
            lines.append(" " * 6 + shorten(f"decision: {turn.decision.line()}", width - 6))
        elif turn.reason:
            lines.append(" " * 6 + shorten(f"why: {turn.reason}", width - 6))
    return lines


def _footer(t: Timeline, width: int) -> list[str]:
    lines = [""]
    o = t.outcome
    if o is not None:
        price = f" at {o.unit_price:.2f}" if o.unit_price is not None else ""
        po = f" (PO {o.po_number} from {o.supplier})" if o.po_number else ""
        lines.append(f"outcome: {o.outcome.upper()}  {received(o.quantity_received, o.quantity_ordered)}{price}{po}")
        lines.append("         " + shorten(o.detail, width - 9))
    elif t.waiting is not None:
        lines.append(f"now: waiting in {t.waiting.tool} until {t.waiting.until(t.now)}")
    else:
        lines.append(f"now: {t.status}")
    if t.decisions:
        lines.append("decisions:")
        lines += ["  " + shorten(f"round {d.round + 1}: {d.line()}", width - 2) for d in t.decisions]
    log = t.security
    if log.total:
        tally = security_tally(log)
        lines.append(f"security events: {log.total}" + (f" ({tally})" if tally else "") + "; latest first:")
        lines += [shorten(f"security: {security_entry(e)}", width) for e in log.latest(TIMELINE_SECURITY_SHOWN)]
    return lines
