"""Fixtures for the world's tests: one world process and one fake ingress for the session.

Names differ from the end-to-end fixtures in tests/conftest.py (`world`, `admin`, `ingress`)
on purpose: these start only the world, against a fake ingress, with no Restate at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from replenisher.adapters import HttpWorld

from .support import FakeIngress, Names, WorldAdmin, WorldProcess, launch_world, next_names, start_ingress

# --- fixtures --------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def fake_ingress() -> AsyncIterator[FakeIngress]:
    running = await start_ingress()
    yield running.ingress
    await running.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def world_proc(
    fake_ingress: FakeIngress, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[WorldProcess]:
    process = await launch_world(tmp_path_factory.mktemp("world"), ingress_url=fake_ingress.url)
    yield process
    assert await process.stop() == 0, process.log_text()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def world_http(world_proc: WorldProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=world_proc.url, timeout=5.0) as client:
        yield client


@pytest.fixture
def world_admin(world_http: httpx.AsyncClient) -> WorldAdmin:
    return WorldAdmin(world_http)


@pytest.fixture
def adapters(world_proc: WorldProcess, world_http: httpx.AsyncClient) -> HttpWorld:
    return HttpWorld(world_proc.url, world_http)


@pytest.fixture
def names() -> Names:
    return next_names()
