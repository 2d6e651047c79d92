"""A service that calls the replenisher's private handlers from inside Restate.

Only a deployment registered through the admin API can do this (it is Restate itself that
calls private handlers for it); the tests use it to put a message that no door would let
through into a run, and see that the run survives it.

Serve with `hypercorn e2e.intruder:app` (tests/ on the path).
"""

from __future__ import annotations

import json
from typing import Any

import restate
from restate import Context

intruder = restate.Service("Intruder")


@intruder.handler()
async def resolve(ctx: Context, request: dict[str, Any]) -> None:
    """Send `request["message"]` as-is to `Replenish/<run_id>/deliver`."""
    body = json.dumps(request["message"]).encode()
    ctx.generic_send("Replenish", "deliver", body, key=request["run_id"])


app = restate.app(services=[intruder])
