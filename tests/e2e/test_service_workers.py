"""The service with two worker processes (`REPLENISHER_SERVICE_WORKERS=2`), on granian and on hypercorn,
in a whole local stack of its own (`replenisher.stack`): Restate's calls reach both workers, and a
replenishment through a crash of the service (every worker killed) and its restart ends as it does
with one worker, judged from the world's records.

Restate talks HTTP/2 to the service; with its defaults it multiplexes every call over one connection,
which one worker accepted, so the other idles. The stack gives restate-server one stream a connection
when the service has several workers (`restate_env_for_workers`); the last test shows what the
default does, so a Restate release that changes it is noticed."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from bench.procfs import connections_by_pid, group_pids, task_cpu_seconds

from e2e.scenario import Scenario
from e2e.test_crashes import calls_so_far
from replenisher.keepalive import RetryDroppedKeepAlive
from replenisher.stack.local import SERVICE_APP, SERVICE_NAME, WORLD_APP, Stack, StackConfig
from replenisher.stack.ports import RestatePorts, free_port
from replenisher.stack.processes import STREAMS_PER_CONNECTION, Server, group_members
from support import (
    HAPPY_PATH,
    REPO_ROOT,
    RESTATE_TEST_ENV,
    SERVICE_TIMING,
    TEST_DAY_SECONDS,
    WORLD_LIMITS,
    eventually,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

WORKERS = 2
CALLS = 480
CONCURRENCY = 32
SKUS = 60
# What tells a worker that serves Restate's calls from one that only holds a connection: the CPU of
# this many of the checks. The idle worker under Restate's default (the last test) spent under
# 0.01 CPU-s, about three checks' worth; with one stream a connection each worker did 13 to 87% of
# the work. How the calls split is not ours to set: Restate's pool picks the connection each call
# takes, and the scheduler which worker accepted it. Beside two busy processes the split was 13/87,
# and once 17/83 with the connections 32/11 the other way round. So the share is not the claim;
# serving is, and the last test checks the same bound from the other side.
SERVING_CALLS = 24


@dataclass
class WorkerStack:
    stack: Stack
    ingress: httpx.AsyncClient
    world: httpx.AsyncClient

    def service_group(self) -> int:
        """The process group of the service: its server's supervisor leads it, its workers are in it."""
        return next(p.pid for p in self.stack.status() if p.name == SERVICE_NAME)

    def service_port(self) -> int:
        return self.stack.config.service_port

    def workers(self) -> set[int]:
        """The server's worker processes: its group but the supervisor and hypercorn's multiprocessing
        resource tracker."""
        group = self.service_group()
        return {
            pid
            for pid in group_members(group)
            if pid != group and b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        }


def _config(state_dir: Path, server: Server, restate_env: dict[str, str]) -> StackConfig:
    return StackConfig(
        state_dir=state_dir,
        restate=RestatePorts.free(),
        service_port=free_port(),
        world_port=free_port(),
        inbound_port=free_port(),
        day_seconds=TEST_DAY_SECONDS,
        catalogue="empty",
        service_app=SERVICE_APP,
        world_app=WORLD_APP,
        config_file=REPO_ROOT / "restate.toml",
        server=server,
        service_workers=WORKERS,
        service_env=SERVICE_TIMING,
        restate_env={**RESTATE_TEST_ENV, **restate_env},
    )


@pytest_asyncio.fixture(loop_scope="session")
async def worker_stack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[WorkerStack]:
    """A whole stack whose service runs `WORKERS` workers under the server the test names (param), with
    restate-server given what the test adds (`restate_env` param, none by default)."""
    server, restate_env = request.param if isinstance(request.param, tuple) else (request.param, {})
    stack = Stack(_config(tmp_path / ".stack", server, restate_env))
    try:
        await asyncio.to_thread(stack.up)
        cfg = stack.config
        async with (
            httpx.AsyncClient(
                base_url=cfg.ingress_url, timeout=30, transport=RetryDroppedKeepAlive(resend_any_reset=True)
            ) as ingress,
            httpx.AsyncClient(
                base_url=cfg.world_url, timeout=30, transport=RetryDroppedKeepAlive(limits=WORLD_LIMITS)
            ) as world,
        ):
            yield WorkerStack(stack, ingress, world)
    finally:
        await asyncio.to_thread(stack.down)


