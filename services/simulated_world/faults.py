"""Faults injected per supplier: counters that each failure consumes, and standing conditions.

A counter is spent only when its failure actually happens, so "the next N calls" means
exactly N, whatever else the caller does in between.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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

    def merged(self, update: SupplierFaults) -> SupplierFaults:
        return self.model_copy(update=update.model_dump(exclude_unset=True))

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
