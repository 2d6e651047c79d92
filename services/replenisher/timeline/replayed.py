"""A recorded run drawn beside its replay: each turn in time, what the run did, what the replay chose.

Built from the run's archive (the times, every turn's decision, step failures, waits ended by a
message or by their timeout) and the replay's report (the new decider's choice at each turn it
was asked). The turn where the two part is marked; turns the replay never reached (it stops
where it parts, unless told to go on) say so. Drawn as text for the terminal and as a
self-contained HTML page with an inline SVG chart, in the style of the run timelines.
"""

from __future__ import annotations

from html import escape
from typing import Literal

from pydantic import BaseModel, Field

from replenisher.domain.archive import RunArchive
from replenisher.replay.playback import ReplayReport
from replenisher.timeline.format import clock, shorten
from replenisher.timeline.html import LABEL, ROW, STYLE, TOP, WIDTH, Scale, axis_marks, row_open
from replenisher.timeline.ticks import day_ticks

Kind = Literal["step", "wait", "end"]
EndedBy = Literal["message", "timeout"]


class Side(BaseModel):
    tool: str
    why: str = ""
    by: str = ""


class Row(BaseModel):
    turn: int
    start: float | None = None
    end: float | None = None
    kind: Kind = "step"
    failed: bool = Field(default=False, description="a step of the turn failed after its retries")
    ended_by: EndedBy | None = Field(default=None, description="for a wait: its message came, or its timeout")
    recorded: Side
    replayed: Side | None = Field(default=None, description="None: the replay did not get this far")
    agree: bool | None = None


class ReplayView(BaseModel):
    run_id: str
    sku: str
    decider: str
    day_seconds: float
    started_at: float | None
    ended_at: float | None
    recorded_outcome: str | None
    replayed_outcome: str | None
    parts_at: int | None = Field(description="the first turn where the replay chose otherwise")
    stopped: str
    stop_detail: str = ""
    rows: list[Row]

    def day(self, t: float | None) -> float | None:
        if t is None or self.started_at is None:
            return None
        return (t - self.started_at) / self.day_seconds

    @property
    def verdict(self) -> str:
        compared = sum(1 for r in self.rows if r.replayed is not None)
        if self.parts_at is None:
            return f"{self.decider} agrees with the record on all {compared} turns it was asked"
        return f"{self.decider} parts from the record at turn {self.parts_at}, after {self.parts_at} agreeing turns"


def build(archive: RunArchive, report: ReplayReport) -> ReplayView:
    """The archive's turns in time, each with the replay's choice (when it got that far)."""
    pairs = {pair.turn: pair for pair in report.pairs}
    rows: list[Row] = []
    last_now: float | None = None
    for entry in archive.entries:
        if entry.op == "now":
            last_now = float(entry.value)
            continue
        if entry.op == "decided" and entry.decision is not None and entry.turn is not None:
            if rows:
                rows[-1].end = last_now
            d = entry.decision
            by = d.decider + (f" {d.model}" if d.model else "")
            pair = pairs.get(entry.turn)
            rows.append(
                Row(
                    turn=entry.turn,
                    start=last_now,
                    kind="end" if d.tool == "done" else "step",
                    recorded=Side(tool=d.tool, why=d.reason, by=by),
                    replayed=Side(tool=pair.replayed, why=pair.replayed_why, by=pair.replayed_by) if pair else None,
                    agree=pair.agree if pair else None,
                )
            )
        elif rows and entry.op == "step" and entry.failure is not None:
            rows[-1].failed = True
        elif rows and entry.op == "receive":
            rows[-1].kind = "wait"
            rows[-1].ended_by = "timeout" if entry.value is None else "message"
    if rows:
        rows[-1].end = archive.ended_at if archive.ended_at is not None else last_now
    first = report.first_divergence
    return ReplayView(
        run_id=archive.run_id,
        sku=archive.sku,
        decider=report.decider + (f" ({report.model})" if report.model else ""),
        day_seconds=float(archive.request.get("day_seconds") or 86_400.0),
        started_at=archive.started_at,
        ended_at=archive.ended_at,
        recorded_outcome=archive.outcome,
        replayed_outcome=report.replayed_outcome,
        parts_at=first.turn if first else None,
        stopped=report.stopped,
        stop_detail=report.stop_detail,
        rows=rows,
    )


# --- text ----------------------------------------------------------------------------------


def render_text(view: ReplayView) -> list[str]:
    width = max([len("recorded"), *(len(r.recorded.tool) for r in view.rows)]) + 2
    lines = [f"{'turn':>4}  {'at':>6}  {'recorded':<{width}}replayed ({view.decider})"]
    for row in view.rows:
        day = view.day(row.start)
        at = f"d{day:.1f}" if day is not None else ""
        mine = row.replayed.tool if row.replayed else "-"
        mark = "  <- parts here" if row.turn == view.parts_at else ("  (differs)" if row.agree is False else "")
        lines.append(f"{row.turn:>4}  {at:>6}  {row.recorded.tool:<{width}}{mine}{mark}")
    return lines


