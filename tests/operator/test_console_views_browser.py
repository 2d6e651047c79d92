"""The SKUs page, the spend view and the inbox's stock and supplier names in a real headless
Chromium against the real stack; every page checked with axe-core, at desktop and phone width.

Screenshots go to tests/artifacts/operator/ (the docs' are made by test_console_screenshots.py).
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_support import setup_lasting_quotes
from page_checks import DESKTOP, PHONE, assert_page_fit_for_everyone

from e2e.scenario import Scenario, ok
from replenisher.operations.catalogue import ErpCatalogue
from replenisher.stack.processes import HypercornApp
from replenisher.stack.runtime import RestateRuntime
from support import eventually

pytestmark = pytest.mark.e2e

CONSUMPTION = 0.001  # units a day: the shelf barely moves during the test, so its cover is known


async def shoot(page: Any, artifacts: Path, name: str, full_page: bool = False) -> None:
    await page.screenshot(path=str(artifacts / f"{name}.png"), full_page=full_page)


async def visit(page: Any, url: str, axe: Path, what: str, status: int = 200) -> None:
    response = await page.goto(url)
    assert response is not None and response.status == status, f"{what}: {response and response.status}"
    await assert_page_fit_for_everyone(page, axe, what)


@pytest.mark.slow
async def test_skus_spend_and_inbox_views_read_right_and_pass_accessibility_checks_at_both_widths(
    browser: Any, console: HypercornApp, scenario: Scenario, artifacts: Path, axe: Path
) -> None:
    await setup_lasting_quotes(scenario, price=4.0, daily_consumption=CONSUMPTION)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()

    async def waits_for_approval() -> bool:  # the inbox request is sent before the run saves its wait
        waiting = (await scenario.run_view(run_id)).get("waiting")
        return bool(waiting) and waiting["tool"] == "wait_for_approval"

    await eventually(waits_for_approval, timeout=20, what="the run to wait for the manager")
    desk = await browser.new_page(viewport=DESKTOP)
    phone = await browser.new_page(viewport=PHONE)
    errors: list[Any] = []
    desk.on("pageerror", lambda e: errors.append(e))
    phone.on("pageerror", lambda e: errors.append(e))
    sku, supplier_name = scenario.sku, f"Supplier {scenario.supplier}"
    # The world's record of the shelf (no run has ordered yet; it barely moves at this consumption).
    on_hand = ok(await scenario.world.get(f"/erp/stock/{sku}"))["on_hand"]
    try:
        # --- the inbox: the supplier's name, the stock now and its days of cover
        for page, width in ((desk, "desktop"), (phone, "phone")):
            card = page.locator(f"#inbox article[data-sku='{sku}']")
            # One visit: the console keeps the ERP's masters for 10 s, but a copy read by an earlier
            # test, before this SKU and its supplier were set up, is read again at once.
            await visit(page, f"{console.url}/inbox", axe, f"inbox ({width})")
            text = await card.inner_text()
            assert supplier_name in text and f"{scenario.supplier} " not in text.replace(supplier_name, ""), text
            cover = re.search(r"now (\d+) · ([\d.]+) days of cover at 0\.001/day", text)
            assert cover is not None, text
            assert float(cover[2]) == pytest.approx(int(cover[1]) / CONSUMPTION, abs=0.1)
            assert int(cover[1]) == on_hand, "the stock the world's ERP holds"
            approve = card.get_by_role("button", name=f"Approve {request['po_number']}", exact=True)
            box = await approve.bounding_box()
            assert box is not None and box["x"] + box["width"] <= page.viewport_size["width"], "Approve on screen"
        await shoot(desk, artifacts, "console-inbox")
        await shoot(phone, artifacts, "console-inbox-phone")

        # --- the SKUs page: search, the waiting-on filter, a filter that leaves it out, sorting
        await visit(desk, f"{console.url}/skus?q={sku}", axe, "skus searched")
        row = desk.locator(f"#skus tr[data-sku='{sku}']")
        text = await row.inner_text()
        assert "waits on manager" in text and "approval" in text and "run 1" in text, text
        stock = re.search(r"\b(\d+) / 20 safety / 100 target\s+([\d.]+) d", text)
        assert stock is not None and float(stock[2]) == pytest.approx(int(stock[1]) / CONSUMPTION, abs=0.1), text
        assert await desk.locator("#skus tbody tr").count() == 1, "the search keeps only this SKU"
        await desk.get_by_role("link", name="waiting on the manager").click()
        await desk.wait_for_url("**/skus?waiting=manager")
        assert await desk.locator(f"#skus tr[data-sku='{sku}']").count() == 1
        await assert_page_fit_for_everyone(desk, axe, "skus waiting on the manager")
        await desk.get_by_label("Search SKU").fill(sku)
        await desk.get_by_label("Show").select_option("failing")
        await desk.get_by_role("button", name="Apply").click()
        await desk.wait_for_url("**flag=failing**")
        assert await desk.locator(f"#skus tr[data-sku='{sku}']").count() == 0, (
            "a run waiting for approval is not failing"
        )
        await visit(desk, f"{console.url}/skus?sort=cover&order=desc", axe, "skus by cover")
        assert await desk.locator("th[aria-sort=descending]").text_content() == "Cover ▼"
        await visit(phone, f"{console.url}/skus?q={sku}", axe, "skus (phone)")
        await shoot(phone, artifacts, "console-skus-phone")
        await visit(desk, f"{console.url}/skus?sort=waiting", axe, "skus")
        await shoot(desk, artifacts, "console-skus")

        # --- a bad query is a clear 400 and changes nothing
        await visit(desk, f"{console.url}/skus?sort=price", axe, "a bad query", status=400)
        assert "sort='price'" in await desk.locator("main").inner_text()

        # --- the SKU's own page (its stock by the ERP, and the way to the manager's inbox) and the
        # run's, while it waits
        for page, width in ((desk, "desktop"), (phone, "phone")):
            await visit(page, f"{console.url}/skus/{sku}", axe, f"sku page ({width})")
            stock = await page.locator("#stock").inner_text()
            assert re.search(rf"\b{on_hand} / 20 safety / 100 target\s+[\d.]+ days of cover", stock), stock
            await page.get_by_role("link", name="decide in the approval inbox").click()
            await page.wait_for_url("**/inbox")
            assert await page.locator(f"#inbox article[data-sku='{sku}']").count() == 1
            await visit(page, f"{console.url}/skus/{sku}/runs/1", axe, f"run page ({width})")

        await scenario.decide(request["po_number"], approved=True)
        assert (await scenario.outcome(run_id, within=120))["outcome"] == "received"
        (order,) = await scenario.orders()  # the world's record of what was bought
        bought = f"{order['ack']['quantity'] * order['ack']['unit_price']:,.2f} USD"

        # --- spend: this supplier's order, ordered and received, nothing left committed
        for page, width in ((desk, "desktop"), (phone, "phone")):
            # 90 weeks: the test world's days last 0.25 s, so the order stays in view under load.
            url = f"{console.url}/spend?by=week&periods=90&supplier={scenario.supplier}"
            await visit(page, url, axe, f"spend ({width})")
            line = page.locator(f"#spend-suppliers tr[data-supplier='{scenario.supplier}']")
            text = await line.inner_text()
            assert supplier_name in text and text.count(bought) == 2 and "0.00 USD" in text, text
            assert "Committed now" in await page.locator("#committed").inner_text()
            assert await page.locator("svg.chart rect.ordered").count() == 90
        await visit(desk, f"{console.url}/spend?by=week&periods=8", axe, "spend per week")
        await shoot(desk, artifacts, "console-spend")
        await shoot(phone, artifacts, "console-spend-phone")
        await visit(desk, f"{console.url}/spend?by=month", axe, "a bad spend query", status=400)
        assert "by='month'" in await desk.locator("main").inner_text()
        # A supplier neither the ERP nor any order knows: refused, not offered as an option with nothing.
        await visit(desk, f"{console.url}/spend?supplier=nope", axe, "an unknown supplier", status=400)
        assert "supplier='nope' is no supplier" in await desk.locator("main").inner_text()

        # --- the inbox with nothing to decide, and a page that does not exist
        await visit(desk, f"{console.url}/skus/{sku}/runs/1", axe, "run page, finished")
        await visit(phone, f"{console.url}/no-such-page", axe, "404 page (phone)", status=404)
        assert errors == [], errors
    finally:
        await desk.close()
        await phone.close()


async def test_the_skus_and_spend_pages_do_not_cost_an_invocation_per_sku(
    console: HypercornApp, scenario: Scenario, restate_runtime: RestateRuntime
) -> None:
    """Loading the overview pages reads Restate's storage with SQL: no read invocation appears
    for them, while a SKU's own page (a positive control) reads its agent through ingress."""
    await setup_lasting_quotes(scenario)
    await scenario.check()
    await scenario.pending_approval()
    query = "SELECT count(*) AS n FROM sys_invocation WHERE target_handler_name IN ('status', 'state')"

    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http, httpx.AsyncClient(timeout=30) as admin:

        async def reads() -> int:
            response = await admin.post(
                f"{restate_runtime.admin_url}/query", json={"query": query}, headers={"accept": "application/json"}
            )
            response.raise_for_status()
            return int(response.json()["rows"][0]["n"])

        before = await reads()
        for _ in range(3):
            for path in ("/skus", "/skus?waiting=manager&sort=cover", "/spend", "/spend?by=week", "/inbox"):
                assert (await http.get(path)).status_code == 200, path
        assert await reads() == before, "the overview pages made read invocations"
        assert (await http.get(f"/skus/{scenario.sku}")).status_code == 200
        assert await reads() > before, "the control: a SKU's own page reads its agent through ingress"
        bad = await http.get("/skus", params={"colour": "red"})
        # The page's text, as a browser reads it (how a quote is escaped is the template engine's choice).
        assert bad.status_code == 400 and "unknown parameter 'colour'" in unescape(bad.text)
        bad = await http.get("/inbox", params={"x": "1"})
        assert bad.status_code == 400 and "unknown parameter 'x'" in unescape(bad.text)
        bad = await http.get("/skus", params={"q": "SKU-10'"})
        assert bad.status_code == 400 and "A-Za-z0-9" in bad.text, "the pattern as it is, not lower-cased"


