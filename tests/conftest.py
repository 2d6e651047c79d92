"""Session fixtures that own the real processes of the end-to-end tests.

One Restate runtime, one simulated world and one replenisher service per test session,
each on free ports. Tests may crash and restart them (`kill()` / `restart()`); a test that
leaves one down gets it restarted afterwards, so the next test starts from a live stack.
Everything is stopped at the end of the session, whatever happened.

Runtime: the pinned restate-server binary (installed by `ensure_restate`) unless
`REPLENISHER_TEST_RUNTIME=docker`, which runs the official image with testcontainers.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from e2e import crash_table
from e2e.scenario import Scenario
from people.matrices import TEAM
from replenisher.config import service_workers
from replenisher.inbound.signing import new_secrets, write_secrets
from replenisher.inbound.stamp import DOOR_KEY_ENV, write_new_door_key
from replenisher.keepalive import RetryDroppedKeepAlive
from replenisher.stack.admin import Admin
from replenisher.stack.install import RestateInstallError
from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import FREE_PORTS_VARIABLE, free_port, reserve
from replenisher.stack.processes import (
    AsgiApp,
    HypercornApp,
    RestateServer,
    restate_env_for_workers,
    service_server,
)
from replenisher.stack.reaper import reap_with_this_process
from replenisher.stack.runtime import RestateRuntime, RuntimeUnavailableError, make_runtime
from scheduling import (
    pytest_collection_modifyitems,
    pytest_configure_node,
    pytest_xdist_make_scheduler,
    register_recorder,
    worker_ranges,
)
from support import (
    NO_DOOR_LIMITS,
    REPO_ROOT,
    RESTATE_TEST_ENV,
    WORLD_LIMITS,
    RegisteredService,
    committed_corpus_ports,
    inbound_endpoint,
    plain_report,
    service_env,
    signed_world_env,
    with_people_file,
)

# The longest tests first (tests/durations.json), and the tests that share a module's fixture on one
# worker (tests/scheduling.py).
__all__ = ["pytest_collection_modifyitems", "pytest_configure_node", "pytest_xdist_make_scheduler"]

RUNTIME_ENV = "REPLENISHER_TEST_RUNTIME"
_HTTP_TIMEOUT = httpx.Timeout(30.0, connect=5.0)

# Log tails of these are attached to the report of any failing test that used them.
_session_logs: dict[str, HypercornApp | RestateServer] = {}


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest-xdist worker picks ports from its own slice (REPLENISHER_FREE_PORTS), it and every
    process it starts. A port one worker handed its service stays free while a test has the service
    down; another worker picking it then kept the service from starting again (CI, on-call test)."""
    register_recorder(config)
    # A session killed before its teardown (SIGKILL, a timeout that ends it) leaves no stack behind.
    reap_with_this_process()
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if worker and count > 1:
        low, high = worker_ranges(count, os.environ)[int(worker.removeprefix("gw"))]
        os.environ[FREE_PORTS_VARIABLE] = f"{low}-{high}"


@pytest.fixture(scope="session", autouse=True)
def reserve_committed_corpus_ports() -> None:
    """No process of this session is given a port the committed upgrade corpus records: its check
    (tests/upgrade, beside this session's other workers) refuses to run while anything answers there."""
    reserve(*committed_corpus_ports())