# --- HTML ----------------------------------------------------------------------------------

# The original timeline's frame (width, label column, rows), its chart narrowed to leave the
# replay's column on the right.
CHART = 470
REPLAY_X = LABEL + CHART + 24

EXTRA_STYLE = """
h1 { font: 600 20px system-ui, sans-serif; color: #1f2937; margin: 0 0 12px; }
.tl .parts { background: #fee2e2; }
.tl .parts .why { color: #374151; }
.tl .agree { color: #15803d; }
.tl .differs { color: #b91c1c; font-weight: 600; }
.tl .unasked { color: #6b7280; }
"""


def render_html(views: list[ReplayView]) -> str:
    title = escape(views[0].run_id + " beside its replay" if len(views) == 1 else f"{len(views)} runs beside replays")
    heading = (
        "A recorded run beside its replay" if len(views) == 1 else f"{len(views)} recorded runs beside their replays"
    )
    body = f"<h1>{escape(heading)}</h1>" + "\n".join(render_fragment(v) for v in views)
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{title}</title><style>{STYLE}{EXTRA_STYLE}</style></head>"
        f"<body style='margin:24px'><main>{body}</main></body></html>\n"
    )


def render_fragment(v: ReplayView) -> str:
    parts = [
        f"<section class=tl data-run='{escape(v.run_id)}' data-parts-at='{'' if v.parts_at is None else v.parts_at}'>"
    ]
    parts.append(f"<h2>{escape(v.run_id)} <small>({escape(v.sku)})</small></h2>")
    parts.append(f"<p class=status data-verdict>{escape(v.verdict)}</p>")
    outcome = f"recorded outcome: {v.recorded_outcome or 'still running'}"
    if v.replayed_outcome:
        outcome += f" · replayed outcome: {v.replayed_outcome}"
    parts.append(f"<p class=facts>started {escape(clock(v.started_at))} · {escape(outcome)}</p>")
    parts.append(
        "<p class=source>the recorded run from its archive (what happened, when); the replay's choices "
        "from the new decider, asked the same question at every turn</p>"
    )
    if v.rows and v.started_at is not None:
        parts.append(
            "<div class=chartwrap tabindex=0 role=region aria-label='the recorded run in time, beside its replay'>"
            f"{render_svg(v)}</div>"
        )
        parts.append(_legend())
    if v.stopped == "record no longer applies":
        parts.append(f"<p class=note>the replay went on with its own choice until {escape(v.stop_detail)}</p>")
    parts.append(_table(v))
    parts.append("</section>")
    return "\n".join(parts)


def render_svg(v: ReplayView) -> str:
    assert v.started_at is not None
    start = v.started_at
    end = max([start, *(r.end or r.start or start for r in v.rows)])
    total = max(end - start, 1e-6)
    height = TOP + ROW * len(v.rows) + 16

    def x(t: float) -> float:
        return LABEL + (t - start) / total * CHART

    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {height}' width='{WIDTH}' height='{height}' "
        f"role='img' aria-label='{escape(v.run_id)} beside its replay'>",
        "<g class='axis'>",
    ]
    out += axis_marks(start, total, CHART, height, day_ticks(total, v.day_seconds, most=4))
    out.append(f"<text x='{REPLAY_X}' y='{TOP - 16}' style='font-weight:600'>replay: {escape(v.decider)}</text>")
    out.append("</g>")
    for i, row in enumerate(v.rows):
        out.append(_svg_row(v, row, TOP + i * ROW, x))
    parted = next((i for i, r in enumerate(v.rows) if r.turn == v.parts_at), None)
    if parted is not None:
        y = TOP + parted * ROW
        px = x(v.rows[parted].start or start)
        out.append(
            "<g class='parts-here'>"
            f"<line x1='{px:.1f}' y1='{TOP - 8}' x2='{px:.1f}' y2='{height - 14}' stroke='#b91c1c' "
            "stroke-width='2' stroke-dasharray='5 3'/>"
            f"<rect x='0' y='{y:.1f}' width='{WIDTH}' height='{ROW}' fill='none' stroke='#b91c1c' stroke-width='2'/>"
            f"<text x='{px + 4:.1f}' y='{height - 2}' style='fill:#b91c1c;font-weight:600'>"
            f"the replay parts here (turn {v.parts_at})</text></g>"
        )
    out.append("</svg>")
    return "".join(out)