async def test_the_kept_erp_masters_are_read_again_for_a_sku_or_supplier_they_lack(
    world: HypercornApp, scenario: Scenario
) -> None:
    """The console keeps the world's item and supplier masters for 10 s; a page naming a SKU set up
    after the copy was read gets it at once, and one the copy knows keeps the copy."""
    catalogue = ErpCatalogue(world.url, fresh_seconds=120)  # fresh throughout, even on a loaded machine
    try:
        before = await catalogue.read()
        assert scenario.sku not in before.items and before.error is None, before.error
        assert await catalogue.read() is before, "fresh and asked about nothing new: kept"
        await scenario.setup()
        assert await catalogue.read() is before, "the control: without naming the new SKU, the copy is kept"
        after = await catalogue.read({scenario.sku}, {scenario.supplier})
        assert after is not before and scenario.sku in after.items
        assert after.supplier(scenario.supplier) == f"Supplier {scenario.supplier}"
        assert await catalogue.read({scenario.sku}, {scenario.supplier}) is after, "it knows them now: kept"
    finally:
        await catalogue.aclose()


async def test_a_page_of_skus_reads_the_erps_figures_of_those_skus_alone(
    world: Any, scenario: Scenario, world_client: httpx.AsyncClient
) -> None:
    """A page of a long list asks the ERP for its own SKUs (100 a read), not for the whole item master."""
    await scenario.setup(on_hand=7, safety_stock=20)
    catalogue = ErpCatalogue(world.url)

    async def item_reads() -> list[dict[str, Any]]:
        return ok(await world_client.get("/admin/calls", params={"op": "list_items"}))["calls"]

    try:
        before = (await item_reads())[-1:]
        unknown = [f"{scenario.sku}-none-{i}" for i in range(150)]
        page = await catalogue.read_page([scenario.sku, *unknown])
        assert page.error is None, page.error
        assert list(page.items) == [scenario.sku], "the SKU asked for, and none the ERP does not list"
        assert page.items[scenario.sku].on_hand == 7
        assert page.supplier(scenario.supplier) == f"Supplier {scenario.supplier}"
        reads = await item_reads()
        since = reads[reads.index(before[0]) + 1 :] if before else reads
        assert len(since) == 2, "151 SKUs: two reads of at most 100"
    finally:
        await catalogue.aclose()
    too_many = await world_client.get("/erp/items", params={"sku": [f"S-{i}" for i in range(101)]})
    assert too_many.status_code == 400 and "sku" in too_many.text, (too_many.status_code, too_many.text)
