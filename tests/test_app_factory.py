"""The service's ASGI app is made by a factory that bootstraps (`replenisher.durable.app.create_app`):
nothing is checked or read at import, a bad start-up stops `create_app` naming what is wrong, and
every request is served with the parts of the app that took it."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from replenisher import config, wiring
from replenisher.domain.policy import OfflinePolicy
from replenisher.durable import app as service_app
from replenisher.stack.processes import STREAMS_PER_CONNECTION, restate_env_for_workers, server_argv

START = """
import replenisher.durable.app as service  # importing checks nothing
print("imported")
service.create_app()
print("created")
"""


def _start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REPLENISHER_", "ANTHROPIC_"))}
    return subprocess.run(
        [sys.executable, "-c", START], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def test_importing_the_app_checks_nothing_and_the_factory_stops_a_bad_start() -> None:
    no_key = _start({"REPLENISHER_DECIDER": "claude"})
    assert no_key.stdout.split() == ["imported"]
    assert no_key.returncode != 0 and "REPLENISHER_DECIDER=claude needs ANTHROPIC_API_KEY" in no_key.stderr
    bad = _start({"REPLENISHER_DAY_SECONDS": "soon"})
    assert bad.stdout.split() == ["imported"]
    assert "invalid replenisher settings: REPLENISHER_DAY_SECONDS: " in bad.stderr
    fine = _start({"REPLENISHER_WORLD_URL": "http://127.0.0.1:9"})
    assert fine.returncode == 0, fine.stderr
    assert fine.stdout.split() == ["imported", "created"]


async def test_each_app_serves_its_requests_with_its_own_parts() -> None:
    seen: list[wiring.Wiring] = []

    async def handler(scope: Any, receive: Any, send: Any) -> None:
        seen.append(wiring.wiring())

    first = wiring.bootstrap(config.load_settings(world_url="http://127.0.0.1:9"), decider=OfflinePolicy())
    second = wiring.bootstrap(config.load_settings(world_url="http://127.0.0.1:10"))
    for parts in (first, second):
        await service_app._served(handler, parts)({"type": "http"}, None, None)
    assert seen == [first, second]
    with pytest.raises(RuntimeError, match="no app is serving here"):
        wiring.wiring()  # and none leaks out of a request


def test_the_factory_takes_the_parts_it_is_given() -> None:
    parts = wiring.bootstrap(config.load_settings(world_url="http://127.0.0.1:9"))
    assert callable(service_app.create_app(parts))


def test_the_launchers_run_the_factory_under_either_server() -> None:
    app = "replenisher.durable.app:create_app()"
    hypercorn = server_argv("hypercorn", app, "127.0.0.1", 9080)
    assert app in hypercorn, "hypercorn evaluates the call itself"
    granian = server_argv("granian", app, "127.0.0.1", 9080)
    assert granian[-2:] == ["--factory", "replenisher.durable.app:create_app"]
    assert server_argv("granian", "stack_fixture_app:app", "127.0.0.1", 9080)[-1] == "stack_fixture_app:app"


def test_the_launchers_give_either_server_the_service_workers_asked_for() -> None:
    app = "replenisher.durable.app:create_app()"
    one = server_argv("hypercorn", app, "127.0.0.1", 9080)
    assert one[one.index("-w") + 1] == "0", "one worker: in hypercorn's own process, as always"
    two = server_argv("hypercorn", app, "127.0.0.1", 9080, workers=2)
    assert two[two.index("-w") + 1] == "2"
    for workers in (1, 3):
        granian = server_argv("granian", app, "127.0.0.1", 9080, workers=workers)
        assert granian[granian.index("--workers") + 1] == str(workers)
    with pytest.raises(ValueError, match="at least one"):
        server_argv("granian", app, "127.0.0.1", 9080, workers=0)


def test_restate_is_told_to_spread_its_calls_only_when_the_service_has_several_workers() -> None:
    assert restate_env_for_workers(1) == {}, "one worker: Restate's defaults"
    assert restate_env_for_workers(2) == {STREAMS_PER_CONNECTION: "1"}
