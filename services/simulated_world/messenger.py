"""Pushes messages to the SKU agents, in order, at least once.

Through the replenisher's inbound endpoint, signed as the party each message comes from
(the manager, the warehouse, the supplier), when the world is given its URL and the party
secrets; straight to Restate's ingress otherwise (tests of the world alone).

Each message carries an idempotency key derived from what it is about (event, PO, n), so
a push retried after a timeout or a crash of the ingress is still delivered once. Messages
wait in one queue per SKU: a SKU whose ingress keeps failing holds back only its own later
messages, and its agent sees them in the order the world sent them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Literal, Protocol
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, Field

from replenisher.domain.documents import ApprovalDecision, EventKind, GoodsReceipt, SupplierReply
from replenisher.inbound.signing import secret_for, signed_headers
from simulated_world.clock import Clock
from simulated_world.scheduler import Scheduler

log = logging.getLogger(__name__)

Payload = ApprovalDecision | SupplierReply | GoodsReceipt

RETRYABLE_4XX = frozenset({404, 408, 425, 429})
"""Client errors that say "later", not "never".

Restate answers 404 while the SkuAgent service is not (yet, or again) registered; the world
only writes about orders and approvals an agent started, so the service will be back and the
message must wait for it rather than be lost. A wrong ingress URL shows up as messages that
stay pending with this reason.
"""


class PushedMessage(BaseModel):
    seq: int
    sku: str
    event: EventKind
    party: str = Field(description="who the world sends it as")
    po_number: str
    idempotency_key: str
    payload: dict[str, Any]
    status: Literal["pending", "delivered", "rejected"] = "pending"
    reason: str | None = None
    attempts: int = 0
    created_at: float
    delivered_at: float | None = None


class MessageFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: str | None = None


class MessageList(BaseModel):
    messages: list[PushedMessage]


def party_of(event: EventKind, payload: Payload) -> str:
    if isinstance(payload, SupplierReply):
        return f"supplier:{payload.supplier}"
    return "warehouse" if event == "goods" else "manager"


class Door(Protocol):
    """Where and how a push goes: the URL, the body bytes and the headers of one attempt."""

    def request(self, message: PushedMessage, now: float) -> tuple[str, bytes, dict[str, str]]: ...


class IngressDoor:
    """Straight to `SkuAgent/<sku>/deliver` on Restate's ingress: the sender is an operator."""

    def __init__(self, ingress_url: str) -> None:
        self.base = ingress_url.rstrip("/")

    def request(self, message: PushedMessage, now: float) -> tuple[str, bytes, dict[str, str]]:
        url = f"{self.base}/SkuAgent/{quote(message.sku, safe='')}/deliver"
        body = json.dumps({"event": message.event, "payload": message.payload}).encode()
        return url, body, {"content-type": "application/json", "idempotency-key": message.idempotency_key}


class InboundDoor:
    """`POST /messages/<sku>` on the inbound endpoint, signed anew (fresh timestamp) each attempt."""

    def __init__(self, inbound_url: str, secrets: Mapping[str, str]) -> None:
        self.base = inbound_url.rstrip("/")
        self.secrets = dict(secrets)

    def request(self, message: PushedMessage, now: float) -> tuple[str, bytes, dict[str, str]]:
        path = f"/messages/{quote(message.sku, safe='')}"
        body = json.dumps({"event": message.event, "payload": message.payload}).encode()
        secret = secret_for(self.secrets, message.party)
        if secret is None:
            raise NoSecret(f"no secret for {message.party!r} in the party secrets")
        headers = signed_headers(secret, message.party, path, body, now, message.idempotency_key)
        return self.base + path, body, {"content-type": "application/json", **headers}


class NoSecret(Exception):
    """The world cannot sign as this party: the message cannot be sent, ever."""


def idempotency_key(event: str, po_number: str, n: int) -> str:
    # PO numbers are free text; keep the header value plain ASCII whatever they hold.
    return f"world-{event}-{quote(po_number, safe='-_.:')}-{n}"


class Ledger:
    """Every message the world has sent, numbered: `seq` over all, and `n` per subject (event, PO)
    for its idempotency key. The messenger pushes each over HTTP; the in-memory world hands each
    to the SKU's address itself (`replenisher.in_memory.world`)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._messages: list[PushedMessage] = []
        self._sent_per_subject: dict[tuple[str, str], int] = {}

    def record(self, sku: str, event: EventKind, payload: Payload) -> PushedMessage:
        subject = (event, payload.po_number)
        n = self._sent_per_subject.get(subject, 0) + 1
        self._sent_per_subject[subject] = n
        message = PushedMessage(
            seq=len(self._messages) + 1,
            sku=sku,
            event=event,
            party=party_of(event, payload),
            po_number=payload.po_number,
            idempotency_key=idempotency_key(event, payload.po_number, n),
            payload=payload.model_dump(mode="json"),
            created_at=self._clock.now(),
        )
        self._messages.append(message)
        return message

    def find(self, where: MessageFilter) -> list[PushedMessage]:
        return [m for m in self._messages if where.sku is None or m.sku == where.sku]


class Messenger(Ledger):
    def __init__(
        self,
        ingress_url: str,
        client: httpx.AsyncClient,
        scheduler: Scheduler,
        clock: Clock,
        *,
        door: Door | None = None,
        first_backoff: float = 0.1,
        max_backoff: float = 2.0,
    ) -> None:
        super().__init__(clock)
        self._door = door or IngressDoor(ingress_url)
        self._client = client
        self._scheduler = scheduler
        self._first_backoff = first_backoff
        self._max_backoff = max_backoff
        self._queues: dict[str, asyncio.Queue[PushedMessage]] = {}

    def push(self, sku: str, event: EventKind, payload: Payload) -> PushedMessage:
        message = self.record(sku, event, payload)
        self._queue(sku).put_nowait(message)
        return message

    def _queue(self, sku: str) -> asyncio.Queue[PushedMessage]:
        queue = self._queues.get(sku)
        if queue is None:
            queue = asyncio.Queue()
            self._queues[sku] = queue
            self._scheduler.spawn(self._send_in_order(queue), name=f"push-{sku}")
        return queue

    async def _send_in_order(self, queue: asyncio.Queue[PushedMessage]) -> None:
        while True:
            message = await queue.get()
            await self._deliver(message)

    async def _deliver(self, message: PushedMessage) -> None:
        backoff = self._first_backoff
        while True:
            message.attempts += 1
            try:
                url, body, headers = self._door.request(message, time.time())
            except NoSecret as exc:
                message.status = "rejected"
                message.reason = str(exc)
                log.warning("cannot send %s: %s", message.idempotency_key, exc)
                return
            try:
                response = await self._client.post(url, content=body, headers=headers)
            except Exception as exc:
                # Anything short of an answer is retried: a dead sender would strand every later
                # message for this SKU, which is worse than retrying a fault that will not heal.
                if not isinstance(exc, httpx.HTTPError):
                    log.exception("push %s failed unexpectedly", message.idempotency_key)
                message.reason = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    message.status = "delivered"
                    message.reason = None
                    message.delivered_at = self._clock.now()
                    return
                reason = f"HTTP {response.status_code}: {response.text[:500]}"
                if 400 <= response.status_code < 500 and response.status_code not in RETRYABLE_4XX:
                    # The address understood and refused: retrying would be refused the same way.
                    message.status = "rejected"
                    message.reason = reason
                    log.warning("ingress rejected %s: %s", message.idempotency_key, reason)
                    return
                message.reason = reason
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)
