"""Faults injected per supplier: counters that each failure consumes, and standing conditions.

A counter is spent only when its failure actually happens, so "the next N calls" means
exactly N, whatever else the caller does in between.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

CRAFTED_TEXT_LIMIT = 100_000
"""Crafted identifiers may be far longer than any honest one (that is the point); this only keeps
the world's own memory bounded."""


def _capped(value: Any) -> Any:
    if isinstance(value, str) and len(value) > CRAFTED_TEXT_LIMIT:
        raise ValueError(f"a crafted field is limited to {CRAFTED_TEXT_LIMIT} characters")
    return value


CraftedText = Annotated[Any, AfterValidator(_capped)]
"""A crafted field is sent as given (any JSON value): the agent must cope with what a hostile
supplier could really send, not only with well-typed lies."""


class QuoteOverride(BaseModel):
    """Fields that replace those of every quote the supplier gives while the override is set.

    Only the fields sent are replaced; each is sent as given, unvalidated (a 10,000-character
    `quote_id`, a negative `quantity`, a `supplier` naming another supplier all go out as is).
    `valid_until_offset_days` sets `valid_until` to the world's now plus that many world days
    (negative: already expired). Cleared with `{"quote_override": null}` or DELETE.
    """

    model_config = ConfigDict(extra="forbid")

    quote_id: CraftedText = None
    supplier: CraftedText = None
    sku: CraftedText = None
    quantity: CraftedText = None
    unit_price: CraftedText = None
    valid_until_offset_days: float | None = Field(default=None, ge=-100_000, le=100_000)
    lead_days: CraftedText = None

    def apply(self, quote: dict[str, Any], now: float, day_seconds: float) -> dict[str, Any]:
        crafted = {**quote, **self.model_dump(exclude_unset=True, exclude={"valid_until_offset_days"})}
        if self.valid_until_offset_days is not None:
            crafted["valid_until"] = now + self.valid_until_offset_days * day_seconds
        return crafted


class AckOverride(BaseModel):
    """Fields that replace those of every order acknowledgement the supplier sends while set:
    the answer to placing an order (first or repeated submission) and to looking one up by PO
    number. The order the supplier holds keeps the PO's real terms (and ships them); only what it
    says changes. Each field is sent as given, unvalidated. Cleared with `{"ack_override": null}`.
    """

    model_config = ConfigDict(extra="forbid")

    order_id: CraftedText = None
    po_number: CraftedText = None
    supplier: CraftedText = None
    sku: CraftedText = None
    quantity: CraftedText = None
    unit_price: CraftedText = None
    accepted_at: CraftedText = None

    def apply(self, ack: dict[str, Any]) -> dict[str, Any]:
        return {**ack, **self.model_dump(exclude_unset=True)}


class SupplierFaults(BaseModel):
    """Both the PUT body (only the fields sent are merged) and the standing state."""

    model_config = ConfigDict(extra="forbid")

    down_calls: int = Field(default=0, ge=0, le=1_000_000)
    """The next N calls to this supplier, on any endpoint, get 503 and change nothing."""
    lose_reply_calls: int = Field(default=0, ge=0, le=1_000_000)
    """The next N order submissions are taken, then answered with 503 as if the answer was lost."""
    down_after_order_calls: int = Field(default=0, ge=0, le=1_000_000)
    """Once the next new order is taken, the supplier goes down for this many calls: an order
    exists, but nobody can find out until the supplier is back."""
    drop_replies: int = Field(default=0, ge=0, le=1_000_000)
    """The next N replies (confirmations or answers to chases) are never sent."""
    quiet: bool = False
    """While set, the supplier sends no replies and ignores chases."""
    price_rise_pct: float = Field(default=0.0, gt=-100, le=10_000)
    reply_text: str | None = Field(default=None, max_length=20_000)
    """The next reply carries this text instead of the usual one: how poisoned emails arrive."""
    quote_override: QuoteOverride | None = None
    """While set, every quote this supplier gives has these fields replaced (see QuoteOverride)."""
    ack_override: AckOverride | None = None
    """While set, every order acknowledgement and order lookup of this supplier has these fields
    replaced (see AckOverride); the order itself keeps the PO's terms."""
    delivery_days: float | None = Field(default=None, ge=0, le=100_000)
    """While set, every reply (confirmation or answer to a chase) states delivery in this many days
    instead of the real plan; the shipments keep their real schedule."""
    hold_shipments: bool = False
    """While set, shipments falling due stay in the supplier's yard (nothing booked, no goods
    message); set back to false, the held ones go out at once. Lets a test keep a run waiting for
    its goods for as long as it needs, rather than racing the compressed clock."""
    refuse_quotes: str | None = Field(default=None, max_length=20_000)
    """While set, quote requests are refused (HTTP 422) with this text as the reason: how a
    supplier's words reach the agent before any order. Cleared with `{"refuse_quotes": null}`."""

    def merged(self, update: SupplierFaults) -> SupplierFaults:
        # The sent fields themselves (not dumped to dicts), so a nested override stays a model.
        return self.model_copy(update={name: getattr(update, name) for name in update.model_fields_set})

    def take_down_call(self) -> bool:
        if self.down_calls > 0:
            self.down_calls -= 1
            return True
        return False

    def take_lost_answer(self) -> bool:
        if self.lose_reply_calls > 0:
            self.lose_reply_calls -= 1
            return True
        return False

    def go_down_after_order(self) -> None:
        self.down_calls += self.down_after_order_calls
        self.down_after_order_calls = 0

    def take_dropped_reply(self) -> bool:
        if self.drop_replies > 0:
            self.drop_replies -= 1
            return True
        return False

    def take_reply_text(self) -> str | None:
        text, self.reply_text = self.reply_text, None
        return text


class FaultBook:
    def __init__(self) -> None:
        self._by_supplier: dict[str, SupplierFaults] = {}

    def of(self, supplier: str) -> SupplierFaults:
        return self._by_supplier.setdefault(supplier, SupplierFaults())

    def merge(self, supplier: str, update: SupplierFaults) -> SupplierFaults:
        merged = self.of(supplier).merged(update)
        self._by_supplier[supplier] = merged
        return merged

    def clear(self, supplier: str) -> SupplierFaults:
        self._by_supplier[supplier] = SupplierFaults()
        return self._by_supplier[supplier]
