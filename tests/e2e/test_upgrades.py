"""Code changes under a running task: a second deployment registered while runs wait.

In-flight runs finish on the code they started on, new runs take the new code, and the
old deployment is removed once nothing is pinned to it, with nothing lost. This needs a
Restate of its own (registering a new deployment changes where every later test's runs
go), so the module starts its own processes on free ports.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin, register_deployment
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import BinaryRuntime
from support import eventually, own_restate_and_world, versioned_service

pytestmark = pytest.mark.e2e


@dataclass
class Upgrade:
    restate: BinaryRuntime
    world: HypercornApp
    log_dir: Path

    def service(self, version: str) -> HypercornApp:
        app = versioned_service(self.world.url, version, self.log_dir / f"{version}.log")
        app.start()
        app.wait_ready()
        return app


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upgrade]:
    base = tmp_path_factory.mktemp("upgrade")
    with own_restate_and_world(base) as (restate, world):
        yield Upgrade(restate, world, base)


@pytest_asyncio.fixture(loop_scope="session")
async def clients(upgrade: Upgrade) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    timeout = httpx.Timeout(30.0, connect=5.0)
    async with (
        httpx.AsyncClient(base_url=upgrade.restate.ingress_url, timeout=timeout) as ingress,
        httpx.AsyncClient(base_url=upgrade.world.url, timeout=timeout) as world,
    ):
        yield ingress, world


async def codes(scenario: Scenario, run_id: str) -> set[str]:
    return {turn["code"] for turn in (await scenario.run_view(run_id))["state"]["history"]}


async def test_in_flight_runs_finish_on_their_code_and_new_runs_take_the_new_code(
    upgrade: Upgrade, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    ingress, world = clients
    admin = Admin(upgrade.restate.admin_url)
    v1 = upgrade.service("v1")
    v2: HypercornApp | None = None
    try:
        v1_id = register_deployment(upgrade.restate.admin_url, upgrade.restate.deployment_uri(v1.port)).id
        waiting = Scenario(ingress, world, "upgrade-inflight")
        await waiting.setup()
        waiting_run = (await waiting.check())["started"]
        request = await waiting.pending_approval()
        await waiting.waiting_for(waiting_run, "wait_for_approval")

        v2 = upgrade.service("v2")
        v2_id = register_deployment(upgrade.restate.admin_url, upgrade.restate.deployment_uri(v2.port)).id
        assert v2_id != v1_id
        assert {d.id for d in admin.deployments()} == {v1_id, v2_id}

        fresh = Scenario(ingress, world, "upgrade-new")
        await fresh.setup()
        fresh_run = (await fresh.check())["started"]
        await fresh.decide((await fresh.pending_approval())["po_number"], approved=True)
        await waiting.decide(request["po_number"], approved=True)

        assert (await waiting.outcome(waiting_run, within=60))["outcome"] == "received"
        assert (await fresh.outcome(fresh_run, within=60))["outcome"] == "received"
        assert await codes(waiting, waiting_run) == {"v1"}, "a run that started on v1 must finish on v1"
        assert await codes(fresh, fresh_run) == {"v2"}

        async def drained() -> bool:
            pinned = await admin.asql(
                "SELECT id, target FROM sys_invocation "
                f"WHERE pinned_deployment_id = '{v1_id}' AND status != 'completed'"
            )
            return not pinned

        await eventually(drained, timeout=30, what="v1 to have no invocation left")
        async with httpx.AsyncClient(base_url=upgrade.restate.admin_url) as admin_http:
            response = await admin_http.delete(f"/deployments/{v1_id}", params={"force": "true"})
        assert response.is_success, response.text
        assert {d.id for d in admin.deployments()} == {v2_id}
        v1.stop()

        # After v1 is gone: the SKU that started on v1 keeps its record, and buys again on v2.
        status = await waiting.status()
        assert [o["outcome"] for o in status["outcomes"]] == ["received"]
        await waiting.world.put(
            f"/admin/items/{waiting.sku}",
            json={"on_hand": 1, "safety_stock": 20, "target_stock": 100, "suppliers": [waiting.supplier]},
        )
        again = (await waiting.check())["started"]
        assert again == f"replenish-{waiting.sku}-2"
        await waiting.decide((await waiting.pending_approval())["po_number"], approved=True)
        assert (await waiting.outcome(again, within=60))["outcome"] == "received"
        assert await codes(waiting, again) == {"v2"}
        assert len(await waiting.orders()) == 2
    finally:
        v1.stop()
        if v2 is not None:
            v2.stop()
