"""The whole local stack: restate-server, the simulated world and the replenisher service.

`up()` starts the three processes detached and records them in `<state-dir>/stack.json`,
so `down()` from another process (another `make` run) can stop them. Restate's data dir
survives `down()`, so the next `up()` resumes every in-flight replenishment where it was.
`restart(name)` replaces one recorded process (the service, typically) with the settings it
was started with, leaving the others, and the world's in-memory state, alone.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from replenisher.config import MAX_SERVICE_WORKERS, service_workers
from replenisher.inbound.signing import new_secrets, write_secrets
from replenisher.inbound.stamp import write_new_door_key
from replenisher.stack.admin import register_deployment
from replenisher.stack.ports import LOOPBACK, RestatePorts, ensure_ports_free
from replenisher.stack.processes import (
    AsgiApp,
    HypercornApp,
    ManagedProcess,
    RestateServer,
    Server,
    TlsFiles,
    group_runs,
    leftovers,
    pid_runs,
    restate_env_for_workers,
    service_server,
    terminate_pid,
)

STATE_FILE = "stack.json"
SERVICE_APP = "replenisher.durable.app:create_app()"
"""The service is made by its factory (`module:factory()`), which bootstraps it from the environment."""
WORLD_APP = "simulated_world.app:app"
INBOUND_APP = "replenisher.inbound.app:app"
SECRETS_FILE = "party-secrets.json"
DOOR_KEY_FILE = "door-key"
ONE_DAY_SECONDS = 86_400.0
CALENDAR_FILE_SETTING = "REPLENISHER_CALENDAR_FILE"
SERVICE_NAME = "replenisher"
# What an operator may call a process on the command line, beside its recorded name.
PROCESS_ALIASES = {"service": SERVICE_NAME, "restate": "restate-server"}


class StackError(RuntimeError):
    """The stack cannot be brought up or down as asked."""


def format_seconds(seconds: float) -> str:
    """Env-friendly number: `86400`, `0.25` (not `86400.0`)."""
    return f"{seconds:g}"


def clock_env(cfg: StackConfig) -> dict[str, str]:
    """One origin for the compressed clock of both processes (a real day needs none)."""
    if cfg.clock_wall_origin is None:
        return {}
    calendar = cfg.clock_wall_origin if cfg.calendar_start is None else cfg.calendar_start
    return {"CLOCK_WALL_ORIGIN": repr(cfg.clock_wall_origin), "CLOCK_CALENDAR_ORIGIN": repr(calendar)}


def site_calendar_file(cfg: StackConfig) -> str | None:
    """The service's site calendar (`REPLENISHER_CALENDAR_FILE`, given to it or inherited), if any."""
    return cfg.service_env.get(CALENDAR_FILE_SETTING) or os.environ.get(CALENDAR_FILE_SETTING) or None


