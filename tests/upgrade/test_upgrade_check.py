"""`replenisher upgrade-check` through real processes: a corpus made by this code, then checked.

The corpus comes from a private stack (tests/upgrade/make_corpus.py, two runs at each kind of wait);
the check runs as an operator runs it, the CLI in a subprocess, with its own private restate-server on
a copy. This code replays every waiting run (diverged=0). Positive controls: the same corpus against
a candidate with a step renamed, and one with a step added before every wait, must report the runs
they break, at the journal command Restate names, and exit 1. Bad input: exit 2 or 3 with a line
saying what to do, and the source left as it was.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from e2e.scenario import Scenario
from replenisher.stack.local import Stack, StackConfig
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.upgrade.corpus import MANIFEST, CorpusManifest
from support import COMMITTED_CORPUS, REPO_ROOT
from upgrade.make_corpus import make

pytestmark = [
    pytest.mark.e2e,
    # The first test a worker runs makes the corpus (its fixture: a stack driving runs to each wait, about
    # 100 s in CI, each wait bounded at 90 s), then checks it (a private Restate and candidate, each start
    # bounded at 60 s, the replay's settling at 120 s): past the suite's 180 s on a loaded machine.
    pytest.mark.timeout(600),
    # The check replays every run's whole journal itself; `make test`'s always-replay pass over the e2e
    # tests would only make the corpus again with more suspensions.
    pytest.mark.skipif(
        bool(os.environ.get("REPLENISHER_TEST_ALWAYS_REPLAY")), reason="the check is a replay of its own"
    ),
]

CLI = Path(sys.executable).parent / "replenisher"
SUMMARY = re.compile(
    r"^upgrade-check: invocations=(?P<n>\d+) replayed=(?P<r>\d+) diverged=(?P<d>\d+) outside_calls=(?P<c>\d+)$"
)
KINDS = ("approval", "reminder", "escalation", "reply", "goods")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made once a session: pytest-xdist's workers share it (their base temps share a parent)."""
    root = tmp_path_factory.getbasetemp()
    shared = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "upgrade-corpus"
    shared.mkdir(exist_ok=True)
    out = shared / "corpus.tar.gz"
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            make(out, shared / "work", per_kind=2)
    return out


def upgrade_check(*args: str) -> subprocess.CompletedProcess[str]:
    # The planted candidates are modules of this suite: the candidate process imports them from the repo.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [str(CLI), "upgrade-check", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def summary(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    found = SUMMARY.match(last)
    assert found, f"no summary line; stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return {k: int(v) for k, v in found.groupdict().items()}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_this_code_replays_every_waiting_run_of_the_corpus(corpus: Path) -> None:
    before = digest(corpus)
    done = upgrade_check(str(corpus))
    counts = summary(done)
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts["d"] == 0 and counts["r"] == counts["n"]
    # Every kind of wait is among the runs replayed.
    replayed = [line for line in done.stdout.splitlines() if line.startswith("replayed")]
    for kind in KINDS:
        assert any(f"SKU-{kind}" in line for line in replayed), f"no run waiting at {kind} was replayed:\n{done.stdout}"
    assert counts["n"] >= 2 * len(KINDS)
    assert digest(corpus) == before, "the check changed its source"


@pytest.mark.parametrize(
    ("app", "planted"),
    [
        ("tests.upgrade.planted:renamed_step_app()", "_renamed"),
        ("tests.upgrade.planted:step_before_wait_app()", "planted_step"),
    ],
    ids=["step-renamed", "step-added-before-a-wait"],
)
def test_a_planted_incompatible_change_is_reported_run_by_run(corpus: Path, app: str, planted: str) -> None:
    done = upgrade_check(str(corpus), "--candidate-app", app)
    counts = summary(done)
    assert done.returncode == 1, done.stdout + done.stderr
    diverged = [line for line in done.stdout.splitlines() if line.startswith("DIVERGED")]
    assert counts["d"] == len(diverged) > 0
    # Every replenishment took a step and waited since, so the change breaks each one's replay: a journal
    # mismatch at the command the candidate changed, as Restate reports it. (A SKU agent's handlers
    # take no step of the loop: they replay.)
    runs = [line for line in done.stdout.splitlines() if " Replenish/" in line]
    assert len(runs) >= 2 * len(KINDS)
    assert all(line.startswith("DIVERGED") for line in runs), done.stdout
    for line in diverged:
        assert "RT0016" in line and planted in line, line


def test_no_such_data_dir_is_exit_2(tmp_path: Path) -> None:
    done = upgrade_check(str(tmp_path / "missing"))
    assert done.returncode == 2
    assert "no such data dir" in done.stderr


