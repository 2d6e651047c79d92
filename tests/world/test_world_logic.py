"""The world's pure parts, without HTTP: pricing, stock, faults, orders, approvals, routing."""

from __future__ import annotations

import asyncio
from datetime import date

import httpx
import pytest
from pydantic import ValidationError

from replenisher.domain.calendar import BusinessCalendar, utc_instant
from replenisher.domain.documents import ApprovalRequest, GoodsReceipt, PurchaseOrder, QuoteRequest
from simulated_world.calls import CallFilter, CallLog, CallRecord, FirstCallQuery
from simulated_world.catalogue import DEMO_BUDGET, demo, load
from simulated_world.clock import Clock
from simulated_world.erp import BookedReceipt, Erp, ItemSetup, level_after
from simulated_world.errors import BadRequest, Conflict, NotFound
from simulated_world.faults import SupplierFaults
from simulated_world.manager import ApprovalFilter, DecisionBody, ManagerInbox, ManagerPolicy
from simulated_world.messenger import MessageFilter, Messenger, idempotency_key
from simulated_world.routing import routing_path, split_path, without_blank_values
from simulated_world.scheduler import Scheduler
from simulated_world.settings import WorldSettings
from simulated_world.suppliers import (
    Supplier,
    SupplierSetup,
    drift_factor,
    reply_text,
    split_quantity,
    unit_price,
)
from support import eventually

DAY = 10.0
# Every day a working day, all day: a business day is a calendar day of DAY seconds.
DAY_CLOCK = Clock(DAY, wall_origin=0.0, calendar_origin=0.0, calendar=BusinessCalendar.every_day())


def supplier(**setup: object) -> Supplier:
    fields = {"name": "Acme", "prices": {"SKU-1": 10.0}, "lead_days": 2.0, "reply_days": 1.0, **setup}
    return Supplier("acme", SupplierSetup.model_validate(fields))


def purchase_order(**fields: object) -> PurchaseOrder:
    values = {"po_number": "PO-1", "sku": "SKU-1", "supplier": "acme", "quantity": 10, "unit_price": 10.0}
    return PurchaseOrder.model_validate({"quote_id": "q1", **values, **fields})


def approval_request(**fields: object) -> ApprovalRequest:
    values = {"po_number": "PO-1", "sku": "SKU-1", "supplier": "acme", "quantity": 10, "unit_price": 10.0}
    extra = {"quote_id": "q1", "expires_at": 1e10, "token": "t1", "run_id": "replenish-SKU-1-1"}
    return ApprovalRequest.model_validate({**values, **extra, **fields})


# --- pricing -------------------------------------------------------------------------


def test_drift_is_fixed_within_a_day_and_bounded() -> None:
    factors = [drift_factor("acme", "SKU-1", day, 0.05) for day in range(200)]
    assert drift_factor("acme", "SKU-1", 7, 0.05) == factors[7]
    assert all(0.95 <= f <= 1.05 for f in factors)
    assert len(set(factors)) > 150, "the price should wander from day to day"
    assert drift_factor("acme", "SKU-1", 7, 0.0) == 1.0


def test_price_rise_applies_on_top_of_drift_and_never_reaches_zero() -> None:
    assert unit_price(10.0, "acme", "SKU-1", 3, 0.0, 10.0) == 11.0
    drifted = 10.0 * drift_factor("acme", "SKU-1", 3, 0.05)
    assert unit_price(10.0, "acme", "SKU-1", 3, 0.05, 0.0) == round(drifted, 2)
    assert unit_price(10.0, "acme", "SKU-1", 3, 0.05, 50.0) == round(drifted * 1.5, 2)
    assert unit_price(0.01, "acme", "SKU-1", 3, 0.0, -99.0) == 0.01


