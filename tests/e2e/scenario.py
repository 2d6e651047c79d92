"""One test's slice of the world: its own SKU and supplier, so tests never share state.

Everything goes through the real interfaces: the SKU's address on Restate's ingress,
and the simulated world's HTTP API (setup, the manager's channel, fault injection, and
its records of every call it received).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from support import eventually

JSON = dict[str, Any]


class Scenario:
    def __init__(self, ingress: httpx.AsyncClient, world: httpx.AsyncClient, name: str) -> None:
        tag = uuid.uuid4().hex[:6]
        self.ingress = ingress
        self.world = world
        self.sku = f"SKU-{name}-{tag}"
        self.supplier = f"sup-{name}-{tag}"

    # --- setup ---------------------------------------------------------------------------

    async def setup(
        self,
        *,
        on_hand: int = 5,
        safety_stock: int = 20,
        target_stock: int = 100,
        price: float = 4.0,
        lead_days: float = 2,
        reply_days: float = 0.5,
        deliveries: int = 1,
        daily_consumption: float = 0,
        quote_valid_days: float = 120,
    ) -> None:
        await self.supplier_terms(
            price=price,
            lead_days=lead_days,
            reply_days=reply_days,
            deliveries=deliveries,
            # Long enough (30 s) that a crash and a restart of the service (7 s seen under load) fit
            # before the quote expires: the run re-quotes an expired one. The tests of expiry set it short.
            quote_valid_days=quote_valid_days,
        )
        item = {
            "on_hand": on_hand,
            "safety_stock": safety_stock,
            "target_stock": target_stock,
            "daily_consumption": daily_consumption,
            "suppliers": [self.supplier],
        }
        ok(await self.world.put(f"/admin/items/{self.sku}", json=item))

    async def supplier_terms(
        self,
        *,
        price: float = 4.0,
        lead_days: float = 2,
        reply_days: float = 0.5,
        deliveries: int = 1,
        quote_valid_days: float = 120,
    ) -> None:
        """The scenario's supplier and its terms, set (or changed) in the world: quotes it gives from
        now on follow them, ones it gave keep theirs."""
        supplier = {
            "name": f"Supplier {self.supplier}",
            "prices": {self.sku: price},
            "lead_days": lead_days,
            "reply_days": reply_days,
            "deliveries": deliveries,
            "delivery_gap_days": 1,
            "quote_valid_days": quote_valid_days,
        }
        ok(await self.world.put(f"/admin/suppliers/{self.supplier}", json=supplier))

    async def book_goods(self, receipt_id: str, po_number: str, quantity: int) -> JSON:
        """The warehouse books goods in the ERP by hand (as if delivered outside the supplier's flow)."""
        receipt = {"receipt_id": receipt_id, "po_number": po_number, "sku": self.sku, "quantity": quantity}
        ok(await self.world.post("/admin/goods-receipts", json={**receipt, "supplier": self.supplier}))
        return receipt

    async def configure(self, **waits: float) -> JSON:
        """This SKU's own wait lengths in business days (approval, supplier_reply, goods_grace, ...)."""
        return ok(await self.ingress.post(f"/SkuAgent/{self.sku}/configure", json=waits))

    async def fault(self, **faults: Any) -> None:
        ok(await self.world.put(f"/faults/suppliers/{self.supplier}", json=faults))

    # --- the SKU's address ---------------------------------------------------------------

    async def check(self) -> JSON:
        return ok(await self.ingress.post(f"/SkuAgent/{self.sku}/check"))

    async def deliver(self, event: str, payload: JSON, key: str | None = None) -> httpx.Response:
        headers = {"idempotency-key": key} if key else {}
        return await self.ingress.post(
            f"/SkuAgent/{self.sku}/deliver", json={"event": event, "payload": payload}, headers=headers
        )

    async def status(self) -> JSON:
        return ok(await self.ingress.get(f"/SkuAgent/{self.sku}/status"))

    async def run_view(self, run_id: str) -> JSON:
        return ok(await self.ingress.post(f"/Replenish/{run_id}/state"))

    async def outcome(self, run_id: str, within: float = 30) -> JSON:
        async def finished() -> JSON | None:
            status = await self.status()
            return next((o for o in status["outcomes"] if o["run_id"] == run_id), None)

        return await eventually(finished, timeout=within, what=f"{run_id} to finish")

    async def waiting_for(self, run_id: str, tool: str, within: float = 20) -> JSON:
        async def waits() -> JSON | None:
            view = await self.run_view(run_id)
            return view if view["waiting"] and view["waiting"]["tool"] == tool else None

        return await eventually(waits, timeout=within, what=f"{run_id} to {tool}")

    # --- the manager's channel -----------------------------------------------------------

    async def approval_requests(self) -> list[JSON]:
        body = ok(await self.world.get("/manager/approval-requests", params={"status": "all"}))
        return [r for r in body["requests"] if r["request"]["sku"] == self.sku]

    async def pending_approval(self, within: float = 20) -> JSON:
        async def pending() -> JSON | None:
            return next((r["request"] for r in await self.approval_requests() if r["status"] == "pending"), None)

        return await eventually(pending, timeout=within, what=f"an approval request for {self.sku}")

    async def decide(self, po_number: str, approved: bool, up_to: float | None = None) -> None:
        body = {"approved": approved, "up_to": up_to, "note": "from the test"}
        ok(await self.world.post(f"/manager/approval-requests/{po_number}/decision", json=body))

    async def approved_run(self, **faults: Any) -> str:
        """A run started for the SKU (set up with the defaults) and its price approved, the supplier's
        `faults` set before the approval (none: a plain run); the run's id."""
        await self.setup()
        run_id: str = (await self.check())["started"]
        request = await self.pending_approval()
        if faults:
            await self.fault(**faults)
        await self.decide(request["po_number"], approved=True)
        return run_id

    # --- the world's records -------------------------------------------------------------

    async def calls(self, **filters: str) -> list[JSON]:
        params = {"supplier": self.supplier, **filters}
        return ok(await self.world.get("/admin/calls", params=params))["calls"]

    async def stock_reads(self) -> int:
        calls = ok(await self.world.get("/admin/calls", params={"sku": self.sku, "op": "get_stock"}))["calls"]
        return len(calls)

    async def closures(self) -> list[JSON]:
        return ok(await self.world.get("/erp/closures", params={"sku": self.sku}))["closures"]

    async def orders(self) -> list[JSON]:
        return ok(await self.world.get("/admin/orders", params={"supplier": self.supplier}))["orders"]


def ok(response: httpx.Response) -> Any:
    assert response.is_success, (
        f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
    )
    return response.json()
