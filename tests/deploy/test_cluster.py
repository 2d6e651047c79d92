"""The three-node cluster from deploy/cluster survives losing each node in turn, with nothing lost or doubled.

Many replenishments run against the cluster. Each node is SIGKILLed in turn (n2, n3, then n1,
the node that provisioned the cluster) while a third of the runs have just been approved and
are executing steps and the rest wait for their approval (suspended); each is restarted and
must rejoin before the next dies: the cluster survives only if it really came back (the
metadata store and the log each need two live nodes out of three). Every run must end with
the goods received, one order per run at the supplier, and no message left unconsumed.

Nobody talks to one node: the test's load, the agent's callers (the world's pushes, through
the inbound endpoint `replenisher.inbound`) reach the cluster through one ingress address,
the fail-over proxy (`replenisher.stack.failover`), which sends each request to a live node.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from e2e.scenario import Scenario
from replenisher.inbound.signing import new_secrets, write_secrets
from replenisher.stack.admin import Admin
from replenisher.stack.install import ensure_restate
from replenisher.stack.local import INBOUND_APP
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import HypercornApp
from support import NO_DOOR_LIMITS, REPO_ROOT, RESTATE_TEST_ENV, eventually, inbound_env, service_env

from .stacks import SUMMARY_LINES, load_script, register, start_service, start_world, stop_all

# Not `e2e`: `make test`'s always-replay pass over the e2e tests is no place for this slow test.
pytestmark = pytest.mark.cluster

local_cluster = load_script(REPO_ROOT / "deploy" / "cluster" / "local_cluster.py", "local_cluster")

RUNS = int(os.environ.get("REPLENISHER_CLUSTER_RUNS", "24"))
SUMMARY_ENV = "REPLENISHER_CLUSTER_SUMMARY"
# About a minute of three Restate nodes: kept out of `make test`, which is long enough already.
ENABLE_ENV = "REPLENISHER_CLUSTER_TEST"
# Longer days than the other e2e tests: a fail-over takes seconds, and a run's own waits
# (supplier reply, goods) must not time out because of it.
DAY_SECONDS = 1.0
_HTTP = httpx.Timeout(30.0, connect=5.0)
_ACTIVE = "('running', 'backing-off', 'suspended', 'ready', 'inboxed', 'scheduled', 'paused')"


def test_node_files_say_what_the_cluster_needs_and_restate_reads_every_key() -> None:
    # restate-server ignores keys it does not know; its --dump-config shows what it took.
    server = str(ensure_restate().server)
    for spec in local_cluster.default_specs():
        mine = tomllib.loads(spec.config_file.read_text())
        dumped = subprocess.run(
            [server, "--config-file", str(spec.config_file), "--dump-config"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        taken = tomllib.loads(dumped)
        assert mine["default-replication"] == taken["default-replication"] == 2
        assert taken["bifrost"]["default-provider"] == "replicated"
        assert taken["metadata-client"]["type"] == "replicated"
        assert len(taken["metadata-client"]["addresses"]) == 3
        for key in ("cluster-name", "node-name", "force-node-id", "auto-provision", "default-num-partitions"):
            assert taken[key] == mine[key], key
        assert taken["advertised-address"].rstrip("/") == mine["advertised-address"]
        assert taken["ingress"]["bind-address"] == mine["ingress"]["bind-address"]
        assert taken["admin"]["bind-address"] == mine["admin"]["bind-address"]
    provisioners = [
        s.name for s in local_cluster.default_specs() if tomllib.loads(s.config_file.read_text())["auto-provision"]
    ]
    assert provisioners == ["n1"]


# --- the cluster under load -----------------------------------------------------------------


@dataclass
class ClusterStack:
    cluster: Any
    ingress: Any
    inbound: Any
    world: Any
    service: Any
    kills: list[dict[str, Any]] = field(default_factory=list)


FAILOVER_APP = "replenisher.stack.failover:create_app()"
KILL_ORDER = ("n2", "n3", "n1")


def _started(app: HypercornApp) -> HypercornApp:
    app.start()
    try:
        app.wait_ready()
    except Exception:
        app.stop()
        raise
    return app


@pytest.fixture(scope="module")
def cluster_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterStack]:
    root = tmp_path_factory.mktemp("cluster")
    specs = [spec.on_ports(RestatePorts.free()) for spec in local_cluster.default_specs()]
    cluster = local_cluster.LocalCluster(root / "state", specs, RESTATE_TEST_ENV)
    ingress = inbound = world = service = None
    secrets = root / "party-secrets.json"
    write_secrets(secrets, new_secrets())
    try:
        cluster.start()
        upstreams = ",".join(node.ingress_url for node in cluster.nodes)
        world_port = free_port()  # the door reads the world's ERP, and the world pushes through the door
        ingress = _started(
            HypercornApp(
                FAILOVER_APP,
                free_port(),
                {"REPLENISHER_FAILOVER_UPSTREAMS": upstreams},
                name="failover",
                log_path=root / "failover.log",
            )
        )
        inbound = _started(
            HypercornApp(
                INBOUND_APP,
                free_port(),
                inbound_env(ingress.url, secrets, f"http://127.0.0.1:{world_port}", NO_DOOR_LIMITS),
                name="inbound",
                log_path=root / "inbound.log",
            )
        )
        world_extra = {
            "WORLD_DAY_SECONDS": f"{DAY_SECONDS:g}",
            "WORLD_INBOUND_URL": inbound.url,
            "WORLD_PARTY_SECRETS_FILE": str(secrets),
        }
        world = start_world(ingress.url, root / "world.log", world_extra, port=world_port)
        env = service_env(
            world.url,
            {
                "REPLENISHER_DAY_SECONDS": f"{DAY_SECONDS:g}",
                # Approvals come only after the kills and restarts: the run must still be waiting.
                "REPLENISHER_APPROVAL_WAIT_DAYS": "600",
            },
        )
        service = start_service(env, root / "replenisher.log")
        register(cluster.first.admin_url, service.url)
        yield ClusterStack(cluster, ingress, inbound, world, service)
    finally:
        stop_all(service, world, inbound, ingress)
        cluster.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def clients(cluster_stack: ClusterStack) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    async with (
        httpx.AsyncClient(base_url=cluster_stack.ingress.url, timeout=_HTTP) as ingress,
        httpx.AsyncClient(base_url=cluster_stack.world.url, timeout=_HTTP) as world,
    ):
        yield ingress, world


async def _runs_by_status(admin: Admin) -> dict[str, int]:
    rows = await admin.asql(
        "SELECT status, count(*) AS n FROM sys_invocation "
        f"WHERE target_service_name = 'Replenish' AND target_handler_name = 'run' AND status IN {_ACTIVE} "
        "GROUP BY status"
    )
    return {r["status"]: r["n"] for r in rows}


def _live_admin(stack: ClusterStack, dying: str) -> Admin:
    """A node's admin API that is not the one about to die (all three are up between kills)."""
    return Admin(next(n for n in stack.cluster.nodes if n.spec.name != dying).admin_url)


