"""`SkuAgent`: one virtual object per SKU, for the SKU's whole life.

It checks stock (on demand and on its own durable timer), starts at most one
replenishment at a time without ever blocking on it, is the SKU's single address for
the manager, suppliers and warehouse, and keeps the outcomes. Handlers are exclusive
per SKU, so any number of racing checks start one replenishment.

Its runs start through `runs`; an order a run left unresolved is settled by `reconcile`;
what it says to its runs and they to it is in `contracts`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import restate
from pydantic import BaseModel, ConfigDict, Field, SecretBytes, ValidationError
from restate import ObjectContext, ObjectSharedContext
from restate.exceptions import TerminalError

from replenisher.domain.authority import Standing
from replenisher.domain.credentials import BadToken, verify
from replenisher.domain.documents import (
    EVENT_PAYLOADS,
    OPERATOR_PARTY,
    SKU_ID,
    ApprovalDecision,
    EventKind,
    GoodsReceipt,
    Sender,
    StockLevel,
)
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security import SecurityNotes, receipt_refusal, redacted_payload
from replenisher.domain.sku import SkuRecord, SkuView, check_fraction
from replenisher.domain.sku_list import listing, shard_key_of
from replenisher.domain.waits import WaitOverrides
from replenisher.durable import retention
from replenisher.durable.clock import Timed, journaled_time
from replenisher.durable.contracts import (
    DELIVER_TO_RUN,
    LIST_PUT,
    SKU_AGENT,
    Message,
    RoutedArrival,
    RoutedQuery,
)
from replenisher.durable.probes import crash_point
from replenisher.durable.reconcile import reconcilable, reconcile
from replenisher.durable.runs import start_run
from replenisher.durable.steps import step, timed_step
from replenisher.durable.stored import load_stored
from replenisher.durable.validation import bad_request, describe, validated
from replenisher.inbound.stamp import vouched_sender
from replenisher.loop import names
from replenisher.wiring import settings, wiring

sku_agent = restate.VirtualObject(SKU_AGENT, **retention.OBJECT)

RECORD = names.SKU_RECORD


class Delivery(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a field it does not know is a mistake, not a no-op

    event: EventKind
    payload: dict[str, Any]
    sender: Sender | None = Field(
        default=None, description="stamped by the inbound endpoint; absent: an operator on the internal ingress"
    )
    received_at: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="the inbound endpoint's clock when it arrived"
    )
    stamp: str | None = Field(
        default=None,
        max_length=100,
        description="the inbound endpoint's stamp; without it `sender` is an operator's say",
    )


class Delivered(BaseModel):
    sku: str
    event: EventKind
    run_id: str | None = Field(description="the run the message was routed to; None if it was kept")
    seq: int | None = None
    kept: bool


class CheckResult(BaseModel):
    sku: str
    on_hand: int
    safety_stock: int
    started: str | None = Field(description="the replenishment this check started, if any")
    active: str | None
    held_until: float | None = Field(default=None, description="resting after a run that ended without goods")


MIN_CHECK_INTERVAL_DAYS = 0.01
"""About a quarter of an hour of a business day. Without a floor, `interval_days: 1e-300` passed
`gt=0` and the SKU ticked in a hot loop, a stock read from the ERP each time, until unwatched."""


class WatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # `{"interval": 2}` is a typo, not a default watch

    interval_days: float | None = Field(default=None, ge=MIN_CHECK_INTERVAL_DAYS, le=365)


class Tick(BaseModel):
    generation: int


class ReconcileTick(BaseModel):
    run_id: str


def sku_key(ctx: ObjectContext) -> str:
    """The agent's key, which must be a SKU id (`Sku`), else a 400 before anything is asked of
    the ERP: a key of `..` made the stock read's URL `/erp/` instead of `/erp/stock/..`."""
    key = ctx.key()
    try:
        return SKU_ID.validate_python(key)
    except ValidationError as e:
        raise bad_request(f"not a SKU id: {key[:80]!r} ({describe(e)})") from e


def save(ctx: ObjectContext, record: SkuRecord) -> None:
    """The record, stored; and its entry on the SKU list, sent when it changed (`domain.sku_list.listing`).

    Every handler saves as its last act, with nothing awaited after: a journal written by code that
    did not send the entry replays to its end before the send, so no waiting call diverges."""
    entry = listing(record)
    ctx.set(RECORD, record)
    if entry is not None:
        LIST_PUT.send(ctx, shard_key_of(record.sku), entry)


async def load(ctx: ObjectContext | ObjectSharedContext) -> SkuRecord | None:
    return await load_stored(ctx, RECORD, SkuRecord)


