"""The inbound endpoint: outside parties' only way to a SKU's address.

`hypercorn replenisher.inbound.app:app --bind 127.0.0.1:9090` (add `--certfile`/`--keyfile`
to serve TLS directly). One route:

    POST /messages/{sku}   {"event": ..., "payload": {...}}
    x-replenisher-party: supplier:<id> | warehouse | manager
    x-replenisher-timestamp: <unix seconds>
    x-replenisher-signature: v2=<hex HMAC-SHA256>   (see signing.py)
    idempotency-key: optional, the sender's own, covered by the signature

Checks, in order, each refused with `{"error": reason}` and nothing forwarded: unknown
path or method 404; behind a TLS proxy, a request the proxy did not mark
`x-forwarded-proto: https` 403; a query string 400 (the signature does not cover one); body
over 64 KiB 413; missing or unknown party, bad signature (a v1 signature with an idempotency
key among them), or a timestamp outside the replay window 401; the same signature again 409;
malformed JSON or fields 400; an event the party may not send, or a supplier writing as
another, 403; the party over its rate (per party, and per party and SKU) 429 with
`Retry-After`; a SKU the ERP does not stock 404 (its item master, `GET /erp/items/<sku>`);
a supplier the SKU's ERP item does not list 403; an ERP that cannot say which suppliers a
SKU has 503 (for suppliers only: the manager and the warehouse reach every SKU, and the
SKU's address checks the ERP itself).
A message that passes is forwarded to `SkuAgent/{sku}/deliver` on Restate's ingress with
the authenticated sender and this door's clock on it, under the door's stamp (stamp.py);
the ingress's answer passes through (its 4xx too), and an ingress that cannot be reached is
a 503.

`GET /stats` gives what was forwarded and refused per party, and the limits, to a client on
loopback whose request no proxy forwarded (no `x-forwarded-*` or `forwarded` header).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from functools import cached_property
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from replenisher.asgi_body import BodyTooLarge, ReadToTheEnd, read_body
from replenisher.domain.documents import EventKind, Sender, SupplierId, is_sku_id
from replenisher.domain.parties import refusal
from replenisher.inbound.limits import RateLimits
from replenisher.inbound.reach import ItemCache
from replenisher.inbound.replay import SeenSignatures
from replenisher.inbound.settings import MAX_BODY_BYTES, InboundSettings
from replenisher.inbound.signing import (
    IDEMPOTENCY_HEADER,
    PARTY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    load_secrets,
    secret_for,
    verify,
)
from replenisher.inbound.stamp import load_door_key, stamp
from replenisher.keepalive import RetryDroppedKeepAlive

log = logging.getLogger("replenisher.inbound")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

FORWARD_TIMEOUT = httpx.Timeout(30.0, connect=3.0)
PREFIX = "/messages/"
TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""Unix seconds in ASCII digits: `str.isdigit` also takes "²" and 5000-digit strings, which `int` refuses."""
IDEMPOTENCY_KEY = re.compile(r"[!-~]{1,256}")


ERP_TIMEOUT = httpx.Timeout(5.0, connect=3.0)
UNAUTHENTICATED = "(unauthenticated)"
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-real-ip")
LOOPBACK_HOSTS = ("127.0.0.1", "::1")


class Refused(Exception):
    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or {}
        self.party = UNAUTHENTICATED
        """Whom it is counted against: the authenticated party, once there is one."""


class ItemSuppliers(BaseModel):
    """What the door reads of the ERP's item: its suppliers; the rest is not its business."""

    suppliers: list[SupplierId]


class Inbound(BaseModel):
    """What a party sends. Nothing else: a `sender` in the body is the party's claim, not ours."""

    model_config = ConfigDict(extra="forbid")

    event: EventKind
    payload: dict[str, Any]


