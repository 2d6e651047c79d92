"""Ingress clients (the suite's, the inbound endpoint's) survive a kept-alive connection closed unanswered.

The server here is a real TCP server that does what Restate's ingress was seen to do after a
refusal: it answers the first request on a connection and, when a second request arrives on the
same connection, closes it without a word. Every new connection is answered.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from replenisher.inbound.signing import new_secrets, signed_headers, write_secrets
from replenisher.keepalive import RetryDroppedKeepAlive
from replenisher.stack.local import INBOUND_APP
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from support import inbound_env

REFUSAL = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
RESET = struct.pack("ii", 1, 0)
CUT_SHORT = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{}"


def content_length(head: bytes) -> int:
    found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return int(found.group(1)) if found else 0


class ClosingServer:
    """`close="fin"`: the second request on a connection is read whole, then the connection is
    closed (the client sees it end before any answer). `close="reset"`: it is closed at once with
    SO_LINGER 0, a reset. `answer=CUT_SHORT`: the first answer itself breaks off."""

    def __init__(self) -> None:
        self.answer = REFUSAL
        self.close = "fin"
        self.connections = 0
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = False
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.requests += 1
                if answered and self.close == "reset":
                    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
                    break
                await reader.readexactly(content_length(head))
                if answered:
                    break  # the second request on this connection: close it unanswered
                writer.write(self.answer)
                await writer.drain()
                answered = True
                if self.answer is CUT_SHORT:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"


@pytest_asyncio.fixture
async def closing_server() -> AsyncIterator[ClosingServer]:
    server = ClosingServer()
    server.server = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    try:
        yield server
    finally:
        server.server.close()
        await server.server.wait_closed()


async def test_a_request_the_server_dropped_unread_is_sent_again_on_a_new_connection(
    closing_server: ClosingServer,
) -> None:
    async with httpx.AsyncClient(base_url=closing_server.url, timeout=5, transport=RetryDroppedKeepAlive()) as client:
        for _ in range(5):
            assert (await client.post("/x", json={"a": 1})).status_code == 400
    # Each request after the first went out once on the dropped connection and once on a new one.
    assert closing_server.connections == 5
    assert closing_server.requests == 9


async def test_without_it_the_second_request_fails(closing_server: ClosingServer) -> None:
    """Positive control: the same server breaks a plain client."""
    async with httpx.AsyncClient(base_url=closing_server.url, timeout=5) as client:
        assert (await client.post("/x", json={"a": 1})).status_code == 400
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.post("/x", json={"a": 1})


async def test_an_answer_cut_short_is_not_sent_again(closing_server: ClosingServer) -> None:
    """Only an unanswered request is repeated: one the server began to answer may have been done."""
    closing_server.answer = CUT_SHORT
    async with httpx.AsyncClient(base_url=closing_server.url, timeout=5, transport=RetryDroppedKeepAlive()) as client:
        with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
            await client.post("/x", json={"a": 1})
    assert closing_server.requests == 1


async def test_the_inbound_endpoint_sends_again_a_forward_whose_connection_the_ingress_dropped(
    closing_server: ClosingServer, tmp_path: Path
) -> None:
    """The inbound endpoint (real hypercorn) forwarding to an ingress that drops the kept-alive
    connection after each answer: the second message still gets the ingress's answer, not a 503.
    Each forward carries its idempotency key, so a resend could never deliver twice."""
    secrets_file = tmp_path / "party-secrets.json"
    secrets = new_secrets()
    write_secrets(secrets_file, secrets)
    # No ERP answers there: the manager's messages go through all the same (the SKU's address checks it).
    env = inbound_env(closing_server.url, secrets_file, f"http://127.0.0.1:{free_port()}")
    inbound = HypercornApp(INBOUND_APP, free_port(), env, name="inbound", log_path=tmp_path / "inbound.log")
    await asyncio.to_thread(inbound.start)
    try:
        await asyncio.to_thread(inbound.wait_ready)
        async with httpx.AsyncClient(base_url=inbound.url, timeout=30) as door:
            for n in range(2):
                raw = json.dumps({"event": "approval", "payload": {"po_number": f"PO-{n}"}}).encode()
                path = "/messages/SKU-1"
                headers = signed_headers(secrets["manager"], "manager", path, raw, time.time())
                answer = await door.post(path, content=raw, headers=headers)
                assert answer.status_code == 400, answer.text  # the ingress's own answer, passed through
    finally:
        await asyncio.to_thread(inbound.stop)
    assert closing_server.connections == 2 and closing_server.requests == 3


async def test_a_reset_is_resent_only_when_a_second_delivery_is_harmless(closing_server: ClosingServer) -> None:
    """A reset may cut an answer short after the request ran: a plain POST is not sent again; a
    read, a POST with an idempotency key, or any request where the caller allows it, is. Each
    second request below goes out on the connection the server then resets."""
    closing_server.close = "reset"

    async def second(transport: RetryDroppedKeepAlive, method: str, **kwargs: Any) -> httpx.Response:
        async with httpx.AsyncClient(base_url=closing_server.url, timeout=5, transport=transport) as client:
            assert (await client.post("/x", json={"a": 1})).status_code == 400
            return await client.request(method, "/x", **kwargs)

    with pytest.raises(httpx.ReadError):
        await second(RetryDroppedKeepAlive(), "POST", json={"a": 1})
    assert (closing_server.connections, closing_server.requests) == (1, 2)
    assert (await second(RetryDroppedKeepAlive(), "GET")).status_code == 400
    keyed = {"json": {"a": 1}, "headers": {"idempotency-key": "k"}}
    assert (await second(RetryDroppedKeepAlive(), "POST", **keyed)).status_code == 400
    assert (await second(RetryDroppedKeepAlive(resend_any_reset=True), "POST", json={"a": 1})).status_code == 400
    # Three more clients, each: its first request, the reset one, and the resend on a new connection.
    assert (closing_server.connections, closing_server.requests) == (1 + 3 * 2, 2 + 3 * 3)