async def load_or_create(ctx: ObjectContext) -> SkuRecord:
    """The SKU's record; a first contact must name a SKU the ERP knows (404 otherwise)."""
    record = await load(ctx)
    if record is None:
        sku_key(ctx)
        await read_stock(ctx)
        record = SkuRecord(sku=ctx.key())
    return record


async def read_stock(ctx: ObjectContext) -> Timed[StockLevel]:
    """The ERP's stock level, journaled with the clock as it was read: the check's time."""
    try:
        return await timed_step(ctx, names.READ_STOCK, StockLevel, wiring().world.erp.get_stock, ctx.key())
    except TerminalError as e:
        if e.status_code == 404:
            raise TerminalError(f"unknown SKU {ctx.key()!r}: the ERP does not stock it", status_code=404) from e
        raise TerminalError(f"could not read stock of {ctx.key()!r} from the ERP: {e.message}", status_code=503) from e


async def check_stock(ctx: ObjectContext, record: SkuRecord) -> CheckResult:
    """Read the stock and consider it; the check's time is then `record.last_check.at`."""
    read = await read_stock(ctx)
    stock = read.value
    # The clock as the stock was read, journaled with it; read afresh only after a lookup of an
    # unresolved order, whose steps and waits come in between.
    looked_up = reconcilable(record)
    following_up = await reconcile(ctx, record, stock)
    now = await journaled_time(ctx) if looked_up else read.at
    started = record.consider(stock, now)
    if started is not None:
        # A send, not a call: the agent stays free for messages while the run takes weeks.
        await start_run(ctx, started.run_id, record, stock, now)
    started = started or (record.active if following_up else None)
    return CheckResult(
        sku=record.sku,
        on_hand=stock.on_hand,
        safety_stock=stock.safety_stock,
        started=started.run_id if started else None,
        active=record.active.run_id if record.active else None,
        held_until=record.last_check.held_until if record.last_check else None,
    )


@sku_agent.handler()
async def check(ctx: ObjectContext) -> CheckResult:
    """Read stock now; start a replenishment if it is below safety stock and none is active."""
    record = await load(ctx) or SkuRecord(sku=sku_key(ctx))
    result = await check_stock(ctx, record)
    save(ctx, record)
    return result


@validated(sku_agent.handler)
async def watch(ctx: ObjectContext, request: WatchRequest) -> SkuRecord:
    """Check stock on a durable timer, every `interval_days` business days."""
    record = await load_or_create(ctx)
    record.watch.watching = True
    record.watch.interval_days = request.interval_days or settings().check_interval_days
    if record.watch.pending_tick is None:
        await schedule_tick(ctx, record, first=True)
    save(ctx, record)
    return record


@validated(sku_agent.handler)
async def configure(ctx: ObjectContext, waits: WaitOverrides) -> SkuRecord:
    """Change this SKU's own wait lengths (business days): a field given sets it, `null` sets
    it back to the default, a field left out keeps what it was.

    Applies to replenishments that start from now on: a waiting run keeps its deadlines.
    """
    record = await load_or_create(ctx)
    record.waits = record.waits.merged(waits)
    save(ctx, record)
    return record


@sku_agent.handler()
async def unwatch(ctx: ObjectContext) -> SkuRecord:
    record = await load_or_create(ctx)
    record.watch.watching = False
    record.watch.generation += 1
    if record.watch.pending_tick is not None:
        ctx.cancel_invocation(record.watch.pending_tick)
        record.watch.pending_tick = None
    save(ctx, record)
    return record


@validated(sku_agent.handler, ingress_private=True)
async def tick(ctx: ObjectContext, request: Tick) -> None:
    record = await load(ctx)
    if record is None or not record.watch.watching or request.generation != record.watch.generation:
        return  # a timer from before an unwatch: nothing to do
    record.watch.pending_tick = None
    checked_at: float | None = None
    try:
        await check_stock(ctx, record)
        checked_at = record.last_check.at if record.last_check else None
    except TerminalError as e:
        # The ERP being away must not stop the watch: note it and try at the next tick.
        ctx.set(names.LAST_CHECK_ERROR, e.message)
    await schedule_tick(ctx, record, now=checked_at)
    # For the tests: this attempt's sends (the run it started, the next tick) are in Restate's
    # journal, and the tick is not done.
    crash_point(ctx.key(), names.NEXT_CHECK, "after")
    save(ctx, record)


