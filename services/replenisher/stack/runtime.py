"""A Restate runtime for tests: the local binary (default) or a Docker container.

Both expose the same small surface, so an end-to-end test does not care which it got.
Only the binary can be crashed and restarted on the same ports and data; a test that
needs that checks `supports_crash`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from replenisher.stack.install import RESTATE_VERSION
from replenisher.stack.ports import LOOPBACK, RestatePorts
from replenisher.stack.processes import DEFAULT_READY_TIMEOUT, RestateServer, restate_ready

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

RESTATE_IMAGE = f"docker.io/restatedev/restate:{RESTATE_VERSION}"
# How a container reaches services listening on the host (mapped by `extra_hosts`).
DOCKER_HOST_ALIAS = "host.docker.internal"


class RuntimeUnavailableError(RuntimeError):
    """The requested runtime cannot run on this machine."""


@runtime_checkable
class RestateRuntime(Protocol):
    @property
    def ingress_url(self) -> str: ...

    @property
    def admin_url(self) -> str: ...

    @property
    def running(self) -> bool: ...

    supports_crash: bool
    # Where services must listen so that this runtime can reach them.
    service_bind_host: str

    def deployment_uri(self, port: int) -> str: ...

    def start(self) -> None: ...

    def wait_ready(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None: ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...

    def restart(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None: ...


class BinaryRuntime(RestateServer):
    """restate-server as a local process: can be SIGKILLed and restarted on its data."""

    supports_crash = True
    service_bind_host = LOOPBACK

    def deployment_uri(self, port: int) -> str:
        return f"http://{LOOPBACK}:{port}"


class DockerRuntime:
    """restate-server in a throwaway container (needs a Docker engine and testcontainers)."""

    supports_crash = False
    # The container reaches the host through the bridge, not through the host's loopback.
    service_bind_host = "0.0.0.0"

    def __init__(self, extra_env: Mapping[str, str] | None = None, image: str = RESTATE_IMAGE) -> None:
        self.image = image
        self.extra_env = dict(extra_env or {})
        self._container: DockerContainer | None = None
        self._urls: tuple[str, str] | None = None

    @staticmethod
    def check_available() -> None:
        try:
            import docker
            import testcontainers.core.container  # noqa: F401
        except ImportError as exc:
            raise RuntimeUnavailableError(
                "REPLENISHER_TEST_RUNTIME=docker needs testcontainers: "
                f".venv/bin/pip install -e '.[dev,docker]' ({exc})"
            ) from exc
        try:
            docker.from_env().ping()
        except Exception as exc:
            raise RuntimeUnavailableError(
                "REPLENISHER_TEST_RUNTIME=docker but no Docker engine answers "
                f"({type(exc).__name__}: {exc}); unset it to use the local restate-server binary"
            ) from exc

    @property
    def _started(self) -> tuple[DockerContainer, tuple[str, str]]:
        if self._container is None or self._urls is None:
            raise RuntimeError("the Restate container is not started")
        return self._container, self._urls

    @property
    def ingress_url(self) -> str:
        return self._started[1][0]

    @property
    def admin_url(self) -> str:
        return self._started[1][1]

    @property
    def running(self) -> bool:
        if self._container is None:
            return False
        wrapped: Any = self._container.get_wrapped_container()
        wrapped.reload()
        return bool(wrapped.status == "running")

    def deployment_uri(self, port: int) -> str:
        return f"http://{DOCKER_HOST_ALIAS}:{port}"

    def start(self) -> None:
        self.check_available()
        from testcontainers.core.container import DockerContainer

        ports = RestatePorts()
        container = (
            DockerContainer(self.image)
            .with_exposed_ports(ports.ingress, ports.admin)
            .with_envs(RESTATE_DISABLE_TELEMETRY="true", **self.extra_env)
            .with_kwargs(extra_hosts={DOCKER_HOST_ALIAS: "host-gateway"})
        )
        container.start()
        host = container.get_container_host_ip()
        self._container = container
        self._urls = (
            f"http://{host}:{container.get_exposed_port(ports.ingress)}",
            f"http://{host}:{container.get_exposed_port(ports.admin)}",
        )

    def wait_ready(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not restate_ready(self.admin_url, self.ingress_url):
            if time.monotonic() >= deadline:
                raise RuntimeUnavailableError(f"Restate container not ready after {timeout:.0f}s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None

    def kill(self) -> None:
        raise RuntimeUnavailableError("the Docker runtime cannot be crashed and restarted on its data")

    def restart(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        raise RuntimeUnavailableError("the Docker runtime cannot be crashed and restarted on its data")


def make_runtime(
    kind: str,
    data_dir: Path,
    extra_env: Mapping[str, str] | None = None,
    *,
    log_path: Path | None = None,
    config_file: Path | None = None,
) -> RestateRuntime:
    if kind == "binary":
        return BinaryRuntime(RestatePorts.free(), data_dir, extra_env, log_path=log_path, config_file=config_file)
    if kind == "docker":
        return DockerRuntime(extra_env)
    raise RuntimeUnavailableError(f"unknown Restate runtime {kind!r}: use 'binary' or 'docker'")
