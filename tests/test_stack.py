"""The local stack's own tests: real restate-server and hypercorn processes, crashed and restarted.

They use a throwaway app (`stack_fixture_app`) rather than the replenisher, so they test
the plumbing alone: install, ports, readiness, registration, crash and restart, up/down.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from replenisher.stack import install, ports
from replenisher.stack.admin import Admin, find_deployment, list_deployments, register_deployment, sql
from replenisher.stack.install import RESTATE_VERSION, RestateInstallError, ensure_restate
from replenisher.stack.local import SERVICE_APP, WORLD_APP, Stack, StackConfig, StackError
from replenisher.stack.ports import (
    LOOPBACK,
    PortInUseError,
    RestatePorts,
    ephemeral_range,
    free_port,
    is_listening,
    port_is_free,
)
from replenisher.stack.processes import (
    DEFAULT_SERVER,
    SERVER_SETTING,
    AsgiApp,
    HypercornApp,
    ProcessFailedError,
    RestateServer,
    group_members,
    pid_alive,
    service_server,
    wait_dead,
)
from replenisher.stack.runtime import RestateRuntime
from support import REPO_ROOT, TESTS_DIR, RegisteredService, committed_corpus_ports, eventually, serving

FIXTURE_ENV = {"PYTHONPATH": str(TESTS_DIR)}
FIXTURE_APP = "stack_fixture_app:app"
FIXTURE_WORLD = "stack_fixture_app:env_app"


def _call(ingress_url: str, path: str, body: object, key: str | None = None) -> httpx.Response:
    headers = {"idempotency-key": key} if key else {}
    return httpx.post(f"{ingress_url}/{path}", json=body, headers=headers, timeout=30.0)


@pytest.fixture
def restate(tmp_path: Path) -> Iterator[RestateServer]:
    server = RestateServer(
        RestatePorts.free(),
        tmp_path / "restate-data",
        log_path=tmp_path / "restate-server.log",
        config_file=REPO_ROOT / "restate.toml",
    )
    try:
        server.start()
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def fixture_app(tmp_path: Path) -> Iterator[HypercornApp]:
    with serving(
        HypercornApp(FIXTURE_APP, free_port(), FIXTURE_ENV, name="fixture-app", log_path=tmp_path / "app.log")
    ) as app:
        yield app


# --- install ------------------------------------------------------------------------------


def test_ensure_restate_gives_the_pinned_binaries_for_this_platform() -> None:
    bins = ensure_restate()
    assert install.platform_suffix() in str(bins.server)
    for binary in (bins.server, bins.cli):
        assert os.access(binary, os.X_OK), binary
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
        assert RESTATE_VERSION in out.stdout


def test_ensure_restate_without_npm_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(install.RESTATE_DIR_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RestateInstallError, match="npm was not found"):
        ensure_restate()


def test_the_install_module_prints_the_paths() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "replenisher.stack.install"], capture_output=True, text=True, check=True
    )
    assert "restate-server" in out.stdout and str(ensure_restate().cli) in out.stdout


# --- restate-server -----------------------------------------------------------------------


def test_restate_server_serves_health_and_sql_on_free_ports(restate: RestateServer) -> None:
    assert httpx.get(f"{restate.admin_url}/health").status_code == 200
    assert sql(restate.admin_url, "SELECT count(*) AS n FROM sys_invocation") == [{"n": 0}]
    assert (restate.data_dir / "replenisher").is_dir(), "data goes under <base-dir>/<node-name>"


def test_registration_and_an_ingress_call_survive_a_server_crash(
    restate: RestateServer, fixture_app: HypercornApp
) -> None:
    deployment = register_deployment(restate.admin_url, fixture_app.url)
    assert set(deployment.services) == {"StackEcho", "StackTally"}
    first = _call(restate.ingress_url, "StackEcho/greet", "ada", key="greet-ada")
    assert first.status_code == 200, first.text
    assert _call(restate.ingress_url, "StackTally/shelf-1/add", 2).json() == 2

    restate.kill()
    assert restate.returncode == -9
    assert not is_listening(restate.restate_ports.ingress)
    restate.restart()

    assert [d.id for d in list_deployments(restate.admin_url)] == [deployment.id]
    # Same idempotency key: Restate answers from its stored result, the handler does not run again.
    again = _call(restate.ingress_url, "StackEcho/greet", "ada", key="greet-ada")
    assert again.json() == first.json()
    assert _call(restate.ingress_url, "StackTally/shelf-1/add", 3).json() == 5


def test_re_registering_the_same_code_keeps_the_deployment(restate: RestateServer, fixture_app: HypercornApp) -> None:
    first = register_deployment(restate.admin_url, fixture_app.url)
    assert register_deployment(restate.admin_url, fixture_app.url).id == first.id
    assert register_deployment(restate.admin_url, fixture_app.url, force=False).id == first.id
    assert find_deployment(restate.admin_url, fixture_app.url) == first.model_copy(
        update={"uri": f"{fixture_app.url}/"}
    )


def test_restate_server_refuses_a_taken_port_by_name(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind((LOOPBACK, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        server = RestateServer(RestatePorts(ingress=free_port(), admin=taken, node=free_port()), tmp_path / "data")
        with pytest.raises(PortInUseError, match=f"restate admin port {taken}"):
            server.start()
    assert server.pid is None


def test_free_ports_lie_below_the_range_the_kernel_numbers_outgoing_connections_from(tmp_path: Path) -> None:
    low, high = ephemeral_range()
    assert 1024 <= low < high
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == 200 and all(port < low for port in ports), sorted(ports)[-5:]
    # Why: an outgoing connection the kernel numbers with a server's port, while that server is
    # down, keeps it from binding again (a crash test's restart failed so).
    with socket.socket() as target, socket.socket() as client:
        target.bind((LOOPBACK, 0))
        target.listen()
        port = free_port()
        client.bind((LOOPBACK, port))
        client.connect(target.getsockname())
        assert not port_is_free(port)
    (tmp_path / "range").write_text("40000\t50000\n")
    assert ephemeral_range(tmp_path / "range") == (40000, 50000)
    assert ephemeral_range(tmp_path / "missing") == (32768, 60999)


_BUSY_LISTENER = """
import socket, sys, threading, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
held = [bytearray(1 << 20) for _ in range(800)]
for _ in range(6):
    threading.Thread(target=lambda: [sum(range(10**5)) for _ in iter(int, 1)], daemon=True).start()