def test_quote_is_valid_for_the_configured_days() -> None:
    acme = supplier(quote_valid_days=3.0)
    quote = acme.quote(QuoteRequest(sku="SKU-1", quantity=5), now=1000.0, day=0, rise_pct=0.0, day_seconds=DAY)
    assert (quote.unit_price, quote.valid_until, quote.lead_days, quote.quantity) == (10.0, 1030.0, 2.0, 5)
    second = acme.quote(QuoteRequest(sku="SKU-1", quantity=5), now=1000.0, day=0, rise_pct=0.0, day_seconds=DAY)
    assert second.quote_id != quote.quote_id
    with pytest.raises(NotFound):
        acme.quote(QuoteRequest(sku="SKU-2", quantity=5), now=1000.0, day=0, rise_pct=0.0, day_seconds=DAY)


@pytest.mark.parametrize(
    ("quantity", "parts", "expected"),
    [(10, 1, [10]), (10, 3, [4, 3, 3]), (2, 5, [1, 1]), (9, 3, [3, 3, 3])],
)
def test_split_quantity_spreads_evenly_without_empty_shipments(quantity: int, parts: int, expected: list[int]) -> None:
    assert split_quantity(quantity, parts) == expected


# --- stock ---------------------------------------------------------------------------


def test_stock_is_consumed_lazily_floored_and_never_negative() -> None:
    assert level_after(100.0, since=0.0, now=25.0, daily_consumption=4.0, day_seconds=DAY) == 90.0
    assert level_after(5.0, since=0.0, now=1000.0, daily_consumption=4.0, day_seconds=DAY) == 0.0
    assert level_after(5.0, since=10.0, now=0.0, daily_consumption=4.0, day_seconds=DAY) == 5.0
    erp = Erp(DAY)
    erp.set_item(
        "SKU-1", ItemSetup(on_hand=10, safety_stock=2, target_stock=20, daily_consumption=3, suppliers=["a"]), 0
    )
    assert erp.stock("SKU-1", now=5.0).on_hand == 8  # 10 - 1.5, floored
    assert erp.stock("SKU-1", now=500.0).on_hand == 0


def test_goods_booked_in_raise_stock_and_are_consumed_from_then_on() -> None:
    erp = Erp(DAY)
    erp.set_item(
        "SKU-1", ItemSetup(on_hand=10, safety_stock=2, target_stock=20, daily_consumption=2, suppliers=["a"]), 0
    )
    # Empty at day 5; goods arriving at day 10 must not be eaten by the days the shelf stood empty.
    erp.book_goods(
        BookedReceipt(receipt_id="r1", po_number="PO-1", sku="SKU-1", supplier="a", quantity=30, booked_at=100)
    )
    assert erp.stock("SKU-1", now=100.0).on_hand == 30
    assert erp.stock("SKU-1", now=120.0).on_hand == 26
    assert [r.receipt_id for r in erp.receipts] == ["r1"]


def test_a_receipt_id_is_booked_once_a_repeat_adds_no_stock_and_other_numbers_conflict() -> None:
    erp = Erp(DAY)
    erp.set_item(
        "SKU-1", ItemSetup(on_hand=10, safety_stock=2, target_stock=20, daily_consumption=0, suppliers=["a"]), 0
    )
    first = BookedReceipt(receipt_id="r1", po_number="PO-1", sku="SKU-1", supplier="a", quantity=30, booked_at=100)
    assert erp.book_goods(first) == first
    # The docs' `curl -X POST .../admin/goods-receipts` sent twice: one booking, one stock rise.
    assert erp.book_goods(first.model_copy(update={"booked_at": 200})) == first
    assert erp.stock("SKU-1", now=300.0).on_hand == 40
    with pytest.raises(Conflict, match="'r1' is already booked with other numbers"):
        erp.book_goods(first.model_copy(update={"quantity": 99, "booked_at": 300}))
    assert erp.stock("SKU-1", now=300.0).on_hand == 40
    assert erp.receipts == [first] and erp.receipt("r1") == first


def test_item_setup_refuses_a_target_at_or_below_safety_stock() -> None:
    with pytest.raises(ValidationError, match="target_stock"):
        ItemSetup(on_hand=1, safety_stock=10, target_stock=10, suppliers=["a"])


# --- faults --------------------------------------------------------------------------


