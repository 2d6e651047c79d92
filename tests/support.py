"""Helpers the end-to-end tests import: time in test days, polling, the service under test."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import ssl
import tarfile
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest

from replenisher.domain.audit import AuditEntry, day_of
from replenisher.domain.credentials import issue, new_token_key, parse_token_key
from replenisher.operations.audit import read_day
from replenisher.stack.admin import find_deployment, register_deployment
from replenisher.stack.processes import DEFAULT_READY_TIMEOUT, HypercornApp
from replenisher.stack.runtime import BinaryRuntime, RestateRuntime
from replenisher.upgrade.corpus import MANIFEST, CorpusManifest

T = TypeVar("T")

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
COMMITTED_CORPUS = TESTS_DIR / "fixtures" / "upgrade" / "corpus.tar.gz"
"""The upgrade check's committed corpus (tests/fixtures/upgrade/README.md)."""
DOCS_DIR = REPO_ROOT / "docs"

# One business day in the tests. Short enough that a multi-day wait takes a second or
# two, long enough that two processes on a 2-core machine can tell days apart.
# For clients of the simulated world (hypercorn, which closes a connection idle 5 s): idle
# connections let go after 2 s, before the server closes one under a request being sent.
WORLD_LIMITS = httpx.Limits(keepalive_expiry=2.0)
TEST_DAY_SECONDS = float(os.environ.get("REPLENISHER_TEST_DAY_SECONDS", "0.25"))
CHECK_INTERVAL_DAYS = 1
# Longer than a worker's whole session (5000 days: about 21 minutes), so no default wait lapses, and
# no reminder (at half and 90% of it) wakes a run another test left waiting, however loaded the
# machine; tests of timeouts and reminders set their own for their SKU (SkuAgent/<sku>/configure).
# Within the calendar's reach (domain.calendar: 30 years).
APPROVAL_WAIT_DAYS = 5000
# The compressed clock's origin, shared by the service and the world of a session so they
# agree on the calendar date: now, on the wall clock and on the calendar.
CLOCK_ORIGIN = time.time()
REPLY_WAIT_DAYS = APPROVAL_WAIT_DAYS

# Restate settings for the test runtime, on top of restate.toml.
RESTATE_TEST_ENV: dict[str, str] = {
    # Production waits last days, so invocations always suspend and later resume by replay.
    # Test days are a fraction of a second; a short inactivity timeout makes multi-day waits
    # suspend here too, so every e2e run exercises suspend-and-replay.
    # REPLENISHER_TEST_ALWAYS_REPLAY=1: suspend after every await, so every step of every
    # test also runs as a replay of its journal (what the SDK's own test harness calls
    # always-replay mode).
    "RESTATE_WORKER__INVOKER__INACTIVITY_TIMEOUT": "0s" if os.environ.get("REPLENISHER_TEST_ALWAYS_REPLAY") else "2s",
    # After a service is killed, Restate retries its invocations with exponential backoff
    # capped at this interval (default 1 min); capped low so recovery fits in a test.
    "RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL": "2s",
}


# The tools of an undisturbed replenishment, in order: the purchasing process as the agent runs it.
HAPPY_PATH = [
    "get_quotes",
    "draft_purchase_order",
    "request_approval",
    "wait_for_approval",
    "place_order",
    "wait_for_supplier_reply",
    "read_supplier_reply",
    "wait_for_goods",
    "close_purchase_order",
    "done",
]


def days(n: float) -> float:
    """Seconds of wall-clock time for `n` business days in the tests."""
    return n * TEST_DAY_SECONDS


