"""The fail-over ingress: a request goes to a live node, and a retried POST keeps one idempotency key.

The cluster test (`make cluster-test`) proves it against three real Restate nodes; here the
nodes are stood in for by a transport, to show which request reached which node with what.
"""

from __future__ import annotations

import httpx
import pytest

from replenisher.stack.failover import Failover

DEAD, BUSY, LIVE = "http://n1.test", "http://n2.test", "http://n3.test"


def failover_over(seen: list[tuple[str, str, str | None]]) -> Failover:
    def handle(request: httpx.Request) -> httpx.Response:
        node = f"{request.url.scheme}://{request.url.host}"
        seen.append((node, request.method, request.headers.get("idempotency-key")))
        if node == DEAD:
            raise httpx.ConnectError("connection refused", request=request)
        if node == BUSY:
            return httpx.Response(503, text="partition not available")
        return httpx.Response(200, json={"path": request.url.path})

    proxy = Failover([DEAD, BUSY, LIVE], deadline_seconds=5)
    proxy.client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return proxy


async def test_a_post_fails_over_to_a_live_node_with_the_same_idempotency_key() -> None:
    seen: list[tuple[str, str, str | None]] = []
    proxy = failover_over(seen)
    response = await proxy.forward("POST", "/SkuAgent/S1/check", [("content-type", "application/json")], b"{}")
    assert response.status_code == 200 and response.json() == {"path": "/SkuAgent/S1/check"}
    assert [node for node, _, _ in seen] == [DEAD, BUSY, LIVE]
    keys = {key for _, _, key in seen}
    assert len(keys) == 1 and next(iter(keys)).startswith("failover-")
    # The next request starts at the node that answered, and a caller's own key is kept.
    seen.clear()
    await proxy.forward("POST", "/SkuAgent/S1/deliver", [("Idempotency-Key", "approval-PO-1-0")], b"{}")
    assert seen == [(LIVE, "POST", "approval-PO-1-0")]
    assert proxy.failovers == 2


async def test_a_read_gets_no_key_and_every_node_down_is_a_clear_failure() -> None:
    seen: list[tuple[str, str, str | None]] = []
    proxy = failover_over(seen)
    await proxy.forward("GET", "/SkuAgent/S1/status", [], b"")
    assert seen[-1] == (LIVE, "GET", None)
    down = Failover([DEAD], deadline_seconds=0.5)
    down.client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused", request=r)))
    )
    # A cluster with no live node must not look like an answer.
    with pytest.raises(httpx.ConnectError):
        await down.forward("GET", "/SkuAgent/S1/status", [], b"")
