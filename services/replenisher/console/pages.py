"""The console's pages: what each one shows, rendered from the Jinja2 templates in
`console/templates` (autoescaped); the stylesheet and the two small scripts (the inbox's
refresh and countdowns, a running timeline's refresh) are static files in `console/static`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlencode

from pydantic import BaseModel, Field

from replenisher.domain.sku import SkuRecord, run_id_of, split_run_id
from replenisher.operations.audit import AuditDayRead
from replenisher.operations.catalogue import Catalogue, ItemStock
from replenisher.operations.deployments import Overview
from replenisher.operations.inbox import PendingApproval
from replenisher.operations.overview import SkuPage, SkuQuery
from replenisher.operations.restate.health import Health
from replenisher.operations.restate.paused import PausedCall
from replenisher.operations.spend import Period, Spend
from replenisher.templating import environment, render
from replenisher.timeline import html as timeline_html  # noqa: F401  (the timeline fragment's helpers)
from replenisher.timeline.format import clock, duration, fast_time_note, security_tally, until
from replenisher.timeline.model import Timeline


class Visitor(BaseModel):
    """The signed-in person a page is for (None: a console without sign-in, on loopback)."""

    person: str
    name: str
    may_approve: bool
    may_operate: bool = Field(default=False, description="an operator or admin: sees the Deployments page")
    csrf: str = Field(description="the session's token every form this page posts must carry")
    beyond_limit: dict[str, str] = Field(
        default_factory=dict, description="PO number -> why this person may not approve it, and who may"
    )


def page(
    template: str,
    title: str,
    here: str = "",
    flash: tuple[str, str] | None = None,
    *,
    service_down: Health | None = None,
    visitor: Visitor | None = None,
    **context: Any,
) -> str:
    """A whole console page: the template's body in the frame every page shares, under the
    banner that says the service is down when `service_down` is given, for `visitor`."""
    return render(template, title=title, here=here, flash=flash, service_down=service_down, visitor=visitor, **context)


class InboxSettings(BaseModel):
    """How the inbox shows money: the currency label, the manager's budget, and the total above
    which an approval asks to be confirmed."""

    currency: str = "USD"
    budget: float | None = Field(default=None, description="the highest unit price the manager's policy approves")
    confirm_above: float = 1000.0
    catalogue: Catalogue = Field(default_factory=Catalogue, description="the ERP's stock now and supplier names")

    def money(self, amount: float) -> str:
        return f"{amount:,.2f} {self.currency}"


def inbox(
    pending: list[PendingApproval],
    now: float,
    flash: tuple[str, str] | None = None,
    settings: InboxSettings | None = None,
    *,
    service_down: Health | None = None,
    visitor: Visitor | None = None,
) -> str:
    fast_time = next((n for p in pending if (n := fast_time_note(p.calendar))), "")
    context = _inbox_context(pending, now, settings, visitor)
    return page(
        "inbox.html", "Approval inbox", "inbox", flash, service_down=service_down, fast_time=fast_time, **context
    )


def inbox_fragment(
    pending: list[PendingApproval], now: float, settings: InboxSettings | None = None, visitor: Visitor | None = None
) -> str:
    return render("inbox_fragment.html", **_inbox_context(pending, now, settings, visitor))


def _inbox_context(
    pending: list[PendingApproval], now: float, settings: InboxSettings | None, visitor: Visitor | None
) -> dict[str, Any]:
    """The inbox's requests for `visitor`: the inbox itself puts them in the page's frame (with
    `visitor` too); the fragment, refreshed on its own, needs it for its decision forms."""
    ordered = sorted(pending, key=lambda p: (p.decide_by, p.requested_at))
    return {"pending": ordered, "now": now, "settings": settings or InboxSettings(), "visitor": visitor}


def request_card(p: PendingApproval, now: float, settings: InboxSettings, visitor: Visitor | None = None) -> str:
    return render("request_card.html", p=p, now=now, settings=settings, visitor=visitor)


def asked_line(p: PendingApproval) -> str:
    """Who decides now, whether it was escalated to them, and the reminders sent."""
    who = f"escalated to {p.approver}" if p.escalated else f"asked: {p.approver}"
    reminded = f" · reminded at {', '.join(f'{round(x * 100)}%' for x in p.reminded)}" if p.reminded else ""
    return who + reminded


def countdown(seconds: float) -> str:
    if seconds <= 0:
        return "deadline passed"
    days, rest = divmod(int(seconds), 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h left"
    if hours:
        return f"{hours}h {minutes}m left"
    return f"{minutes}m {secs:02d}s left"


def cover_text(item: ItemStock) -> str:
    cover = item.days_of_cover
    if cover is None:
        return "no consumption recorded"
    return f"{cover:.1f} days of cover at {item.daily_consumption:g}/day"


def confirm_page(
    p: PendingApproval,
    up_to: float,
    note: str,
    settings: InboxSettings,
    *,
    service_down: Health | None = None,
    visitor: Visitor | None = None,
) -> str:
    """The second step of an approval above the confirmation amount: the same form, confirmed."""
    return page(
        "confirm.html",
        "Confirm approval",
        "inbox",
        service_down=service_down,
        visitor=visitor,
        p=p,
        up_to=up_to,
        note=note,
        settings=settings,
    )


SORTS = (
    ("sku", "SKU"),
    ("stock", "stock vs safety"),
    ("cover", "days of cover"),
    ("waiting", "longest wait"),
    ("outcome", "last outcome"),
)
WAITS = (
    ("any", "anyone or no one"),
    ("manager", "the manager"),
    ("supplier", "a supplier"),
    ("someone", "anyone"),
    ("nobody", "no one"),
)
FLAGS = (
    ("all", "all SKUs"),
    ("below-safety", "below safety stock"),
    ("over-budget", "over budget"),
    ("failing", "failing"),
)
WAITED_FOR = {"wait_for_approval": "approval", "wait_for_supplier_reply": "reply", "wait_for_goods": "goods"}


def query_href(path: str, query: BaseModel, **changes: str) -> str:
    """The page's URL with these parameters changed, leaving out those at their defaults."""
    # Read back through the model, so a changed value compares with its default as the same type.
    values = type(query).model_validate({**query.model_dump(), **changes}).model_dump()
    defaults = type(query)().model_dump()
    kept = {k: v for k, v in values.items() if v != defaults.get(k)}
    return path + ("?" + urlencode(kept) if kept else "")


