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
