"""`replenisher approve/reject --as PERSON` against a service with an authority matrix, in a child process.

The worker's service is restarted with `REPLENISHER_PEOPLE_FILE` for this module (and without it
after). The CLI sends the person and the digest of the PO as the run's view shows it; what the
run made of each decision is judged from the world's orders and the run's own record.
"""

from __future__ import annotations

import pytest
from operator_support import Cli, setup_lasting_quotes

from e2e.scenario import Scenario
from support import RegisteredService, eventually

pytestmark = pytest.mark.e2e


async def test_status_shows_the_signatures_and_what_is_needed_and_approve_as_signs_for_a_person(
    people_service: RegisteredService, cli: Cli, scenario: Scenario
) -> None:
    await setup_lasting_quotes(scenario, price=20.0)  # 95 x 20.00 = 1,900: above the threshold
    run_id = (await scenario.check())["started"]
    await scenario.waiting_for(run_id, "wait_for_approval", within=30)
    await scenario.pending_approval(within=30)

    status = await cli("status", scenario.sku)
    assert status.code == 0, status
    assert "signed by nobody yet: needs an approver of the authority matrix whose limit covers 1,900.00" in status.out
    assert f"replenisher approve {scenario.sku} --up-to 20.00 --as PERSON" in status.out, status

    below = await cli("approve", scenario.sku, "--up-to", "20", "--as", "bo")
    assert below.code == 0, below
    assert "refused it: approval by bo refused for " in below.out, below
    assert "the order's total 1,900.00 is above bo's limit of 100.00" in below.out, below

    first = await cli("approve", scenario.sku, "--up-to", "20", "--as", "dee")
    assert first.code == 0, first
    assert "still waits: signed by dee (limit 10,000.00): needs a second approver above 1,000" in first.out, first
    assert await scenario.orders() == [], "one signature of two orders nothing"

    shown = await cli("status", scenario.sku)
    assert "signed by dee (limit 10,000.00): needs a second approver above 1,000" in shown.out, shown

    second = await cli("approve", scenario.sku, "--up-to", "20", "--as", "cy")
    assert second.code == 0, second
    assert "read it and carried on:" in second.out, second
    orders = await eventually(scenario.orders, timeout=30, what="the order after the second signature")
    assert [o["quantity"] for o in orders] == [95]

    timeline = await cli("timeline", scenario.sku)
    assert timeline.code == 0, timeline
    assert "signed by dee (limit 10,000.00), cy (limit 10,000.00)" in timeline.out, timeline


async def test_a_reject_as_an_approver_ends_the_run_with_no_order(
    people_service: RegisteredService, cli: Cli, scenario: Scenario
) -> None:
    await setup_lasting_quotes(scenario, price=4.0)
    run_id = (await scenario.check())["started"]
    await scenario.pending_approval(within=30)
    rejected = await cli("reject", scenario.sku, "--as", "bo", "--json")
    assert rejected.code == 0, rejected
    assert (await scenario.outcome(run_id, within=30))["outcome"] == "rejected"
    assert await scenario.orders() == []
