"""The timeline as a self-contained HTML page with an inline SVG chart (no scripts, no links out).

The markup is in the templates (`timeline/templates`: `timeline_fragment.html` is the part the
console embeds, `timeline.html` wraps it into a page that can be saved and mailed, with the
stylesheet `timeline/static/timeline.css` written in). Every label comes from data and the
templates autoescape it. This module works out what they draw: the chart's geometry and the
table's rows in time order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security_log import SecurityLog
from replenisher.templating import environment, render
from replenisher.timeline.format import clock, duration, received, security_entry, security_tally, shorten
from replenisher.timeline.model import TIMELINE_SECURITY_SHOWN, Band, Span, Timeline, Turn, retried_line, retry_line
from replenisher.timeline.text import SOURCES, band_line
from replenisher.timeline.ticks import day_ticks, duration_ticks

Scale = Callable[[float], float]

WIDTH = 980
LABEL = 230
RIGHT = 24
ROW = 26
TOP = 34
BAND_LABEL = 14  # the line under the chart that names the outages
BAND_LABEL_WIDTH = 80  # "service down" at 11px

LEGEND = [
    ("#2563eb", "step"),
    ("#dc2626", "step failed after retries"),
    ("#fde68a", "wait"),
    ("#16a34a", "ended by a message"),
    ("#b91c1c", "ended by its timeout"),
    ("#fecaca", "service down"),
    ("#6b7280", "decision"),
]


def render_html(timeline: Timeline) -> str:
    return render("timeline.html", timeline=timeline, fragment_url=None)


def render_fragment(timeline: Timeline) -> str:
    return render("timeline_fragment.html", timeline=timeline, fragment_url=None)


class Mark(BaseModel):
    """One span of a turn in the chart: where it starts and how wide it is, at the row's middle."""

    kind: Literal["decision", "delay", "step", "wait"]
    x0: float
    w: float
    mid: float
    failed: bool = False
    retried: bool = False
    ended_by: str = "open"


class ChartRow(BaseModel):
    turn: int
    tool: str
    tip: str
    label: str
    y: float
    shade: str
    marks: list[Mark]


class ChartBand(BaseModel):
    """An outage drawn across the rows, and where its label goes."""

    tip: str
    x0: float
    w: float
    label_x: float
    label_end: bool


class Frame(BaseModel):
    """A chart of turns in time: its size, its rows' height, where the first row starts, and the
    time axis's ticks (x, anchor, label)."""

    width: int = WIDTH
    row: int = ROW
    top: int = TOP
    height: int
    ticks: list[tuple[float, str, str]]


class Chart(Frame):
    bottom: int
    rows: list[ChartRow]
    bands: list[ChartBand]
    now_x: float | None = None
    end_x: float | None = None


def timeline_chart(t: Timeline) -> Chart:
    span = t.span
    assert span is not None
    start, end = span
    total = max(end - start, 1e-6)
    chart = WIDTH - LABEL - RIGHT
    foot = BAND_LABEL if t.bands else 0  # a line under the chart for the outages' labels
    height = TOP + ROW * max(len(t.turns), 1) + 16 + foot
    bottom = height - foot

    def x(v: float) -> float:
        return LABEL + (min(max(v, start), end) - start) / total * chart

    ticks = day_ticks(total, t.day_seconds) if t.day_seconds and t.started_at is not None else duration_ticks(total)
    rows = [_row(t, turn, TOP + i * ROW, x) for i, turn in enumerate(t.turns)]
    bands = [_band(band, t.now, x) for band in t.bands]
    now_x = x(t.now) if t.ended_at is None else None
    end_x = x(t.ended_at) if t.ended_at is not None and t.outcome is not None else None
    return Chart(
        height=height,
        bottom=bottom,
        ticks=axis_ticks(total, chart, ticks),
        rows=rows,
        bands=bands,
        now_x=now_x,
        end_x=end_x,
    )


def axis_ticks(total: float, chart: float, ticks: list[tuple[float, str]]) -> list[tuple[float, str, str]]:
    """The time axis's gridlines at `ticks` (seconds after the start, label): x, anchor and label."""
    out = []
    for offset, label in ticks:
        px = LABEL + chart * min(offset / total, 1.0)
        anchor = "start" if offset == 0 else ("end" if px > LABEL + chart - 30 else "middle")
        out.append((px, anchor, label))
    return out


def row_label(turn: int, tool: str) -> str:
    return shorten(f"{turn:>2}  {tool}", 30)