def test_data_from_another_restate_version_is_exit_3(corpus: Path, tmp_path: Path) -> None:
    with tarfile.open(corpus) as archive:
        archive.extractall(tmp_path, filter="data")
    manifest = tmp_path / MANIFEST
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "restate_version": "1.6.2"}))
    done = upgrade_check(str(tmp_path))
    assert done.returncode == 3
    assert "written by Restate 1.6.2" in done.stderr and "regenerate the corpus" in done.stderr


def test_a_candidate_that_does_not_start_is_exit_3(corpus: Path) -> None:
    done = upgrade_check(str(corpus), "--candidate-app", "tests.upgrade.no_such_module:create_app()")
    assert done.returncode == 3
    assert "the candidate (tests.upgrade.no_such_module:create_app()) did not start" in done.stderr


def test_a_source_and_from_stack_together_is_exit_2(corpus: Path) -> None:
    done = upgrade_check(str(corpus), "--from-stack")
    assert done.returncode == 2 and "one of them" in done.stderr


def test_a_served_deployment_address_stops_the_check_before_restate_starts(corpus: Path, tmp_path: Path) -> None:
    """Were the address the data's deployment records served (the stack the data came from, still
    running), Restate on the copy would send that process the runs whose timers fell due. Refused.

    This copy's manifest names an address of the test's own: the shared corpus's is never served
    here, or the other tests using it at the same time (pytest-xdist) would be refused too."""
    with tarfile.open(corpus) as archive:
        archive.extractall(tmp_path, filter="data")
    served = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    uri = f"http://127.0.0.1:{served.server_address[1]}/"
    manifest = CorpusManifest.model_validate_json((tmp_path / MANIFEST).read_text())
    (tmp_path / MANIFEST).write_text(manifest.model_copy(update={"deployments": [uri]}).model_dump_json())
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        done = upgrade_check(str(tmp_path))
    finally:
        served.shutdown()
        served.server_close()
    assert done.returncode == 3
    assert f"something answers at {uri}" in done.stderr and "make down" in done.stderr
    assert "upgrade-check:" not in done.stdout


COMMITTED = COMMITTED_CORPUS


def test_the_committed_corpus_holds_thirty_waiting_runs_and_a_planted_change_breaks_them() -> None:
    """`make upgrade-check` (CI) shows this code replays the committed corpus; here, that a change
    that cannot replay it is caught on it too, across every kind of wait it holds."""
    assert COMMITTED.stat().st_size < 1.5 * 1024 * 1024, "the corpus grew: see tests/fixtures/upgrade/README.md"
    done = upgrade_check(str(COMMITTED), "--candidate-app", "tests.upgrade.planted:step_before_wait_app()")
    counts = summary(done)
    assert done.returncode == 1, done.stdout + done.stderr
    assert counts["n"] >= 30
    diverged = [line for line in done.stdout.splitlines() if line.startswith("DIVERGED")]
    for kind in KINDS:
        assert any(f"SKU-{kind}" in line for line in diverged), f"no run waiting at {kind} diverged:\n{done.stdout}"


@pytest.mark.slow
def test_from_stack_refuses_a_running_stack_and_checks_its_runs_once_it_is_stopped(tmp_path: Path) -> None:
    config = StackConfig(
        state_dir=tmp_path / "stack",
        restate=RestatePorts.free(),
        service_port=free_port(),
        world_port=free_port(),
        inbound_port=free_port(),
        config_file=REPO_ROOT / "restate.toml",
    )
    stack = Stack(config)
    stack.up()
    try:
        run = asyncio.run(_waiting_for_approval(config))
        running = upgrade_check("--from-stack", "--state-dir", str(config.state_dir))
        assert running.returncode == 3, running.stdout + running.stderr
        assert "is running: stop it with `make down`" in running.stderr
        assert stack.is_up(), "the check must leave a running stack alone"
    finally:
        stack.down()
    done = upgrade_check("--from-stack", "--state-dir", str(config.state_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    counts = summary(done)
    assert counts["n"] >= 1 and counts["d"] == 0
    assert any(line.startswith("replayed") and f"Replenish/{run}/run" in line for line in done.stdout.splitlines())


async def _waiting_for_approval(config: StackConfig) -> str:
    async with (
        httpx.AsyncClient(base_url=config.ingress_url, timeout=30.0) as ingress,
        httpx.AsyncClient(base_url=config.world_url, timeout=30.0) as world,
    ):
        scenario = Scenario(ingress, world, "from-stack")
        await scenario.setup()
        run = str((await scenario.check())["started"])
        await scenario.pending_approval(within=60)
        await scenario.waiting_for(run, "wait_for_approval", within=60)
        return run
