"""The SKU agent's own record: the entity that lives as long as the SKU is stocked.

It decides when a replenishment starts (at most one at a time), numbers the messages it
routes to the active run so each is consumed in order and once, keeps messages nobody
is waiting for, and remembers outcomes in bounded space: a capped list of recent results
plus rolling statistics, so the record stays small however many years it runs.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, model_validator

from replenisher.domain.calendar import CalendarClock
from replenisher.domain.costs import CostLedger
from replenisher.domain.documents import OPERATOR, EventKind, Sender, StockLevel, is_sku_id
from replenisher.domain.memory import SkuMemory
from replenisher.domain.migrations import SKU_RECORD_STEPS, migrate
from replenisher.domain.outcomes import Outcome, ReplenishmentResult
from replenisher.domain.security_log import SecurityLog
from replenisher.domain.waits import WaitOverrides

SKU_SCHEMA_VERSION = 4
RECENT_OUTCOMES = 20
KEPT_MESSAGES = 100
ROUTED_PER_SENDER = 100
"""Messages one sender may route to one run; past it its messages are kept instead. Per sender,
not per run: a cap shared by all let one supplier's junk push the manager's approval and the
warehouse's goods off the run (kept, never read), so the run waited out its deadline."""
ROUTED_BYTES_PER_SENDER = 256 * 1024
"""And the bytes of payload one sender may route to one run. A count alone let one supplier's
key grow the record to 13 MB (100 replies of 64 KiB routed, 100 kept), and Restate then read
and wrote all of it on every message: each of the SKU's handlers slowed to over a second."""
KEPT_BYTES = 512 * 1024
"""The bytes of payload the kept messages may hold together, besides their count."""
RECONCILE_BACKOFF_STEPS = 4
"""Reconciliation of an order that may exist backs off to at most 2**4 re-check intervals, never stops."""


def check_fraction(sku: str) -> float:
    """Where in the working day the SKU's stock checks fall, from 0 (opening) to 1 (closing): a hash
    of its name, the same in every process and release, so a plant's SKUs spread over the day."""
    return int.from_bytes(hashlib.sha256(sku.encode()).digest()[:4], "big") / 2**32


def reconcile_delay_days(attempts: int, recheck_days: float) -> float:
    """The first look at once, then 1, 2, 4, 8, 16, 16, ... re-check intervals."""
    if attempts == 0:
        return 0.0
    return recheck_days * 2 ** min(attempts - 1, RECONCILE_BACKOFF_STEPS)


def _operator_if_null(sender: object) -> object:
    """Records written before an operator was named kept an operator's messages with a null sender."""
    return OPERATOR if sender is None else sender


NamedSender = Annotated[Sender, BeforeValidator(_operator_if_null)]


class RoutedMessage(BaseModel):
    event: EventKind
    seq: int
    payload: dict[str, Any] = Field(description="as kept: an approval's token withheld")
    at: float
    sender: NamedSender = Field(default=OPERATOR, description="`operator`: a caller on the internal ingress")


class KeptMessage(BaseModel):
    """A message no run consumed. Kept and reported: someone must look at it."""

    event: EventKind
    payload: dict[str, Any] = Field(description="as kept: an approval's token withheld")
    po_number: str | None = None
    at: float
    reason: str
    run_id: str | None = None
    sender: NamedSender = OPERATOR


def payload_bytes(payload: dict[str, Any]) -> int:
    """What a payload weighs in the record: its compact JSON."""
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())


def _party(message: KeptMessage) -> str:
    return message.sender.party


RUN_PREFIX = "replenish-"


def run_id_of(sku: str, number: int) -> str:
    """The id of the SKU's `number`-th run (from 1): the key of its `Replenish` workflow."""
    return f"{RUN_PREFIX}{sku}-{number}"


def split_run_id(run_id: str) -> tuple[str, str]:
    """`run_id_of` undone, unchecked, for ids Restate holds: (SKU, number). A SKU may hold
    dashes; the number is the part after the last one."""
    sku, _, number = run_id.removeprefix(RUN_PREFIX).rpartition("-")
    return sku, number


