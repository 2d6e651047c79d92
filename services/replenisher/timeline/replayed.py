"""A recorded run drawn beside its replay: each turn in time, what the run did, what the replay chose.

Built from the run's archive (the times, every turn's decision, step failures, waits ended by a
message or by their timeout) and the replay's report (the new decider's choice at each turn it
was asked). The turn where the two part is marked; turns the replay never reached (it stops
where it parts, unless told to go on) say so. Drawn as text for the terminal and as a
self-contained HTML page with an inline SVG chart, in the style of the run timelines.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from replenisher.domain.archive import RunArchive
from replenisher.replay.playback import ReplayReport
from replenisher.templating import environment, render
from replenisher.timeline.format import shorten
from replenisher.timeline.html import LABEL, ROW, TOP, Frame, axis_ticks, row_label
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
# replay's column on the right. The markup is the template `timeline/templates/replay.html`.
CHART = 470
REPLAY_X = LABEL + CHART + 24
LEGEND = [("#2563eb", "step"), ("#dc2626", "step failed after retries"), ("#fde68a", "wait")]
LEGEND += [("#16a34a", "ended by a message"), ("#b91c1c", "ended by its timeout"), ("#6b7280", "done")]


def render_html(views: list[ReplayView]) -> str:
    return render("replay.html", views=views)


class ReplayChartRow(BaseModel):
    row: Row
    tip: str
    label: str
    y: float
    mid: float
    shade: str
    x0: float
    w: float


class ReplayChart(Frame):
    replay_x: int = REPLAY_X
    rows: list[ReplayChartRow]
    parted_x: float | None = None
    parted_y: float | None = None


def replay_chart(v: ReplayView) -> ReplayChart:
    assert v.started_at is not None
    start = v.started_at
    end = max([start, *(r.end or r.start or start for r in v.rows)])
    total = max(end - start, 1e-6)

    def x(t: float) -> float:
        return LABEL + (t - start) / total * CHART

    rows = []
    for i, row in enumerate(v.rows):
        y = TOP + i * ROW
        begin = row.start if row.start is not None else v.started_at or 0.0
        x0, x1 = x(begin), x(row.end if row.end is not None else begin)
        rows.append(
            ReplayChartRow(
                row=row,
                tip=_tip(row),
                label=row_label(row.turn, row.recorded.tool),
                y=y,
                mid=y + ROW / 2,
                shade="#fee2e2" if row.turn == v.parts_at else ("#fafafa" if row.turn % 2 else "#ffffff"),
                x0=x0,
                w=max(x1 - x0, 3),
            )
        )
    chart = ReplayChart(
        height=TOP + ROW * len(v.rows) + 16,
        ticks=axis_ticks(total, CHART, day_ticks(total, v.day_seconds, most=4)),
        rows=rows,
    )
    parted = next((i for i, r in enumerate(v.rows) if r.turn == v.parts_at), None)
    if parted is not None:
        chart.parted_x = x(v.rows[parted].start or start)
        chart.parted_y = TOP + parted * ROW
    return chart


def _tip(row: Row) -> str:
    lines = [f"turn {row.turn}: recorded {row.recorded.tool} [{row.recorded.by}]"]
    if row.recorded.why:
        lines.append(f"why: {row.recorded.why}")
    if row.replayed is not None:
        lines.append(f"replayed {row.replayed.tool} [{row.replayed.by}]" + ("" if row.agree else " - differs"))
        if row.replayed.why:
            lines.append(f"why: {row.replayed.why}")
    return "\n".join(lines)


environment.globals.update(replay_chart=replay_chart, replay_legend=LEGEND, shorten=shorten)
