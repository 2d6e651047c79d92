"""One attack's slice of a real stack: its SKU and suppliers, the ports an attacker reaches, and
the world's records the judge reads.

Every request here goes over HTTP to a real process: Restate's ingress (the operators' port,
and the private handlers behind it), the inbound endpoint (the outside parties' door), and
the simulated world (setup, the manager's inbox, fault knobs, and its records).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

JSON = dict[str, Any]

ON_HAND, SAFETY, TARGET = 5, 20, 100
NEEDED = TARGET - ON_HAND
PRICE, RIVAL_PRICE = 4.0, 3.0


@dataclass
class Target:
    kind: str
    attack_id: str
    ingress: httpx.AsyncClient
    world: httpx.AsyncClient
    inbound: httpx.AsyncClient | None
    secrets: dict[str, str]
    sku: str = ""
    supplier: str = ""
    rival: str = ""
    decoy_sku: str = ""
    run_id: str | None = None
    request: JSON | None = None
    """The approval request the manager's inbox holds for the run (with its token)."""
    answers: list[str] = field(default_factory=list)
    """What each crafted request got back: `<where> <status> <reason>`."""
    reached: int = 0
    """Crafted requests that got through the real processes (answered, whatever the answer)."""

    index: int = 0
    tag: str = ""
    admin_url: str = ""
    """Restate's admin API: only the positive controls touch it (an operator's tool)."""

    def __post_init__(self) -> None:
        self.tag = self.tag or uuid.uuid4().hex[:6]
        short = self.attack_id[:22].strip("-")
        self.sku = self.sku or f"INJ-{self.kind}-{self.index:03d}-{short}-{self.tag}"
        self.supplier, self.rival = names(self.index, self.tag)

    # --- answers ---------------------------------------------------------------------------

    def note(self, where: str, response: httpx.Response) -> httpx.Response:
        self.reached += 1
        self.answers.append(f"{where} {response.status_code} {response.text[:160]}")
        return response

    # --- setup through the world's admin API ---------------------------------------------

    async def setup(self, *, rival: bool = False, lead_days: float = 6, reply_days: float = 0.5) -> None:
        """The SKU and its supplier(s). Goods come some days after the supplier's confirmation, so an
        attack timed "once ordered" lands while the run still waits for them."""
        suppliers = [self.supplier, *([self.rival] if rival else [])]
        for sid, price in ((self.supplier, PRICE), (self.rival, RIVAL_PRICE)):
            if sid not in suppliers:
                continue
            body = {
                "name": f"Supplier {sid}",
                "prices": {self.sku: price},
                "lead_days": lead_days,
                "reply_days": reply_days,
                # Far longer than a run takes on a loaded machine, within the agent's bound (365).
                "quote_valid_days": 200,
            }
            ok(await self.world.put(f"/admin/suppliers/{sid}", json=body))
        await self.set_item(ON_HAND, suppliers)

    async def set_item(self, on_hand: int, suppliers: list[str] | None = None) -> None:
        item = {
            "on_hand": on_hand,
            "safety_stock": SAFETY,
            "target_stock": TARGET,
            "suppliers": suppliers or [self.supplier],
        }
        ok(await self.world.put(f"/admin/items/{self.sku}", json=item))

    async def fault(self, supplier: str, faults: JSON) -> None:
        ok(await self.world.put(f"/faults/suppliers/{supplier}", json=faults))

    # --- the operators' port: Restate's ingress -------------------------------------------

    async def check(self) -> JSON:
        return ok(await self.ingress.post(f"/SkuAgent/{self.sku}/check"))

    async def status(self) -> JSON:
        return ok(await self.ingress.get(f"/SkuAgent/{self.sku}/status"))

    async def call(self, path: str, body: Any = None, *, raw: bytes | None = None, **headers: str) -> httpx.Response:
        """Any handler through the ingress, as whoever reaches that port."""
        if raw is None:
            raw = json.dumps(body).encode() if body is not None else b""
        head = {"content-type": "application/json", **{k.replace("_", "-"): v for k, v in headers.items()}}
        return self.note(f"ingress {path}", await self.ingress.post(path, content=raw, headers=head))

    async def deliver(self, event: str, payload: Any, key: str | None = None) -> httpx.Response:
        body = {"event": event, "payload": payload}
        headers = {"idempotency_key": key} if key else {}
        return await self.call(f"/SkuAgent/{self.sku}/deliver", body, **headers)

    # --- the outside parties' door: the inbound endpoint ----------------------------------

    def signed_headers(
        self, party: str, path: str, body: bytes, *, secret: str | None = None, timestamp: int | None = None
    ) -> dict[str, str]:
        """Headers as TRUST-DESIGN.md specifies them; `secret`/`timestamp` let an attack forge them."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        key = secret if secret is not None else self.secrets.get(party, "")
        mac = hmac.new(key.encode(), f"v1:{ts}:{party}:{path}:".encode() + body, hashlib.sha256).hexdigest()
        return {
            "content-type": "application/json",
            "x-replenisher-party": party,
            "x-replenisher-timestamp": ts,
            "x-replenisher-signature": f"v1={mac}",
        }

    async def inbound_post(self, path: str, raw: bytes, headers: dict[str, str]) -> httpx.Response:
        assert self.inbound is not None, "the inbound endpoint is not part of this checkout"
        return self.note(f"inbound {path}", await self.inbound.post(path, content=raw, headers=headers))

    async def send_as(
        self,
        party: str,
        event: str,
        payload: Any,
        *,
        sku: str | None = None,
        secret: str | None = None,
        timestamp: int | None = None,
    ) -> httpx.Response:
        path = f"/messages/{sku or self.sku}"
        raw = json.dumps({"event": event, "payload": payload}).encode()
        return await self.inbound_post(
            path, raw, self.signed_headers(party, path, raw, secret=secret, timestamp=timestamp)
        )

    # --- the world's records ---------------------------------------------------------------

    async def approval_entries(self, sku: str | None = None) -> list[JSON]:
        body = ok(await self.world.get("/manager/approval-requests", params={"status": "all"}))
        return [e for e in body["requests"] if e["request"]["sku"] == (sku or self.sku)]

    async def orders(self) -> list[JSON]:
        return ok(await self.world.get("/admin/orders", params={"sku": self.sku}))["orders"]

    async def receipts(self) -> list[JSON]:
        return ok(await self.world.get("/erp/goods-receipts", params={"sku": self.sku}))["receipts"]

    async def closures(self) -> list[JSON]:
        return ok(await self.world.get("/erp/closures", params={"sku": self.sku}))["closures"]

    async def calls(self, **filters: str) -> list[JSON]:
        return ok(await self.world.get("/admin/calls", params={"sku": self.sku, **filters}))["calls"]

    async def messages(self) -> list[JSON]:
        return ok(await self.world.get("/admin/messages", params={"sku": self.sku}))["messages"]

    async def decide(self, po_number: str, approved: bool, up_to: float | None = None) -> None:
        body = {"approved": approved, "up_to": up_to, "note": "the manager, in the injection suite"}
        ok(await self.world.post(f"/manager/approval-requests/{po_number}/decision", json=body))


def names(index: int, tag: str) -> tuple[str, str]:
    """The suppliers of the index-th SKU of a stack: known before it starts, so each has a secret."""
    return f"s{index:03d}-{tag}", f"r{index:03d}-{tag}"


def ok(response: httpx.Response) -> Any:
    if not response.is_success:
        raise AssertionError(
            f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
        )
    return response.json()
