"""A stack of its own for the deployments tests: Restate and the world on free ports, and the
service started under a chosen code version and registered as a new deployment on demand.

Registering a deployment changes where every later call goes, so these tests never use the
session's stack. Each service is stopped with the stack, even on failure.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from operator_support import CliResult

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin, register_deployment
from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import HypercornApp, service_server
from replenisher.stack.runtime import BinaryRuntime
from support import REPO_ROOT, RESTATE_TEST_ENV, service_env, world_env


@dataclass
class DeploymentStack:
    restate: BinaryRuntime
    world: HypercornApp
    log_dir: Path
    services: list[HypercornApp] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {
            "REPLENISHER_INGRESS_URL": self.restate.ingress_url,
            "REPLENISHER_ADMIN_URL": self.restate.admin_url,
            "REPLENISHER_WORLD_URL": self.world.url,
        }

    @property
    def admin(self) -> Admin:
        return Admin(self.restate.admin_url)

    def deploy(self, version: str) -> str:
        """The service with REPLENISHER_CODE_VERSION=`version` on a new port, registered: its deployment id."""
        env = service_env(self.world.url, {"REPLENISHER_CODE_VERSION": version})
        app = HypercornApp(
            SERVICE_APP,
            free_port(),
            env,
            name=f"replenisher-{version}",
            log_path=self.log_dir / f"replenisher-{version}.log",
            server=service_server(),
        )
        self.services.append(app)
        app.start()
        app.wait_ready()
        return register_deployment(self.restate.admin_url, self.restate.deployment_uri(app.port)).id

    @asynccontextmanager
    async def scenario(self, name: str) -> AsyncIterator[Scenario]:
        timeout = httpx.Timeout(30.0, connect=5.0)
        async with (
            httpx.AsyncClient(base_url=self.restate.ingress_url, timeout=timeout) as ingress,
            httpx.AsyncClient(base_url=self.world.url, timeout=timeout) as world,
        ):
            scenario = Scenario(ingress, world, name)
            await scenario.setup()
            yield scenario

    async def cli(self, *args: str, stdin: str = "", timeout: float = 60) -> CliResult:  # noqa: ASYNC109
        """`replenisher ARGS...` against this stack, as a person runs it, `stdin` typed in."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "replenisher.cli",
            *args,
            env={**os.environ, **self.env, "COLUMNS": "150"},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout)
        except TimeoutError:
            process.kill()
            raise
        assert process.returncode is not None
        return CliResult(process.returncode, out.decode(), err.decode())


@contextmanager
def deployment_stack(base: Path) -> Iterator[DeploymentStack]:
    restate = BinaryRuntime(
        RestatePorts.free(),
        base / "data",
        RESTATE_TEST_ENV,
        log_path=base / "restate.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    world = HypercornApp(
        WORLD_APP, free_port(), world_env(restate.ingress_url), name="world", log_path=base / "world.log"
    )
    stack = DeploymentStack(restate, world, base)
    try:
        restate.start()
        restate.wait_ready()
        world.start()
        world.wait_ready()
        yield stack
    finally:
        for app in stack.services:
            app.stop()
        world.stop()
        restate.stop()
