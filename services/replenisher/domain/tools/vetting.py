"""Structured fields from outside, checked against what was asked before anything counts on them.

A supplier's quote, order confirmation or email is untrusted data even when it is well formed:
the supplier it names, the SKU, the quantity, the price, the dates are its claims. Each rule here
compares them with what we asked for (the quote request, the PO) or with a stated bound, and says
what is wrong; the tools decide what a mismatch changes (nothing counts on it, and it is recorded).
Pure: no clock (times come in from journaled steps), no I/O.
"""

from __future__ import annotations

import math

from replenisher.domain.documents import OrderAck, PurchaseOrder, Quote
from replenisher.domain.state import State
from replenisher.domain.tools.limits import (
    DELIVERY_BOUND_FLOOR_DAYS,
    DELIVERY_BOUND_LEAD_FACTOR,
    DELIVERY_BOUND_UNQUOTED_DAYS,
    MAX_QUOTE_LEAD_DAYS,
    MAX_QUOTE_UNIT_PRICE,
    MAX_QUOTE_VALID_DAYS,
)

SHOWN_CHARS = 40


def shown(value: object) -> str:
    """An outside value quoted in a security event: repr'd and clipped, so it stays one short line."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...'"


def quote_objections(
    quote: Quote,
    *,
    asked: str,
    sku: str,
    quantity: int,
    at: float | None,
    day_seconds: float,
    answered_at: float | None = None,
) -> list[str]:
    """What is wrong with a quote `asked` gave for `quantity` of `sku`; [] if nothing.

    Expiry is judged at `at` (when we asked) and the longest validity from `answered_at` (when the
    answer came), so neither a slow answer nor a validity of exactly the bound counts against an
    honest supplier.
    """
    wrong: list[str] = []
    if quote.supplier != asked:
        wrong.append(f"names supplier {shown(quote.supplier)}, not {asked}")
    if quote.sku != sku:
        wrong.append(f"is for SKU {shown(quote.sku)}, not {sku}")
    if quote.quantity != quantity:
        wrong.append(f"is for {quote.quantity} units, not the {quantity} asked")
    if not 0 < quote.unit_price <= MAX_QUOTE_UNIT_PRICE:
        wrong.append(f"unit price {quote.unit_price:g} is outside (0, {MAX_QUOTE_UNIT_PRICE:g}]")
    if not math.isfinite(quote.lead_days) or quote.lead_days > MAX_QUOTE_LEAD_DAYS:
        wrong.append(f"lead time {quote.lead_days:g} days is beyond {MAX_QUOTE_LEAD_DAYS:g}")
    if not math.isfinite(quote.valid_until):
        wrong.append("validity is not a time")
    elif at is not None:
        if quote.valid_until <= at:
            wrong.append("had expired before it was asked for")
        elif quote.valid_until > (answered_at or at) + MAX_QUOTE_VALID_DAYS * day_seconds:
            days = (quote.valid_until - (answered_at or at)) / day_seconds
            wrong.append(f"claims to be valid for {days:.0f} days, beyond {MAX_QUOTE_VALID_DAYS:g}")
    return wrong


def ack_mismatches(po: PurchaseOrder, ack: OrderAck) -> list[str]:
    """Where a supplier's confirmation of (or answer about) our PO differs from the PO; [] if nowhere.

    The supplier's own order id is its to choose; everything else must be what we ordered.
    """
    wrong: list[str] = []
    for name in ("po_number", "supplier", "sku", "quantity"):
        ours, theirs = getattr(po, name), getattr(ack, name)
        if ours != theirs:
            wrong.append(f"{name} {shown(theirs)} instead of {shown(ours)}")
    if not math.isclose(po.unit_price, ack.unit_price, rel_tol=1e-9, abs_tol=1e-9):
        wrong.append(f"unit_price {ack.unit_price:g} instead of {po.unit_price:g}")
    return wrong


def delivery_bound_days(state: State) -> float:
    """How far away (business days) a stated delivery may be before it is a reason to follow up."""
    lead = state.quoted_lead_days
    if lead is None:
        return DELIVERY_BOUND_UNQUOTED_DAYS
    return min(max(DELIVERY_BOUND_FLOOR_DAYS, DELIVERY_BOUND_LEAD_FACTOR * lead), MAX_QUOTE_LEAD_DAYS)
