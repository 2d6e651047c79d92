"""`replenisher`: the command line for people. Thin clients over Restate's ingress and admin API.

Human-readable output by default, `--json` for scripts. Exit codes: 0 done; 1 refused, not
found, or nothing to approve; 2 bad usage; 3 Restate not reachable; 4 the replenisher
service is down (Restate answers, the service does not) and nothing was done; 5 the service
is down, but Restate accepted the command and runs it when the service is back; 6 Restate
holds the command behind a call of the same SKU that it paused, and runs it once that one is
resumed.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import secrets
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from replenisher.addresses import DEFAULT_ADMIN_URL, DEFAULT_INGRESS_URL, DEFAULT_WORLD_URL
from replenisher.domain.credentials import unverified_claims
from replenisher.domain.sku import SkuRecord, SkuView, split_run_id
from replenisher.domain.sku_list import ShardQuery
from replenisher.operations import agent_calls
from replenisher.operations.cost import costs
from replenisher.operations.decide import BadDecision, decide, wait_until_taken
from replenisher.operations.inbox import ManagerInbox
from replenisher.operations.outcomes import recent_outcomes
from replenisher.operations.overview import PER_PAGE, SkuQuery, agents_by_name, select_rows, sku_rows
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError, Unreachable
from replenisher.operations.restate.health import ServiceDown
from replenisher.operations.restate.http import valid_sku
from replenisher.operations.restate.ingress import Accepted
from replenisher.operations.restate.paused import Blocked, PausedCall
from replenisher.operations.restate.read_models import RunView
from replenisher.operations.restate.sku_list import filled_page
from replenisher.operations.sku_lines import SkuLine, line_of_entry, line_of_row, with_invocation
from replenisher.operations.status import sku_status
from replenisher.operations.timelines import load_timeline
from replenisher.timeline.format import clock, duration, security_entry, security_tally, shorten
from replenisher.timeline.model import decision_from_approval, signed_by

PERSONAL_TOKEN_ENV = "REPLENISHER_PERSONAL_TOKEN"
"""Where `approve` and `reject` find your personal token unless `--credential-file` names one."""

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_SERVICE_DOWN = 4
EXIT_ACCEPTED = 5
EXIT_BLOCKED = 6
DEFAULT_CONSOLE_PORT = 8090
ALL_ROWS = 1_000_000  # `skus --limit 0`: every row (the list's pages stop there)

COMMANDS = """\
commands people use daily:
  skus                       every SKU agent: active run, what it waits for and since when, last outcome
  status SKU                 one agent: its active run, the pending approval and its token, recent outcomes
  approve SKU --up-to PRICE  approve the pending PO up to a unit price (resolves the run's durable promise)
  reject SKU                 reject the pending PO
  timeline SKU [--run N]     a run as a timeline: turns, steps and retries, waits, outages, the outcome
  outcomes [SKU]             how recent replenishments ended
  cost [SKU]                 what the model cost, per SKU and run, and what was bought
  deliver SKU EVENT JSON     send a message to a SKU's address (approval, supplier-reply, goods)
  check / watch / unwatch    read stock now / on a durable timer / stop the timer
  console                    the manager's web console (approval inbox, SKUs, timelines)
  replay RUN|FILE [--all]    re-decide recorded runs with a decider, from their archives (never the world)
  people check FILE          check the team's authority matrix; `people hash-password` for a password_hash
  audit [--since DAY]        the audit log: decisions, refusals, sign-ins (text, csv or json)
  deployments [prune]        each deployment's code version and runs in flight; remove drained ones
  up / down / demo           the local stack, and the demo
"""


# --- plumbing ---------------------------------------------------------------------------


def ingress_url(args: argparse.Namespace | None = None) -> str:
    return _url(args, "ingress_url", "--ingress-url", "REPLENISHER_INGRESS_URL", DEFAULT_INGRESS_URL)


def admin_url(args: argparse.Namespace | None = None) -> str:
    return _url(args, "admin_url", "--admin-url", "REPLENISHER_ADMIN_URL", DEFAULT_ADMIN_URL)


def inbox_url(args: argparse.Namespace | None = None) -> str:
    """The manager's inbox: the world's (or a real system's) /manager API, where approval tokens go."""
    return _url(args, "inbox_url", "--inbox-url", "REPLENISHER_WORLD_URL", DEFAULT_WORLD_URL)


def _url(args: argparse.Namespace | None, attr: str, flag: str, env: str, default: str) -> str:
    """The address given by the flag, else the environment, else the default; one that is no
    http(s) URL is named at once, rather than reported later as a stack that is not up."""
    value, source = getattr(args, attr, None), flag
    if not value:
        value, source = os.environ.get(env), env
    if not value:
        return default
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        print(f"error: {source} {value!r} is not a URL: it must start with http:// or https://", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    return value.rstrip("/")


def emit(args: argparse.Namespace, data: Any, human: Callable[[], str]) -> None:
    """`--json`: the data as JSON on stdout; otherwise the human rendering."""
    if args.json:
        print(json.dumps(jsonable(data), indent=2))
    else:
        print(human())


def jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def terminal_width() -> int:
    return max(shutil.get_terminal_size((120, 40)).columns, 80)


class Progress:
    """A one-line progress display on stderr for things that take a while (quiet when not a tty)."""

    FRAMES = "|/-\\"

    def __init__(self, what: str) -> None:
        self.what = what
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.frame = 0

    def tick(self, detail: str = "") -> None:
        if not self.tty:
            return
        self.frame = (self.frame + 1) % len(self.FRAMES)
        elapsed = time.monotonic() - self.started
        line = f"{self.FRAMES[self.frame]} {self.what} {elapsed:4.1f}s {detail}"
        sys.stderr.write("\r" + shorten(line, terminal_width() - 1).ljust(terminal_width() - 1))
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r" + " " * (terminal_width() - 1) + "\r")
            sys.stderr.flush()


# --- the commands -----------------------------------------------------------------------


def _key() -> str:
    """Every command that changes something carries an idempotency key: Restate runs it once,
    and while the service is down the key finds the call Restate holds (its invocation id)."""
    return f"cli-{uuid.uuid4()}"


def down_banner(client: RestateClient) -> str:
    health = client.degraded
    if health is None:
        return ""
    return f"note: {health.line()}\n      shown from Restate's storage: what the agents last saved\n"


async def cmd_check(client: RestateClient, args: argparse.Namespace) -> int:
    sku = valid_sku(args.sku)
    result = await agent_calls.check(client, sku, _key())

    def human() -> str:
        line = f"{sku}: on hand {result['on_hand']}, safety stock {result['safety_stock']}"
        if result.get("started"):
            return f"{line}: started {result['started']}"
        if result.get("active"):
            return f"{line}: {result['active']} is already running"
        if result.get("held_until"):
            return f"{line}: resting after a run without goods until {clock(result['held_until'])}"
        return f"{line}: nothing to do"

    emit(args, result, human)
    return 0


async def cmd_watch(client: RestateClient, args: argparse.Namespace) -> int:
    sku = valid_sku(args.sku)
    record = await agent_calls.watch(client, sku, args.every, _key())
    every = record["watch"]["interval_days"]
    emit(args, record, lambda: f"{sku}: checking stock every {every:g} business day{'s' if every != 1 else ''}")
    return 0


async def cmd_unwatch(client: RestateClient, args: argparse.Namespace) -> int:
    sku = valid_sku(args.sku)
    record = await agent_calls.unwatch(client, sku, _key())
    emit(args, record, lambda: f"{sku}: no longer checking stock on a timer")
    return 0


async def cmd_deliver(client: RestateClient, args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as e:
        raise OperatorError(f"the payload is not valid JSON: {e}") from e
    answer = await agent_calls.deliver(client, args.sku, args.event, payload, args.idempotency_key)

    def human() -> str:
        if answer.get("kept"):
            return f"{args.sku}: {args.event} kept (no run is waiting for it; `status` lists it)"
        return f"{args.sku}: {args.event} #{answer.get('seq')} routed to {answer.get('run_id')}"

    emit(args, answer, human)
    return 0


async def cmd_status(client: RestateClient, args: argparse.Namespace) -> int:
    inbox = ManagerInbox(inbox_url(args))
    try:
        found = await sku_status(client, inbox, args.sku)
    finally:
        await inbox.aclose()
    record, view, token = found.record, found.run, found.approval_token
    now = client.now()

    def human() -> str:
        stats = record.stats
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(stats.by_outcome.items())) or "none yet"
        watch = watch_line(record)
        runs = f"{record.runs_started} run{'' if record.runs_started == 1 else 's'} started"
        lines = [f"{record.sku}: {watch} · {runs} · outcomes: {outcomes}"]
        lines += paused_lines(found.paused, found.paused_note)
        if record.hold_until and record.hold_until > now:
            lines.append(f"resting until {clock(record.hold_until)} after a run that ended without goods")
        if record.active is None:
            lines.append("no replenishment running")
        else:
            a = record.active
            lines.append(
                f"active: {a.run_id} since {clock(a.started_at)} (on hand {a.on_hand} < safety {a.safety_stock})"
            )
            lines += _run_lines(record.sku, view, token or found.token_note, now)
        if record.outcomes:
            lines.append("recent outcomes:")
            for o in record.outcomes[-5:][::-1]:
                price = f" at {o.unit_price:.2f}" if o.unit_price is not None else ""
                lines.append(f"  {o.run_id}  {o.outcome:<9} {shorten(o.detail, 60)}{price}")
        if record.kept:
            lines.append(f"kept messages: {len(record.kept) + record.kept_overflow} (no run read them):")
            for m in record.kept[-5:]:
                lines.append(f"  {m.event} from {m.sender.label} at {clock(m.at)}: {m.reason}")
        lines += security_lines(record)
        lines += wait_lines(record) + memory_lines(record)
        return "\n".join(lines)

    emit(args, found, human)
    return 0


def wait_lines(record: SkuRecord) -> list[str]:
    """This SKU's own wait lengths, where they differ from the company's defaults."""
    own = record.waits.model_dump(exclude_none=True)
    if not own:
        return []
    return ["own waits (days): " + ", ".join(f"{name.replace('_', ' ')} {days:g}" for name, days in own.items())]


def memory_lines(record: SkuRecord) -> list[str]:
    """What the SKU remembers of its suppliers, as the next run will be told (`--json` has it all)."""
    brief = record.memory.brief()
    if brief.runs == 0 and not brief.suppliers:
        return ["remembers: nothing yet (no run has finished)"]
    lines = [f"remembers ({brief.runs} finished run{'' if brief.runs == 1 else 's'}):"]
    for s in brief.suppliers:
        judged = f"reliability {s.reliability:.2f}" if s.reliability is not None else "reliability not judged yet"
        price = f", last price {s.last_price:.2f}" if s.last_price is not None else ""
        orders = s.record() if s.orders else "quoted, never ordered from"
        lines.append(f"  {s.supplier}: {judged}{' (poor)' if s.unreliable else ''}; {orders}{price}")
    for p in brief.promises:
        lines.append(f"  promise (unverified): {p.describe()}")
    return lines


def paused_lines(paused: Sequence[PausedCall], note: str) -> list[str]:
    lines = [f"STOPPED: {p.line()}" for p in paused]
    if any(p.holds_sku for p in paused):
        lines.append("  every later check, message and approval for this SKU waits behind it")
    lines += [f"  {p.remedy()}" for p in paused]
    return lines + ([note] if note else [])


def security_lines(record: SkuRecord, shown: int = 5) -> list[str]:
    """What the rules refused for this SKU (forged or mismatched messages, a model's refused
    choice, a flood past a sender's share): the exact total, what was collapsed or dropped,
    and the latest few entries, newest first; nothing when there were none."""
    log = record.security
    if log.total == 0:
        return []
    lines = [f"security events: {log.total} (refused, nothing changed; latest first):"]
    tally = security_tally(log)
    if tally:
        lines.append(f"  ({tally})")
    for entry in log.latest(shown):
        lines.append("  " + shorten(security_entry(entry, run=True), 160))
    return lines


def signatures_line(approval: Any) -> str:
    """Under the authority matrix: who has signed the pending PO and what it still needs."""
    total = approval.request.quantity * approval.request.unit_price
    if not approval.signatures:
        return f"signed by nobody yet: needs an approver of the authority matrix whose limit covers {total:,.2f}"
    return f"signed by {', '.join(signed_by(approval))}: {approval.still_needed or 'complete'}"


def approval_story(approval: Any) -> str:
    """Who is asked now, which reminders went out, and whether it was escalated."""
    story = approval.approver
    if approval.escalated_at is not None:
        story += f" (escalated {clock(approval.escalated_at)}; the first approver's token is void)"
    if approval.reminded:
        story += " · reminded at " + ", ".join(f"{round(p * 100)}%" for p in approval.reminded)
    return story


def _run_lines(sku: str, view: RunView | None, token: str, now: float) -> list[str]:
    if view is None or view.state is None:
        return ["  (the run has not saved its state yet)"]
    state = view.state
    lines = []
    if view.waiting is not None:
        lines.append(f"  waiting in {view.waiting.tool} until {view.waiting.until(now)}")
    if state.history:
        last = state.history[-1]
        lines.append(f"  last turn {last.turn}: {last.tool}: {shorten(last.summary or last.reason, 80)}")
    approval = state.approval
    if approval is not None and approval.status == "pending":
        r = approval.request
        lines.append(
            f"  approval pending: {r.po_number} · {r.supplier} · {r.quantity} x {r.unit_price:.2f} = "
            f"{r.quantity * r.unit_price:,.2f} · quote valid until {clock(r.expires_at)}"
        )
        lines.append(f"  asked: {approval_story(approval)}")
        lines.append(f"  approval token: {token}")
        if state.people_matrix:
            lines.append(f"  {signatures_line(approval)}")
        person = " --as PERSON" if state.people_matrix else ""
        lines.append(
            f"  decide with: replenisher approve {sku} --up-to {r.unit_price:.2f}{person}   "
            f"(or: replenisher reject {sku}{person})"
        )
        if state.people_matrix:
            lines.append(f"  as yourself: your personal token (the console's Tokens page) in ${PERSONAL_TOKEN_ENV}")
    elif (decision := decision_from_approval(approval)) is not None:
        lines.append(f"  decision: {decision.line()}")
    return lines


def personal_credential(args: argparse.Namespace, now: float) -> tuple[str | None, str | None]:
    """The person's token (`--credential-file`, else REPLENISHER_PERSONAL_TOKEN) and the person a
    decision is for (`--as`, else the token's). A token that is not one, is someone else's or has
    expired is refused here, before anything is sent; only the service can say whether it counts."""
    token = None
    if args.credential_file is not None:
        try:
            token = args.credential_file.read_text().strip()
        except OSError as e:
            raise BadDecision(f"cannot read the personal token {args.credential_file}: {e.strerror}") from None
    token = token or os.environ.get(PERSONAL_TOKEN_ENV, "").strip() or None
    if token is None:
        return None, args.person
    claims = unverified_claims(token)
    where = str(args.credential_file) if args.credential_file is not None else PERSONAL_TOKEN_ENV
    if claims is None:
        raise BadDecision(f"{where} holds no personal token (make one in the console: Tokens)")
    if args.person is not None and args.person != claims.p:
        raise BadDecision(f"--as {args.person}, but the personal token in {where} is {claims.p}'s")
    if now >= claims.exp:
        raise BadDecision(f"{claims.p}'s personal token in {where} expired at {clock(claims.exp)}: make a new one")
    return token, claims.p


async def cmd_decide(client: RestateClient, args: argparse.Namespace) -> int:
    approved = args.command == "approve"
    credential, person = personal_credential(args, client.now())
    inbox = ManagerInbox(inbox_url(args))
    try:
        decided = await decide(
            client,
            inbox,
            args.sku,
            approved=approved,
            up_to=args.up_to if approved else None,
            note=args.note,
            by=args.by,
            token=args.token,
            person=person,
            credential=credential,
            now=client.now(),
        )
    finally:
        await inbox.aclose()
    verdict = decided.verdict
    if decided.accepted_as is not None:
        emit(args, {"decided": decided, "run_state": None}, decided.accepted_line)
        return EXIT_ACCEPTED
    state = None
    if not args.no_wait and not decided.kept:
        progress = Progress(f"waiting for {decided.run_id} to read the decision")
        task = asyncio.ensure_future(wait_until_taken(client, decided, timeout=args.wait_seconds))
        while not task.done():
            progress.tick()
            await asyncio.sleep(0.1)
        progress.done()
        state = task.result()
    data = {"decided": decided, "run_state": state}

    def human() -> str:
        lines = [f"{decided.po_number} {verdict}: delivered to {decided.routed_to or 'the SKU (kept: no run waits)'}"]
        still = state.approval if state is not None and decided.person is not None else None
        if state is not None and still is not None and still.status == "pending":
            if state.security.total > decided.refusals_before and state.security.recent:
                lines.append(f"{decided.run_id} refused it: {state.security.recent[-1].what}")
            lines.append(f"{decided.run_id} still waits: {signatures_line(still)}")
        elif state is not None:
            waits = [t.turn for t in state.history if t.tool == "wait_for_approval"]
            since = [t for t in state.history if waits and t.turn >= waits[-1]]
            lines.append(f"{decided.run_id} read it and carried on:")
            lines += [f"  turn {t.turn} {t.tool}: {shorten(t.summary or t.reason, 90)}" for t in since]
        elif not args.no_wait and not decided.kept:
            lines.append(f"{decided.run_id} has not read it yet (it will when it resumes)")
        return "\n".join(lines)

    emit(args, data, human)
    return 0


def watch_line(record: SkuView) -> str:
    """`checked every 1 business day at about 12:08 (site time)`, or `not watched`."""
    if not record.watch.watching:
        return "not watched"
    every = record.watch.interval_days
    at = f" at about {record.check_time} (site time)" if record.check_time else ""
    return f"checked every {every:g} business day{'' if every == 1 else 's'}{at}"


def count(text: str) -> int:
    """A whole number of rows, 0 or more (argparse's type: its error names the option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


async def cmd_skus(client: RestateClient, args: argparse.Namespace) -> int:
    try:
        query = SkuQuery(q=args.search, sort=args.sort, order="desc" if args.desc else "asc", waiting=args.waiting)
    except ValidationError:
        raise OperatorError(
            f"--search {args.search!r}: letters, digits, '.', '_', '-' and spaces, at most 64"
        ) from None
    try:
        # The SKU list kept by key: only the page is read, however many SKUs there are.
        lines, matching, any_agent = await listed_lines(client, query, args.offset, args.limit, args.refill)
    except ServiceDown:
        # The service is down, so the list cannot answer: the agents' records from Restate's storage.
        lines, matching, any_agent = await stored_lines(client, query, args.offset, args.limit)
    await note_if_down(client)
    now = client.now()
    if lines and len(lines) < matching:
        # On stderr: stdout holds only the rows, for a pipe or `--json`.
        more = f"; --offset {args.offset + len(lines)} for the next" if args.offset + len(lines) < matching else ""
        shown = f"rows {args.offset + 1}-{args.offset + len(lines)} of {matching}"
        print(f"{shown}{more} (--limit 0 for all)", file=sys.stderr)

    def human() -> str:
        if not any_agent:
            return "no SKU agents yet: `replenisher check SKU` or `watch SKU` creates one"
        if not matching:
            return "no SKU agent matches"
        if not lines:
            return f"no rows past --offset {args.offset}: {matching} match"
        out = [("SKU", "watched", "runs", "active run", "now", "last outcome")]
        for r in lines:
            if r.retrying:
                doing = r.retrying
            elif r.waiting_tool is not None:
                since = f" for {duration(now - r.waiting_since)}" if r.waiting_since else ""
                doing = f"{r.waiting_tool}{since}"
            elif r.active_run:
                doing = r.run_status or "running"
            else:
                doing = "-"
            last = r.last_outcome
            last_text = f"run {split_run_id(last.run_id)[1]} {last.outcome}: {last.detail}" if last else "-"
            out.append(
                (
                    r.sku,
                    "yes" if r.watching else "no",
                    str(r.runs),
                    r.active_run or "-",
                    shorten(doing, 60),
                    shorten(last_text, 50),
                )
            )
        return table(out)

    emit(args, lines, human)
    return 0


async def listed_lines(
    client: RestateClient, query: SkuQuery, offset: int, limit: int, refill: bool
) -> tuple[list[SkuLine], int, bool]:
    """The page's lines from the SKU list, filled first if it is not (agents made before it, or `--refill`);
    what Restate says of the page's active runs that wait for nothing (one may be retrying a step)."""
    asked = ShardQuery(q=query.q, sort=query.sort, order=query.order, waiting=query.waiting, now=client.now(), upto=0)
    size = min(limit or ALL_ROWS, ALL_ROWS - offset)
    if size <= 0:
        raise OperatorError(f"--offset {offset}: the SKU list pages through its first {ALL_ROWS:,} rows")
    page, filled = await filled_page(client, asked, offset, size, refill)
    if filled is not None and (refill or filled.changed):
        print(
            f"filled the SKU list from {filled.agents} agents' records: {filled.changed} entries added or mended",
            file=sys.stderr,
        )
    lines = [line_of_entry(entry) for entry in page.entries]
    working = [line.active_run for line in lines if line.active_run and line.waiting_tool is None]
    if working:
        invocations = await client.run_invocations(working)
        lines = [with_invocation(line, invocations.get(line.active_run or "")) for line in lines]
    return lines, page.matching, page.total > 0


async def stored_lines(
    client: RestateClient, query: SkuQuery, offset: int, limit: int
) -> tuple[list[SkuLine], int, bool]:
    """The page's lines from the agents' records in Restate's storage: when the service cannot answer."""
    # By SKU with at most a search, Restate reads only the page's agents; else every agent is read.
    page = await agents_by_name(client, query, offset, limit)
    if page is not None:
        # Whether any agent exists, for the line that says none does: asked only when none matched.
        any_agent = page.matching > 0 or (
            bool(query.q.strip()) and (await client.sku_records_page("", False, 1, 0)).matching > 0
        )
        return [line_of_row(row) for row in page.rows], page.matching, any_agent
    every = await sku_rows(client)
    chosen = select_rows(every, query, None, client.now())
    end = offset + limit if limit else None
    return [line_of_row(row) for row in chosen[offset:end]], len(chosen), bool(every)


def writable(path: str) -> None:
    """A file the command will write: its folder must exist, checked before any work is done."""
    folder = Path(path).expanduser().resolve().parent
    if not folder.is_dir():
        raise OperatorError(f"cannot write {path}: there is no folder {folder}")
    if Path(path).is_dir():
        raise OperatorError(f"cannot write {path}: it is a folder")


async def cmd_timeline(client: RestateClient, args: argparse.Namespace) -> int:
    from replenisher.timeline.html import render_html
    from replenisher.timeline.text import render_text

    if args.html:
        writable(args.html)
    timeline = await load_timeline(client, args.sku, args.run)
    if args.html:
        try:
            await asyncio.to_thread(Path(args.html).write_text, render_html(timeline))
        except OSError as e:
            raise OperatorError(f"cannot write {args.html}: {e.strerror or e}") from e
    if args.json:
        print(json.dumps(timeline.model_dump(mode="json"), indent=2))
    else:
        print(render_text(timeline, width=args.width or terminal_width()))
        if args.html:
            print(f"\nwrote {args.html}")
    return 0


async def note_if_down(client: RestateClient) -> None:
    """For a command that reads Restate's storage only: whether the service is down, so the
    output carries the note that it shows what the agents last saved."""
    if client.degraded is None and (health := await client.health()).service_down:
        client.degraded = health


async def cmd_outcomes(client: RestateClient, args: argparse.Namespace) -> int:
    results = await recent_outcomes(client, args.sku, args.limit)
    await note_if_down(client)

    def human() -> str:
        if not results:
            return "no replenishment has ended yet"
        out = [("run", "outcome", "received", "unit price", "supplier", "took", "ended", "detail", "decision")]
        for o in results:
            out.append(
                (
                    o.run_id,
                    o.outcome,
                    f"{o.quantity_received}/{o.quantity_ordered}",
                    f"{o.unit_price:.2f}" if o.unit_price is not None else "-",
                    o.supplier or "-",
                    duration(o.ended_at - o.started_at),
                    clock(o.ended_at),
                    shorten(o.detail, 40),
                    shorten(o.decision or "-", 70),
                )
            )
        return table(out)

    emit(args, results, human)
    return 0


async def cmd_cost(client: RestateClient, args: argparse.Namespace) -> int:
    rows = await costs(client, args.sku)

    def human() -> str:
        if not rows:
            return "no SKU agents yet"
        out = [("SKU", "model calls", "tokens in/out", "model USD", "refused", "fallbacks", "active run USD", "bought")]
        for row in rows:
            ledger, live, usage = row.model, row.running_run_model, row.model.usage
            tokens_in = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
            out.append(
                (
                    row.sku,
                    str(ledger.calls),
                    f"{_k(tokens_in)}/{_k(usage.output_tokens)}",
                    f"{ledger.usd:.4f}",
                    str(ledger.refused),
                    str(ledger.fallbacks),
                    f"{live.usd:.4f}" if live else "-",
                    f"{row.bought:,.2f}",
                )
            )
        total_usd = sum(r.model.usd + (r.running_run_model.usd if r.running_run_model else 0.0) for r in rows)
        total_bought = sum(r.bought for r in rows)
        lines = [table(out), "", f"model spend {total_usd:.4f} USD in all; bought {total_bought:,.2f}"]
        for row in rows:
            for run in row.by_run:
                model = f"model {run.model.usd:.4f} USD in {run.model.calls} calls"
                lines.append(f"  {run.run_id}: {model}, bought {run.bought:,.2f}")
        lines.append("(the offline decider costs nothing; `bought` counts received goods at their unit price)")
        return "\n".join(lines)

    emit(args, rows, human)
    return 0


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


# --- commands that are not thin clients ----------------------------------------------------


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def run_console(args: argparse.Namespace) -> int:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from replenisher.console.app import Console
    from replenisher.console.settings import (
        PEOPLE_FILE_ENV,
        PUBLIC_URL_ENV,
        SESSION_SECRET_ENV,
        ConsoleSettings,
        ConsoleSettingsError,
    )
    from replenisher.domain.authority import AuthorityFileError

    config = Config()
    config.bind = [f"{args.host}:{args.port}"]
    config.accesslog = None
    addresses = {"ingress_url": ingress_url(args), "admin_url": admin_url(args), "inbox_url": inbox_url(args)}
    environ = dict(os.environ)
    if args.people:
        environ[PEOPLE_FILE_ENV] = str(args.people)
    if environ.get(PEOPLE_FILE_ENV):
        # On this machine the two settings sign-in needs can be had without asking: a session secret of
        # this process's own (sessions then end when it stops) and its own address as the public URL.
        if not environ.get(SESSION_SECRET_ENV):
            environ[SESSION_SECRET_ENV] = secrets.token_urlsafe(48)
            print("sign-in sessions last until this console stops (no REPLENISHER_CONSOLE_SESSION_SECRET)")
        if not environ.get(PUBLIC_URL_ENV) and is_loopback(args.host):
            environ[PUBLIC_URL_ENV] = f"http://{args.host}:{args.port}"
    try:
        settings = ConsoleSettings.from_environment(environ).model_copy(update=addresses)
        if settings.sign_in is None and not is_loopback(args.host):
            raise ConsoleSettingsError(
                f"the console has no sign-in, so it serves loopback only, not {args.host}: anyone who reaches it "
                f"could approve purchases. Name the people ({PEOPLE_FILE_ENV}) to turn sign-in on"
            )
        app = Console(settings, now=time.time)
    except ConsoleSettingsError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except AuthorityFileError as e:
        print(f"error: {PEOPLE_FILE_ENV}: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        socket.create_server((args.host, args.port)).close()
    except OSError as e:
        print(
            f"error: cannot serve the console on {args.host}:{args.port}: {e.strerror or e} "
            "(is a console already running there? choose another with --port)",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    print(f"console on http://{args.host}:{args.port}" + (" (sign in first)" if settings.sign_in else ""))
    print(f"  Restate ingress {settings.ingress_url}, admin {settings.admin_url}; manager's inbox {settings.inbox_url}")
    print("Ctrl-C stops it")
    try:
        asyncio.run(serve(app, config))  # type: ignore[arg-type]
    except KeyboardInterrupt:
        pass
    return 0


# --- argument parsing -----------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="replenisher",
        description="Stock Replenisher: one durable agent per SKU.",
        epilog=COMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts instead of text for people")
    common.add_argument(
        "--ingress-url", help=f"Restate ingress (default $REPLENISHER_INGRESS_URL or {DEFAULT_INGRESS_URL})"
    )
    common.add_argument(
        "--admin-url", help=f"Restate admin API (default $REPLENISHER_ADMIN_URL or {DEFAULT_ADMIN_URL})"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the demo: ~20 SKUs for a few compressed weeks")
    demo.add_argument("--days", type=float, default=21, help="business days to simulate (default 21)")
    demo.add_argument("--day-seconds", type=float, default=1.0, help="seconds per business day (default 1)")
    sub.add_parser("up", help="start the local stack (same as `make up`)")
    sub.add_parser("down", help="stop the local stack, keeping its data")

    skus = sub.add_parser(
        "skus", parents=[common], help="the SKU agents, a page at a time: active run, what it waits for, last outcome"
    )
    skus.add_argument("--search", default="", metavar="TEXT", help="only SKUs whose name holds TEXT")
    skus.add_argument("--sort", choices=("sku", "waiting", "outcome"), default="sku", help="order (default sku)")
    skus.add_argument("--desc", action="store_true", help="the other way round")
    skus.add_argument(
        "--waiting",
        choices=("any", "manager", "supplier", "someone", "nobody"),
        default="any",
        help="whom they wait on",
    )
    skus.add_argument(
        "--limit", type=count, default=PER_PAGE, help=f"at most this many rows (default {PER_PAGE}; 0: all)"
    )
    skus.add_argument("--offset", type=count, default=0, help="skip this many rows first (default 0)")
    skus.add_argument(
        "--format", choices=("text", "json"), default="text", help="how to print the rows (text; json as --json)"
    )
    skus.add_argument(
        "--refill",
        action="store_true",
        help="fill the SKU list again from the agents' records first (done by itself the first time)",
    )
    sub.add_parser(
        "status", parents=[common], help="one SKU agent: active run, pending approval, outcomes"
    ).add_argument("sku")
    approve = sub.add_parser("approve", parents=[common], help="approve the SKU's pending PO up to a unit price")
    approve.add_argument("sku")
    approve.add_argument("--up-to", type=float, required=True, metavar="PRICE", help="highest unit price approved")
    reject = sub.add_parser("reject", parents=[common], help="reject the SKU's pending PO")
    reject.add_argument("sku")
    for decision in (approve, reject):
        decision.add_argument("--token", help="the approval token `status` shows; refused if the request changed")
        decision.add_argument("--note", default="", help="a note for the record")
        decision.add_argument("--by", default="manager (cli)", help="who decides (default: manager (cli))")
        decision.add_argument(
            "--as",
            dest="person",
            metavar="PERSON",
            help="the person of the authority matrix (REPLENISHER_PEOPLE_FILE) the decision is for; "
            "sent with the digest of the PO as the run shows it (default: the personal token's person)",
        )
        decision.add_argument(
            "--credential-file",
            type=Path,
            metavar="FILE",
            help=f"your personal token (made in the console's Tokens page); default: ${PERSONAL_TOKEN_ENV}",
        )
        decision.add_argument("--no-wait", action="store_true", help="do not wait for the run to read the decision")
        decision.add_argument("--wait-seconds", type=float, default=30.0, help="how long to wait for that (30)")

    timeline = sub.add_parser("timeline", parents=[common], help="a replenishment as a timeline")
    timeline.add_argument("sku")
    timeline.add_argument("--run", type=int, metavar="N", help="run number (default: the active run, else the last)")
    timeline.add_argument("--html", metavar="FILE", help="also write a self-contained HTML/SVG timeline to FILE")
    timeline.add_argument("--width", type=int, help="text width (default: the terminal's)")

    outcomes = sub.add_parser("outcomes", parents=[common], help="how recent replenishments ended")
    outcomes.add_argument("sku", nargs="?")
    outcomes.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    sub.add_parser("cost", parents=[common], help="model cost per SKU and run, and what was bought").add_argument(
        "sku", nargs="?"
    )

    deliver = sub.add_parser("deliver", parents=[common], help="send a message to a SKU's address")
    deliver.add_argument("sku")
    deliver.add_argument("event", choices=["approval", "supplier-reply", "goods"])
    deliver.add_argument("payload", help="the message as JSON")
    deliver.add_argument("--idempotency-key", help="deliver once however often this is repeated")
    for name, text in [
        ("check", "read stock now and start a replenishment if it is low"),
        ("watch", "check stock every business day on a durable timer"),
        ("unwatch", "stop the periodic check"),
    ]:
        cmd = sub.add_parser(name, parents=[common], help=text)
        cmd.add_argument("sku")
        if name == "watch":
            cmd.add_argument("--every", type=float, metavar="DAYS", help="business days between checks")

    from replenisher.deployments_command import add_parser as add_deployments
    from replenisher.people_command import add_parsers as add_people
    from replenisher.replay_command import add_parser as add_replay
    from replenisher.upgrade.command import add_parser as add_upgrade_check

    add_replay(sub, common)
    add_upgrade_check(sub)
    add_people(sub, common)
    add_deployments(sub, common)

    console = sub.add_parser("console", parents=[common], help="serve the manager's web console")
    console.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: keep it private)")
    console.add_argument(
        "--port", type=int, default=DEFAULT_CONSOLE_PORT, help=f"port (default {DEFAULT_CONSOLE_PORT})"
    )
    console.add_argument(
        "--people",
        type=Path,
        metavar="FILE",
        help="sign people in: the team's authority matrix (default $REPLENISHER_PEOPLE_FILE; without: no sign-in)",
    )
    for command in sub.choices.values():
        # Its own usage for a wrong option (`skus --bogus`), not the top-level one.
        command.set_defaults(command_parser=command)
    return p


HANDLERS: dict[str, Callable[[RestateClient, argparse.Namespace], Awaitable[int]]] = {
    "check": cmd_check,
    "watch": cmd_watch,
    "unwatch": cmd_unwatch,
    "deliver": cmd_deliver,
    "status": cmd_status,
    "approve": cmd_decide,
    "reject": cmd_decide,
    "skus": cmd_skus,
    "timeline": cmd_timeline,
    "outcomes": cmd_outcomes,
    "cost": cmd_cost,
}


async def run_client_command(args: argparse.Namespace, now: Callable[[], float] = time.time) -> int:
    """Run a command over Restate; `now` is the one clock its output is written against."""
    async with RestateClient(ingress_url(args), admin_url(args), now=now) as client:
        try:
            code = await HANDLERS[args.command](client, args)
        except Accepted as e:
            if args.json:
                since = e.health.since
                print(json.dumps({"accepted": True, "invocation_id": e.invocation_id, "service_down_since": since}))
            else:
                print(f"{e}.")
            return EXIT_ACCEPTED
        except Blocked as e:
            if args.json:
                paused = e.paused.model_dump(mode="json")
                print(json.dumps({"blocked": True, "invocation_id": e.invocation_id, "paused": paused}))
            else:
                print(f"{e}.")
            return EXIT_BLOCKED
        if client.degraded is not None and not args.json and code != EXIT_ACCEPTED:
            print(down_banner(client).rstrip(), file=sys.stderr)
        return code


def main(argv: Iterable[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`replenisher cost | head -1`): not an error of ours. Python
        # would still complain flushing stdout at exit, so stdout goes nowhere from here.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Iterable[str] | None) -> int:
    args, extra = parser().parse_known_args(list(argv) if argv is not None else None)
    if extra:
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "demo":
        from replenisher.demo import run_demo

        return run_demo(days=args.days, day_seconds=args.day_seconds)
    if args.command in ("up", "down"):
        from replenisher.stack.__main__ import main as stack_main

        return stack_main([args.command])
    if args.command == "console":
        return run_console(args)
    if args.command in ("people", "audit"):
        from replenisher.people_command import run_audit, run_people

        return run_people(args) if args.command == "people" else run_audit(args, ingress_url(args), admin_url(args))
    if args.command == "deployments":
        from replenisher.deployments_command import run as run_deployments

        return run_deployments(args, ingress_url(args), admin_url(args))
    if args.command == "replay":
        from replenisher.replay_command import run as run_replay

        return run_replay(args, admin_url(args))
    if args.command == "upgrade-check":
        from replenisher.upgrade.command import run as run_upgrade_check

        return run_upgrade_check(args)
    if getattr(args, "format", None) == "json":
        args.json = True  # `skus --format json`: the same as --json, in what it prints and what it leaves out
    try:
        return asyncio.run(run_client_command(args))
    except Unreachable as e:
        print(f"error: {e} (start it with `make up`)", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ServiceDown as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_SERVICE_DOWN
    except OperatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main())