print("up", flush=True); time.sleep(120)
"""


def test_no_process_of_the_suite_is_given_a_port_the_committed_corpus_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upgrade check of the committed corpus refuses to run while anything answers where its data's
    deployments point; a port from free_port()'s range, once handed to another worker's server, made it
    refuse (CI flake). The session reserves them (conftest.reserve_committed_corpus_ports)."""
    [recorded] = committed_corpus_ports()
    # A port this process has not handed out yet (one it has, free_port passes over too).
    other = next(p for p in range(20_000, 30_000) if p != recorded and p not in ports.handed_out() and port_is_free(p))
    offered = iter([recorded, other])
    monkeypatch.setattr(ports.random, "randrange", lambda *_: next(offered))
    assert free_port() == other  # the corpus's port was offered first, and passed over


def test_a_killed_group_counts_as_gone_only_when_its_threads_are_and_its_port_is_closed() -> None:
    # The main thread of a killed multi-threaded process is a zombie before its other threads
    # have exited, its sockets open until the last has: a group must not count as gone then.
    for _ in range(8):
        port = free_port()
        child = subprocess.Popen(
            [sys.executable, "-c", _BUSY_LISTENER, str(port)], stdout=subprocess.PIPE, start_new_session=True
        )
        try:
            assert child.stdout is not None and child.stdout.readline() == b"up\n"
            os.killpg(child.pid, 9)
            deadline = time.monotonic() + 10
            while group_members(child.pid) and time.monotonic() < deadline:
                time.sleep(0.001)
            assert group_members(child.pid) == []
            assert not is_listening(port), "the group counted as gone while its socket still listened"
        finally:
            child.kill()
            child.wait(10)
            if child.stdout:
                child.stdout.close()


# --- hypercorn ----------------------------------------------------------------------------