def clip(text: str, limit: int = 140) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def paused_detail(paused: Sequence[PausedCall]) -> str:
    """After the paused handler's name: since when, its error code, and how many more are paused."""
    first = paused[0]
    since = f" since {clock(first.since)}" if first.since is not None else ""
    code = f" ({first.code})" if first.code else ""
    more = f" and {len(paused) - 1} more" if len(paused) > 1 else ""
    return since + code + more


def skus(
    found: SkuPage,
    query: SkuQuery,
    now: float,
    budget: float | None,
    catalogue: Catalogue,
    *,
    service_down: Health | None = None,
    visitor: Visitor | None = None,
) -> str:
    n = found.counts
    chips = (
        ("all", n["all"], "/skus", query == SkuQuery()),
        *(
            (text, n[chip], query_href("/skus", SkuQuery(), **{kind: chip}, **extra), getattr(query, kind) == chip)
            for text, kind, chip, extra in (
                ("waiting on the manager", "waiting", "manager", {}),
                ("waiting on a supplier", "waiting", "supplier", {}),
                ("below safety", "flag", "below-safety", {"sort": "stock"}),
                ("over budget", "flag", "over-budget", {}),
                ("failing", "flag", "failing", {}),
            )
        ),
    )
    shown = f"{found.matching} of {found.total}" if found.matching != found.total else f"{found.total}"
    return page(
        "skus.html",
        "SKUs",
        "skus",
        service_down=service_down,
        visitor=visitor,
        rows=found.rows,
        found=found,
        default_per_page=SkuQuery().per_page,
        shown=shown,
        query=query,
        now=now,
        budget=budget,
        catalogue=catalogue,
        chips=chips,
        sorts=SORTS,
        waits=WAITS,
        flags=FLAGS,
    )


