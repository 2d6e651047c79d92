"""The smallest ASGI app that shows how a server hands a streamed request body to the app.

`POST /drain` reads the body with `receive()` until the last chunk and answers how many
`receive` calls it took and how many bytes came: nothing of ours, no Restate, so what a request
costs the server process is the server's hand-off of the body and the event loop's. `GET
/health` answers for the readiness probe. It takes the lifespan protocol (hypercorn sends it;
granian's `asginl` does not).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["path"] == "/health":
        await _answer(send, 200, b'{"ok": true}')
        return
    if scope["path"] != "/drain" or scope["method"] != "POST":
        await _answer(send, 404, b'{"error": "POST /drain or GET /health"}')
        return
    receives = size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        receives += 1
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    await _answer(send, 200, json.dumps({"receives": receives, "bytes": size}).encode())
