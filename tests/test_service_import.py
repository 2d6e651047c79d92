"""What a service process imports at start: the suites start a hundred or more per pass, so what
each loads is paid for again and again (as is every operator's restart)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from replenisher.stack.runtime import DockerRuntime, RuntimeUnavailableError

REPO_ROOT = Path(__file__).parent.parent


def loaded_by(module: str, *watched: str) -> set[str]:
    """Which of `watched` a fresh interpreter has loaded once it has imported `module`."""
    code = f"import sys, {module}; print(' '.join(m for m in {watched!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return set(done.stdout.split())


def test_testcontainers_is_its_own_extra_not_part_of_dev() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any(d.startswith("testcontainers") for d in extras["dev"]), extras["dev"]
    assert any(d.startswith("testcontainers") for d in extras["docker"]), extras


@pytest.mark.skipif(
    importlib.util.find_spec("testcontainers") is not None,
    reason="the docker extra is installed here: the Restate SDK then imports its test harness, by design",
)
def test_the_service_does_not_load_the_sdks_test_harness() -> None:
    assert loaded_by("replenisher.durable.app", "testcontainers", "docker", "restate.harness") == set()
    # The control: the SDK's package itself is loaded, so the check above looks at the right process.
    assert loaded_by("replenisher.durable.app", "restate") == {"restate"}


def test_the_docker_runtime_without_testcontainers_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "testcontainers", None)
    monkeypatch.setitem(sys.modules, "testcontainers.core.container", None)
    with pytest.raises(RuntimeUnavailableError, match=r"pip install -e '\.\[dev,docker\]'"):
        DockerRuntime.check_available()
