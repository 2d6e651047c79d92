"""The ERP: stock per SKU, goods booked in, purchase orders closed.

Stock is computed when asked, from the last booked level and the daily consumption since
then, so the world needs no ticking task and a long idle stretch costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from replenisher.domain.documents import PoNumber, PurchaseOrderClosure, Sku, StockLevel, SupplierId
from simulated_world.errors import Conflict, NotFound


class ItemSetup(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    on_hand: int = Field(ge=0, le=100_000_000)
    safety_stock: int = Field(ge=0, le=100_000_000)
    target_stock: int = Field(gt=0, le=100_000_000)
    daily_consumption: float = Field(default=0.0, ge=0, le=10_000_000)
    suppliers: list[SupplierId] = Field(min_length=1, max_length=50)

    @model_validator(mode="after")
    def _target_above_safety(self) -> ItemSetup:
        # A target at or below the safety stock would make every replenishment order nothing.
        if self.target_stock <= self.safety_stock:
            raise ValueError("target_stock must be greater than safety_stock")
        return self


class BookedReceipt(BaseModel):
    model_config = ConfigDict(frozen=True)

    receipt_id: str
    po_number: PoNumber
    sku: Sku
    supplier: SupplierId
    quantity: int
    booked_at: float


class ManualReceipt(BaseModel):
    """Goods the warehouse booked by hand (a test's or an operator's delivery outside any supplier flow)."""

    model_config = ConfigDict(extra="forbid")

    receipt_id: str = Field(min_length=1, max_length=128)
    po_number: PoNumber
    sku: Sku
    supplier: SupplierId = "manual"
    quantity: int = Field(gt=0, le=1_000_000)


class ReceiptFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: str | None = None


class ReceiptList(BaseModel):
    receipts: list[BookedReceipt]


class ClosureList(BaseModel):
    closures: list[PurchaseOrderClosure]


class ItemStock(StockLevel):
    """The item master's line for a SKU: its stock now and how fast it goes."""

    daily_consumption: float = Field(ge=0, description="units a day, on the world's clock")


class ItemList(BaseModel):
    items: list[ItemStock]


class ItemSuppliers(BaseModel):
    """The item master's approved suppliers of one SKU: what the inbound endpoint checks a supplier against."""

    sku: str
    suppliers: list[str]


def level_after(level: float, since: float, now: float, daily_consumption: float, day_seconds: float) -> float:
    """Stock left after consuming from `level` between `since` and `now`; the shelf never goes negative."""
    elapsed_days = max(0.0, now - since) / day_seconds
    return max(0.0, level - daily_consumption * elapsed_days)


@dataclass
class Item:
    sku: str
    setup: ItemSetup
    level: float
    level_at: float
    """`level` units were on the shelf at `level_at`; consumption runs on from there."""

    def on_hand(self, now: float, day_seconds: float) -> int:
        return math.floor(level_after(self.level, self.level_at, now, self.setup.daily_consumption, day_seconds))

    def book_in(self, quantity: int, now: float, day_seconds: float) -> None:
        # Goods on the shelf are consumed like the rest, so roll the level forward to now first.
        self.level = level_after(self.level, self.level_at, now, self.setup.daily_consumption, day_seconds)
        self.level += quantity
        self.level_at = now


class Erp:
    def __init__(self, day_seconds: float) -> None:
        self.day_seconds = day_seconds
        self.items: dict[str, Item] = {}
        self.receipts: list[BookedReceipt] = []
        self.closures: dict[str, PurchaseOrderClosure] = {}

    def set_item(self, sku: str, setup: ItemSetup, now: float) -> Item:
        item = Item(sku=sku, setup=setup, level=float(setup.on_hand), level_at=now)
        self.items[sku] = item
        return item

    def item(self, sku: str) -> Item:
        try:
            return self.items[sku]
        except KeyError:
            raise NotFound(f"unknown SKU {sku}") from None

    def suppliers_of(self, sku: str) -> ItemSuppliers:
        return ItemSuppliers(sku=sku, suppliers=list(self.item(sku).setup.suppliers))

    def stock(self, sku: str, now: float) -> StockLevel:
        item = self.item(sku)
        return StockLevel(
            sku=sku,
            on_hand=item.on_hand(now, self.day_seconds),
            safety_stock=item.setup.safety_stock,
            target_stock=item.setup.target_stock,
            suppliers=list(item.setup.suppliers),
        )

    def all_items(self, now: float, skus: Iterable[str] | None = None) -> list[ItemStock]:
        """The item master now: every item, or those of `skus` it lists (one it does not is left out)."""
        chosen = (
            sorted(self.items.items())
            if skus is None
            else [(s, self.items[s]) for s in sorted(set(skus)) if s in self.items]
        )
        return [
            ItemStock(**self.stock(sku, now).model_dump(), daily_consumption=item.setup.daily_consumption)
            for sku, item in chosen
        ]

    def book_goods(self, receipt: BookedReceipt) -> BookedReceipt:
        """Book goods in once per receipt id: a repeat of the same receipt (a retried request) is
        answered with the first booking and adds no stock; the same id with other numbers is a
        conflict, since the agent checks a goods message against the booking by id."""
        booked = next((r for r in self.receipts if r.receipt_id == receipt.receipt_id), None)
        if booked is not None:
            if booked.model_dump(exclude={"booked_at"}) != receipt.model_dump(exclude={"booked_at"}):
                raise Conflict(f"goods receipt {receipt.receipt_id!r} is already booked with other numbers")
            return booked
        # A supplier may ship a SKU the ERP no longer lists; the receipt is still kept.
        item = self.items.get(receipt.sku)
        if item is not None:
            item.book_in(receipt.quantity, receipt.booked_at, self.day_seconds)
        self.receipts.append(receipt)
        return receipt

    def receipt(self, receipt_id: str) -> BookedReceipt:
        found = next((r for r in self.receipts if r.receipt_id == receipt_id), None)
        if found is None:
            raise NotFound(f"no goods receipt {receipt_id!r} is booked")
        return found

    def find_receipts(self, where: ReceiptFilter) -> list[BookedReceipt]:
        return [r for r in self.receipts if where.sku is None or r.sku == where.sku]

    def close(self, closure: PurchaseOrderClosure) -> PurchaseOrderClosure:
        """Idempotent: the first closure of a PO stands; repeats are answered the same way."""
        self.item(closure.sku)
        return self.closures.setdefault(closure.po_number, closure)

    def find_closures(self, where: ReceiptFilter) -> list[PurchaseOrderClosure]:
        return [c for c in self.closures.values() if where.sku is None or c.sku == where.sku]
