"""The console's pages: server-rendered HTML, one small script that refreshes a running timeline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextvars import ContextVar
from html import escape
from urllib.parse import urlencode

from pydantic import BaseModel, Field

from replenisher.console.catalogue import Catalogue, ItemStock
from replenisher.console.inbox import PendingApproval
from replenisher.console.overview import SkuQuery, SkuRow
from replenisher.console.spend import Period, Spend
from replenisher.domain.security_log import SecurityEntry
from replenisher.domain.sku import SkuRecord, run_id_of, split_run_id
from replenisher.timeline.format import clock, duration, fast_time_note, security_tally, until
from replenisher.timeline.html import STYLE as TIMELINE_STYLE
from replenisher.timeline.html import render_fragment
from replenisher.timeline.model import Timeline
from replenisher.timeline.restate import Health, PausedCall

SERVICE_DOWN: ContextVar[Health | None] = ContextVar("service_down", default=None)

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111827; margin: 0; }
body { background: #f9fafb; }
body > header { background: #1e3a5f; color: #fff; padding: 10px 24px; display: flex; gap: 24px; align-items: baseline; }
body > header b { font-size: 17px; }
body > header a { color: #dbeafe; text-decoration: none; }
body > header a.here { color: #fff; font-weight: 600; border-bottom: 2px solid #93c5fd; }
main { padding: 18px 24px; max-width: 1280px; }
article.req { background: #fff; box-shadow: 0 1px 2px #0001; padding: 12px 16px; margin-bottom: 14px; }
article.req header { display: flex; flex-wrap: wrap; gap: 6px 10px; align-items: baseline; }
article.req h2 { font-size: 17px; margin: 0; }
article.req h3 { font-size: 12px; text-transform: uppercase; color: #4b5563; margin: 8px 0 2px; }
article.req p { margin: 2px 0; }
.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(230px, 1fr)); gap: 4px 18px; }
.countdown { font-weight: 600; color: #1e3a5f; }
.countdown.urgent { color: #b91c1c; }
.tag.over, .tag.expired { background: #fee2e2; color: #991b1b; }
table.mini { border-collapse: collapse; font-size: 13px; }
table.mini th, table.mini td { padding: 2px 8px 2px 0; text-align: left; }
table.mini th { color: #4b5563; font-weight: 600; }
table.mini tr.chosen td { font-weight: 600; }
ul.past { margin: 0; padding-left: 18px; font-size: 14px; }
form.decide label { font-size: 13px; color: #374151; }
.confirm { font-size: 16px; }
h1 { font-size: 20px; margin: 4px 0 12px; }
table.list { border-collapse: collapse; width: 100%; background: #fff; box-shadow: 0 1px 2px #0001; }
table.list th, table.list td { text-align: left; padding: 8px 10px; border-bottom: 1px solid #e5e7eb; }
table.list td { vertical-align: top; }
table.list th { font-size: 12px; text-transform: uppercase; color: #374151; background: #f3f4f6; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
td.num.when { white-space: normal; }
td.when span { white-space: nowrap; }
td.id { white-space: nowrap; }
.scroll { overflow-x: auto; }
.muted { color: #4b5563; font-size: 13px; }
.flash { padding: 8px 12px; margin: 0 0 14px; border-radius: 4px; overflow-wrap: anywhere; }
.flash.ok { background: #dcfce7; border: 1px solid #86efac; }
.flash.error { background: #fee2e2; border: 1px solid #fca5a5; }
.flash.note { background: #e0e7ff; border: 1px solid #a5b4fc; }
form.decide { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
form.decide input[type=number] { width: 90px; padding: 4px; }
form.decide input[type=text] { width: 160px; padding: 4px; }
button { padding: 5px 12px; border-radius: 4px; border: 1px solid #9ca3af; background: #fff; cursor: pointer; }
button.approve { background: #15803d; border-color: #166534; color: #fff; }
button.reject { background: #fff; border-color: #b91c1c; color: #b91c1c; }
.tag { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px; background: #e5e7eb; }
.tag.approval { background: #fef3c7; color: #92400e; }
.tag.retrying, .tag.stopped { background: #fee2e2; color: #991b1b; }
.tag.received { background: #dcfce7; color: #166534; }
.warn { color: #b45309; }
.card { background: #fff; padding: 14px 18px; box-shadow: 0 1px 2px #0001; margin-bottom: 14px; }
body > header { flex-wrap: wrap; }
body > header nav { display: flex; flex-wrap: wrap; gap: 6px 20px; }
h2 { font-size: 17px; margin: 18px 0 8px; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
nav.chips { display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 10px; }
a.chip { padding: 3px 10px; border-radius: 12px; background: #fff; border: 1px solid #9ca3af; color: #1e3a5f;
  text-decoration: none; font-size: 14px; }
a.chip.here { background: #1e3a5f; color: #fff; border-color: #1e3a5f; }
form.filters { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: end; margin: 0 0 12px; }
form.filters label { display: flex; flex-direction: column; font-size: 13px; color: #374151; }
form.filters input, form.filters select { padding: 4px; font: inherit; min-width: 0; }
table.list th a { color: inherit; }
.bar { position: relative; height: 6px; background: #e5e7eb; border-radius: 3px; margin-top: 3px; max-width: 180px; }
.bar i { position: absolute; left: 0; top: 0; bottom: 0; background: #2563eb; border-radius: 3px; }
.bar.low i { background: #b91c1c; }
.bar s { position: absolute; top: -2px; bottom: -2px; width: 2px; background: #111827; }
.low { color: #b91c1c; font-weight: 600; }
.why { overflow-wrap: anywhere; max-width: 420px; }
#skus td:nth-child(2) { min-width: 150px; }
#skus td:nth-child(4) { min-width: 230px; }
svg.chart { max-width: 900px; display: block; }
.tag.wait { background: #e0e7ff; color: #3730a3; }
.tag.cancelled, .tag.gave_up, .tag.unknown { background: #fee2e2; color: #991b1b; }
.tag.rejected { background: #f3f4f6; color: #374151; }
svg.chart { width: 100%; height: auto; max-height: 240px; }
svg.chart rect.ordered, .key.ordered { fill: #1e3a5f; background: #1e3a5f; }
svg.chart rect.committed, .key.committed { fill: #93c5fd; background: #93c5fd; }
svg.chart rect.received, .key.received { fill: #15803d; background: #15803d; }
svg.chart text { font-size: 11px; fill: #374151; }
svg.chart .axis { stroke: #9ca3af; }
svg.chart .grid { stroke: #e5e7eb; }
svg.chart text.year { font-weight: 600; }
.legend .item { white-space: nowrap; }
.key { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 10px; }
p.summary { font-size: 16px; }
tfoot th, tfoot td { font-weight: 600; }
@media (max-width: 640px) {
  body > header { padding: 8px 12px; gap: 4px 16px; }
  main { padding: 12px; }
  table.cards, table.cards tbody, table.cards tfoot, table.cards tr, table.cards td, table.cards th {
    display: block; width: auto; }
  table.cards thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.cards tr { border-bottom: 1px solid #d1d5db; padding: 6px 0; }
  table.cards td, table.cards th { border: 0; padding: 2px 10px; }
  table.cards td[data-label]::before { content: attr(data-label) ": "; font-size: 12px; color: #4b5563; }
  .why { max-width: none; }
  table.cards td.id { white-space: normal; overflow-wrap: anywhere; }
  form.decide input[type=text] { width: 100%; }
  form.decide label { flex-basis: 100%; }
  svg.chart text { font-size: 22px; }
  svg.chart text.minor { display: none; }
}
"""

