"""Signing in to the console in a real headless Chromium, two people at once (each in their own
browser context, as on two machines), against the real stack; judged from the world's orders.

Screenshots of the sign-in page and the signed-in inbox, at desktop and phone widths, go to
tests/artifacts/operator/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from operator_support import setup_lasting_quotes
from page_checks import DESKTOP, PHONE, assert_page_fit_for_everyone

from e2e.scenario import Scenario
from people.accounts import PASSWORDS
from replenisher.stack.processes import HypercornApp
from support import eventually

pytestmark = pytest.mark.e2e


async def sign_in(browser: Any, console: HypercornApp, who: str, viewport: dict[str, int] = DESKTOP) -> Any:
    context = await browser.new_context(viewport=viewport)
    page = await context.new_page()
    await page.goto(f"{console.url}/inbox")
    await page.wait_for_url("**/sign-in?next=%2Finbox")
    await page.get_by_label("Your id or email").fill(who)
    await page.get_by_label("Password").fill(PASSWORDS[who])
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/inbox")
    return page


@pytest.mark.slow
async def test_a_buyer_and_the_plant_manager_signed_in_at_once(
    browser: Any, signed_console: HypercornApp, scenario: Scenario, artifacts: Path, axe: Path
) -> None:
    await setup_lasting_quotes(scenario, price=20.0)  # 95 x 20.00 = 1,900: above Ana's 1,000
    await scenario.check()
    request = await scenario.pending_approval()
    po = request["po_number"]

    # The sign-in page, as a person first sees it, fit for everyone on a desktop and a phone.
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = await browser.new_context(viewport=viewport)
        page = await context.new_page()
        await page.goto(f"{signed_console.url}/inbox")
        await page.wait_for_url("**/sign-in?next=%2Finbox")
        await page.screenshot(path=str(artifacts / f"sign-in-{name}.png"), full_page=True)
        await assert_page_fit_for_everyone(page, axe, f"the sign-in page ({name})")
        await page.get_by_label("Your id or email").fill("ana")
        await page.get_by_label("Password").fill("not ana's passphrase")
        await page.get_by_role("button", name="Sign in").click()
        assert "That person and password do not match." in await page.locator(".flash.error").inner_text()
        await context.close()

    ana = await sign_in(browser, signed_console, "ana")
    paul = await sign_in(browser, signed_console, "paul")
    vic = await sign_in(browser, signed_console, "vic", PHONE)
    try:
        assert "Ana Lindqvist" in await ana.locator("body > header").inner_text()
        assert "Paul Meyer" in await paul.locator("body > header").inner_text()

        # The request is above Ana's limit: her card says so and who can approve, with no Approve
        # button (a post of one anyway is refused: test_console_sign_in.py); she may still reject.
        card = ana.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await card.wait_for(timeout=20_000)
        said = await card.locator("p.warn").inner_text()
        assert said == (
            "You cannot approve this: the order's total 1,900.00 is above ana's limit of 1,000.00; "
            "it can be approved by paul."
        )
        assert await card.get_by_role("button", name=f"Approve {po}", exact=True).count() == 0
        assert await card.get_by_role("button", name=f"Reject {po}", exact=True).count() == 1
        await ana.screenshot(path=str(artifacts / "signed-in-inbox-beyond-limit.png"), full_page=True)
        await assert_page_fit_for_everyone(ana, axe, "the inbox for a buyer, a request above her limit")
        assert await scenario.orders() == []

        # Vic, a viewer on a phone: the request without a form to decide it.
        card = vic.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await card.wait_for(timeout=20_000)
        assert "Only an approver can decide this request." in await card.inner_text()
        assert await card.get_by_role("button", name=f"Approve {po}", exact=True).count() == 0
        await vic.screenshot(path=str(artifacts / "signed-in-inbox-viewer-phone.png"), full_page=True)
        await assert_page_fit_for_everyone(vic, axe, "the inbox for a viewer, on a phone")

        # Paul approves (above the console's confirmation amount: a second step) and the run orders.
        card = paul.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await card.wait_for(timeout=20_000)
        await card.get_by_role("button", name=f"Approve {po}", exact=True).click()
        await paul.get_by_role("button", name=f"Confirm: approve {po}").click()
        await paul.wait_for_url(f"**/skus/{scenario.sku}/runs/1?**", timeout=15_000)
        await assert_page_fit_for_everyone(paul, axe, "the run page, signed in")

        async def ordered() -> list[dict[str, Any]] | None:
            return await scenario.orders() or None

        orders = await eventually(ordered, timeout=60, what="Paul's approval to order")
        assert [o["po_number"] for o in orders] == [po]

        # The audit page, as an auditor reads it on a phone: Ana's and Paul's sign-ins are there.
        await vic.goto(f"{signed_console.url}/audit")
        rows = vic.locator("table.audit tbody tr")

        async def both_signed_in() -> bool:
            await vic.reload()
            text = await vic.locator("main").inner_text()
            return "ana" in text and "paul" in text

        await eventually(both_signed_in, timeout=60, what="the sign-ins on the audit page")
        assert await rows.count() >= 3
        await vic.screenshot(path=str(artifacts / "audit-phone.png"), full_page=True)
        await assert_page_fit_for_everyone(vic, axe, "the audit page on a phone")

        # Paul signs out; Ana, in her own browser, is still signed in.
        await paul.get_by_role("button", name="Sign out").click()
        await paul.wait_for_url("**/sign-in")
        await paul.goto(f"{signed_console.url}/skus")
        await paul.wait_for_url("**/sign-in?next=%2Fskus")
        await ana.goto(f"{signed_console.url}/skus")
        assert "Ana Lindqvist" in await ana.locator("body > header").inner_text()

        # Ana signs out in another tab: her open inbox, refreshing itself, goes to the sign-in page
        # (not the sign-in form inside the inbox).
        await ana.goto(f"{signed_console.url}/inbox")
        tab = await ana.context.new_page()
        await tab.goto(f"{signed_console.url}/spend")
        await tab.get_by_role("button", name="Sign out").click()
        await tab.wait_for_url("**/sign-in")
        await ana.wait_for_url("**/sign-in?next=%2Finbox", timeout=30_000)
        assert await ana.locator("#inbox").count() == 0
    finally:
        for page in (ana, paul, vic):
            await page.context.close()