class Reply:
    def __init__(
        self,
        status: int,
        body: bytes,
        content_type: bytes = b"application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}

    @classmethod
    def error(cls, status: int, reason: str, headers: dict[str, str] | None = None) -> Reply:
        return cls(status, json.dumps({"error": reason}).encode(), headers=headers)

    async def send(self, send: Send) -> None:
        headers = [(b"content-type", self.content_type), (b"content-length", str(len(self.body)).encode())]
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


class InboundApp:
    def __init__(self, settings: InboundSettings | None = None) -> None:
        self._settings = settings
        self._client: httpx.AsyncClient | None = None

    @property
    def settings(self) -> InboundSettings:
        if self._settings is None:
            self._settings = InboundSettings.from_env()
        return self._settings

    # Read or made at the first use (lifespan startup reads the files, so a bad one fails the start).
    @cached_property
    def secrets(self) -> dict[str, str]:
        return load_secrets(self.settings.secrets_file)

    @cached_property
    def seen(self) -> SeenSignatures:
        return SeenSignatures(self.settings.replay_window_seconds)

    @cached_property
    def door_key(self) -> bytes:
        return load_door_key(self.settings.door_key_file)

    @cached_property
    def limits(self) -> RateLimits:
        return RateLimits.of(self.settings.rate_per_party, self.settings.rate_per_party_and_sku)

    @cached_property
    def items(self) -> ItemCache:
        return ItemCache(self.settings.item_cache_seconds)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] == "http":
            await self.read_to_the_end(scope, receive, send)

    @cached_property
    def read_to_the_end(self) -> ReadToTheEnd:
        # A refusal is often known from the headers alone, before the body has arrived.
        return ReadToTheEnd(self.answer, MAX_BODY_BYTES)

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            reply = await self.handle(scope, receive)
        except Refused as e:
            log.warning("refused %s %s: %d %s", scope["method"], scope["path"][:200], e.status, e.reason)
            reply = Reply.error(e.status, e.reason, e.headers)
        await reply.send(send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # Fail at start, not at the first message, when the secrets or the key cannot be read.
                _ = self.secrets, self.door_key
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def handle(self, scope: Scope, receive: Receive) -> Reply:
        method, path = scope["method"], scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if method == "GET" and path == "/health":
            return Reply(200, b'{"ok":true}')
        if method == "GET" and path == "/stats":
            return self.stats(scope, headers)
        if method != "POST" or not path.startswith(PREFIX) or not is_sku_id(path[len(PREFIX) :]):
            raise Refused(404, f"no such endpoint: {method} {path[:200]} (messages go to POST /messages/<sku>)")
        try:
            return await self.receive_message(scope, headers, receive)
        except Refused as e:
            self.limits.count_refused(e.party, e.status)
            raise

    async def receive_message(self, scope: Scope, headers: dict[str, str], receive: Receive) -> Reply:
        if self.settings.tls_proxy and headers.get("x-forwarded-proto", "").lower() != "https":
            raise Refused(403, "TLS only: the door's TLS proxy marks what it forwards x-forwarded-proto: https")
        if scope.get("query_string"):
            raise Refused(400, "no query string on /messages/<sku>: the signature does not cover one")
        # Checked before the signature is spent: the same signed request with a usable key gets through.
        key = headers.get(IDEMPOTENCY_HEADER)
        if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
            raise Refused(400, "idempotency-key: 1 to 256 printable ASCII characters")
        body = await read_posted(headers, receive)
        raw_path = scope.get("raw_path") or scope["path"].encode()
        sender, signature = self.authenticate(headers, raw_path.decode("latin-1"), body, key)
        try:
            reply = await self.pass_on(scope["path"][len(PREFIX) :], sender, body, key or signature)
        except Refused as e:
            # Only a delivered message makes its signature spent: a sender retrying the very same
            # signed request after a refusal (over its rate, the ERP or the ingress away) must get
            # through. Restate still delivers it once, by its idempotency key.
            self.seen.forget(signature)
            e.party = sender.party
            raise
        if reply.status >= 300:
            self.seen.forget(signature)
            self.limits.count_refused(sender.party, reply.status)
        else:
            self.limits.count_forwarded(sender.party)
        return reply

    async def pass_on(self, sku: str, sender: Sender, body: bytes, key: str) -> Reply:
        """An authenticated message checked for what it says, its rate and its reach, then forwarded.

        `sku` comes from the path, decoded once already; the id holds no character that needs decoding."""
        message = parse(body)
        refused = refusal(sender, message.event, message.payload)
        if refused is not None:
            raise Refused(403, refused)
        wait = self.limits.retry_after(sender.party, sku, time.monotonic())
        if wait is not None:
            over = f"{sender.party!r} is over its rate at this door: send again in {wait}s"
            raise Refused(429, over, {"retry-after": str(wait)})
        await self.check_reach(sku, sender)
        reply = await self.forward(sku, sender, message, key)
        log.info("%s %s for %s: %d", sender.party, message.event, sku[:64], reply.status)
        return reply

    async def check_reach(self, sku: str, sender: Sender) -> None:
        try:
            found = await self.items.reach(sku, sender, time.monotonic(), self.read_item)
        except (httpx.HTTPError, ValidationError, ValueError) as e:
            if sender.supplier is None:
                return  # the manager and the warehouse reach every SKU; its address checks the ERP itself
            away = f"cannot read the SKU's suppliers from the ERP now ({type(e).__name__}); send again"
            raise Refused(503, away) from e
        if found == "unknown-sku":
            raise Refused(404, f"unknown SKU {sku!r}: the ERP does not stock it")
        if found == "not-a-supplier":
            raise Refused(403, f"{sender.party!r} does not supply {sku!r}: its ERP item does not list it")

    async def read_item(self, sku: str) -> frozenset[str] | None:
        url = f"{self.settings.world_url.rstrip('/')}/erp/items/{quote(sku, safe='')}"
        response = await self.client.get(url, timeout=ERP_TIMEOUT)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return frozenset(ItemSuppliers.model_validate_json(response.content).suppliers)

    def stats(self, scope: Scope, headers: dict[str, str]) -> Reply:
        client = scope.get("client") or ("", 0)
        if client[0] not in LOOPBACK_HOSTS or any(h in headers for h in PROXY_HEADERS):
            raise Refused(403, "the door's stats are for operators on this host only")
        return Reply(200, self.limits.stats().model_dump_json().encode())

    def authenticate(self, headers: dict[str, str], path: str, body: bytes, key: str | None) -> tuple[Sender, str]:
        party = headers.get(PARTY_HEADER, "")
        secret = secret_for(self.secrets, party)
        if secret is None:
            raise Refused(401, f"unknown or missing party in {PARTY_HEADER}")
        timestamp = headers.get(TIMESTAMP_HEADER, "")
        given = headers.get(SIGNATURE_HEADER, "")
        if key is not None and given.startswith("v1="):
            # Whoever captured the request could change a key the signature does not cover, and
            # Restate would deliver the same message again under the new key.
            raise Refused(401, f"a v1 signature does not cover {IDEMPOTENCY_HEADER}: sign v2, or send no key")
        if not TIMESTAMP.fullmatch(timestamp) or not verify(secret, timestamp, party, path, body, given, key):
            raise Refused(
                401,
                f"bad signature for {party!r} (v2 covers the timestamp, party, path, idempotency-key and body: "
                f"see {SIGNATURE_HEADER} in the docs, docs/security/inbound.md)",
            )
        now = time.time()
        window = self.settings.replay_window_seconds
        if abs(now - int(timestamp)) > window:
            raise Refused(401, f"timestamp {timestamp} is more than {window:g}s from our clock")
        if not self.seen.first_time(given, now):
            raise Refused(409, "this signed request was already received (a replay)")
        return Sender(party=party), given

    async def forward(self, sku: str, sender: Sender, message: Inbound, key: str) -> Reply:
        url = f"{self.settings.ingress_url.rstrip('/')}/SkuAgent/{quote(sku, safe='')}/deliver"
        received_at = time.time()
        body = {
            **message.model_dump(mode="json"),
            "sender": sender.model_dump(),
            "received_at": received_at,
            "stamp": stamp(self.door_key, sku, message.event, message.payload, sender, received_at),
        }
        # Keys are per party: one party cannot pre-empt another's message by guessing its key.
        headers = {"idempotency-key": f"{sender.party}/{key}"[:256]}
        try:
            response = await self.client.post(url, json=body, headers=headers)
        except httpx.HTTPError as e:
            raise Refused(503, f"the SKU's address cannot be reached now ({type(e).__name__}); send again") from e
        return Reply(response.status_code, response.content, b"application/json")

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # Every forward carries an idempotency key, so even a resend could not deliver twice.
            self._client = httpx.AsyncClient(timeout=FORWARD_TIMEOUT, transport=RetryDroppedKeepAlive())
        return self._client


async def read_posted(headers: dict[str, str], receive: Receive) -> bytes:
    too_large = Refused(413, f"body over 64 KiB ({MAX_BODY_BYTES} bytes)")
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    try:
        body = await read_body(receive, MAX_BODY_BYTES)
    except BodyTooLarge as e:
        raise too_large from e
    if body is None:
        raise Refused(400, "the request ended before its body did")
    return body


def parse(body: bytes) -> Inbound:
    try:
        message = Inbound.model_validate_json(body)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in e.errors())
        raise Refused(400, problems) from e
    where = non_finite(message.payload, "payload")
    if where is not None:
        # Forwarded as JSON it would become null: `up_to: Infinity` an approval without a cap.
        raise Refused(400, f"{where}: not a finite number")
    return message


def non_finite(value: Any, where: str) -> str | None:
    """The place of the first NaN or infinity in a parsed JSON value, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for k, v in items:
        found = non_finite(v, f"{where}.{k}")
        if found is not None:
            return found
    return None


app = InboundApp()
