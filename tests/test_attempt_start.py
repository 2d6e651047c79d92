"""Reading an attempt's StartMessage (durable/attempt_start.py) and which attempts the service notes
(durable/answered.py). The real path, Restate sending it after an outage, is in
tests/operator/test_oncall.py (the band read after the run finished)."""

from __future__ import annotations

import asyncio

import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from replenisher.asgi_body import read_body
from replenisher.durable.answered import note_for, noting_answers
from replenisher.durable.asgi import Message, Receive, Scope, Send
from replenisher.durable.attempt_start import AttemptStart, attempt_start
from replenisher.stack.ports import free_port
from support import count_ca_loads

# The first frame restate-server 1.7.12 sent for an attempt of `SkuAgent/<sku>/check` (captured
# from the request body): no failed attempt before it, so no field 7.
CHECK = bytes.fromhex(
    "00000000000000640a185d44792c66480d012062232d09db8933eb4e1d05be54c7cd1226696e765f31303542"
    "3962444c4452435a366769776b547977324672524765387152503033674118013212534b552d6578706c6f72"
    "652d393634313734400348c9f4c986c1d4e9d979"
)


def with_failed_attempts(frame: bytes, count: int) -> bytes:
    """`frame` with field 7 (retry_count_since_last_stored_entry, a varint) appended, as after `count` failures."""
    message = frame[8:] + bytes([7 << 3, count])
    return frame[:4] + len(message).to_bytes(4, "big") + message


def test_a_first_attempt_reads_as_one_that_follows_no_failure() -> None:
    start = attempt_start(CHECK)
    assert start == AttemptStart(
        invocation="inv_105B9bDLDRCZ6giwkTyw2FrRGe8qRP03gA", known_entries=1, failed_attempts=0, since_last_entry_ms=3
    )
    assert note_for("/invoke/SkuAgent/check", start) is None, "nothing to note"


def test_an_attempt_after_failures_is_noted_with_its_invocation() -> None:
    start = attempt_start(with_failed_attempts(CHECK, 6))
    assert start is not None and start.failed_attempts == 6
    note = note_for("/invoke/Replenish/run", start)
    assert note is not None and (note.invocation, note.handler, note.failed_attempts) == (
        "inv_105B9bDLDRCZ6giwkTyw2FrRGe8qRP03gA",
        "Replenish/run",
        6,
    )
    assert note_for("/invoke/ServiceAnswered/after_failures", start) is None, "a note is not noted"


def test_a_frame_not_all_there_or_not_a_start_reads_as_nothing() -> None:
    assert attempt_start(CHECK[:50]) is None
    assert attempt_start(CHECK[:6]) is None
    assert attempt_start(b"\x04\x00" + CHECK[2:]) is None, "another message type"
    assert attempt_start(CHECK[:8] + b"\xff" * (len(CHECK) - 8)) is None, "bytes that are no message"


def in_messages(parts: list[bytes]) -> Receive:
    messages = iter([{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)])

    async def receive() -> Message:
        return next(messages)

    return receive


async def ignore(message: Message) -> None:
    pass


async def until_listening(port: int, within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)
        else:
            writer.close()
            return


async def test_notes_go_out_over_one_client_not_one_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three attempts after failures (their first frame whole, followed by a journal, in pieces):
    three notes reach a real HTTP server, and one SSL context (the CA bundle read once) carried them.
    A client per note read it per note: about 30 ms of CPU each, a fifth of the service's CPU in the
    test suite."""
    loads = count_ca_loads(monkeypatch)
    notes: list[dict[str, object]] = []
    three = asyncio.Event()

    async def ingress(request: Request) -> Response:
        notes.append(await request.json())
        if len(notes) == 3:
            three.set()
        return JSONResponse({"invocationId": "inv_x", "status": "Accepted"}, 202)

    receiver = Starlette(routes=[Route("/ServiceAnswered/after_failures/send", ingress, methods=["POST"])])
    config = Config()
    port = free_port()
    config.bind = [f"127.0.0.1:{port}"]
    stop = asyncio.Event()
    server = asyncio.create_task(serve(receiver, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]

    passed_on: list[bytes] = []

    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        passed_on.append(await read_body(receive, 1 << 20) or b"")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = noting_answers(handler, f"http://127.0.0.1:{port}")
    frame = with_failed_attempts(CHECK, 2)
    replay = frame + bytes(range(256)) * 256  # a replay's request: the journal's frames after the start
    bodies = [[frame], [replay], [replay[i : i + 3] for i in range(0, 30, 3)] + [replay[30:]]]
    try:
        await until_listening(port)
        for parts in bodies:
            await app({"type": "http", "path": "/invoke/Replenish/run"}, in_messages(parts), ignore)
        await asyncio.wait_for(three.wait(), 20)
    finally:
        stop.set()
        await asyncio.wait_for(server, 10)
    assert [n["failed_attempts"] for n in notes] == [2, 2, 2], "whole, with a journal after it, in pieces"
    assert passed_on == [frame, replay, replay], "the service got every byte as sent"
    assert len(loads) <= 1, f"the CA bundle was read {len(loads)} times for 3 notes"