async def eventually(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 15.0,  # noqa: ASYNC109 - a deadline on polling, not on one awaited call
    interval: float = 0.1,
    what: str | None = None,
) -> T:
    """Poll `predicate` until it returns something truthy, and return that.

    The predicate may be sync or async; raising (e.g. a failed `assert` or a 404) counts as
    "not yet". After `timeout` seconds, fail with the last result or error, so the test
    output says what the world looked like when we gave up.
    """
    description = what or getattr(predicate, "__name__", repr(predicate))
    deadline = time.monotonic() + timeout
    last_result: object = None
    last_error: BaseException | None = None
    attempts = 0
    while True:
        attempts += 1
        try:
            result = predicate()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result  # type: ignore[return-value]
            last_result, last_error = result, None
        except Exception as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = (
                f"last error: {type(last_error).__name__}: {last_error}"
                if last_error
                else f"last result: {last_result!r}"
            )
            raise AssertionError(
                f"{description} did not hold within {timeout:g}s ({attempts} attempts); {detail}"
            ) from last_error
        await asyncio.sleep(interval)


async def while_progressing(
    predicate: Callable[[], Awaitable[T]],
    progress: Callable[[], Awaitable[object]],
    stall: float = 30.0,
    interval: float = 0.2,
    what: str | None = None,
) -> T:
    """Poll `predicate` until it returns something truthy, for as long as `progress` keeps changing.

    For work whose length follows the machine (hundreds of messages, each a journaled turn):
    the bound is not a guess at the whole, but `stall` seconds without any progress (`progress`
    returns a new value, e.g. a count of messages read). Errors count as "not yet", as in
    `eventually`.
    """
    description = what or getattr(predicate, "__name__", repr(predicate))
    seen: object = None
    moved = time.monotonic()
    while True:
        try:
            result = await predicate()
            if result:
                return result
            now = await progress()
        except Exception:
            now = seen
        if now != seen:
            seen, moved = now, time.monotonic()
        elif time.monotonic() - moved >= stall:
            raise AssertionError(f"{description}: no progress for {stall:g}s; it stopped at {seen!r}")
        await asyncio.sleep(interval)


