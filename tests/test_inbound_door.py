"""The door's own rules, on the ASGI app: rate limits, reach by the ERP's item master, query
strings, TLS behind a proxy and the operators' stats. The ERP and the ingress are a transport
that answers as they do (the real stack's tests are in e2e/test_inbound_door.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from replenisher.domain.documents import Sender
from replenisher.inbound.app import InboundApp
from replenisher.inbound.limits import Limiter, RateLimits
from replenisher.inbound.reach import ItemCache, reach
from replenisher.inbound.settings import InboundSettings
from replenisher.inbound.signing import new_secrets, write_secrets
from replenisher.inbound.stamp import load_door_key, stamp, vouched_sender, write_new_door_key
from test_inbound_bad_input import REPLY, call, post, post_whole

ITEMS = {"SKU-101": ["acme", "bolt"], "SKU-102": ["bolt"]}
APPROVAL = {"event": "approval", "payload": {"po_number": "PO-1", "approved": True, "token": "t" * 32}}


class Door:
    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        self.secrets = new_secrets()
        path = tmp_path / "secrets.json"
        write_secrets(path, self.secrets)
        key = tmp_path / "door-key"
        write_new_door_key(key)
        self.door_key = load_door_key(key)
        settings = {"secrets_file": path, "door_key_file": key, "ingress_url": "http://ingress", **settings}
        self.app = InboundApp(InboundSettings.model_validate(settings))
        self.forwarded: list[httpx.Request] = []
        self.erp_reads = 0
        self.erp_down = False
        self.app._client = httpx.AsyncClient(transport=httpx.MockTransport(self.answer))

    def answer(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/erp/items/"):
            self.erp_reads += 1
            if self.erp_down:
                raise httpx.ConnectError("refused", request=request)
            sku = request.url.path.rsplit("/", 1)[1]
            if sku not in ITEMS:
                return httpx.Response(404, json={"error": "no such item"})
            return httpx.Response(200, json={"sku": sku, "on_hand": 1, "suppliers": ITEMS[sku]})
        self.forwarded.append(request)
        return httpx.Response(200, json={"kept": True})

    async def send(
        self, sku: str, body: dict[str, Any], party: str = "supplier:acme", **kw: Any
    ) -> tuple[int, dict[str, Any]]:
        return await post(
            self.app, self.secrets, f"/messages/{sku}".encode(), json.dumps(body).encode(), party=party, **kw
        )


def reply_from(supplier: str, n: int = 0) -> dict[str, Any]:
    return {"event": "supplier-reply", "payload": {"po_number": f"PO-{n}", "supplier": supplier, "text": "ok"}}


def test_a_bucket_takes_a_minutes_worth_at_once_then_the_steady_rate() -> None:
    limiter = Limiter(per_minute=60)
    for _ in range(60):
        assert limiter.wait("supplier:acme", 100.0) == 0
        limiter.spend("supplier:acme", 100.0)
    assert limiter.wait("supplier:acme", 100.0) == pytest.approx(1.0)
    assert limiter.wait("supplier:acme", 100.5) == pytest.approx(0.5)
    assert limiter.wait("supplier:acme", 101.0) == 0
    assert limiter.wait("manager", 100.0) == 0, "another party's bucket is its own"
    assert Limiter(per_minute=0).wait("x", 0) == 0, "0 is no limit"


def test_buckets_stay_bounded_when_a_party_names_a_new_sku_every_time() -> None:
    limiter = Limiter(per_minute=5, max_buckets=100)
    for i in range(1_000):
        limiter.spend(f"supplier:acme SKU-{i}", float(i) / 1000)
    assert len(limiter) <= 100
    assert limiter.wait("supplier:acme SKU-999", 1.0) == 0


def test_the_party_and_sku_limit_and_the_party_limit_each_refuse_with_a_wait() -> None:
    limits = RateLimits.of(per_party_per_minute=10, per_sku_per_minute=3)
    assert [limits.retry_after("supplier:acme", "SKU-1", 0.0) for _ in range(4)] == [None, None, None, 20]
    assert [limits.retry_after("supplier:acme", f"SKU-{i}", 0.0) for i in range(2, 10)] == [None] * 7 + [6]
    assert limits.retry_after("warehouse", "SKU-1", 0.0) is None


async def test_an_item_is_read_once_per_ttl_a_refusal_is_asked_again_and_the_cache_stays_bounded() -> None:
    reads: list[str] = []
    listed = {"SKU-1": {"acme"}}

    async def read(sku: str) -> frozenset[str] | None:
        reads.append(sku)
        return frozenset(listed[sku]) if sku in listed else None

    acme, bolt = Sender(party="supplier:acme"), Sender(party="supplier:bolt")
    cache = ItemCache(ttl_seconds=60, refusal_seconds=2, max_entries=10)
    assert await cache.reach("SKU-1", acme, 0.0, read) == "ok"
    assert await cache.reach("SKU-1", acme, 59.0, read) == "ok"
    assert reads == ["SKU-1"]
    assert await cache.reach("SKU-1", acme, 61.0, read) == "ok"
    assert reads == ["SKU-1", "SKU-1"]
    # bolt is refused on a fresh answer, and a flood of its messages costs no more reads for a while
    assert [await cache.reach("SKU-1", bolt, 61.5, read) for _ in range(20)] == ["not-a-supplier"] * 20
    assert reads == ["SKU-1", "SKU-1"]
    listed["SKU-1"].add("bolt")  # the ERP lists bolt now: the next refusal would be on an old answer
    assert await cache.reach("SKU-1", bolt, 63.5, read) == "ok"
    assert len(reads) == 3
    for i in range(50):
        assert await cache.reach(f"SKU-X{i}", acme, 64.0, read) == "unknown-sku"
    assert len(cache) == 10


def test_a_supplier_reaches_only_skus_that_list_it_and_the_others_reach_every_stocked_one() -> None:
    assert reach(Sender(party="supplier:acme"), frozenset({"acme"})) == "ok"
    assert reach(Sender(party="supplier:acme"), frozenset({"bolt"})) == "not-a-supplier"
    assert reach(Sender(party="warehouse"), frozenset({"bolt"})) == "ok"
    assert reach(Sender(party="manager"), None) == "unknown-sku"


async def test_a_supplier_writing_to_a_sku_it_does_not_supply_is_a_403_and_nothing_is_forwarded(
    tmp_path: Path,
) -> None:
    door = Door(tmp_path)
    status, body = await door.send("SKU-102", reply_from("acme"))
    assert status == 403 and "'supplier:acme' does not supply 'SKU-102'" in body["error"]
    status, body = await door.send("SKU-999", reply_from("acme"))
    assert status == 404 and "unknown SKU 'SKU-999'" in body["error"]
    status, _ = await door.send("SKU-999", APPROVAL, party="manager")
    assert status == 404, "an unknown SKU is refused at the door for every party"
    assert door.forwarded == []
    status, _ = await door.send("SKU-102", reply_from("bolt"), party="supplier:bolt")
    assert status == 200 and len(door.forwarded) == 1, "the positive control: bolt supplies SKU-102"


async def test_with_the_erp_away_a_supplier_gets_a_503_and_the_manager_still_gets_through(tmp_path: Path) -> None:
    door = Door(tmp_path)
    door.erp_down = True
    status, body = await door.send("SKU-101", reply_from("acme"))
    assert status == 503 and "send again" in body["error"]
    status, _ = await door.send("SKU-101", APPROVAL, party="manager")
    assert status == 200 and len(door.forwarded) == 1
    door.erp_down = False
    status, _ = await door.send("SKU-101", reply_from("acme", 2))
    assert status == 200, "the 503 was not remembered as an answer"


async def test_a_flood_past_the_rate_is_a_429_with_retry_after_and_the_manager_still_gets_through(
    tmp_path: Path,
) -> None:
    door = Door(tmp_path, rate_per_party=1000, rate_per_party_and_sku=5)
    statuses = [(await door.send("SKU-101", reply_from("acme", i)))[0] for i in range(8)]
    assert statuses == [200] * 5 + [429] * 3
    status, body = await door.send("SKU-101", reply_from("acme", 9))
    assert status == 429 and "send again in" in body["error"]
    assert (await door.send("SKU-101", APPROVAL, party="manager"))[0] == 200
    assert len(door.forwarded) == 6
    assert door.app.limits.stats().refused == {"supplier:acme": {"429": 4}}
    assert door.app.limits.stats().forwarded == {"supplier:acme": 5, "manager": 1}


async def test_the_429_names_when_to_send_again(tmp_path: Path) -> None:
    door = Door(tmp_path, rate_per_party=1000, rate_per_party_and_sku=1)
    assert (await door.send("SKU-101", reply_from("acme", 1)))[0] == 200
    status, headers, _ = await post_whole(
        door.app, door.secrets, b"/messages/SKU-101", json.dumps(reply_from("acme", 2)).encode()
    )
    assert status == 429 and headers["retry-after"] == "60"


async def test_a_query_string_is_a_400_since_the_signature_does_not_cover_it(tmp_path: Path) -> None:
    door = Door(tmp_path)
    status, body = await door.send("SKU-101", REPLY, extra=[], query=b"po=PO-9")
    assert status == 400 and "query string" in body["error"]
    assert door.forwarded == [] and door.erp_reads == 0


async def test_behind_a_tls_proxy_only_what_the_proxy_marked_https_gets_through(tmp_path: Path) -> None:
    door = Door(tmp_path, tls_proxy=True)
    status, body = await door.send("SKU-101", reply_from("acme"))
    assert status == 403 and "TLS only" in body["error"]
    status, _ = await door.send("SKU-101", reply_from("acme", 2), extra=[(b"x-forwarded-proto", b"http")])
    assert status == 403
    status, _ = await door.send("SKU-101", reply_from("acme", 3), extra=[(b"x-forwarded-proto", b"https")])
    assert status == 200 and len(door.forwarded) == 1


async def stats(door: Door, client: tuple[str, int], headers: list[tuple[bytes, bytes]]) -> tuple[int, Any]:
    status, _, body = await call(door.app, {"method": "GET", "path": "/stats", "headers": headers, "client": client})
    return status, body


async def test_the_stats_count_per_party_and_are_shown_only_on_this_host_unproxied(tmp_path: Path) -> None:
    door = Door(tmp_path)
    assert (await door.send("SKU-102", reply_from("acme")))[0] == 403
    assert (await door.send("SKU-101", reply_from("acme", 1)))[0] == 200
    status, body = await stats(door, ("127.0.0.1", 5000), [])
    assert status == 200
    assert body["forwarded"] == {"supplier:acme": 1} and body["refused"] == {"supplier:acme": {"403": 1}}
    assert body["limits"] == {"per_party_per_minute": 600.0, "per_party_and_sku_per_minute": 60.0}
    assert (await stats(door, ("203.0.113.9", 5000), []))[0] == 403
    assert (await stats(door, ("127.0.0.1", 5000), [(b"x-forwarded-for", b"203.0.113.9")]))[0] == 403


async def test_the_door_stamps_what_it_forwards_so_the_service_believes_the_sender_and_nothing_else(
    tmp_path: Path,
) -> None:
    door = Door(tmp_path)
    assert (await door.send("SKU-101", reply_from("acme", 7)))[0] == 200
    body = json.loads(door.forwarded[0].content)
    assert body["sender"] == {"party": "supplier:acme"} and body["stamp"].startswith("door-v1=")
    said = (door.door_key, "SKU-101", body["event"], body["payload"])
    assert vouched_sender(*said, Sender(party="supplier:acme"), body["received_at"], body["stamp"]) == (
        Sender(party="supplier:acme"),
        body["received_at"],
    )
    # Anything changed after the door stamped it is an operator's say, with the arrival its own.
    operator_said = Sender(party="operator", said="supplier:acme")
    changes = [
        (Sender(party="supplier:acme"), body["received_at"] - 3600, body["stamp"]),
        (Sender(party="manager"), body["received_at"], body["stamp"]),
        (Sender(party="supplier:acme"), body["received_at"], None),
    ]
    for sender, received_at, given in changes:
        assert vouched_sender(*said, sender, received_at, given) == (
            sender.model_copy(update={"party": "operator", "said": sender.party}),
            None,
        )
    other_payload = {**body["payload"], "text": "cancel"}
    assert vouched_sender(
        door.door_key,
        "SKU-101",
        body["event"],
        other_payload,
        Sender(party="supplier:acme"),
        body["received_at"],
        body["stamp"],
    ) == (operator_said, None)
    assert vouched_sender(
        None,
        "SKU-101",
        body["event"],
        body["payload"],
        Sender(party="supplier:acme"),
        body["received_at"],
        body["stamp"],
    ) == (operator_said, None), "a service without the door key believes no stated sender"
    assert vouched_sender(door.door_key, "SKU-101", "supplier-reply", {}, None, None, None)[0].label == "operator"
    assert operator_said.label == "operator (said: supplier:acme)"
    assert stamp(b"k" * 32, "SKU-1", "goods", {"a": 1.5}, Sender(party="warehouse"), 1.0) == stamp(
        b"k" * 32, "SKU-1", "goods", {"a": 1.5}, Sender(party="warehouse"), 1.0
    )