def test_hypercorn_app_stops_gracefully_and_comes_back_on_its_port_after_a_crash(
    fixture_app: HypercornApp,
) -> None:
    health = f"{fixture_app.url}/health"
    assert httpx.get(health).status_code == 200
    first_pid = fixture_app.pid

    fixture_app.kill()
    assert fixture_app.returncode == -9
    assert not is_listening(fixture_app.port)

    fixture_app.restart()
    assert fixture_app.pid != first_pid
    assert httpx.get(health).status_code == 200

    fixture_app.stop()
    # SIGINT is hypercorn's clean shutdown; the SDK has taken over SIGTERM.
    assert fixture_app.returncode == 0
    assert "starting fixture-app" in fixture_app.log_path.read_text()


# --- granian -----------------------------------------------------------------------------


def test_the_server_setting_picks_hypercorn_or_granian_and_refuses_anything_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert service_server({}) == DEFAULT_SERVER
    assert service_server({SERVER_SETTING: " Granian "}) == "granian"
    assert service_server({SERVER_SETTING: "hypercorn"}) == "hypercorn"
    with pytest.raises(ValueError, match="uvicorn"):
        service_server({SERVER_SETTING: "uvicorn"})
    monkeypatch.setenv(SERVER_SETTING, "granian")
    assert StackConfig().server == "granian", "the stack follows the setting"
    monkeypatch.delenv(SERVER_SETTING)
    assert StackConfig().server == DEFAULT_SERVER


def test_the_stack_takes_its_service_workers_from_the_setting_or_the_flag_and_refuses_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLENISHER_SERVICE_WORKERS", "3")
    assert StackConfig().service_workers == 3, "the stack follows the setting"
    monkeypatch.delenv("REPLENISHER_SERVICE_WORKERS")
    assert StackConfig().service_workers == 1
    state = f"--state-dir={tmp_path / '.stack'}"
    base = {k: v for k, v in os.environ.items() if k != "REPLENISHER_SERVICE_WORKERS"}

    def stack(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "replenisher.stack", "status", state, *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, env={**base, **env}, timeout=60)

    flag = stack("--service-workers", "0")
    assert flag.returncode == 2 and "REPLENISHER_SERVICE_WORKERS='0': Input should be greater than or equal to 1" in (
        flag.stderr
    ), flag.stderr
    variable = stack(REPLENISHER_SERVICE_WORKERS="many")
    assert variable.returncode == 2 and "error: REPLENISHER_SERVICE_WORKERS='many'" in variable.stderr, variable.stderr
    assert stack("--service-workers", "2").returncode == 1, "a good value: status of a stack that is down"


def test_granian_serves_restate_over_http2_and_the_probe_over_http1_and_stops_as_a_group(
    restate: RestateServer, tmp_path: Path
) -> None:
    app = AsgiApp(
        FIXTURE_APP, free_port(), FIXTURE_ENV, name="fixture-granian", log_path=tmp_path / "g.log", server="granian"
    )
    try:
        app.start()
        app.wait_ready()
        assert app.pid is not None
        workers = [pid for pid in group_members(app.pid) if pid != app.pid]
        assert workers, "granian runs its app in a worker process of the same group"
        # The health probe speaks HTTP/1.1; Restate discovers and calls the app over HTTP/2.
        assert httpx.get(f"{app.url}/health").status_code == 200
        register_deployment(restate.admin_url, app.url)
        assert _call(restate.ingress_url, "StackTally/shelf-g/add", 4).json() == 4

        app.kill()  # a crash takes the worker with the supervisor, and frees the port
        assert not [pid for pid in workers if pid_alive(pid)]
        assert not is_listening(app.port)
        app.restart()
        assert _call(restate.ingress_url, "StackTally/shelf-g/add", 1).json() == 5
        pid = app.pid
        app.stop()
        assert app.returncode == 0, app.log_tail()
        assert group_members(pid) == []
    finally:
        app.stop()


