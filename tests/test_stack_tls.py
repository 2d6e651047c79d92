"""The stack's own HTTP calls share one TLS context per process.

httpx reads the whole CA bundle into a new SSL context for every client it makes (about 30 ms
of CPU); the stack polls a starting server every 50 ms and makes a client per admin query, so
building one each time took more than half a core from the servers being waited for.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest

from replenisher.stack import tls
from replenisher.stack.admin import Admin, is_healthy
from replenisher.stack.processes import http_answers, http_ok
from replenisher.stack.runtime import RestateRuntime
from support import count_ca_loads


@pytest.fixture
def ca_loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every CA bundle an SSL context loads in this process while the test runs."""
    loads = count_ca_loads(monkeypatch)
    tls._built.cache_clear()
    yield loads
    tls._built.cache_clear()


async def test_polls_and_admin_queries_load_the_ca_bundle_once_not_per_call(
    restate_runtime: RestateRuntime, ca_loads: list[object]
) -> None:
    admin = Admin(restate_runtime.admin_url)
    for _ in range(5):
        assert http_ok(f"{restate_runtime.admin_url}/health")
        assert http_answers(f"{restate_runtime.ingress_url}/restate/health")
        assert is_healthy(restate_runtime.admin_url)
        assert await admin.asql("SELECT 1 AS one") == [{"one": 1}]
    assert len(ca_loads) == 1, f"the CA bundle was loaded {len(ca_loads)} times for 20 calls"


def test_the_control_a_plain_httpx_client_loads_it_every_time(ca_loads: list[object]) -> None:
    """The counter sees what it claims to: httpx's default, one load per client."""
    import httpx

    for _ in range(3):
        httpx.Client().close()
    assert len(ca_loads) == 3


def test_an_unverified_poll_context_checks_no_certificate_and_is_kept_apart() -> None:
    assert tls.context(False).verify_mode == ssl.CERT_NONE
    assert tls.context(True).verify_mode == ssl.CERT_REQUIRED
    assert tls.context(True) is tls.context(True)