def sku_detail(
    record: SkuRecord,
    timeline: Timeline | None,
    fragment_url: str | None,
    paused: Sequence[PausedCall] = (),
    catalogue: Catalogue | None = None,
    *,
    service_down: Health | None = None,
    visitor: Visitor | None = None,
) -> str:
    outcomes = {o.run_id: o for o in record.outcomes}
    runs = []
    for n in range(record.runs_started, 0, -1):
        run_id = run_id_of(record.sku, n)
        o = outcomes.get(run_id)
        status = (
            "running"
            if record.active and record.active.run_id == run_id
            else (f"{o.outcome}: {o.detail}" if o else "(older than the kept outcomes)")
        )
        runs.append((run_id, status))
    by_outcome = ", ".join(f"{k} {v}" for k, v in sorted(record.stats.by_outcome.items())) or "none yet"
    return page(
        "sku.html",
        record.sku,
        "skus",
        service_down=service_down,
        visitor=visitor,
        record=record,
        runs=runs,
        by_outcome=by_outcome,
        paused=paused,
        catalogue=catalogue,
        **_timeline_context(timeline, fragment_url),
    )


def run_page(
    timeline: Timeline,
    fragment_url: str,
    flash: tuple[str, str] | None = None,
    *,
    service_down: Health | None = None,
    visitor: Visitor | None = None,
) -> str:
    context = _timeline_context(timeline, fragment_url)
    return page("run.html", timeline.run_id, "skus", flash, service_down=service_down, visitor=visitor, **context)


def timeline_block(timeline: Timeline, fragment_url: str) -> str:
    """The timeline fragment, tagged so the page script can refresh it while the run goes on."""
    return render("timeline_fragment.html", **_timeline_context(timeline, fragment_url))


def _timeline_context(timeline: Timeline | None, fragment_url: str | None) -> dict[str, Any]:
    finished = timeline is not None and settled(timeline)
    return {"timeline": timeline, "fragment_url": fragment_url, "finished": "true" if finished else "false"}


SETTLE_SECONDS = 60.0


def settled(timeline: Timeline) -> bool:
    """Nothing more will change: the SKU's record holds the outcome. A run's invocation completes
    a moment before its SKU records the outcome, so a completed run without one is refreshed a
    while longer rather than frozen without its outcome."""
    if timeline.outcome is not None:
        return True
    inv = timeline.invocation
    done_at = inv.completed_at if inv is not None and inv.status == "completed" else None
    return done_at is not None and timeline.now - done_at > SETTLE_SECONDS


def run_href(run_id: str) -> str:
    sku, number = split_run_id(run_id)
    return f"/skus/{sku}/runs/{number}"


def run_number(run_id: str) -> str:
    """The run's number within its SKU, as the pages name a run ("run 3")."""
    return split_run_id(run_id)[1]


def down_banner(service_down: Health | None) -> str:
    return render("down_banner.html", service_down=service_down)


def utc_time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")


def tokens_page(
    made: str | None,
    can_make: bool,
    flash: tuple[str, str] | None,
    *,
    service_down: Health | None = None,
    visitor: Visitor | None = None,
) -> str:
    """Making a personal token for the CLI; `made`, the one just made, is shown this once."""
    return page(
        "tokens.html", "Personal tokens", "tokens", flash, service_down=service_down, visitor=visitor,
        made=made, can_make=can_make,
    )  # fmt: skip


def audit_page(
    read: AuditDayRead, day: date, *, service_down: Health | None = None, visitor: Visitor | None = None
) -> str:
    """A day of the audit log: newest first, each entry with who, from where and why."""
    return page(
        "audit.html",
        f"Audit {day.isoformat()}",
        "audit",
        service_down=service_down,
        visitor=visitor,
        read=read,
        entries=list(reversed(read.entries)),
        day=day,
        before=(day - timedelta(days=1)).isoformat(),
        after=(day + timedelta(days=1)).isoformat(),
    )


def deployments_page(found: Overview, *, service_down: Health | None = None, visitor: Visitor | None = None) -> str:
    """Each registered deployment: its code version, what is in flight on it, drained, safe to remove."""
    return page(
        "deployments.html",
        "Deployments",
        "deployments",
        service_down=service_down,
        visitor=visitor,
        found=found,
        drained=sum(d.drained for d in found.deployments),
        safe=sum(d.safe_to_remove for d in found.deployments),
    )