async def test_a_call_made_while_the_service_is_down_completes_after_it_restarts(
    restate: RestateServer, fixture_app: HypercornApp
) -> None:
    register_deployment(restate.admin_url, fixture_app.url)
    assert _call(restate.ingress_url, "StackTally/shelf-2/add", 1).json() == 1
    fixture_app.kill()

    sent = _call(restate.ingress_url, "StackTally/shelf-2/add/send", 10)
    assert sent.status_code == 202, sent.text
    invocation = sent.json()["invocationId"]

    # Same port, same code: no re-registration, Restate's retry reaches the new process.
    fixture_app.restart()

    def completed() -> bool:
        rows = sql(restate.admin_url, f"SELECT status FROM sys_invocation WHERE id = '{invocation}'")
        return rows == [{"status": "completed"}]

    await eventually(completed, timeout=30, what=f"invocation {invocation} completed")
    assert _call(restate.ingress_url, "StackTally/shelf-2/add", 0).json() == 11


# --- the whole stack ----------------------------------------------------------------------


def _stack_config(state_dir: Path) -> StackConfig:
    return StackConfig(
        state_dir=state_dir,
        restate=RestatePorts.free(),
        service_port=free_port(),
        world_port=free_port(),
        inbound_port=free_port(),
        day_seconds=0.5,
        catalogue="tiny",
        service_app=FIXTURE_APP,
        world_app=FIXTURE_WORLD,
        config_file=REPO_ROOT / "restate.toml",
        service_env=FIXTURE_ENV,
        world_env=FIXTURE_ENV,
    )


def _stack_cli(
    config: StackConfig, *command: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable,
        "-m",
        "replenisher.stack",
        *command,
        f"--state-dir={config.state_dir}",
        f"--ingress-port={config.restate.ingress}",
        f"--admin-port={config.restate.admin}",
        f"--node-port={config.restate.node}",
        f"--service-port={config.service_port}",
        f"--world-port={config.world_port}",
        f"--inbound-port={config.inbound_port}",
        f"--day-seconds={config.day_seconds}",
        f"--catalogue={config.catalogue}",
        f"--service-app={config.service_app}",
        f"--world-app={config.world_app}",
    ]
    return subprocess.run(
        args, capture_output=True, text=True, cwd=REPO_ROOT, env={**(env or os.environ), **FIXTURE_ENV}, timeout=120
    )


@pytest.fixture
def stack_config(tmp_path: Path) -> Iterator[StackConfig]:
    config = _stack_config(tmp_path / ".stack")
    try:
        yield config
    finally:
        Stack(config).down()  # whatever a failed test left running


def test_stack_up_in_one_process_and_down_from_another_keeps_restate_data(stack_config: StackConfig) -> None:
    up = _stack_cli(stack_config, "up")
    assert up.returncode == 0, up.stderr
    stack = Stack(stack_config)
    statuses = stack.status()
    assert [s.name for s in statuses] == ["restate-server", "inbound", "world", "replenisher"]
    assert all(s.running for s in statuses), statuses
    secrets = stack.config.secrets_file
    assert secrets.stat().st_mode & 0o777 == 0o600, "the party secrets are readable by others"
    assert set(json.loads(secrets.read_text())) == {"manager", "warehouse", "supplier:*"}
    assert httpx.get(f"{stack.config.inbound_url}/health", timeout=10).json() == {"ok": True}

    # The processes outlive the `up` command and got the stack's wiring in their env.
    ingress = stack.config.ingress_url
    greeting = _call(ingress, "StackEcho/greet", "bo", key="greet-bo").json()
    assert _call(ingress, "StackEcho/env", "REPLENISHER_WORLD_URL").json() == stack.config.world_url
    assert _call(ingress, "StackEcho/env", "REPLENISHER_DAY_SECONDS").json() == "0.5"
    world_env = httpx.get(f"{stack.config.world_url}/env").json()
    # A compressed clock: both processes got one origin, so they agree on the calendar date.
    for name in ("CLOCK_WALL_ORIGIN", "CLOCK_CALENDAR_ORIGIN"):
        assert world_env.pop(f"WORLD_{name}") == _call(ingress, "StackEcho/env", f"REPLENISHER_{name}").json()
    assert world_env == {
        "WORLD_INGRESS_URL": ingress,
        "WORLD_DAY_SECONDS": "0.5",
        "WORLD_CATALOGUE": "tiny",
        "WORLD_INBOUND_URL": stack.config.inbound_url,
        "WORLD_PARTY_SECRETS_FILE": str(secrets),
    }
    assert _call(ingress, "StackTally/bin-7/add", 4).json() == 4

    again = _stack_cli(stack_config, "up")
    assert again.returncode == 1 and "already running" in again.stderr, again

    down = _stack_cli(stack_config, "down")
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(s.pid) for s in statuses)
    assert not stack.state_file.exists()
    assert (stack_config.state_dir / "restate-data" / "replenisher").is_dir()
    assert _stack_cli(stack_config, "status").returncode == 1

    # Up again: same Restate data, so the stored result and the object's state are back; the
    # secrets already handed out stay the same.
    handed_out = secrets.read_text()
    Stack(stack_config).up()
    assert secrets.read_text() == handed_out
    assert _call(ingress, "StackEcho/greet", "bo", key="greet-bo").json() == greeting
    assert _call(ingress, "StackTally/bin-7/add", 1).json() == 5
    stopped = Stack(stack_config).down()
    assert not any(pid_alive(s.pid) for s in stopped)


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


