"""The door's reach, rate limits and TLS through the real stack: a door process (hypercorn)
reading the real world's ERP and forwarding to the real restate-server and service. Judged
from the SKU's record and the world's orders, each with its positive control."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from e2e.scenario import Scenario, ok
from e2e.test_inbound import Party, refused
from replenisher.stack.local import INBOUND_APP
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp, TlsFiles
from simulated_world.app import trusted
from support import eventually, inbound_env, serving

pytestmark = pytest.mark.e2e


def reply(supplier: str, text: str, po: str = "PO-1") -> dict[str, Any]:
    return {"event": "supplier-reply", "payload": {"po_number": po, "supplier": supplier, "text": text}}


async def no_record(scenario: Scenario, sku: str) -> bool:
    answer = await scenario.ingress.get(f"/SkuAgent/{sku}/status")
    return answer.status_code == 404 and "no agent for SKU" in answer.text


async def test_a_supplier_reaches_only_skus_its_erp_item_lists_and_a_refusal_creates_nothing(
    scenario: Scenario, door: httpx.AsyncClient, secrets: dict[str, str]
) -> None:
    await scenario.setup(on_hand=50)  # stocked, and no agent yet: nothing has asked about it
    other = f"{scenario.supplier}-other"
    setup = {"name": "Other", "prices": {}, "lead_days": 2, "reply_days": 0.5}
    ok(await scenario.world.put(f"/admin/suppliers/{other}", json=setup))
    stranger = Party(door, secrets, f"supplier:{other}")
    refused(await stranger.send(scenario.sku, reply(other, "Cancel PO-1")), 403, f"does not supply {scenario.sku!r}")
    unknown = f"{scenario.sku}-NONE"
    approval = {"event": "approval", "payload": {"po_number": "PO-1", "token": "t", "approved": True}}
    refused(await Party(door, secrets, "manager").send(unknown, approval), 404, f"unknown SKU {unknown!r}")
    assert await no_record(scenario, scenario.sku), "the refused supplier created the SKU's record"
    assert await no_record(scenario, unknown)

    # Positive controls: the SKU's own supplier gets through (its message kept: no run), and the
    # stranger does once the ERP lists it, though the door had just refused it (a refusal is
    # judged on an answer of the ERP's at most `refusal_seconds` old).
    mine = Party(door, secrets, f"supplier:{scenario.supplier}")
    assert (await mine.send(scenario.sku, reply(scenario.supplier, "ours"))).status_code == 200
    item = {"on_hand": 50, "safety_stock": 20, "target_stock": 100, "suppliers": [scenario.supplier, other]}
    ok(await scenario.world.put(f"/admin/items/{scenario.sku}", json=item))

    async def listed() -> bool:
        answer = await stranger.send(scenario.sku, reply(other, "listed now"))
        assert answer.status_code in (200, 403), answer.text
        return answer.status_code == 200

    await eventually(listed, timeout=10, interval=0.5, what="the door to let a newly listed supplier through")
    kept = (await scenario.status())["kept"]
    assert [(m["sender"]["party"], m["payload"]["text"]) for m in kept] == [
        (mine.party, "ours"),
        (stranger.party, "listed now"),
    ]


@pytest.fixture
def limited_door(restate_runtime: Any, party_secrets: Path, log_dir: Path, world: HypercornApp) -> Iterator[str]:
    """A door of its own with tight limits: one message a minute per party and SKU (so no token
    comes back while the test runs, however slow the machine: the counts below are exact), and
    thirty a minute per party."""
    env = inbound_env(
        restate_runtime.ingress_url,
        party_secrets,
        world.url,
        {"REPLENISHER_INBOUND_RATE_PER_PARTY": "30", "REPLENISHER_INBOUND_RATE_PER_SKU": "1"},
    )
    app = HypercornApp(INBOUND_APP, free_port(), env, name="inbound-limited", log_path=log_dir / "inbound-limited.log")
    with serving(app):
        yield app.url


async def test_a_flood_past_the_limit_gets_429_while_the_managers_approval_and_the_warehouses_goods_arrive(
    scenario: Scenario, limited_door: str, secrets: dict[str, str]
) -> None:
    await scenario.setup(lead_days=300)
    await scenario.fault(quiet=True)  # no reply of the world's own: the run waits, and reads what comes
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    po = request["po_number"]
    async with httpx.AsyncClient(base_url=limited_door, timeout=30) as door:
        supplier = Party(door, secrets, f"supplier:{scenario.supplier}")
        flood = await asyncio.gather(
            *(supplier.send(scenario.sku, reply(scenario.supplier, f"junk {i}", f"PO-JUNK-{i}")) for i in range(40))
        )
        statuses = sorted(r.status_code for r in flood)
        assert statuses == [200] + [429] * 39, statuses
        throttled = next(r for r in flood if r.status_code == 429)
        assert 1 <= int(throttled.headers["retry-after"]) <= 60 and "over its rate" in throttled.json()["error"]
        refused(await supplier.send(scenario.sku, reply(scenario.supplier, "one more")), 429, "send again in")

        manager = Party(door, secrets, "manager")
        approval = {"po_number": po, "token": request["token"], "approved": True}
        delivered = await manager.send(scenario.sku, {"event": "approval", "payload": approval})
        assert delivered.status_code == 200 and delivered.json()["run_id"] == run_id, delivered.text
        orders = await eventually(scenario.orders, timeout=30, what="the approved order to be placed")
        assert [o["po_number"] for o in orders] == [po]

        receipt = await scenario.book_goods("GR-LIMITS", po, 10)
        goods = await Party(door, secrets, "warehouse").send(scenario.sku, {"event": "goods", "payload": receipt})
        assert goods.status_code == 200 and goods.json()["run_id"] == run_id, goods.text

        stats = ok(await door.get("/stats"))
    assert stats["refused"] == {supplier.party: {"429": 40}}
    assert stats["forwarded"] == {supplier.party: 1, "manager": 1, "warehouse": 1}
    routed = (await scenario.status())["active"]["routed"]
    assert sum(1 for m in routed if m["sender"]["party"] == supplier.party) == 1


def self_signed(directory: Path) -> TlsFiles:
    """A certificate for 127.0.0.1 and localhost, made here, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "replenisher door (test)")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = TlsFiles(cert=directory / "door.crt", key=directory / "door.key")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    files.key.chmod(0o600)
    return files


