"""The inbound endpoint answers a signed but bad request with a 4xx and forwards nothing.

Found probing a running stack: a signed timestamp of "²" or of 5000 digits and an
idempotency key with a non-ASCII byte were 500s with tracebacks; a payload's `Infinity` or
`1e400` was forwarded as null (`up_to: 1e400` became an approval without a cap); and a
SKU id of `..` was forwarded to the ingress as `/SkuAgent/../deliver`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from replenisher.inbound.app import InboundApp
from replenisher.inbound.settings import InboundSettings
from replenisher.inbound.signing import new_secrets, secret_for, signature, write_secrets
from replenisher.inbound.stamp import write_new_door_key

REPLY = {"event": "supplier-reply", "payload": {"po_number": "PO-1", "supplier": "acme", "text": "ok"}}


@pytest.fixture
def endpoint(tmp_path: Path) -> tuple[InboundApp, dict[str, str], list[httpx.Request]]:
    secrets = new_secrets()
    path = tmp_path / "secrets.json"
    write_secrets(path, secrets)
    key = tmp_path / "door-key"
    write_new_door_key(key)
    app = InboundApp(InboundSettings(secrets_file=path, door_key_file=key, ingress_url="http://ingress"))
    forwarded: list[httpx.Request] = []

    def ingress(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/erp/items/"):  # the ERP's item: acme supplies every SKU here
            return httpx.Response(200, json={"suppliers": ["acme"]})
        forwarded.append(request)
        return httpx.Response(200, json={"kept": True})

    app._client = httpx.AsyncClient(transport=httpx.MockTransport(ingress))
    return app, secrets, forwarded


async def call(app: InboundApp, scope: dict[str, Any], body: bytes = b"") -> tuple[int, dict[str, str], Any]:
    """One request to the ASGI app: its status, headers and JSON body."""
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return chunks.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", **scope}, receive, send)
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, json.loads(sent[1]["body"] or b"{}")


async def post_whole(
    app: InboundApp,
    secrets: dict[str, str],
    raw_path: bytes,
    body: bytes,
    timestamp: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    party: str = "supplier:acme",
    key: str | None = None,
    signed_key: str | None = None,
    version: str = "v2",
    query: bytes = b"",
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Posts `body` signed; `key` is the idempotency-key header, `signed_key` the key signed (`key`)."""
    ts = timestamp if timestamp is not None else str(int(time.time()))
    secret = secret_for(secrets, party)
    assert secret is not None
    sig = signature(secret, ts, party, raw_path.decode("latin-1"), body, signed_key or key, version)
    headers = [
        (b"x-replenisher-party", party.encode()),
        (b"x-replenisher-timestamp", ts.encode("latin-1")),
        (b"x-replenisher-signature", sig.encode()),
        *([(b"idempotency-key", key.encode())] if key is not None else []),
        *(extra or []),
    ]
    scope = {
        "method": "POST",
        "path": unquote(raw_path.decode("latin-1")),
        "raw_path": raw_path,
        "query_string": query,
        "headers": headers,
    }
    return await call(app, scope, body)


async def post(app: InboundApp, secrets: dict[str, str], raw_path: bytes, body: bytes, **kw: Any) -> tuple[int, Any]:
    """`post_whole` without the headers: the status and the JSON body."""
    status, _, answer = await post_whole(app, secrets, raw_path, body, **kw)
    return status, answer


async def test_a_good_message_is_forwarded(endpoint: Any) -> None:
    app, secrets, forwarded = endpoint
    status, _ = await post(app, secrets, b"/messages/SKU-101", json.dumps(REPLY).encode())
    assert status == 200 and len(forwarded) == 1
    assert forwarded[0].url.path == "/SkuAgent/SKU-101/deliver"


