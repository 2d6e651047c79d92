"""The console's pages: server-rendered HTML, one small script that refreshes a running timeline."""

from __future__ import annotations

from contextvars import ContextVar
from html import escape

from pydantic import BaseModel, Field

from replenisher.console.inbox import PendingApproval
from replenisher.console.overview import SkuRow
from replenisher.domain.sku import SkuRecord
from replenisher.timeline.format import clock, duration, until
from replenisher.timeline.html import STYLE as TIMELINE_STYLE
from replenisher.timeline.html import render_fragment
from replenisher.timeline.model import Timeline
from replenisher.timeline.restate import Health

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
td.id { white-space: nowrap; }
.scroll { overflow-x: auto; }
.muted { color: #4b5563; font-size: 13px; }
.flash { padding: 8px 12px; margin: 0 0 14px; border-radius: 4px; overflow-wrap: anywhere; }
.flash.ok { background: #dcfce7; border: 1px solid #86efac; }
.flash.error { background: #fee2e2; border: 1px solid #fca5a5; }
form.decide { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
form.decide input[type=number] { width: 90px; padding: 4px; }
form.decide input[type=text] { width: 160px; padding: 4px; }
button { padding: 5px 12px; border-radius: 4px; border: 1px solid #9ca3af; background: #fff; cursor: pointer; }
button.approve { background: #15803d; border-color: #166534; color: #fff; }
button.reject { background: #fff; border-color: #b91c1c; color: #b91c1c; }
.tag { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px; background: #e5e7eb; }
.tag.approval { background: #fef3c7; color: #92400e; }
.tag.retrying { background: #fee2e2; color: #991b1b; }
.tag.received { background: #dcfce7; color: #166534; }
.warn { color: #b45309; }
.card { background: #fff; padding: 14px 18px; box-shadow: 0 1px 2px #0001; margin-bottom: 14px; }
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
        for key, href, label in (("inbox", "/inbox", "Approval inbox"), ("skus", "/skus", "SKUs"))
    )
    message = f"<p class='flash {flash[0]}' role=status>{escape(flash[1])}</p>" if flash else ""
    message = down_banner() + message
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)} · Stock Replenisher</title><style>{STYLE}{TIMELINE_STYLE}</style></head>"
        f"<body><header><b>Stock Replenisher</b>{nav}</header><main>{message}{body}</main></body></html>\n"
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

    def money(self, amount: float) -> str:
        return f"{amount:,.2f} {self.currency}"


def inbox(
    pending: list[PendingApproval],
    now: float,
    flash: tuple[str, str] | None = None,
    settings: InboxSettings | None = None,
) -> str:
    body = (
        "<div id=inbox-live data-fragment='/inbox/fragment' aria-live=polite>"
        + inbox_fragment(pending, now, settings)
        + "</div><p class=muted>Approving resolves the run's durable promise through Restate's ingress: the run "
        "continues at once. Without a decision by the deadline the run cancels the PO (it fails closed).</p>"
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
        f"<header><h2>{po}</h2> <a href='/skus/{escape(p.sku)}'>{escape(p.sku)}</a> · {escape(p.supplier)} "
        f"{''.join(flags)}<span class='countdown{urgent}' data-until='{p.decide_by:.0f}'>"
        f"{escape(countdown(left))}</span> <span class=muted>decide by {escape(until(p.decide_by, p.calendar, now))}"
        f"</span> {asked(p)}</header>"
    )
    terms = (
        "<section><h3>Terms</h3>"
        f"<p class=num>{p.quantity} x {escape(settings.money(p.unit_price))} = "
        f"<b>{escape(settings.money(p.total))}</b></p>"
        f"<p class=muted>quote {escape(p.quote_id)}, valid until {escape(clock(p.quote_valid_until))}; "
        f"asked {escape(duration(p.age(now)))} ago · <a href='{run_href(p.run_id)}'>{escape(p.run_id)}</a></p>"
        "</section>"
    )
    stock = "<section><h3>Stock</h3><p class=muted>not recorded</p></section>"
    if p.on_hand is not None:
        stock = (
            f"<section><h3>Stock</h3><p>on hand <b>{p.on_hand}</b> · safety {p.safety_stock} · "
            f"target {p.target_stock}</p></section>"
        )
    quotes = "".join(
        f"<tr{' class=chosen' if q.quote_id == p.quote_id else ''}><td>{escape(q.supplier)}</td>"
        f"<td class=num>{q.unit_price:.2f}</td><td class=num>{q.lead_days:g} d</td>"
        f"<td class=num>{escape(clock(q.valid_until)[5:16])}</td></tr>"
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
    if p.quote_expired(now):
        return (
            f"<form class=decide method=post action='/approvals'>{hidden}"
            "<p class=warn>The quote has expired: approving would not order. The run re-quotes and asks again; "
            f"you can reject now.</p>{note}{reject}</form>"
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
        f"<b>{escape(settings.money(p.quantity * up_to))}</b> to {escape(p.supplier)} for {escape(p.sku)} "
        f"(asked {escape(settings.money(p.unit_price))} per unit).</p>"
        f"<p class=muted>Approvals above {escape(settings.money(settings.confirm_above))} are confirmed in a "
        "second step.</p>"
        f"<form method=post action='/approvals'>{hidden}<input type=hidden name=confirmed value=yes>"
        f"<button class=approve name=decision value=approve>Confirm: approve {escape(p.po_number)}</button> "
        "<a href='/inbox'>back to the inbox</a></form></div>"
    )
    return page("Confirm approval", body, "inbox")


def skus(rows: list[SkuRow], now: float) -> str:
    if not rows:
        return page("SKUs", "<h1>SKUs</h1><p class=muted>No SKU agent yet: check or watch a SKU first.</p>", "skus")
    body_rows = []
    for r in rows:
        state = "-"
        if r.retrying:
            state = f"<span class='tag retrying'>retrying</span> <span class=muted>{escape(r.retrying)}</span>"
        elif r.waiting is not None:
            kind = "approval" if r.awaiting_approval else ""
            since = f" for {duration(now - r.waiting_since)}" if r.waiting_since else ""
            state = (
                f"<span class='tag {kind}'>{escape(r.waiting.tool)}</span>"
                f"<div class=muted>waiting{escape(since)}, until {escape(r.waiting.until(now))}</div>"
            )
        elif r.active_run:
            state = escape(r.run_status or "running")
        last = "-"
        if r.last_outcome is not None:
            o = r.last_outcome
            last = (
                f"<span class='tag {escape(o.outcome)}'>{escape(o.outcome)}</span> "
                f"<a href='{run_href(o.run_id)}'>{escape(o.run_id.rsplit('-', 1)[-1])}</a>"
                f"<div class=muted>{escape(o.detail)}</div>"
            )
        active = f"<a href='{run_href(r.active_run)}'>{escape(r.active_run)}</a>" if r.active_run else "-"
        body_rows.append(
            f"<tr data-sku='{escape(r.sku)}'><td><a href='/skus/{escape(r.sku)}'><b>{escape(r.sku)}</b></a></td>"
            f"<td>{'yes' if r.watching else 'no'}</td><td class=num>{r.runs}</td><td>{active}</td>"
            f"<td>{state}</td><td>{last}</td><td class=num>{r.kept_messages or ''}</td></tr>"
        )
    body = (
        f"<h1>SKUs <span class=tag>{len(rows)}</span></h1><table class=list id=skus><thead><tr><th>SKU</th>"
        "<th>watched</th><th>runs</th><th>active run</th><th>now</th><th>last outcome</th><th>kept msgs</th>"
        "</tr></thead><tbody>" + "".join(body_rows) + "</tbody></table>"
    )
    return page("SKUs", body, "skus")


def sku_detail(record: SkuRecord, timeline: Timeline | None, fragment_url: str | None) -> str:
    runs = []
    outcomes = {o.run_id: o for o in record.outcomes}
    for n in range(record.runs_started, 0, -1):
        run_id = f"replenish-{record.sku}-{n}"
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
        f"<h1>{escape(record.sku)}</h1><div class=card>watched: {'yes' if record.watch.watching else 'no'} · "
        f"runs: {record.runs_started} · outcomes: {escape(by_outcome)}"
        f"<ul>{''.join(runs) or '<li class=muted>no replenishment yet</li>'}</ul></div>{kept}"
    )
    if timeline is not None and fragment_url is not None:
        body += f"<div class=card>{timeline_block(timeline, fragment_url)}</div>{REFRESH_SCRIPT}"
    return page(record.sku, body, "skus")


def run_page(timeline: Timeline, fragment_url: str, flash: tuple[str, str] | None = None) -> str:
    download = f"{fragment_url.rsplit('/', 1)[0]}/timeline.html"
    body = (
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
    sku, number = run_id.removeprefix("replenish-").rsplit("-", 1)
    return f"/skus/{escape(sku)}/runs/{escape(number)}"


def down_banner() -> str:
    health = SERVICE_DOWN.get()
    if health is None:
        return ""
    since = f" since {clock(health.since)}" if health.since is not None else ""
    return (
        f"<div class='flash error' role=alert id=service-down><b>The replenisher service is down{escape(since)}.</b> "
        f"Restate answers, the service does not ({escape(health.error or 'its attempts are refused')}). "
        "These pages show what Restate holds; a decision you send is kept by Restate and runs when the "
        "service is back.</div>"
    )


def error_page(status: int, message: str) -> str:
    return page(f"{status}", f"<h1>{status}</h1><p class='flash error'>{escape(message)}</p>")
