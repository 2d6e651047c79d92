"""What autoescaping buys: text that looks like markup (a supplier's name, a manager's note, a
message in a URL) shows as that text on every console page that shows it, and never becomes
markup: no script of its own, no tag, no attribute it could break out of.

Judged from the HTML the real console serves over HTTP, against the real stack; and, for a SKU
name (which every door refuses unless it is letters, digits, '.', '_' and '-'), from the pages
rendered straight from records that hold one.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from operator_support import setup_lasting_quotes
from test_console_pages import NOW, pending

from e2e.scenario import Scenario, ok
from replenisher.console.pages import InboxSettings, inbox, run_page, sku_detail, skus
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import SkuRecord
from replenisher.operations.catalogue import Catalogue
from replenisher.operations.overview import SkuQuery, SkuRow, page_of
from replenisher.stack.processes import HypercornApp
from replenisher.timeline.html import render_html
from replenisher.timeline.model import Span, Timeline, Turn
from support import eventually

SUPPLIER = "<script>alert(\"supplier\")</script> & 'Sons' <b>Ltd</b>"
NOTE = "<img src=x onerror=alert('note')> \"ok\" & <script>alert(1)</script>"
FLASH = "<script>document.title='owned'</script> & \"done\""


class Page(HTMLParser):
    """A page as a browser parses it: its text, its elements and their attributes."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def assert_shown_as_text(html: str, *texts: str) -> None:
    page = Page(html)
    for text in texts:
        assert text in page.all_text, f"{text!r} is not among the page's text"
        assert text not in html, f"{text!r} went into the page unescaped"
    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert all((a.get("src") or "").startswith("/static/") for a in scripts), f"a script of its own: {scripts}"
    assert "img" not in [t for t, _ in page.tags], "an <img> was made"
    handlers = [(t, a) for t, a in page.tags for name in a if name.startswith("on")]
    assert handlers == [], f"an event handler attribute was made: {handlers}"


@pytest.mark.e2e
async def test_a_suppliers_name_a_managers_note_and_a_message_in_a_url_show_as_text_on_every_page(
    console: HypercornApp, scenario: Scenario
) -> None:
    # The supplier answers the order slowly: the run then waits on the supplier, and the SKU
    # list names whom it waits on.
    await setup_lasting_quotes(scenario, price=4.0, reply_days=300)
    supplier = {
        "name": SUPPLIER,
        "prices": {scenario.sku: 4.0},
        "lead_days": 2,
        "reply_days": 300,
        "quote_valid_days": 365,
        "deliveries": 1,
        "delivery_gap_days": 1,
    }
    ok(await scenario.world.put(f"/admin/suppliers/{scenario.supplier}", json=supplier))
    try:
        run_id = (await scenario.check())["started"]
        request = await scenario.pending_approval()

        async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
            inbox_page = await http.get("/inbox")
            assert inbox_page.status_code == 200
            assert_shown_as_text(inbox_page.text, SUPPLIER)
            card = await http.get("/inbox/fragment")
            assert_shown_as_text(card.text, SUPPLIER)

            form = {"sku": scenario.sku, "run_id": run_id, "token": request["token"], "decision": "approve"}
            decided = await http.post("/approvals", data={**form, "up_to": "4.00", "note": NOTE})
            assert decided.status_code == 303, decided.text
            assert decided.headers["location"].startswith(f"/skus/{scenario.sku}/runs/1?done=")
            await scenario.waiting_for(run_id, "wait_for_supplier_reply", within=30)

            async def waits_on_the_supplier() -> str | None:
                page = await http.get("/skus", params={"waiting": "supplier"})
                return page.text if scenario.sku in page.text else None

            listed = await eventually(
                waits_on_the_supplier, timeout=30, what="the SKU listed as waiting on its supplier"
            )
            assert_shown_as_text(listed, SUPPLIER)
            assert_shown_as_text((await http.get("/spend")).text, SUPPLIER)

            run = await http.get(f"/skus/{scenario.sku}/runs/1")
            assert run.status_code == 200
            assert_shown_as_text(run.text, NOTE)
            for path in (f"/skus/{scenario.sku}", f"/skus/{scenario.sku}/runs/1/fragment"):
                assert_shown_as_text((await http.get(path)).text, NOTE)
            download = await http.get(f"/skus/{scenario.sku}/runs/1/timeline.html")
            assert "<script" not in download.text, "the downloaded timeline holds no script at all"
            assert_shown_as_text(download.text, NOTE)

            flashed = await http.get(f"/skus/{scenario.sku}/runs/1", params={"done": FLASH})
            assert_shown_as_text(flashed.text, FLASH)

            # A message the console writes from what it was asked: the error pages.
            no_sku = await http.get("/skus/" + quote("<img src=x onerror=alert('sku')>", safe=""))
            assert no_sku.status_code == 404
            assert_shown_as_text(no_sku.text, "\"<img src=x onerror=alert('sku')>\" is not a valid SKU")
            bad_query = await http.get("/inbox", params={"<b onmouseover=x>": "1"})
            assert bad_query.status_code == 400
            assert_shown_as_text(bad_query.text, "unknown parameter '<b onmouseover=x>'")
            searched = await http.get("/skus", params={"q": "<script>"})
            assert searched.status_code == 400
            assert_shown_as_text(searched.text)
            not_a_supplier = await http.get("/spend", params={"supplier": "<i>acme</i>"})
            assert not_a_supplier.status_code == 400
            assert_shown_as_text(not_a_supplier.text, "bad query: supplier='<i>acme</i>'")
            no_page = await http.get("/" + quote("<svg onload=alert(1)>", safe=""))
            assert no_page.status_code == 404
            assert_shown_as_text(no_page.text, "no page at /<svg onload=alert(1)>")
    finally:
        # Other tests share the world: its spend page lists every supplier by name.
        supplier["name"] = f"Supplier {scenario.supplier}"
        ok(await scenario.world.put(f"/admin/suppliers/{scenario.supplier}", json=supplier))