async def test_the_door_serves_tls_with_a_certificate_and_key_from_files(
    scenario: Scenario,
    restate_runtime: Any,
    party_secrets: Path,
    secrets: dict[str, str],
    log_dir: Path,
    world: HypercornApp,
    tmp_path: Path,
) -> None:
    await scenario.setup(on_hand=50)
    tls = self_signed(tmp_path)
    env = inbound_env(restate_runtime.ingress_url, party_secrets, world.url)
    app = HypercornApp(INBOUND_APP, free_port(), env, name="inbound-tls", log_path=log_dir / "inbound-tls.log", tls=tls)
    with serving(app):
        assert app.url.startswith("https://")
        async with httpx.AsyncClient(base_url=app.url, timeout=30, verify=trusted(tls.cert)) as door:
            supplier = Party(door, secrets, f"supplier:{scenario.supplier}")
            sent = await supplier.send(scenario.sku, reply(scenario.supplier, "over TLS"))
            assert sent.status_code == 200, sent.text
        # The certificate is checked: a client that does not trust it gets no answer at all.
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as untrusting:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await Party(untrusting, secrets, f"supplier:{scenario.supplier}").send(
                    scenario.sku, reply(scenario.supplier, "unchecked")
                )
        # And plain HTTP on the TLS port delivers nothing.
        plain = app.url.replace("https://", "http://")
        async with httpx.AsyncClient(base_url=plain, timeout=30) as clear:
            body = json.dumps(reply(scenario.supplier, "in the clear")).encode()
            try:
                answer: httpx.Response | None = await clear.post(f"/messages/{scenario.sku}", content=body)
            except httpx.HTTPError:
                answer = None  # the connection dropped
            assert answer is None or answer.status_code >= 400
    kept = (await scenario.status())["kept"]
    assert [m["payload"]["text"] for m in kept] == ["over TLS"]


async def test_a_sender_stated_on_the_ingress_is_an_operators_say_and_only_the_doors_stamp_names_the_party(
    scenario: Scenario, door: httpx.AsyncClient, secrets: dict[str, str]
) -> None:
    await scenario.setup(on_hand=50)  # no run: what arrives is kept, with its sender
    party = f"supplier:{scenario.supplier}"
    sent_at = time.time()
    stated = {**reply(scenario.supplier, "stated"), "sender": {"party": party}, "received_at": sent_at - 3600}
    ok(await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/deliver", json=stated))
    forged = {**reply(scenario.supplier, "forged"), "sender": {"party": party}, "stamp": "door-v1=" + "0" * 64}
    ok(await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/deliver", json={**forged, "received_at": sent_at}))
    assert (await Party(door, secrets, party).send(scenario.sku, reply(scenario.supplier, "signed"))).is_success
    kept = (await scenario.status())["kept"]
    assert [(m["payload"]["text"], m["sender"]) for m in kept] == [
        ("stated", {"party": "operator", "said": party}),
        ("forged", {"party": "operator", "said": party}),
        ("signed", {"party": party}),
    ]
    assert kept[0]["at"] >= sent_at - 1, "an operator's stated arrival time does not backdate the message"
