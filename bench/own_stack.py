"""A stack of its own for a bench script: restate-server, the world and the service on free ports."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from replenisher.config import service_workers as configured_workers
from replenisher.stack.admin import register_deployment
from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import (
    AsgiApp,
    HypercornApp,
    ManagedProcess,
    restate_env_for_workers,
    service_server,
)
from replenisher.stack.reaper import reap_with_this_process
from replenisher.stack.runtime import BinaryRuntime

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class OwnStack:
    restate: BinaryRuntime
    world: HypercornApp
    service: AsgiApp

    def stop(self) -> None:
        for process in (self.service, self.world, self.restate):
            process.stop()


def start_own_stack(
    base: Path,
    day_seconds: float,
    service_env: Mapping[str, str],
    restate_env: Mapping[str, str] | None = None,
    world_env: Mapping[str, str] | None = None,
    service_workers: int | None = None,
) -> OwnStack:
    """Everything up and the service registered; whatever started is stopped again if a part fails,
    and killed if the bench script dies before it stops them."""
    reap_with_this_process()
    started: list[ManagedProcess] = []

    def up(process: ManagedProcess) -> None:
        process.start()
        started.append(process)
        process.wait_ready()

    day = f"{day_seconds:g}"
    # One origin for the compressed clock of the world and the service, as `make up` and the
    # test fixtures give them: without it each process (and each restart of it) dates from its
    # own start, and the two disagree on what day it is.
    origin = repr(time.time())
    clock = {"CLOCK_WALL_ORIGIN": origin, "CLOCK_CALENDAR_ORIGIN": origin}
    workers = service_workers or configured_workers()  # given, else REPLENISHER_SERVICE_WORKERS, else one
    restate = BinaryRuntime(
        RestatePorts.free(),
        base / "restate-data",
        {**restate_env_for_workers(workers), **(restate_env or {})},
        log_path=base / "restate.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    try:
        up(restate)
        w_env = {"WORLD_INGRESS_URL": restate.ingress_url, "WORLD_DAY_SECONDS": day, **(world_env or {})}
        w_env |= {f"WORLD_{k}": v for k, v in clock.items()}
        world = HypercornApp(WORLD_APP, free_port(), w_env, name="world", log_path=base / "world.log")
        up(world)
        env = {"REPLENISHER_WORLD_URL": world.url, "REPLENISHER_DAY_SECONDS": day, **service_env}
        env |= {f"REPLENISHER_{k}": v for k, v in clock.items()}
        service = AsgiApp(
            SERVICE_APP,
            free_port(),
            env,
            name="replenisher",
            log_path=base / "service.log",
            server=service_server(),
            workers=workers,
        )
        up(service)
        register_deployment(restate.admin_url, restate.deployment_uri(service.port))
    except BaseException:
        for process in reversed(started):
            process.stop()
        raise
    return OwnStack(restate, world, service)
