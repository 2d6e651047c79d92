"""An ASGI request's body, read whole up to a bound: the one reader of every app here (the
inbound endpoint, the console, the fail-over ingress, the simulated world, the Messages API
stand-in). Each answers an oversized body with its own 413 and reason."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class BodyTooLarge(Exception):
    """More than the bound arrived; the rest was not read."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"body larger than {limit} bytes")
        self.limit = limit


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None if the client went away before it ended. Past `limit` bytes it
    raises `BodyTooLarge` at once, holding no more than one chunk beyond the bound."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


Scope = MutableMapping[str, Any]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class ReadToTheEnd:
    """Wraps an ASGI app so that every reply on a kept-alive connection starts only once the
    request's body has arrived: what the app did not read is read (up to `limit` bytes) and
    dropped; a longer body gets `connection: close` on its reply.

    Without it, a refusal sent before the body arrived (a 404 for an unknown path, a 401 read
    from the headers) left hypercorn's HTTP/1.1 connection mid-request: it closed it after the
    reply, without saying so, and a client that sent its next request on the kept-alive
    connection had it dropped unanswered ("Server disconnected without sending a response")."""

    def __init__(self, app: App, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ended = False

        async def tracked() -> MutableMapping[str, Any]:
            nonlocal ended
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                ended = True
            return message

        async def reply(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and not ended:
                if not await self.finish(scope, tracked):
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, tracked, reply)

    async def finish(self, scope: Scope, receive: Receive) -> bool:
        """Reads the rest of the body; False when it is longer than the limit (left unread)."""
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            return False
        try:
            return await read_body(receive, self.limit) is not None
        except BodyTooLarge:
            return False