async def schedule_tick(ctx: ObjectContext, record: SkuRecord, first: bool = False, now: float | None = None) -> None:
    """The next check about `interval_days` business days from `now` (the check's clock; else read
    now), at the SKU's own time of the working day: no checks over weekends and holidays, and a
    plant's SKUs spread over the day rather than all at the moment they were put under watch."""
    if first:
        delay = None
    else:
        at = now if now is not None else await journaled_time(ctx)
        delay = settings().check_after(at, record.watch.interval_days, record.sku)
    handle = ctx.object_send(tick, ctx.key(), Tick(generation=record.watch.generation), send_delay=delay)
    record.watch.pending_tick = await handle.invocation_id()


@validated(sku_agent.handler)
async def deliver(ctx: ObjectContext, delivery: Delivery) -> Delivered:
    """The SKU's address: route a message to the active run, in order and once, or keep it.

    Goods count only as the ERP booked them: the receipt is looked up by its id, and the
    ERP's record, not the message's numbers, is what the run gets.
    """
    sku_key(ctx)
    model = EVENT_PAYLOADS[delivery.event]
    try:
        document = model.model_validate(delivery.payload)
    except ValidationError as e:
        raise bad_request(f"payload for {delivery.event!r}: {describe(e)}") from e
    if isinstance(document, GoodsReceipt) and document.sku != ctx.key():
        raise bad_request(f"goods receipt for {document.sku!r} sent to {ctx.key()!r}")
    record = await load_or_create(ctx)
    now = await journaled_time(ctx)
    sender, received_at = vouched_sender(
        door_key(), ctx.key(), delivery.event, delivery.payload, delivery.sender, delivery.received_at, delivery.stamp
    )
    if isinstance(document, GoodsReceipt):
        document = await booked_receipt(ctx, record, document, sender, now)
    payload = document.model_dump(mode="json")
    # A clock ahead of ours must not date a message into the future (deadlines compare to it).
    arrived_at = min(received_at, now) if received_at is not None else now
    routed = record.route(delivery.event, redacted_payload(payload), arrived_at, sender)
    if routed is not None:
        assert record.active is not None
        standing = None
        if isinstance(document, ApprovalDecision):
            standing = await standing_of(ctx, document, sender, arrived_at)
            # The token proved who sent it; the run needs only the standing read with it.
            payload = document.model_copy(update={"credential": None}).model_dump(mode="json")
        message = Message(
            event=routed.event, seq=routed.seq, payload=payload, sender=sender, arrived_at=arrived_at, standing=standing
        )
        DELIVER_TO_RUN.send(ctx, record.active.run_id, message)
    save(ctx, record)
    return Delivered(
        sku=record.sku,
        event=delivery.event,
        run_id=record.active.run_id if routed and record.active else None,
        seq=routed.seq if routed else None,
        kept=routed is None,
    )


async def standing_of(
    ctx: ObjectContext, decision: ApprovalDecision, sender: Sender, arrived_at: float
) -> Standing | None:
    """The standing of the person a decision names, read from the authority matrix on the site date it
    arrived, as a journaled step: a replay reads the same standing even if the file changed since.
    None when it names no one or this service has no matrix (a run that needs one then refuses it).

    The inbox system's word (the manager's party, under the door's stamp) names its person; on the
    internal ingress (the CLI, the console) the decision counts as the person's only with their
    personal token (`domain.credentials`): else the standing says why not, and the run refuses it."""
    matrix = wiring().authority
    if decision.person is None or matrix is None:
        return None
    person, day = decision.person, settings().clock.local(arrived_at).date()
    key = settings().personal_token_key

    async def read() -> Standing:
        current = matrix.current()
        standing = current.standing(person, day)
        if sender.party != OPERATOR_PARTY or not standing.known:
            return standing
        refused = token_refusal(decision.credential, person, key, arrived_at, current.tokens_not_before(person))
        return standing.model_copy(update={"refused": refused}) if refused else standing

    return await step(ctx, names.standing(person), Standing, read)


def token_refusal(
    token: str | None, person: str, key: SecretBytes | None, now: float, not_before: float | None
) -> str | None:
    """Why a decision on the ingress does not count as `person`'s, or None when their token checks."""
    if key is None:
        return "this service has no personal token key (REPLENISHER_PERSONAL_TOKEN_KEY_FILE) to check who sent it"
    if token is None:
        return f"it comes without {person}'s personal token (make one in the console: Personal tokens)"
    try:
        verify(key.get_secret_value(), token, person=person, now=now, not_before=not_before)
    except BadToken as e:
        return str(e)
    return None


def door_key() -> bytes | None:
    """The key the inbound endpoint stamps its forwards with, if this service was given it."""
    key = settings().door_key
    return key.get_secret_value() if key is not None else None


class ReceiptLookup(BaseModel):
    booked: GoodsReceipt | None


