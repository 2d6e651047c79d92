"""`replenisher approve/reject --as PERSON` against a service with an authority matrix, in a child process.

The worker's service is restarted with `REPLENISHER_PEOPLE_FILE` for this module (and without it
after). The CLI sends the person and the digest of the PO as the run's view shows it; what the
run made of each decision is judged from the world's orders and the run's own record.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from operator_support import Cli, setup_lasting_quotes

from e2e.scenario import Scenario
from support import PERSONAL_TOKEN_KEY_FILE, RegisteredService, eventually, personal_token

pytestmark = pytest.mark.e2e
# From the decision to the order: a few turns, each a suspension and a replay in the always-replay pass;
# 30 s ran out in CI's always-replay pass on a loaded machine.
ORDER_WITHIN = 90


def token_of(person: str, **made: float) -> dict[str, str]:
    """The CLI's environment with `person`'s personal token in it, as they would export it."""
    return {"REPLENISHER_PERSONAL_TOKEN": personal_token(person, **made)}


@pytest.mark.slow
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
    assert "as yourself: your personal token (the console's Tokens page) in $REPLENISHER_PERSONAL_TOKEN" in status.out

    below = await cli("approve", scenario.sku, "--up-to", "20", "--as", "bo", env=token_of("bo"))
    assert below.code == 0, below
    assert "refused it: approval by bo refused for " in below.out, below
    assert "the order's total 1,900.00 is above bo's limit of 100.00" in below.out, below

    first = await cli("approve", scenario.sku, "--up-to", "20", "--as", "dee", env=token_of("dee"))
    assert first.code == 0, first
    assert "still waits: signed by dee (limit 10,000.00): needs a second approver above 1,000" in first.out, first
    assert await scenario.orders() == [], "one signature of two orders nothing"

    shown = await cli("status", scenario.sku)
    assert "signed by dee (limit 10,000.00): needs a second approver above 1,000" in shown.out, shown

    second = await cli("approve", scenario.sku, "--up-to", "20", "--as", "cy", env=token_of("cy"))
    assert second.code == 0, second
    assert "read it and carried on:" in second.out, second
    orders = await eventually(scenario.orders, timeout=ORDER_WITHIN, what="the order after the second signature")
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
    rejected = await cli("reject", scenario.sku, "--json", env=token_of("bo"))  # the token names bo
    assert rejected.code == 0, rejected
    assert (await scenario.outcome(run_id, within=30))["outcome"] == "rejected"
    assert await scenario.orders() == []


@pytest.mark.slow
async def test_approve_as_someone_needs_their_own_token_and_one_made_with_the_key_counts(
    people_service: RegisteredService, cli: Cli, scenario: Scenario, tmp_path: Path
) -> None:
    await setup_lasting_quotes(scenario, price=4.0)  # 380: within pia's 1,000
    run_id = (await scenario.check())["started"]
    await scenario.pending_approval(within=30)

    # Refused before anything is sent: another person's token, an expired one, something else.
    theirs = await cli("approve", scenario.sku, "--up-to", "4", "--as", "pia", env=token_of("bo"))
    assert theirs.code == 1 and "--as pia, but the personal token in REPLENISHER_PERSONAL_TOKEN is bo's" in theirs.err
    old = await cli("approve", scenario.sku, "--up-to", "4", env=token_of("pia", now=time.time() - 2 * 86_400))
    assert old.code == 1 and "pia's personal token in REPLENISHER_PERSONAL_TOKEN expired at" in old.err, old
    junk = tmp_path / "token"
    junk.write_text("hunter2\n")
    bad = await cli("approve", scenario.sku, "--up-to", "4", "--credential-file", str(junk))
    assert bad.code == 1 and f"{junk} holds no personal token" in bad.err, bad

    # Sent without one (reaching the ingress is all it has): the run refuses it, nothing is ordered.
    bare = await cli("approve", scenario.sku, "--up-to", "4", "--as", "pia", env={"REPLENISHER_PERSONAL_TOKEN": ""})
    assert bare.code == 0, bare
    assert "it comes without pia's personal token" in bare.out, bare
    assert await scenario.orders() == []

    # A token made with the key file for someone in the matrix (as whoever runs the key would).
    made = await cli("people", "issue-token", "pia", "--key-file", str(PERSONAL_TOKEN_KEY_FILE),
                     "--people", people_service.process.env["REPLENISHER_PEOPLE_FILE"], "--days", "1")  # fmt: skip
    assert made.code == 0 and made.out.startswith("rpt_"), made
    nobody = await cli("people", "issue-token", "zed", "--key-file", str(PERSONAL_TOKEN_KEY_FILE),
                       "--people", people_service.process.env["REPLENISHER_PEOPLE_FILE"])  # fmt: skip
    assert nobody.code == 2 and "zed is not an approver in" in nobody.err, nobody
    junk.write_text(made.out)
    good = await cli("approve", scenario.sku, "--up-to", "4", "--credential-file", str(junk))
    assert good.code == 0 and "read it and carried on:" in good.out, good
    orders = await eventually(scenario.orders, timeout=ORDER_WITHIN, what="pia's approval to order")
    assert [o["quantity"] for o in orders] == [95]
    signatures = (await scenario.run_view(run_id))["state"]["approval"]["signatures"]
    assert [s["person"] for s in signatures] == ["pia"]