def test_faults_merge_only_what_was_sent_and_counters_are_spent_exactly() -> None:
    faults = SupplierFaults().merged(SupplierFaults.model_validate({"down_calls": 2, "reply_text": "ignore all"}))
    faults = faults.merged(SupplierFaults.model_validate({"quiet": True}))
    assert (faults.down_calls, faults.quiet, faults.reply_text) == (2, True, "ignore all")
    assert [faults.take_down_call() for _ in range(3)] == [True, True, False]
    assert faults.take_reply_text() == "ignore all"
    assert faults.take_reply_text() is None
    assert faults.take_lost_answer() is False
    cleared = faults.merged(SupplierFaults.model_validate({"reply_text": None, "quiet": False}))
    assert (cleared.quiet, cleared.reply_text) == (False, None)


def test_going_down_after_an_order_arms_down_calls_once() -> None:
    faults = SupplierFaults.model_validate({"down_after_order_calls": 2})
    assert faults.take_down_call() is False
    faults.go_down_after_order()
    faults.go_down_after_order()
    assert [faults.take_down_call() for _ in range(3)] == [True, True, False]


def test_faults_refuse_nonsense() -> None:
    with pytest.raises(ValidationError):
        SupplierFaults.model_validate({"down_calls": -1})
    with pytest.raises(ValidationError):
        SupplierFaults.model_validate({"price_rise_pct": -100})
    with pytest.raises(ValidationError):
        SupplierFaults.model_validate({"down_calls": None})


# --- orders --------------------------------------------------------------------------


def test_an_order_is_taken_once_per_po_however_often_it_is_submitted() -> None:
    acme = supplier(deliveries=2, delivery_gap_days=0.5)
    first, created = acme.take_order(purchase_order(quantity=7), now=100.0, clock=DAY_CLOCK)
    again, created_again = acme.take_order(purchase_order(quantity=7), now=150.0, clock=DAY_CLOCK)
    assert (created, created_again) == (True, False)
    assert again.ack == first.ack and again.submissions == 2 and len(acme.orders) == 1
    assert [(s.quantity, s.due_at) for s in first.shipments] == [(4, 120.0), (3, 125.0)]
    assert [(r.cause, r.due_at) for r in first.replies] == [("order", 110.0)]


def test_reply_and_lead_times_are_business_days_on_the_site_calendar() -> None:
    """Friday 2026-12-04 12:00, Monday 2026-12-07 a holiday: a reply due in one business day
    comes Tuesday 12:00 (not Saturday), goods due in two business days Wednesday 12:00 and the
    second delivery a business day later; the reply states the business days left."""
    friday_noon = utc_instant("2026-12-04T12:00")
    site = BusinessCalendar(holidays=(date(2026, 12, 7),))
    clock = Clock(DAY, wall_origin=0.0, calendar_origin=friday_noon, calendar=site)
    order, _ = supplier(deliveries=2, delivery_gap_days=1.0).take_order(purchase_order(), now=0.0, clock=clock)
    assert [clock.date(r.due_at) for r in order.replies] == ["2026-12-08"]
    assert [clock.date(s.due_at) for s in order.shipments] == ["2026-12-09", "2026-12-10"]
    assert order.replies[0].due_at == pytest.approx(clock.site.to_wall(utc_instant("2026-12-08T12:00")))
    assert "Expected delivery in 2.0 days in 2 shipments." in reply_text(
        supplier(), order, "order", order.replies[0].due_at, clock
    )


def test_an_order_is_refused_on_conflict_wrong_supplier_or_unknown_sku() -> None:
    acme = supplier()
    acme.take_order(purchase_order(), now=0.0, clock=DAY_CLOCK)
    with pytest.raises(Conflict):
        acme.take_order(purchase_order(quantity=11), now=0.0, clock=DAY_CLOCK)
    with pytest.raises(BadRequest):
        acme.take_order(purchase_order(po_number="PO-2", supplier="bolt"), now=0.0, clock=DAY_CLOCK)
    with pytest.raises(NotFound):
        acme.take_order(purchase_order(po_number="PO-3", sku="SKU-9"), now=0.0, clock=DAY_CLOCK)
    assert list(acme.orders) == ["PO-1"] and acme.orders["PO-1"].submissions == 1


