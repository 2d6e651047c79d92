"""No approval token in any view but the manager's inbox: not in the SKU's status (routed and
kept messages included), the run's state, timelines, the console's SKU and run pages, or logs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from operator_support import Cli, setup_lasting_quotes

from e2e.scenario import Scenario, ok
from replenisher.stack.processes import HypercornApp

pytestmark = pytest.mark.e2e


async def test_a_token_that_went_to_the_run_is_withheld_everywhere_it_is_shown(
    scenario: Scenario, cli: Cli, console: HypercornApp, log_dir: Path
) -> None:
    # The supplier confirms after 20 business days (seconds here): the run is still waiting
    # for that answer while every view is read, rather than racing past it.
    await setup_lasting_quotes(scenario, reply_days=20)
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    token = request["token"]
    decision = {"po_number": request["po_number"], "token": token, "approved": True}
    ok(await scenario.deliver("approval", decision))
    await scenario.waiting_for(run_id, "wait_for_supplier_reply", within=30)

    # Positive control: the manager's inbox holds the token; the detector below finds it there.
    assert token in (await scenario.world.get("/manager/approval-requests", params={"status": "all"})).text

    status = await scenario.ingress.get(f"/SkuAgent/{scenario.sku}/status")
    routed = status.json()["active"]["routed"]
    assert [m["payload"]["token"] for m in routed if m["event"] == "approval"] == ["<withheld>"]
    views = {
        "status": status.text,
        "state": (await scenario.ingress.post(f"/Replenish/{run_id}/state")).text,
        "cli status": (await cli("status", scenario.sku, "--json")).out,
        "cli timeline": (await cli("timeline", scenario.sku)).out,
    }
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as page:
        for path in (
            f"/skus/{scenario.sku}",
            f"/skus/{scenario.sku}/runs/1",
            f"/skus/{scenario.sku}/runs/1/timeline.html",
        ):
            response = await page.get(path)
            assert response.status_code == 200, (path, response.text[:300])
            views[f"console {path}"] = response.text

    empty = [name for name, text in views.items() if "wait_for_approval" not in text and "approval" not in text]
    assert empty == [], f"these views do not show the approval at all, so they prove nothing: {empty}"

    # The same decision once more after the run ended: kept for someone to look at, withheld too.
    assert (await scenario.outcome(run_id, within=90))["outcome"] == "received"
    ok(await scenario.deliver("approval", decision))
    again = await scenario.ingress.get(f"/SkuAgent/{scenario.sku}/status")
    assert [m["payload"]["token"] for m in again.json()["kept"]] == ["<withheld>"]
    views["status again"] = again.text
    for name in ("replenisher.log", "restate-server.log", "world.log", "inbound.log"):
        views[f"log {name}"] = (log_dir / name).read_text(errors="replace")

    leaked = [name for name, text in views.items() if token in text]
    assert leaked == [], f"the approval token shows in {leaked}"
