"""The service's ASGI wrapper: an attempt whose stream Restate dropped stops where it is."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from replenisher.durable.asgi import cancel_on_disconnect


async def test_a_disconnect_cancels_the_attempt_that_would_run_on() -> None:
    side_effects: list[str] = []
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    working = asyncio.Event()

    async def attempt(scope: Any, receive: Any, send: Any) -> None:
        # Like the SDK: a task reads the request while the handler works on.
        async def reader() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        reading = asyncio.create_task(reader())
        try:
            working.set()
            await asyncio.sleep(5)
            side_effects.append("decided again")
        finally:
            reading.cancel()

    app = cancel_on_disconnect(attempt)
    running = asyncio.create_task(app({"type": "http"}, messages.get, _no_send))
    await asyncio.wait_for(working.wait(), 2)
    await messages.put({"type": "http.disconnect"})
    await asyncio.wait_for(running, 2)  # returns quietly, well before the handler's 5 s
    assert side_effects == []


async def test_without_a_disconnect_the_attempt_runs_to_its_end_and_a_server_cancel_propagates() -> None:
    async def attempt(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(0.01)

    await cancel_on_disconnect(attempt)({"type": "http"}, _never, _no_send)

    inside = asyncio.Event()

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        inside.set()
        await asyncio.sleep(5)

    running = asyncio.create_task(cancel_on_disconnect(slow)({"type": "http"}, _never, _no_send))
    # Cancelled inside the handler, so the wrapper is the one that must let the cancel through.
    await asyncio.wait_for(inside.wait(), 2)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


async def _no_send(message: Any) -> None:
    return None


async def _never() -> dict[str, Any]:
    await asyncio.sleep(3600)
    return {}