class StackConfig(BaseModel):
    """Where the stack listens, keeps its state, and which apps it serves."""

    model_config = ConfigDict(frozen=True)

    state_dir: Path = Path(".stack")
    restate: RestatePorts = RestatePorts()
    service_port: int = 9080
    world_port: int = 9100
    inbound_port: int = 9090
    # The inbound endpoint serves TLS with these (PEM) when both are given; the world, which
    # plays every outside party, trusts `inbound_tls_cert` (a self-signed door's own certificate).
    inbound_tls_cert: Path | None = None
    inbound_tls_key: Path | None = None
    day_seconds: float = ONE_DAY_SECONDS
    # Calendar instant (epoch seconds) at which a compressed clock starts; None: the moment
    # of `up()`. The world and the service get the same origin, so they agree on the date.
    calendar_start: float | None = None
    # Fixed by `up()` and recorded, so a restarted process keeps the date the others have.
    clock_wall_origin: float | None = None
    catalogue: str | None = None
    service_app: str = SERVICE_APP
    world_app: str = WORLD_APP
    inbound_app: str = INBOUND_APP
    # The service's ASGI server, by default from REPLENISHER_SERVER (the world and the inbound
    # endpoint stay on hypercorn). Recorded, so a restart runs the same one.
    server: Server = Field(default_factory=service_server)
    # Its worker processes, by default from REPLENISHER_SERVICE_WORKERS (1). Recorded, like the server.
    service_workers: int = Field(default_factory=service_workers, ge=1, le=MAX_SERVICE_WORKERS)
    config_file: Path | None = None
    # Passed through to the respective process on top of the inherited environment.
    service_env: dict[str, str] = Field(default_factory=dict)
    world_env: dict[str, str] = Field(default_factory=dict)
    restate_env: dict[str, str] = Field(default_factory=dict)
    ready_timeout: float = 60.0

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "restate-data"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def secrets_file(self) -> Path:
        """The outside parties' secrets: made by the first `up`, kept by `down` (they are handed out)."""
        return self.state_dir / SECRETS_FILE

    @property
    def door_key_file(self) -> Path:
        """The key the inbound endpoint stamps its forwards with, and the service checks them by."""
        return self.state_dir / DOOR_KEY_FILE

    @property
    def ingress_url(self) -> str:
        return f"http://{LOOPBACK}:{self.restate.ingress}"

    @property
    def admin_url(self) -> str:
        return f"http://{LOOPBACK}:{self.restate.admin}"

    @property
    def world_url(self) -> str:
        return f"http://{LOOPBACK}:{self.world_port}"

    @property
    def service_url(self) -> str:
        return f"http://{LOOPBACK}:{self.service_port}"

    @property
    def inbound_tls(self) -> TlsFiles | None:
        if self.inbound_tls_cert is None or self.inbound_tls_key is None:
            return None
        return TlsFiles(cert=self.inbound_tls_cert, key=self.inbound_tls_key)

    @property
    def inbound_url(self) -> str:
        return f"{'https' if self.inbound_tls else 'http'}://{LOOPBACK}:{self.inbound_port}"

    def all_ports(self) -> dict[str, int]:
        return {
            **self.restate.named(),
            "replenisher service": self.service_port,
            "world": self.world_port,
            "inbound endpoint": self.inbound_port,
        }


class ProcessRecord(BaseModel):
    name: str
    pid: int
    executable: str
    stop_signal: int
    log: Path
    url: str


SETTINGS_PREFIX = "REPLENISHER_"
SECRET_SETTINGS = ("ANTHROPIC_API_KEY",)


class ServiceSettings(BaseModel):
    """The service's settings from the environment `up()` ran in, so `restart()` starts it the
    same way from any shell. Secrets are recorded by name only, never written to disk."""

    values: dict[str, str] = Field(default_factory=dict)
    secrets: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, env: Mapping[str, str], wired: Iterable[str]) -> ServiceSettings:
        skip = set(wired)  # the stack's own wiring (world URL, day length) comes from its config
        values = {k: v for k, v in env.items() if k.startswith(SETTINGS_PREFIX) and k not in skip}
        return cls(values=values, secrets=[k for k in SECRET_SETTINGS if env.get(k)])

    def restored(self, env: Mapping[str, str]) -> dict[str, str]:
        """What to add to `env` for the same settings; a variable set in `env` itself wins."""
        missing = [k for k in self.secrets if not env.get(k)]
        if missing:
            raise StackError(
                f"the service was started with {', '.join(missing)} set, which is not recorded on disk: "
                "export it in this shell to restart it the same way"
            )
        return {k: v for k, v in self.values.items() if k not in env}


class StackState(BaseModel):
    """What `up()` leaves behind for `down()` and `status()` in other processes."""

    config: StackConfig
    processes: list[ProcessRecord] = Field(default_factory=list)
    service_settings: ServiceSettings = Field(default_factory=ServiceSettings)


class ProcessStatus(BaseModel):
    name: str
    pid: int
    running: bool
    url: str
    log: Path
    # Processes of its group still running although it is dead (granian's worker after a
    # `kill -9` of its supervisor): they may still hold its port; `down`/`restart` stop them.
    leftovers: list[int] = []


