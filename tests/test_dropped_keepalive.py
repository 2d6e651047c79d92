"""The suite's ingress client survives a server that closes a kept-alive connection unanswered.

The server here is a real TCP server that does what Restate's ingress was seen to do after a
refusal: it answers the first request on a connection and, when a second request arrives on the
same connection, closes it without a word. Every new connection is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from support import RetryDroppedKeepAlive

REFUSAL = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
CUT_SHORT = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{}"


class ClosingServer:
    def __init__(self) -> None:
        self.answer = REFUSAL
        self.connections = 0
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = False
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                self.requests += 1
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