def parse_run_id(run_id: str) -> tuple[str, int] | None:
    """`run_id_of` undone and checked: (SKU, number), or None for text no run was ever named."""
    sku, number = split_run_id(run_id)
    if not run_id.startswith(RUN_PREFIX) or not is_sku_id(sku):
        return None
    if not (number.isascii() and number.isdigit()) or number.startswith("0") or len(number) > 12:
        return None
    return sku, int(number)


class ActiveRun(BaseModel):
    run_id: str
    started_at: float
    on_hand: int
    safety_stock: int
    routed: list[RoutedMessage] = Field(default_factory=list)

    def next_seq(self, event: EventKind) -> int:
        return sum(1 for m in self.routed if m.event == event)


class OutcomeStats(BaseModel):
    """Rolling figures over every run this SKU ever had, in constant space."""

    runs: int = 0
    by_outcome: dict[Outcome, int] = Field(default_factory=dict)
    total_received: int = 0
    messages_consumed: int = Field(default=0, description="messages runs read, for the audit that none was lost")
    mean_cycle_seconds: float = 0.0
    mean_unit_price: float | None = None

    def add(self, result: ReplenishmentResult) -> None:
        self.runs += 1
        self.by_outcome[result.outcome] = self.by_outcome.get(result.outcome, 0) + 1
        # Goods an earlier run of the same PO booked were counted with that run.
        self.total_received += result.quantity_received - result.received_before
        self.messages_consumed += sum(result.consumed.values())
        cycle = max(result.ended_at - result.started_at, 0.0)
        self.mean_cycle_seconds += (cycle - self.mean_cycle_seconds) / self.runs
        self._count_price(result)

    def amend(self, old: Outcome, new: ReplenishmentResult) -> None:
        """A run's outcome became known later (an unknown order was reconciled)."""
        self.by_outcome[old] = self.by_outcome.get(old, 1) - 1
        if not self.by_outcome[old]:
            del self.by_outcome[old]
        self.by_outcome[new.outcome] = self.by_outcome.get(new.outcome, 0) + 1
        # Its goods were counted when it ended (and those after, with the run that followed it up).
        self._count_price(new)

    def _count_price(self, result: ReplenishmentResult) -> None:
        if result.outcome == "received" and result.unit_price is not None:
            n = self.by_outcome["received"]
            previous = self.mean_unit_price or 0.0
            self.mean_unit_price = previous + (result.unit_price - previous) / n


class Watch(BaseModel):
    watching: bool = False
    interval_days: float = 1.0
    generation: int = 0
    pending_tick: str | None = None


class Reconciling(BaseModel):
    """The SKU's own durable timer for settling an order that may exist, with its backoff."""

    run_id: str = Field(description="the unresolved run being reconciled")
    attempts: int = 0
    after_days: float = Field(default=0.0, description="the backoff before this attempt, in business days")
    due_at: float


class LastCheck(BaseModel):
    at: float
    on_hand: int
    safety_stock: int
    started: str | None = None
    held_until: float | None = None


class Listed(BaseModel):
    """What the agent last put on the SKU list (`domain.sku_list.listing`): its count of changes and a digest."""

    revision: int = 0
    digest: str | None = None


