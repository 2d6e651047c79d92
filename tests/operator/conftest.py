"""Fixtures for the operator's tools, against the session's real Restate, world and service.

The CLI runs as a subprocess (the way a person runs it), the console on real hypercorn, the
browser is Debian's Chromium driven by Playwright (never a downloaded browser).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from operator_support import Cli, CliResult

from people.accounts import SESSION_SECRET, people_toml
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import RestateRuntime
from support import PERSONAL_TOKEN_KEY_FILE, REPO_ROOT, serving

CHROMIUM = os.environ.get("REPLENISHER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "tests" / "artifacts" / "operator"


@pytest.fixture(scope="session")
def operator_env(restate_runtime: RestateRuntime, world: HypercornApp) -> dict[str, str]:
    return {
        "REPLENISHER_INGRESS_URL": restate_runtime.ingress_url,
        "REPLENISHER_ADMIN_URL": restate_runtime.admin_url,
        "REPLENISHER_WORLD_URL": world.url,
    }


@pytest.fixture
def cli(operator_env: dict[str, str]) -> Cli:
    """`replenisher ARGS...` as a person runs it, in a child process."""

    async def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> CliResult:  # noqa: ASYNC109
        full_env = {**os.environ, **operator_env, "COLUMNS": "150", **(env or {})}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "replenisher.cli",
            *args,
            env=full_env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            process.kill()
            raise
        assert process.returncode is not None
        return CliResult(process.returncode, out.decode(), err.decode())

    return run


@pytest.fixture(scope="session")
def console(operator_env: dict[str, str], log_dir: Path) -> Iterator[HypercornApp]:
    app = HypercornApp(
        "replenisher.console.app:create_app()",
        free_port(),
        operator_env,
        name="console",
        log_path=log_dir / "console.log",
    )
    with serving(app):
        yield app


@pytest.fixture(scope="session")
def signed_console(
    operator_env: dict[str, str], log_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HypercornApp]:
    """A second console, with sign-in: Ana (a buyer), Vic (a viewer) and Paul (the plant manager)."""
    people = tmp_path_factory.mktemp("people") / "people.toml"
    people.write_text(people_toml(with_passwords=("ana", "vic", "paul")))
    port = free_port()
    env = {
        **operator_env,
        "REPLENISHER_PEOPLE_FILE": str(people),
        "REPLENISHER_CONSOLE_SESSION_SECRET": SESSION_SECRET,
        "REPLENISHER_CONSOLE_PUBLIC_URL": f"http://127.0.0.1:{port}",
        # The key a service under this matrix checks the console's decisions with (test_console_routing_browser).
        "REPLENISHER_PERSONAL_TOKEN_KEY_FILE": str(PERSONAL_TOKEN_KEY_FILE),
    }
    factory = "replenisher.console.app:create_app()"
    app = HypercornApp(factory, port, env, name="signed-console", log_path=log_dir / "signed-console.log")
    with serving(app):
        yield app


def chromium_installed() -> bool:
    return Path(CHROMIUM).exists()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    if not chromium_installed():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: `make test` installs Debian's package (apt-get install chromium)",
            pytrace=False,
        )
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def axe() -> Path:
    """axe-core's script for the accessibility checks (npm, cached per user; see page_checks.py)."""
    from page_checks import ensure_axe

    return ensure_axe()
