"""Helpers the operator tests import (the fixtures are in conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from e2e.scenario import Scenario, ok
from replenisher.stack.admin import Admin
from support import RegisteredService, eventually


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


async def refused_attempts(admin: Admin, target: str) -> bool:
    """Whether Restate recorded a refused attempt (RT0010: the service did not answer) of a call."""
    rows = await admin.asql(
        "SELECT e.event_json FROM sys_journal_events e JOIN sys_invocation i ON e.id = i.id "
        f"WHERE i.target = '{target}'"
    )
    return any("RT0010" in r["event_json"] for r in rows)


async def pause_a_held_check(
    scenario: Scenario, service: RegisteredService, ingress: httpx.AsyncClient, admin: Admin, key: str = "held-check"
) -> str:
    """With the service killed (it stays down): a `check` of the scenario's SKU that Restate
    could not deliver, then paused through the admin API, as `restate invocations pause` does.
    Its invocation id."""
    service.kill()
    sent = await ingress.post(f"/SkuAgent/{scenario.sku}/check/send", headers={"idempotency-key": key})
    assert sent.status_code == 202, sent.text
    held: str = sent.json()["invocationId"]
    await eventually(
        lambda: refused_attempts(admin, f"SkuAgent/{scenario.sku}/check"), timeout=20, what="a refused attempt"
    )
    async with httpx.AsyncClient(base_url=admin.url, timeout=10) as api:
        paused = await api.patch(f"/invocations/{held}/pause")
    assert paused.status_code in (200, 202), paused.text

    async def is_paused() -> bool:
        rows = await admin.asql(f"SELECT status FROM sys_invocation WHERE id = '{held}'")
        return rows == [{"status": "paused"}]

    await eventually(is_paused, timeout=20, what=f"{held} to be paused")
    return held


async def paused_check(scenario: Scenario, service: RegisteredService, ingress: httpx.AsyncClient, admin: Admin) -> str:
    """As `pause_a_held_check`, with the service back when this returns."""
    try:
        return await pause_a_held_check(scenario, service, ingress, admin)
    finally:
        service.restart()


async def resume(admin: Admin, invocation_id: str) -> None:
    """What `restate invocations resume` does."""
    async with httpx.AsyncClient(base_url=admin.url, timeout=10) as api:
        resumed = await api.patch(f"/invocations/{invocation_id}/resume")
    assert resumed.status_code in (200, 202), resumed.text
