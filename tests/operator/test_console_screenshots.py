"""The docs' screenshots of the console and the CLI (docs/screenshots/, shown on docs/operating/),
taken from a small, realistic world on the real stack with Debian's Chromium at desktop and phone
width (`make screenshots`).

Runs only when REPLENISHER_SCREENSHOT_DIR names the folder to write (docs/screenshots): it is
how the pictures are made, the other browser tests are how the views are checked. It still
asserts what it photographs, so a picture of a broken page is not taken silently.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_support import Cli
from page_checks import DESKTOP, PHONE

from e2e.scenario import Scenario, ok
from replenisher.stack.processes import HypercornApp
from support import RegisteredService, eventually

SHOTS = os.environ.get("REPLENISHER_SCREENSHOT_DIR")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not SHOTS, reason="makes the docs' screenshots: set REPLENISHER_SCREENSHOT_DIR"),
]

SUPPLIERS = {
    "acme": ("Acme Industrial Supply", {"SKU-101": 4.20, "SKU-102": 12.50, "SKU-103": 0.85}),
    "bolt": ("Bolt & Nut Express", {"SKU-101": 4.70, "SKU-104": 145.00, "SKU-106": 19.90}),
    "cogs": ("Cogs Components", {"SKU-105": 7.75}),
}
ITEMS = {  # on hand, safety, target, use a day, suppliers
    "SKU-101": (40, 50, 200, 0.1, ["acme", "bolt"]),
    "SKU-102": (20, 60, 240, 0.1, ["acme"]),
    "SKU-103": (900, 500, 2000, 1.0, ["acme"]),
    "SKU-104": (15, 20, 80, 0.05, ["bolt"]),
    "SKU-105": (30, 100, 400, 0.1, ["cogs"]),
    "SKU-106": (10, 40, 160, 0.05, ["bolt"]),
}
TERMINAL = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title><style>"
    "body {{ margin: 0; background: #111827; }} pre {{ margin: 0; padding: 14px 18px; color: #e5e7eb; "
    "font: 13px/1.45 'DejaVu Sans Mono', monospace; white-space: pre; }} b {{ color: #86efac; }}"
    "</style></head><body><pre><b>$ {command}</b>\n{output}</pre></body></html>"
)


def sku(ingress: httpx.AsyncClient, world: httpx.AsyncClient, name: str) -> Scenario:
    s = Scenario(ingress, world, name)
    s.sku = name
    return s


@pytest.fixture(scope="module", autouse=True)
def _shots_folder() -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)


async def shoot(page: Any, name: str) -> None:
    assert SHOTS is not None
    path = Path(SHOTS) / f"{name}.png"
    await page.screenshot(path=str(path))
    # The inbox with its quotes tables came to 150-160 KB as its figures moved: small still, for a page.
    assert path.stat().st_size < 200_000, f"{path} is {path.stat().st_size} bytes: keep the docs' pictures small"


async def test_the_readme_screenshots(
    browser: Any,
    console: HypercornApp,
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    world_client: httpx.AsyncClient,
    cli: Cli,
) -> None:
    world = world_client
    policy_before = ok(await world.get("/manager/policy"))
    ok(await world.put("/manager/policy", json={"auto_approve": False, "max_unit_price": 120.0}))
    try:
        for sid, (name, prices) in SUPPLIERS.items():
            body = {"name": name, "prices": prices, "lead_days": 2, "reply_days": 0.5, "quote_valid_days": 365,
                    "deliveries": 1, "delivery_gap_days": 1}  # fmt: skip
            ok(await world.put(f"/admin/suppliers/{sid}", json=body))
        for name, (on_hand, safety, target, per_day, carriers) in ITEMS.items():
            body = {"on_hand": on_hand, "safety_stock": safety, "target_stock": target,
                    "daily_consumption": per_day, "suppliers": carriers}  # fmt: skip
            ok(await world.put(f"/admin/items/{name}", json=body))
        skus = {name: sku(ingress, world, name) for name in ITEMS}

        # SKU-102 is bought and received; SKU-106's supplier goes quiet after the order.
        for name in ("SKU-102", "SKU-106"):
            run_id = (await skus[name].check())["started"]
            request = await skus[name].pending_approval()
            if name == "SKU-106":
                ok(await world.put("/faults/suppliers/bolt", json={"quiet": True}))
            await skus[name].decide(request["po_number"], approved=True)
            if name == "SKU-102":
                assert (await skus[name].outcome(run_id, within=60))["outcome"] == "received"
        await skus["SKU-106"].waiting_for("replenish-SKU-106-1", "wait_for_supplier_reply", within=30)
        # The test world's days last 0.25 s: photograph the spend while its weeks still hold both orders.
        desk = await browser.new_page(viewport={**DESKTOP, "height": 720})
        phone = await browser.new_page(viewport=PHONE)
        try:
            await desk.goto(f"{console.url}/spend?by=week&periods=26")
            assert "Acme Industrial Supply" in await desk.locator("#spend-suppliers").inner_text()
            await shoot(desk, "console-spend")
            await phone.goto(f"{console.url}/spend?by=week&periods=26")
            await shoot(phone, "console-spend-phone")
        finally:
            await desk.close()
            await phone.close()
        # SKU-101 and SKU-104 wait for the manager (SKU-104 above the budget); SKU-105's supplier is down.
        ok(await world.put("/faults/suppliers/cogs", json={"down_calls": 1_000_000}))
        for name in ("SKU-101", "SKU-104", "SKU-105"):
            await skus[name].check()
        for name in ("SKU-101", "SKU-104"):
            await skus[name].waiting_for(f"replenish-{name}-1", "wait_for_approval", within=30)

        async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:

            async def failing() -> bool:
                return "SKU-105" in (await http.get("/skus", params={"flag": "failing"})).text

            await eventually(failing, timeout=60, what="SKU-105 to show as failing")

        desk = await browser.new_page(viewport={**DESKTOP, "height": 720})
        phone = await browser.new_page(viewport=PHONE)
        try:
            await desk.goto(f"{console.url}/inbox")
            assert await desk.locator("#inbox article").count() == 2
            assert await desk.locator("[data-flag=over-budget]").count() == 1
            await shoot(desk, "console-inbox")
            await phone.goto(f"{console.url}/inbox")
            await shoot(phone, "console-inbox-phone")

            # SKU-105's step shows as retrying between attempts: photograph it then.
            async def retrying_row() -> bool:
                await desk.goto(f"{console.url}/skus")
                return "retrying" in await desk.locator("#skus tr[data-sku='SKU-105']").inner_text()

            await eventually(retrying_row, timeout=30, what="SKU-105's step between two attempts")
            assert await desk.locator("#skus tbody tr").count() == len(ITEMS)
            await shoot(desk, "console-skus")
            await phone.goto(f"{console.url}/skus?waiting=supplier")
            await shoot(phone, "console-skus-phone")
            await desk.goto(f"{console.url}/skus/SKU-102/runs/1")
            await desk.locator("p.outcome[data-outcome='received']").wait_for(timeout=20_000)
            await shoot(desk, "console-run")

            for name, args in (("cli-skus", ("skus",)), ("cli-status", ("status", "SKU-101"))):
                result = await cli(*args, env={"COLUMNS": "120"})
                assert result.code == 0, str(result)
                command = "replenisher " + " ".join(args)
                html = TERMINAL.format(title=command, command=command, output=escape(result.out.rstrip()))
                term = await browser.new_page(viewport={"width": 600, "height": 200})
                try:
                    await term.set_content(html)
                    width = await term.evaluate("document.documentElement.scrollWidth")
                    height = await term.evaluate("document.documentElement.scrollHeight")
                    await term.set_viewport_size({"width": min(width + 24, 1400), "height": min(height, 640)})
                    await shoot(term, name)
                finally:
                    await term.close()
        finally:
            await desk.close()
            await phone.close()
    finally:
        ok(await world.put("/manager/policy", json=policy_before))
        for sid in ("bolt", "cogs"):
            await world.delete(f"/faults/suppliers/{sid}")
