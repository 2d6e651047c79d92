"""The manager's console in a real headless Chromium, against the real stack.

Screenshots go to tests/artifacts/operator/ (kept by CI with the other artifacts).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_support import paused_check, resume, setup_lasting_quotes
from page_checks import PHONE, assert_page_fit_for_everyone
from playwright.async_api import expect

from e2e.scenario import Scenario
from replenisher.stack.admin import Admin
from replenisher.stack.processes import HypercornApp
from support import RegisteredService, eventually

pytestmark = pytest.mark.e2e


async def test_the_manager_approves_in_the_inbox_and_watches_the_run_carry_on(
    browser: Any, console: HypercornApp, scenario: Scenario, artifacts: Path, axe: Path
) -> None:
    page = await browser.new_page(viewport={"width": 1280, "height": 860})
    try:
        await setup_lasting_quotes(scenario, price=4.0)
        await page.goto(f"{console.url}/inbox")  # open before the request exists
        run_id = (await scenario.check())["started"]
        request = await scenario.pending_approval()

        row = page.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await row.wait_for(timeout=20_000)  # the inbox shows new requests by itself, without a reload
        assert request["po_number"] in await row.inner_text()
        assert "95" in await row.inner_text() and "4.00" in await row.inner_text()
        await page.screenshot(path=str(artifacts / "inbox.png"), full_page=True)

        await row.locator("input[name=up_to]").fill("4.25")
        await row.locator("input[name=note]").fill("fine, order it")
        await row.get_by_role("button", name=f"Approve {request['po_number']}", exact=True).click()

        await page.wait_for_url(f"**/skus/{scenario.sku}/runs/1?**", timeout=15_000)
        flash = await page.locator(".flash.ok").inner_text()
        assert f"{request['po_number']} approved up to 4.25" in flash
        await page.screenshot(path=str(artifacts / "run-just-approved.png"), full_page=True)
        await assert_page_fit_for_everyone(page, axe, "the run page after a decision")

        # The page's own script refreshes the timeline in place while the run goes on: no reload.
        await page.evaluate("window.__sameDocument = true")
        await page.locator("section#timeline[data-finished='true']").wait_for(timeout=60_000)
        assert await page.evaluate("window.__sameDocument === true"), "the timeline updated without a reload"
        outcome = page.locator("p.outcome[data-outcome='received']")
        assert "95 of 95 received at 4.00" in await outcome.inner_text()
        approval_row = page.locator("g.turn[data-tool='wait_for_approval'] rect.wait[data-ended-by='message']")
        assert await approval_row.count() == 1
        for tool in ("place_order", "wait_for_goods", "close_purchase_order"):
            assert await page.locator(f"g.turn[data-tool='{tool}']").count() >= 1, tool
        decision = await page.locator("tr[data-turn] [data-decision]").first.inner_text()
        assert "approved up to 4.25" in decision and "by manager (console)" in decision, decision
        assert "note: fine, order it" in decision and " at 20" in decision, decision
        assert "has not decided yet" not in await page.locator("table.turns").inner_text()
        await page.screenshot(path=str(artifacts / "run-timeline.png"), full_page=True)

        assert (await scenario.outcome(run_id))["outcome"] == "received"
        await page.goto(f"{console.url}/inbox")
        assert await page.locator(f"#inbox article[data-sku='{scenario.sku}']").count() == 0, "no longer in the inbox"

        # Searched: the session's world lists more SKUs than a page holds.
        await page.goto(f"{console.url}/skus?q={scenario.sku}")
        sku_row = page.locator(f"#skus tr[data-sku='{scenario.sku}']")
        assert "received" in await sku_row.inner_text()
        await page.screenshot(path=str(artifacts / "skus.png"), full_page=True)
    finally:
        await page.close()


async def test_the_manager_rejects_in_the_inbox(browser: Any, console: HypercornApp, scenario: Scenario) -> None:
    page = await browser.new_page()
    try:
        await setup_lasting_quotes(scenario)
        run_id = (await scenario.check())["started"]
        request = await scenario.pending_approval()
        await page.goto(f"{console.url}/inbox")
        row = page.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await row.wait_for(timeout=20_000)  # the inbox shows new requests by itself
        await row.get_by_role("button", name=f"Reject {request['po_number']}", exact=True).click()
        await page.wait_for_url(f"**/skus/{scenario.sku}/runs/1?**", timeout=15_000)
        assert "rejected" in await page.locator(".flash.ok").inner_text()
        assert (await scenario.outcome(run_id))["outcome"] == "rejected"
        assert await scenario.orders() == []
    finally:
        await page.close()


async def test_stale_or_bad_decisions_get_a_clear_answer_and_change_nothing(
    console: HypercornApp, scenario: Scenario
) -> None:
    await setup_lasting_quotes(scenario)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    form = {"sku": scenario.sku, "run_id": run_id, "token": request["token"], "decision": "approve"}
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        too_low = await http.post("/approvals", data={**form, "up_to": "3.00"})
        assert too_low.status_code == 400 and "below the asked 4.00" in too_low.text
        forged = await http.post("/approvals", data={**form, "token": "guessed", "up_to": "4.00"})
        assert forged.status_code == 409 and "not the one of" in forged.text
        cross_site = await http.post("/approvals", data={k: v for k, v in form.items() if k != "token"})
        assert cross_site.status_code == 400 and "must carry its request" in cross_site.text
        nonsense = await http.post("/approvals", data={**form, "up_to": "four"})
        assert nonsense.status_code == 400 and "is not a price" in nonsense.text
        assert (await scenario.run_view(run_id))["state"]["approval"]["status"] == "pending", "nothing changed"

        assert (await http.get("/skus/SKU-no-such-agent")).status_code == 404
        assert (await http.get(f"/skus/{scenario.sku}/runs/9")).status_code == 404
        assert (await http.post("/skus")).status_code == 405
        download = await http.get(f"/skus/{scenario.sku}/runs/1/timeline.html")
        assert download.status_code == 200 and "<svg" in download.text and "wait_for_approval" in download.text


def first_sign(banner: str) -> str:
    """The time a service-down banner dates the outage from: its start, or when it was found."""
    if "found so at " in banner:
        return banner.split("found so at ")[1].split(" with ")[0]
    return banner.split("is down since ")[1].split(".")[0]


@pytest.mark.slow
async def test_with_the_service_killed_the_console_says_since_when_and_what_restate_accepted(
    browser: Any,
    console: HypercornApp,
    scenario: Scenario,
    service: RegisteredService,
    admin: Admin,
    artifacts: Path,
    axe: Path,
) -> None:
    await setup_lasting_quotes(scenario)
    # The longest approval window: no reminder wakes the run (a call that would be refused, and
    # date the outage) while the test looks at a service down with nothing in flight.
    await scenario.configure(approval=365)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    async def saved() -> bool:  # the request reaches the inbox a moment before the run saves its state
        waiting = (await scenario.run_view(run_id)).get("waiting")
        return bool(waiting) and waiting["tool"] == "wait_for_approval"

    await eventually(saved, timeout=20, what="the run to wait for approval")

    async def nothing_in_flight() -> bool:  # the run suspended in its wait, no call running or retried
        rows = await admin.asql("SELECT id FROM sys_invocation WHERE status IN ('running', 'backing-off')")
        return rows == []

    await eventually(nothing_in_flight, timeout=30, what="every invocation to suspend or end")
    service.kill()
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    phone = await browser.new_page(viewport={"width": 390, "height": 844})
    try:
        # Nothing in flight tells Restate the service is down, and these pages read its storage
        # only: the console asks the deployment, and says it cannot tell since when.
        await page.goto(f"{console.url}/skus/{scenario.sku}")
        banner = page.locator("#service-down")
        await banner.wait_for(timeout=20_000)
        found = await banner.inner_text()
        assert found.startswith("The replenisher service is down"), found
        if not await admin.asql("SELECT id FROM sys_invocation WHERE status = 'backing-off'"):
            # (Else another test's timer woke a call since, and it dates the outage.)
            assert "down, found so at " in found and "does not answer" in found, found
        await page.goto(f"{console.url}/inbox")
        await banner.wait_for(timeout=20_000)
        again = await banner.inner_text()
        assert first_sign(again) <= first_sign(found), ("the outage it saw first, not a new one per page", again)
        row = page.locator(f"#inbox article[data-sku='{scenario.sku}']")
        assert request["po_number"] in await row.inner_text(), "the inbox is read from Restate's storage"
        await page.screenshot(path=str(artifacts / "inbox-service-down.png"), full_page=True)
        await assert_page_fit_for_everyone(page, axe, "the inbox while the service is down")

        await row.locator("input[name=note]").fill("while it is down")
        await row.get_by_role("button", name=f"Approve {request['po_number']}", exact=True).click()
        await page.wait_for_url(f"**/skus/{scenario.sku}/runs/1?**", timeout=20_000)
        flash = await page.locator(".flash.ok").inner_text()
        assert "Restate accepted the decision" in flash and "when the service is back" in flash, flash
        status = await page.locator("[data-status]").inner_text()
        assert status.startswith("service down since"), status
        # The decision Restate holds is a refused call now; the outage dates from its first sign.
        dated = await page.locator("#service-down").inner_text()
        assert dated.startswith("The replenisher service is down since "), dated
        assert first_sign(dated) <= first_sign(found), (dated, found)
        await page.screenshot(path=str(artifacts / "run-service-down.png"), full_page=True)
        if docs := os.environ.get("REPLENISHER_SCREENSHOT_DIR"):  # the docs' picture (make screenshots)
            await page.set_viewport_size({"width": 1280, "height": 620})
            await page.screenshot(path=str(Path(docs) / "console-run-service-down.png"))
        await assert_page_fit_for_everyone(page, axe, "a run page while the service is down")
        await phone.goto(page.url)
        await phone.screenshot(path=str(artifacts / "run-service-down-phone.png"), full_page=True)
        await assert_page_fit_for_everyone(phone, axe, "a run page while the service is down (phone)")
    finally:
        await page.close()
        await phone.close()
        service.restart()
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"
    # The console remembers the outage it saw until Restate records the service answering again.
    # A call refused while the service was down (the SkuAgent's delivery after the receipt) keeps
    # backing off until its next retry, up to a few seconds: until then Restate still records it.
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    try:

        async def banner_gone() -> bool:
            await page.goto(f"{console.url}/inbox")
            return await page.locator("#service-down").count() == 0

        await eventually(banner_gone, timeout=30, what="the service-down banner to go once the service is back")
    finally:
        await page.close()


async def test_an_approval_above_the_confirmation_amount_takes_a_second_step(
    browser: Any, console: HypercornApp, scenario: Scenario, axe: Path
) -> None:
    await setup_lasting_quotes(scenario, price=40.0)  # 95 x 40.00 = 3,800.00, above the default 1,000
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[Any] = []
    page.on("pageerror", lambda error: errors.append(error))
    try:
        await page.goto(f"{console.url}/inbox")
        card = page.locator(f"#inbox article[data-sku='{scenario.sku}']")
        await card.wait_for(timeout=20_000)
        text = await card.inner_text()
        assert "95 x 40.00 USD = 3,800.00 USD" in text and "left" in text, text
        # The decision's countdown (a quote that runs out first has its own, data-quote-until).
        clock = card.locator(".countdown:not([data-quote-until])")
        before = await clock.inner_text()
        await expect(clock).not_to_have_text(before, timeout=5_000)  # it ticks in the page
        assert errors == [], errors
        assert await card.locator("table.mini tr.chosen").count() == 1, "the round's quotes, the chosen one marked"
        await card.get_by_role("button", name=f"Approve {request['po_number']}", exact=True).click()

        confirm = page.locator("#confirm")
        await confirm.wait_for(timeout=15_000)
        assert "at most 3,800.00 USD" in await confirm.inner_text()
        await assert_page_fit_for_everyone(page, axe, "the confirmation step")
        await page.set_viewport_size(PHONE)
        await assert_page_fit_for_everyone(page, axe, "the confirmation step (phone)")
        assert (await scenario.run_view(run_id))["state"]["approval"]["status"] == "pending", "not yet decided"
        await confirm.get_by_role("button", name=f"Confirm: approve {request['po_number']}").click()
        await page.wait_for_url(f"**/skus/{scenario.sku}/runs/1?**", timeout=15_000)
        assert f"{request['po_number']} approved up to 40.00" in await page.locator(".flash.ok").inner_text()
    finally:
        await page.close()
    assert (await scenario.outcome(run_id, within=60))["outcome"] == "received"


async def test_a_sku_whose_call_restate_paused_is_flagged_stopped_with_how_to_resume_it(
    browser: Any,
    console: HypercornApp,
    scenario: Scenario,
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    admin: Admin,
    artifacts: Path,
    axe: Path,
) -> None:
    await setup_lasting_quotes(scenario)
    await scenario.configure()
    page = await browser.new_page(viewport={"width": 1280, "height": 800})
    phone = await browser.new_page(viewport=PHONE)
    try:
        await page.goto(f"{console.url}/skus/{scenario.sku}")
        assert await page.locator("#stopped").count() == 0, "no banner while nothing is paused"
        held = await paused_check(scenario, service, ingress, admin)

        await page.goto(f"{console.url}/skus/{scenario.sku}")
        banner = await page.locator("#stopped").inner_text()
        assert "Stopped: Restate paused a call of this SKU." in banner, banner
        assert f"SkuAgent/{scenario.sku}/check, invocation {held}" in banner and "RT0010" in banner
        assert f"restate invocations resume {held}" in banner
        assert "Every later check, message and approval for this SKU waits behind it." in banner
        await page.screenshot(path=str(artifacts / "sku-stopped.png"), full_page=True)
        await assert_page_fit_for_everyone(page, axe, "a SKU with a paused call")
        await phone.goto(page.url)
        await phone.screenshot(path=str(artifacts / "sku-stopped-phone.png"), full_page=True)
        await assert_page_fit_for_everyone(phone, axe, "a SKU with a paused call (phone)")

        await page.goto(f"{console.url}/skus?q={scenario.sku}&flag=failing")
        row = page.locator("[data-flag=stopped]")
        await expect(row).to_have_count(1)
        assert "stopped" in (text := await row.inner_text()) and held in text, text
        await page.screenshot(path=str(artifacts / "skus-stopped.png"), full_page=True)
        await assert_page_fit_for_everyone(page, axe, "the SKUs with one stopped")

        await resume(admin, held)

        async def banner_gone() -> bool:
            await page.goto(f"{console.url}/skus/{scenario.sku}")
            return await page.locator("#stopped").count() == 0

        await eventually(banner_gone, timeout=30, what="the banner to go once the call is resumed")
    finally:
        await page.close()
        await phone.close()
