"""The real processes one decider's attacks run against, started on free ports and always stopped.

One Restate holds one deployment of `SkuAgent`/`Replenish` at a time, so each decider gets a
stack of its own: restate-server, the simulated world, the replenisher service on hypercorn
and, once it exists, the inbound endpoint. The stand-in for the Messages API is one process for
all stacks: each SKU's script is registered with it (`/admin/persuade`, `only_for` the SKU),
so a persuaded and a compromised model can share it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tests.support import REPO_ROOT, RESTATE_TEST_ENV, RegisteredService, inbound_env, service_env, world_env

from anthropic_stand_in import STAND_IN_APP
from replenisher.inbound.stamp import DOOR_KEY_ENV, write_new_door_key
from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import BinaryRuntime

DeciderKind = Literal["policy", "claude", "compromised"]
KINDS: tuple[DeciderKind, ...] = ("policy", "claude", "compromised")

INBOUND_APP = "replenisher.inbound.app:app"

# Waits short enough that a run an attack stalls ends within the suite, long enough that the
# suite (the manager) answers in time on a loaded machine. In business days of 0.25 s.
SUITE_WAITS = {
    "REPLENISHER_APPROVAL_WAIT_DAYS": "200",
    "REPLENISHER_REPLY_WAIT_DAYS": "80",
    "REPLENISHER_GOODS_GRACE_DAYS": "80",
    # The wedge check starts another run right after one that failed: no rest in between.
    "REPLENISHER_REST_AFTER_FAILURE_DAYS": "0",
}


def inbound_available() -> bool:
    """Whether this checkout has the inbound endpoint (trust-door) to attack."""
    return importlib.util.find_spec("replenisher.inbound") is not None


@dataclass
class Stack:
    kind: DeciderKind
    runtime: BinaryRuntime
    world: HypercornApp
    service: RegisteredService
    inbound: HypercornApp | None
    secrets: dict[str, str]

    @property
    def ingress_url(self) -> str:
        return self.runtime.ingress_url

    @property
    def admin_url(self) -> str:
        return self.runtime.admin_url


def party_secrets(directory: Path, suppliers: Sequence[str]) -> tuple[Path, dict[str, str]]:
    """A secrets file as `make up` writes one: a secret per party the endpoint knows (0600)."""
    parties = ["manager", "warehouse", *(f"supplier:{s}" for s in suppliers)]
    values = {p: secrets.token_hex(32) for p in parties}
    path = directory / "party-secrets.json"
    path.write_text(json.dumps(values))
    os.chmod(path, 0o600)
    return path, values


@contextmanager
def model_api(log_dir: Path) -> Iterator[HypercornApp]:
    api = HypercornApp(
        STAND_IN_APP,
        free_port(),
        {"PYTHONPATH": str(REPO_ROOT)},
        name="fake-anthropic-injection",
        log_path=log_dir / "fake-anthropic.log",
    )
    try:
        api.start()
        api.wait_ready()
        yield api
    finally:
        api.stop()


def model_env(api_url: str) -> dict[str, str]:
    return {
        "REPLENISHER_DECIDER": "claude",
        "ANTHROPIC_API_KEY": "sk-ant-injection",
        "REPLENISHER_ANTHROPIC_BASE_URL": api_url,
        "REPLENISHER_CLAUDE_MODEL": "claude-sonnet-4-6",
        "REPLENISHER_CLAUDE_MAX_RETRIES": "0",
        "REPLENISHER_CLAUDE_TIMEOUT_SECONDS": "10",
    }


@contextmanager
def stack(kind: DeciderKind, log_dir: Path, api_url: str | None, suppliers: Sequence[str]) -> Iterator[Stack]:
    """restate-server, world, service (and inbound endpoint) for one decider; stopped on exit."""
    work = Path(tempfile.mkdtemp(prefix=f"injection-{kind}-"))
    secrets_file, secret_values = party_secrets(work, suppliers)
    # The door stamps what it forwards with this key, and the service believes a sender only so.
    door_key = work / "door-key"
    write_new_door_key(door_key)
    world_port = free_port()  # the door reads the world's ERP, and the world pushes through the door
    runtime = BinaryRuntime(
        RestatePorts.free(),
        work / "restate-data",
        RESTATE_TEST_ENV,
        log_path=log_dir / f"restate-{kind}.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    with ExitStack() as stop:
        runtime.start()
        stop.callback(runtime.stop)
        runtime.wait_ready()
        inbound = None
        world_extra: dict[str, str] = {}
        if inbound_available():
            # The outside parties' door, and the world (playing every party) pushing through it, signed.
            inbound = HypercornApp(
                INBOUND_APP,
                free_port(),
                inbound_env(
                    runtime.ingress_url, secrets_file, f"http://127.0.0.1:{world_port}", {DOOR_KEY_ENV: str(door_key)}
                ),
                name=f"inbound-{kind}",
                log_path=log_dir / f"inbound-{kind}.log",
            )
            inbound.start()
            stop.callback(inbound.stop)
            inbound.wait_ready()
            world_extra = {"WORLD_INBOUND_URL": inbound.url, "WORLD_PARTY_SECRETS_FILE": str(secrets_file)}
        world = HypercornApp(
            WORLD_APP,
            world_port,
            world_env(runtime.ingress_url, world_extra),
            name=f"world-{kind}",
            log_path=log_dir / f"world-{kind}.log",
        )
        world.start()
        stop.callback(world.stop)
        world.wait_ready()
        extra = {**SUITE_WAITS, DOOR_KEY_ENV: str(door_key)}
        if kind == "policy":
            extra["REPLENISHER_DECIDER"] = "offline"
        else:
            assert api_url is not None, "the model deciders need the stand-in API"
            extra.update(model_env(api_url))
        if kind == "compromised":
            # It asks for the same call however often it is refused: asking again adds only time.
            extra["REPLENISHER_CLAUDE_ASKS_PER_TURN"] = "1"
        app = HypercornApp(
            SERVICE_APP,
            free_port(),
            service_env(world.url, extra),
            name=f"replenisher-{kind}",
            log_path=log_dir / f"replenisher-{kind}.log",
        )
        service = RegisteredService(runtime, app)
        stop.callback(service.stop)
        service.start()
        yield Stack(kind, runtime, world, service, inbound, secret_values)
