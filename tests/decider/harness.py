"""A whole replenishment in memory: the real tools, rules, `decide_turn` and deciders; no Restate, no HTTP.

The loop is the workflow's (`durable/replenish.py`): each turn the allowed tools are offered,
the decider's choice goes through `decide_turn` (checked, re-asked, or taken by the rules),
a call tool's `execute` runs against `MemoryWorld`, a wait gets the next message from `Inbox`
(or its deadline passes), and `apply` folds the result in. Restate's bounded step retry is
stood in for by `ask_with_retries`. Time is a `Clock` the waits move forward; tools that read
the clock inside `execute` see it too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from replenisher.domain.decisions import GOAL, Decider, DeciderTerms, Decision, Refusal
from replenisher.domain.documents import (
    ApprovalDecision,
    ApprovalReminder,
    ApprovalRequest,
    CancelRequest,
    ChaseRequest,
    GoodsReceipt,
    LivePrice,
    OrderAck,
    PurchaseOrder,
    PurchaseOrderClosure,
    Quote,
    QuoteRequest,
    StockLevel,
    SupplierReply,
)
from replenisher.domain.extraction import OfflineReplyReader
from replenisher.domain.memory import MemoryBrief
from replenisher.domain.outcomes import ReplenishmentResult, result_of
from replenisher.domain.ports import Rejected, ReplyReader
from replenisher.domain.state import State, TurnRecord
from replenisher.domain.tools import TOOLS, TOOLS_BY_NAME, Call, Done, Tool, Wait
from replenisher.domain.tools.limits import MAX_TURNS
from replenisher.domain.turns import Ask, DeciderUnavailable, decide_turn

DAY = 86_400.0
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SKU = "SKU-H1"
_PCT = re.compile(r"(\d{1,2}(?:\.\d+)?)% discount")


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


@contextmanager
def clock_as_time(clock: Clock) -> Iterator[None]:
    with mock.patch("time.time", clock):
        yield


@dataclass
class SupplierSpec:
    price: float
    lead_days: float = 5.0
    reply_days: float = 0.5
    late_days: float = 0.0
    quiet: bool = False
    never_delivers: bool = False
    honours_discounts: bool = True
    refuses_quote: str | None = None


@dataclass
class PlacedOrder:
    po: PurchaseOrder
    live_price: float
    at: float


class MemoryWorld:
    """ERP, suppliers and the manager's inbox in memory; records everything the agent sent."""

    def __init__(self, clock: Clock, suppliers: dict[str, SupplierSpec], reader: ReplyReader | None = None) -> None:
        self.clock = clock
        self.specs = suppliers
        self.erp = self
        self.suppliers = self
        self.manager = self
        self.reader: ReplyReader = reader or OfflineReplyReader()
        self.quote_requests: list[tuple[str, QuoteRequest]] = []
        self.quoted: dict[str, float] = {}
        self.placed: dict[str, PlacedOrder] = {}
        self.acks: dict[str, OrderAck] = {}
        self.approval_requests: list[ApprovalRequest] = []
        self.reminders: dict[str, ApprovalReminder] = {}
        self.chases: list[str] = []
        self.cancelled: list[str] = []
        self.closed: list[str] = []
        self.live_price_override: dict[str, float] = {}
        self._quotes = 0

    # ERP
    async def get_stock(self, sku: str) -> StockLevel:
        raise NotImplementedError

    async def close_purchase_order(self, closure: PurchaseOrderClosure) -> None:
        self.closed.append(closure.po_number)

    # suppliers
    async def quote(self, supplier: str, request: QuoteRequest) -> Quote:
        self.quote_requests.append((supplier, request))
        spec = self.specs[supplier]
        if spec.refuses_quote is not None:
            raise Rejected(422, spec.refuses_quote)
        price = spec.price
        found = _PCT.search(request.note or "")
        if found and spec.honours_discounts:
            price = round(price * (1 - float(found.group(1)) / 100), 2)
        self._quotes += 1
        self.quoted[supplier] = price
        return Quote(
            quote_id=f"{supplier}-Q{self._quotes:04d}",
            supplier=supplier,
            sku=request.sku,
            quantity=request.quantity,
            unit_price=price,
            lead_days=spec.lead_days,
            valid_until=self.clock.now + 5 * DAY,
        )

    async def live_price(self, supplier: str, sku: str) -> LivePrice:
        price = self.live_price_override.get(supplier, self.quoted.get(supplier, self.specs[supplier].price))
        return LivePrice(supplier=supplier, sku=sku, unit_price=price)

    async def place_order(self, po: PurchaseOrder) -> OrderAck:
        if po.po_number not in self.acks:
            live = (await self.live_price(po.supplier, po.sku)).unit_price
            self.placed[po.po_number] = PlacedOrder(po=po, live_price=live, at=self.clock.now)
            self.acks[po.po_number] = OrderAck(
                order_id=f"O-{len(self.acks) + 1}",
                po_number=po.po_number,
                supplier=po.supplier,
                sku=po.sku,
                quantity=po.quantity,
                unit_price=po.unit_price,
                accepted_at=self.clock.now,
            )
        return self.acks[po.po_number]

    async def find_order(self, supplier: str, po_number: str) -> OrderAck | None:
        return self.acks.get(po_number)

    async def chase(self, supplier: str, po_number: str, request: ChaseRequest, idempotency_key: str) -> None:
        self.chases.append(idempotency_key)

    async def cancel(self, supplier: str, po_number: str, request: CancelRequest) -> None:
        self.cancelled.append(po_number)

    # manager
    async def request_approval(self, request: ApprovalRequest) -> None:
        self.approval_requests.append(request)

    async def remind(self, reminder: ApprovalReminder, key: str) -> None:
        self.reminders.setdefault(key, reminder)


