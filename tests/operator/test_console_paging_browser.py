"""The SKUs page pages through a long list in a real headless Chromium against the real stack:
120 SKU agents, 50 a page (read from the SKU list kept by key), followed with the page's own links
at desktop and phone width, every page checked with axe-core."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from page_checks import DESKTOP, PHONE, assert_page_fit_for_everyone

from e2e.scenario import ok
from replenisher.stack.processes import HypercornApp
from support import RegisteredService, eventually

pytestmark = pytest.mark.e2e

ITEMS = 120


async def test_a_long_list_pages_fifty_at_a_time_with_links_that_keep_the_search(
    browser: Any,
    console: HypercornApp,
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    world_client: httpx.AsyncClient,
    artifacts: Path,
    axe: Path,
) -> None:
    # A family of SKU agents, their shelves full, named so that only this test's search finds them.
    prefix = f"PG-{uuid4().hex[:6]}"
    skus = [f"{prefix}-{i:03d}" for i in range(ITEMS)]
    supplier = f"sup-{prefix}"
    ok(
        await world_client.put(
            f"/admin/suppliers/{supplier}",
            json={"name": f"Supplier {supplier}", "prices": {}, "lead_days": 1, "reply_days": 1},
        )
    )
    for sku in skus:
        item = {"on_hand": 50, "safety_stock": 20, "target_stock": 100, "daily_consumption": 0, "suppliers": [supplier]}
        ok(await world_client.put(f"/admin/items/{sku}", json=item))
    await asyncio.gather(*(ingress.post(f"/SkuAgent/{sku}/check") for sku in skus))
    first_url = f"{console.url}/skus?q={prefix}&per_page=50"

    async with httpx.AsyncClient(timeout=30) as http:

        async def all_listed() -> bool:  # each agent's put reaches the list a moment after its check
            return f"rows 1-50 of {ITEMS}" in (await http.get(first_url)).text

        await eventually(all_listed, timeout=30, what=f"the console to list the {ITEMS} new SKUs")
        past = await http.get(f"{console.url}/skus", params={"q": prefix, "per_page": "50", "page": "4"})
        assert past.status_code == 400 and f"page=4: the {ITEMS} SKUs that match make 3 pages of 50" in past.text

    for viewport, width in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page = await browser.new_page(viewport=viewport)
        try:
            response = await page.goto(first_url)
            assert response is not None and response.status == 200
            await assert_page_fit_for_everyone(page, axe, f"skus page 1 ({width})")
            assert await page.locator("#rows-shown").inner_text() == f"rows 1-50 of {ITEMS} · page 1 of 3"
            rows = page.locator("#skus tbody tr")
            assert await rows.count() == 50
            assert await rows.first.get_attribute("data-sku") == skus[0]
            assert await page.locator("#pager a[rel=prev]").count() == 0, "no page before the first"

            await page.locator("#pager a[rel=next]").click()
            await page.wait_for_url("**page=2**")
            assert await page.locator("#rows-shown").inner_text() == f"rows 51-100 of {ITEMS} · page 2 of 3"
            assert [await rows.nth(i).get_attribute("data-sku") for i in (0, 49)] == [skus[50], skus[99]]
            assert await page.get_by_label("Search SKU").input_value() == prefix, "the search is kept"

            await page.locator("#pager a[rel=next]").click()
            await page.wait_for_url("**page=3**")
            await assert_page_fit_for_everyone(page, axe, f"skus page 3 ({width})")
            assert await page.locator("#rows-shown").inner_text() == f"rows 101-120 of {ITEMS} · page 3 of 3"
            assert await rows.count() == ITEMS - 100
            assert await page.locator("#pager a[rel=next]").count() == 0, "no page after the last"
            await page.screenshot(path=str(artifacts / f"skus-paged-{width}.png"), full_page=True)

            # Sorting again starts from the first page, in the new order, with the same search and size.
            if viewport == DESKTOP:
                await page.get_by_role("link", name="SKU ▲", exact=True).click()
            else:  # the phone's cards have no column headings: the form sorts
                await page.get_by_label("Order").select_option("desc")
                await page.get_by_role("button", name="Apply").click()
            await page.wait_for_url("**order=desc**")
            assert "&page=" not in page.url and "per_page=50" in page.url, page.url
            assert await rows.first.get_attribute("data-sku") == skus[-1]
            assert await page.locator("#rows-shown").inner_text() == f"rows 1-50 of {ITEMS} · page 1 of 3"
        finally:
            await page.close()