def test_restart_service_keeps_restate_and_the_world_and_records_the_new_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real world and service: the world's in-memory state is what a full down/up would lose.
    config = _stack_config(tmp_path / ".stack").model_copy(
        update={"service_app": SERVICE_APP, "world_app": WORLD_APP, "catalogue": "empty", "day_seconds": 60.0}
    )
    stack = Stack(config)
    world = config.world_url
    # Settings `up` ran with; the restarts below run from a shell that has none of them.
    monkeypatch.setenv("REPLENISHER_CODE_VERSION", "v7")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-on-disk")
    bare = {k: v for k, v in os.environ.items() if k not in ("REPLENISHER_CODE_VERSION", "ANTHROPIC_API_KEY")}
    try:
        stack.up()
        assert "sk-ant-not-on-disk" not in stack.state_file.read_text()
        setup = {"name": "Acme", "prices": {"SKU-7": 4.5}, "lead_days": 2, "reply_days": 1}
        assert httpx.put(f"{world}/admin/suppliers/acme", json=setup, timeout=10).status_code == 200
        item = {"on_hand": 500, "safety_stock": 100, "target_stock": 800, "suppliers": ["acme"]}
        assert httpx.put(f"{world}/admin/items/SKU-7", json=item, timeout=10).status_code == 200
        assert _call(config.ingress_url, "SkuAgent/SKU-7/check", None).json()["on_hand"] == 500
        before = {s.name: s.pid for s in stack.status()}

        refused = _stack_cli(config, "restart", "service", env=bare)
        assert refused.returncode == 1 and "started with ANTHROPIC_API_KEY set" in refused.stderr, refused
        assert pid_alive(before["replenisher"]), "a refused restart leaves the service running"

        restarted = _stack_cli(config, "restart", "service", env={**bare, "ANTHROPIC_API_KEY": "sk-ant-not-on-disk"})
        assert restarted.returncode == 0, restarted.stderr
        after = {s.name: s for s in stack.status()}
        assert all(s.running for s in after.values()), after
        new_pid = after["replenisher"].pid
        assert new_pid != before["replenisher"] and f"pid {new_pid}" in restarted.stdout
        assert not pid_alive(before["replenisher"])
        assert after["restate-server"].pid == before["restate-server"]
        assert after["world"].pid == before["world"]
        settings = _environ(new_pid)
        assert settings["REPLENISHER_CODE_VERSION"] == "v7", "the setting `up` ran with, though this shell lacks it"
        assert settings["REPLENISHER_WORLD_URL"] == world

        # The world kept what it was told and what it saw; the new service answers through Restate.
        assert httpx.get(f"{world}/erp/stock/SKU-7", timeout=10).json()["on_hand"] == 500
        assert _call(config.ingress_url, "SkuAgent/SKU-7/check", None).json()["on_hand"] == 500
        calls = httpx.get(f"{world}/admin/calls", params={"op": "get_stock"}, timeout=10).json()["calls"]
        assert len(calls) == 3, calls  # one check before the restart, one by hand, one after
        status = _stack_cli(config, "status")
        assert status.returncode == 0 and f"pid {new_pid}" in status.stdout, status

        wrong = _stack_cli(config, "restart", "nonesuch")
        names = ", ".join(after)  # whatever processes the stack has, in their order
        assert wrong.returncode == 1 and f"no process 'nonesuch' in the stack: one of {names}" in wrong.stderr, wrong
        assert _stack_cli(config, "restart").returncode == 2  # which process, argparse says

        stopped = _stack_cli(config, "down")
        assert stopped.returncode == 0, stopped.stderr
        assert not pid_alive(new_pid), "down stops the restarted service, not only the one up started"
    finally:
        Stack(config).down()


