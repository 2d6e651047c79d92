"""Handlers only the agent calls are private: the discovery manifest against an allow-list."""

from __future__ import annotations

import httpx
import pytest

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin

pytestmark = pytest.mark.e2e

# What the internal ingress offers operators and their tools; everything else is the agent's own.
PUBLIC = {
    ("SkuAgent", "check"),
    ("SkuAgent", "watch"),
    ("SkuAgent", "unwatch"),
    ("SkuAgent", "configure"),
    ("SkuAgent", "deliver"),
    ("SkuAgent", "status"),
    ("Replenish", "state"),
    ("Replenish", "current_wait"),
    # The audit log: the console adds sign-ins and refusals, operators read it (`replenisher audit`).
    ("AuditLog", "append"),
    ("AuditLog", "index"),
    ("AuditLog", "page"),
    # The service's own note, sent through the ingress, that it answered after failed attempts.
    ("ServiceAnswered", "after_failures"),
    # The SKU list: every reader's pages, and an operator's fill of it (`replenisher skus --refill`).
    ("SkuList", "page"),
    ("SkuList", "put_many"),
    ("SkuList", "mark_filled"),
}
PRIVATE = {
    ("SkuAgent", "tick"),
    ("SkuAgent", "reconcile_due"),
    ("SkuAgent", "arrival_of"),
    ("SkuAgent", "finish"),
    ("SkuAgent", "note_security"),
    ("Replenish", "run"),
    ("Replenish", "deliver"),
    ("RunArchive", "keep"),
    ("RunArchive", "begin"),
    ("RunArchive", "add"),
    ("RunArchive", "get"),
    # What agents and runs put on the SKU list: never an outsider's word.
    ("SkuList", "put"),
    ("SkuList", "put_wait"),
}


async def handlers(admin: Admin) -> dict[tuple[str, str], bool]:
    """Every handler Restate discovered, with whether the ingress may call it."""
    found: dict[tuple[str, str], bool] = {}
    async with httpx.AsyncClient(base_url=admin.url, timeout=30) as client:
        for service in ("SkuAgent", "Replenish", "RunArchive", "AuditLog", "ServiceAnswered", "SkuList"):
            response = await client.get(f"/services/{service}")
            response.raise_for_status()
            body = response.json()
            for handler in body["handlers"]:
                found[(service, handler["name"])] = bool(handler.get("public", body.get("public", True)))
    return found


async def test_the_manifest_makes_public_exactly_the_allow_list(admin: Admin, scenario: Scenario) -> None:
    found = await handlers(admin)
    assert set(found) == PUBLIC | PRIVATE, "a handler was added or removed: decide whether it is public"
    assert {h for h, public in found.items() if public} == PUBLIC


async def test_a_private_handler_is_refused_through_the_ingress(scenario: Scenario) -> None:
    await scenario.setup(on_hand=50)
    await scenario.check()
    before = await scenario.status()
    run_id = f"replenish-{scenario.sku}-1"
    stock = {"sku": scenario.sku, "on_hand": 0, "safety_stock": 20, "target_stock": 100, "suppliers": ["x"]}
    started = await scenario.ingress.post(f"/Replenish/{run_id}/run", json={"stock": stock, "day_seconds": 1})
    assert 400 <= started.status_code < 500, started.text
    message = {"event": "approval", "seq": 0, "payload": {"po_number": "p", "token": "t", "approved": True}}
    delivered = await scenario.ingress.post(f"/Replenish/{run_id}/deliver", json=message)
    assert 400 <= delivered.status_code < 500, delivered.text
    # Positive control: the same ingress serves a public handler of the same service.
    assert (await scenario.ingress.post(f"/Replenish/{run_id}/current_wait")).status_code == 200
    assert await scenario.status() == before
    assert await scenario.calls() == [], "the refused run must not have asked a supplier for anything"