REFRESH_SCRIPT = """
<script>
(function () {
  const section = () => document.getElementById('timeline');
  async function refresh() {
    const s = section();
    if (!s || s.dataset.finished === 'true') return;
    try {
      const r = await fetch(s.dataset.fragment, {cache: 'no-store'});
      if (r.ok) { s.outerHTML = await r.text(); }
    } catch (e) { /* the next tick tries again */ }
    setTimeout(refresh, 1500);
  }
  setTimeout(refresh, 1500);
})();
</script>
"""


def page(title: str, body: str, here: str = "", flash: tuple[str, str] | None = None) -> str:
    nav = "".join(
        f"<a href='{href}' class='{'here' if key == here else ''}'>{label}</a>"
        for key, href, label in (
            ("inbox", "/inbox", "Approval inbox"),
            ("skus", "/skus", "SKUs"),
            ("spend", "/spend", "Spend"),
        )
    )
    message = f"<p class='flash {flash[0]}' role=status>{escape(flash[1])}</p>" if flash else ""
    message = down_banner() + message
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)} · Stock Replenisher</title><style>{STYLE}{TIMELINE_STYLE}</style></head>"
        f"<body><header><b>Stock Replenisher</b><nav aria-label=Pages>{nav}</nav></header>"
        f"<main>{message}{body}</main></body></html>\n"
    )


INBOX_SCRIPT = """
<script>
(function () {
  // New requests appear by themselves; never while the manager is filling in a decision.
  const live = () => document.getElementById('inbox-live');
  let touched = false;
  document.addEventListener('input', () => { touched = true; });
  document.addEventListener('focusin', (e) => { if (e.target.closest('form')) touched = true; });
  async function refresh() {
    const box = live();
    if (box && !touched) {
      try {
        const r = await fetch(box.dataset.fragment, {cache: 'no-store'});
        if (r.ok) { box.innerHTML = await r.text(); }
      } catch (e) { /* the next tick tries again */ }
    }
    setTimeout(refresh, 5000);
  }
  setTimeout(refresh, 5000);
  // The countdowns tick in the page: no request to the server for that.
  function left(s) {
    if (s <= 0) return 'deadline passed';
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    const sec = Math.floor(s % 60);
    if (d) return d + 'd ' + h + 'h left';
    if (h) return h + 'h ' + m + 'm left';
    return m + 'm ' + String(sec).padStart(2, '0') + 's left';
  }
  setInterval(() => {
    for (const el of document.querySelectorAll('.countdown[data-until]')) {
      const s = Number(el.dataset.until) - Date.now() / 1000;
      el.textContent = left(s);
      el.classList.toggle('urgent', s < 3600);
    }
  }, 1000);
})();
</script>
"""


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
) -> str:
    fast_time = next((n for p in pending if (n := fast_time_note(p.calendar))), "")
    body = (
        "<div id=inbox-live data-fragment='/inbox/fragment' aria-live=polite>"
        + inbox_fragment(pending, now, settings)
        + "</div><p class=muted>A decision resolves the run's durable promise: the run continues at once. "
        "Undecided at its deadline, a request goes to the backup approver if one is set and has not had it; "
        "else the run cancels the PO (fails closed).</p>"
        + (f"<p class=muted id=fast-time>{escape(fast_time)}</p>" if fast_time else "")
        + INBOX_SCRIPT
    )
    return page("Approval inbox", body, "inbox", flash)


