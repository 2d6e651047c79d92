"""The scripted stand-in for the Anthropic API over HTTP, for end-to-end runs (hypercorn serves `app`).

The replenisher service reaches it through `REPLENISHER_ANTHROPIC_BASE_URL`; its real
`anthropic` client posts to `/v1/messages` as it would to the API. Tests script it and read
what it received through `/admin/...`.
"""

from __future__ import annotations

import json
from typing import Any

from anthropic_stand_in.scripted_model import Persuasion, ScriptedModel
from replenisher.asgi_body import BodyTooLarge, read_body

model = ScriptedModel()

Send = Any
Receive = Any


# The Messages API's own request bound.
MAX_BODY_BYTES = 32 * 1024 * 1024


async def _reply(send: Send, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    raw = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    head += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    method, path = scope["method"], scope["path"]
    try:
        raw = await read_body(receive, MAX_BODY_BYTES)
    except BodyTooLarge as e:
        await _reply(send, 413, {"type": "error", "error": {"type": "request_too_large", "message": str(e)}})
        return
    if raw is None:
        return  # the client went away
    if method == "GET" and path == "/health":
        await _reply(send, 200, {"ok": True})
    elif method == "POST" and path == "/v1/messages":
        reply = model.respond(json.loads(raw))
        await _reply(send, reply.status, reply.body, reply.headers)
    elif method == "POST" and path == "/admin/persuade":
        model.persuasions.append(Persuasion(**json.loads(raw)))
        await _reply(send, 200, {"persuasions": len(model.persuasions)})
    elif method == "POST" and path == "/admin/fail":
        spec = json.loads(raw)
        model.fail(*spec["statuses"], only_for=spec.get("only_for"))
        await _reply(send, 200, {"failures": len(model.failures)})
    elif method == "GET" and path == "/admin/requests":
        wanted = dict(pair.split("=", 1) for pair in scope["query_string"].decode().split("&") if "=" in pair)
        about = wanted.get("about", "")
        found = [b for b in model.requests if about in json.dumps(b)]
        await _reply(send, 200, {"requests": found})
    else:
        await _reply(send, 404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
