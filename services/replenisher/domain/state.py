"""Everything one replenishment knows about its progress.

Only a tool's `apply` changes it, and only from a journaled result, so replaying the
journal rebuilds exactly the same state. Times are epoch seconds that came out of a
journaled step (never read from a clock here).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from replenisher.domain.authority import Signature
from replenisher.domain.calendar import BusinessCalendar, CalendarClock, ClockOrigin
from replenisher.domain.costs import CostLedger, ModelPrice, TokenUsage
from replenisher.domain.documents import (
    ApprovalRequest,
    EventKind,
    OrderAck,
    PurchaseOrder,
    Quote,
    StockLevel,
    SupplierReply,
)
from replenisher.domain.escalation import PRIMARY_APPROVER, ApprovalPolicy
from replenisher.domain.memory import MemoryBrief
from replenisher.domain.migrations import STATE_STEPS, migrate
from replenisher.domain.promises import PromiseClaim
from replenisher.domain.security_log import SecurityLog
from replenisher.domain.waits import WaitDays

STATE_SCHEMA_VERSION = 8

OrderStatus = Literal["none", "placed", "unknown", "not_found", "cancelled"]
ApprovalStatus = Literal["pending", "approved", "rejected", "timed_out"]


class Approval(BaseModel):
    """A request to the manager and what became of it. It binds the whole PO, not just a price."""

    request: ApprovalRequest
    requested_at: float
    status: ApprovalStatus = "pending"
    approved_up_to: float | None = None
    decided_by: str | None = None
    note: str = ""
    decided_at: float | None = Field(default=None, description="when the decision arrived at the SKU's address")
    channel: str | None = Field(default=None, description="the authenticated party that sent the decision")
    approver: str = Field(default=PRIMARY_APPROVER, description="who the current request asks")
    reminded: list[float] = Field(default_factory=list, description="reminder points of the current window, done")
    escalated_at: float | None = Field(default=None, description="when the request went to the backup approver")
    signatures: list[Signature] = Field(
        default_factory=list, description="each person's approval under the authority matrix, in the order given"
    )
    still_needed: str = Field(default="", description="what the PO still needs after its first signature, in words")


class ReplyFacts(BaseModel):
    """What was read out of a supplier's email: typed facts, never instructions."""

    confirmed: bool
    delivery_days: float | None = None
    unit_price: float | None = None
    quantity: int | None = None
    received_at: float
    promises: list[PromiseClaim] = Field(default_factory=list)
    extracted_by: str = "offline"
    usage: TokenUsage | None = None
    usd: float = 0.0
    notes: list[str] = Field(default_factory=list, description="what validation dropped from the reading")


class OrderProgress(BaseModel):
    """What a run learnt about its order and could not see through to the end.

    Carried into the run that follows the order up (found by PO number), so that run neither
    waits again for a reply already read nor counts goods already booked.
    """

    ordered_at: float | None = Field(default=None, description="when we sent the order, by our own clock")
    quoted_lead_days: float | None = None
    reply: ReplyFacts | None = None
    chases: int = 0
    last_chase_at: float | None = None
    supplier_overdue: bool = False
    received_quantity: int = 0
    receipts: list[str] = Field(default_factory=list)
    last_receipt_at: float | None = None
    goods_overdue_count: int = 0


DeciderKind = Literal["offline", "claude"]


class DeciderTerms(BaseModel):
    """Which decider a run asks and how, fixed when the run starts and recorded in it.

    A replay must ask the same way, and a restart of the service with other settings must not
    switch a run in flight (an offline run onto a model, or a model run onto another model or
    budget): the run carries these terms in its request and its state; only the connection
    (key, base URL, client retries) comes from the service that happens to run it.
    """

    decider: DeciderKind | None = Field(
        default=None, description="None: a run started before deciders were pinned, which follows the service's"
    )
    model: str | None = Field(default=None, description="the model id, for the claude decider")
    max_tokens: int = Field(default=1024, ge=64, le=8192)
    read_replies: bool = Field(default=False, description="supplier replies read by the model (else by patterns)")
    price: ModelPrice | None = Field(default=None, description="a negotiated price; None: the list price")
    asks_per_turn: int = Field(default=1, ge=1, le=5, description="first ask plus re-asks after a refusal")
    budget_usd: float | None = Field(default=None, ge=0, description="model spend per run; None: no limit")
    skip_single: bool = Field(
        default=False, description="a turn with one allowed tool takes it without asking (False on older runs)"
    )

    @property
    def label(self) -> str:
        """Who decides, as the run's records name it."""
        if self.decider == "claude":
            return f"claude {self.model}"
        return self.decider or "the service's decider"