def asked(p: PendingApproval) -> str:
    """Who decides now, whether it was escalated to them, and the reminders sent."""
    who = f"escalated to {p.approver}" if p.escalated else f"asked: {p.approver}"
    reminded = f" · reminded at {', '.join(f'{round(x * 100)}%' for x in p.reminded)}" if p.reminded else ""
    return f"<span class=muted>{escape(who + reminded)}</span>"


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


def inbox_fragment(pending: list[PendingApproval], now: float, settings: InboxSettings | None = None) -> str:
    settings = settings or InboxSettings()
    if not pending:
        return "<h1>Approval inbox</h1><p class=muted id=empty>Nothing waits for your approval.</p>"
    cards = [request_card(p, now, settings) for p in sorted(pending, key=lambda p: (p.decide_by, p.requested_at))]
    return (
        f"<h1>Approval inbox <span class=tag>{len(pending)}</span> "
        "<span class=muted>nearest deadline first</span></h1>"
        "<div id=inbox>" + "".join(cards) + "</div>"
    )


def request_card(p: PendingApproval, now: float, settings: InboxSettings) -> str:
    expired = p.quote_expired(now)
    over = settings.budget is not None and p.unit_price > settings.budget
    flags = []
    if over and settings.budget is not None:
        flags.append(f"<span class='tag over' data-flag=over-budget>over budget ({settings.budget:.2f})</span>")
    if expired:
        flags.append("<span class='tag expired' data-flag=quote-expired>quote expired</span>")
    if not p.waiting:
        flags.append("<span class=tag>run not waiting yet</span>")
    po = escape(p.po_number)
    left = p.decide_by - now
    urgent = " urgent" if left < 3600 else ""
    head = (
        f"<header><h2>{po}</h2> <a href='/skus/{escape(p.sku)}'>{escape(p.sku)}</a> · "
        f"{escape(settings.catalogue.supplier(p.supplier))} "
        f"{''.join(flags)}<span class='countdown{urgent}' data-until='{p.decide_by:.0f}'>"
        f"{escape(countdown(left))}</span> <span class=muted>decide by {escape(until(p.decide_by, p.calendar, now))}"
        f"</span>{quote_countdown(p, now)} {asked(p)}</header>"
    )
    terms = (
        "<section><h3>Terms</h3>"
        f"<p class=num>{p.quantity} x {escape(settings.money(p.unit_price))} = "
        f"<b>{escape(settings.money(p.total))}</b></p>"
        f"<p class=muted>quote {escape(p.quote_id)}, valid until {escape(clock(p.quote_valid_until))}; "
        f"asked {escape(duration(p.age(now)))} ago · <a href='{run_href(p.run_id)}'>{escape(p.run_id)}</a></p>"
        "</section>"
    )
    stock = f"<section><h3>Stock</h3>{stock_facts(p, settings.catalogue.items.get(p.sku))}</section>"
    quotes = "".join(
        f"<tr{' class=chosen' if q.quote_id == p.quote_id else ''}>"
        f"<td>{escape(settings.catalogue.supplier(q.supplier))}</td>"
        f"<td class=num>{q.unit_price:.2f}</td><td class=num>{q.lead_days:g} d</td>"
        f"<td class='num when'>{valid_until_cell(q.valid_until)}</td></tr>"
        for q in p.quotes
    )
    quote_table = (
        "<section><h3>Quotes this round</h3><table class=mini><thead><tr><th>supplier</th><th>unit price</th>"
        f"<th>lead</th><th>valid until</th></tr></thead><tbody>{quotes}</tbody></table></section>"
        if quotes
        else ""
    )
    past = "".join(
        f"<li><a href='{run_href(d.run_id)}'>run {escape(d.run_id.rsplit('-', 1)[-1])}</a>: "
        f"<span class='tag {escape(d.outcome)}'>{escape(d.outcome)}</span>"
        + (f" at {d.unit_price:.2f}" if d.unit_price is not None else "")
        + f" · {escape(d.detail)}"
        + (f"<div class=muted>{escape(d.decision)}</div>" if d.decision else "")
        + "</li>"
        for d in p.past
    )
    earlier = f"<section><h3>Earlier on {escape(p.sku)}</h3><ul class=past>{past}</ul></section>" if past else ""
    return (
        f"<article class=req data-po='{po}' data-sku='{escape(p.sku)}'>{head}"
        f"<div class=facts>{terms}{stock}{quote_table}{earlier}</div>{decision_form(p, now, settings)}</article>"
    )


def valid_until_cell(t: float) -> str:
    """A date and a time that wrap between them in a narrow column, never inside either."""
    day, time_of_day = clock(t)[:16].split(" ")
    return f"<span>{escape(day)}</span> <span>{escape(time_of_day)} UTC</span>"


def quote_countdown(p: PendingApproval, now: float) -> str:
    """When the quote runs out before the decision is due, that is the deadline that counts:
    an approval after it orders nothing (the run re-quotes)."""
    if p.quote_expired(now) or p.quote_valid_until >= p.decide_by:
        return ""
    left = p.quote_valid_until - now
    urgent = " urgent" if left < 3600 else ""
    return (
        f" <span class=muted>· its quote:</span> <span class='countdown{urgent}' data-quote-until "
        f"data-until='{p.quote_valid_until:.0f}'>{escape(countdown(left))}</span>"
    )