class Stack:
    def __init__(self, config: StackConfig | None = None) -> None:
        cfg = config or StackConfig()
        # Absolute paths: processes run in other working directories and `down()` may run
        # from elsewhere.
        self.config = cfg.model_copy(
            update={
                "state_dir": cfg.state_dir.resolve(),
                "config_file": cfg.config_file.resolve() if cfg.config_file else None,
            }
        )

    @property
    def state_file(self) -> Path:
        return self.config.state_dir / STATE_FILE

    def _read_state(self) -> StackState | None:
        try:
            return StackState.model_validate_json(self.state_file.read_text())
        except FileNotFoundError:
            return None

    def _write_state(self, state: StackState) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(state.model_dump_json(indent=2))
        os.replace(tmp, self.state_file)

    def _processes(self, cfg: StackConfig | None = None) -> list[tuple[ManagedProcess, str]]:
        cfg = cfg or self.config
        day = format_seconds(cfg.day_seconds)
        restate = RestateServer(
            cfg.restate,
            cfg.data_dir,
            # Its calls spread over the service's workers when there are several; given settings win.
            {**restate_env_for_workers(cfg.service_workers), **cfg.restate_env},
            log_path=cfg.log_dir / "restate-server.log",
            config_file=cfg.config_file,
        )
        secrets = str(cfg.secrets_file)
        inbound_env = {
            "REPLENISHER_INGRESS_URL": cfg.ingress_url,
            "REPLENISHER_PARTY_SECRETS_FILE": secrets,
            "REPLENISHER_DOOR_KEY_FILE": str(cfg.door_key_file),
            # The ERP's item master says which SKUs a supplier may write to.
            "REPLENISHER_WORLD_URL": cfg.world_url,
        }
        inbound = HypercornApp(
            cfg.inbound_app,
            cfg.inbound_port,
            inbound_env,
            name="inbound",
            log_path=cfg.log_dir / "inbound.log",
            tls=cfg.inbound_tls,
        )
        world_env = {
            "WORLD_INGRESS_URL": cfg.ingress_url,
            "WORLD_DAY_SECONDS": day,
            # The world plays every outside party: it signs as each and goes through their door.
            "WORLD_INBOUND_URL": cfg.inbound_url,
            "WORLD_PARTY_SECRETS_FILE": secrets,
            **({"WORLD_INBOUND_CA_FILE": str(cfg.inbound_tls_cert)} if cfg.inbound_tls_cert else {}),
            # The suppliers count business days on the site calendar the service counts its waits on.
            **({"WORLD_CALENDAR_FILE": calendar_file} if (calendar_file := site_calendar_file(cfg)) else {}),
            **cfg.world_env,
        }
        clock = clock_env(cfg)
        world_env = {**{f"WORLD_{k}": v for k, v in clock.items()}, **world_env}
        if cfg.catalogue is not None:
            world_env["WORLD_CATALOGUE"] = cfg.catalogue
        world = HypercornApp(cfg.world_app, cfg.world_port, world_env, name="world", log_path=cfg.log_dir / "world.log")
        service_env = {**_service_wiring(cfg), **cfg.service_env}
        service = AsgiApp(
            cfg.service_app,
            cfg.service_port,
            service_env,
            name=SERVICE_NAME,
            log_path=cfg.log_dir / f"{SERVICE_NAME}.log",
            server=cfg.server,
            workers=cfg.service_workers,
        )
        return [
            (restate, cfg.admin_url),
            (inbound, cfg.inbound_url),
            (world, cfg.world_url),
            (service, cfg.service_url),
        ]

    def status(self) -> list[ProcessStatus]:
        state = self._read_state()
        if state is None:
            return []
        return [_process_status(p) for p in state.processes]

    def is_up(self) -> bool:
        return any(p.running for p in self.status())

    def up(self) -> StackState:
        """Start everything, register the service, and record the PIDs. All or nothing."""
        running = [p for p in self.status() if p.running]
        if running:
            listing = ", ".join(f"{p.name} (pid {p.pid})" for p in running)
            raise StackError(f"the stack in {self.config.state_dir} is already running: {listing}")
        ensure_ports_free(self.config.all_ports())
        if not self.config.secrets_file.exists():
            write_secrets(self.config.secrets_file, new_secrets())
        if not self.config.door_key_file.exists():
            write_new_door_key(self.config.door_key_file)
        compressed = self.config.day_seconds != ONE_DAY_SECONDS or self.config.calendar_start is not None
        if compressed and self.config.clock_wall_origin is None:
            self.config = self.config.model_copy(update={"clock_wall_origin": time.time()})
        wired = [*_service_wiring(self.config), *self.config.service_env]
        state = StackState(config=self.config, service_settings=ServiceSettings.of(os.environ, wired))
        started: list[ManagedProcess] = []
        try:
            for process, url in self._processes():
                process.start()
                started.append(process)
                state.processes.append(_record(process, url))
                # Recorded before waiting, so an interrupted `up()` can still be brought down.
                self._write_state(state)
                process.wait_ready(self.config.ready_timeout)
            register_deployment(self.config.admin_url, self.config.service_url, force=True)
        except BaseException:
            for process in reversed(started):
                process.stop()
            self.state_file.unlink(missing_ok=True)
            raise
        return state

    def restart(self, name: str) -> ProcessRecord:
        """Stop one recorded process and start it again as `up()` did; record the new PID.

        The settings are the recorded ones (ports, day length, catalogue, extra env), not this
        object's: a restart from another shell must not move the process. The service also gets
        the REPLENISHER_* settings `up()` ran with, unless this shell sets them itself; a secret
        it ran with (ANTHROPIC_API_KEY) must be in this shell, since it is not recorded.
        Restarting the service re-registers it, as `up()` does.
        """
        state = self._read_state()
        if state is None:
            raise StackError(f"the stack in {self.config.state_dir} is not up (no {self.state_file}): run `up` first")
        wanted = PROCESS_ALIASES.get(name, name)
        names = [p.name for p in state.processes]
        if wanted not in names:
            raise StackError(f"no process {name!r} in the stack: one of {', '.join(names)}")
        index = names.index(wanted)
        old = state.processes[index]
        cfg = state.config
        if wanted == SERVICE_NAME:
            # Checked before anything is stopped: a refused restart leaves the service as it was.
            restored = state.service_settings.restored(os.environ)
            cfg = cfg.model_copy(update={"service_env": {**restored, **cfg.service_env}})
        if group_runs(old.pid, old.executable):
            terminate_pid(old.pid, signal.Signals(old.stop_signal))
            if group_runs(old.pid, old.executable):
                raise StackError(f"could not stop {wanted} (pid {old.pid})")
        process, url = next((p, u) for p, u in self._processes(cfg) if p.name == wanted)
        process.start()
        state.processes[index] = _record(process, url)
        # Recorded before waiting, so `down()` stops the new process even if it never gets ready.
        self._write_state(state)
        try:
            process.wait_ready(state.config.ready_timeout)
            if wanted == SERVICE_NAME:
                register_deployment(state.config.admin_url, state.config.service_url, force=True)
        except BaseException:
            # Leave no half-started process behind; `status` then shows it DEAD.
            process.stop()
            raise
        return state.processes[index]

    def down(self) -> list[ProcessStatus]:
        """Stop every recorded process (newest first), leaving Restate's data in place."""
        before = self.status()
        state = self._read_state()
        if state is None:
            return []
        for record in reversed(state.processes):
            if group_runs(record.pid, record.executable):
                terminate_pid(record.pid, signal.Signals(record.stop_signal))
        still = [p.name for p in self.status() if p.running or p.leftovers]
        if still:
            raise StackError(f"could not stop: {', '.join(still)}")
        self.state_file.unlink(missing_ok=True)
        return before


def _service_wiring(cfg: StackConfig) -> dict[str, str]:
    """The settings the stack itself gives the service: where the world is, how long a day is."""
    clock = {f"REPLENISHER_{k}": v for k, v in clock_env(cfg).items()}
    return {
        "REPLENISHER_WORLD_URL": cfg.world_url,
        "REPLENISHER_INGRESS_URL": cfg.ingress_url,
        "REPLENISHER_DAY_SECONDS": format_seconds(cfg.day_seconds),
        "REPLENISHER_DOOR_KEY_FILE": str(cfg.door_key_file),
        **clock,
    }


def _process_status(p: ProcessRecord) -> ProcessStatus:
    running = pid_runs(p.pid, p.executable)
    left = [] if running else leftovers(p.pid, p.executable)
    return ProcessStatus(name=p.name, pid=p.pid, running=running, url=p.url, log=p.log, leftovers=left)


def _record(process: ManagedProcess, url: str) -> ProcessRecord:
    assert process.pid is not None, f"{process.name} was not started"
    return ProcessRecord(
        name=process.name,
        pid=process.pid,
        executable=process.argv[0],
        stop_signal=int(process.stop_signal),
        log=process.log_path,
        url=url,
    )
