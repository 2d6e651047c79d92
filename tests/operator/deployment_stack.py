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
from typing import Any

import httpx
from operator_support import CliResult

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin, register_deployment
from replenisher.stack.install import ensure_restate
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import BinaryRuntime
from support import WORLD_LIMITS, eventually, own_restate_and_world, versioned_service

# A business day of 1 s, not the suites' 0.25: these runs wait through operator steps (CLI runs,
# deploys, upgrade checks: 40 to 100 s on a loaded machine), and a quote (at most 365 days in the
# world) must outlive them. On the suites' clock it lasted 91 s at most, and CI saw one expire: the
# run then, rightly, refused to order on it and asked again for an approval no test gave.
DAY_SECONDS = 1.0


@dataclass
class DeploymentStack:
    restate: BinaryRuntime
    world: HypercornApp
    log_dir: Path
    services: dict[str, HypercornApp] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {
            "COLUMNS": "150",
            "REPLENISHER_INGRESS_URL": self.restate.ingress_url,
            "REPLENISHER_ADMIN_URL": self.restate.admin_url,
            "REPLENISHER_WORLD_URL": self.world.url,
        }

    @property
    def admin(self) -> Admin:
        return Admin(self.restate.admin_url)

    def deploy(
        self, version: str, name: str | None = None, env: dict[str, str] | None = None, app: str | None = None
    ) -> str:
        """The service with REPLENISHER_CODE_VERSION=`version` (and `env`) on a new port, registered: its
        deployment id. `name` (default: the version) names its process in `services` and its log; `app`
        serves a changed candidate of the suite's (`tests.upgrade.planted:renamed_step_app()`) instead."""
        name = name or version
        log = self.log_dir / f"replenisher-{name}.log"
        service = versioned_service(self.world.url, version, log, name, env, app, day_seconds=DAY_SECONDS)
        self.services[name] = service
        service.start()
        service.wait_ready()
        return register_deployment(self.restate.admin_url, self.restate.deployment_uri(service.port)).id

    async def run_invocation(self, run_id: str) -> dict[str, Any]:
        """Restate's record of a run's invocation: its id, status, pinned deployment and last failure."""
        [row] = await self.admin.asql(
            "SELECT id, status, pinned_deployment_id, last_failure, last_failure_error_code FROM sys_invocation "
            f"WHERE target = 'Replenish/{run_id}/run'"
        )
        return row

    async def suspended(self, run_id: str) -> None:
        """Returns once the run's invocation is suspended (resting in a wait), or fails after 30 s."""

        async def is_suspended() -> bool:
            return (await self.run_invocation(run_id))["status"] == "suspended"

        await eventually(is_suspended, timeout=30, what=f"{run_id} suspended in its wait")

    @asynccontextmanager
    async def scenario(self, name: str) -> AsyncIterator[Scenario]:
        timeout = httpx.Timeout(30.0, connect=5.0)
        async with (
            httpx.AsyncClient(base_url=self.restate.ingress_url, timeout=timeout) as ingress,
            httpx.AsyncClient(base_url=self.world.url, timeout=timeout, limits=WORLD_LIMITS) as world,
        ):
            scenario = Scenario(ingress, world, name)
            # The world's longest quote, 6 minutes on this stack's clock (DAY_SECONDS).
            await scenario.setup(quote_valid_days=365)
            yield scenario

    async def cli(self, *args: str, stdin: str = "", timeout: float = 60) -> CliResult:  # noqa: ASYNC109
        """`replenisher ARGS...` against this stack, as a person runs it, `stdin` typed in."""
        return await self._run([sys.executable, "-m", "replenisher.cli", *args], stdin, timeout)

    async def restate_cli(self, *args: str, timeout: float = 60) -> CliResult:  # noqa: ASYNC109
        """`restate ARGS...` (Restate's own CLI) against this stack's admin API."""
        return await self._run([str(ensure_restate().cli), *args], "", timeout)

    async def _run(self, argv: list[str], stdin: str, timeout: float) -> CliResult:  # noqa: ASYNC109
        process = await asyncio.create_subprocess_exec(
            *argv,
            env={**os.environ, **self.env, "RESTATE_ADMIN_URL": self.restate.admin_url, "NO_COLOR": "1"},
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
    with own_restate_and_world(base, DAY_SECONDS) as (restate, world):
        stack = DeploymentStack(restate, world, base)
        try:
            yield stack
        finally:
            for app in stack.services.values():
                app.stop()