def test_cancelling_stops_what_is_still_planned_and_is_idempotent() -> None:
    acme = supplier(deliveries=2)
    order, _ = acme.take_order(purchase_order(), now=0.0, clock=DAY_CLOCK)
    order.shipments[0].status = "delivered"
    order.cancel("no longer needed", now=5.0)
    order.cancel("again", now=6.0)
    assert [s.status for s in order.shipments] == ["delivered", "cancelled"]
    assert (order.cancelled_at, order.cancel_reason, order.shipped_quantity) == (5.0, "no longer needed", 5)


# --- manager -------------------------------------------------------------------------


def test_policy_approves_within_budget_and_rejects_or_holds_above() -> None:
    cheap, dear = approval_request(unit_price=10.0), approval_request(unit_price=50.0)
    policy = ManagerPolicy(auto_approve=True, max_unit_price=20.0)
    approval = policy.decide(cheap)
    assert approval is not None and (approval.approved, approval.up_to, approval.token) == (True, 10.0, "t1")
    rejection = policy.decide(dear)
    assert rejection is not None and rejection.approved is False
    assert ManagerPolicy(auto_approve=True, max_unit_price=20.0, over_budget="hold").decide(dear) is None
    assert ManagerPolicy().decide(cheap) is None


def test_inbox_is_idempotent_per_token_and_a_new_token_supersedes() -> None:
    inbox = ManagerInbox()
    _, created = inbox.receive(approval_request(), now=1.0)
    entry, created_again = inbox.receive(approval_request(), now=2.0)
    assert (created, created_again, entry.posts) == (True, False, 2)
    with pytest.raises(Conflict):
        inbox.receive(approval_request(unit_price=11.0), now=3.0)
    inbox.receive(approval_request(token="t2", unit_price=11.0), now=4.0)
    assert [e.status for e in inbox.find(ApprovalFilter())] == ["superseded", "pending"]
    decision = inbox.decide("PO-1", DecisionBody(approved=True), now=5.0)
    assert (decision.token, decision.up_to, decision.by) == ("t2", 11.0, "manager")
    with pytest.raises(Conflict):
        inbox.decide("PO-1", DecisionBody(approved=False), now=6.0)
    with pytest.raises(NotFound):
        inbox.decide("PO-404", DecisionBody(approved=True), now=6.0)


# --- routing, settings, catalogue, call log -------------------------------------------


def test_a_slash_inside_a_segment_stays_in_it_and_blank_filters_are_no_filters() -> None:
    segments = split_path({"path": "/x/PO/1", "raw_path": b"/x/PO%2F1?a=1"})
    assert segments == ["x", "PO/1"]
    # FastAPI routes on this path; the `segment` convertor decodes what it kept encoded.
    assert routing_path(["x", "PO/1", "50%"]) == "/x/PO%2F1/50%25"
    assert without_blank_values(b"sku=&op=quote&po_number=") == (b"op=quote", {"op": "quote"})


def test_settings_come_from_the_environment_with_defaults() -> None:
    default = WorldSettings.from_env({})
    assert (str(default.ingress_url), default.day_seconds, default.catalogue) == (
        "http://127.0.0.1:8080/",
        86_400.0,
        "empty",
    )
    demo_settings = WorldSettings.from_env({"WORLD_DAY_SECONDS": "0.5", "WORLD_CATALOGUE": "demo"})
    assert (demo_settings.day_seconds, demo_settings.catalogue) == (0.5, "demo")
    with pytest.raises(ValidationError):
        WorldSettings.from_env({"WORLD_DAY_SECONDS": "0"})
    with pytest.raises(ValidationError):
        WorldSettings.from_env({"WORLD_CATALOGUE": "huge"})


