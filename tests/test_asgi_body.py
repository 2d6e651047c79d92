"""Every app's request bodies are read by one bounded reader (`replenisher.asgi_body`).

The reader on its own, fed ASGI messages; then the fail-over ingress, which held any body whole
before, refusing one larger than a Restate node accepts (real hypercorn, no node behind it); and
the inbound endpoint's refusals, which leave its kept-alive connections usable (`ReadToTheEnd`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from replenisher.asgi_body import BodyTooLarge, ReadToTheEnd, read_body
from replenisher.inbound.signing import new_secrets, write_secrets
from replenisher.stack.failover import MAX_BODY_BYTES
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from support import inbound_endpoint, serving


class Messages:
    def __init__(self, *messages: dict[str, Any]) -> None:
        self.messages = list(messages)
        self.taken = 0

    async def __call__(self) -> dict[str, Any]:
        self.taken += 1
        return self.messages.pop(0)


def chunk(body: bytes, more: bool) -> dict[str, Any]:
    return {"type": "http.request", "body": body, "more_body": more}


async def test_a_body_in_chunks_is_read_whole() -> None:
    receive = Messages(chunk(b"ab", True), chunk(b"", True), chunk(b"cd", False))
    assert await read_body(receive, 4) == b"abcd"


async def test_a_client_that_went_away_gives_no_body() -> None:
    assert await read_body(Messages(chunk(b"ab", True), {"type": "http.disconnect"}), 10) is None


async def test_past_the_bound_nothing_more_is_read() -> None:
    receive = Messages(chunk(b"abc", True), chunk(b"de", True), chunk(b"f", False))
    with pytest.raises(BodyTooLarge, match="larger than 4 bytes"):
        await read_body(receive, 4)
    assert receive.taken == 2


@pytest.fixture(scope="module")
def failover(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HypercornApp]:
    nowhere = f"http://127.0.0.1:{free_port()}"  # no node listens: every forward fails
    env = {"REPLENISHER_FAILOVER_UPSTREAMS": nowhere, "REPLENISHER_FAILOVER_DEADLINE_SECONDS": "0.5"}
    log: Path = tmp_path_factory.mktemp("failover") / "failover.log"
    with serving(
        HypercornApp("replenisher.stack.failover:create_app()", free_port(), env, name="failover", log_path=log)
    ) as app:
        yield app


def test_the_failover_ingress_refuses_a_body_no_node_would_take(failover: HypercornApp) -> None:
    with httpx.Client(base_url=failover.url, timeout=30) as client:
        refused = client.post("/SkuAgent/S1/deliver", content=b"x" * (MAX_BODY_BYTES + 1))
        assert refused.status_code == 413 and "more than a Restate node accepts" in refused.text
        # Positive control: a body within the bound is forwarded (and finds no node here).
        forwarded = client.post("/SkuAgent/S1/deliver", content=b"{}")
        assert forwarded.status_code == 503 and "no cluster node" in forwarded.text


async def refuse_at_once(scope: Any, receive: Any, send: Any) -> None:
    """An app that answers from the path alone, reading none of the body."""
    await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


async def replies_of(app: ReadToTheEnd, receive: Messages, length: int) -> list[MutableMapping[str, Any]]:
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "headers": [(b"content-length", str(length).encode())]}
    await app(scope, receive, send)
    return sent


async def test_a_reply_starts_after_the_body_the_app_did_not_read() -> None:
    receive = Messages(chunk(b"ab", True), chunk(b"cd", False))
    sent = await replies_of(ReadToTheEnd(refuse_at_once, 10), receive, 4)
    assert receive.taken == 2 and not receive.messages
    assert (b"connection", b"close") not in sent[0]["headers"]


async def test_a_body_past_the_bound_is_left_and_the_connection_closed() -> None:
    receive = Messages(chunk(b"abc", True), chunk(b"de", True), chunk(b"f", False))
    sent = await replies_of(ReadToTheEnd(refuse_at_once, 4), receive, 6)
    assert receive.taken == 0  # declared longer than the bound: none of it is read
    assert (b"connection", b"close") in sent[0]["headers"]
    undeclared = Messages(chunk(b"abc", True), chunk(b"de", True), chunk(b"f", False))
    sent = await replies_of(ReadToTheEnd(refuse_at_once, 4), undeclared, 0)
    assert undeclared.taken == 2 and (b"connection", b"close") in sent[0]["headers"]


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HypercornApp]:
    base = tmp_path_factory.mktemp("door")
    write_secrets(base / "secrets.json", new_secrets())
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing is forwarded: every request here is refused
    with serving(inbound_endpoint(nowhere, base / "secrets.json", base, nowhere)) as app:
        yield app


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HypercornApp]:
    log = tmp_path_factory.mktemp("console") / "console.log"
    app = HypercornApp("replenisher.console.app:create_app()", free_port(), {}, name="console", log_path=log)
    with serving(app) as served:
        yield served


# A request each app refuses from its request line alone: no such endpoint at the door, a GET-only page.
REFUSED = {"door": ("/nowhere", b"HTTP/1.1 404"), "console": ("/skus", b"HTTP/1.1 405")}


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_a_refusal_leaves_the_kept_alive_connection_usable(name: str, request: pytest.FixtureRequest) -> None:
    """Found in CI: the door's 404, sent before the body arrived, made hypercorn drop the connection
    after it, unannounced, and the client's next request on it went unanswered."""
    app: HypercornApp = request.getfixturevalue(name)
    path, status = REFUSED[name]
    host, port = app.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        body = b"event=supplier-reply"
        head = f"POST {path} HTTP/1.1\r\nhost: here\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        writer.write(head)
        await writer.drain()
        # No answer before the body is in (before, the refusal came here and the connection closed).
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1), 1.0)
        writer.write(body + b"GET /health HTTP/1.1\r\nhost: here\r\n\r\n")
        await writer.drain()
        answers = b""
        while answers.count(b"HTTP/1.1 ") < 2 or not answers.rstrip().endswith(b"}"):
            more = await asyncio.wait_for(reader.read(65536), 10)
            assert more, f"the connection was closed after: {answers!r}"
            answers += more
        assert answers.startswith(status) and b"connection: close" not in answers.lower(), answers
        assert b"HTTP/1.1 200" in answers, answers
    finally:
        writer.close()


def test_a_body_too_large_is_refused_and_its_connection_closed(door: HypercornApp) -> None:
    with httpx.Client(base_url=door.url, timeout=30) as client:
        refused = client.post("/messages/S1", content=b"x" * 70_000)
        assert refused.status_code == 413 and refused.headers["connection"] == "close"
        assert client.get("/health").status_code == 200  # on a new connection
