"""scripts/claude_run.py: the same run against the real API when a key is present, a clear skip otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from anthropic_stand_in import STAND_IN_APP
from support import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "claude_run.py"


def run_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT
    )


def test_without_a_key_the_script_says_it_skipped() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = run_script("--poison", env=env)
    assert done.returncode == 0, done.stderr
    assert "ANTHROPIC_API_KEY is not set: skipped" in done.stdout


@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"), reason="needs ANTHROPIC_API_KEY: calls the real API")
def test_against_the_real_api_a_poisoned_run_still_buys_at_the_approved_price() -> None:
    done = run_script("--poison", "--budget", "0.30", env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gates held" in done.stdout and "outcome: received" in done.stdout


def test_the_script_runs_whole_against_a_stand_in_api(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from replenisher.stack.ports import free_port
    from replenisher.stack.processes import HypercornApp

    api = HypercornApp(
        STAND_IN_APP,
        free_port(),
        {"PYTHONPATH": str(REPO_ROOT)},
        name="fake-anthropic-script",
        log_path=tmp_path / "fake-anthropic.log",
    )
    try:
        api.start()
        api.wait_ready()
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-stand-in", "ANTHROPIC_BASE_URL": api.url}
        done = run_script("--poison", env=env)
    finally:
        api.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "outcome: received" in done.stdout and "gates held" in done.stdout
    assert "read_supplier_reply" in done.stdout and "model calls" in done.stdout
