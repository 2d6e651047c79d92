"""Approvals bound to people, through the real stack: restate-server, the service, the world.

The module restarts this worker's service with `REPLENISHER_PEOPLE_FILE` (`people_service`, the
matrix `people.matrices.TEAM`) for its tests, and back without it after them, even on failure:
the runs the SKUs start meanwhile fix the matrix into their state. Each decision goes in through
the SKU's address on the ingress (an operator tool, as `replenisher approve --as PERSON` sends
it) with the one-time token from the manager's inbox and the digest of the PO from the run's
view; every verdict is judged from the world's orders.

The matrix: a buyer up to 100, a plant manager up to 1,000, a director and a finance head up to
10,000; orders above 1,000 need two people. The world quotes 95 units (4.00 a unit: 380; 20.00:
1,900).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from e2e.scenario import JSON, Scenario, ok
from replenisher.domain.authority import order_digest
from replenisher.domain.credentials import issue
from replenisher.inbound.signing import secret_for, signed_headers
from support import RegisteredService, eventually, personal_token

pytestmark = pytest.mark.e2e


async def started(scenario: Scenario, price: float) -> str:
    await scenario.setup(price=price, quote_valid_days=365)
    run_id: str = (await scenario.check())["started"]
    await scenario.waiting_for(run_id, "wait_for_approval", within=30)
    return run_id


async def approve(
    scenario: Scenario, run_id: str, person: str, *, revision_back: int = 0, credential: str | None = None
) -> None:
    """`person` approves the PO the run waits on, as the CLI's `approve --as` sends it: with their
    personal token (`credential`, else a fresh one of theirs)."""
    request = await scenario.pending_approval(within=30)
    state = (await scenario.run_view(run_id))["state"]
    digest = order_digest(
        po_number=request["po_number"],
        revision=state["po_revision"] - revision_back,
        supplier=request["supplier"],
        quantity=request["quantity"],
        unit_price=request["unit_price"],
        quote_id=request["quote_id"],
    )
    decision = {
        "po_number": request["po_number"],
        "token": request["token"],
        "approved": True,
        "person": person,
        "digest": digest,
        "credential": credential if credential is not None else personal_token(person),
    }
    ok(await scenario.deliver("approval", decision))


async def refused(scenario: Scenario, run_id: str, words: str) -> JSON:
    """The run's security log has the refusal, and the run still waits for a decision."""

    async def seen() -> JSON | None:
        view = await scenario.run_view(run_id)
        state: dict[str, Any] = view["state"]
        hit = next((e for e in state["security"]["recent"] if words in e["what"]), None)
        return hit if hit and view["waiting"] and view["waiting"]["tool"] == "wait_for_approval" else None

    return await eventually(seen, timeout=30, what=f"{run_id} to refuse: {words}")


async def ordered(scenario: Scenario) -> list[JSON]:
    return await eventually(scenario.orders, timeout=30, what=f"an order from {scenario.supplier}")


async def test_without_the_people_file_an_approval_naming_a_person_orders_as_before(
    service: RegisteredService, scenario: Scenario
) -> None:
    assert "REPLENISHER_PEOPLE_FILE" not in service.process.env
    run_id = await started(scenario, price=4.0)
    assert (await scenario.run_view(run_id))["state"]["people_matrix"] is False
    await approve(scenario, run_id, "bo")  # not in any matrix, and above any limit: the person is not checked
    assert [o["quantity"] for o in await ordered(scenario)] == [95]


async def test_a_buyer_below_the_total_is_refused_and_the_plant_manager_then_orders(
    people_service: RegisteredService, scenario: Scenario
) -> None:
    run_id = await started(scenario, price=4.0)
    assert (await scenario.run_view(run_id))["state"]["people_matrix"] is True
    request = await scenario.pending_approval(within=30)
    assert request["approver"] == "pia", "the inbox is asked for the lowest limit that covers 380: pia's"
    await approve(scenario, run_id, "bo")
    hit = await refused(scenario, run_id, "the order's total 380.00 is above bo's limit of 100.00")
    assert hit["source"] == "operator"
    assert await scenario.orders() == [], "nothing is ordered on the buyer's approval"
    await approve(scenario, run_id, "pia")
    assert [o["quantity"] for o in await ordered(scenario)] == [95]
    approval = (await scenario.run_view(run_id))["state"]["approval"]
    assert [(s["person"], s["limit"]) for s in approval["signatures"]] == [("pia", 1000)]


async def test_above_the_threshold_one_approval_orders_nothing_and_a_second_different_persons_does(
    people_service: RegisteredService, scenario: Scenario
) -> None:
    run_id = await started(scenario, price=20.0)
    request = await scenario.pending_approval(within=30)
    assert request["approver"] == "cy, dee", "above the threshold the inbox is asked for two people"
    await approve(scenario, run_id, "dee")

    async def one_signature() -> bool:
        approval = (await scenario.run_view(run_id))["state"]["approval"]
        return [s["person"] for s in approval["signatures"]] == ["dee"]

    await eventually(one_signature, timeout=30, what="the first signature")
    await approve(scenario, run_id, "dee")
    await refused(scenario, run_id, "dee has already approved this PO")
    assert await scenario.orders() == [], "one person's approval, twice, orders nothing above the threshold"
    await approve(scenario, run_id, "cy")
    assert [o["quantity"] for o in await ordered(scenario)] == [95]
    approval = (await scenario.run_view(run_id))["state"]["approval"]
    assert [s["person"] for s in approval["signatures"]] == ["dee", "cy"]