def cover_text(item: ItemStock) -> str:
    cover = item.days_of_cover
    if cover is None:
        return "no consumption recorded"
    return f"{cover:.1f} days of cover at {item.daily_consumption:g}/day"


def stock_facts(p: PendingApproval, item: ItemStock | None) -> str:
    """Stock when the run asked, and now by the ERP with its days of cover."""
    if p.on_hand is None and item is None:
        return "<p class=muted>not recorded</p>"
    parts = []
    if p.on_hand is not None:
        parts.append(f"<p>on hand <b>{p.on_hand}</b> · safety {p.safety_stock} · target {p.target_stock}</p>")
    if item is not None:
        short = " class=warn" if item.below_safety else ""
        parts.append(f"<p data-cover><span{short}>now {item.on_hand}</span> · <b>{escape(cover_text(item))}</b></p>")
    return "".join(parts)


def decision_form(p: PendingApproval, now: float, settings: InboxSettings | None = None) -> str:
    settings = settings or InboxSettings()
    po = escape(p.po_number)
    hidden = "".join(
        f"<input type=hidden name={name} value='{escape(value)}'>"
        for name, value in (("sku", p.sku), ("run_id", p.run_id), ("token", p.token))
    )
    ident = escape(p.po_number.replace(" ", "-"))
    note = (
        f"<label for='note-{ident}'>note</label>"
        f"<input type=text id='note-{ident}' name=note placeholder='optional' maxlength=500>"
    )
    reject = f"<button class=reject name=decision value=reject formnovalidate aria-label='Reject {po}'>Reject</button>"
    if p.quote_expired(now) and not p.requote_left:
        return (
            f"<form class=decide method=post action='/approvals'>{hidden}"
            f"<p class=warn>The quote expired at {escape(clock(p.quote_valid_until))}, on the run's last approval "
            "round: nothing can be ordered on it, and the run cannot ask the suppliers again. "
            f"<b>Reject</b> ends this replenishment now.</p>{note}{reject}</form>"
        )
    if p.quote_expired(now):
        fresh = (
            f"<input type=hidden name=up_to value='{p.unit_price:.2f}'>"
            f"<button class=approve name=decision value=approve aria-label='Get fresh quotes for {po}'>"
            "Get fresh quotes</button>"
        )
        return (
            f"<form class=decide method=post action='/approvals'>{hidden}"
            f"<p class=warn>The quote expired at {escape(clock(p.quote_valid_until))}: nothing can be ordered on it. "
            "<b>Get fresh quotes</b> has the run ask the suppliers again and bring you a new request; "
            f"<b>Reject</b> ends this replenishment.</p>{note}{fresh}{reject}</form>"
        )
    return (
        f"<form class=decide method=post action='/approvals'>{hidden}"
        f"<label for='up-{ident}'>approve up to ({escape(settings.currency)} per unit)</label>"
        f"<input type=number id='up-{ident}' name=up_to step=0.01 min='{p.unit_price:.2f}' "
        f"value='{p.unit_price:.2f}'>{note}"
        f"<button class=approve name=decision value=approve aria-label='Approve {po}'>Approve</button>{reject}</form>"
    )


def confirm_page(p: PendingApproval, up_to: float, note: str, settings: InboxSettings) -> str:
    """The second step of an approval above the confirmation amount: the same form, confirmed."""
    fields = (("sku", p.sku), ("run_id", p.run_id), ("token", p.token), ("up_to", f"{up_to:.2f}"), ("note", note))
    hidden = "".join(f"<input type=hidden name={n} value='{escape(v)}'>" for n, v in fields)
    body = (
        f"<h1>Confirm the approval of {escape(p.po_number)}</h1><div class='card confirm' id=confirm>"
        f"<p>{p.quantity} x up to {escape(settings.money(up_to))} = at most "
        f"<b>{escape(settings.money(p.quantity * up_to))}</b> to {escape(settings.catalogue.supplier(p.supplier))} "
        f"for {escape(p.sku)} "
        f"(asked {escape(settings.money(p.unit_price))} per unit).</p>"
        f"<p class=muted>Approvals above {escape(settings.money(settings.confirm_above))} are confirmed in a "
        "second step.</p>"
        f"<form method=post action='/approvals'>{hidden}<input type=hidden name=confirmed value=yes>"
        f"<button class=approve name=decision value=approve>Confirm: approve {escape(p.po_number)}</button> "
        "<a href='/inbox'>back to the inbox</a></form></div>"
    )
    return page("Confirm approval", body, "inbox")


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


def query_href(path: str, query: BaseModel, **changes: str) -> str:
    """The page's URL with these parameters changed, leaving out those at their defaults."""
    values = {**query.model_dump(), **changes}
    defaults = type(query)().model_dump()
    kept = {k: v for k, v in values.items() if v != defaults.get(k)}
    return path + ("?" + urlencode(kept) if kept else "")


def _select(name: str, label: str, options: tuple[tuple[str, str], ...], current: str) -> str:
    opts = "".join(
        f"<option value='{v}'{' selected' if v == current else ''}>{escape(text)}</option>" for v, text in options
    )
    return f"<label>{escape(label)} <select name={name}>{opts}</select></label>"