@dataclass
class Inbox:
    """What arrives at the SKU's address while a run waits: the manager, the supplier, the warehouse."""

    world: MemoryWorld
    manager_limit: float | None = None
    reply_text: str | None = None
    forged_approvals: list[ApprovalDecision] = field(default_factory=list)
    genuine: dict[str, ApprovalDecision] = field(default_factory=dict)

    def next(self, tool: Wait[Any], state: State) -> Any:
        clock = self.world.clock
        if tool.event == "approval":
            if self.forged_approvals:
                clock.advance(0.1)
                return self.forged_approvals.pop(0)
            assert state.approval is not None
            request = state.approval.request
            approve = self.manager_limit is None or request.unit_price <= self.manager_limit
            decision = ApprovalDecision(
                po_number=request.po_number,
                token=request.token,
                approved=approve,
                up_to=request.unit_price if approve else None,
                by="manager",
            )
            self.genuine[request.po_number] = decision
            clock.advance(0.5)
            return decision
        assert state.order is not None
        spec = self.world.specs[state.order.supplier]
        if tool.event == "supplier-reply":
            if spec.quiet and state.chases == 0:
                clock.now = max(clock.now, tool.deadline(state))
                return None
            clock.advance(spec.reply_days)
            text = self.reply_text or (
                f"We confirm purchase order {state.order.po_number}. Delivery in {spec.lead_days:g} days."
            )
            return SupplierReply(po_number=state.order.po_number, supplier=state.order.supplier, text=text)
        assert state.ordered_at is not None
        due = state.ordered_at + (spec.lead_days + spec.late_days) * DAY
        deadline = tool.deadline(state)
        if spec.never_delivers or due > deadline:
            clock.now = max(clock.now, deadline)
            return None
        clock.now = max(clock.now, due)
        return GoodsReceipt(
            receipt_id=f"R-{state.order.po_number}",
            po_number=state.order.po_number,
            sku=state.sku,
            quantity=state.order.quantity - state.received_quantity,
        )


def ask_with_retries(decider: Decider, state: State, allowed: list[Tool], attempts: int = 4) -> Ask:
    """Restate's bounded step retry, in memory: transient errors are retried, `Rejected` is final."""

    async def ask(attempt: int, refusals: tuple[Refusal, ...] | Any) -> Decision:
        last: Exception | None = None
        for _ in range(attempts):
            try:
                return await decider.decide(GOAL, state, allowed, refusals)
            except Rejected as e:
                raise DeciderUnavailable(e.reason) from e
            except Exception as e:
                last = e
        raise DeciderUnavailable(f"retries spent: {last}")

    return ask


@dataclass
class Run:
    state: State
    result: ReplenishmentResult
    world: MemoryWorld
    inbox: Inbox
    decisions: list[Decision]
    executed: list[tuple[str, bool]]
    """Each tool run, and whether the rules allowed it at that moment."""


async def replenish(
    decider: Decider,
    world: MemoryWorld,
    inbox: Inbox,
    *,
    suppliers: list[str],
    memory: MemoryBrief | None = None,
    terms: DeciderTerms | None = None,
    run_number: int = 1,
    on_hand: int = 5,
    until: Callable[[State], bool] | None = None,
) -> Run:
    clock = world.clock
    stock = StockLevel(sku=SKU, on_hand=on_hand, safety_stock=20, target_stock=100, suppliers=suppliers)
    state = State.start(f"replenish-{SKU}-{run_number}", stock, DAY, clock.now)
    state.memory = memory
    terms = terms or DeciderTerms()
    decisions: list[Decision] = []
    executed: list[tuple[str, bool]] = []
    for turn in range(MAX_TURNS):
        state.now = clock.now  # as the durable loop reads its journaled clock each turn
        allowed = [t for t in TOOLS if t.allowed(state)]
        if not allowed or (until is not None and until(state)):
            break
        decision = await decide_turn(turn, state, allowed, ask_with_retries(decider, state, allowed), terms)
        decisions.append(decision)
        tool = TOOLS_BY_NAME[decision.tool]
        executed.append((tool.name, tool.allowed(state)))
        args = tool.parse_args(decision.args)
        if isinstance(tool, Done):
            state.history.append(TurnRecord(turn=turn, tool=tool.name, reason=decision.reason))
            break
        if isinstance(tool, Wait):
            payload = inbox.next(tool, state)
            state.now = clock.now
            if payload is not None:
                state.mark_consumed(tool.event)
            summary = tool.apply(state, payload)
        else:
            assert isinstance(tool, Call)
            try:
                with clock_as_time(clock):
                    result = await tool.execute(state, args, world)
            except Rejected as e:
                summary = tool.apply_failure(state, args, e.reason)
            else:
                summary = tool.apply(state, args, result)
        state.history.append(TurnRecord(turn=turn, tool=tool.name, reason=decision.reason, summary=summary))
        clock.advance(0.01)
    return Run(state, result_of(state, clock.now), world, inbox, decisions, executed)
