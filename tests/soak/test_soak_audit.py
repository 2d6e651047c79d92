"""Positive controls for the soak's audit: each check is fed a planted bad record and must fire.

The evidence below is one healthy SKU as the soak gathers it after a run: run 1 received its
goods (order placed, PO closed, approval, reply and goods consumed), run 2 is active and waits
for its supplier's reply with its order open. Every test breaks one thing in it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from bench.soak_audit import WAIT_GRACE_SECONDS, Evidence, Verdict, audit, run_of_po

from replenisher.domain.sku import ActiveRun, KeptMessage, OutcomeStats, RoutedMessage, SkuRecord

SKU = "SOAK-001"
RUN1, RUN2 = f"replenish-{SKU}-1", f"replenish-{SKU}-2"
PO1, PO2 = f"PO-{SKU}-1-1", f"PO-{SKU}-2-1"
NOW = 1_000_000.0

APPROVAL1 = {"po_number": PO1, "token": "t1", "approved": True, "up_to": 9.0, "by": "manager", "note": ""}
REPLY1 = {"po_number": PO1, "supplier": "north", "text": "Thank you for purchase order"}
GOODS1 = {"receipt_id": "north-O1-GR1", "po_number": PO1, "sku": SKU, "quantity": 50}
APPROVAL2 = {"po_number": PO2, "token": "t2", "approved": True, "up_to": 9.0, "by": "manager", "note": ""}
LATE_GOODS = {"receipt_id": "south-O9-GR1", "po_number": "PO-SOAK-001-0-1", "sku": SKU, "quantity": 3}


def po(number: str, supplier: str = "north") -> dict[str, Any]:
    return {"po_number": number, "sku": SKU, "supplier": supplier, "quantity": 50, "unit_price": 8.0, "quote_id": "q"}


def order(number: str, supplier: str = "north", cancelled_at: float | None = None) -> dict[str, Any]:
    return {"po_number": number, "sku": SKU, "supplier": supplier, "quantity": 50, "cancelled_at": cancelled_at}


def message(seq: int, event: str, payload: dict[str, Any], status: str = "delivered") -> dict[str, Any]:
    return {
        "seq": seq,
        "sku": SKU,
        "event": event,
        "po_number": payload["po_number"],
        "payload": payload,
        "status": status,
        "reason": None,
    }


def envelope(payload: dict[str, Any]) -> dict[str, Any]:
    """How a run's promise holds a message (run 1's goods stay bare, as older code resolved them)."""
    return {"payload": payload, "sender": {"party": "north"}, "arrived_at": NOW - 60}


def healthy() -> Evidence:
    record = SkuRecord(
        sku=SKU,
        runs_started=2,
        active=ActiveRun(run_id=RUN2, started_at=NOW - 5, on_hand=5, safety_stock=20),
        stats=OutcomeStats(runs=1, by_outcome={"received": 1}),
    )
    record.kept = [KeptMessage(event="goods", payload=LATE_GOODS, at=NOW - 50, reason="no active replenishment")]
    record.active.routed.append(RoutedMessage(event="approval", seq=0, payload=APPROVAL2, at=NOW - 3))  # type: ignore[union-attr]
    ack2 = {**po(PO2), "order_id": "north-O2", "accepted_at": NOW - 2}
    runs = {
        RUN1: {
            "state": {
                "sku": SKU,
                "po": po(PO1),
                "order": {**po(PO1), "order_id": "north-O1", "accepted_at": NOW - 90},
                "order_status": "placed",
                "consumed": {"approval": 1, "supplier-reply": 1, "goods": 1},
            },
            "waiting": None,
        },
        RUN2: {
            "state": {"sku": SKU, "po": po(PO2), "order": ack2, "order_status": "placed", "consumed": {"approval": 1}},
            "waiting": {"tool": "wait_for_supplier_reply", "event": "supplier-reply", "seq": 0, "deadline": NOW + 5},
        },
    }
    return Evidence(
        skus=[SKU],
        records={SKU: record},
        unreadable={},
        runs=runs,
        run_invocations={
            RUN1: {"target_service_key": RUN1, "status": "completed", "completion_result": "success"},
            RUN2: {"target_service_key": RUN2, "status": "suspended", "completion_result": None},
        },
        # Copies, as Restate and the world each hold their own.
        promises=copy.deepcopy(
            {
                RUN1: {"approval-0": envelope(APPROVAL1), "supplier-reply-0": envelope(REPLY1), "goods-0": GOODS1},
                RUN2: {"approval-0": envelope(APPROVAL2)},
            }
        ),
        troubled=[],
        orders=[order(PO1), order(PO2)],
        messages=[
            message(1, "goods", LATE_GOODS),
            message(2, "approval", APPROVAL1),
            message(3, "supplier-reply", REPLY1),
            message(4, "goods", GOODS1),
            message(5, "approval", APPROVAL2),
        ],
        closed_pos={PO1},
        now=NOW,
    )


def counts(verdict: Verdict) -> tuple[int, int, int, int]:
    return verdict.duplicates, verdict.lost, verdict.stuck, verdict.open_orders_without_run


def test_the_healthy_evidence_passes_and_prints_the_line() -> None:
    verdict = audit(healthy(), faults=3)
    assert verdict.problems == []
    assert verdict.line() == (
        "soak: runs=1 faults=3 pos_audited=2 duplicates=0 lost=0 stuck=0 open_orders_without_run=0"
    )


def test_a_po_names_the_run_that_drafted_it() -> None:
    assert run_of_po("PO-SOAK-001-12-3") == "replenish-SOAK-001-12"
    assert run_of_po("not a po") is None


# --- runs and SKUs ---------------------------------------------------------------------------


def test_a_sku_that_cannot_be_read_fails() -> None:
    evidence = healthy()
    del evidence.records[SKU]
    evidence.unreadable[SKU] = "HTTP 500"
    verdict = audit(evidence, 0)
    assert verdict.stuck >= 1 and any("cannot be read: HTTP 500" in p for p in verdict.problems)


def test_a_run_that_cannot_be_read_is_stuck() -> None:
    evidence = healthy()
    del evidence.runs[RUN1]
    verdict = audit(evidence, 0)
    assert verdict.stuck >= 1 and any(p.startswith(f"{RUN1}: cannot be read") for p in verdict.problems)


def test_every_run_id_up_to_runs_started_is_accounted_for() -> None:
    evidence = healthy()
    evidence.run_invocations[RUN1] = {"status": "backing-off", "completion_result": None}
    verdict = audit(evidence, 0)
    assert any(f"{RUN1}: neither ended nor active" in p for p in verdict.problems)
    assert verdict.stuck >= 1


def test_a_run_restate_ran_that_no_sku_accounts_for_is_stuck() -> None:
    evidence = healthy()
    evidence.run_invocations[f"replenish-{SKU}-7"] = {"status": "completed", "completion_result": "success"}
    assert counts(audit(evidence, 0)) == (0, 0, 1, 0)


def test_an_ended_run_the_sku_did_not_record_is_stuck() -> None:
    evidence = healthy()
    evidence.records[SKU].stats.runs = 0
    verdict = audit(evidence, 0)
    assert verdict.stuck == 1 and any("1 runs ended, its record counts 0" in p for p in verdict.problems)


def test_an_active_run_waiting_for_nothing_is_stuck() -> None:
    evidence = healthy()
    evidence.runs[RUN2]["waiting"] = None
    assert counts(audit(evidence, 0)) == (0, 0, 1, 0)


def test_a_wait_past_its_deadline_is_stuck_and_one_within_it_is_not() -> None:
    evidence = healthy()
    evidence.runs[RUN2]["waiting"]["deadline"] = NOW - WAIT_GRACE_SECONDS - 1
    verdict = audit(evidence, 0)
    assert counts(verdict) == (0, 0, 1, 0) and "past its deadline" in verdict.problems[0]
    evidence.runs[RUN2]["waiting"]["deadline"] = NOW - 1  # late by less than the grace: the timer is due
    assert audit(evidence, 0).clean


def test_an_active_run_that_ended_is_stuck() -> None:
    evidence = healthy()
    evidence.run_invocations[RUN2] = {"status": "completed", "completion_result": "success"}
    assert counts(audit(evidence, 0)) == (0, 0, 1, 0)


def test_an_invocation_backing_off_paused_or_failed_is_stuck_but_a_cancelled_tick_is_not() -> None:
    evidence = healthy()
    evidence.troubled = [
        {"target": f"SkuAgent/{SKU}/deliver", "status": "backing-off", "last_failure": "connection refused"},
        {"target": f"SkuAgent/{SKU}/finish", "status": "paused"},
        {"target": f"Replenish/{RUN1}/run", "status": "completed", "completion_result": "failure"},
        {
            "target": f"SkuAgent/{SKU}/tick",
            "target_handler_name": "tick",
            "status": "completed",
            "completion_result": "failure",
            "completion_failure": "[409] canceled",
        },
    ]
    verdict = audit(evidence, 0)
    assert verdict.stuck == 3 and all("tick" not in p for p in verdict.problems)


# --- orders, PO by PO --------------------------------------------------------------------------


def test_a_po_with_two_orders_is_a_duplicate() -> None:
    evidence = healthy()
    evidence.orders.append(order(PO1, supplier="north"))
    verdict = audit(evidence, 0)
    assert verdict.duplicates >= 1 and any(f"PO {PO1} has 2 orders" in p for p in verdict.problems)


def test_an_order_no_run_placed_is_a_duplicate_whatever_the_sku_has_run() -> None:
    evidence = healthy()
    # Run 1 moved on from revision 1 (it names revision 2), but the supplier holds revision 1 too.
    evidence.runs[RUN1]["state"]["po"] = po(f"PO-{SKU}-1-2")
    evidence.runs[RUN1]["state"]["order"] = {**po(f"PO-{SKU}-1-2"), "order_id": "x", "accepted_at": 0}
    evidence.orders.append(order(f"PO-{SKU}-1-2"))
    evidence.closed_pos.add(f"PO-{SKU}-1-2")
    verdict = audit(evidence, 0)
    assert any(f"order {PO1}" in p and "not a PO its run placed" in p for p in verdict.problems)
    assert verdict.duplicates == 2  # the stray order, and run 1 holding orders under two POs


def test_an_order_at_another_supplier_than_its_po_names_is_a_duplicate() -> None:
    evidence = healthy()
    evidence.orders[0] = order(PO1, supplier="south")
    assert audit(evidence, 0).duplicates == 1


def test_an_order_for_a_sku_that_never_ran_is_a_duplicate() -> None:
    evidence = healthy()
    evidence.orders.append({**order("PO-OTHER-1-1"), "sku": "OTHER"})
    assert counts(audit(evidence, 0)) == (1, 0, 0, 0)


def test_an_open_order_whose_run_ended_is_an_open_order_without_run() -> None:
    evidence = healthy()
    evidence.closed_pos.clear()  # run 1 ended (say gave_up) with its order still open at the supplier
    verdict = audit(evidence, 0)
    assert counts(verdict) == (0, 0, 1, 1)
    assert f"order {PO1} is open at north and no run follows it" in verdict.problems[0]


def test_an_open_order_followed_by_an_adopting_run_is_not_open_without_run() -> None:
    evidence = healthy()
    evidence.closed_pos.clear()
    evidence.runs[RUN2]["state"]["po"] = po(PO1)  # run 2 follows up run 1's order
    evidence.runs[RUN2]["state"]["order"] = {**po(PO1), "order_id": "north-O1", "accepted_at": 0}
    evidence.orders = [order(PO1)]
    assert counts(audit(evidence, 0)) == (0, 0, 0, 0)


def test_a_cancelled_order_is_not_open() -> None:
    evidence = healthy()
    evidence.closed_pos.clear()
    evidence.orders[0] = order(PO1, cancelled_at=NOW - 10)
    assert audit(evidence, 0).clean


def test_an_order_a_run_believes_in_and_the_supplier_does_not_hold_is_lost() -> None:
    evidence = healthy()
    evidence.orders = [order(PO1)]
    verdict = audit(evidence, 0)
    assert counts(verdict) == (0, 1, 0, 0) and "north holds" in verdict.problems[0]


# --- messages, one by one ----------------------------------------------------------------------


def test_a_message_never_delivered_is_lost() -> None:
    evidence = healthy()
    evidence.messages.append(message(6, "goods", {**GOODS1, "receipt_id": "north-O1-GR2"}, status="pending"))
    assert counts(audit(evidence, 0)) == (0, 1, 0, 0)


def test_a_delivered_message_nobody_consumed_or_kept_is_lost() -> None:
    evidence = healthy()
    evidence.records[SKU].kept = []
    verdict = audit(evidence, 0)
    assert counts(verdict) == (0, 1, 0, 0) and "no run consumed it" in verdict.problems[0]


def test_messages_are_matched_one_by_one_not_by_totals() -> None:
    evidence = healthy()
    # Same totals as the world sent: but the late goods are kept twice and run 1's goods are gone.
    evidence.records[SKU].kept.append(copy.deepcopy(evidence.records[SKU].kept[0]))
    del evidence.promises[RUN1]["goods-0"]
    evidence.runs[RUN1]["state"]["consumed"]["goods"] = 0
    verdict = audit(evidence, 0)
    assert (verdict.duplicates, verdict.lost) == (1, 1)


def test_a_consumed_message_restate_holds_no_promise_for_is_lost() -> None:
    evidence = healthy()
    evidence.runs[RUN1]["state"]["consumed"]["supplier-reply"] = 2
    verdict = audit(evidence, 0)
    assert verdict.lost == 1 and "supplier-reply-1" in verdict.problems[0]


def test_a_message_routed_to_the_active_run_and_not_read_yet_is_held() -> None:
    evidence = healthy()
    evidence.runs[RUN2]["state"]["consumed"] = {}  # routed and its promise resolved, not consumed yet
    assert audit(evidence, 0).clean


def test_kept_messages_that_fell_off_the_record_count_as_lost() -> None:
    evidence = healthy()
    evidence.records[SKU].kept_overflow = 2
    assert counts(audit(evidence, 0)) == (0, 2, 0, 0)


@pytest.mark.parametrize("event", ["approval", "supplier-reply", "goods"])
def test_a_changed_message_does_not_match_the_one_the_world_sent(event: str) -> None:
    evidence = healthy()
    sent = next(m for m in evidence.messages if m["event"] == event and m["po_number"] == PO1)
    key = {"approval": "approved", "supplier-reply": "text", "goods": "quantity"}[event]
    promise = evidence.promises[RUN1][f"{event}-0"]
    promise = promise.get("payload", promise)
    promise[key] = {"approved": False, "text": "other", "quantity": 1}[key]
    verdict = audit(evidence, 0)
    assert (verdict.duplicates, verdict.lost) == (1, 1), sent
