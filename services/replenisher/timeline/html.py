"""The timeline as a self-contained HTML page with an inline SVG chart (no scripts, no links out).

`render_fragment` is the part the console embeds; `render_html` wraps it into a page that
can be saved and mailed. Every label comes from data, so everything is escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from replenisher.timeline.format import clock, duration, received, security_entry, security_tally, shorten
from replenisher.timeline.model import TIMELINE_SECURITY_SHOWN, Span, Timeline, Turn, retried_line, retry_line
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

STYLE = """
.tl { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2937; }
.tl h2 { font-size: 18px; margin: 0 0 4px; }
.tl .status { font-weight: 600; }
.tl .facts, .tl .source { color: #4b5563; margin: 2px 0; }
.tl .note { background: #fef3c7; border-left: 4px solid #d97706; padding: 6px 10px; margin: 8px 0; }
.tl .security { background: #fee2e2; border-left: 4px solid #b91c1c; padding: 6px 10px; margin: 8px 0; }
.tl svg { display: block; margin: 10px 0; max-width: 100%; height: auto; }
.tl svg text { font: 12px system-ui, sans-serif; fill: #374151; }
.tl svg .axis text { fill: #6b7280; font-size: 11px; }
.tl table { border-collapse: collapse; width: 100%; margin-top: 8px; }
.tl th, .tl td { text-align: left; vertical-align: top; padding: 4px 8px; border-bottom: 1px solid #e5e7eb; }
.tl th { font-size: 12px; text-transform: uppercase; color: #6b7280; }
.tl td.num { white-space: nowrap; color: #4b5563; }
.tl .why { color: #6b7280; font-size: 13px; }
.tl .err { color: #b91c1c; font-size: 13px; }
.tl .recovered { color: #92400e; font-size: 13px; }
.tl .legend span { display: inline-block; margin-right: 14px; font-size: 12px; color: #4b5563; }
.tl .sw { display: inline-block; width: 14px; height: 10px; margin-right: 4px; vertical-align: middle; }
.tl .outcome { font-weight: 600; margin-top: 8px; }
.tl .decision { color: #1e3a5f; font-size: 13px; }
.tl .retrying { color: #92400e; font-size: 13px; }
.tl details { font-size: 12px; color: #4b5563; }
.tl details pre { white-space: pre-wrap; word-break: break-word; max-height: 24em; overflow: auto;
  background: #f3f4f6; padding: 6px; }
.tl .tablewrap { overflow-x: auto; }
.tl ul.decisions { margin: 4px 0 8px 18px; padding: 0; }
.tl .chartwrap { overflow-x: auto; }
.tl table.turns td:last-child { overflow-wrap: anywhere; }
@media (max-width: 700px) {
  .tl svg { min-width: 640px; }
  .tl table.turns thead { display: none; }
  .tl table.turns tr { display: block; border-bottom: 1px solid #e5e7eb; padding: 4px 0; }
  .tl table.turns td { display: inline-block; border: none; padding: 2px 6px 2px 0; }
  .tl table.turns td:last-child { display: block; }
}
"""


def render_html(timeline: Timeline) -> str:
    title = escape(f"{timeline.run_id} timeline")
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{title}</title><style>{STYLE}</style></head>"
        f"<body style='margin:24px'>{render_fragment(timeline)}</body></html>\n"
    )


def render_fragment(t: Timeline) -> str:
    parts = [f"<section class=tl id='timeline' data-run='{escape(t.run_id)}' data-source='{t.source}'>"]
    parts.append(f"<h2>{escape(t.run_id)} <small>({escape(t.sku)})</small></h2>")
    parts.append(f"<p class=status data-status>{escape(t.status)}</p>")
    parts.append(f"<p class=facts>{escape(_facts(t))}</p>")
    parts.append(f"<p class=source>from {escape(SOURCES[t.source])}</p>")
    parts += [f"<p class=note>{escape(note)}</p>" for note in t.notes]
    if t.source == "journal" and t.span is not None:
        # It scrolls sideways on a narrow screen: focusable, so a keyboard can scroll it too.
        parts.append(
            f"<div class=chartwrap tabindex=0 role=region aria-label='the run drawn in time'>{render_svg(t)}</div>"
        )
        parts.append(_legend())
    parts.append(_table(t))
    parts.append(_outcome(t))
    parts.append(_decisions(t))
    parts += _security(t)
    parts.append("</section>")
    return "\n".join(parts)


def _security(t: Timeline) -> list[str]:
    """The run's security events: the exact total, what was collapsed or dropped, the latest entries."""
    log = t.security
    if not log.total:
        return []
    tally = security_tally(log)
    head = f"security events: {log.total}" + (f" ({tally})" if tally else "") + "; latest first"
    return [f"<p class=security>{escape(head)}</p>"] + [
        f"<p class=security>security: {escape(security_entry(e))}</p>" for e in log.latest(TIMELINE_SECURITY_SHOWN)
    ]


def _facts(t: Timeline) -> str:
    facts = [f"started {clock(t.started_at)}"]
    if t.started_at is not None:
        end = t.ended_at if t.ended_at is not None else t.now
        verb = "took" if t.ended_at is not None else "running for"
        d = t.day_of(end)
        facts.append(f"{verb} {duration(end - t.started_at)}" + (f" ({d:.1f} days)" if d is not None else ""))
    return " · ".join(facts)


def render_svg(t: Timeline) -> str:
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

    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {height}' width='{WIDTH}' "
        f"height='{height}' role='img' aria-label='timeline of {escape(t.run_id)}'>",
        "<defs><pattern id='hatch' width='6' height='6' patternUnits='userSpaceOnUse' patternTransform='rotate(45)'>"
        "<rect width='6' height='6' fill='#fee2e2'/><line x1='0' y1='0' x2='0' y2='6' stroke='#f87171' "
        "stroke-width='3'/></pattern></defs>",
    ]
    out.append(_axis(t, start, total, chart, bottom))
    for row, turn in enumerate(t.turns):
        out.append(_turn_row(t, turn, TOP + row * ROW, x))
    for band in t.bands:
        b_end = band.end if band.end is not None else t.now
        x0, x1 = x(band.start), x(b_end)
        tip = "service down: " + band_line(band)
        out.append(
            f"<g class='band' data-kind='outage'><title>{escape(tip)}</title>"
            f"<rect x='{x0:.1f}' y='{TOP - 6}' width='{max(x1 - x0, 3):.1f}' height='{height - TOP}' "
            "fill='url(#hatch)' opacity='0.45'/>"
            f"<text {_band_label_at(x0, x1)} y='{height - 4}' style='fill:#b91c1c;font-size:11px'>"
            "service down</text></g>"
        )
    if t.ended_at is None:
        nx = x(t.now)
        out.append(
            f"<g class='now'><line x1='{nx:.1f}' y1='{TOP - 8}' x2='{nx:.1f}' y2='{bottom - 14}' "
            "stroke='#6b7280' stroke-dasharray='3 3'/>"
            f"<text x='{nx - 4:.1f}' y='{bottom - 2}' text-anchor='end'>now</text></g>"
        )
    elif t.outcome is not None:
        ex = x(t.ended_at)
        colour = "#15803d" if t.outcome.outcome == "received" else "#b45309"
        out.append(
            f"<g class='end'><line x1='{ex:.1f}' y1='{TOP - 8}' x2='{ex:.1f}' y2='{bottom - 14}' "
            f"stroke='{colour}' stroke-width='2'/><title>{escape(t.outcome.outcome)}</title></g>"
        )
    out.append("</svg>")
    return "".join(out)


def _band_label_at(x0: float, x1: float) -> str:
    """Where an outage's label goes: from the band's start, or, for a band too near the right
    edge for the words to fit, ending where the band ends (it was cut off at the edge)."""
    if x0 + BAND_LABEL_WIDTH <= WIDTH - RIGHT:
        return f"x='{x0 + 3:.1f}'"
    return f"x='{max(x1, LABEL + BAND_LABEL_WIDTH):.1f}' text-anchor='end'"


def _axis(t: Timeline, start: float, total: float, chart: float, height: int) -> str:
    ticks = day_ticks(total, t.day_seconds) if t.day_seconds and t.started_at is not None else duration_ticks(total)
    return "".join(["<g class='axis'>", *axis_marks(start, total, chart, height, ticks), "</g>"])


def axis_marks(start: float, total: float, chart: float, height: int, ticks: list[tuple[float, str]]) -> list[str]:
    """The time axis's gridlines, at `ticks` (seconds after `start`, label), labelled above the chart."""
    parts = []
    for offset, label in ticks:
        px = LABEL + chart * min(offset / total, 1.0)
        anchor = "start" if offset == 0 else ("end" if px > LABEL + chart - 30 else "middle")
        parts.append(
            f"<line x1='{px:.1f}' y1='{TOP - 12}' x2='{px:.1f}' y2='{height - 14}' stroke='#f3f4f6'/>"
            f"<text x='{px:.1f}' y='{TOP - 16}' text-anchor='{anchor}'>{escape(label)}</text>"
        )
    return parts


def _turn_row(t: Timeline, turn: Turn, y: float, x: Scale) -> str:
    mid = y + ROW / 2
    label = f"{turn.turn:>2}  {turn.tool}"
    shade = "#fafafa" if turn.turn % 2 else "#ffffff"
    parts = row_open(f"data-turn='{turn.turn}' data-tool='{escape(turn.tool)}'", _tip(turn), label, y, shade)
    for s in turn.spans:
        parts.append(_span(s, t.now, mid, x))
    parts.append("</g>")
    return "".join(parts)


def row_open(attrs: str, tip: str, label: str, y: float, shade: str) -> list[str]:
    """A turn's row up to its marks: the group (with its data attributes), tooltip, band and label."""
    mid = y + ROW / 2
    return [
        f"<g class='turn' {attrs}>",
        f"<title>{escape(tip)}</title>",
        f"<rect x='0' y='{y:.1f}' width='{WIDTH}' height='{ROW}' fill='{shade}'/>",
        f"<text x='8' y='{mid + 4:.1f}'>{escape(shorten(label, 30))}</text>",
    ]


def _span(s: Span, now: float, mid: float, x: Scale) -> str:
    x0 = x(s.start)
    x1 = x(s.end if s.end is not None else now)
    w = max(x1 - x0, 3)
    if s.kind == "decision":
        return (
            f"<path d='M{x0:.1f},{mid - 5:.1f} l5,5 l-5,5 l-5,-5 z' fill='#6b7280' class='decision'>"
            "<title>decision</title></path>"
        )
    if s.kind == "delay":
        return (
            f"<line x1='{x0:.1f}' y1='{mid:.1f}' x2='{x0 + w:.1f}' y2='{mid:.1f}' stroke='#9ca3af' "
            "stroke-dasharray='2 3' stroke-width='2' class='delay'/>"
        )
    if s.kind == "step":
        fill = "#dc2626" if s.failed else "#2563eb"
        stroke = " stroke='#f59e0b' stroke-width='2'" if s.retried else ""
        return (
            f"<rect class='step' x='{x0:.1f}' y='{mid - 7:.1f}' width='{w:.1f}' height='14' rx='2' "
            f"fill='{fill}'{stroke}/>"
        )
    ended = "open" if s.end is None else (s.ended_by or "open")
    parts = [
        f"<rect class='wait' data-ended-by='{ended}' x='{x0:.1f}' y='{mid - 6:.1f}' width='{w:.1f}' height='12' "
        "rx='6' fill='#fde68a' stroke='#d97706'/>"
    ]
    end_x = x0 + w
    if ended == "message":
        parts.append(f"<circle cx='{end_x:.1f}' cy='{mid:.1f}' r='5' fill='#16a34a'/>")
    elif ended == "timeout":
        parts.append(f"<path d='M{end_x - 4:.1f},{mid - 4:.1f} l8,8 m0,-8 l-8,8' stroke='#b91c1c' stroke-width='2.5'/>")
    else:
        parts.append(f"<path d='M{end_x - 2:.1f},{mid - 6:.1f} l7,6 l-7,6 z' fill='#d97706'/>")
    return "".join(parts)


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


def _legend() -> str:
    items = [
        ("#2563eb", "step"),
        ("#dc2626", "step failed after retries"),
        ("#fde68a", "wait"),
        ("#16a34a", "ended by a message"),
        ("#b91c1c", "ended by its timeout"),
        ("#fecaca", "service down"),
        ("#6b7280", "decision"),
    ]
    spans = "".join(f"<span><i class=sw style='background:{c}'></i>{escape(label)}</span>" for c, label in items)
    return f"<p class=legend>{spans}<span>orange outline: retried</span></p>"


def _table(t: Timeline) -> str:
    rows = [
        "<div class=tablewrap><table class=turns><thead><tr><th>turn</th><th>when</th><th>tool</th><th>took</th>"
        "<th>what happened</th></tr></thead><tbody>"
    ]
    body: list[tuple[float, int, str]] = []
    for turn in t.turns:
        start, end = turn.start, turn.end
        when = clock(start) if start is not None else "-"
        took = duration((end if end is not None else t.now) - start) if start is not None else "-"
        action = turn.action
        what = escape(turn.summary or ("in progress" if action is not None and action.end is None else "-"))
        if action is not None and action.kind == "wait" and action.ended_by:
            what = f"<b>{'message' if action.ended_by == 'message' else 'timed out'}</b> · " + what
        if turn.decision is not None:
            extra = f"<div class=decision data-decision>decision: {escape(turn.decision.line())}</div>"
        else:
            extra = f"<div class=why>why: {escape(turn.reason)}</div>" if turn.reason else ""
        for s in turn.spans:
            if s.retrying:
                retry = escape(f"{s.name} is being retried: {retry_line(s)}")
                extra += f"<div class=retrying data-retrying>{retry}</div>"
            elif s.errors:
                # Red only when it gave up; a retry that then succeeded is history, drawn amber.
                css = "err" if s.failed or s.end is None else "recovered"
                extra += f"<div class={css}>{escape(retried_line(s))}</div>"
            if s.details:
                extra += _details(s.details)
        row = (
            f"<tr data-turn='{turn.turn}'><td class=num>{turn.turn}</td><td class=num>{escape(when)}</td>"
            f"<td>{escape(turn.tool)}</td><td class=num>{escape(took)}</td><td>{what}{extra}</td></tr>"
        )
        body.append((start if start is not None else float(turn.turn), 1, row))
    for band in t.bands:
        end = band.end if band.end is not None else t.now
        label = "service down" if band.end is not None else "service down now"
        row = (
            f"<tr class=band-row><td class=num>-</td><td class=num>{escape(clock(band.start))}</td>"
            f"<td class=err>{label}</td><td class=num>{escape(duration(end - band.start))}</td>"
            f"<td class=err>{escape(band_line(band))}</td></tr>"
        )
        body.append((band.start, 0, row))
    rows += [row for *_, row in sorted(body, key=lambda r: (r[0], r[1]))]
    rows.append("</tbody></table></div>")
    return "".join(rows)


def _details(texts: list[str]) -> str:
    """Tracebacks stay folded: the one-line error above says what happened."""
    body = "\n\n".join(texts)
    return f"<details><summary>details</summary><pre>{escape(body)}</pre></details>"


def _decisions(t: Timeline) -> str:
    if not t.decisions:
        return ""
    items = "".join(f"<li>round {d.round + 1}: {escape(d.line())}</li>" for d in t.decisions)
    return f"<p class=outcome>decisions</p><ul class=decisions id=decisions>{items}</ul>"


def _outcome(t: Timeline) -> str:
    o = t.outcome
    if o is None:
        if t.waiting is not None:
            until = t.waiting.until(t.now)
            return f"<p class=outcome>now: waiting in {escape(t.waiting.tool)} until {escape(until)}</p>"
        return f"<p class=outcome>now: {escape(t.status)}</p>"
    price = f" at {o.unit_price:.2f}" if o.unit_price is not None else ""
    po = f" · PO {o.po_number} from {o.supplier}" if o.po_number else ""
    text = f"outcome: {o.outcome.upper()} · {received(o.quantity_received, o.quantity_ordered)}{price}{po} · {o.detail}"
    return f"<p class=outcome data-outcome='{escape(o.outcome)}'>{escape(text)}</p>"
