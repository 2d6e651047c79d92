from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from replenisher.inbound.signing import load_secrets
from replenisher.stack.processes import HypercornApp


@pytest_asyncio.fixture(loop_scope="session")
async def door(inbound: HypercornApp) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the session's inbound endpoint."""
    async with httpx.AsyncClient(base_url=inbound.url, timeout=30) as client:
        yield client


@pytest.fixture
def secrets(party_secrets: Path) -> dict[str, str]:
    """The outside parties' secrets, as the session's inbound endpoint has them."""
    return load_secrets(party_secrets)
