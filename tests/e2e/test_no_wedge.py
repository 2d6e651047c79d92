"""No input wedges a run: messages the run cannot read or must refuse are security events,
the wait goes on, the run ends as it should, and its SKU starts the next one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from e2e.scenario import Scenario, ok
from replenisher.stack.admin import register_deployment
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import RestateRuntime
from support import TESTS_DIR, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def intruder(restate_runtime: RestateRuntime, log_dir: Path) -> Iterator[HypercornApp]:
    """A second deployment that calls the replenisher's private handlers from inside Restate."""
    app = HypercornApp(
        "e2e.intruder:app",
        free_port(restate_runtime.service_bind_host),
        {"PYTHONPATH": str(TESTS_DIR)},
        name="intruder",
        log_path=log_dir / "intruder.log",
        bind_host=restate_runtime.service_bind_host,
    )
    deployment = None
    try:
        app.start()
        app.wait_ready()
        deployment = register_deployment(restate_runtime.admin_url, restate_runtime.deployment_uri(app.port))
        yield app
    finally:
        app.stop()
        if deployment is not None:
            # Other tests count the runtime's deployments: leave only the replenisher's.
            httpx.delete(
                f"{restate_runtime.admin_url}/deployments/{deployment.id}", params={"force": "true"}, timeout=30
            )


async def approve(scenario: Scenario, request: dict[str, object]) -> httpx.Response:
    genuine = {"po_number": request["po_number"], "token": request["token"], "approved": True}
    return await scenario.deliver("approval", genuine)


async def next_run_starts(scenario: Scenario, run_id: str) -> None:
    """The SKU is free: low stock again starts the next run (after the rest a failed run earns)."""
    await scenario.setup(on_hand=5, lead_days=300)
    checked = await scenario.check()
    assert checked["started"] not in (None, run_id), checked


async def test_a_message_the_run_cannot_read_is_a_security_event_and_the_wait_goes_on(
    scenario: Scenario, intruder: HypercornApp, ingress: httpx.AsyncClient
) -> None:
    await scenario.setup(lead_days=0.5)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.waiting_for(run_id, "wait_for_approval")

    # The run's first approval slot gets a payload no approval parses, as only a caller
    # inside Restate could send it (the agent's door would refuse it with a 400).
    garbage = {"event": "approval", "seq": 0, "payload": {"po_number": request["po_number"], "token": 7}}
    sent = await ingress.post("/Intruder/resolve", json={"run_id": run_id, "message": garbage})
    assert sent.is_success, sent.text

    async def refused() -> list[str]:
        state = (await scenario.run_view(run_id))["state"]
        return [e["what"] for e in state["security"]["recent"] if "unreadable approval" in e["what"]]

    await eventually(refused, what="the unreadable approval to be recorded")
    view = await scenario.waiting_for(run_id, "wait_for_approval")
    assert view["waiting"]["seq"] == 1, "the wait goes on for the next message"

    # The slot the intruder took is the one the agent numbers next; the message after it counts.
    ok(await approve(scenario, request))
    ok(await approve(scenario, request))
    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    assert [o["po_number"] for o in await scenario.orders()] == [request["po_number"]]
    await next_run_starts(scenario, run_id)


async def test_a_token_with_any_characters_is_compared_not_crashed_on(scenario: Scenario) -> None:
    await scenario.setup(lead_days=0.5)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    for token in ("tökén-ü", "\u202e" + str(request["token"]), "🔑" * 64):
        forged = {"po_number": request["po_number"], "token": token, "approved": True}
        ok(await scenario.deliver("approval", forged))
    ok(await approve(scenario, request))
    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    state = (await scenario.run_view(run_id))["state"]
    # Alike, so collapsed into one entry: its count says how many.
    assert sum(e["count"] for e in state["security"]["recent"] if "token or PO does not match" in e["what"]) == 3
    assert state["consumed"]["approval"] == 4
    assert state["approval"]["channel"] == "operator" and state["approval"]["decided_at"] is not None
    await next_run_starts(scenario, run_id)


async def test_a_record_written_by_newer_code_is_a_terminal_error_not_a_retry_loop(
    scenario: Scenario, restate_runtime: RestateRuntime
) -> None:
    await scenario.setup(on_hand=50)
    await scenario.check()
    record = await scenario.status()
    try:
        await write_record(restate_runtime, scenario.sku, {**record, "schema_version": 99})

        # Each handler that reads the record answers at once, with the reason, instead of retrying.
        async def refused() -> httpx.Response | None:
            response = await scenario.ingress.get(f"/SkuAgent/{scenario.sku}/status", timeout=10)
            return response if response.status_code >= 400 else None

        answer = await eventually(refused, what="status to refuse the newer record")
        assert answer.status_code == 500 and "schema version 99" in answer.text
        checked = await scenario.ingress.post(f"/SkuAgent/{scenario.sku}/check", timeout=10)
        assert checked.status_code == 500 and "newer than this code" in checked.text
    finally:
        # The session's other tests list every SKU: leave none this code cannot read.
        await write_record(restate_runtime, scenario.sku, record)
    assert await scenario.status() == record


async def write_record(runtime: RestateRuntime, sku: str, record: dict[str, object]) -> None:
    """Replace the SKU's stored record through the admin API, as an operator (or newer code) could."""
    raw = json.dumps(record).encode()
    async with httpx.AsyncClient(base_url=runtime.admin_url, timeout=30) as admin:
        response = await admin.post(
            "/services/SkuAgent/state", json={"object_key": sku, "new_state": {"record": list(raw)}}
        )
        assert response.is_success, response.text