def _row(t: Timeline, turn: Turn, y: float, x: Scale) -> ChartRow:
    mid = y + ROW / 2
    return ChartRow(
        turn=turn.turn,
        tool=turn.tool,
        tip=_tip(turn),
        label=row_label(turn.turn, turn.tool),
        y=y,
        shade="#fafafa" if turn.turn % 2 else "#ffffff",
        marks=[_mark(s, t.now, mid, x) for s in turn.spans],
    )


def _mark(s: Span, now: float, mid: float, x: Scale) -> Mark:
    x0 = x(s.start)
    x1 = x(s.end if s.end is not None else now)
    ended = "open" if s.end is None else (s.ended_by or "open")
    return Mark(
        kind=s.kind, x0=x0, w=max(x1 - x0, 3), mid=mid, failed=s.failed, retried=s.retried, ended_by=ended
    )  # fmt: skip


def _band(band: Band, now: float, x: Scale) -> ChartBand:
    x0, x1 = x(band.start), x(band.end if band.end is not None else now)
    fits = x0 + BAND_LABEL_WIDTH <= WIDTH - RIGHT
    return ChartBand(
        tip="service down: " + band_line(band),
        x0=x0,
        w=max(x1 - x0, 3),
        label_x=x0 + 3 if fits else max(x1, LABEL + BAND_LABEL_WIDTH),
        label_end=not fits,
    )


def _tip(turn: Turn) -> str:
    lines = [f"turn {turn.turn}: {turn.tool}"]
    if turn.start is not None:
        end = turn.end
        lines.append(f"{clock(turn.start)}, took {duration(end - turn.start) if end is not None else 'so far ...'}")
    if turn.summary:
        lines.append(turn.summary)
    if turn.decision is not None:
        lines.append(f"decision: {turn.decision.line()}")
    elif turn.reason:
        lines.append(f"why: {turn.reason}")
    for s in turn.spans:
        if s.retrying:
            lines.append(f"{s.name} is being retried: {retry_line(s)}")
        elif s.errors:
            lines.append(retried_line(s))
    return "\n".join(lines)


class TableRow(BaseModel):
    """A line of the turns table: a turn, or an outage between them."""

    when: str
    took: str
    what: str
    tool: str = ""
    turn: Turn | None = None
    band: Band | None = None
    ended_by: str | None = None


def table_rows(t: Timeline) -> list[TableRow]:
    """The turns and the outages, in time order (an outage before a turn that starts with it)."""
    rows: list[tuple[float, int, TableRow]] = []
    for turn in t.turns:
        start, end = turn.start, turn.end
        action = turn.action
        ended_by = None
        if action is not None and action.kind == "wait" and action.ended_by:
            ended_by = "message" if action.ended_by == "message" else "timed out"
        row = TableRow(
            turn=turn,
            when=clock(start) if start is not None else "-",
            took=duration((end if end is not None else t.now) - start) if start is not None else "-",
            what=turn.summary or ("in progress" if action is not None and action.end is None else "-"),
            ended_by=ended_by,
        )
        rows.append((start if start is not None else float(turn.turn), 1, row))
    for band in t.bands:
        end = band.end if band.end is not None else t.now
        row = TableRow(
            band=band,
            when=clock(band.start),
            tool="service down" if band.end is not None else "service down now",
            took=duration(end - band.start),
            what=band_line(band),
        )
        rows.append((band.start, 0, row))
    return [row for *_, row in sorted(rows, key=lambda r: (r[0], r[1]))]


def facts(t: Timeline) -> str:
    facts = [f"started {clock(t.started_at)}"]
    if t.started_at is not None:
        end = t.ended_at if t.ended_at is not None else t.now
        verb = "took" if t.ended_at is not None else "running for"
        d = t.day_of(end)
        facts.append(f"{verb} {duration(end - t.started_at)}" + (f" ({d:.1f} days)" if d is not None else ""))
    return " · ".join(facts)


def outcome_line(o: ReplenishmentResult) -> str:
    price = f" at {o.unit_price:.2f}" if o.unit_price is not None else ""
    po = f" · PO {o.po_number} from {o.supplier}" if o.po_number else ""
    return f"outcome: {o.outcome.upper()} · {received(o.quantity_received, o.quantity_ordered)}{price}{po} · {o.detail}"


def security_head(log: SecurityLog) -> str:
    tally = security_tally(log)
    return f"security events: {log.total}" + (f" ({tally})" if tally else "") + "; latest first"


environment.globals.update(
    clock=clock,
    facts=facts,
    legend=LEGEND,
    outcome_line=outcome_line,
    retried_line=retried_line,
    retry_line=retry_line,
    security_entry=security_entry,
    security_head=security_head,
    security_shown=TIMELINE_SECURITY_SHOWN,
    source_of=lambda t: SOURCES[t.source],
    table_rows=table_rows,
    timeline_chart=timeline_chart,
)