async def test_restart_inbound_keeps_the_secrets_so_the_world_still_gets_through(tmp_path: Path) -> None:
    config = _stack_config(tmp_path / ".stack").model_copy(
        update={"service_app": SERVICE_APP, "world_app": WORLD_APP, "catalogue": "empty", "day_seconds": 60.0}
    )
    stack = Stack(config)

    async def decide_through_inbound(world: httpx.AsyncClient, po: str) -> None:
        # The manager's decision: the world pushes it, signed as the manager, through the inbound door.
        request = {
            "po_number": po, "sku": "SKU-8", "supplier": "acme", "quantity": 5, "unit_price": 2.0,
            "quote_id": "q-1", "expires_at": 9999999999, "token": f"t-{po}", "run_id": "replenish-SKU-8-1",
        }  # fmt: skip
        assert (await world.post("/manager/approval-requests", json=request)).status_code == 201
        decided = await world.post(f"/manager/approval-requests/{po}/decision", json={"approved": False})
        assert decided.status_code == 200, decided.text

        async def delivered() -> bool:
            messages = (await world.get("/admin/messages", params={"sku": "SKU-8"})).json()["messages"]
            mine = [m for m in messages if m["po_number"] == po]
            assert mine and mine[0]["status"] != "rejected", mine
            return mine[0]["status"] == "delivered"

        await eventually(delivered, timeout=60, what=f"the decision on {po} delivered through the inbound endpoint")

    try:
        await asyncio.to_thread(stack.up)
        async with httpx.AsyncClient(base_url=config.world_url, timeout=10) as world:
            setup = {"name": "Acme", "prices": {"SKU-8": 2.0}, "lead_days": 2, "reply_days": 1}
            assert (await world.put("/admin/suppliers/acme", json=setup)).status_code == 200
            item = {"on_hand": 500, "safety_stock": 100, "target_stock": 800, "suppliers": ["acme"]}
            assert (await world.put("/admin/items/SKU-8", json=item)).status_code == 200  # the ERP stocks it
            await decide_through_inbound(world, "PO-SKU-8-1-1")
            before = {s.name: s.pid for s in stack.status()}

            restarted = await asyncio.to_thread(_stack_cli, config, "restart", "inbound")
            assert restarted.returncode == 0, restarted.stderr
            after = {s.name: s for s in stack.status()}
            assert after["inbound"].pid != before["inbound"] and after["inbound"].running
            assert not pid_alive(before["inbound"])
            assert {n: s.pid for n, s in after.items() if n != "inbound"} == {
                n: pid for n, pid in before.items() if n != "inbound"
            }
            # Same secrets file: the world's next signed push is let through by the new process.
            await decide_through_inbound(world, "PO-SKU-8-2-1")

        stopped = await asyncio.to_thread(_stack_cli, config, "down")
        assert stopped.returncode == 0, stopped.stderr
        assert not pid_alive(after["inbound"].pid), "down stops the restarted inbound endpoint"
    finally:
        await asyncio.to_thread(Stack(config).down)


def test_a_service_whose_supervisor_alone_was_killed_is_stopped_by_restart_and_down(
    stack_config: StackConfig,
) -> None:
    # The docs' crash rehearsal (docs/deploying/local-stack.md): `kill -9` the PID `make status`
    # shows. Under granian that is the supervisor; its worker lives on in the same group and keeps
    # serving the port.
    config = stack_config.model_copy(update={"server": "granian"})
    stack = Stack(config)
    stack.up()
    supervisor = next(s.pid for s in stack.status() if s.name == "replenisher")
    workers = [pid for pid in group_members(supervisor) if pid != supervisor]
    assert workers, "granian runs its app in a worker of the supervisor's group"
    os.kill(supervisor, 9)
    assert wait_dead(supervisor, 10)
    assert is_listening(config.service_port), "the orphaned worker still serves"

    service = next(s for s in stack.status() if s.name == "replenisher")
    assert not service.running and service.leftovers == workers
    status = _stack_cli(config, "status")
    assert status.returncode == 1 and f"pid {workers[0]} still runs" in status.stdout, status

    restarted = stack.restart("service")  # it used to refuse: the port was still taken
    assert not [pid for pid in workers if pid_alive(pid)]
    assert restarted.pid != supervisor and all(s.running for s in stack.status())

    new_workers = [pid for pid in group_members(restarted.pid) if pid != restarted.pid]
    os.kill(restarted.pid, 9)
    assert wait_dead(restarted.pid, 10)
    stack.down()  # it used to say "stopped" and leave the worker listening
    assert not [pid for pid in new_workers if pid_alive(pid)]
    assert not is_listening(config.service_port)


