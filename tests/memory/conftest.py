from __future__ import annotations

import re

import httpx
import pytest

from e2e.scenario import Scenario
from support import RegisteredService


@pytest.fixture
def scenario(
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    world_client: httpx.AsyncClient,
    request: pytest.FixtureRequest,
) -> Scenario:
    name = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name.removeprefix("test_"))[:24].strip("-")
    return Scenario(ingress, world_client, name)