def _svg_row(v: ReplayView, row: Row, y: float, x: Scale) -> str:
    mid = y + ROW / 2
    shade = "#fee2e2" if row.turn == v.parts_at else ("#fafafa" if row.turn % 2 else "#ffffff")
    begin = row.start if row.start is not None else v.started_at or 0.0
    x0, x1 = x(begin), x(row.end if row.end is not None else begin)
    w = max(x1 - x0, 3)
    agree = "" if row.agree is None else str(row.agree).lower()
    label = f"{row.turn:>2}  {row.recorded.tool}"
    parts = row_open(f"data-turn='{row.turn}' data-agree='{agree}'", _tip(row), label, y, shade)
    if row.kind == "wait":
        parts.append(
            f"<rect class='wait' x='{x0:.1f}' y='{mid - 6:.1f}' width='{w:.1f}' height='12' rx='6' "
            "fill='#fde68a' stroke='#d97706'/>"
        )
        if row.ended_by == "message":
            parts.append(f"<circle cx='{x0 + w:.1f}' cy='{mid:.1f}' r='5' fill='#16a34a'/>")
        elif row.ended_by == "timeout":
            parts.append(
                f"<path d='M{x0 + w - 4:.1f},{mid - 4:.1f} l8,8 m0,-8 l-8,8' stroke='#b91c1c' stroke-width='2.5'/>"
            )
    elif row.kind == "step":
        fill = "#dc2626" if row.failed else "#2563eb"
        parts.append(
            f"<rect class='step' x='{x0:.1f}' y='{mid - 7:.1f}' width='{w:.1f}' height='14' rx='2' fill='{fill}'/>"
        )
    else:
        parts.append(f"<path d='M{x0:.1f},{mid - 6:.1f} l6,6 l-6,6 l-6,-6 z' fill='#6b7280'/>")
    if row.replayed is None:
        replay = "<tspan class='unasked' style='fill:#6b7280'>not replayed</tspan>"
    elif row.agree:
        replay = f"<tspan style='fill:#15803d'>= {escape(shorten(row.replayed.tool, 26))}</tspan>"
    else:
        replay = f"<tspan style='fill:#b91c1c;font-weight:600'>≠ {escape(shorten(row.replayed.tool, 26))}</tspan>"
    parts.append(f"<text x='{REPLAY_X}' y='{mid + 4:.1f}'>{replay}</text>")
    parts.append("</g>")
    return "".join(parts)


def _legend() -> str:
    items = [("#2563eb", "step"), ("#dc2626", "step failed after retries"), ("#fde68a", "wait")]
    items += [("#16a34a", "ended by a message"), ("#b91c1c", "ended by its timeout"), ("#6b7280", "done")]
    spans = "".join(f"<span><i class=sw style='background:{c}'></i>{escape(label)}</span>" for c, label in items)
    marks = "<span>= the replay chose the same</span><span>≠ it chose otherwise</span>"
    return f"<p class=legend>{spans}{marks}</p>"


def _tip(row: Row) -> str:
    lines = [f"turn {row.turn}: recorded {row.recorded.tool} [{row.recorded.by}]"]
    if row.recorded.why:
        lines.append(f"why: {row.recorded.why}")
    if row.replayed is not None:
        lines.append(f"replayed {row.replayed.tool} [{row.replayed.by}]" + ("" if row.agree else " - differs"))
        if row.replayed.why:
            lines.append(f"why: {row.replayed.why}")
    return "\n".join(lines)


def _table(v: ReplayView) -> str:
    rows = [
        "<div class=tablewrap><table class=turns><thead><tr><th>turn</th><th>when</th><th>recorded</th>"
        "<th>replayed</th></tr></thead><tbody>"
    ]
    for row in v.rows:
        day = v.day(row.start)
        when = f"day {day:.1f}" if day is not None else "-"
        recorded = f"{escape(row.recorded.tool)} <span class=why>[{escape(row.recorded.by)}]</span>"
        if row.recorded.why:
            recorded += f"<div class=why>why: {escape(row.recorded.why)}</div>"
        if row.replayed is None:
            replayed = "<span class=unasked>not replayed: the replay stopped before this turn</span>"
        else:
            mark = "agree" if row.agree else "differs"
            label = "same" if row.agree else "differs"
            replayed = (
                f"<span class={mark}>{escape(row.replayed.tool)} ({label})</span> "
                f"<span class=why>[{escape(row.replayed.by)}]</span>"
            )
            if row.replayed.why:
                replayed += f"<div class=why>why: {escape(row.replayed.why)}</div>"
        parted = row.turn == v.parts_at
        if parted:
            replayed += "<div class=differs data-parts-here>the replay parts from the record here</div>"
        rows.append(
            f"<tr data-turn='{row.turn}'{' class=parts' if parted else ''}><td class=num>{row.turn}</td>"
            f"<td class=num>{escape(when)}</td><td>{recorded}</td><td>{replayed}</td></tr>"
        )
    rows.append("</tbody></table></div>")
    return "".join(rows)
