"""Which SKUs a party may reach: the ERP's item master, read through a bounded cache.

A supplier may send only to SKUs whose ERP item lists it among the SKU's suppliers; the
manager and the warehouse reach every SKU the ERP stocks. A SKU the ERP does not know is
refused at the door, before any state is created or any invocation stored.

What the ERP said of a SKU is kept for `ttl_seconds`, at most `max_entries` SKUs, least
recently used out first; a message is let through on what was kept. A refusal is never made
on an old answer: when what was kept would refuse, the door asks the ERP again, unless it
asked less than `refusal_seconds` ago (so a flood of refused messages costs at most one ERP
read per SKU in that time, and the rate limits bound the rest). A supplier added to an item
reaches it within `refusal_seconds`; one taken off loses its reach within the ttl.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from replenisher.domain.documents import Sender

Reach = Literal["ok", "unknown-sku", "not-a-supplier"]
ItemReader = Callable[[str], Awaitable[frozenset[str] | None]]
"""The SKU's suppliers from the ERP, None when the ERP does not stock it; raises when it cannot tell."""


@dataclass
class ItemCache:
    ttl_seconds: float
    refusal_seconds: float = 2.0
    max_entries: int = 10_000
    _items: OrderedDict[str, tuple[float, frozenset[str] | None]] = field(default_factory=OrderedDict)
    reads: int = 0

    async def reach(self, sku: str, sender: Sender, now: float, read: ItemReader) -> Reach:
        """Whether `sender` may send to `sku`, by what the ERP said (asked again before a refusal)."""
        cached = self._items.pop(sku, None)
        if cached is not None:
            read_at, suppliers = cached
            self._items[sku] = cached
            found = reach(sender, suppliers)
            age = now - read_at
            if age < min(self.ttl_seconds, self.refusal_seconds) or (found == "ok" and age < self.ttl_seconds):
                return found
        self.reads += 1
        suppliers = await read(sku)
        self._items.pop(sku, None)
        self._items[sku] = (now, suppliers)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)
        return reach(sender, suppliers)

    def __len__(self) -> int:
        return len(self._items)


def reach(sender: Sender, suppliers: frozenset[str] | None) -> Reach:
    """Whether `sender` may send to a SKU with these suppliers (None: the ERP does not stock it)."""
    if suppliers is None:
        return "unknown-sku"
    if sender.supplier is not None and sender.supplier not in suppliers:
        return "not-a-supplier"
    return "ok"