class SkuRecord(BaseModel):
    schema_version: int = SKU_SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return migrate(data, SKU_RECORD_STEPS, SKU_SCHEMA_VERSION, "a SKU record")

    sku: str
    runs_started: int = 0
    active: ActiveRun | None = None
    outcomes: list[ReplenishmentResult] = Field(default_factory=list)
    stats: OutcomeStats = Field(default_factory=OutcomeStats)
    kept: list[KeptMessage] = Field(default_factory=list)
    kept_overflow: int = 0
    watch: Watch = Field(default_factory=Watch)
    last_check: LastCheck | None = None
    hold_until: float | None = None
    waits: WaitOverrides = Field(default_factory=WaitOverrides, description="this SKU's own wait lengths")
    unresolved: ReplenishmentResult | None = Field(
        default=None, description="a run that ended with an order that may exist: no new run until it is reconciled"
    )
    reconciling: Reconciling | None = Field(default=None, description="when the SKU next looks the order up")
    memory: SkuMemory = Field(default_factory=SkuMemory)
    costs: CostLedger = Field(default_factory=CostLedger, description="model spend over every run of this SKU")
    security: SecurityLog = Field(default_factory=SecurityLog)
    listed: Listed = Field(default_factory=Listed, description="the agent's last entry on the SKU list")

    def consider(self, stock: StockLevel, at: float) -> ActiveRun | None:
        """A stock reading: start a replenishment if below safety stock, none is active, and
        the SKU is not resting after a run that ended without goods."""
        started = None
        held = self.hold_until is not None and at < self.hold_until
        # While an order may exist at a supplier, ordering again could buy the stock twice.
        if stock.on_hand < stock.safety_stock and self.active is None and not held and self.unresolved is None:
            self.runs_started += 1
            started = ActiveRun(
                run_id=run_id_of(self.sku, self.runs_started),
                started_at=at,
                on_hand=stock.on_hand,
                safety_stock=stock.safety_stock,
            )
            self.active = started
        self.last_check = LastCheck(
            at=at,
            on_hand=stock.on_hand,
            safety_stock=stock.safety_stock,
            started=started.run_id if started else None,
            held_until=self.hold_until if held else None,
        )
        return started

    def route(
        self, event: EventKind, payload: dict[str, Any], at: float, sender: Sender | None = None
    ) -> RoutedMessage | None:
        """Number the message for the active run; None when it was kept instead.

        `payload` is what the record keeps: the caller withholds secrets before (the run
        gets the message itself)."""
        sender = sender or OPERATOR
        active = self.active
        if active is None:
            self.keep(KeptMessage(event=event, payload=payload, at=at, reason="no active replenishment", sender=sender))
            return None
        theirs = [m for m in active.routed if m.sender == sender]
        party = sender.party
        too_many = None
        if len(theirs) >= ROUTED_PER_SENDER:
            too_many = f"too many messages from {party} for one run"
        elif sum(payload_bytes(m.payload) for m in theirs) + payload_bytes(payload) > ROUTED_BYTES_PER_SENDER:
            too_many = f"messages from {party} for one run over {ROUTED_BYTES_PER_SENDER // 1024} KiB"
        if too_many is not None:
            # Kept, and a security event (one per sender and reason, counted): a flood is visible
            # in the log without growing it.
            self.security.record(party, f"{event} message kept, not routed: {too_many}", at, run_id=active.run_id)
            self.keep(
                KeptMessage(event=event, payload=payload, at=at, reason=too_many, run_id=active.run_id, sender=sender)
            )
            return None
        message = RoutedMessage(event=event, seq=active.next_seq(event), payload=payload, at=at, sender=sender)
        active.routed.append(message)
        return message

    def finish(self, result: ReplenishmentResult, rest_seconds: float = 0.0) -> bool:
        """Record a run's outcome. False for a stale or repeated callback (changes nothing).

        After a run that ended without goods (the manager said no, no approvable price,
        the order's fate unknown) the SKU rests for `rest_seconds` before the next run, so
        a price the manager will not pay is not put to them again every day.
        """
        active = self.active
        if active is None or active.run_id != result.run_id:
            return False
        for message in active.routed:
            if message.seq >= result.consumed.get(message.event, 0):
                self.keep(
                    KeptMessage(
                        event=message.event,
                        payload=message.payload,
                        at=message.at,
                        reason=f"{result.run_id} ended ({result.outcome}) before reading it",
                        run_id=result.run_id,
                        sender=message.sender,
                    )
                )
        if result.observations is not None:
            self.memory.learn(result.observations)
        self.costs.add(result.cost)
        # The observations live on in the memory; the outcome list stays small.
        self.outcomes = [*self.outcomes, result.model_copy(update={"observations": None})][-RECENT_OUTCOMES:]
        self.stats.add(result)
        self.active = None
        following = self.unresolved is not None and result.adopted_from == self.unresolved.run_id
        if result.outcome == "unknown":
            # Still open (or still unseen) after the follow-up: that run is now the one to settle;
            # the earlier ones stay "unknown" until the order's fate is known.
            self.unresolved = result
        elif following:
            detail = f"reconciled: the order was found and {result.run_id} followed it up"
            self.settle_unresolved(result.outcome, detail)
        self.hold_until = result.ended_at + rest_seconds if result.outcome != "received" else None
        return True

    def settle_unresolved(self, outcome: Outcome, detail: str) -> None:
        """The order's fate is known now: amend every run of its PO still shown unknown, free the SKU."""
        unresolved = self.unresolved
        assert unresolved is not None
        po_number = unresolved.po_number

        def of_this_order(o: ReplenishmentResult) -> bool:
            return o.run_id == unresolved.run_id or (
                o.outcome == "unknown" and po_number is not None and o.po_number == po_number
            )

        amended = []
        for o in self.outcomes:
            if of_this_order(o):
                o = o.model_copy(update={"outcome": outcome, "detail": detail})
                self.stats.amend("unknown", o)
            amended.append(o)
        if not any(o.run_id == unresolved.run_id for o in self.outcomes):
            self.stats.amend("unknown", unresolved.model_copy(update={"outcome": outcome}))
        self.outcomes = amended
        self.unresolved = None
        self.reconciling = None

    def next_reconcile(
        self, at: float, recheck_days: float, day_seconds: float, clock: CalendarClock | None = None
    ) -> float | None:
        """Seconds until the SKU should look the unresolved order up again; None when nothing is left to do.

        A new unresolved run is looked up at once; each further attempt for the same run backs
        off. A follow-up run in flight settles it itself (and its end schedules anew if needed).
        """
        unresolved = self.unresolved
        if unresolved is None or unresolved.po is None or self.active is not None:
            self.reconciling = None
            return None
        previous = self.reconciling
        attempts = previous.attempts + 1 if previous is not None and previous.run_id == unresolved.run_id else 0
        after = reconcile_delay_days(attempts, recheck_days)
        # On the site calendar when given: the backoff counts business days, not weekends.
        delay = clock.after(at, after) - at if clock is not None else after * day_seconds
        self.reconciling = Reconciling(run_id=unresolved.run_id, attempts=attempts, after_days=after, due_at=at + delay)
        return delay

    def follow_up(self, at: float) -> tuple[ActiveRun, list[RoutedMessage]]:
        """The unknown order exists: a new run follows it up, with the messages kept for its PO."""
        unresolved = self.unresolved
        assert unresolved is not None and unresolved.po is not None and self.active is None
        self.runs_started += 1
        run = ActiveRun(run_id=run_id_of(self.sku, self.runs_started), started_at=at, on_hand=0, safety_stock=0)
        self.active = run
        po_number = unresolved.po.po_number
        mine = [m for m in self.kept if m.po_number == po_number]
        self.kept = [m for m in self.kept if m.po_number != po_number]
        routed = [self.route(m.event, m.payload, m.at, m.sender) for m in mine]
        return run, [m for m in routed if m is not None]

    def keep(self, message: KeptMessage) -> None:
        # Bounded, but never silent: what falls off the end is counted where status shows it.
        if message.po_number is None:
            message = message.model_copy(update={"po_number": message.payload.get("po_number")})
        self.kept.append(message)
        sizes = [payload_bytes(m.payload) for m in self.kept]
        while len(self.kept) > KEPT_MESSAGES or sum(sizes) > KEPT_BYTES:
            # The oldest message of the sender holding the most (messages, or bytes when those are
            # over) goes: one supplier's flood evicts its own, never the warehouse's goods or
            # another party's replies.
            held: Counter[str] = Counter()
            for m, size in zip(self.kept, sizes, strict=True):
                held[_party(m)] += 1 if len(self.kept) > KEPT_MESSAGES else size
            most = max(held.values())
            i = next(i for i, m in enumerate(self.kept) if held[_party(m)] == most)
            del self.kept[i], sizes[i]
            self.kept_overflow += 1

    @property
    def last_outcome(self) -> ReplenishmentResult | None:
        return self.outcomes[-1] if self.outcomes else None


class SkuView(SkuRecord):
    """A SKU's record as `status` answers it: with the site's time of the working day its checks
    fall at, worked out from the calendar when asked (never stored)."""

    check_time: str | None = Field(
        default=None, description="while watched every business day or more: its checks' time of day (HH:MM)"
    )