def stock_cell(item: ItemStock | None) -> str:
    if item is None:
        return "<span class=muted>not in the ERP</span>"
    full = max(item.target_stock, item.on_hand, 1)
    level = min(item.on_hand / full * 100, 100)
    safety = item.safety_stock / full * 100
    low = " low" if item.below_safety else ""
    return (
        f"<span class='num{low}'>{item.on_hand}</span> <span class=muted>/ {item.safety_stock} safety / "
        f"{item.target_stock} target</span>"
        f"<div class='bar{low}' aria-hidden=true><i style='width:{level:.0f}%'></i>"
        f"<s style='left:{safety:.0f}%'></s></div>"
    )


def _clip(text: str, limit: int = 140) -> str:
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


def sku_state(r: SkuRow, now: float, budget: float | None, catalogue: Catalogue) -> str:
    parts = []
    if r.paused:
        first = r.paused[0]
        since = f" since {clock(first.since)}" if first.since is not None else ""
        code = f" ({first.code})" if first.code else ""
        more = f" and {len(r.paused) - 1} more" if len(r.paused) > 1 else ""
        parts.append(
            f"<div data-flag=stopped><span class='tag stopped'>stopped</span> "
            f"<span class=why>Restate paused {escape(first.handler)}{escape(since + code + more)}</span>"
            f"<div class=muted>resume: <code>restate invocations resume {escape(first.id)}</code></div></div>"
        )
    elif r.retrying:
        parts.append(f"<span class='tag retrying'>retrying</span> <span class='muted why'>{_clip(r.retrying)}</span>")
    elif r.waiting is not None:
        since = f" for {duration(now - r.waiting_since)}" if r.waiting_since else ""
        whom = r.waiting_on or "someone"
        what = {"wait_for_approval": "approval", "wait_for_supplier_reply": "reply", "wait_for_goods": "goods"}.get(
            r.waiting.tool, r.waiting.tool
        )
        supplier = f" ({escape(catalogue.supplier(r.supplier))})" if whom == "supplier" and r.supplier else ""
        parts.append(
            f"<span class='tag {'approval' if r.awaiting_approval else 'wait'}'>waits on {escape(whom)}</span> "
            f"{escape(what)}{supplier}<div class=muted>{escape(since.strip())}, "
            f"until {escape(r.waiting.until(now))}</div>"
        )
    elif r.active_run:
        parts.append(escape(r.run_status or "running"))
    elif not r.has_agent:
        parts.append("<span class=muted>no agent yet</span>")
    else:
        parts.append("<span class=muted>idle</span>")
    if r.over_budget(budget) and r.asked_price is not None and budget is not None:
        # A unit price above the budget (a unit price too), not an overage of that size.
        over = f"asks {r.asked_price:.2f} a unit, over the {budget:.2f} budget"
        parts.append(f" <span class='tag over' data-flag=over-budget>{over}</span>")
    if r.failing and not r.retrying and not r.paused:
        parts.append(f"<div class='warn why' data-flag=failing>{_clip(r.failing)}</div>")
    return "".join(parts)


def skus(
    rows: list[SkuRow], total: int, query: SkuQuery, now: float, budget: float | None, catalogue: Catalogue
) -> str:
    links = "".join(
        f"<a class='chip{' here' if current else ''}' href='{escape(href)}'>{escape(text)}</a>"
        for text, href, current in (
            ("all", "/skus", query == SkuQuery()),
            ("waiting on the manager", query_href("/skus", SkuQuery(), waiting="manager"), query.waiting == "manager"),
            ("waiting on a supplier", query_href("/skus", SkuQuery(), waiting="supplier"), query.waiting == "supplier"),
            (
                "below safety",
                query_href("/skus", SkuQuery(), flag="below-safety", sort="cover"),
                query.flag == "below-safety",
            ),
            ("over budget", query_href("/skus", SkuQuery(), flag="over-budget"), query.flag == "over-budget"),
            ("failing", query_href("/skus", SkuQuery(), flag="failing"), query.flag == "failing"),
        )
    )
    form = (
        "<form class=filters method=get action='/skus' role=search>"
        f"<label>Search SKU <input type=search name=q value='{escape(query.q)}' maxlength=64></label>"
        + _select("sort", "Sort by", SORTS, query.sort)
        + _select("order", "Order", (("asc", "ascending"), ("desc", "descending")), query.order)
        + _select("waiting", "Waiting on", WAITS, query.waiting)
        + _select("flag", "Show", FLAGS, query.flag)
        + "<button>Apply</button></form>"
    )
    note = f"<p class=muted>{escape(catalogue.error)}: stock figures left out.</p>" if catalogue.error else ""
    if budget is not None:
        note += f"<p class=muted>Budget: {budget:.2f} per unit (the manager's policy).</p>"

    def head(key: str, label: str) -> str:
        if query.sort == key:
            flip = "desc" if query.order == "asc" else "asc"
            sort = "ascending" if query.order == "asc" else "descending"
            return (
                f"<th aria-sort={sort}><a href='{escape(query_href('/skus', query, order=flip))}'>"
                f"{label} {'▲' if query.order == 'asc' else '▼'}</a></th>"
            )
        return f"<th><a href='{escape(query_href('/skus', query, sort=key, order='asc'))}'>{label}</a></th>"

    body_rows = []
    unwatched = " <span class=muted>(not watched)</span>"
    for r in rows:
        last = "<span class=muted>none yet</span>"
        if r.last_outcome is not None:
            o = r.last_outcome
            last = (
                f"<span class='tag {escape(o.outcome)}'>{escape(o.outcome.replace('_', ' '))}</span> "
                f"<a href='{run_href(o.run_id)}'>run {escape(o.run_id.rsplit('-', 1)[-1])}</a>"
                f"<div class='muted why'>{_clip(o.detail, 100)}</div>"
            )
        cover = r.stock.days_of_cover if r.stock else None
        cover_cell = "-" if cover is None else f"{cover:.1f} d"
        active = (
            f"<a href='{run_href(r.active_run)}'>run {escape(r.active_run.rsplit('-', 1)[-1])}</a>"
            if r.active_run
            else "-"
        )
        sku_cell = f"<a href='/skus/{escape(r.sku)}'><b>{escape(r.sku)}</b></a>" if r.has_agent else escape(r.sku)
        body_rows.append(
            f"<tr data-sku='{escape(r.sku)}'><td class=id data-label=SKU>{sku_cell}</td>"
            f"<td data-label=Stock>{stock_cell(r.stock)}</td><td class=num data-label=Cover>{cover_cell}</td>"
            f"<td data-label=Now>{sku_state(r, now, budget, catalogue)}</td>"
            f"<td class=id data-label='Active run'>{active}</td><td data-label='Last outcome'>{last}</td>"
            f"<td class=num data-label=Runs>{r.runs}{'' if r.watching else unwatched}</td></tr>"
        )
    table = (
        "<table class='list cards' id=skus><caption class=sr>SKUs, their stock and their agents</caption><thead><tr>"
        + head("sku", "SKU")
        + head("stock", "Stock")
        + head("cover", "Cover")
        + head("waiting", "Now")
        + "<th>Active run</th>"
        + head("outcome", "Last outcome")
        + "<th>Runs</th></tr></thead><tbody>"
        + "".join(body_rows)
        + "</tbody></table>"
        if body_rows
        else "<p class=muted id=no-match>No SKU matches these filters.</p>"
    )
    shown = f"{len(rows)} of {total}" if len(rows) != total else f"{total}"
    body = (
        f"<h1>SKUs <span class=tag id=shown>{shown}</span></h1>"
        f"<nav class=chips aria-label=Filters>{links}</nav>{form}{note}{table}"
    )
    return page("SKUs", body, "skus")


