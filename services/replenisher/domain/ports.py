"""The outside world as the tools see it: small interfaces the adapters implement.

The domain depends on these, never on httpx: a real ERP or supplier portal is another
implementation of the same interface; the time is the world's `clock`, never `time.time()`.
Errors: an answer that will not change on retry raises `Rejected`; anything else (timeouts,
5xx, connection errors) is transient and is retried by the durable layer.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Protocol

from replenisher.domain.documents import (
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
)

if TYPE_CHECKING:
    from replenisher.domain.state import ReplyFacts, State


class Rejected(Exception):
    """The other side refused the request for a reason a retry will not change."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


class Malformed(Rejected):
    """The other side answered, but with a document outside the contract (a field out of bounds,
    an identifier too long or with odd characters). Not retried: a supplier that sends it once
    will send it again, and what it sent is recorded as a security event where it lands."""

    def __init__(self, reason: str) -> None:
        super().__init__(502, f"{MALFORMED}: {reason}")


MALFORMED = "malformed answer"
"""How a `Malformed` answer reads once it has become a step's failure text."""


class Erp(Protocol):
    async def get_stock(self, sku: str) -> StockLevel: ...

    async def close_purchase_order(self, closure: PurchaseOrderClosure) -> None: ...

    async def find_receipt(self, receipt_id: str) -> GoodsReceipt | None: ...


class Suppliers(Protocol):
    async def quote(self, supplier: str, request: QuoteRequest) -> Quote: ...

    async def live_price(self, supplier: str, sku: str) -> LivePrice: ...

    async def place_order(self, po: PurchaseOrder) -> OrderAck: ...

    async def find_order(self, supplier: str, po_number: str) -> OrderAck | None: ...

    async def chase(self, supplier: str, po_number: str, request: ChaseRequest, idempotency_key: str) -> None: ...

    async def cancel(self, supplier: str, po_number: str, request: CancelRequest) -> None: ...


class ManagerInbox(Protocol):
    async def request_approval(self, request: ApprovalRequest) -> None: ...

    async def remind(self, reminder: ApprovalReminder, key: str) -> None: ...


class ReplyReader(Protocol):
    """Reads the run's unread supplier email into typed facts; never acts on what it says."""

    async def read(self, state: State, received_at: float) -> ReplyFacts: ...


class Clock(Protocol):
    """The wall clock the tools stamp their results with (`at`, `asked_at` ...), in epoch seconds.

    Served, the real one (`time.time`); in memory, the simulated world's clock: the tools read
    the time from the world they are given, so nothing patches `time.time` for the process."""

    def __call__(self) -> float: ...


class Roster(Protocol):
    """Who may approve what (`domain.authority.AuthorityMatrix`), as a request reads it: whom to ask."""

    def to_ask(
        self, total: float, supplier: str, day: date, *, skip: frozenset[str] = ..., wanted: int | None = ...
    ) -> tuple[str, ...]: ...

    def signatures_needed(self, total: float) -> int: ...


class World(Protocol):
    erp: Erp
    suppliers: Suppliers
    manager: ManagerInbox
    reader: ReplyReader
    clock: Clock
    people: Roster | None
    """The authority matrix this service was given, read when a request picks whom it asks; None: none."""
