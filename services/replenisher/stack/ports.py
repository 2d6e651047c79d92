"""Loopback TCP ports: find free ones, and refuse to start on taken ones."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

LOOPBACK = "127.0.0.1"

# Ports handed out by this process: the OS may return a just-closed port again before
# the process we gave it to has bound it.
_handed_out: set[int] = set()


class PortInUseError(RuntimeError):
    """A port the stack needs is already taken by another process."""


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option the servers use, so a port in TIME_WAIT counts as free, as it is for them.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (and `bind(0)`) as their own."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default
    return low, high


def handed_out() -> frozenset[int]:
    """The ports this process has handed out or reserved: `free_port` gives none of them again."""
    return frozenset(_handed_out)


def reserve(*ports: int) -> None:
    """Never hand these out: addresses something else records (a data copy's deployments, which a
    check refuses to run beside while anything answers there)."""
    _handed_out.update(ports)


FREE_PORTS_VARIABLE = "REPLENISHER_FREE_PORTS"


def free_port_range(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """Where `free_port` picks, `[low, high)`: `REPLENISHER_FREE_PORTS=low-high` when set, else from
    10,000 (1,024 beside a small ephemeral range) up to the kernel's ephemeral range.

    Processes that share a machine and each pick ports (the test suite's workers) give each its own
    range: a port one of them handed a server stays free while that server is down (a crash test,
    a restart), and another process picking the same port would keep the server from starting."""
    value = (os.environ if environ is None else environ).get(FREE_PORTS_VARIABLE)
    if value:
        low_text, _, high_text = value.partition("-")
        try:
            low, high = int(low_text), int(high_text)
        except ValueError:
            low = high = 0
        if not 1024 <= low < high <= 65536:
            raise ValueError(f"{FREE_PORTS_VARIABLE}={value!r}: expected LOW-HIGH with 1024 <= LOW < HIGH <= 65536")
        return low, high
    low, _ = ephemeral_range()
    return (10_000 if low > 12_000 else 1024), low


def free_port(host: str = LOOPBACK) -> int:
    """A port that is free now, not yet given to anyone else by this process, and below the
    kernel's ephemeral range. A server's port from that range can be taken while the server is
    down (a crash test, a restart) by any outgoing connection the kernel numbers with it, even
    one to that very port, which TCP lets connect to itself; then the server cannot start again.
    Within `free_port_range()`.
    """
    floor, top = free_port_range()
    for _ in range(500):
        port = random.randrange(floor, top) if top > floor else _kernel_port(host)
        if port not in _handed_out and port_is_free(port, host):
            _handed_out.add(port)
            return port
    raise RuntimeError(f"could not find a free TCP port in [{floor}, {top}) after 500 attempts")


def _kernel_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
    return port


def ensure_ports_free(ports: Mapping[str, int], host: str = LOOPBACK) -> None:
    """Raise naming every taken port, so the user knows what to stop or reconfigure."""
    taken = [f"{name} port {port}" for name, port in ports.items() if not port_is_free(port, host)]
    if taken:
        raise PortInUseError(
            f"cannot start: {', '.join(taken)} already in use on {host} "
            "(another stack running? try `make down`, or stop whatever listens there)"
        )


def is_listening(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class RestatePorts(BaseModel):
    """The three ports a single restate-server node listens on."""

    model_config = ConfigDict(frozen=True)

    ingress: int = 8080
    admin: int = 9070
    node: int = 5122

    @classmethod
    def free(cls) -> RestatePorts:
        return cls(ingress=free_port(), admin=free_port(), node=free_port())

    def named(self) -> dict[str, int]:
        return {"restate ingress": self.ingress, "restate admin": self.admin, "restate node": self.node}