def paused_card(paused: Sequence[PausedCall]) -> str:
    """Calls Restate paused: nothing runs them until a person resumes them."""
    if not paused:
        return ""
    items = "".join(
        f"<li><b>{escape(p.handler)}</b> ({escape(p.target)}, invocation {escape(p.id)})"
        f"{escape(p.when_and_why())}."
        f"<div>It runs again only when resumed. Once the cause is fixed: "
        f"<code>restate invocations resume {escape(p.id)}</code>; the whole error: "
        f"<code>restate invocations describe {escape(p.id)}</code></div></li>"
        for p in paused
    )
    holds = (
        " Every later check, message and approval for this SKU waits behind it."
        if any(p.holds_sku for p in paused)
        else ""
    )
    return (
        f"<div class='flash error' role=alert id=stopped><b>Stopped: Restate paused a call of this SKU.</b>"
        f"{holds}<ul>{items}</ul></div>"
    )


def stock_card(sku: str, catalogue: Catalogue | None) -> str:
    """The SKU's stock by the ERP now, with its days of cover."""
    if catalogue is None:
        return ""
    if catalogue.error:
        return f"<div class=card><b>Stock</b> <span class=muted>{escape(catalogue.error)}</span></div>"
    item = catalogue.items.get(sku)
    cover = f"<div>{escape(cover_text(item))}</div>" if item is not None else ""
    return f"<div class=card id=stock><b>Stock</b> (the ERP, now): {stock_cell(item)}{cover}</div>"


def security_card(record: SkuRecord) -> str:
    """What the runs refused or flagged: forged approvals, quotes out of bounds, floods."""
    log = record.security
    if not log.total:
        return ""
    latest = log.latest(10)
    items = "".join(
        f"<li>{escape(clock(e.last_at))} <span class=muted>{escape(e.run_id or '')}</span> "
        f"<b>{escape(e.source)}</b>: {escape(e.what)}{_repeats(e)}</li>"
        for e in latest
    )
    kept = len(log.recent)
    shown = f"{log.total} in all; " + (f"the latest {len(latest)} of {kept} kept" if kept > len(latest) else "all kept")
    tally = security_tally(log)
    tally_html = f"<p class=muted id=security-tally>{escape(tally)}</p>" if tally else ""
    return (
        f"<div class=card id=security><b>Security events</b> ({shown}, newest first){tally_html}<ul>{items}</ul></div>"
    )


def _repeats(e: SecurityEntry) -> str:
    """A collapsed entry's count and first time, beside its latest."""
    if e.count == 1:
        return ""
    return f" <span class=muted>({e.count} times, first {escape(clock(e.first_at))})</span>"


def waiting_note(timeline: Timeline | None) -> str:
    """Where the person the run waits for acts: for the manager, the approval inbox."""
    if timeline is None or timeline.finished or timeline.waiting is None:
        return ""
    if timeline.waiting.tool == "wait_for_approval":
        return (
            "<p class='flash note' role=status>The run waits for the manager's approval: "
            "<a href='/inbox'>decide in the approval inbox</a>.</p>"
        )
    return ""


