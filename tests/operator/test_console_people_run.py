"""The console and a run under the same authority matrix, through the real stack: an approval from
the console names the signed-in person, and the run itself checks them. Above the threshold one
director's approval orders nothing and a second person's does; judged from the world's orders and
the run's own record of who signed."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_support import Cli, setup_lasting_quotes

from e2e.scenario import Scenario
from people.accounts import SESSION_SECRET
from people.matrices import TEAM
from replenisher.identity.passwords import hash_password
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from support import PERSONAL_TOKEN_KEY_FILE, RegisteredService, audit_entries_since, eventually, serving

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
PASSWORD = "a long enough passphrase"


@pytest.fixture(scope="module")
def team_console(
    people_service: RegisteredService,
    operator_env: dict[str, str],
    log_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[HypercornApp]:
    """A console on the service's own team (`TEAM`), each person with the same password."""
    hashed = hash_password(PASSWORD)
    people = tmp_path_factory.mktemp("team") / "people.toml"
    people.write_text(re.sub(r'(id = "(\w+)")', rf'\1\npassword_hash = "{hashed}"', TEAM))
    port = free_port()
    env = {
        **operator_env,
        "REPLENISHER_PEOPLE_FILE": str(people),
        "REPLENISHER_CONSOLE_SESSION_SECRET": SESSION_SECRET,
        "REPLENISHER_CONSOLE_PUBLIC_URL": f"http://127.0.0.1:{port}",
        # The service's key: the console signs the decisions it sends with the person's token.
        "REPLENISHER_PERSONAL_TOKEN_KEY_FILE": str(PERSONAL_TOKEN_KEY_FILE),
    }
    app = HypercornApp("replenisher.console.app:create_app()", port, env, name="team-console",
                       log_path=log_dir / "team-console.log")  # fmt: skip
    with serving(app):
        yield app


async def signed_in(console: HypercornApp, who: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=console.url, timeout=60)
    csrf = re.search(r"name=csrf value='([^']+)'", (await client.get("/sign-in")).text)
    assert csrf
    form = {"csrf": csrf.group(1), "person": who, "password": PASSWORD, "next": "/inbox"}
    assert (await client.post("/sign-in", data=form)).status_code == 303
    return client


async def approve(client: httpx.AsyncClient, po: str) -> httpx.Response:
    """Approve `po` as the inbox's form would, through the confirmation step."""
    page = (await client.get("/inbox")).text
    card = page[page.index(po) :]
    form = card[card.index("<form class=decide") : card.index("</form>")]
    fields = dict(re.findall(r"<input type=hidden name=(\w+) value='([^']*)'>", form))
    first = await client.post("/approvals", data={**fields, "decision": "approve"})
    assert first.status_code == 200 and "Confirm: approve" in first.text, first.text
    confirm = first.text[first.text.index("<div class='card confirm'") :]
    second = dict(re.findall(r"<input type=hidden name=(\w+) value='?([^'>]*)'?>", confirm))
    return await client.post("/approvals", data={**second, "decision": "approve"})


