"""Integrity through the real stack (issue 11): an open order is followed up, never bought twice;
expired quotes are re-quoted, never put to the manager; an unseen order is reconciled on the
SKU's own timer. Every claim is judged from the world's records (orders, approval requests,
calls, receipts)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from e2e.scenario import JSON, Scenario, ok
from e2e.test_world_moves_on import manager_approving_everything
from replenisher.stack.runtime import RestateRuntime
from support import RegisteredService, as_the_door, days, eventually

pytestmark = pytest.mark.e2e


async def booked_on_hand(scenario: Scenario) -> int:
    return int(ok(await scenario.world.get(f"/erp/stock/{scenario.sku}"))["on_hand"])


async def followed_up(scenario: Scenario, first: str, within: float = 60) -> tuple[JSON, JSON]:
    """The run that followed `first`'s order up, once it ended, and `first`'s entry as amended."""

    async def ended() -> tuple[JSON, JSON] | None:
        outcomes = (await scenario.status())["outcomes"]
        follow = next((o for o in outcomes if o.get("adopted_from") == first and o["outcome"] != "unknown"), None)
        amended = next(o for o in outcomes if o["run_id"] == first)
        return (follow, amended) if follow else None

    return await eventually(ended, timeout=within, what=f"a run to follow {first}'s order up and settle it")


# --- 1. an order still open when a run ends is followed up, never bought again ---------------


async def test_an_order_delivered_in_more_parts_than_the_run_has_turns_is_followed_up_not_bought_again(
    scenario: Scenario,
) -> None:
    # 30 shipments a test day apart: the run's 30 turns run out with the order part-delivered.
    await scenario.setup(deliveries=30, lead_days=1, reply_days=0.2)
    first = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)

    ended = await scenario.outcome(first, within=60)
    assert ended["outcome"] == "unknown" and "still open at the supplier" in ended["detail"], ended
    assert 0 < ended["quantity_received"] < 95 and ended["turns"] == 30
    # Stock is still short, but a check buys nothing while the order is open.
    again = await scenario.check()
    assert again["started"] in (None, f"replenish-{scenario.sku}-2")

    follow, amended = await followed_up(scenario, first)
    assert follow["outcome"] == "received" and follow["quantity_received"] == 95
    assert follow["received_before"] == ended["quantity_received"] and follow["po_number"] == request["po_number"]
    assert amended["outcome"] == "received" and amended["detail"].startswith("reconciled")
    status = await scenario.status()
    assert status["unresolved"] is None and status["stats"]["total_received"] == 95
    # Every receipt was read by one run or the other. (Once under heavy load a second copy of the
    # supplier's reply was kept, reported rather than read: the follow-up already had the reply.)
    kept = [(m["event"], m["po_number"]) for m in status["kept"]]
    assert set(kept) <= {("supplier-reply", request["po_number"])}, status["kept"]
    assert status["memory"]["suppliers"][scenario.supplier]["orders"] == 1  # judged once, when settled

    # The world's records: one order, one approval, 30 receipts booked once each, all goods on hand.
    orders = await scenario.orders()
    assert [o["po_number"] for o in orders] == [request["po_number"]]
    assert len(await scenario.approval_requests()) == 1
    assert await scenario.calls(op="quote") and len(await scenario.calls(op="place_order")) == 1
    await eventually(lambda: booked_on_hand(scenario), timeout=10, what="the goods on hand")
    assert await booked_on_hand(scenario) == 100


async def test_a_run_stopped_with_its_order_open_is_followed_up_not_bought_again(
    scenario: Scenario, restate_runtime: RestateRuntime
) -> None:
    await scenario.setup(deliveries=2, lead_days=12, reply_days=0.2)
    first = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)
    await scenario.waiting_for(first, "wait_for_goods", within=30)

    # An operator stops the run (restate invocations cancel) while it waits for the goods.
    async with httpx.AsyncClient(base_url=restate_runtime.admin_url, timeout=10) as admin:
        rows = ok(
            await admin.post(
                "/query",
                json={"query": f"SELECT id FROM sys_invocation WHERE target = 'Replenish/{first}/run'"},
                headers={"accept": "application/json"},
            )
        )["rows"]
        assert len(rows) == 1
        assert (await admin.patch(f"/invocations/{rows[0]['id']}/cancel")).is_success

    ended = await scenario.outcome(first, within=30)
    assert ended["outcome"] == "unknown" and "run stopped" in ended["detail"], ended
    follow, amended = await followed_up(scenario, first)
    assert follow["outcome"] == "received" and follow["quantity_received"] == 95
    assert amended["outcome"] == "received"
    orders = await scenario.orders()
    assert [o["po_number"] for o in orders] == [request["po_number"]]
    assert len(await scenario.approval_requests()) == 1 and len(await scenario.calls(op="place_order")) == 1


# --- 2. quotes that expire together are re-quoted, never put to the manager -------------------


async def add_second_supplier(scenario: Scenario, price: float, quote_valid_days: float) -> str:
    other = f"{scenario.supplier}-b"
    setup = {
        "name": f"Supplier {other}",
        "prices": {scenario.sku: price},
        "lead_days": 2,
        "reply_days": 0.5,
        "quote_valid_days": quote_valid_days,
    }
    ok(await scenario.world.put(f"/admin/suppliers/{other}", json=setup))
    item = {"on_hand": 5, "safety_stock": 20, "target_stock": 100, "suppliers": [scenario.supplier, other]}
    ok(await scenario.world.put(f"/admin/items/{scenario.sku}", json=item))
    return other


def void_requests(entries: list[JSON]) -> list[JSON]:
    """Approval requests the manager received for a quote that had already expired."""
    return [e for e in entries if e["received_at"] >= e["request"]["expires_at"]]


async def test_two_quotes_that_expire_together_are_re_quoted_not_sent_for_approval(scenario: Scenario) -> None:
    valid_days = 8  # two seconds: time to draft and ask, then both quotes lapse together
    await scenario.setup(price=4.0, quote_valid_days=valid_days)
    other = await add_second_supplier(scenario, price=4.5, quote_valid_days=valid_days)
    run_id = (await scenario.check())["started"]
    first = await scenario.pending_approval()
    assert first["supplier"] == scenario.supplier

    async def both_expired() -> bool:
        return ok(await scenario.world.get("/admin/clock"))["now"] > first["expires_at"]

    await eventually(both_expired, timeout=20, what="both first-round quotes to expire")
    await scenario.decide(first["po_number"], approved=True)  # too late: the quote is void
    async with manager_approving_everything(scenario):
        outcome = await scenario.outcome(run_id, within=60)

    assert outcome["outcome"] == "received"
    history = (await scenario.run_view(run_id))["state"]["history"]
    tools = [t["tool"] for t in history]
    assert "expired" in next(t for t in history if t["tool"] == "place_order")["summary"]
    assert tools.count("get_quotes") == 2 and tools.count("request_approval") == 2
    # The world's records: the manager was never asked about a void quote; both suppliers were
    # asked twice; the one order rests on the second round.
    entries = await scenario.approval_requests()
    assert len(entries) == 2 and void_requests(entries) == []
    for supplier in (scenario.supplier, other):
        assert len(await scenario.calls(op="quote", supplier=supplier)) == 2
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == entries[-1]["request"]["po_number"]

    # Positive control: the detector does flag a request for a quote already expired.
    control = {"po_number": f"PO-CONTROL-{scenario.sku}", "token": f"control-{scenario.sku}"}
    late = {**entries[0]["request"], **control, "expires_at": first["expires_at"]}
    ok(await scenario.world.post("/manager/approval-requests", json=late))
    flagged = void_requests(await scenario.approval_requests())
    assert [e["request"]["po_number"] for e in flagged] == [late["po_number"]]


# --- 6. an unknown order is reconciled on the SKU's own timer, watched or not ----------------


@pytest.mark.slow
async def test_an_unknown_order_is_reconciled_on_the_skus_own_timer_with_backoff_while_unwatched(
    scenario: Scenario,
) -> None:
    await scenario.setup(reply_days=0.5, lead_days=2)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.fault(lose_reply_calls=1, down_after_order_calls=100_000)
    await scenario.decide(request["po_number"], approved=True)
    ended = await scenario.outcome(run_id, within=90)
    assert ended["outcome"] == "unknown"

    # Nobody calls check and the SKU is not watched: its own timer keeps looking, backing off.
    async def backed_off() -> JSON | None:
        status = await scenario.status()
        reconciling = status["reconciling"]
        return status if reconciling and reconciling["attempts"] >= 3 else None

    status = await eventually(backed_off, timeout=30, what="three reconciliation attempts")
    assert status["watch"]["watching"] is False and status["active"] is None
    assert status["reconciling"]["run_id"] == run_id
    lookups = [c for c in await scenario.calls(op="find_order") if c["po_number"] == request["po_number"]]
    after_end = [c["at"] for c in lookups if c["at"] > ended["ended_at"]]
    assert after_end, "the SKU looked the order up by its PO number after the run ended"
    # Backoff: at once, then 1, 2, 4, ... re-check days (one test day each here).
    assert status["reconciling"]["after_days"] == 2 ** (status["reconciling"]["attempts"] - 1)

    ok(await scenario.world.delete(f"/faults/suppliers/{scenario.supplier}"))
    follow, amended = await followed_up(scenario, run_id, within=60)
    assert follow["outcome"] == "received" and amended["outcome"] == "received"
    assert (await scenario.status())["reconciling"] is None
    orders = await scenario.orders()
    assert len(orders) == 1 and orders[0]["po_number"] == request["po_number"]


# --- 7. a message that reached the SKU before its deadline counts, though the service was down ---


async def approval_while_the_service_is_down(
    scenario: Scenario, service: RegisteredService, *, before_deadline: bool
) -> tuple[str, JSON]:
    """The manager's approval reaches Restate's ingress while the service is down, stamped as
    the inbound endpoint stamps what it forwards; the service comes back after the deadline."""
    await scenario.setup()
    # Ten seconds when the approval must be sent before the deadline (a loaded machine can take
    # seconds from the request to the kill); four when it is sent after.
    await scenario.configure(approval=40 if before_deadline else 16)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    deadline = (await scenario.waiting_for(run_id, "wait_for_approval"))["waiting"]["deadline"]
    service.kill()
    try:
        if not before_deadline:
            await eventually(lambda: time.time() > deadline + days(1), timeout=30, what="the deadline to pass")
        sent_at = time.time()
        assert (sent_at < deadline) is before_deadline, "the test machine is too slow for this timing"
        decision = {"po_number": request["po_number"], "token": request["token"], "approved": True, "by": "manager"}
        # As the inbound endpoint forwards it, stamped: the arrival time counts only under its stamp.
        body = {"event": "approval", "payload": decision, "sender": {"party": "manager"}, "received_at": sent_at}
        body = as_the_door(scenario.sku, body)
        sent = await scenario.ingress.post(
            f"/SkuAgent/{scenario.sku}/deliver/send", json=body, headers={"idempotency-key": f"late-{run_id}"}
        )
        assert sent.is_success, sent.text
        await eventually(lambda: time.time() > deadline + days(2), timeout=30, what="the deadline to pass")
    finally:
        await asyncio.to_thread(service.restart)
    return run_id, await scenario.outcome(run_id, within=60)


@pytest.mark.slow
async def test_an_approval_that_reached_the_sku_in_time_counts_though_the_service_was_down(
    scenario: Scenario, service: RegisteredService
) -> None:
    run_id, outcome = await approval_while_the_service_is_down(scenario, service, before_deadline=True)
    assert outcome["outcome"] == "received", outcome
    history = (await scenario.run_view(run_id))["state"]["history"]
    assert next(t for t in history if t["tool"] == "wait_for_approval")["summary"].startswith("approved")
    assert len(await scenario.orders()) == 1


async def test_positive_control_an_approval_that_reached_the_sku_after_its_deadline_does_not_count(
    scenario: Scenario, service: RegisteredService
) -> None:
    _, outcome = await approval_while_the_service_is_down(scenario, service, before_deadline=False)
    assert outcome["outcome"] == "cancelled", outcome
    assert await scenario.orders() == []