def sku_detail(
    record: SkuRecord,
    timeline: Timeline | None,
    fragment_url: str | None,
    paused: Sequence[PausedCall] = (),
    catalogue: Catalogue | None = None,
) -> str:
    runs = []
    outcomes = {o.run_id: o for o in record.outcomes}
    for n in range(record.runs_started, 0, -1):
        run_id = run_id_of(record.sku, n)
        o = outcomes.get(run_id)
        status = (
            "running"
            if record.active and record.active.run_id == run_id
            else (f"{o.outcome}: {o.detail}" if o else "(older than the kept outcomes)")
        )
        link = f"<a href='{run_href(run_id)}'>{escape(run_id)}</a>"
        runs.append(f"<li>{link} <span class=muted>{escape(status)}</span></li>")
    stats = record.stats
    by_outcome = ", ".join(f"{k} {v}" for k, v in sorted(stats.by_outcome.items())) or "none yet"
    kept = ""
    if record.kept:
        items = "".join(
            f"<li>{escape(m.event)} at {escape(clock(m.at))}: {escape(m.reason)}</li>" for m in record.kept[-10:]
        )
        kept = f"<div class=card><b>Kept messages</b> (no run read them)<ul>{items}</ul></div>"
    body = (
        f"<h1>{escape(record.sku)}</h1>{paused_card(paused)}{waiting_note(timeline)}"
        f"{stock_card(record.sku, catalogue)}"
        f"<div class=card>watched: {'yes' if record.watch.watching else 'no'} · "
        f"runs: {record.runs_started} · outcomes: {escape(by_outcome)}"
        f"<ul>{''.join(runs) or '<li class=muted>no replenishment yet</li>'}</ul></div>{kept}"
        f"{security_card(record)}"
    )
    if timeline is not None and fragment_url is not None:
        body += f"<div class=card>{timeline_block(timeline, fragment_url)}</div>{REFRESH_SCRIPT}"
    return page(record.sku, body, "skus")


def run_page(timeline: Timeline, fragment_url: str, flash: tuple[str, str] | None = None) -> str:
    download = f"{fragment_url.rsplit('/', 1)[0]}/timeline.html"
    number = timeline.run_id.rsplit("-", 1)[-1]
    body = (
        f"<h1>Run {escape(number)} of {escape(timeline.sku)}</h1>"
        f"<p class=muted><a href='/skus/{escape(timeline.sku)}'>← {escape(timeline.sku)}</a> · "
        f"<a href='{escape(download)}' download>download this timeline (HTML)</a></p>"
        f"<div class=card>{timeline_block(timeline, fragment_url)}</div>{REFRESH_SCRIPT}"
    )
    return page(timeline.run_id, body, "skus", flash)


def timeline_block(timeline: Timeline, fragment_url: str) -> str:
    """The timeline fragment, tagged so the page script can refresh it while the run goes on."""
    html = render_fragment(timeline)
    finished = "true" if settled(timeline) else "false"
    return html.replace(
        "<section class=tl ",
        f"<section data-fragment='{escape(fragment_url)}' data-finished='{finished}' class=tl ",
        1,
    )


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
    return f"/skus/{escape(sku)}/runs/{escape(number)}"


def down_banner() -> str:
    health = SERVICE_DOWN.get()
    if health is None:
        return ""
    return (
        f"<div class='flash error' role=alert id=service-down><b>The replenisher service is down"
        f"{escape(health.dated())}.</b> "
        f"Restate answers, the service does not: {escape(health.reason)}. "
        "These pages show what Restate holds; a decision you send is kept by Restate and runs when the "
        "service is back.</div>"
    )


def error_page(status: int, message: str) -> str:
    return page(f"{status}", f"<h1>{status}</h1><p class='flash error'>{escape(message)}</p>")


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