def test_demo_catalogue_has_work_to_do_from_the_start() -> None:
    catalogue = demo()
    assert sorted(catalogue.suppliers) == ["acme", "bolt", "cogs"]
    assert list(catalogue.items) == [f"SKU-{n}" for n in range(101, 121)]
    below = [sku for sku, item in catalogue.items.items() if item.on_hand < item.safety_stock]
    assert len(below) >= 4
    over_budget = {
        sku
        for sku in catalogue.items
        if min(s.prices[sku] for s in catalogue.suppliers.values() if sku in s.prices) > DEMO_BUDGET
    }
    assert over_budget == {"SKU-106", "SKU-113", "SKU-119"}
    assert all(sid in catalogue.suppliers for item in catalogue.items.values() for sid in item.suppliers)
    assert catalogue.policy.auto_approve and load("empty").items == {}


def test_call_log_filters_on_every_field_given() -> None:
    log = CallLog()
    log.record(CallRecord(at=1, service="supplier", op="quote", supplier="a", sku="S1", status=200))
    log.record(
        CallRecord(at=2, service="supplier", op="place_order", supplier="a", sku="S1", po_number="P", status=503)
    )
    log.record(CallRecord(at=3, service="erp", op="get_stock", sku="S2", status=200))
    assert [c.at for c in log.find(CallFilter(sku="S1"))] == [1, 2]
    assert [c.at for c in log.find(CallFilter(sku="S1", op="place_order"))] == [2]
    assert len(log.find(CallFilter())) == 3


# --- messenger -----------------------------------------------------------------------


async def test_messenger_retries_5xx_in_order_and_gives_up_only_on_4xx() -> None:
    seen: list[tuple[str, str]] = []
    answers = {"world-goods-PO-1-1": [503, 503, 200], "world-goods-PO-1-2": [200], "world-goods-PO-2-1": [400]}

    def answer(request: httpx.Request) -> httpx.Response:
        key = request.headers["idempotency-key"]
        seen.append((request.url.path, key))
        return httpx.Response(answers[key].pop(0), text="no")

    clock = Clock(1.0)
    scheduler = Scheduler(clock)
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        messenger = Messenger("http://ingress/", client, scheduler, clock, first_backoff=0.001, max_backoff=0.01)
        for n, po in ((1, "PO-1"), (2, "PO-1"), (1, "PO-2")):
            messenger.push("SKU-1", "goods", GoodsReceipt(receipt_id=f"r{n}", po_number=po, sku="SKU-1", quantity=1))
        await eventually(
            lambda: all(m.status != "pending" for m in messenger.find(MessageFilter())),
            timeout=5,
            interval=0.005,
            what="every push to be delivered or rejected",
        )
        await scheduler.aclose()
    assert [key for _, key in seen] == ["world-goods-PO-1-1"] * 3 + ["world-goods-PO-1-2", "world-goods-PO-2-1"]
    assert {path for path, _ in seen} == {"/SkuAgent/SKU-1/deliver"}
    assert [(m.status, m.attempts) for m in messenger.find(MessageFilter())] == [
        ("delivered", 3),
        ("delivered", 1),
        ("rejected", 1),
    ]
    assert idempotency_key("approval", "PO 1/ä", 2) == "world-approval-PO%201%2F%C3%A4-2"


async def test_a_first_call_wait_leaves_nothing_behind_once_it_ends_either_way() -> None:
    log = CallLog()
    quote = FirstCallQuery(sku="S1", op="quote", wait=0.05)
    assert (await log.first(quote)).at is None, "nobody called"
    assert log.waiting_keys == 0, "a wait that timed out is not kept"

    # Two wait together; one gives up, the other still gets the call when it comes.
    short = asyncio.ensure_future(log.first(quote))
    long = asyncio.ensure_future(log.first(quote.model_copy(update={"wait": 5.0})))
    gave_up = await short
    assert gave_up.at is None and gave_up.waiting == 1, "it says the other still waits"
    assert log.waiting_keys == 1, "the other still waits"
    log.record(CallRecord(at=7, service="supplier", op="quote", supplier="a", sku="S1", status=200))
    assert (await asyncio.wait_for(long, 2)).at == 7
    assert log.waiting_keys == 0
