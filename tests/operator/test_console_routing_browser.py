"""Whom a request asks, as people see it in a real headless Chromium: the service and the console
read one authority matrix file (the signed console's: Ana, a buyer up to 1,000; Paul, the plant
manager up to 20,000; Vic, a viewer), and both re-read it when it changes. Judged from the world's
inbox and orders and the run's own record of who signed.

The worker's service is restarted with that file for this module, and without it afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from operator_support import setup_lasting_quotes
from page_checks import assert_page_fit_for_everyone
from test_console_sign_in_browser import sign_in

from e2e.scenario import Scenario
from people.accounts import PASSWORDS
from replenisher.identity.passwords import hash_password
from replenisher.stack.processes import HypercornApp
from support import RegisteredService, eventually, with_people_file

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def same_matrix(service: RegisteredService, signed_console: HypercornApp) -> AsyncIterator[Path]:
    """The service under the signed console's own matrix file (one file for both, as the docs say)."""
    path = Path(signed_console.env["REPLENISHER_PEOPLE_FILE"])
    async with with_people_file(service, path, await asyncio.to_thread(path.read_text)):
        yield path


async def ordered(scenario: Scenario) -> list[dict[str, Any]]:
    async def some() -> list[dict[str, Any]] | None:
        return await scenario.orders() or None

    return await eventually(some, timeout=60, what=f"an order from {scenario.supplier}")


async def approve_in_browser(page: Any, scenario: Scenario, po: str) -> None:
    card = page.locator(f"#inbox article[data-sku='{scenario.sku}']")
    await card.get_by_role("button", name=f"Approve {po}", exact=True).click()
    await page.get_by_role("button", name=f"Confirm: approve {po}").click()
    await page.wait_for_url(f"**/skus/{scenario.sku}/runs/1?**", timeout=15_000)


async def test_the_request_reaches_the_plant_manager_and_not_the_buyer_below_it(
    browser: Any, signed_console: HypercornApp, same_matrix: Path, scenario: Scenario, artifacts: Path, axe: Path
) -> None:
    await setup_lasting_quotes(scenario, price=20.0)  # 95 x 20.00 = 1,900: above Ana's 1,000
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    assert request["approver"] == "paul", "the world's inbox was asked for Paul"
    po = request["po_number"]
    ana = await sign_in(browser, signed_console, "ana")
    paul = await sign_in(browser, signed_console, "paul")
    try:
        card = paul.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await card.wait_for(timeout=20_000)
        assert "asked: paul" in await card.inner_text()
        assert await card.locator(".tag.mine").inner_text() == "asked of you"
        await paul.screenshot(path=str(artifacts / "inbox-asked-of-you.png"), full_page=True)
        await assert_page_fit_for_everyone(paul, axe, "the inbox, a request asked of the visitor")

        card = ana.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await card.wait_for(timeout=20_000)
        assert await card.locator(".tag.mine").count() == 0, "not asked of Ana"
        assert await card.get_by_role("button", name=f"Approve {po}", exact=True).count() == 0

        await approve_in_browser(paul, scenario, po)
        assert [o["po_number"] for o in await ordered(scenario)] == [po]
        signatures = (await scenario.run_view(run_id))["state"]["approval"]["signatures"]
        assert [(s["person"], s["acting_for"]) for s in signatures] == [("paul", None)]
    finally:
        for page in (ana, paul):
            await page.context.close()


async def test_while_paul_is_away_his_request_goes_to_his_delegate_who_approves_for_him(
    browser: Any, signed_console: HypercornApp, same_matrix: Path, scenario: Scenario, artifacts: Path
) -> None:
    """A delegation added to the file while both run (no restart): on the site dates it covers (all
    of those the compressed test clock shows), Paul's request goes to Ana, who may approve it on
    Paul's limit; the signature records that she acted for him."""
    before = await asyncio.to_thread(same_matrix.read_text)
    leave = '\n[[delegations]]\nfrom = "paul"\nto = "ana"\nstarts = 2000-01-01\nends = 2999-12-31\nnote = "leave"\n'
    await asyncio.to_thread(same_matrix.write_text, before + leave)
    try:
        await setup_lasting_quotes(scenario, price=20.0)  # 1,900: above Ana's own 1,000, within Paul's
        run_id = (await scenario.check())["started"]
        request = await scenario.pending_approval()
        assert request["approver"] == "ana", "Paul is away: his delegate is asked"
        po = request["po_number"]
        ana = await sign_in(browser, signed_console, "ana")
        try:
            card = ana.locator(f"#inbox article[data-sku='{scenario.sku}']")
            await card.wait_for(timeout=20_000)
            assert await card.locator(".tag.mine").inner_text() == "asked of you"
            await ana.screenshot(path=str(artifacts / "inbox-asked-of-the-delegate.png"), full_page=True)
            await approve_in_browser(ana, scenario, po)
        finally:
            await ana.context.close()
        assert [o["po_number"] for o in await ordered(scenario)] == [po]
        signatures = (await scenario.run_view(run_id))["state"]["approval"]["signatures"]
        assert [(s["person"], s["acting_for"], s["limit"]) for s in signatures] == [("ana", "paul", 20000)]
    finally:
        await asyncio.to_thread(same_matrix.write_text, before)


async def test_above_the_threshold_the_order_is_placed_only_after_two_different_people_approve(
    browser: Any, signed_console: HypercornApp, same_matrix: Path, scenario: Scenario, artifacts: Path
) -> None:
    """Orders above 1,500 need two people: the request asks Paul and Dana (a director, added for this
    test), both signed in at once; Paul's approval alone orders nothing, Dana's then does."""
    before = await asyncio.to_thread(same_matrix.read_text)
    dana = (
        '\n[[people]]\nid = "dana"\nname = "Dana Okafor"\nemail = "dana@plant.example"\nroles = ["approver"]\n'
        f'limit = 50000\npassword_hash = "{await asyncio.to_thread(hash_password, PASSWORDS["dana"])}"\n'
    )
    await asyncio.to_thread(same_matrix.write_text, "two_person_threshold = 1500\n" + before + dana)
    try:
        await setup_lasting_quotes(scenario, price=20.0)  # 1,900: above the threshold
        run_id = (await scenario.check())["started"]
        request = await scenario.pending_approval()
        assert request["approver"] == "paul, dana", "two people asked, the lower limit first"
        po = request["po_number"]
        paul = await sign_in(browser, signed_console, "paul")
        dana_page = await sign_in(browser, signed_console, "dana")
        try:
            for page in (paul, dana_page):
                card = page.locator(f"#inbox article[data-sku='{scenario.sku}']")
                await card.wait_for(timeout=20_000)
                assert await card.locator(".tag.mine").inner_text() == "asked of you"
            await approve_in_browser(paul, scenario, po)

            async def one_signature() -> bool:
                approval = (await scenario.run_view(run_id))["state"]["approval"]
                return [s["person"] for s in approval["signatures"]] == ["paul"]

            await eventually(one_signature, timeout=60, what="the run to keep Paul's signature")
            assert await scenario.orders() == [], "one signature of two orders nothing"
            await dana_page.reload()
            await approve_in_browser(dana_page, scenario, po)
            await dana_page.screenshot(path=str(artifacts / "second-signature-run.png"), full_page=True)
        finally:
            for page in (paul, dana_page):
                await page.context.close()
        assert [o["po_number"] for o in await ordered(scenario)] == [po]
        signatures = (await scenario.run_view(run_id))["state"]["approval"]["signatures"]
        assert [s["person"] for s in signatures] == ["paul", "dana"]
    finally:
        await asyncio.to_thread(same_matrix.write_text, before)