async def booked_receipt(
    ctx: ObjectContext, record: SkuRecord, claimed: GoodsReceipt, sender: Sender, now: float
) -> GoodsReceipt:
    """The ERP's record of the claimed receipt; a receipt it does not hold is refused and recorded."""

    async def look_up() -> ReceiptLookup:
        return ReceiptLookup(booked=await wiring().world.erp.find_receipt(claimed.receipt_id))

    try:
        lookup = await step(ctx, names.receipt_lookup(claimed.receipt_id), ReceiptLookup, look_up)
    except TerminalError as e:
        raise TerminalError(f"could not check goods receipt with the ERP: {e.message}", status_code=503) from e
    refusal = receipt_refusal(claimed, lookup.booked, ctx.key())
    if refusal is None:
        assert lookup.booked is not None
        return lookup.booked
    what = f"goods receipt {claimed.receipt_id!r} from {sender.label!r} refused: {refusal}"
    run_id = record.active.run_id if record.active else "no active run"
    record.security.record(sender.party, what, now, run_id=run_id)
    save(ctx, record)
    raise TerminalError(f"refused: {what}", status_code=422)


@validated(sku_agent.handler, ingress_private=True)
async def arrival_of(ctx: ObjectContext, query: RoutedQuery) -> RoutedArrival:
    """When the run's `seq`-th message of a kind reached the SKU's address, if it has.

    Exclusive on purpose: a run whose deadline passed asks it, and Restate runs it only after
    the delivers it accepted for this SKU before (those held while the service was down)."""
    record = await load(ctx)
    active = record.active if record is not None else None
    if active is None or active.run_id != query.run_id:
        return RoutedArrival(arrived_at=None)
    routed = next((m for m in active.routed if m.event == query.event and m.seq == query.seq), None)
    return RoutedArrival(arrived_at=routed.at if routed else None)


@validated(sku_agent.handler, ingress_private=True)
async def finish(ctx: ObjectContext, result: ReplenishmentResult) -> None:
    """The run's completion callback: record the outcome and free the SKU for the next run."""
    record = await load(ctx)
    rest = settings().after(result.ended_at, settings().rest_after_failure_days).total_seconds()
    if record is not None and record.finish(result, rest_seconds=rest):
        if record.unresolved is not None and record.unresolved.run_id == result.run_id:
            await schedule_reconcile(ctx, record)
        save(ctx, record)


async def schedule_reconcile(ctx: ObjectContext, record: SkuRecord) -> None:
    """The SKU's own durable timer for an order that may exist: watched or not, it is looked up."""
    s = settings()
    delay = record.next_reconcile(await journaled_time(ctx), s.waits.status_recheck, s.day_seconds, s.clock)
    if delay is not None and record.reconciling is not None:
        tick = ReconcileTick(run_id=record.reconciling.run_id)
        ctx.object_send(reconcile_due, ctx.key(), tick, send_delay=timedelta(seconds=delay))


@validated(sku_agent.handler, ingress_private=True)
async def reconcile_due(ctx: ObjectContext, tick: ReconcileTick) -> None:
    """Look the unresolved order up by PO number; found, a run follows it up; still unseen, back off."""
    record = await load(ctx)
    if record is None or record.reconciling is None or record.reconciling.run_id != tick.run_id:
        return  # settled meanwhile (a check found it), or a timer of an earlier unresolved run
    try:
        stock = (await read_stock(ctx)).value
    except TerminalError as e:
        ctx.set(names.LAST_CHECK_ERROR, e.message)  # the ERP is away: the lookup waits for the next attempt
    else:
        await reconcile(ctx, record, stock)
    await schedule_reconcile(ctx, record)
    save(ctx, record)


@validated(sku_agent.handler, ingress_private=True)
async def note_security(ctx: ObjectContext, notes: SecurityNotes) -> None:
    """What a run's security log recorded since it last said, kept on the SKU's record as it happens."""
    record = await load(ctx)
    if record is not None:
        record.security.take(notes.events, await journaled_time(ctx), run_id=notes.run_id)
        save(ctx, record)


@sku_agent.handler(kind="shared")
async def status(ctx: ObjectSharedContext) -> SkuView:
    record = await load(ctx)
    if record is None:
        missing = f"no agent for SKU {ctx.key()!r} yet: check or watch starts one, if the ERP stocks the SKU"
        raise TerminalError(missing, status_code=404)
    watch = record.watch
    spread = watch.watching and watch.interval_days >= 1
    check_time = settings().calendar.time_of(check_fraction(record.sku)) if spread else None
    return SkuView.model_construct(**dict(record), check_time=check_time)