async def _failovers(stack: ClusterStack) -> int:
    async with httpx.AsyncClient(base_url=stack.ingress.url, timeout=_HTTP) as proxy:
        return (await proxy.get("/failover/health")).json()["failovers"]


async def _approve_and_kill(stack: ClusterStack, batch: list[tuple[Scenario, str]], node: str) -> None:
    """Approve `batch`, and once approved runs are executing, SIGKILL `node`; then bring it back."""
    admin = _live_admin(stack, node)
    await asyncio.gather(*(s.decide(po, approved=True) for s, po in batch))

    async def executing() -> dict[str, int] | None:
        counts = await _runs_by_status(admin)
        return counts if counts.get("running", 0) + counts.get("backing-off", 0) > 0 else None

    at_kill = await eventually(executing, timeout=20, interval=0.05, what="approved runs to be executing")
    before = await _failovers(stack)
    await asyncio.to_thread(stack.cluster.kill, node)

    # With the node down, every SKU of the batch still answers at the one ingress address.
    scenario = batch[0][0]
    statuses = await asyncio.gather(*(s.status() for s, _ in batch))
    assert [st["sku"] for st in statuses] == [s.sku for s, _ in batch]
    stack.kills.append({"node": node, "runs": at_kill, "failovers": await _failovers(stack) - before})

    # Runs go on without the node: every approved run of the batch gets its order to its
    # supplier (the world's records) while the node is down, and only then does it come back.
    async def ordered() -> bool:
        return all(await asyncio.gather(*(s.orders() for s, _ in batch)))

    await eventually(ordered, timeout=60, what=f"the batch's orders placed with {node} down")
    restarted = await asyncio.to_thread(stack.cluster.restart, node)
    # Rejoined: its own admin API answers queries that touch every partition (restart()
    # waited for that), it sees the full metadata store, and its own ingress serves calls.
    assert restarted.metadata_members() == [1, 2, 3]
    async with httpx.AsyncClient(base_url=restarted.ingress_url, timeout=_HTTP) as ingress:
        response = await ingress.get(f"/SkuAgent/{scenario.sku}/status")
    assert response.status_code == 200 and response.json()["sku"] == scenario.sku


