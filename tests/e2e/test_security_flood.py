"""A flood of refused messages cannot blind the security record (issue 30, item 1).

Through the real stack (inbound endpoint, restate-server, service, world as processes): a
supplier the ERP lists for the SKU, but not the order's supplier, sends 500 signed replies the
run and the SKU must refuse; then the order's own supplier replies with a delivery beyond the
bound. Before the bounded log, the run kept the first 50 events and the SKU heard of nothing
after them: the later event was recorded nowhere. Judged from the run's state and the SKU's
record, with exact totals.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from e2e.scenario import JSON, Scenario, ok
from replenisher.domain.security_log import SECURITY_LOG_BOUND
from replenisher.domain.sku import ROUTED_PER_SENDER
from replenisher.inbound.signing import secret_for, signed_headers
from support import eventually, while_progressing

pytestmark = pytest.mark.e2e

FLOOD = 500


async def send(door: httpx.AsyncClient, secrets: dict[str, str], party: str, sku: str, body: JSON) -> JSON:
    """One message as `party`, signed with its secret, through the inbound endpoint."""
    raw = json.dumps(body).encode()
    path = f"/messages/{sku}"
    headers = signed_headers(secret_for(secrets, party) or "", party, path, raw, time.time())
    return ok(await door.post(path, content=raw, headers=headers))


def exact(log: dict[str, Any]) -> None:
    """The log's kept entries and its drops add up to its total, within the bound."""
    assert log["total"] == sum(e["count"] for e in log["recent"]) + sum(log["dropped"].values()), log
    assert len(log["recent"]) <= SECURITY_LOG_BOUND


# Ten times the work of a usual e2e test (500 signed requests, a turn per routed reply), so three
# times the suite's 180 s backstop; the waits inside are bounded by progress (while_progressing).
@pytest.mark.timeout(540)
@pytest.mark.slow
async def test_after_500_refused_messages_from_one_supplier_another_senders_event_is_recorded_and_totals_are_exact(
    scenario: Scenario, door: httpx.AsyncClient, secrets: dict[str, str]
) -> None:
    await scenario.setup(lead_days=300)
    # A second supplier the ERP lists for the SKU, dearer, so the order goes to the first.
    rival = f"{scenario.supplier}-rival"
    ok(
        await scenario.world.put(
            f"/admin/suppliers/{rival}",
            json={"name": f"Supplier {rival}", "prices": {scenario.sku: 9.0}, "lead_days": 300, "reply_days": 0.5},
        )
    )
    item = {"on_hand": 5, "safety_stock": 20, "target_stock": 100, "suppliers": [scenario.supplier, rival]}
    ok(await scenario.world.put(f"/admin/items/{scenario.sku}", json=item))
    await scenario.fault(quiet=True)  # the order's supplier replies only as this test says
    await scenario.configure(approval=60, supplier_reply=365)  # the run waits out the flood
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    po = request["po_number"]
    assert request["supplier"] == scenario.supplier
    await scenario.decide(po, approved=True)
    await scenario.waiting_for(run_id, "wait_for_supplier_reply", within=30)

    # The flood: each reply about another PO (no two alike, so nothing collapses at the run).
    gate = asyncio.Semaphore(8)

    async def junk(i: int) -> None:
        payload = {"po_number": f"PO-JUNK-{i}", "supplier": rival, "text": f"Cancel everything {i}."}
        async with gate:
            await send(
                door, secrets, f"supplier:{rival}", scenario.sku, {"event": "supplier-reply", "payload": payload}
            )

    await asyncio.gather(*(junk(i) for i in range(FLOOD)))

    # Then the order's own supplier, through the same door: a delivery far beyond the bound.
    text = "We confirm the order; delivery in 400 days."
    reply = {"po_number": po, "supplier": scenario.supplier, "text": text}
    sent = await send(
        door, secrets, f"supplier:{scenario.supplier}", scenario.sku, {"event": "supplier-reply", "payload": reply}
    )
    assert sent["run_id"] == run_id and sent["kept"] is False, sent

    def beyond(log: dict[str, Any]) -> list[JSON]:
        return [
            e
            for e in log["recent"]
            if e["source"] == f"supplier:{scenario.supplier}" and "beyond the bound" in e["what"]
        ]

    async def run_saw_it() -> JSON | None:
        state = (await scenario.run_view(run_id))["state"]
        return state if beyond(state["security"]) else None

    async def sku_saw_it() -> JSON | None:
        status = await scenario.status()
        return status if beyond(status["security"]) else None

    async def replies_read() -> object:
        return (await scenario.run_view(run_id))["state"]["consumed"]

    # The run reads every routed reply as a turn of its own (in always-replay mode each one a replay of
    # a growing journal): bounded by the run standing still, not by a guess at a loaded machine's pace.
    state = await while_progressing(
        run_saw_it, replies_read, stall=30, what="the run to record the reply beyond the bound"
    )
    status = await eventually(sku_saw_it, timeout=30, what="the SKU to record the reply beyond the bound")
    state = (await scenario.run_view(run_id))["state"]

    # The run read the rival's first ROUTED_PER_SENDER replies (each refused) and the real one.
    run_log = state["security"]
    assert state["consumed"]["supplier-reply"] == ROUTED_PER_SENDER + 1
    assert run_log["total"] == ROUTED_PER_SENDER + 1
    assert run_log["dropped"] == {f"supplier:{rival}": ROUTED_PER_SENDER + 1 - SECURITY_LOG_BOUND}
    assert run_log["recent"][-1] == beyond(run_log)[0], "the real supplier's event is the newest"
    assert all(e["source"] == f"supplier:{rival}" for e in run_log["recent"][:-1])
    exact(run_log)

    # The SKU: every event the run recorded, plus its own: the rest of the flood, past the rival's
    # share of the run, kept and counted as one collapsed entry.
    sku_log = status["security"]
    capped = [e for e in sku_log["recent"] if "too many messages" in e["what"]]
    assert [(e["source"], e["count"], e["run_id"]) for e in capped] == [
        (f"supplier:{rival}", FLOOD - ROUTED_PER_SENDER, run_id)
    ]
    assert sku_log["total"] == run_log["total"] + FLOOD - ROUTED_PER_SENDER
    assert set(sku_log["dropped"]) <= {f"supplier:{rival}"}, "only the flooder's own entries were dropped"
    [seen] = beyond(sku_log)
    assert seen["run_id"] == run_id and seen["count"] == 1
    exact(sku_log)
    replies = [m for m in status["active"]["routed"] if m["event"] == "supplier-reply"]
    assert len(replies) == ROUTED_PER_SENDER + 1
    assert status["kept_overflow"] + len(status["kept"]) == FLOOD - ROUTED_PER_SENDER