def error_page(status: int, message: str, *, service_down: Health | None = None, visitor: Visitor | None = None) -> str:
    return page("error.html", f"{status}", service_down=service_down, visitor=visitor, status=status, message=message)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least `value` (> 0): the top of
    an axis whose halves are round figures too."""
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value * (1 - 1e-9))


def short_amount(value: float) -> str:
    """An axis label: 2500 -> '2.5k', 1200000 -> '1.2M'."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


class DateLabel(BaseModel):
    """A period's date under the chart, and the year under it where the year starts or changes."""

    x: float
    anchor: Literal["middle", "end"]
    minor: bool = Field(description="left out on a narrow screen, where the chart is small")
    year: int | None = None


class Bar(BaseModel):
    """One period's bars: heights in the chart's units, x where the received bar starts."""

    period: Period
    x: float
    ordered: float
    committed: float
    received: float
    label: DateLabel | None = None


class SpendChart(BaseModel):
    """The spend chart's geometry: ordered and received per period as bars, the still-committed
    part of what was ordered drawn lighter on top of it, on an axis of amounts."""

    width: int = 640
    height: int = 210
    left: int = 58
    base: int
    top: float
    bar: float
    grid: list[tuple[float, str]]
    bars: list[Bar]


def spend_chart(s: Spend) -> SpendChart:
    periods = s.periods
    top = nice_ceiling(max([max(p.ordered, p.received) for p in periods] + [1.0]))
    width, height, left, bottom, pad = 640, 210, 58, 52, 14
    base = height - bottom
    scale = (base - pad) / top
    slot = (width - left) / len(periods)
    bar = max(min(slot * 0.36, 26), 2)
    grid = [(base - tick * scale, short_amount(tick)) for tick in (top / 2, top)]  # the baseline is zero
    bars = []
    year = None
    every = max(len(periods) // 7, 1)
    for i, p in enumerate(periods):
        x = left + i * slot + slot / 2
        label = None
        back = len(periods) - 1 - i
        if back % every == 0:  # counted back from the current period, which always has its label
            anchor: Literal["middle", "end"] = "end" if back == 0 else "middle"  # the last ends at the chart's edge
            label = DateLabel(x=x + bar if anchor == "end" else x, anchor=anchor, minor=back % (every * 2) != 0)
            if p.start.year != year:  # a row below: the year, under its first label and where it changes
                year = label.year = p.start.year
        heights = {"ordered": p.ordered * scale, "committed": p.committed * scale, "received": p.received * scale}
        bars.append(Bar(period=p, x=x, label=label, **heights))
    return SpendChart(base=base, top=top, bar=bar, grid=grid, bars=bars)


SPEND_CHIPS = (("day", 14, "14 days"), ("day", 30, "30 days"), ("week", 8, "8 weeks"), ("week", 26, "26 weeks"))


def spend_page(
    s: Spend, settings: InboxSettings, *, service_down: Health | None = None, visitor: Visitor | None = None
) -> str:
    q = s.query
    chips = [
        (label, query_href("/spend", q, by=by, periods=str(n)), q.by == by and q.periods == n)
        for by, n, label in SPEND_CHIPS
    ]
    names = settings.catalogue
    suppliers = sorted(set(names.supplier_names) | {x.supplier for x in s.suppliers} | ({q.supplier} - {""}))
    total = Period(label="total", start=s.periods[0].start)
    for p in s.periods:
        total.ordered += p.ordered
        total.committed += p.committed
        total.received += p.received
    spent = [p for p in reversed(s.periods) if p.ordered or p.received or p.committed]
    return page(
        "spend.html",
        "Spend",
        "spend",
        service_down=service_down,
        visitor=visitor,
        s=s,
        q=q,
        chips=chips,
        names=names,
        suppliers=suppliers,
        total=total,
        spent_periods=spent,
        chart=spend_chart(s),
        money=settings.money,
        currency=settings.currency,
    )


environment.globals.update(
    asked_line=asked_line,
    clip=clip,
    clock=clock,
    countdown=countdown,
    cover_text=cover_text,
    duration=duration,
    paused_detail=paused_detail,
    query_href=query_href,
    run_href=run_href,
    run_number=run_number,
    security_tally=security_tally,
    until=until,
    utc_time=utc_time,
    waited_for=lambda tool: WAITED_FOR.get(tool, tool),
)