async def test_an_approval_of_an_earlier_revision_is_refused(
    people_service: RegisteredService, scenario: Scenario
) -> None:
    run_id = await started(scenario, price=4.0)
    await approve(scenario, run_id, "pia", revision_back=1)
    await refused(scenario, run_id, "the approval is for other terms than the PO waiting")
    assert await scenario.orders() == []
    await approve(scenario, run_id, "pia")
    assert [o["quantity"] for o in await ordered(scenario)] == [95]


async def test_the_inbox_system_names_the_person_it_acts_for_through_the_signed_door(
    people_service: RegisteredService, scenario: Scenario, door: httpx.AsyncClient, secrets: dict[str, str]
) -> None:
    """The manager's party (the inbox system) signs what it sends; the person in its decision is checked
    against the matrix like an operator's: its word on who decided gives no more than that person's limit."""
    run_id = await started(scenario, price=4.0)
    request = await scenario.pending_approval(within=30)
    state = (await scenario.run_view(run_id))["state"]
    terms = {k: request[k] for k in ("po_number", "supplier", "quantity", "unit_price", "quote_id")}
    digest = order_digest(revision=state["po_revision"], **terms)

    async def send(person: str) -> None:
        decision = {"po_number": request["po_number"], "token": request["token"], "approved": True}
        body = json.dumps({"event": "approval", "payload": {**decision, "person": person, "digest": digest}}).encode()
        path = f"/messages/{scenario.sku}"
        secret = secret_for(secrets, "manager") or ""
        answer = await door.post(path, content=body, headers=signed_headers(secret, "manager", path, body, time.time()))
        assert answer.status_code in (200, 202), answer.text

    await send("bo")
    hit = await refused(scenario, run_id, "above bo's limit of 100.00")
    assert hit["source"] == "manager", "the door's stamp: the inbox system sent it"
    assert await scenario.orders() == []
    await send("pia")
    assert [o["quantity"] for o in await ordered(scenario)] == [95]
    approval = (await scenario.run_view(run_id))["state"]["approval"]
    assert [s["person"] for s in approval["signatures"]] == ["pia"] and approval["channel"].startswith("manager")


@contextlib.contextmanager
def matrix_edited(service: RegisteredService, extra: str) -> Iterator[None]:
    """The service's matrix file with `extra` added while the service runs, as an admin edits it
    (no restart: the service re-reads a changed file); the file as it was afterwards, even on failure."""
    path = Path(service.process.env["REPLENISHER_PEOPLE_FILE"])
    before = path.read_text()
    path.write_text(before + extra)
    try:
        yield
    finally:
        path.write_text(before)


def pia_away(starts: str, ends: str) -> str:
    return f'\n[[delegations]]\nfrom = "pia"\nto = "dee"\nstarts = {starts}\nends = {ends}\n'


async def test_a_delegation_added_while_the_service_runs_routes_the_request_to_the_delegate(
    people_service: RegisteredService, scenario: Scenario
) -> None:
    """pia is away over every date the compressed site clock can show: the request meant for her
    goes to dee, who approves it acting for her; judged from the world's inbox and orders."""
    with matrix_edited(people_service, pia_away("2000-01-01", "2999-12-31")):
        run_id = await started(scenario, price=4.0)
        request = await scenario.pending_approval(within=30)
        assert request["approver"] == "dee", "pia is away: her delegate is asked"
        await approve(scenario, run_id, "dee")
        assert [o["quantity"] for o in await ordered(scenario)] == [95]
    approval = (await scenario.run_view(run_id))["state"]["approval"]
    assert [(s["person"], s["acting_for"]) for s in approval["signatures"]] == [("dee", None)], (
        "dee's own limit covers 380: she signs on it, not on pia's"
    )


async def test_outside_its_dates_a_delegation_changes_nothing(
    people_service: RegisteredService, scenario: Scenario
) -> None:
    leaves = pia_away("2000-01-01", "2000-12-31") + pia_away("2999-01-01", "2999-12-31")
    with matrix_edited(people_service, leaves):
        run_id = await started(scenario, price=4.0)
        request = await scenario.pending_approval(within=30)
        assert request["approver"] == "pia", "pia's leave is over and the next is far ahead: she is asked"
        await approve(scenario, run_id, "pia")
        assert [o["quantity"] for o in await ordered(scenario)] == [95]


async def test_on_the_ingress_a_decision_counts_as_a_persons_only_with_their_own_personal_token(
    people_service: RegisteredService, scenario: Scenario
) -> None:
    """Reaching the ingress is not enough to approve as pia: without a token, with bo's, with an
    expired one or one another key made, the run refuses it and orders nothing; with hers it orders."""
    run_id = await started(scenario, price=4.0)
    await approve(scenario, run_id, "pia", credential="")
    await refused(scenario, run_id, "it is not a personal token")
    await approve(scenario, run_id, "pia", credential=personal_token("bo"))
    await refused(scenario, run_id, "the personal token is bo's, not pia's")
    await approve(scenario, run_id, "pia", credential=personal_token("pia", now=time.time() - 2 * 86_400))
    await refused(scenario, run_id, "pia's personal token has expired")
    forged = issue(b"k" * 32, "pia", now=time.time(), days=1)
    await approve(scenario, run_id, "pia", credential=forged)
    await refused(scenario, run_id, "the personal token is not one this service's key made")
    assert await scenario.orders() == [], "no approval without pia's own token"
    state = (await scenario.run_view(run_id))["state"]
    kept = json.dumps(state)
    assert forged not in kept and not re.search(r"rpt_[\w-]{20,}", kept), "no token is kept in the run's state"
    await approve(scenario, run_id, "pia")
    assert [o["quantity"] for o in await ordered(scenario)] == [95]
