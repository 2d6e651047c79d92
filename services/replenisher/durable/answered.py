"""`ServiceAnswered`: the service's note, outside every run's journal, that it answered an attempt
Restate made after failed ones: the durable end of a "service down" band.

An attempt that resumes a run which only waits (the manager's answer, a supplier's reply)
replays the journal and writes nothing new, and Restate keeps the start of an attempt only while
it runs; Restate also records a run of identical refusals once (its first). So once the run has
moved on, nothing in Restate's own records shows when the service answered again after an outage:
the timeline's band would run on to the next thing the service wrote, days later.

Restate tells each attempt how many attempts failed since the journal's last entry
(`attempt_start`). When that count is not zero, the service sends a one-way call of
`ServiceAnswered/after_failures` through Restate's ingress as the attempt starts: Restate keeps
that invocation (its `created_at`, the invocation it speaks for, the failed attempts) for the
journal retention, like the run's own journal and its refusals. It is not in the run's journal,
so replay and the committed upgrade corpus are untouched. Nothing is sent in an attempt that
follows none that failed, so a healthy service sends none.

Sent only with REPLENISHER_INGRESS_URL set (the local stack and the tests set it); on Lambda the
ASGI wrapper is not used. A note that cannot be sent is logged and dropped: the band then ends
at the next sign Restate recorded (`operations/restate/health.answered_after`).
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import restate
from pydantic import BaseModel
from restate import Context

from replenisher.durable import retention
from replenisher.durable.asgi import App, Message, Receive, Scope, Send
from replenisher.durable.attempt_start import FRAME_HEADER, AttemptStart, attempt_start, first_frame_length
from replenisher.durable.validation import validated
from replenisher.loop import names

NOTE_TIMEOUT_SECONDS = 2.0
log = logging.getLogger(__name__)

service_answered = restate.Service(names.SERVICE_ANSWERED, **retention.OBJECT)


class AnsweredAfterFailures(BaseModel):
    """An attempt the service answered after `failed_attempts` failed ones of `invocation`."""

    invocation: str
    handler: str  # "Service/handler"
    failed_attempts: int
    since_last_entry_ms: int


@validated(service_answered.handler)
async def after_failures(ctx: Context, note: AnsweredAfterFailures) -> None:
    """Nothing to do: Restate's record of this call is the note."""


def note_for(path: str, start: AttemptStart) -> AnsweredAfterFailures | None:
    """The note an attempt calls for: one that follows failed attempts, of any handler but this one's."""
    handler = path.removeprefix("/invoke/")
    if start.failed_attempts == 0 or handler.startswith(f"{names.SERVICE_ANSWERED}/"):
        return None
    return AnsweredAfterFailures(
        invocation=start.invocation,
        handler=handler,
        failed_attempts=start.failed_attempts,
        since_last_entry_ms=start.since_last_entry_ms,
    )


async def send_note(client: httpx.AsyncClient, ingress_url: str, note: AnsweredAfterFailures) -> None:
    url = f"{ingress_url.rstrip('/')}/{names.SERVICE_ANSWERED}/{names.AFTER_FAILURES}/send"
    try:
        sent = await client.post(url, content=note.model_dump_json(), headers={"content-type": "application/json"})
        sent.raise_for_status()
    except httpx.HTTPError as e:
        log.warning("could not note that %s was answered after failed attempts: %s", note.invocation, e)


def noting_answers(app: App, ingress_url: str) -> App:
    """`app`, noting each attempt that follows failed ones (`ServiceAnswered`), as it starts.

    The attempt's request is passed on as it comes: its first frame is only looked at on the way."""
    pending: set[asyncio.Task[None]] = set()
    # One client for every note of this process, made at the first (in the server's event loop): a
    # client per note built an SSL context each time (httpx reads the CA bundle, about 30 ms of CPU),
    # a fifth of the service's CPU in a test suite that kills and restarts services.
    clients: list[httpx.AsyncClient] = []

    def client() -> httpx.AsyncClient:
        if not clients:
            clients.append(httpx.AsyncClient(timeout=NOTE_TIMEOUT_SECONDS))
        return clients[0]

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/invoke/"):
            await app(scope, receive, send)
            return
        head = bytearray()
        looking = True

        async def peeking() -> Message:
            nonlocal looking
            message = await receive()
            if looking and message.get("type") == "http.request":
                # Only the first frame's bytes: a replay's request carries the whole journal after it.
                body: bytes = message.get("body", b"")
                wanted = first_frame_length(bytes(head) + body[:FRAME_HEADER]) or FRAME_HEADER
                head.extend(body[: max(0, wanted - len(head))])
                length = first_frame_length(bytes(head))
                if (length is not None and len(head) >= length) or not message.get("more_body", False):
                    looking = False
                    start = attempt_start(bytes(head))
                    note = note_for(str(scope["path"]), start) if start is not None else None
                    if note is not None:
                        task = asyncio.create_task(send_note(client(), ingress_url, note))
                        pending.add(task)
                        task.add_done_callback(pending.discard)
                    head.clear()
            return message

        await app(scope, peeking, send)

    return wrapped
