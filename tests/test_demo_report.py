"""The demo's last screen over a recorded result: the world's calls and orders, and the agents' records.

The recorded rows have the shape the world's `/admin/calls` and `/admin/orders` return (taken from a
demo run: bolt down for 3 calls, acme losing one answer, cogs dropping one reply), so the screen is
checked without running the twenty-SKU demo.
"""

from __future__ import annotations

import re
from typing import Any

from replenisher.demo_report import FaultTally, faulted_run, inspection_help, last_screen, plural
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import SkuRecord


def call(op: str, supplier: str, status: int, po: str | None = None, sku: str = "SKU-102") -> dict[str, Any]:
    return {
        "at": 1.0,
        "service": "supplier",
        "op": op,
        "supplier": supplier,
        "sku": sku,
        "po_number": po,
        "status": status,
    }


def order(supplier: str, po: str, sku: str) -> dict[str, Any]:
    return {"supplier": supplier, "po_number": po, "sku": sku, "quantity": 10, "submissions": 2, "chases": 0}


RECORDED_CALLS = [
    call("quote", "bolt", 503, sku="SKU-101"),
    call("quote", "bolt", 503, sku="SKU-101"),
    call("quote", "bolt", 503, sku="SKU-101"),
    call("quote", "bolt", 200, sku="SKU-101"),
    call("place_order", "acme", 503, "PO-SKU-102-1-1"),  # taken, answer lost
    call("find_order", "acme", 200, "PO-SKU-102-1-1"),
    call("place_order", "cogs", 201, "PO-SKU-109-1-1", sku="SKU-109"),
    call("chase", "cogs", 200, "PO-SKU-109-1-1", sku="SKU-109"),
    {"at": 1.0, "service": "erp", "op": "get_stock", "sku": "SKU-101", "status": 200},
]
RECORDED_ORDERS = [order("acme", "PO-SKU-102-1-1", "SKU-102"), order("cogs", "PO-SKU-109-1-1", "SKU-109")]


def record(sku: str, *pos: str) -> SkuRecord:
    outcomes = [
        ReplenishmentResult(
            run_id=f"replenish-{sku}-{n}", sku=sku, outcome="received", po_number=po, started_at=0, ended_at=1
        )
        for n, po in enumerate(pos, start=1)
    ]
    return SkuRecord(sku=sku, outcomes=outcomes)


RECORDS = {"SKU-102": record("SKU-102", "PO-SKU-102-1-1"), "SKU-109": record("SKU-109", "PO-SKU-109-1-1")}


def test_plural_forms() -> None:
    assert [plural(1, "order"), plural(2, "order"), plural(0, "order")] == ["1 order", "2 orders", "0 orders"]
    assert plural(1, "order was", "orders were") == "1 order was"
    assert plural(3, "order was", "orders were") == "3 orders were"


def test_the_faults_met_are_full_sentences_with_the_right_plurals() -> None:
    tally = FaultTally.from_world(RECORDED_CALLS, RECORDED_ORDERS)
    assert tally.sentences() == [
        "4 supplier calls failed and were retried with backoff.",
        "1 order was taken by the supplier while the answer was lost; "
        "the agent found it again by PO number and ordered nothing twice.",
        "The agents sent 1 chase about 1 order that a supplier had not confirmed.",
        "Suppliers hold 2 orders, none of them twice.",
    ]
    one = FaultTally.from_world([call("quote", "bolt", 503)], [order("acme", "PO-1", "SKU-1")])
    assert one.sentences()[0] == "1 supplier call failed and was retried with backoff."
    assert one.sentences()[-1] == "Suppliers hold 1 order, none of them twice."
    calm = FaultTally.from_world([], [])
    assert calm.sentences() == ["No supplier call failed.", "Suppliers hold 0 orders, none of them twice."]


def test_a_po_held_twice_is_named_not_hidden() -> None:
    twice = [order("acme", "PO-SKU-1-1-1", "SKU-1"), order("bolt", "PO-SKU-1-1-1", "SKU-1")]
    assert FaultTally.from_world([], twice).sentences()[-1] == (
        "Suppliers hold 2 orders, and these POs were ordered more than once: PO-SKU-1-1-1."
    )


def test_the_run_shown_is_the_found_again_order_else_the_chased_one() -> None:
    tally = FaultTally.from_world(RECORDED_CALLS, RECORDED_ORDERS)
    run = faulted_run(tally, RECORDS)
    assert run is not None and (run.sku, run.run_id, run.number) == ("SKU-102", "replenish-SKU-102-1", 1)
    assert "found the order again by PO number" in run.met
    chased_only = FaultTally.from_world([c for c in RECORDED_CALLS if c.get("supplier") != "acme"], RECORDED_ORDERS[1:])
    run = faulted_run(chased_only, RECORDS)
    assert run is not None and run.run_id == "replenish-SKU-109-1" and "chased" in run.met
    assert faulted_run(FaultTally.from_world([], []), RECORDS) is None


def test_the_last_screen_ends_with_the_timeline_then_the_commands() -> None:
    tally = FaultTally.from_world(RECORDED_CALLS, RECORDED_ORDERS)
    run = faulted_run(tally, RECORDS)
    help_text = inspection_help(
        "http://127.0.0.1:8080", "http://127.0.0.1:9070", "http://127.0.0.1:9100", ".venv/bin/restate", run
    )
    screen = last_screen(
        "SKU  runs\n---  ----", tally, run, "replenish-SKU-102-1  (SKU-102)  ended received", help_text
    )
    table, faults, heading, timeline, commands = screen.strip().split("\n\n")
    assert table.startswith("SKU")
    assert faults.splitlines()[0] == "Faults met:"
    assert heading == (
        "One run that met a fault: in replenish-SKU-102-1, the answer to its order was lost, "
        "and it found the order again by PO number. Its timeline:"
    )
    assert timeline.startswith("replenish-SKU-102-1")
    assert ".venv/bin/replenisher timeline SKU-102 --run 1" in commands
    assert "curl 'http://127.0.0.1:9100/admin/calls?sku=SKU-102'" in commands
    assert commands.splitlines()[-1] == "Stop the stack with `make down`."
    # The spend page soon shows none of the demo (its calendar runs on): the help says where to look.
    assert ".venv/bin/replenisher cost" in commands and ".venv/bin/replenisher console" in commands
    assert "`replenisher cost` shows what was bought whatever the date." in commands
    # Every line of prose ends a sentence: nothing cut short, no "1 orders".
    for line in [*faults.splitlines()[1:], heading, commands.splitlines()[0], commands.splitlines()[-1]]:
        assert line.rstrip().endswith((".", ":")), line
    assert not re.search(r"\b1 (orders|calls|chases|replenishments)\b", screen), screen


def test_with_no_faulted_run_the_screen_says_so() -> None:
    tally = FaultTally.from_world([], [])
    screen = last_screen("table", tally, None, None, inspection_help("i", "a", "w", "restate", None))
    assert "No finished run met a fault this time, so there is no timeline to show." in screen