def test_restart_when_the_stack_is_down_says_so(stack_config: StackConfig) -> None:
    with pytest.raises(StackError, match="not up"):
        Stack(stack_config).restart("service")


def test_stack_up_names_the_taken_port_and_starts_nothing(stack_config: StackConfig) -> None:
    with socket.socket() as squatter:
        squatter.bind((LOOPBACK, stack_config.world_port))
        squatter.listen()
        with pytest.raises(PortInUseError, match=f"world port {stack_config.world_port}"):
            Stack(stack_config).up()
    assert Stack(stack_config).status() == []
    assert not is_listening(stack_config.restate.admin)


def test_stack_up_fails_cleanly_when_a_process_cannot_start(stack_config: StackConfig) -> None:
    broken = stack_config.model_copy(update={"service_app": "no_such_module:app", "ready_timeout": 20.0})
    with pytest.raises(ProcessFailedError, match="replenisher exited"):
        Stack(broken).up()
    assert Stack(broken).status() == []
    assert not is_listening(broken.restate.admin)
    assert not is_listening(broken.world_port)


def test_stack_down_when_nothing_runs_is_fine(stack_config: StackConfig) -> None:
    assert Stack(stack_config).down() == []


# --- the session fixtures the end-to-end tests use ---------------------------------------


@pytest.mark.e2e
async def test_session_fixtures_wire_runtime_world_and_service_together(
    restate_runtime: RestateRuntime,
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    world_client: httpx.AsyncClient,
    admin: Admin,
) -> None:
    deployments = admin.deployments()
    assert [d.id for d in deployments] == [service.deployment_id]
    assert {"SkuAgent", "Replenish"} <= set(deployments[0].services)
    assert (await world_client.get("/health")).status_code == 200
    assert (await ingress.get("/restate/health")).status_code == 200
    assert await admin.asql("SELECT count(*) AS n FROM sys_deployment") == [{"n": 1}]

    service.kill()
    service.restart()
    assert [d.id for d in admin.deployments()] == [service.deployment_id], "restart needs no re-registration"

    if restate_runtime.supports_crash:
        restate_runtime.kill()
        restate_runtime.restart()
        # The session's client keeps working across a runtime crash: no stale pooled connection.
        assert (await ingress.get("/restate/health")).status_code == 200
        assert [d.id for d in admin.deployments()] == [service.deployment_id]


# --- eventually ---------------------------------------------------------------------------


async def test_eventually_returns_the_first_truthy_result() -> None:
    answers = iter([None, AssertionError("not yet"), 0, "ready"])

    def poll() -> object:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await eventually(poll, timeout=5, interval=0.01) == "ready"


async def test_eventually_gives_up_saying_what_it_last_saw() -> None:
    async def never() -> list[str]:
        return []

    with pytest.raises(AssertionError, match=r"the order arrived did not hold within 0.2s .*last result: \[\]"):
        await eventually(never, timeout=0.2, interval=0.05, what="the order arrived")


def test_the_hint_after_up_names_a_sku_the_stacks_catalogue_holds() -> None:
    import re

    from replenisher.stack.__main__ import first_call
    from simulated_world.catalogue import load

    found = re.search(r"/SkuAgent/([^/]+)/check", first_call(StackConfig(catalogue="demo")))
    assert found is not None and found.group(1) in load("demo").items
    assert "catalogue is empty" in first_call(StackConfig()), "no SKU to name: say how to add one"
