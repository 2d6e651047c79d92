"""One ingress address in front of a Restate cluster: each request goes to a live node.

    REPLENISHER_FAILOVER_UPSTREAMS=http://127.0.0.1:18080,http://127.0.0.1:28080,... \\
        hypercorn 'replenisher.stack.failover:create_app()' --bind 127.0.0.1:8080

Any node's ingress serves any invocation, so a caller that knows only this address (the
world, the inbound endpoint, a load balancer's clients) keeps working while a node is down.
A request goes to the node that answered last; when that node cannot be reached, or answers
that it cannot serve now (502/503/504), it goes to the next, round the nodes, until
`REPLENISHER_FAILOVER_DEADLINE_SECONDS`.

Retrying a POST that reached a node which then died could start a second invocation. So every
POST without an `Idempotency-Key` gets one here, the same on every retry of that request:
Restate, cluster-wide, attaches the retry to the invocation the first attempt started (or
returns its result) instead of starting another. A caller's own key is kept as it is.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import httpx

from replenisher.asgi_body import BodyTooLarge, read_body

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "host", "content-length", "te", "trailer"}
UNAVAILABLE = {502, 503, 504}
RETRYABLE = (httpx.TransportError,)


class Failover:
    def __init__(self, upstreams: list[str], deadline_seconds: float = 60.0) -> None:
        if not upstreams:
            raise ValueError("REPLENISHER_FAILOVER_UPSTREAMS names no node")
        self.upstreams = [u.rstrip("/") for u in upstreams]
        self.deadline_seconds = deadline_seconds
        self.current = 0
        self.failovers = 0
        self.client: httpx.AsyncClient | None = None

    def http(self) -> httpx.AsyncClient:
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=2.0))
        return self.client

    async def forward(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> httpx.Response:
        sent = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]
        if method == "POST" and not any(k.lower() == "idempotency-key" for k, _ in sent):
            sent.append(("idempotency-key", f"failover-{uuid.uuid4().hex}"))
        deadline = time.monotonic() + self.deadline_seconds
        start = self.current
        attempt = 0
        while True:
            index = (start + attempt) % len(self.upstreams)
            last: httpx.Response | Exception
            try:
                response = await self.http().request(method, self.upstreams[index] + target, headers=sent, content=body)
                if response.status_code not in UNAVAILABLE:
                    self.current = index
                    return response
                last = response
            except RETRYABLE as e:
                last = e
            attempt += 1
            self.failovers += 1
            if time.monotonic() >= deadline:
                if isinstance(last, httpx.Response):
                    return last
                raise last
            if attempt % len(self.upstreams) == 0:
                await asyncio.sleep(0.2)  # every node refused: give the cluster a moment


def _from_env() -> Failover:
    upstreams = [u for u in os.environ.get("REPLENISHER_FAILOVER_UPSTREAMS", "").split(",") if u.strip()]
    return Failover(upstreams, float(os.environ.get("REPLENISHER_FAILOVER_DEADLINE_SECONDS", "60")))


# Restate's own bound on a message (`message-size-limit`, 32 MiB by default): a larger body
# could not be served by any node, so it is refused here before it is held in memory.
MAX_BODY_BYTES = 32 * 1024 * 1024


async def _reply(send: Any, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": text.encode()})


def create_app(failover: Failover | None = None) -> Any:
    """The proxy as an ASGI app over `failover` (default: one from the environment at its start-up,
    `REPLENISHER_FAILOVER_UPSTREAMS`); each app keeps its own, nothing is kept by the module."""
    held: list[Failover] = [failover] if failover is not None else []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    if not held:
                        held.append(_from_env())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if held and held[0].client is not None:
                        await held[0].client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if not held:
            held.append(_from_env())  # a server that does not speak the lifespan protocol
        await _proxy(held[0], scope, receive, send)

    return app


async def _proxy(failover: Failover, scope: dict[str, Any], receive: Any, send: Any) -> None:
    try:
        body = await read_body(receive, MAX_BODY_BYTES)
    except BodyTooLarge as e:
        await _reply(send, 413, f"{e}: more than a Restate node accepts")
        return
    if body is None:
        return  # the caller went away
    if scope["path"] == "/failover/health" or (scope["path"] == "/health" and scope["method"] == "GET"):
        raw = f'{{"ok": true, "failovers": {failover.failovers}}}'.encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": raw})
        return
    target = scope["raw_path"].decode() if scope.get("raw_path") else scope["path"]
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode()
    headers = [(k.decode(), v.decode()) for k, v in scope["headers"]]
    try:
        response = await failover.forward(scope["method"], target, headers, body)
    except httpx.TransportError as e:
        await _reply(send, 503, f"no cluster node could be reached: {type(e).__name__}")
        return
    # httpx has undone any content-encoding: the body goes on as it is now.
    dropped = HOP_BY_HOP | {"content-encoding"}
    out = [(k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() not in dropped]
    out.append((b"content-length", str(len(response.content)).encode()))
    await send({"type": "http.response.start", "status": response.status_code, "headers": out})
    await send({"type": "http.response.body", "body": response.content})