def _write_summary(line: str) -> None:
    SUMMARY_LINES.append(line)  # printed at the end of the pytest run (see conftest.py)
    target = os.environ.get(SUMMARY_ENV)
    if target:
        Path(target).write_text(line + "\n")


@pytest.mark.skipif(
    not os.environ.get(ENABLE_ENV),
    reason=f"run by `make cluster-test` (CI runs it after `make test`), or set {ENABLE_ENV}=1",
)
@pytest.mark.timeout(600)
async def test_replenishments_survive_node_kills_with_no_duplicates_and_nothing_lost(
    cluster_stack: ClusterStack, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    ingress, world = clients
    admin = _live_admin(cluster_stack, "none")
    scenarios = [Scenario(ingress, world, f"cluster-{i}") for i in range(RUNS)]
    await asyncio.gather(*(s.setup(reply_days=0.5, lead_days=2) for s in scenarios))
    started = await asyncio.gather(*(s.check() for s in scenarios))
    run_ids = [r["started"] for r in started]
    assert all(run_ids), started
    requests = await asyncio.gather(*(s.pending_approval(within=60) for s in scenarios))
    pos = [r["po_number"] for r in requests]

    # Every run waits for its manager, suspended: no invocation is held open for it.
    async def all_suspended() -> bool:
        return (await _runs_by_status(admin)).get("suspended", 0) == RUNS

    await eventually(all_suspended, timeout=30, what="every run to suspend while waiting for approval")

    third = RUNS // len(KILL_ORDER)
    pairs = list(zip(scenarios, pos, strict=True))
    batches = [pairs[i * third : (i + 1) * third] for i in range(len(KILL_ORDER) - 1)]
    batches.append(pairs[(len(KILL_ORDER) - 1) * third :])
    outcomes: list[dict[str, Any] | None] = [None] * RUNS
    try:
        # Each node dies while a third of the runs execute after their approval and the rest
        # wait; surviving the next kill needs the last one back in the metadata store and log.
        # n1 last: it provisioned the cluster, and it was the node the proxy sent everything to.
        for node, batch in zip(KILL_ORDER, batches, strict=True):
            await _approve_and_kill(cluster_stack, batch, node)

        async def outcome(i: int) -> None:
            outcomes[i] = await scenarios[i].outcome(run_ids[i], within=180)

        await asyncio.gather(*(outcome(i) for i in range(RUNS)), return_exceptions=True)
    finally:
        audit = await _audit(scenarios, run_ids, pos, outcomes)
        print(f"kills: {cluster_stack.kills}; order submissions: {audit.submissions} for {RUNS} orders")
        _write_summary(
            f"cluster: runs={RUNS} node_kills={len(cluster_stack.kills)} "
            f"duplicates={audit.duplicates} lost={audit.lost}"
        )

    assert [k["node"] for k in cluster_stack.kills] == list(KILL_ORDER)
    first = cluster_stack.kills[0]
    assert first["runs"].get("suspended", 0) >= RUNS - third, f"runs waiting when n2 died: {first}"
    # The positive control of the fail-over: with n1 dead, what reached the ingress went elsewhere.
    assert cluster_stack.kills[-1]["failovers"] > 0, cluster_stack.kills
    assert audit.problems == [], "\n".join(audit.problems)
    assert audit.duplicates == 0 and audit.lost == 0


@dataclass
class Audit:
    duplicates: int = 0
    lost: int = 0
    submissions: int = 0
    problems: list[str] = field(default_factory=list)


async def _audit(
    scenarios: list[Scenario], run_ids: list[str], pos: list[str], outcomes: list[dict[str, Any] | None]
) -> Audit:
    """Duplicates: orders beyond one per run at the supplier (a retried submission of the same
    PO is one order). Lost: runs that did not end with their goods booked in, or messages that
    no run consumed."""
    audit = Audit()
    problems = audit.problems
    for scenario, run_id, po, outcome in zip(scenarios, run_ids, pos, outcomes, strict=True):
        orders = await scenario.orders()
        audit.duplicates += max(0, len(orders) - 1)
        audit.submissions += sum(o["submissions"] for o in orders)
        if [o["po_number"] for o in orders] != [po]:
            problems.append(f"{run_id}: orders {[o['po_number'] for o in orders]}, approved {po}")
        status = await scenario.status()
        stock = (await scenario.world.get(f"/erp/stock/{scenario.sku}")).json()
        received = outcome is not None and outcome["outcome"] == "received"
        if not received or status["kept"] or status["runs_started"] != 1 or stock["on_hand"] != 100:
            audit.lost += 1
            problems.append(
                f"{run_id}: outcome {outcome and outcome['outcome']}, kept {status['kept']}, "
                f"runs {status['runs_started']}, on hand {stock['on_hand']}"
            )
    return audit
