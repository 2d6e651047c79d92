"""The console's Deployments page, through a real stack of its own: three deployments of the service
(v1 never used, v2 with a run waiting for the manager's approval, v3 the newest), shown to an
operator as the CLI shows them; refused to a viewer; a bad query refused; Restate unreachable said so."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from deployment_stack import DeploymentStack, deployment_stack

from people import accounts
from people.accounts import SESSION_SECRET
from replenisher.durable.app import SERVICES
from replenisher.identity.passwords import hash_password
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp
from support import eventually, serving

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PASSWORDS = {**accounts.PASSWORDS, "olga": "olga's long passphrase"}
CONSOLE = "replenisher.console.app:create_app()"


def people_toml() -> str:
    """The sign-in tests' Ana (an approver) and Vic (a viewer), and Olga, an operator."""
    return (
        accounts.people_toml(with_passwords=("vic",))
        + f"""
[[people]]
id = "olga"
name = "Olga Operator"
email = "olga@plant.example"
roles = ["operator"]
password_hash = "{hash_password(PASSWORDS["olga"])}"
"""
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeploymentStack]:
    with deployment_stack(tmp_path_factory.mktemp("console-deployments")) as own:
        yield own


async def signed_in(http: httpx.AsyncClient, person: str) -> None:
    page = await http.get("/sign-in")
    csrf = re.search(r"name=csrf value='([^']+)'", page.text)
    assert csrf, page.text
    form = {"csrf": csrf.group(1), "person": person, "password": PASSWORDS[person], "next": "/skus"}
    assert (await http.post("/sign-in", data=form)).status_code == 303


def row(page: str, deployment_id: str) -> str:
    found = re.search(rf"<tr id='{deployment_id}'>(.*?)</tr>", page)
    assert found, f"no row for {deployment_id}"
    return html.unescape(re.sub(r"<[^>]+>", " ", found.group(1)))


async def test_operators_see_each_deployment_with_its_code_runs_in_flight_and_whether_it_can_go(
    stack: DeploymentStack, tmp_path: Path
) -> None:
    v1 = stack.deploy("v1")
    v2 = stack.deploy("v2")
    async with stack.scenario("console-dep") as waiting:
        run = (await waiting.check())["started"]
        await waiting.pending_approval()
        await waiting.waiting_for(run, "wait_for_approval")
    v3 = stack.deploy("v3")

    people = tmp_path / "people.toml"
    people.write_text(people_toml())
    port = free_port()
    env = {
        **stack.env,
        "REPLENISHER_PEOPLE_FILE": str(people),
        "REPLENISHER_CONSOLE_SESSION_SECRET": SESSION_SECRET,
        "REPLENISHER_CONSOLE_PUBLIC_URL": f"http://127.0.0.1:{port}",
    }
    console = HypercornApp(CONSOLE, port, env, name="deployments-console", log_path=stack.log_dir / "console.log")
    with serving(console):
        async with httpx.AsyncClient(base_url=console.url, timeout=30) as olga:
            first = await olga.get("/deployments")
            assert first.status_code == 303 and first.headers["location"].startswith("/sign-in"), "sign in first"
            await signed_in(olga, "olga")

            async def page_with_v1_drained() -> str | None:
                answer = await olga.get("/deployments")
                assert answer.status_code == 200, answer.text
                return answer.text if "yes: drained and superseded" in row(answer.text, v1) else None

            page = await eventually(page_with_v1_drained, timeout=30, what="v1 shown drained and safe to remove")
            assert "<a href='/deployments' class='here'>Deployments</a>" in page
            assert "3 registered, 2 drained, 1 safe to remove" in page
            old, busy, newest = row(page, v1), row(page, v2), row(page, v3)
            assert " v1 " in old and "none" in old
            assert " v2 " in busy and "Replenish 1" in busy and "approval 1" in busy
            assert "no: not drained: " in busy and "in flight on it" in busy
            every_service = ", ".join(sorted(service.name for service in SERVICES))
            assert " v3 " in newest and f"newest for {every_service}" in newest, (every_service, newest)
            assert "no: drained, but the newest for" in newest
            bad = await olga.get("/deployments", params={"all": "1"})
            assert bad.status_code == 400 and "unknown parameter 'all'" in html.unescape(bad.text)

        async with httpx.AsyncClient(base_url=console.url, timeout=30) as vic:
            await signed_in(vic, "vic")
            refused = await vic.get("/deployments")
            assert refused.status_code == 403 and "vic (viewer) may not operate" in html.unescape(refused.text)
            skus = await vic.get("/skus")
            assert skus.status_code == 200, skus.text
            assert "href='/deployments'" not in skus.text, "no link to a page vic may not see"
            assert v1 not in refused.text


async def test_restate_unreachable_is_an_error_page_that_says_so(stack: DeploymentStack) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    env = {**stack.env, "REPLENISHER_ADMIN_URL": nowhere, "REPLENISHER_INGRESS_URL": nowhere}
    console = HypercornApp(CONSOLE, free_port(), env, name="nowhere-console", log_path=stack.log_dir / "nowhere.log")
    with serving(console):
        async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
            answer = await http.get("/deployments")
    assert answer.status_code == 503 and "Restate is unreachable" in html.unescape(answer.text)
