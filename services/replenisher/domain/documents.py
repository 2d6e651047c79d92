"""Purchasing documents exchanged with the outside world.

These are the shapes that cross a system boundary: what the ERP, a supplier and the
manager's inbox send and receive over HTTP, and the messages that arrive at a SKU's
address. Times are epoch seconds; money is a unit price in the SKU's currency.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

Sku = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")]
SKU_ID: TypeAdapter[str] = TypeAdapter(Sku)
"""`Sku` on its own: a key, a path segment or an argument checked as a SKU id."""


def is_sku_id(text: str) -> bool:
    try:
        SKU_ID.validate_python(text)
    except ValidationError:
        return False
    return True


SupplierId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")]
PoNumber = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[!-~][ -~]*$")]
"""Ours when we send it, but also read back from suppliers and messages: printable ASCII only."""
ExternalId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/#\-]*$")]
"""An identifier another system chose (a quote, an order at the supplier, a goods receipt): a
token of plain characters, so it cannot carry a sentence, markup or invisible characters."""
PersonId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._\-]*$")]
"""A person of the authority matrix: a short, lower-case handle (`ana`, `p.meyer`), what the audit log
and the approvals record (`replenisher.domain.authority`)."""
Digest = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$")]
"""What an approval approves, as `authority.order_digest` hashes a PO's terms."""
PersonName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$")]
"""Who decided, as the deciding side names them: short, one line, no control characters."""
Quantity = Annotated[int, Field(gt=0, le=1_000_000)]
Price = Annotated[float, Field(gt=0, le=1_000_000)]


def without_unset(data: dict[str, Any], *fields: str) -> dict[str, Any]:
    """`data` without those of `fields` that are None: a model's optional field added later is written
    only when set, so payloads, records and journals without it keep their bytes."""
    for name in fields:
        if data.get(name) is None:
            data.pop(name, None)
    return data


class Document(BaseModel):
    """Strict about unknown fields: a typo in a payload is an error, not a silent default. No
    NaN or infinity either: a time or price that is not a number compares false with every bound."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --- ERP -------------------------------------------------------------------------------


class StockLevel(Document):
    """The ERP's view of one SKU, and the input of a replenishment."""

    sku: Sku
    on_hand: int = Field(ge=0)
    safety_stock: int = Field(ge=0)
    target_stock: int = Field(gt=0)
    suppliers: list[SupplierId] = Field(min_length=1, description="approved suppliers for this SKU")


class PurchaseOrderClosure(Document):
    sku: Sku
    po_number: PoNumber
    received_quantity: int = Field(ge=0)


# --- Suppliers -------------------------------------------------------------------------


class QuoteRequest(Document):
    sku: Sku
    quantity: Quantity
    note: str | None = Field(default=None, max_length=500, description="e.g. a promised discount being claimed")


class Quote(Document):
    quote_id: ExternalId
    supplier: SupplierId
    sku: Sku
    quantity: Quantity
    unit_price: Price
    lead_days: float = Field(ge=0)
    valid_until: float


class LivePrice(Document):
    supplier: SupplierId
    sku: Sku
    unit_price: Price


class PurchaseOrder(Document):
    """Sent to the supplier; `po_number` is also the order's idempotency key."""

    po_number: PoNumber
    sku: Sku
    supplier: SupplierId
    quantity: Quantity
    unit_price: Price
    quote_id: ExternalId


class OrderAck(Document):
    order_id: ExternalId
    po_number: PoNumber
    supplier: SupplierId
    sku: Sku
    quantity: Quantity
    unit_price: Price
    accepted_at: float


class ChaseRequest(Document):
    message: str = Field(max_length=2000)


class CancelRequest(Document):
    reason: str = Field(max_length=2000)


# --- Manager ---------------------------------------------------------------------------


class ApprovalRequest(Document):
    """What the manager is asked to approve. The token goes back with the decision."""

    po_number: PoNumber
    sku: Sku
    supplier: SupplierId
    quantity: Quantity
    unit_price: Price
    quote_id: ExternalId
    expires_at: float
    token: str
    run_id: str
    approver: str = Field(default="manager", min_length=1, max_length=200, description="who is asked to decide")


