"""Throwaway apps that stand in for the real services in the stack's own tests.

They prove the plumbing only: registration, ingress calls, state and idempotency that
survive a crash, and the environment each process is started with.
"""

from __future__ import annotations

import json
import os
from typing import Any

import restate

echo = restate.Service("StackEcho")


@echo.handler()
async def greet(ctx: restate.Context, name: str) -> str:
    # A journaled step: its result is what an idempotent retry must get back after a crash.
    pid = await ctx.run("answering process", os.getpid)
    return f"hello {name} from {pid}"


@echo.handler()
async def env(ctx: restate.Context, name: str) -> str | None:
    return os.environ.get(name)


tally = restate.VirtualObject("StackTally")


@tally.handler()
async def add(ctx: restate.ObjectContext, amount: int) -> int:
    total = (await ctx.get("total", type_hint=int) or 0) + amount
    ctx.set("total", total)
    return total


app = restate.app([echo, tally])


async def env_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A plain ASGI app standing in for the world: GET /env shows its environment."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = json.dumps({k: v for k, v in os.environ.items() if k.startswith("WORLD_")}).encode()
    status = 200 if scope["path"] in ("/env", "/health") else 404
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
