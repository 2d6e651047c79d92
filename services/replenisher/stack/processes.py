"""Real OS processes of the local stack, one object per process.

Each process runs in its own session (process group), so that stopping it also stops
anything it spawned. A session outlives the process that started it: one that opted in
(`reaper.reap_with_this_process`, as the test suite does) has its groups killed if it dies
without stopping them. Output goes to a log file opened in append mode, so a restarted
process keeps its earlier history.

Stop signals differ on purpose: restate-server shuts down gracefully on SIGTERM, while
the Restate SDK replaces hypercorn's SIGTERM handler with its own, so hypercorn (and granian,
alike) is stopped with SIGINT (its Ctrl-C path).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, get_args

import httpx

from replenisher.stack import reaper, tls
from replenisher.stack.install import ensure_restate
from replenisher.stack.ports import LOOPBACK, RestatePorts, ensure_ports_free

DEFAULT_READY_TIMEOUT = 30.0
DEFAULT_STOP_TIMEOUT = 15.0
_POLL_INTERVAL = 0.05


class ProcessFailedError(RuntimeError):
    """A managed process exited or never became ready."""


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state field follows the parenthesised command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a live process (zombies count as dead)."""
    with contextlib.suppress(ChildProcessError):
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def pid_runs(pid: int, executable: str) -> bool:
    """Whether `pid` is alive and still the program we started (PIDs get reused)."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (macOS): trust the PID
    return bool(cmdline) and os.fsdecode(cmdline[0]) == executable


def _signal_group(pid: int, sig: int) -> None:
    # Every managed process leads its own group (start_new_session), so pgid == pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid`, from /proc: not zombies, threads included. A
    killed multi-threaded process (granian's worker) shows its main thread a zombie while its
    other threads still exit, and its sockets stay open until the last of them has."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat(Path(entry.path, "stat"))
        if len(fields) > 2 and int(fields[2]) == pgid and (fields[0] != "Z" or _threads_alive(Path(entry.path))):
            members.append(int(entry.name))
    return members


def _stat(path: Path) -> list[str]:
    """A /proc stat's fields after the parenthesised command name: state, ppid, pgrp, ..."""
    try:
        return path.read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def _threads_alive(proc: Path) -> bool:
    try:
        tasks = list(os.scandir(proc / "task"))
    except OSError:
        return False
    return any(_stat(Path(task.path, "stat"))[:1] not in ([], ["Z"]) for task in tasks)


def _wait_group_gone(pgid: int, timeout: float = 5.0) -> None:
    """Until no process of the group runs: a server's workers (granian's) die a moment after
    their supervisor, and hold its port until they do."""
    if not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(_POLL_INTERVAL / 5)


def _forget_if_gone(pgid: int) -> None:
    """The reaper need not kill this group any more, unless something of it still runs."""
    if not Path("/proc").is_dir() or not group_members(pgid):
        reaper.forget(pgid)


