"""A whole replenishment with Restate calling the Lambda handler from the built zip.

Restate is registered against the local Lambda stand-in (tests/deploy/local_lambda.py) over
HTTP/1.1, so it talks request/response exactly as it does to a real function: every call
runs until the handler finishes or has to wait, then returns; a run waiting for its
approval is a suspended invocation with no function running, and the approval resumes it
with a new call that replays the journal. (Not marked `e2e`, whose tests `make test` runs
again in always-replay mode: request/response already suspends and replays at every step.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin
from replenisher.stack.ports import free_port
from support import eventually, service_env

from .stacks import LocalLambda, ServiceStack, register, start_restate, start_world, stop_all, unpack

_HTTP = httpx.Timeout(30.0, connect=5.0)


@pytest.fixture(scope="module")
def lambda_stack(tmp_path_factory: pytest.TempPathFactory, local_lambda_zip: dict[str, Any]) -> Iterator[ServiceStack]:
    root = tmp_path_factory.mktemp("lambda-stack")
    code = unpack(Path(local_lambda_zip["zip"]), root / "code")
    restate = world = function = None
    try:
        restate = start_restate(root / "restate-data", root / "restate-server.log")
        world = start_world(restate.ingress_url, root / "world.log")
        function = LocalLambda(
            code, free_port(), service_env(world.url), root / "local-lambda.log", root / "invocations.jsonl"
        )
        function.start()
        function.wait_ready()
        # HTTP/1.1: what Restate can do with a Lambda function is request/response, not a stream.
        deployment = register(restate.admin_url, function.url, use_http_11=True)
        yield ServiceStack(restate, world, function, deployment)
    finally:
        stop_all(function, world, restate)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def lambda_scenario(lambda_stack: ServiceStack) -> AsyncIterator[Scenario]:
    async with (
        httpx.AsyncClient(base_url=lambda_stack.restate.ingress_url, timeout=_HTTP) as ingress,
        httpx.AsyncClient(base_url=lambda_stack.world.url, timeout=_HTTP) as world,
    ):
        yield Scenario(ingress, world, "lambda")


def test_restate_registered_the_function_as_request_response(lambda_stack: ServiceStack) -> None:
    deployment = lambda_stack.deployment
    assert deployment["protocol_type"] == "RequestResponse", deployment
    assert {s["name"] for s in deployment["services"]} == {
        "SkuAgent",
        "Replenish",
        "RunArchive",
        "AuditLog",
        "ServiceAnswered",
        "SkuList",
    }
    # Discovery itself went through the handler.
    function = lambda_stack.service
    assert isinstance(function, LocalLambda)
    assert [c["status"] for c in function.calls("/discover")] == [200]


async def test_full_replenishment_through_the_lambda_handler_suspends_and_resumes(
    lambda_stack: ServiceStack, lambda_scenario: Scenario
) -> None:
    scenario = lambda_scenario
    function = lambda_stack.service
    assert isinstance(function, LocalLambda)
    admin = Admin(lambda_stack.restate.admin_url)

    await scenario.setup(on_hand=5, safety_stock=20, target_stock=100, price=4.0)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    async def run_status() -> str | None:
        rows = await admin.asql(
            "SELECT status FROM sys_invocation WHERE target_service_name = 'Replenish' "
            f"AND target_service_key = '{run_id}' AND target_handler_name = 'run'"
        )
        return rows[0]["status"] if rows else None

    # Waiting for the manager: suspended in Restate, and no call to the function in flight.
    await eventually(lambda: _is(run_status, "suspended"), timeout=20, what=f"{run_id} to suspend")
    calls_while_waiting = len(function.calls("/invoke/Replenish/run"))
    assert calls_while_waiting >= 1

    await scenario.decide(request["po_number"], approved=True, up_to=4.0)
    outcome = await scenario.outcome(run_id, within=60)

    assert outcome["outcome"] == "received"
    assert (outcome["quantity_ordered"], outcome["quantity_received"]) == (95, 95)
    assert [o["po_number"] for o in await scenario.orders()] == [request["po_number"]]
    stock = (await scenario.world.get(f"/erp/stock/{scenario.sku}")).json()
    assert stock["on_hand"] == 100
    # Resumed by new calls: approval, supplier reply and goods each woke the run up again.
    run_calls = function.calls("/invoke/Replenish/run")
    assert len(run_calls) >= calls_while_waiting + 3, run_calls
    assert all(c["status"] == 200 and c["answered"] for c in run_calls)
    tools = [turn["tool"] for turn in (await scenario.run_view(run_id))["state"]["history"]]
    assert tools[:4] == ["get_quotes", "draft_purchase_order", "request_approval", "wait_for_approval"]
    assert tools[-2:] == ["close_purchase_order", "done"]
    assert await run_status() == "completed"


async def _is(status: Any, wanted: str) -> bool:
    return await status() == wanted
