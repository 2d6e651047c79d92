"""Whole replenishments through the real stack: Restate, the service (on granian, or hypercorn with
REPLENISHER_SERVER), the world over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.scenario import Scenario, ok
from replenisher.domain.calendar import BusinessCalendar, CalendarClock, ClockOrigin
from replenisher.domain.sku import check_fraction
from replenisher.domain.sku_list import SKU_LIST
from replenisher.loop import names
from support import CLOCK_ORIGIN, HAPPY_PATH, TEST_DAY_SECONDS, eventually

pytestmark = pytest.mark.e2e


async def test_happy_path_ends_received_with_one_order_and_stock_booked_in(scenario: Scenario, admin) -> None:
    await scenario.setup(on_hand=5, safety_stock=20, target_stock=100, price=4.0)
    started = await scenario.check()
    run_id = started["started"]
    assert run_id == f"replenish-{scenario.sku}-1"

    request = await scenario.pending_approval()
    assert (request["quantity"], request["unit_price"], request["supplier"]) == (95, 4.0, scenario.supplier)
    await scenario.decide(request["po_number"], approved=True, up_to=4.0)

    outcome = await scenario.outcome(run_id)
    assert outcome["outcome"] == "received"
    assert (outcome["quantity_ordered"], outcome["quantity_received"]) == (95, 95)
    orders = await scenario.orders()
    assert [o["po_number"] for o in orders] == [request["po_number"]]
    stock = (await scenario.world.get(f"/erp/stock/{scenario.sku}")).json()
    assert stock["on_hand"] == 100
    status = await scenario.status()
    assert status["active"] is None and status["stats"]["by_outcome"] == {"received": 1}

    view = await scenario.run_view(run_id)
    tools = [turn["tool"] for turn in view["state"]["history"]]
    assert tools == HAPPY_PATH

    # The run's clock, in Restate's journal: read on its own after each wait only. The first
    # reading came with the run's request (the SKU's clock at the check, which the stock read
    # carried), and every decision and step carries the reading as it ended with its result.
    rows = await admin.asql(
        "SELECT j.entry_type, j.name FROM sys_journal j JOIN sys_invocation i ON i.id = j.id "
        f"WHERE i.target = 'Replenish/{run_id}/run' AND j.entry_type LIKE 'Command:%' ORDER BY j.index"
    )
    commands = [(r["entry_type"], r.get("name") or "") for r in rows]
    readings = [i for i, c in enumerate(commands) if c == ("Command: Run", names.TIMESTAMP)]
    waits = [i for i, c in enumerate(commands) if c[0] == "Command: GetPromise"]
    assert len(waits) == sum(tool.startswith("wait_for") for tool in HAPPY_PATH)
    assert len(readings) == len(waits), commands
    assert all(commands[i - 1][0] in ("Command: Sleep", "Command: GetPromise") for i in readings), commands
    checks = await admin.asql(
        "SELECT j.entry_type, j.name FROM sys_journal j JOIN sys_invocation i ON i.id = j.id "
        f"WHERE i.target = 'SkuAgent/{scenario.sku}/check' AND j.entry_type = 'Command: Run' ORDER BY j.index"
    )
    assert [r.get("name") for r in checks] == [names.READ_STOCK, names.RUN_REQUEST], checks


async def test_manager_rejects_and_nothing_is_ordered(scenario: Scenario) -> None:
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=False)
    outcome = await scenario.outcome(run_id)
    assert outcome["outcome"] == "rejected"
    assert await scenario.orders() == []
    assert await scenario.calls(op="place_order") == []


async def test_approval_timeout_escalates_to_the_backup_and_then_fails_closed(scenario: Scenario) -> None:
    await scenario.setup()

    # Windows of a few seconds: a reminder at 90% comes well before the lapse, even loaded.
    def waits(record: dict[str, Any]) -> dict[str, float]:
        return {k: v for k, v in record["waits"].items() if v is not None}

    # Each change moves only what it names: null sets goods_grace back, approval stays, then moves.
    await scenario.configure(approval=3, goods_grace=2)
    reset = ok(await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/configure", json={"goods_grace": None}))
    assert waits(reset) == {"approval": 3}
    assert waits(await scenario.configure(approval=10)) == {"approval": 10}
    run_id = (await scenario.check())["started"]
    first = await scenario.pending_approval()
    outcome = await scenario.outcome(run_id, within=90)
    assert outcome["outcome"] == "cancelled"
    assert "no approval" in outcome["detail"]
    assert await scenario.orders() == []
    assert await scenario.calls(op="place_order") == []
    assert await scenario.calls(op="live_price") == []
    # Before failing closed: the manager was reminded twice, then the backup approver was
    # asked about the same PO with a fresh token, and reminded twice in turn.
    requests = [r["request"] for r in await scenario.approval_requests()]
    assert [r["approver"] for r in requests] == ["manager", "backup-approver"]
    assert {r["po_number"] for r in requests} == {first["po_number"]} and requests[0]["token"] != requests[1]["token"]
    kept = ok(await scenario.world.get("/manager/reminders", params={"po_number": first["po_number"]}))["reminders"]
    assert sorted((r["reminder"]["approver"], r["reminder"]["point"]) for r in kept) == [
        ("backup-approver", 0.5),
        ("backup-approver", 0.9),
        ("manager", 0.5),
        ("manager", 0.9),
    ]


async def test_silent_supplier_is_chased_and_then_replies(scenario: Scenario) -> None:
    await scenario.setup(lead_days=6)
    await scenario.configure(supplier_reply=4)
    await scenario.fault(drop_replies=1)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    assert len(await scenario.calls(op="chase")) == 1
    view = await scenario.run_view(run_id)
    tools = [turn["tool"] for turn in view["state"]["history"]]
    assert tools.index("chase_supplier") > tools.index("wait_for_supplier_reply")
    reply_waits = [t for t in view["state"]["history"] if t["tool"] == "wait_for_supplier_reply"]
    assert [t["summary"] for t in reply_waits] == ["the supplier has not replied in time", "the supplier replied"]


async def test_goods_arrive_in_two_partial_deliveries(scenario: Scenario) -> None:
    await scenario.setup(deliveries=2)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)

    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    assert outcome["consumed"]["goods"] == 2
    view = await scenario.run_view(run_id)
    assert len(view["state"]["receipts"]) == 2
    goods_waits = [t["summary"] for t in view["state"]["history"] if t["tool"] == "wait_for_goods"]
    assert len(goods_waits) == 2 and goods_waits[-1].endswith("(95 of 95)")


async def test_watch_checks_on_a_durable_timer_and_unwatch_stops_it(scenario: Scenario, admin) -> None:
    # Above safety stock at first; consumption takes it below within a few days.
    await scenario.setup(on_hand=30, safety_stock=20, daily_consumption=4)
    await scenario.check()
    for _ in range(3):
        response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/watch", json={})
        assert response.status_code == 200, response.text

    async def scheduled_ticks() -> list[dict]:
        return await admin.asql(
            "SELECT id FROM sys_invocation WHERE target_service_name = 'SkuAgent' "
            f"AND target_service_key = '{scenario.sku}' AND target_handler_name = 'tick' "
            "AND status IN ('scheduled', 'inboxed', 'ready', 'running', 'backing-off', 'suspended')"
        )

    assert len(await scheduled_ticks()) <= 1
    started = await eventually(
        lambda: _active_run(scenario), timeout=30, what="the durable timer to start a replenishment"
    )
    assert started == f"replenish-{scenario.sku}-1"
    assert await scenario.stock_reads() >= 2

    # A tick reads the clock with the stock and schedules the next from that reading: one
    # journaled step (two when it starts a run), no `timestamp` of its own.
    async def completed_ticks() -> dict[str, list[str]]:
        rows = await admin.asql(
            "SELECT j.id, j.name FROM sys_journal j JOIN sys_invocation i ON i.id = j.id "
            f"WHERE i.target = 'SkuAgent/{scenario.sku}/tick' AND i.status = 'completed' "
            "AND j.entry_type = 'Command: Run' ORDER BY j.id, j.index"
        )
        steps: dict[str, list[str]] = {}
        for row in rows:
            steps.setdefault(row["id"], []).append(row.get("name") or "")
        return steps

    steps = await eventually(completed_ticks, timeout=10, what="a completed tick to look at")
    assert all(run in ([names.READ_STOCK], [names.READ_STOCK, names.RUN_REQUEST]) for run in steps.values()), steps

    response = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/unwatch")
    assert response.status_code == 200 and response.json()["watch"]["watching"] is False
    await eventually(lambda: _no_ticks(scheduled_ticks), timeout=10, what="pending ticks to be cancelled")


async def _active_run(scenario: Scenario) -> str | None:
    status = await scenario.status()
    return status["active"]["run_id"] if status["active"] else None


async def _no_ticks(scheduled_ticks) -> bool:
    return not await scheduled_ticks()


async def test_a_watched_skus_checks_fall_at_its_own_time_of_the_working_day(scenario: Scenario, admin) -> None:
    """#36: SKUs put under watch together check at their own times of the day, not all at once."""
    await scenario.setup(on_hand=90, safety_stock=20)  # nothing to order: only the checks
    ok(await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/watch", json={"interval_days": 200}))
    slot = check_fraction(scenario.sku)
    assert (await scenario.status())["check_time"] == BusinessCalendar().time_of(slot)
    clock = CalendarClock(day_seconds=TEST_DAY_SECONDS, origin=ClockOrigin.at(CLOCK_ORIGIN))

    async def sent_tick() -> list[dict[str, Any]] | None:
        # The first tick's send of the next, as Restate journaled it (its invoke time with it). Read by
        # invocation id, not through a join with sys_invocation: a join that selects `entry_json` makes
        # Restate render every journal entry on the server first (11.4 s at the 16,824 entries a
        # worker's server held at the end of a CI pass, where this poll's first query outlasted its 10 s).
        ticks = await admin.asql(
            f"SELECT id FROM sys_invocation WHERE target = 'SkuAgent/{scenario.sku}/tick' AND status = 'completed'"
        )
        if not ticks:
            return None
        ids = ", ".join(f"'{tick['id']}'" for tick in ticks)
        rows = await admin.asql(
            f"SELECT entry_json FROM sys_journal WHERE id IN ({ids}) AND entry_type = 'Command: OneWayCall'"
        )
        # The tick also sends the SKU's line to the list (its check read the stock): not that send.
        return [r for r in rows if SKU_LIST not in r["entry_json"]] or None

    [row] = await eventually(sent_tick, timeout=10, what="the first tick's send of the next")
    due = json.loads(row["entry_json"])["Command"]["OneWayCall"]["invoke_time"] / 1000
    checked_at = (await scenario.status())["last_check"]["at"]  # the check's own journaled reading
    # Restate dates the send from when it took it, a few milliseconds after the check's reading: on
    # this clock a millisecond is 6 minutes of the site's day, so compare on the wall clock.
    slot_due = clock.spread_after(checked_at, 200, slot)
    assert 0 <= due - slot_due < 2, (clock.local(due), clock.local(slot_due))
    # Not where 200 business days from the check would fall without the spread: hours away.
    plain_due = clock.after(checked_at, 200)
    assert abs(clock.business_days(plain_due, slot_due)) > 0.01 or abs(slot - local_fraction(clock, checked_at)) < 0.01
    ok(await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/unwatch"))
    assert (await scenario.status())["check_time"] is None, "not watched: no time of day"


def local_fraction(clock: CalendarClock, wall: float) -> float:
    """How far through the (24-hour) site day wall instant `wall` falls, 0 to 1."""
    at = clock.local(wall)
    return (at.hour * 3600 + at.minute * 60 + at.second) / 86_400
