"""Every app's request bodies are read by one bounded reader (`replenisher.asgi_body`).

The reader on its own, fed ASGI messages; then the fail-over ingress, which held any body whole
before, refusing one larger than a Restate node accepts (real hypercorn, no node behind it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from replenisher.asgi_body import BodyTooLarge, read_body
from replenisher.stack.failover import MAX_BODY_BYTES
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from support import serving


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