async def test_above_the_threshold_two_people_sign_in_the_console_and_the_run_checks_both(
    team_console: HypercornApp, scenario: Scenario, operator_env: dict[str, str]
) -> None:
    started = time.time()
    await setup_lasting_quotes(scenario, price=20.0)  # 95 x 20.00 = 1,900: above the threshold of 1,000
    run_id = (await scenario.check())["started"]
    po = (await scenario.pending_approval())["po_number"]
    pia, dee, cy = [await signed_in(team_console, who) for who in ("pia", "dee", "cy")]
    try:
        # The plant manager's limit (1,000) is below the total: her card says so. The request asks
        # the two people whose limits cover it: their cards say it is theirs, hers does not.
        page = (await pia.get("/inbox")).text
        assert "You cannot approve this" in page and "asked: cy, dee" in page and "asked of you" not in page
        for client in (dee, cy):
            assert "asked of you" in (await client.get("/inbox")).text

        done = await approve(dee, po)
        assert done.status_code == 303, done.text

        async def first_signature() -> dict[str, Any] | None:
            approval = (await scenario.run_view(run_id))["state"]["approval"]
            return approval if [s["person"] for s in approval.get("signatures", [])] == ["dee"] else None

        approval = await eventually(first_signature, timeout=60, what="the run to keep dee's signature")
        assert approval["status"] == "pending" and await scenario.orders() == [], "one signature orders nothing"

        done = await approve(cy, po)
        assert done.status_code == 303, done.text

        async def ordered() -> list[dict[str, Any]] | None:
            return await scenario.orders() or None

        orders = await eventually(ordered, timeout=60, what="the second signature to order")
        assert [o["po_number"] for o in orders] == [po]
        approval = (await scenario.run_view(run_id))["state"]["approval"]
        assert [(s["person"], s["limit"]) for s in approval["signatures"]] == [("dee", 10000), ("cy", 10000)]
        assert approval["status"] == "approved"

        # The run recorded both signatures and the approval in the day's audit log, from its journal.
        async def audited() -> list[tuple[str, str]] | None:
            async with httpx.AsyncClient() as client:
                read = await audit_entries_since(operator_env["REPLENISHER_INGRESS_URL"], started, client=client)
            mine = [(e.event, e.who) for e in read if e.run_id == run_id]
            return mine if len(mine) >= 3 else None

        logged = await eventually(audited, timeout=60, what="the run's decisions in the audit log")
        assert logged == [("approval", "dee"), ("approval", "cy"), ("approval", "dee, cy")]
    finally:
        for client in (pia, dee, cy):
            await client.aclose()


async def test_a_token_made_on_the_tokens_page_lets_the_cli_approve_as_that_person(
    team_console: HypercornApp, scenario: Scenario, cli: Cli, operator_env: dict[str, str]
) -> None:
    started = time.time()
    await setup_lasting_quotes(scenario, price=4.0)  # 380: within pia's 1,000
    run_id = (await scenario.check())["started"]
    await scenario.pending_approval()
    pia = await signed_in(team_console, "pia")
    try:
        page = await pia.get("/tokens")
        assert page.status_code == 200 and "Make a token" in page.text, page.text
        assert "decide as you from a terminal" in page.text, "the words keep their spaces"
        csrf = re.search(r"name=csrf value='([^']+)'", page.text)
        assert csrf
        forged = await pia.post("/tokens", data={"days": "1"})  # no CSRF token: as a cross-site form would
        assert forged.status_code == 403 and "rpt_" not in forged.text
        wrong = await pia.post("/tokens", data={"csrf": csrf.group(1), "days": "9999"})
        assert wrong.status_code == 400 and "at most 366 days" in wrong.text
        made = await pia.post("/tokens", data={"csrf": csrf.group(1), "days": "1"})
        assert made.status_code == 200 and made.headers["cache-control"].startswith("no-store")
        token = re.search(r"<pre class=token><code>(rpt_[\w.-]+)</code></pre>", made.text)
        assert token, made.text
        assert "rpt_" not in (await pia.get("/tokens")).text, "shown once"
    finally:
        await pia.aclose()

    approved = await cli("approve", scenario.sku, "--up-to", "4", env={"REPLENISHER_PERSONAL_TOKEN": token.group(1)})
    assert approved.code == 0 and "read it and carried on:" in approved.out, approved
    orders = await eventually(scenario.orders, timeout=60, what="pia's approval from the CLI to order")
    assert [o["quantity"] for o in orders] == [95]
    assert [s["person"] for s in (await scenario.run_view(run_id))["state"]["approval"]["signatures"]] == ["pia"]

    async def audited() -> list[str] | None:
        async with httpx.AsyncClient() as client:
            read = await audit_entries_since(operator_env["REPLENISHER_INGRESS_URL"], started, client=client)
        made = [e.what for e in read if e.event == "personal_token_made" and e.who == "pia"]
        return made or None

    said = await eventually(audited, timeout=60, what="the token's making in the audit log")
    assert said[-1].startswith("a personal token until ")
