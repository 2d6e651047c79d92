"""Pushes messages to the SKU agents through the Restate ingress, in order, at least once.

Each message carries an idempotency key derived from what it is about (event, PO, n), so
a push retried after a timeout or a crash of the ingress is still delivered once. Messages
wait in one queue per SKU: a SKU whose ingress keeps failing holds back only its own later
messages, and its agent sees them in the order the world sent them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict

from replenisher.domain.documents import ApprovalDecision, EventKind, GoodsReceipt, SupplierReply
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


def idempotency_key(event: str, po_number: str, n: int) -> str:
    # PO numbers are free text; keep the header value plain ASCII whatever they hold.
    return f"world-{event}-{quote(po_number, safe='-_.:')}-{n}"


class Messenger:
    def __init__(
        self,
        ingress_url: str,
        client: httpx.AsyncClient,
        scheduler: Scheduler,
        clock: Clock,
        *,
        first_backoff: float = 0.1,
        max_backoff: float = 2.0,
    ) -> None:
        self._ingress_url = ingress_url.rstrip("/")
        self._client = client
        self._scheduler = scheduler
        self._clock = clock
        self._first_backoff = first_backoff
        self._max_backoff = max_backoff
        self._messages: list[PushedMessage] = []
        self._queues: dict[str, asyncio.Queue[PushedMessage]] = {}
        self._sent_per_subject: dict[tuple[str, str], int] = {}

    def push(self, sku: str, event: EventKind, payload: Payload) -> PushedMessage:
        subject = (event, payload.po_number)
        n = self._sent_per_subject.get(subject, 0) + 1
        self._sent_per_subject[subject] = n
        message = PushedMessage(
            seq=len(self._messages) + 1,
            sku=sku,
            event=event,
            po_number=payload.po_number,
            idempotency_key=idempotency_key(event, payload.po_number, n),
            payload=payload.model_dump(mode="json"),
            created_at=self._clock.now(),
        )
        self._messages.append(message)
        self._queue(sku).put_nowait(message)
        return message

    def find(self, where: MessageFilter) -> list[PushedMessage]:
        return [m for m in self._messages if where.sku is None or m.sku == where.sku]

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
        url = f"{self._ingress_url}/SkuAgent/{quote(message.sku, safe='')}/deliver"
        body = {"event": message.event, "payload": message.payload}
        backoff = self._first_backoff
        while True:
            message.attempts += 1
            try:
                response = await self._client.post(url, json=body, headers={"idempotency-key": message.idempotency_key})
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
                    # The ingress understood and refused: retrying would be refused the same way.
                    message.status = "rejected"
                    message.reason = reason
                    log.warning("ingress rejected %s: %s", message.idempotency_key, reason)
                    return
                message.reason = reason
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)