@pytest.mark.parametrize("timestamp", ["\xb2", "9" * 5000, "-5"])
async def test_a_signed_timestamp_that_is_not_ascii_digits_is_a_401(endpoint: Any, timestamp: str) -> None:
    app, secrets, forwarded = endpoint
    status, body = await post(app, secrets, b"/messages/SKU-101", json.dumps(REPLY).encode(), timestamp=timestamp)
    assert status == 401 and "signature" in body["error"] and not forwarded


async def test_an_idempotency_key_that_is_not_printable_ascii_is_a_400(endpoint: Any) -> None:
    app, secrets, forwarded = endpoint
    extra = [(b"idempotency-key", b"k\xe9y")]
    status, body = await post(app, secrets, b"/messages/SKU-101", json.dumps(REPLY).encode(), extra=extra)
    assert status == 400 and "idempotency-key" in body["error"] and not forwarded


async def test_the_forward_is_keyed_by_the_signed_key_or_else_by_the_signature(endpoint: Any) -> None:
    app, secrets, forwarded = endpoint
    raw = json.dumps(REPLY).encode()
    assert (await post(app, secrets, b"/messages/SKU-101", raw, key="reply-1"))[0] == 200
    assert (await post(app, secrets, b"/messages/SKU-101", raw))[0] == 200
    assert (await post(app, secrets, b"/messages/SKU-101", raw, version="v1"))[0] == 200
    first, unkeyed, old = (r.headers["idempotency-key"] for r in forwarded)
    assert first == "supplier:acme/reply-1"
    assert unkeyed.startswith("supplier:acme/v2=") and len(unkeyed) == len("supplier:acme/v2=") + 64
    assert old.startswith("supplier:acme/v1=") and len(old) == len("supplier:acme/v1=") + 64


async def test_a_key_the_signature_does_not_cover_is_a_401_and_nothing_is_forwarded(endpoint: Any) -> None:
    """Found probing a running stack: v1 signed no key, so a captured request sent again with a
    new key, after the endpoint restarted or at another replica, was delivered twice."""
    app, secrets, forwarded = endpoint
    raw = json.dumps(REPLY).encode()
    status, body = await post(app, secrets, b"/messages/SKU-101", raw, key="reply-2", signed_key="reply-1")
    assert status == 401 and "bad signature" in body["error"] and not forwarded
    status, body = await post(app, secrets, b"/messages/SKU-101", raw, key=None, signed_key="reply-1")
    assert status == 401 and "bad signature" in body["error"] and not forwarded
    status, body = await post(app, secrets, b"/messages/SKU-101", raw, version="v1", extra=[(b"idempotency-key", b"k")])
    assert status == 401 and "v1 signature does not cover idempotency-key" in body["error"] and not forwarded
    # The control: the same request, its key signed, gets through.
    assert (await post(app, secrets, b"/messages/SKU-101", raw, key="reply-2"))[0] == 200 and len(forwarded) == 1


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
async def test_a_number_that_is_not_finite_is_a_400_not_a_null(endpoint: Any, number: bytes) -> None:
    app, secrets, forwarded = endpoint
    body = b'{"event":"approval","payload":{"po_number":"PO-1","token":"t","approved":true,"up_to":' + number + b"}}"
    status, answer = await post(app, secrets, b"/messages/SKU-101", body, party="manager")
    assert status == 400 and answer["error"] == "payload.up_to: not a finite number" and not forwarded


@pytest.mark.parametrize(
    "raw_path",
    [
        b"/messages/..",
        b"/messages/%2E%2E",
        b"/messages/SKU%252F..%252FSKU-1",
        b"/messages/SKU%00",
        b"/messages/" + b"A" * 65,
    ],
)
async def test_a_path_that_is_no_sku_id_is_a_404(endpoint: Any, raw_path: bytes) -> None:
    app, secrets, forwarded = endpoint
    status, body = await post(app, secrets, raw_path, json.dumps(REPLY).encode())
    assert status == 404 and "no such endpoint" in body["error"] and not forwarded