HOSTILE_SKU = "SKU-<script>alert('sku')</script>&\"x\""


def test_a_sku_name_that_looks_like_markup_shows_as_text_on_the_inbox_the_sku_list_a_run_and_its_timeline() -> None:
    now = NOW
    request = pending(sku=HOSTILE_SKU, run_id=f"replenish-{HOSTILE_SKU}-1", po_number=f"PO-{HOSTILE_SKU}-1-1")
    names = Catalogue(supplier_names={"acme": SUPPLIER})
    assert_shown_as_text(inbox([request], now, ("error", FLASH), InboxSettings(catalogue=names)), HOSTILE_SKU, SUPPLIER)

    outcome = ReplenishmentResult(
        run_id=f"replenish-{HOSTILE_SKU}-1",
        sku=HOSTILE_SKU,
        outcome="gave_up",
        detail=NOTE,
        started_at=now - 9,
        ended_at=now - 8,
    )
    row = SkuRow(sku=HOSTILE_SKU, runs=1, last_outcome=outcome)
    listed = skus(page_of([row], SkuQuery(), None, now), SkuQuery(), now, None, Catalogue())
    assert_shown_as_text(listed, HOSTILE_SKU, NOTE)

    record: Any = SkuRecord(sku=HOSTILE_SKU, runs_started=1, outcomes=[outcome])
    assert_shown_as_text(sku_detail(record, None, None), HOSTILE_SKU, NOTE)
    step = Span(kind="step", name="get_quotes", start=now - 9, end=now - 8)
    turn = Turn(turn=1, tool="get_quotes", summary=SUPPLIER, reason=NOTE, spans=[step])
    timeline = Timeline(
        run_id=f"replenish-{HOSTILE_SKU}-1", sku=HOSTILE_SKU, source="journal", now=now, turns=[turn], outcome=outcome
    )
    assert_shown_as_text(run_page(timeline, "/skus/x/runs/1/fragment", ("ok", FLASH)), HOSTILE_SKU, SUPPLIER, NOTE)
    assert_shown_as_text(render_html(timeline), HOSTILE_SKU, SUPPLIER, NOTE)