def spend_chart(s: Spend, settings: InboxSettings) -> str:
    """Ordered and received per period as bars, the still-committed part of what was ordered
    drawn lighter on top of it, on an axis of amounts. Inline SVG: no script, no network."""
    periods = s.periods
    top = nice_ceiling(max([max(p.ordered, p.received) for p in periods] + [1.0]))
    width, height, left, bottom, pad = 640, 210, 58, 52, 14
    base = height - bottom
    scale = (base - pad) / top
    slot = (width - left) / len(periods)
    bar = max(min(slot * 0.36, 26), 2)
    marks = []
    for tick in (top / 2, top):  # the baseline is zero
        y = base - tick * scale
        marks.append(f"<line x1='{left}' x2='{width}' y1='{y:.1f}' y2='{y:.1f}' class=grid />")
        marks.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor=end>{short_amount(tick)}</text>")
    year = None
    for i, p in enumerate(periods):
        x = left + i * slot + slot / 2
        h_ord, h_com, h_rec = p.ordered * scale, p.committed * scale, p.received * scale
        marks.append(
            f"<g><title>{escape(p.label)}: ordered {settings.money(p.ordered)}, committed "
            f"{settings.money(p.committed)}, received {settings.money(p.received)}</title>"
            f"<rect class=ordered x='{x - bar:.1f}' y='{base - h_ord:.1f}' width='{bar:.1f}' height='{h_ord:.1f}'/>"
            f"<rect class=committed x='{x - bar:.1f}' y='{base - h_ord:.1f}' width='{bar:.1f}' "
            f"height='{min(h_com, h_ord):.1f}'/>"
            f"<rect class=received x='{x:.1f}' y='{base - h_rec:.1f}' width='{bar:.1f}' height='{h_rec:.1f}'/></g>"
        )
        every = max(len(periods) // 7, 1)
        if (len(periods) - 1 - i) % every == 0:  # counted back from the current period, which always has its label
            # Every other label is left out on a narrow screen, where the chart is small.
            minor = " class=minor" if (len(periods) - 1 - i) % (every * 2) else ""
            anchor = "end" if i == len(periods) - 1 else "middle"  # the last label ends at the chart's edge
            edge = x + bar if anchor == "end" else x
            at = f"x='{edge:.1f}' text-anchor={anchor}"
            marks.append(f"<text{minor} {at} y='{base + 20}'>{p.start:%d %b}</text>")
            if p.start.year != year:  # a row below: the year, under its first label and where it changes
                year = p.start.year
                marks.append(f"<text class=year {at} y='{base + 44}'>{year}</text>")
    axis = f"<line x1='{left}' x2='{width}' y1='{base}' y2='{base}' class=axis />"
    return (
        f"<svg class=chart viewBox='0 0 {width} {height}' role=img aria-labelledby=chart-title>"
        f"<title id=chart-title>Ordered and received per {s.query.by}, the last {len(periods)}: "
        f"the axis runs to {settings.money(top)}; the table below has every figure</title>"
        f"{axis}{''.join(marks)}</svg>"
        "<p class='legend muted'><span class=item><span class='key ordered'></span> ordered</span> "
        "<span class=item><span class='key committed'></span> of which still to come</span> "
        "<span class=item><span class='key received'></span> received</span> "
        f"<span class=item>· amounts in {escape(settings.currency)}</span></p>"
    )


def spend_page(s: Spend, settings: InboxSettings) -> str:
    q = s.query
    money = settings.money
    names = settings.catalogue
    chips = "".join(
        f"<a class='chip{' here' if q.by == by and q.periods == n else ''}' "
        f"href='{escape(query_href('/spend', q, by=by, periods=str(n)))}'>{label}</a>"
        for by, n, label in (
            ("day", 14, "14 days"),
            ("day", 30, "30 days"),
            ("week", 8, "8 weeks"),
            ("week", 26, "26 weeks"),
        )
    )
    suppliers = sorted(set(names.supplier_names) | {x.supplier for x in s.suppliers} | ({q.supplier} - {""}))
    options = "<option value=''>every supplier</option>" + "".join(
        f"<option value='{escape(sid)}'{' selected' if sid == q.supplier else ''}>"
        f"{escape(names.supplier(sid))}</option>"
        for sid in suppliers
    )
    form = (
        "<form class=filters method=get action='/spend'>"
        + _select("by", "Per", (("day", "day"), ("week", "week")), q.by)
        + f"<label>Periods <input type=number name=periods min=1 max=90 value={q.periods}></label>"
        + f"<label>Supplier <select name=supplier>{options}</select></label><button>Show</button></form>"
    )
    total = Period(label="total", start=s.periods[0].start)
    for p in s.periods:
        total.ordered += p.ordered
        total.committed += p.committed
        total.received += p.received

    def figures(ordered: float, committed: float, received: float) -> str:
        return (
            f"<td class=num data-label=Ordered>{money(ordered)}</td>"
            f"<td class=num data-label='Still to come'>{money(committed)}</td>"
            f"<td class=num data-label=Received>{money(received)}</td>"
        )

    period_rows = "".join(
        f"<tr><td class=id data-label={q.by.title()}>{escape(p.label)}</td>"
        f"{figures(p.ordered, p.committed, p.received)}</tr>"
        for p in reversed(s.periods)
        if p.ordered or p.received or p.committed
    )
    heads = "<th scope=col>Ordered</th><th scope=col>Of which still to come</th><th scope=col>Received</th>"
    period_table = (
        "<table class='list cards' id=spend-periods><caption class=sr>Spend per period</caption><thead><tr>"
        f"<th scope=col>{q.by.title()}</th>{heads}</tr></thead><tbody>{period_rows}</tbody>"
        f"<tfoot><tr><th scope=row>Total</th>{figures(total.ordered, total.committed, total.received)}</tr></tfoot>"
        "</table>"
        if period_rows
        else f"<p class=muted id=no-spend>Nothing ordered or received in these {len(s.periods)} {q.by}s.</p>"
    )
    supplier_rows = "".join(
        f"<tr data-supplier='{escape(x.supplier)}'><td data-label=Supplier>{escape(names.supplier(x.supplier))}</td>"
        f"<td class=num data-label=Orders>{x.orders}</td>{figures(x.ordered, x.committed, x.received)}</tr>"
        for x in s.suppliers
    )
    supplier_table = (
        "<h2>Per supplier</h2><table class='list cards' id=spend-suppliers>"
        "<caption class=sr>Spend per supplier</caption><thead><tr><th scope=col>Supplier</th>"
        f"<th scope=col>Orders</th>{heads}</tr></thead><tbody>{supplier_rows}</tbody></table>"
        if supplier_rows
        else ""
    )
    body = (
        f"<h1>Spend</h1><nav class=chips aria-label=Periods>{chips}</nav>{form}"
        f"<p class=summary id=committed>Committed now (ordered, not yet received, every open order): "
        f"<b>{money(s.committed_now)}</b></p>"
        f"<div class=card>{spend_chart(s, settings)}</div>{period_table}{supplier_table}"
        f"<p class=muted>Days of {escape(s.calendar)}. An order counts in the {q.by} it was placed; goods in the "
        f"{q.by} they were booked (a run's receipts at its last one). From the SKUs' recent outcomes and the "
        "runs in progress, as the SKU agents keep them.</p>"
    )
    return page("Spend", body, "spend")