class ApprovalReminder(Document):
    """A reminder that a request still waits for a decision. No token: the request carries it."""

    po_number: PoNumber
    sku: Sku
    run_id: str
    approver: str = Field(min_length=1, max_length=200)
    point: float = Field(gt=0, lt=1, description="how far into the approval window, as a fraction")
    decide_by: float
    text: str = Field(max_length=2000)


def new_approval_token() -> str:
    """A one-time approval token: 160 random bits as hex.

    Hex, not base64url: a token that began with "-" (1 in 64 of token_urlsafe's) was read by
    `replenisher approve --token <token>` as a missing value, so the manager could not paste it.
    """
    return secrets.token_hex(20)


# --- Messages that arrive at a SKU's address (SkuAgent/<SKU>/deliver) ------------------

EventKind = Literal["approval", "supplier-reply", "goods"]


class PartyMessage(Document):
    """What an outside party sends: strict types too. Lax, `"approved": "yes"` or `1` was an
    approval, `"quantity": "40"` or `true` a quantity, where the docs promise a 400."""

    model_config = ConfigDict(strict=True)


class ApprovalDecision(PartyMessage):
    """The manager's answer; only valid with the one-time token of the request it answers."""

    po_number: PoNumber
    token: str = Field(min_length=1, max_length=256)
    approved: bool
    up_to: Price | None = Field(default=None, description="highest unit price approved")
    by: PersonName = "manager"
    note: str = Field(default="", max_length=2000)
    person: PersonId | None = Field(
        default=None, description="the person of the authority matrix who decides (checked against it by the run)"
    )
    digest: Digest | None = Field(default=None, description="order_digest of the PO's terms the person approves")
    credential: str | None = Field(
        default=None,
        max_length=1024,
        repr=False,
        description="the person's personal token (domain.credentials), for a decision sent on the internal ingress",
    )

    @model_serializer(mode="wrap")
    def _without_unnamed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Written as before when no person is named: decisions without one keep their bytes.
        return without_unset(handler(self), "person", "digest", "credential")


class SupplierReply(PartyMessage):
    """A supplier's email about an order. `text` is untrusted: data, never instructions."""

    po_number: PoNumber
    supplier: SupplierId
    text: str = Field(max_length=20_000)


class GoodsReceipt(PartyMessage):
    """The warehouse booked goods in against a PO (possibly a partial delivery)."""

    receipt_id: ExternalId
    po_number: PoNumber
    sku: Sku
    quantity: Quantity


EVENT_PAYLOADS: dict[str, type[Document]] = {
    "approval": ApprovalDecision,
    "supplier-reply": SupplierReply,
    "goods": GoodsReceipt,
}


# --- Who sent a message ----------------------------------------------------------------

PARTY_PATTERN = r"^(operator|manager|warehouse|supplier:[A-Za-z0-9][A-Za-z0-9_.\-]{0,63})$"
OPERATOR_PARTY = "operator"


class Sender(Document):
    """The party a message came from, as authenticated where it entered.

    `operator`: a caller on the internal ingress (an operator, the CLI, the console).
    `manager`, `warehouse`, `supplier:<id>`: an outside party the inbound endpoint
    authenticated by its signature. Never what the message itself claims.
    An operator who stated a party on the ingress is `operator` still, with what it `said`.
    """

    party: str = Field(max_length=80, pattern=PARTY_PATTERN)
    said: str | None = Field(
        default=None, max_length=80, pattern=PARTY_PATTERN, description="an operator's stated party, not vouched for"
    )

    @model_serializer(mode="wrap")
    def _without_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Written as before when nothing was said: records and journals keep their bytes.
        return without_unset(handler(self), "said")

    @property
    def label(self) -> str:
        """How it reads in status, timelines and the console: `operator (said: supplier:acme)`."""
        return f"{self.party} (said: {self.said})" if self.said else self.party

    @property
    def supplier(self) -> str | None:
        return self.party.removeprefix("supplier:") if self.party.startswith("supplier:") else None

    @property
    def is_operator(self) -> bool:
        return self.party == OPERATOR_PARTY


OPERATOR = Sender(party=OPERATOR_PARTY)
