"""Three restate-server nodes as one cluster on this machine: loopback, distinct ports and data dirs.

    python deploy/cluster/local_cluster.py up          # start n1, n2, n3 and wait until the cluster serves
    python deploy/cluster/local_cluster.py status      # each node: pid, health, what its admin API sees
    python deploy/cluster/local_cluster.py kill n2     # SIGKILL one node (a crash)
    python deploy/cluster/local_cluster.py start n2    # bring it back on its data; it rejoins
    python deploy/cluster/local_cluster.py down        # stop all (the data stays for the next `up`)

Add `--port-offset N` to every command to shift all ports by N when the defaults are taken.

Each node runs with its file beside this script (node1.toml ... node3.toml): replicated
metadata on all three nodes, the replicated log, replication factor 2. The processes are
detached; their pids are kept in <state-dir>/cluster.json so another invocation can stop
them. Ingress and admin of n1 are on :18080 and :19070 (n2 :28080/:29070, n3 :38080/:39070);
register the service with any node's admin API.

The tests import this module and pass other ports (free ones) and a temporary state dir.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlparse

import httpx
from pydantic import BaseModel, ConfigDict

from replenisher.stack.ports import LOOPBACK, RestatePorts
from replenisher.stack.processes import (
    DEFAULT_STOP_TIMEOUT,
    ProcessFailedError,
    RestateServer,
    http_ok,
    pid_runs,
    restate_ready,
    terminate_pid,
)

HERE = Path(__file__).resolve().parent
NODE_FILES = tuple(HERE / f"node{i}.toml" for i in (1, 2, 3))
DEFAULT_STATE_DIR = Path(".stack/cluster")
STATE_FILE = "cluster.json"
# Three nodes electing a metadata leader and provisioning partitions and logs take a while.
CLUSTER_READY_TIMEOUT = 120.0


class ClusterError(RuntimeError):
    pass


class NodeSpec(BaseModel):
    """One node: its name, id, config file, and the ports it listens on."""

    model_config = ConfigDict(frozen=True)

    name: str
    node_id: int
    config_file: Path
    ports: RestatePorts

    @classmethod
    def from_file(cls, path: Path) -> NodeSpec:
        config = tomllib.loads(path.read_text())
        return cls(
            name=config["node-name"],
            node_id=config["force-node-id"],
            config_file=path,
            ports=RestatePorts(
                ingress=_port(config["ingress"]["bind-address"]),
                admin=_port(config["admin"]["bind-address"]),
                node=_port(config["bind-address"]),
            ),
        )

    def on_ports(self, ports: RestatePorts) -> NodeSpec:
        return self.model_copy(update={"ports": ports})

    @property
    def fabric_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.node}"

    @property
    def ingress_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.ingress}"

    @property
    def admin_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.admin}"


def _port(address: str) -> int:
    port = urlparse(address if "://" in address else f"tcp://{address}").port
    if port is None:
        raise ClusterError(f"no port in address {address!r}")
    return port


def default_specs(port_offset: int = 0) -> list[NodeSpec]:
    specs = [NodeSpec.from_file(path) for path in NODE_FILES]
    return [s.on_ports(RestatePorts(**{k: v + port_offset for k, v in s.ports.model_dump().items()})) for s in specs]


class ClusterNode(RestateServer):
    """One node's process. Ready when it serves its own ingress and admin API; whether the
    cluster as a whole serves is `LocalCluster.wait_serving`."""

    def __init__(
        self,
        spec: NodeSpec,
        peers: Sequence[NodeSpec],
        state_dir: Path,
        extra_env: Mapping[str, str] | None = None,
        binary: Path | None = None,
    ) -> None:
        self.spec = spec
        env = {
            # The file's addresses, restated so that other ports (the tests') stay consistent.
            "RESTATE_ADVERTISED_ADDRESS": spec.fabric_url,
            "RESTATE_METADATA_CLIENT__ADDRESSES": "[" + ",".join(p.fabric_url for p in peers) + "]",
            **(extra_env or {}),
        }
        super().__init__(
            spec.ports,
            state_dir,
            env,
            log_path=state_dir / "logs" / f"{spec.name}.log",
            config_file=spec.config_file,
            binary=binary,
            node_name=spec.name,
        )
        self.name = f"restate-server {spec.name}"

    def is_ready(self) -> bool:
        return http_ok(f"{self.admin_url}/health") and http_ok(f"{self.ingress_url}/restate/health")

    def serves_cluster(self) -> bool:
        """Whether this node answers calls and queries that touch every partition."""
        return restate_ready(self.admin_url, self.ingress_url)

    def metadata_members(self) -> list[int]:
        """Node ids of the metadata store's members, as this node's admin API reports them."""
        response = httpx.get(f"{self.admin_url}/cluster-health", timeout=5.0)
        response.raise_for_status()
        return sorted(response.json()["metadata_cluster_health"]["members"])


class NodeRecord(BaseModel):
    name: str
    pid: int
    executable: str


class ClusterState(BaseModel):
    nodes: list[NodeRecord]


class LocalCluster:
    def __init__(
        self,
        state_dir: Path = DEFAULT_STATE_DIR,
        specs: Sequence[NodeSpec] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.specs = list(specs or default_specs())
        self.nodes = [ClusterNode(spec, self.specs, self.state_dir, extra_env) for spec in self.specs]

    def node(self, name: str) -> ClusterNode:
        for node in self.nodes:
            if node.spec.name == name:
                return node
        raise ClusterError(f"no node {name!r}; the nodes are {', '.join(n.spec.name for n in self.nodes)}")

    @property
    def first(self) -> ClusterNode:
        return self.nodes[0]

    def start(self, timeout: float = CLUSTER_READY_TIMEOUT) -> None:
        """Start every node (they need each other for a metadata quorum), then wait until the
        cluster is provisioned and every node serves."""
        try:
            for node in self.nodes:
                node.start()
            for node in self.nodes:
                node.wait_ready(timeout)
            self.wait_serving(self.nodes, timeout)
        except Exception:
            self.stop()
            raise

    def wait_serving(self, nodes: Sequence[ClusterNode], timeout: float = CLUSTER_READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(nodes)
        while waiting:
            waiting = [n for n in waiting if not n.serves_cluster()]
            for node in waiting:
                if not node.running:
                    raise ProcessFailedError(f"{node.name} exited; log {node.log_path}:\n{node.log_tail()}")
            if waiting and time.monotonic() >= deadline:
                names = ", ".join(n.spec.name for n in waiting)
                raise ProcessFailedError(f"{names} not serving the cluster after {timeout:.0f}s")
            if waiting:
                time.sleep(0.2)

    def kill(self, name: str) -> None:
        self.node(name).kill()

    def restart(self, name: str, timeout: float = CLUSTER_READY_TIMEOUT) -> ClusterNode:
        """Start a node again on its data and wait until it serves the cluster again."""
        node = self.node(name)
        node.stop()
        node.start()
        node.wait_ready(timeout)
        self.wait_serving([node], timeout)
        return node

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()

    # --- detached use from the command line ----------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    def read_state(self) -> ClusterState:
        try:
            return ClusterState.model_validate_json(self.state_file.read_text())
        except FileNotFoundError:
            return ClusterState(nodes=[])

    def write_state(self, state: ClusterState) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(state.model_dump_json(indent=2))
        os.replace(tmp, self.state_file)

    def record(self, node: ClusterNode) -> None:
        state = self.read_state()
        others = [r for r in state.nodes if r.name != node.spec.name]
        assert node.pid is not None
        self.write_state(
            ClusterState(nodes=[*others, NodeRecord(name=node.spec.name, pid=node.pid, executable=node.argv[0])])
        )

    def live_pid(self, name: str) -> int | None:
        record = next((r for r in self.read_state().nodes if r.name == name), None)
        return record.pid if record and pid_runs(record.pid, record.executable) else None


def _up(cluster: LocalCluster) -> int:
    running = [n.spec.name for n in cluster.nodes if cluster.live_pid(n.spec.name)]
    if running:
        print(f"already running: {', '.join(running)} (see `status`, or `down` first)", file=sys.stderr)
        return 1
    cluster.start()
    for node in cluster.nodes:
        cluster.record(node)
    _print_status(cluster)
    return 0


def _down(cluster: LocalCluster) -> int:
    for record in cluster.read_state().nodes:
        if pid_runs(record.pid, record.executable):
            terminate_pid(record.pid, signal.SIGTERM, DEFAULT_STOP_TIMEOUT)
            print(f"stopped {record.name} (pid {record.pid})")
    cluster.write_state(ClusterState(nodes=[]))
    return 0


def _kill(cluster: LocalCluster, name: str) -> int:
    cluster.node(name)  # a known name
    pid = cluster.live_pid(name)
    if pid is None:
        print(f"{name} is not running", file=sys.stderr)
        return 1
    os.killpg(pid, signal.SIGKILL)
    print(f"killed {name} (pid {pid})")
    return 0


def _start(cluster: LocalCluster, name: str) -> int:
    if cluster.live_pid(name):
        print(f"{name} is already running", file=sys.stderr)
        return 1
    node = cluster.node(name)
    node.start()
    node.wait_ready(CLUSTER_READY_TIMEOUT)
    cluster.wait_serving([node])
    cluster.record(node)
    _print_status(cluster)
    return 0


def _print_status(cluster: LocalCluster) -> None:
    for node in cluster.nodes:
        pid = cluster.live_pid(node.spec.name)
        if pid is None:
            print(f"{node.spec.name}  down")
            continue
        try:
            members = node.metadata_members()
            serving = "answers" if node.serves_cluster() else "does not answer (yet)"
        except httpx.HTTPError as exc:
            members, serving = [], f"admin API unreachable ({type(exc).__name__})"
        print(
            f"{node.spec.name}  pid {pid}  ingress {node.ingress_url}  admin {node.admin_url}  "
            f"{serving} queries over every partition  metadata members {members}  log {node.log_path}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "kill", "start"])
    parser.add_argument("node", nargs="?", help="n1, n2 or n3 (kill, start)")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument(
        "--port-offset", type=int, default=0, help="added to every port in the node files (when those are taken)"
    )
    args = parser.parse_args(argv)
    cluster = LocalCluster(args.state_dir, default_specs(args.port_offset))
    try:
        if args.command in ("kill", "start"):
            if not args.node:
                parser.error(f"{args.command} needs a node name")
            return _kill(cluster, args.node) if args.command == "kill" else _start(cluster, args.node)
        if args.command == "up":
            return _up(cluster)
        if args.command == "down":
            return _down(cluster)
        _print_status(cluster)
        return 0
    except (ClusterError, ProcessFailedError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