def wait_dead(pid: int, timeout: float) -> bool:
    """Whether process `pid` is gone within `timeout` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(_POLL_INTERVAL)
    return not pid_alive(pid)


def leftovers(pgid: int, executable: str) -> list[int]:
    """Live processes of group `pgid`, other than its leader, still running `executable`: what a
    leader killed on its own (`kill -9 <pid>` of granian's supervisor) leaves behind. Its worker
    keeps serving the port. Safe against PID reuse: Linux hands out no PID that is still in
    use as a process group's id, so the group's members descend from the process we started."""
    if not Path("/proc").is_dir():
        return []
    return [pid for pid in group_members(pgid) if pid != pgid and pid_runs(pid, executable)]


def group_runs(pgid: int, executable: str) -> bool:
    """Whether the process we started, or anything of its group it left behind, still runs."""
    return pid_runs(pgid, executable) or bool(leftovers(pgid, executable))


def terminate_pid(pid: int, stop_signal: int, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop a process group we may not be the parent of: polite signal, then SIGKILL. A group
    whose leader is already dead still has its leftovers stopped."""
    if not pid_alive(pid):
        if Path("/proc").is_dir() and group_members(pid):
            _signal_group(pid, stop_signal)
            _wait_group_gone(pid, timeout)
            _signal_group(pid, signal.SIGKILL)
            _wait_group_gone(pid)
        return
    _signal_group(pid, stop_signal)
    if not wait_dead(pid, timeout):
        _signal_group(pid, signal.SIGKILL)
        wait_dead(pid, 5.0)
    _signal_group(pid, signal.SIGKILL)
    _wait_group_gone(pid)


def http_answers(url: str, timeout: float = 1.0, verify: bool = True) -> bool:
    """Any HTTP response counts: the server is accepting and serving requests."""
    try:
        httpx.get(url, timeout=timeout, verify=tls.context(verify))
    except httpx.HTTPError:
        return False
    return True


def http_ok(url: str, timeout: float = 1.0) -> bool:
    try:
        return httpx.get(url, timeout=timeout, verify=tls.context()).status_code == 200
    except httpx.HTTPError:
        return False


class ManagedProcess:
    """One real process: start, wait until it serves, stop gracefully, kill, restart."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        log_path: Path,
        stop_signal: int = signal.SIGTERM,
        ports: Mapping[str, int] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env or {})
        self.cwd = cwd
        self.log_path = log_path
        self.stop_signal = stop_signal
        self.ports = dict(ports or {})
        self.port_host = LOOPBACK
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        """Exit status of the last run (negative: killed by that signal); None while running."""
        return self._popen.poll() if self._popen else None

    def is_ready(self) -> bool:
        """Whether the process serves requests; subclasses probe their own endpoint."""
        return self.running

    def start(self) -> None:
        if self.running:
            raise ProcessFailedError(f"{self.name} is already running (pid {self.pid})")
        ensure_ports_free(self.ports, self.port_host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
            log.write(f"\n=== {stamp} starting {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        reaper.watch(self._popen.pid)

    def wait_ready(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._popen is None:
                raise ProcessFailedError(f"{self.name} was never started")
            code = self._popen.poll()
            if code is not None:
                raise ProcessFailedError(
                    f"{self.name} exited with code {code} before it was ready; log {self.log_path}:\n{self.log_tail()}"
                )
            if self.is_ready():
                return
            if time.monotonic() >= deadline:
                raise ProcessFailedError(
                    f"{self.name} (pid {self.pid}) not ready after {timeout:.0f}s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(_POLL_INTERVAL)

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Graceful stop; SIGKILL after `timeout`. Safe to call when not running."""
        if self._popen is None:
            return
        if self._popen.poll() is None:
            _signal_group(self._popen.pid, self.stop_signal)
            try:
                self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self._popen.pid, signal.SIGKILL)
                self._popen.wait(5.0)
        # Children of the group that outlived their leader go too.
        _signal_group(self._popen.pid, signal.SIGKILL)
        _wait_group_gone(self._popen.pid)
        _forget_if_gone(self._popen.pid)

    def kill(self) -> None:
        """SIGKILL, no chance to clean up: what a crash looks like."""
        if self._popen is None:
            return
        _signal_group(self._popen.pid, signal.SIGKILL)
        self._popen.wait(10.0)
        _wait_group_gone(self._popen.pid)
        _forget_if_gone(self._popen.pid)

    def restart(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        """Stop if still running, then start again with the same ports, env and data."""
        self.stop()
        self.start()
        self.wait_ready(timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} pid={self.pid} running={self.running}>"


class RestateServer(ManagedProcess):
    """A single-node restate-server on loopback, all ports and the data dir given."""

    def __init__(
        self,
        ports: RestatePorts,
        data_dir: Path,
        extra_env: Mapping[str, str] | None = None,
        *,
        log_path: Path | None = None,
        config_file: Path | None = None,
        binary: Path | None = None,
        node_name: str = "replenisher",
    ) -> None:
        self.restate_ports = ports
        self.data_dir = data_dir.resolve()
        server = binary or ensure_restate().server
        argv = [str(server), "--no-logo"]
        if config_file is not None:
            argv += ["--config-file", str(config_file.resolve())]
        env = {
            "RESTATE_INGRESS__BIND_ADDRESS": f"{LOOPBACK}:{ports.ingress}",
            "RESTATE_ADMIN__BIND_ADDRESS": f"{LOOPBACK}:{ports.admin}",
            "RESTATE_BIND_ADDRESS": f"{LOOPBACK}:{ports.node}",
            "RESTATE_BASE_DIR": str(self.data_dir),
            # The data lives under base-dir/<node-name>; the default name is the hostname,
            # which would orphan the data when the machine is renamed.
            "RESTATE_NODE_NAME": node_name,
            "RESTATE_LOG_DISABLE_ANSI_CODES": "true",
            "RESTATE_DISABLE_TELEMETRY": "true",
            **(extra_env or {}),
        }
        super().__init__(
            "restate-server",
            argv,
            env=env,
            # Restate also listens on unix sockets under base-dir, addressed relative to its
            # working directory; running inside the data dir keeps those paths under the
            # 108-byte socket limit however deep the data dir is.
            cwd=self.data_dir,
            log_path=log_path or self.data_dir.parent / "restate-server.log",
            stop_signal=signal.SIGTERM,
            ports=ports.named(),
        )

    @property
    def ingress_url(self) -> str:
        return f"http://{LOOPBACK}:{self.restate_ports.ingress}"

    @property
    def admin_url(self) -> str:
        return f"http://{LOOPBACK}:{self.restate_ports.admin}"

    def is_ready(self) -> bool:
        return restate_ready(self.admin_url, self.ingress_url)


def restate_ready(admin_url: str, ingress_url: str) -> bool:
    """Whether a Restate node serves calls and queries, not merely answers /health."""
    # /health answers before the partitions have leaders; until they do, ingress calls
    # stall and SQL fails with "node lookup for partition N failed". A query that
    # touches every partition is the honest readiness signal.
    if not (http_ok(f"{admin_url}/health") and http_ok(f"{ingress_url}/restate/health")):
        return False
    try:
        response = httpx.post(
            f"{admin_url}/query",
            json={"query": "SELECT count(*) FROM sys_invocation"},
            headers={"accept": "application/json"},
            timeout=5.0,
            verify=tls.context(),
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200


# The ASGI servers the service can run under. granian (Rust HTTP/1.1 and HTTP/2) is the default:
# measured back to back (`make bench-servers`), it costs the service less CPU per replenishment
# than hypercorn, for more throughput (docs/benchmarks.md). hypercorn stays supported (the
# design, the deploy docs; CI runs the crash matrix and the suspension tests on it too).
Server = Literal["hypercorn", "granian"]
SERVERS: tuple[Server, ...] = get_args(Server)
SERVER_SETTING = "REPLENISHER_SERVER"
DEFAULT_SERVER: Server = "granian"


STREAMS_PER_CONNECTION = "RESTATE_WORKER__INVOKER__HTTP2_STREAMS_PER_CONNECTION_LIMIT"
"""restate-server's cap on the HTTP/2 streams it multiplexes over one connection to a deployment
(`[worker.invoker] http2-streams-per-connection-limit`, 128 by default, since 1.7.0)."""


def restate_env_for_workers(service_workers: int) -> dict[str, str]:
    """What restate-server needs so its calls reach all of the service's `service_workers` worker
    processes. It talks HTTP/2 to the service and, by default, multiplexes every call over one
    connection until 70% of 128 streams are busy; a connection belongs to the one worker that
    accepted it, so one worker took every call while the others idled (measured: docs/benchmarks.md).
    With one stream a connection, each call in flight has a connection of its own, opened when the
    others are busy and spread over the workers by the kernel as they accept. One worker: Restate's
    defaults, nothing to spread."""
    return {STREAMS_PER_CONNECTION: "1"} if service_workers > 1 else {}


def service_server(env: Mapping[str, str] | None = None) -> Server:
    """The server the replenisher service runs under: `REPLENISHER_SERVER`, else the default."""
    value = (os.environ if env is None else env).get(SERVER_SETTING, "").strip().lower() or DEFAULT_SERVER
    for server in SERVERS:
        if value == server:
            return server
    raise ValueError(f"{SERVER_SETTING}={value!r}: choose one of {', '.join(SERVERS)}")


GRANIAN_BACKLOG = 1024
"""granian's listen backlog (its default), and the requests each of its workers takes at once."""


def server_argv(
    server: Server, app: str, host: str, port: int, tls: TlsFiles | None = None, workers: int = 1
) -> list[str]:
    """The command that serves `app` on `host:port` under `server` with `workers` worker processes.
    Each worker imports the app (a factory: calls it), so each bootstraps its own parts; the workers
    accept connections on one listening socket, which the kernel hands to whichever is waiting."""
    if workers < 1:
        raise ValueError(f"{workers} service workers: at least one")
    if server == "hypercorn":
        served = ["--certfile", str(tls.cert), "--keyfile", str(tls.key)] if tls else []
        # `-w 0`: the app in hypercorn's own process (no supervisor), as one worker always ran;
        # more: that many spawned worker processes under it, in its process group.
        processes = "0" if workers == 1 else str(workers)
        return [sys.executable, "-m", "hypercorn", app, "--bind", f"{host}:{port}", "-w", processes, *served]
    if tls is not None:
        raise ValueError("TLS is served by hypercorn here: run the app under hypercorn, or behind a TLS proxy")
    if server == "granian":
        # A factory (`module:create_app()`, as hypercorn takes it) is `--factory module:create_app` to granian.
        target = ["--factory", app.removesuffix("()")] if app.endswith("()") else [app]
        # `--http auto` speaks HTTP/2 to Restate and HTTP/1.1 to the health probe on one port;
        # `asginl`: ASGI without the lifespan protocol, which the Restate app does not speak.
        # Its workers (one by default) are children of its supervisor, in the same process
        # group, which is how `stop` and `kill` reach them all. uvloop and a single-threaded Rust
        # runtime: with asyncio's loop, every request granian's threads hand over woke the loop
        # through its self-pipe, 37% of the service's CPU for a wake of a suspended run; measured,
        # a sixth less service CPU per replenishment and a quarter less per wake.
        return [
            sys.executable,
            "-m",
            "granian",
            "--interface",
            "asginl",
            "--host",
            host,
            "--port",
            str(port),
            "--http",
            "auto",
            "--workers",
            str(workers),
            # Requests each worker takes at once: granian's default divides its backlog (1024) among
            # the workers, 512 each with two, under the 1,000 calls Restate keeps in flight
            # (`concurrent-invocations-limit`), each on a connection of its own with several workers
            # (`restate_env_for_workers`). Measured under a backlog of ticks: each of two workers held
            # exactly 512 of Restate's connections while Restate logged refused and reset ones. The
            # whole backlog each, as one worker always had.
            "--backpressure",
            str(GRANIAN_BACKLOG),
            "--loop",
            "uvloop",
            "--runtime-mode",
            "st",
            "--no-ws",
            *target,
        ]
    raise ValueError(f"unknown ASGI server {server!r}: choose one of {', '.join(SERVERS)}")


@dataclass(frozen=True)
class TlsFiles:
    """A PEM certificate (chain) and its private key: the app serves HTTPS with them."""

    cert: Path
    key: Path


class AsgiApp(ManagedProcess):
    """An ASGI app (`module:attr`, or a factory: `module:create_app()`) under hypercorn (one worker: in
    its own process, `-w 0`) or granian, with `workers` worker processes (`server_argv`).

    Both are stopped with SIGINT sent to the whole process group (their Ctrl-C path), so granian's
    worker goes with its supervisor.
    """

    def __init__(
        self,
        app: str,
        port: int,
        env: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        log_path: Path | None = None,
        bind_host: str = LOOPBACK,
        health_path: str = "/health",
        ready: Callable[[AsgiApp], bool] | None = None,
        server: Server = "hypercorn",
        tls: TlsFiles | None = None,
        workers: int = 1,
        cwd: Path | None = None,
    ) -> None:
        self.app = app
        self.workers = workers
        self.port = port
        self.health_path = health_path
        self.server = server
        self.tls = tls
        self._ready = ready
        argv = server_argv(server, app, bind_host, port, tls, workers)
        label = name or app.split(":", 1)[0]
        super().__init__(
            label,
            argv,
            env={"PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=cwd,
            log_path=log_path or Path(".stack") / "logs" / f"{label}.log",
            stop_signal=signal.SIGINT,
            ports={label: port},
        )
        self.bind_host = bind_host
        self.port_host = bind_host

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}"

    def is_ready(self) -> bool:
        if self._ready is not None:
            return self._ready(self)
        # Whether it serves, not whom to trust: the certificate is checked by the app's clients.
        return http_answers(f"{self.url}{self.health_path}", verify=self.tls is None)


# The world, the inbound endpoint and the test helpers always run under hypercorn.
HypercornApp = AsgiApp