class RegisteredService:
    """An ASGI app under hypercorn, registered as a deployment with the runtime.

    `kill()` is a crash (SIGKILL). `restart()` brings it back on the same port with the
    same code: Restate still has the deployment and reconnects by itself, so it only
    re-registers if the deployment has gone (it has not, in practice).
    """

    def __init__(self, runtime: RestateRuntime, app: HypercornApp) -> None:
        self.runtime = runtime
        self.process = app
        self.deployment_id: str | None = None

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def deployment_uri(self) -> str:
        return self.runtime.deployment_uri(self.process.port)

    @property
    def running(self) -> bool:
        return self.process.running

    def start(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        self.process.start()
        self.process.wait_ready(timeout)
        self.deployment_id = register_deployment(self.runtime.admin_url, self.deployment_uri).id

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> None:
        self.process.stop()

    def restart(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        self.process.restart(timeout)
        if find_deployment(self.runtime.admin_url, self.deployment_uri) is None:
            self.deployment_id = register_deployment(self.runtime.admin_url, self.deployment_uri, force=False).id

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines)


@asynccontextmanager
async def with_people_file(service: RegisteredService, matrix: Path, text: str) -> AsyncIterator[RegisteredService]:
    """The worker's service restarted with `REPLENISHER_PEOPLE_FILE` (the authority matrix `text`, written
    to `matrix`), and restarted without it afterwards, even on failure. One Restate per worker routes
    SkuAgent and Replenish to one deployment, so the people tests borrow it rather than start a second."""
    await asyncio.to_thread(matrix.write_text, text)
    env = service.process.env
    env["REPLENISHER_PEOPLE_FILE"] = str(matrix)
    env["REPLENISHER_PERSONAL_TOKEN_KEY_FILE"] = str(PERSONAL_TOKEN_KEY_FILE)
    try:
        await asyncio.to_thread(service.restart)
        yield service
    finally:
        env.pop("REPLENISHER_PEOPLE_FILE", None)
        env.pop("REPLENISHER_PERSONAL_TOKEN_KEY_FILE", None)
        await asyncio.to_thread(service.restart)


def personal_token(person: str, *, days: float = 1.0, now: float | None = None) -> str:
    """`person`'s personal token, made with the tests' key, as the console makes one."""
    key = parse_token_key(PERSONAL_TOKEN_KEY_FILE.read_text())
    return issue(key, person, now=time.time() if now is None else now, days=days)


# Files through which crash tests arm kill points in the service and count its decisions
# (see replenisher.durable.probes). Empty, they change nothing.
PROBE_DIR = Path(tempfile.mkdtemp(prefix="replenisher-probes-"))
CRASH_POINTS = PROBE_DIR / "crash-points.jsonl"
PERSONAL_TOKEN_KEY_FILE = PROBE_DIR / "personal-token.key"
"""The key the services and consoles under a matrix check and make personal tokens with."""
PERSONAL_TOKEN_KEY_FILE.write_text(new_token_key() + "\n")
DECISION_LOG = PROBE_DIR / "decisions.log"


# The service's waits and retries in the tests, whatever starts it (the session's fixtures, a
# test's own `Stack`).
SERVICE_TIMING: dict[str, str] = {
    "REPLENISHER_CHECK_INTERVAL_DAYS": str(CHECK_INTERVAL_DAYS),
    # Retries of a failed step in milliseconds rather than seconds, still bounded.
    "REPLENISHER_STEP_INITIAL_RETRY_MS": "100",
    "REPLENISHER_STEP_MAX_RETRY_MS": "500",
    "REPLENISHER_STEP_MAX_ATTEMPTS": "4",
    # A crash and restart take a second or two, which is several test days: the waits must
    # be long enough that a crash does not turn into a timeout.
    "REPLENISHER_APPROVAL_WAIT_DAYS": str(APPROVAL_WAIT_DAYS),
    "REPLENISHER_REPLY_WAIT_DAYS": str(REPLY_WAIT_DAYS),
    "REPLENISHER_GOODS_GRACE_DAYS": str(REPLY_WAIT_DAYS),
}


def service_env(world_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {
        "REPLENISHER_WORLD_URL": world_url,
        "REPLENISHER_DAY_SECONDS": f"{TEST_DAY_SECONDS:g}",
        "REPLENISHER_CLOCK_WALL_ORIGIN": repr(CLOCK_ORIGIN),
        "REPLENISHER_CLOCK_CALENDAR_ORIGIN": repr(CLOCK_ORIGIN),
        **SERVICE_TIMING,
        "REPLENISHER_CRASH_POINTS": str(CRASH_POINTS),
        "REPLENISHER_DECISION_LOG": str(DECISION_LOG),
        **(extra or {}),
    }


def world_env(ingress_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {
        "WORLD_INGRESS_URL": ingress_url,
        "WORLD_DAY_SECONDS": f"{TEST_DAY_SECONDS:g}",
        "WORLD_CLOCK_WALL_ORIGIN": repr(CLOCK_ORIGIN),
        "WORLD_CLOCK_CALENDAR_ORIGIN": repr(CLOCK_ORIGIN),
        **(extra or {}),
    }


def signed_world_env(ingress_url: str, inbound_url: str, secrets_file: Path) -> dict[str, str]:
    """A world that pushes through the inbound endpoint, signed as each party."""
    return world_env(ingress_url, {"WORLD_INBOUND_URL": inbound_url, "WORLD_PARTY_SECRETS_FILE": str(secrets_file)})


NO_DOOR_LIMITS = {"REPLENISHER_INBOUND_RATE_PER_PARTY": "0", "REPLENISHER_INBOUND_RATE_PER_SKU": "0"}
"""The suite's shared door runs without rate limits: its tests send floods on purpose, and the
limits have tests of their own, each with its own door (e2e/test_inbound_door.py)."""


def inbound_env(
    ingress_url: str, secrets_file: Path, world_url: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A door forwarding to `ingress_url`, reading SKUs' suppliers from the ERP at `world_url`."""
    return {
        "REPLENISHER_INGRESS_URL": ingress_url,
        "REPLENISHER_PARTY_SECRETS_FILE": str(secrets_file),
        "REPLENISHER_WORLD_URL": world_url,
        **(extra or {}),
    }


def inbound_endpoint(
    ingress_url: str,
    secrets_file: Path,
    log_dir: Path,
    world_url: str,
    name: str = "inbound",
    extra: Mapping[str, str] | None = None,
) -> HypercornApp:
    """An inbound endpoint on a free port, forwarding to `ingress_url` (not started)."""
    from replenisher.stack.local import INBOUND_APP
    from replenisher.stack.ports import free_port

    env = inbound_env(ingress_url, secrets_file, world_url, extra)
    return HypercornApp(INBOUND_APP, free_port(), env, name=name, log_path=log_dir / f"{name}.log")


@contextmanager
def own_restate_and_world(
    base: Path, day_seconds: float = TEST_DAY_SECONDS
) -> Iterator[tuple[BinaryRuntime, HypercornApp]]:
    """Restate (restate.toml with the tests' settings) and the world on free ports, data and logs under
    `base`, for a module that registers deployments of its own (which would change where every later
    call of the session's stack goes); both stopped afterwards, even on failure."""
    from replenisher.stack.local import WORLD_APP
    from replenisher.stack.ports import RestatePorts, free_port
    from replenisher.stack.runtime import BinaryRuntime

    restate = BinaryRuntime(
        RestatePorts.free(), base / "data", RESTATE_TEST_ENV, log_path=base / "restate.log",
        config_file=REPO_ROOT / "restate.toml",
    )  # fmt: skip
    env = world_env(restate.ingress_url, {"WORLD_DAY_SECONDS": f"{day_seconds:g}"})
    world = HypercornApp(WORLD_APP, free_port(), env, name="world", log_path=base / "world.log")
    try:
        restate.start()
        restate.wait_ready()
        world.start()
        world.wait_ready()
        yield restate, world
    finally:
        world.stop()
        restate.stop()


def versioned_service(
    world_url: str,
    version: str,
    log_path: Path,
    name: str | None = None,
    extra: Mapping[str, str] | None = None,
    app: str | None = None,
    day_seconds: float = TEST_DAY_SECONDS,
) -> HypercornApp:
    """The replenisher service with REPLENISHER_CODE_VERSION=`version` (and `extra` settings) on a free
    port (not started), under the suite's server, as a new deployment of that code would run. `app`: a
    changed candidate of the suite's own (`tests.upgrade.planted:...`) in place of the service's app."""
    from replenisher.stack.local import SERVICE_APP
    from replenisher.stack.ports import free_port
    from replenisher.stack.processes import service_server

    env = service_env(
        world_url,
        {"REPLENISHER_CODE_VERSION": version, "REPLENISHER_DAY_SECONDS": f"{day_seconds:g}", **(extra or {})},
    )
    if app is not None:  # the suite's modules, imported from the repository
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    name = f"replenisher-{name or version}"
    return HypercornApp(app or SERVICE_APP, free_port(), env, name=name, log_path=log_path, server=service_server())


@contextmanager
def serving(app: HypercornApp) -> Iterator[HypercornApp]:
    """The app started and answering its health check, and stopped afterwards, even on failure."""
    try:
        app.start()
        app.wait_ready()
        yield app
    finally:
        app.stop()


def as_the_door(sku: str, body: dict[str, Any]) -> dict[str, Any]:
    """A `deliver` body with the stamp the session's inbound endpoint would put on it (the
    session's door key is in the environment): for a test that plays the door itself."""
    from replenisher.domain.documents import Sender
    from replenisher.inbound.stamp import DOOR_KEY_ENV, load_door_key, stamp

    key = load_door_key(Path(os.environ[DOOR_KEY_ENV]))
    sender = Sender.model_validate(body["sender"])
    return {**body, "stamp": stamp(key, sku, body["event"], body["payload"], sender, body["received_at"])}


# --- the documentation's pages, whose commands the tests run as written ----------------------


def doc_section(page: str, heading: str) -> str:
    """The text under `heading` (a whole heading line, e.g. "## TLS") on the docs page `page` (a
    path under docs/), up to the next heading of the same or a higher level. Lines in code blocks
    are never headings: a shell comment starts with "#" too."""
    level = len(heading) - len(heading.lstrip("#"))
    found, under, fenced = False, [], False
    for line in (DOCS_DIR / page).read_text().splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        depth = len(line) - len(line.lstrip("#")) if not fenced and re.match(r"#{1,6} ", line) else 0
        if found and 0 < depth <= level:
            break
        if found:
            under.append(line)
        found = found or (depth == level and line.rstrip("\n") == heading)
    assert found, f"docs/{page} lost its section {heading!r}"
    return "".join(under)


def sh_blocks(text: str) -> list[str]:
    """The ```sh blocks of a page or section, in order."""
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def commented_commands(text: str) -> list[tuple[str, str]]:
    """Each one-line command of the ```sh blocks in `text` with the comment line above it ("" when
    none): the docs say in that comment what the command shows."""
    found = []
    for block in sh_blocks(text):
        says = ""
        for line in block.splitlines():
            if line.startswith("#"):
                says = line.lstrip("# ")
            elif line.strip():
                found.append((says, line.strip()))
                says = ""
    return found


def committed_corpus_ports() -> list[int]:
    """The ports the committed upgrade corpus's deployments point at (its manifest, read from the archive)."""
    with tarfile.open(COMMITTED_CORPUS, "r:gz") as archive:
        manifest = archive.extractfile(MANIFEST)
        assert manifest is not None, f"{COMMITTED_CORPUS} holds no {MANIFEST}"
        uris = CorpusManifest.model_validate_json(manifest.read()).deployments
    return [port for uri in uris if (port := urlsplit(uri).port) is not None]


def plain_report(item: pytest.Item, call: pytest.CallInfo[None], error: BaseException) -> pytest.TestReport:
    """The failure as plain text, when pytest could not render it, so the worker lives on and says why.

    Seen in CI and here under load: a test failed near its 180 s, and pytest-timeout's alarm went off
    while pytest rendered the failure (reading sources is slow on a loaded machine), raising `Failed`
    there; inside `ast.parse` the same alarm surfaced as CPython 3.11's "AST constructor recursion
    depth mismatch" SystemError. Either way the worker died with an INTERNALERROR that hid the failure
    and ended the session."""
    failure = call.excinfo.value if call.excinfo is not None else error
    # Frame by frame, by hand: the traceback module's own formatting parses lines with `ast` too.
    frames = [
        f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n    {(frame.line or "").strip()}\n'
        for frame in traceback.extract_tb(failure.__traceback__)
    ]
    text = "".join(frames) + f"{type(failure).__name__}: {failure}\n(pytest could not render this failure: {error})"
    return pytest.TestReport(
        item.nodeid,
        item.location,
        {k: 1 for k in item.keywords},
        "failed",
        text,
        call.when,
        duration=call.duration,
        start=call.start,
        stop=call.stop,
    )


def count_ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every CA bundle an SSL context loads in this process from now on (httpx reads one into each
    client it makes unless handed a context: about 30 ms of CPU each)."""
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(args or kwargs)
        load(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return loads


async def audit_entries_since(ingress_url: str, since: float, *, client: httpx.AsyncClient) -> list[AuditEntry]:
    """The audit log's entries of every day from `since`'s to today's (UTC): a test that read only
    today's log would miss what it did before a midnight it ran across."""
    days = sorted({day_of(since), day_of(time.time())})
    entries: list[AuditEntry] = []
    for day in days:
        entries.extend((await read_day(ingress_url, day, client=client)).entries)
    return entries
