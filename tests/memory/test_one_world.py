"""The in-memory runs go through the simulated world's own core, not a copy of it.

`MemoryWorld` is the replenisher's ports over `simulated_world.SimulatedWorld`, as the HTTP
adapters are over the served world: the same refusals, the same faults, the same plans on the
site calendar, the same records a test judges a run by.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from replenisher.domain.documents import PurchaseOrder, QuoteRequest
from replenisher.domain.policy import OfflinePolicy
from replenisher.domain.ports import Malformed, Rejected
from replenisher.in_memory.engine import run_in_memory
from replenisher.in_memory.world import SKU, Clock, Inbox, MemoryWorld, SupplierSpec, Unanswered
from simulated_world.calls import CallFilter
from simulated_world.messenger import MessageFilter
from simulated_world.world import SimulatedWorld

FRIDAY_NOON = datetime(2026, 1, 2, 12, tzinfo=UTC).timestamp()


def order(quantity: int = 10) -> PurchaseOrder:
    return PurchaseOrder(po_number="PO-1", sku=SKU, supplier="acme", quantity=quantity, unit_price=4.0, quote_id="q")


async def test_refusals_faults_and_crafted_answers_come_back_as_over_http() -> None:
    world = MemoryWorld(Clock(), {"acme": SupplierSpec(price=4.0)})
    assert isinstance(world.core, SimulatedWorld)
    with pytest.raises(Rejected) as unknown:
        await world.quote("nobody", QuoteRequest(sku=SKU, quantity=1))
    assert unknown.value.status == 404 and "unknown supplier nobody" in unknown.value.reason
    world.set_faults("acme", down_calls=1)
    with pytest.raises(Unanswered):
        await world.live_price("acme", SKU)
    assert (await world.live_price("acme", SKU)).unit_price == 4.0
    world.set_faults("acme", quote_override={"quantity": -5})
    with pytest.raises(Malformed, match="Quote from /suppliers/acme/quotes: quantity"):
        await world.quote("acme", QuoteRequest(sku=SKU, quantity=1))
    first = await world.place_order(order())
    assert await world.place_order(order()) == first
    with pytest.raises(Rejected) as conflict:
        await world.place_order(order(quantity=11))
    assert conflict.value.status == 409
    assert [o.submissions for o in world.orders] == [2]
    calls = world.core.calls.find(CallFilter(supplier="acme"))
    assert [(c.op, c.status) for c in calls] == [
        ("live_price", 503),
        ("live_price", 200),
        ("quote", 200),
        ("place_order", 200),
        ("place_order", 200),
        ("place_order", 409),
    ]


async def test_a_run_meets_the_worlds_business_days_and_its_messages() -> None:
    # Approved half a calendar day after a Friday noon request, the order goes out on Saturday: its reply
    # (one business day) comes on Tuesday and its goods (two) on Wednesday, not on Sunday and Monday.
    clock = Clock(FRIDAY_NOON)
    world = MemoryWorld(clock, {"acme": SupplierSpec(price=4.0, lead_days=2.0, reply_days=1.0)})
    run = await run_in_memory(OfflinePolicy(), world, Inbox(world), suppliers=["acme"])
    assert run.result.outcome == "received"
    [placed] = world.orders
    [shipment], [reply] = placed.shipments, placed.replies
    assert (shipment.status, reply.status) == ("delivered", "sent")
    when = (placed.ack.accepted_at, reply.due_at, shipment.due_at)
    days = [datetime.fromtimestamp(t, UTC).strftime("%A") for t in when]
    assert days == ["Saturday", "Tuesday", "Wednesday"]
    sent = world.mailbox.find(MessageFilter(sku=SKU))
    assert [(m.event, m.party, m.status) for m in sent] == [
        ("approval", "manager", "delivered"),
        ("supplier-reply", "supplier:acme", "delivered"),
        ("goods", "warehouse", "delivered"),
    ]
    assert "Expected delivery in 1.0 days" in sent[1].payload["text"]  # from Tuesday's start to Wednesday's
    assert world.closed == [placed.po_number]