@pytest.fixture(scope="session", autouse=True)
def door_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The key the inbound endpoint stamps its forwards with and the service checks them by,
    in the environment of the whole session, so every door and service a test starts shares it
    (a service without it would take every door-stamped sender for an operator's say)."""
    path = tmp_path_factory.mktemp("door") / "door-key"
    write_new_door_key(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DOOR_KEY_ENV, str(path))
        yield path


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's process logs: under pytest's basetemp, so concurrent sessions never share
    one, and CI can keep them with `--basetemp` (see .ci/run)."""
    path = tmp_path_factory.getbasetemp() / "logs"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def restate_runtime(tmp_path_factory: pytest.TempPathFactory, log_dir: Path) -> Iterator[RestateRuntime]:
    kind = os.environ.get(RUNTIME_ENV, "binary")
    try:
        runtime = make_runtime(
            kind,
            tmp_path_factory.mktemp("restate") / "data",
            {**restate_env_for_workers(service_workers()), **RESTATE_TEST_ENV},
            log_path=log_dir / "restate-server.log",
            config_file=REPO_ROOT / "restate.toml",
        )
        runtime.start()
    except (RuntimeUnavailableError, RestateInstallError) as exc:
        # The reason alone is the whole story; a traceback through the fixture would bury it.
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
    try:
        runtime.wait_ready()
        if isinstance(runtime, RestateServer):
            _session_logs["restate_runtime"] = runtime
        yield runtime
    finally:
        _session_logs.pop("restate_runtime", None)
        runtime.stop()


@pytest.fixture(scope="session")
def party_secrets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The secrets of the outside parties, shared by the inbound endpoint and the world."""
    path = tmp_path_factory.mktemp("secrets") / "party-secrets.json"
    write_secrets(path, new_secrets())
    return path


@pytest.fixture(scope="session")
def world_port() -> int:
    """Chosen before either starts: the door reads the world's ERP, and the world pushes through the door."""
    return free_port()


@pytest.fixture(scope="session")
def world_url(world_port: int) -> str:
    return f"http://127.0.0.1:{world_port}"


@pytest.fixture(scope="session")
def inbound(
    restate_runtime: RestateRuntime, party_secrets: Path, log_dir: Path, world_url: str
) -> Iterator[HypercornApp]:
    """The inbound endpoint: outside parties' way to a SKU's address (the world's pushes go here)."""
    app = inbound_endpoint(restate_runtime.ingress_url, party_secrets, log_dir, world_url, extra=NO_DOOR_LIMITS)
    try:
        app.start()
        _session_logs["inbound"] = app
        app.wait_ready()
        yield app
    finally:
        _session_logs.pop("inbound", None)
        app.stop()


@pytest.fixture(scope="session")
def world(
    restate_runtime: RestateRuntime, inbound: HypercornApp, party_secrets: Path, log_dir: Path, world_port: int
) -> Iterator[HypercornApp]:
    app = HypercornApp(
        WORLD_APP,
        world_port,
        signed_world_env(restate_runtime.ingress_url, inbound.url, party_secrets),
        name="world",
        log_path=log_dir / "world.log",
    )
    try:
        app.start()
        _session_logs["world"] = app
        app.wait_ready()
        yield app
    finally:
        _session_logs.pop("world", None)
        app.stop()


@pytest.fixture(scope="session")
def service(restate_runtime: RestateRuntime, world: HypercornApp, log_dir: Path) -> Iterator[RegisteredService]:
    app = AsgiApp(
        SERVICE_APP,
        free_port(restate_runtime.service_bind_host),
        service_env(world.url, {"REPLENISHER_INGRESS_URL": restate_runtime.ingress_url}),
        name="replenisher",
        log_path=log_dir / "replenisher.log",
        bind_host=restate_runtime.service_bind_host,
        server=service_server(),  # REPLENISHER_SERVER=granian runs the suite's service on granian
        workers=service_workers(),  # REPLENISHER_SERVICE_WORKERS=2 runs it with two worker processes
    )
    registered = RegisteredService(restate_runtime, app)
    try:
        _session_logs["service"] = app
        registered.start()
        yield registered
    finally:
        _session_logs.pop("service", None)
        registered.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def people_service(
    service: RegisteredService, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RegisteredService]:
    """This worker's service restarted with the team's authority matrix (`people.matrices.TEAM`) for
    the module that asks for it, and without it after the module (see `with_people_file`)."""
    async with with_people_file(service, tmp_path_factory.mktemp("people") / "people.toml", TEAM) as restarted:
        yield restarted


@pytest.fixture(scope="session")
def admin(restate_runtime: RestateRuntime) -> Admin:
    return Admin(restate_runtime.admin_url)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def ingress(restate_runtime: RestateRuntime) -> AsyncIterator[httpx.AsyncClient]:
    url = restate_runtime.ingress_url
    # Every reset resent too: against a live Restate a reset before an answer is a refusal's close
    # (replenisher.keepalive), and a server a test killed refuses the resend's connection.
    transport = RetryDroppedKeepAlive(resend_any_reset=True)
    async with httpx.AsyncClient(base_url=url, timeout=_HTTP_TIMEOUT, transport=transport) as client:
        yield client


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def world_client(world: HypercornApp) -> AsyncIterator[httpx.AsyncClient]:
    # hypercorn closes a connection idle past its keep-alive time (5 s), and httpx kept idle ones 5 s
    # too: a request sent on one at that moment is dropped unread (CI saw it on the 43rd request of
    # one connection) and sent once more, or, as a reset, fails a PUT that is not resent (CI saw
    # that too). The pool lets connections go after 2 s idle, before the world closes them.
    transport = RetryDroppedKeepAlive(limits=WORLD_LIMITS)
    async with httpx.AsyncClient(base_url=world.url, timeout=_HTTP_TIMEOUT, transport=transport) as client:
        yield client


@pytest.fixture(autouse=True)
def _revive_crashed_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that crashed a process and failed before restarting it must not sink the rest."""
    yield
    for name in ("restate_runtime", "inbound", "world", "service"):
        if name not in request.fixturenames:
            continue
        process: Any = request.getfixturevalue(name)
        if not process.running and getattr(process, "supports_crash", True):
            process.restart()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    try:
        report = yield
    except (SystemError, pytest.fail.Exception) as e:
        report = plain_report(item, call, e)
    crash_table.attach(report)
    if report.failed:
        used = getattr(item, "fixturenames", ())
        for name, process in list(_session_logs.items()):
            if name in used:
                report.sections.append((f"{name}: end of {process.log_path}", process.log_tail()))
    return report


@pytest.fixture
def scenario(
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    world_client: httpx.AsyncClient,
    request: pytest.FixtureRequest,
) -> Scenario:
    """A test's own SKU and supplier in the session's world (see tests/e2e/scenario.py)."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name.removeprefix("test_"))[:24].strip("-")
    return Scenario(ingress, world_client, name)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    crash_table.collect(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The crash matrix's table, printed once: by the controller when pytest-xdist runs workers
    (their rows arrive on the reports), else by the one process."""
    if hasattr(terminalreporter.config, "workerinput") or not crash_table.ROWS:
        return
    terminalreporter.section("crash matrix")
    for line in crash_table.lines():
        terminalreporter.write_line(line)
