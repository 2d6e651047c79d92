"""Helpers the operator tests import (the fixtures are in conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from e2e.scenario import Scenario, ok


async def setup_lasting_quotes(scenario: Scenario, price: float = 4.0, reply_days: float = 0.5, **item: Any) -> None:
    """A scenario whose quotes stay valid for a year (90 test-seconds), so an approval given
    seconds after the request still orders instead of re-quoting. `reply_days` is how long the
    supplier takes to confirm an order: long enough, a test can look at a run while it waits."""
    await scenario.setup(price=price, **item)
    supplier = {
        "name": f"Supplier {scenario.supplier}",
        "prices": {scenario.sku: price},
        "lead_days": 2,
        "reply_days": reply_days,
        "quote_valid_days": 365,
        "deliveries": 1,
        "delivery_gap_days": 1,
    }
    ok(await scenario.world.put(f"/admin/suppliers/{scenario.supplier}", json=supplier))


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


Cli = Callable[..., Awaitable[CliResult]]