async def checks_under_load(env: WorkerStack) -> tuple[dict[int, float], dict[int, int]]:
    """`CALLS` stock checks of `SKUS` SKUs, `CONCURRENCY` at a time through the ingress: the CPU each of
    the service's processes spent meanwhile, and the connections from Restate each held at the end."""
    supplier = {"name": "Spread", "prices": {}, "lead_days": 2, "reply_days": 1}
    (await env.world.put("/admin/suppliers/spread", json=supplier)).raise_for_status()
    item = {"on_hand": 1000, "safety_stock": 10, "target_stock": 100, "suppliers": ["spread"]}
    skus = [f"SPREAD-{i:03d}" for i in range(SKUS)]
    for sku in skus:
        (await env.world.put(f"/admin/items/{sku}", json=item)).raise_for_status()
    group = env.service_group()
    before = {pid: task_cpu_seconds(pid) for pid in group_pids(group)}
    queue = iter(range(CALLS))

    async def caller() -> None:
        for n in queue:
            answer = await env.ingress.post(f"/SkuAgent/{skus[n % SKUS]}/check")
            assert answer.status_code == 200, answer.text
            assert answer.json()["on_hand"] == 1000

    await asyncio.gather(*(caller() for _ in range(CONCURRENCY)))
    spent = {pid: task_cpu_seconds(pid) - cpu for pid, cpu in before.items()}
    return spent, connections_by_pid(list(before), env.service_port())


@pytest.mark.parametrize("worker_stack", ["granian", "hypercorn"], indirect=True)
async def test_restates_calls_reach_both_workers(worker_stack: WorkerStack) -> None:
    spent, connections = await checks_under_load(worker_stack)
    serving = [pid for pid, n in connections.items() if n]
    assert len(serving) == WORKERS, f"connections from Restate by pid: {connections}"
    total = sum(spent[pid] for pid in serving)
    shares = {pid: round(spent[pid] / total, 2) for pid in serving}
    # Each worker served calls, not one worker alone with the other holding an idle connection.
    per_call = total / CALLS
    assert all(spent[pid] >= SERVING_CALLS * per_call for pid in serving), f"CPU shares of the workers: {shares}"


@pytest.mark.parametrize("worker_stack", ["granian", "hypercorn"], indirect=True)
async def test_a_replenishment_through_a_crash_of_every_worker_ends_received_with_one_order(
    worker_stack: WorkerStack,
) -> None:
    scenario = Scenario(worker_stack.ingress, worker_stack.world, "workers")
    await scenario.setup(on_hand=5, safety_stock=20, target_stock=100, price=4.0)
    run_id = (await scenario.check())["started"]
    approval = await scenario.pending_approval()
    await scenario.waiting_for(run_id, "wait_for_approval")
    before = await calls_so_far(scenario)
    assert before == {"get_stock": 1, "quote": 1, "request_approval": 1, "approval_posts": 1}

    # SIGKILL to the service's whole group: the supervisor and both workers, nothing flushed.
    group = worker_stack.service_group()
    workers_before = worker_stack.workers()
    assert len(workers_before) == WORKERS, f"the service's workers: {workers_before}"
    os.killpg(group, signal.SIGKILL)
    await eventually(lambda: not group_members(group), timeout=15, what=f"service group {group} gone")
    await asyncio.to_thread(worker_stack.stack.restart, "service")
    assert worker_stack.service_group() != group
    restarted = worker_stack.workers()
    assert len(restarted) == WORKERS and not restarted & workers_before, restarted

    await scenario.decide(approval["po_number"], approved=True, up_to=4.0)
    outcome = await scenario.outcome(run_id, within=90)
    assert outcome["outcome"] == "received"
    assert (outcome["quantity_ordered"], outcome["quantity_received"]) == (95, 95)

    # The world's records: nothing before the crash ran again, one order for the one PO, the goods in.
    after = await calls_so_far(scenario)
    for op, n in before.items():
        assert after[op] == n, f"{op} ran again after the service was killed: {before} -> {after}"
    assert [o["po_number"] for o in await scenario.orders()] == [approval["po_number"]]
    stock = (await scenario.world.get(f"/erp/stock/{scenario.sku}")).json()
    assert stock["on_hand"] == 100
    view = await scenario.run_view(run_id)
    assert [turn["tool"] for turn in view["state"]["history"]] == HAPPY_PATH


@pytest.mark.parametrize("worker_stack", [("granian", {STREAMS_PER_CONNECTION: "128"})], indirect=True)
async def test_with_restates_default_streams_one_worker_takes_every_call(worker_stack: WorkerStack) -> None:
    """Why the stack sets the limit: with Restate 1.7's default (128 streams a connection, a new one
    only past 70% of them busy) the same load stays on one connection, so on one worker."""
    spent, connections = await checks_under_load(worker_stack)
    # A connection or two (a second, seen once on the other worker, carried no calls), not one per call.
    assert sum(connections.values()) <= 2, f"connections from Restate by pid: {connections}"
    busiest = max(spent, key=lambda pid: spent[pid])
    assert spent[busiest] / sum(spent.values()) >= 0.9, f"CPU of the service's processes: {spent}"
    # The bound the test above holds each worker to, from the other side: an idle worker is below it.
    per_call = sum(spent.values()) / CALLS
    assert all(spent[pid] < SERVING_CALLS * per_call for pid in spent if pid != busiest), spent
