"""The service's ASGI app, made to behave alike under hypercorn and granian.

When Restate drops an invocation's HTTP/2 stream (restate-server killed or restarted, the
attempt aborted), hypercorn cancels the request's task, so the attempt stops where it is. granian
only tells the app, through `receive`, that the client is gone: the Restate SDK notes it but lets
the handler run on, so an orphaned attempt would go on calling the decider and the outside world
while Restate replays the run in a new attempt. This wrapper cancels the request's task as soon
as `receive` reports the disconnect, which is what hypercorn does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def cancel_on_disconnect(app: App) -> App:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        request = asyncio.current_task()
        gone = False

        async def watched() -> Message:
            nonlocal gone
            message = await receive()
            if message.get("type") == "http.disconnect" and not gone:
                gone = True
                if request is not None and request is not asyncio.current_task():
                    request.cancel()
            return message

        try:
            await app(scope, watched, send)
        except asyncio.CancelledError:
            if not gone:
                raise  # the server itself cancelled us: let it see that

    return wrapped