class TurnRecord(BaseModel):
    turn: int
    tool: str
    reason: str = ""
    decided_by: str = Field(default="", description="who picked the tool: the decider, the rules, or only-allowed")
    summary: str = ""
    code: str = Field(
        default="", description="the code version that first ran this turn, as the journal says (loop/patches.py)"
    )


class State(BaseModel):
    schema_version: int = STATE_SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        return migrate(data, STATE_STEPS, STATE_SCHEMA_VERSION, "a replenishment state")

    run_id: str
    sku: str
    on_hand: int
    safety_stock: int
    target_stock: int
    suppliers: list[str]
    day_seconds: float = Field(gt=0)
    waits: WaitDays = Field(default_factory=WaitDays)
    started_at: float
    now: float = Field(default=0.0, description="the run's clock: the latest journaled time it read")
    clock: CalendarClock = Field(description="the site calendar and the wall-to-calendar mapping, fixed at the start")
    approval_policy: ApprovalPolicy = Field(description="reminders and the backup approver, fixed at the start")
    people_matrix: bool = Field(
        default=False, description="an authority matrix was in force at the start: approvals must name a person"
    )

    quotes: list[Quote] = Field(default_factory=list)
    quote_rounds: int = 0
    quote_failures: list[str] = Field(default_factory=list)

    po: PurchaseOrder | None = None
    po_revision: int = 0
    approval_token: str | None = None
    approval: Approval | None = None
    approval_rounds: int = 0
    price_refusals: int = 0

    order: OrderAck | None = None
    order_status: OrderStatus = "none"
    ordered_at: float | None = None
    status_checks: int = 0
    failed_status_checks: int = 0
    adopted_from: str | None = Field(default=None, description="the run whose order this one follows up")
    carried: OrderProgress | None = Field(default=None, description="what the runs before this one saw of the order")

    unread_reply: SupplierReply | None = None
    reply: ReplyFacts | None = None
    supplier_overdue: bool = False
    reply_unsettled: bool = Field(
        default=False, description="the reply read stated a delivery beyond the bound: chase, then wait for another"
    )
    chases: int = 0
    last_chase_at: float | None = None

    received_quantity: int = 0
    receipts: list[str] = Field(default_factory=list)
    last_receipt_at: float | None = Field(default=None, description="when the latest receipt reached the SKU")
    goods_overdue_count: int = 0

    closed: bool = False
    cancelled: bool = False
    cancel_reason: str = ""
    rejected: bool = False

    consumed: dict[EventKind, int] = Field(default_factory=dict)
    last_failure: str | None = None
    security: SecurityLog = Field(
        default_factory=SecurityLog, description="what the rules refused in this run: latest kept, exact total"
    )
    history: list[TurnRecord] = Field(default_factory=list)
    memory: MemoryBrief | None = Field(default=None, description="the SKU's memory, as given at the run's start")
    decider_cost: CostLedger = Field(default_factory=CostLedger)
    decider: DeciderTerms | None = Field(default=None, description="the decider fixed at the start; None before v6")

    @classmethod
    def start(
        cls,
        run_id: str,
        stock: StockLevel,
        day_seconds: float,
        started_at: float,
        waits: WaitDays | None = None,
        calendar: BusinessCalendar | None = None,
        origin: ClockOrigin | None = None,
        approval_policy: ApprovalPolicy | None = None,
    ) -> State:
        """Without a calendar every day counts whole (a business day is then just `day_seconds`);
        without an approval policy nobody is reminded and a lapsed approval fails closed at once."""
        clock = CalendarClock(
            calendar=calendar or BusinessCalendar.every_day(),
            day_seconds=day_seconds,
            origin=origin or ClockOrigin.at(started_at),
        )
        return cls(
            schema_version=STATE_SCHEMA_VERSION,
            run_id=run_id,
            sku=stock.sku,
            on_hand=stock.on_hand,
            safety_stock=stock.safety_stock,
            target_stock=stock.target_stock,
            suppliers=list(stock.suppliers),
            day_seconds=day_seconds,
            waits=waits or WaitDays(),
            started_at=started_at,
            now=started_at,
            clock=clock,
            approval_policy=approval_policy or ApprovalPolicy.none(),
        )

    def adopt(self, po: PurchaseOrder, ack: OrderAck, from_run: str, progress: OrderProgress | None = None) -> None:
        """Follow up an order an earlier run placed and did not see through (found by PO number)."""
        self.po = po
        self.order = ack
        self.order_status = "placed"
        self.adopted_from = from_run
        self.carried = progress
        # Our own clock when we know it; the supplier's stamp only for orders from before it was kept,
        # and never later than this run's start: a later "accepted" time would push every deadline out.
        ours = progress.ordered_at if progress else None
        self.ordered_at = ours if ours is not None else min(ack.accepted_at, self.started_at)
        if progress is None:
            return
        self.reply = progress.reply
        self.chases = progress.chases
        self.last_chase_at = progress.last_chase_at
        self.supplier_overdue = progress.supplier_overdue
        self.received_quantity = progress.received_quantity
        self.receipts = list(progress.receipts)
        self.last_receipt_at = progress.last_receipt_at
        self.goods_overdue_count = progress.goods_overdue_count

    def progress(self) -> OrderProgress:
        return OrderProgress(
            ordered_at=self.ordered_at,
            quoted_lead_days=self.quoted_lead_days,
            reply=self.reply,
            chases=self.chases,
            last_chase_at=self.last_chase_at,
            supplier_overdue=self.supplier_overdue,
            received_quantity=self.received_quantity,
            receipts=list(self.receipts),
            last_receipt_at=self.last_receipt_at,
            goods_overdue_count=self.goods_overdue_count,
        )

    # --- derived facts the rules read ----------------------------------------------------

    @property
    def asked(self) -> tuple[float | None, str | None]:
        """The price the run asks (its PO's, else its best quote's) and from whom; (None, None) before a quote."""
        if self.po is not None:
            return self.po.unit_price, self.po.supplier
        best = min(self.quotes, key=lambda q: q.unit_price, default=None)
        return (best.unit_price, best.supplier) if best else (None, None)

    @property
    def asked_price(self) -> float | None:
        return self.asked[0]

    @property
    def order_quantity(self) -> int:
        """Order up to the target level; at least one unit."""
        return max(self.target_stock - self.on_hand, 1)

    @property
    def is_finished(self) -> bool:
        return self.closed or self.cancelled or self.rejected

    @property
    def order_may_exist(self) -> bool:
        """True while the supplier may hold an order for our PO: it must not be forgotten."""
        return self.order_status in ("placed", "unknown")

    @property
    def needs_stock(self) -> bool:
        return self.on_hand < self.safety_stock

    @property
    def quoted_lead_days(self) -> float | None:
        """The lead time of the quote the PO was drafted on (or the one the earlier run had)."""
        po = self.po
        quoted = next((q.lead_days for q in self.quotes if po and q.quote_id == po.quote_id), None)
        if quoted is None and self.carried is not None:
            return self.carried.quoted_lead_days
        return quoted

    @property
    def ordered_quantity(self) -> int:
        return self.order.quantity if self.order else 0

    @property
    def all_goods_in(self) -> bool:
        return self.order is not None and self.received_quantity >= self.order.quantity

    def days(self, n: float) -> float:
        """`n` calendar days in wall-clock seconds, at this run's day length (for durations, not deadlines)."""
        return n * self.day_seconds

    def after(self, start: float, business_days: float) -> float:
        """The wall-clock instant `business_days` after `start` on this run's calendar: every deadline."""
        return self.clock.after(start, business_days)

    def next_message_number(self, event: EventKind) -> int:
        return self.consumed.get(event, 0)

    def mark_consumed(self, event: EventKind) -> None:
        self.consumed[event] = self.consumed.get(event, 0) + 1

    def record_security_event(self, source: str, what: str, at: float | None = None) -> None:
        """A refusal, about `source` (who sent or answered it; `decider` for a model's choice), at `at`
        (when the message arrived; else the run's clock). Bounded, exact in its total, and a flood
        from one source never hides another's (see `security_log`)."""
        self.security.record(source, what, self.now if at is None else at)
