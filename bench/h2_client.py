"""A bare HTTP/2 client over one h2c connection (prior knowledge, as Restate speaks to a service),
for `bench.asgi_receive`: it chooses how a request body's DATA frames reach the socket, all in one
write (as a peer streaming what it already holds, a journal being replayed, writes them) or one
write each. httpx cannot say which: it writes each chunk it is given on its own.

The h2 package comes with hypercorn, one of the project's dependencies.
"""

from __future__ import annotations

import asyncio

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, ResponseReceived, StreamEnded, StreamReset

WINDOW = 65_535
"""HTTP/2's initial flow-control window: a body this client sends fits in it, so it never waits
for the server's window updates (which would add round trips that are not the server's hand-off)."""


class H2Client:
    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._conn = H2Connection(config=H2Configuration(client_side=True, header_encoding=None))
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> H2Client:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        self._conn.initiate_connection()
        await self._flush()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._conn.close_connection()
            await self._flush()
            self._writer.close()
            await self._writer.wait_closed()

    async def _flush(self) -> None:
        assert self._writer is not None
        data = self._conn.data_to_send()
        if data:
            self._writer.write(data)
            await self._writer.drain()

    async def post(self, path: str, chunks: list[bytes], together: bool) -> tuple[int, bytes]:
        """POST `chunks` as one DATA frame each: written to the socket at once (`together`) or one
        write per frame. The response's status and body."""
        size = sum(map(len, chunks))
        if size >= WINDOW:
            raise ValueError(f"a body of {size} bytes is over HTTP/2's initial window ({WINDOW}): send less")
        stream = self._conn.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", f"{self.host}:{self.port}"),
            (":path", path),
            ("content-length", str(size)),
        ]
        self._conn.send_headers(stream, headers)
        for i, chunk in enumerate(chunks):
            if not together:
                await self._flush()
            self._conn.send_data(stream, chunk, end_stream=i == len(chunks) - 1)
        await self._flush()
        return await self._response(stream)

    async def _response(self, stream: int) -> tuple[int, bytes]:
        assert self._reader is not None
        status, body = 0, bytearray()
        while True:
            data = await asyncio.wait_for(self._reader.read(WINDOW), self.timeout)
            if not data:
                raise ConnectionError("the server closed the connection before answering")
            ended = False
            for event in self._conn.receive_data(data):
                if isinstance(event, ResponseReceived) and event.stream_id == stream:
                    status = int(dict(event.headers)[b":status"])
                elif isinstance(event, DataReceived):
                    body += event.data
                    self._conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, StreamEnded) and event.stream_id == stream:
                    ended = True
                elif isinstance(event, StreamReset) and event.stream_id == stream:
                    raise ConnectionError(f"the server reset the stream (error {event.error_code})")
            await self._flush()
            if ended:
                return status, bytes(body)
