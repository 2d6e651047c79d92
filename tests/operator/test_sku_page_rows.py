"""The console's SKUs page rows from the list's entries (`operations.sku_page`), pure: the last outcome
is the run before the active one, a wait becomes whom it waits on and until when, and the ERP's figures
and paused calls are the row's own."""

from __future__ import annotations

from replenisher.domain.sku_list import ListEntry
from replenisher.operations.catalogue import ItemStock
from replenisher.operations.restate.paused import PausedCall
from replenisher.operations.sku_lines import line_of_entry
from replenisher.operations.sku_page import last_outcome_of, row_of_entry

NOW = 1_800_000_000.0


def test_the_last_outcome_is_of_the_run_before_the_active_one_or_of_the_last_run() -> None:
    idle = ListEntry(sku="A", revision=3, runs=2, outcome="received", detail="95 of 95", ended_at=NOW)
    last = last_outcome_of(idle)
    assert last is not None and (last.run_id, last.outcome, last.detail) == ("replenish-A-2", "received", "95 of 95")
    busy = idle.model_copy(update={"runs": 3, "active_run": "replenish-A-3"})
    assert (o := last_outcome_of(busy)) is not None and o.run_id == "replenish-A-2"
    first = ListEntry(sku="A", revision=1, runs=1, active_run="replenish-A-1")
    assert last_outcome_of(first) is None, "a first run still going has no outcome before it"
    assert line_of_entry(busy).last_outcome == last_outcome_of(busy), "the CLI's line says the same"


def test_a_row_says_whom_its_run_waits_on_until_when_with_the_erps_figures_and_its_paused_calls() -> None:
    entry = ListEntry(
        sku="A",
        revision=2,
        watched=True,
        runs=1,
        active_run="replenish-A-1",
        waiting_tool="wait_for_goods",
        waiting_since=NOW - 60,
        waiting_until=NOW + 600,
        asked_price=4.5,
        supplier="acme",
        wait_run=1,
        on_hand=3,
        safety_stock=20,
    )
    stock = ItemStock(sku="A", on_hand=7, safety_stock=20, target_stock=100, suppliers=["acme"], daily_consumption=2)
    call = PausedCall(id="inv_1", target="SkuAgent/A/check", since=NOW)
    row = row_of_entry(entry, stock, [call])
    assert row.waiting is not None and (row.waiting.tool, row.waiting.deadline) == ("wait_for_goods", NOW + 600)
    assert (row.waiting_on, row.waiting_since, row.supplier, row.asked_price) == ("supplier", NOW - 60, "acme", 4.5)
    assert row.stock == stock and row.stock.days_of_cover == 3.5, "the ERP's figures now, not the last check's"
    assert row.paused == [call] and row.failing is not None and row.failing.startswith("stopped")
    assert row.over_budget(4.0) and not row.over_budget(5.0)
