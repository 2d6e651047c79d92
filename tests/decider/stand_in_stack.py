"""A stack of its own for runs decided by Claude, with the Messages API stood in for.

restate-server, the world, the scripted stand-in for the API (`anthropic_stand_in/app.py`, on
hypercorn) and the replenisher service, whose real `anthropic` client reaches the stand-in
through `REPLENISHER_ANTHROPIC_BASE_URL`. The end-to-end decider suites each start one, with
their own settings, so the session's (offline) service is untouched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from anthropic_stand_in import STAND_IN_APP
from e2e.scenario import ok
from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import BinaryRuntime
from support import REPO_ROOT, RESTATE_TEST_ENV, RegisteredService, service_env, world_env

TIMEOUT = httpx.Timeout(30.0, connect=5.0)
Clients = tuple[httpx.AsyncClient, httpx.AsyncClient, httpx.AsyncClient]


@dataclass
class ClaudeStack:
    runtime: BinaryRuntime
    world: HypercornApp
    api: HypercornApp
    service: RegisteredService

    def restart_service_with(self, settings: dict[str, str]) -> None:
        self.service.process.env.update(settings)
        self.service.restart()


@contextmanager
def claude_stack(
    tmp_path_factory: pytest.TempPathFactory, log_dir: Path, tag: str, service_settings: dict[str, str]
) -> Iterator[ClaudeStack]:
    """Start the four processes (`tag` names their logs); stop every one started, even on failure."""
    runtime = BinaryRuntime(
        RestatePorts.free(),
        tmp_path_factory.mktemp(f"restate-{tag}") / "data",
        RESTATE_TEST_ENV,
        log_path=log_dir / f"restate-server-{tag}.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    api = HypercornApp(
        STAND_IN_APP,
        free_port(),
        {"PYTHONPATH": str(REPO_ROOT)},
        name=f"fake-anthropic-{tag}",
        log_path=log_dir / f"fake-anthropic-{tag}.log",
    )
    world = HypercornApp(WORLD_APP, free_port(), {}, name=f"world-{tag}", log_path=log_dir / f"world-{tag}.log")
    started: list[Any] = []
    try:
        runtime.start()
        started.append(runtime)
        runtime.wait_ready()
        world.env.update(world_env(runtime.ingress_url))
        for process in (api, world):
            process.start()
            started.append(process)
            process.wait_ready()
        connection = {"ANTHROPIC_API_KEY": "sk-ant-e2e", "REPLENISHER_ANTHROPIC_BASE_URL": api.url}
        app = HypercornApp(
            SERVICE_APP,
            free_port(),
            service_env(world.url, {**connection, **service_settings}),
            name=f"replenisher-{tag}",
            log_path=log_dir / f"replenisher-{tag}.log",
        )
        service = RegisteredService(runtime, app)
        started.append(service)
        service.start()
        yield ClaudeStack(runtime, world, api, service)
    finally:
        for process in reversed(started):
            process.stop()


@asynccontextmanager
async def clients_of(stack: ClaudeStack) -> AsyncIterator[Clients]:
    """Clients of Restate's ingress, the world and the stand-in's admin routes."""
    async with (
        httpx.AsyncClient(base_url=stack.runtime.ingress_url, timeout=TIMEOUT) as ingress,
        httpx.AsyncClient(base_url=stack.world.url, timeout=TIMEOUT) as world,
        httpx.AsyncClient(base_url=stack.api.url, timeout=TIMEOUT) as api,
    ):
        yield ingress, world, api


async def model_requests(api: httpx.AsyncClient, sku: str) -> list[dict[str, Any]]:
    """What the stand-in received about this SKU, in order."""
    return ok(await api.get("/admin/requests", params={"about": sku}))["requests"]
