"""Integrity rules (issue 11): no expired quote put to the manager, no open order forgotten or
bought twice, reconciliation that backs off but never stops, and nothing a persuaded model or a
supplier's words can use to end a run early or to look reliable."""

from __future__ import annotations

from typing import Any

import pytest
from tests.domain.factories import DAY, T0, ack, goods, new_state, quote, stock
from tests.domain.test_policy import drive, results
from tests.domain.test_tools import NO, allowed, approved, drafted, ordered

from replenisher.domain.extraction import extract_reply_facts
from replenisher.domain.outcomes import result_of
from replenisher.domain.policy import choose
from replenisher.domain.sku import SkuRecord, reconcile_delay_days
from replenisher.domain.state import State
from replenisher.domain.tools.approval import ApprovalRequested
from replenisher.domain.tools.goods import WaitForGoods
from replenisher.domain.tools.limits import MAX_TURNS
from replenisher.domain.tools.ordering import PlaceOrder, PlaceOrderResult
from replenisher.domain.tools.quoting import DraftArgs, DraftPurchaseOrder, GetQuotes, QuotesResult
from replenisher.domain.tools.supplier import ReadSupplierReply

EXPIRY = T0 + 5 * DAY  # every factory quote's valid_until


# --- 2. quote validity ---------------------------------------------------------------------


def test_an_expired_quote_cannot_be_drafted_and_the_policy_re_quotes() -> None:
    state = new_state()
    GetQuotes().apply(state, NO, QuotesResult(quotes=[quote("acme", 4.0), quote("bolt", 5.0)]))
    assert "draft_purchase_order" in allowed(state)
    state.now = EXPIRY
    assert DraftPurchaseOrder().check_args(state, DraftArgs(quote_id="q-acme-4.0")) == (
        "quote 'q-acme-4.0' has expired: get new quotes"
    )
    assert "draft_purchase_order" not in allowed(state) and "get_quotes" in allowed(state)
    decision = choose(state, sorted(allowed(state)))
    assert (decision.tool, decision.reason) == ("get_quotes", "quotes expired: re-quote")


def test_the_policy_drafts_only_a_valid_quote_even_when_a_cheaper_one_expired() -> None:
    state = new_state()
    fresh = quote("bolt", 5.0).model_copy(update={"valid_until": EXPIRY + 10 * DAY})
    GetQuotes().apply(state, NO, QuotesResult(quotes=[quote("acme", 4.0), fresh]))
    state.now = EXPIRY
    decision = choose(state, sorted(allowed(state)))
    assert decision.tool == "draft_purchase_order" and decision.args == {"quote_id": fresh.quote_id}


def test_a_draft_whose_quote_expired_is_not_sent_for_approval_but_replaced_by_new_quotes() -> None:
    state = drafted()
    assert "request_approval" in allowed(state)
    state.now = EXPIRY
    assert "request_approval" not in allowed(state) and "get_quotes" in allowed(state)
    assert choose(state, sorted(allowed(state))).tool == "get_quotes"
    GetQuotes().apply(
        state, NO, QuotesResult(quotes=[quote("acme", 4.2).model_copy(update={"valid_until": T0 + 90 * DAY})])
    )
    assert state.po is None and state.approval_token is None
    assert "draft_purchase_order" in allowed(state)


def test_two_quotes_that_expire_together_are_re_quoted_not_put_to_the_manager() -> None:
    """The issue's case: the approval expired with its quote, and the other quote expired with it."""
    asked: list[tuple[float, float]] = []  # (when, valid_until of the quote) for each approval request
    rounds = iter(
        [
            [quote("acme", 4.0), quote("bolt", 5.0)],
            [q.model_copy(update={"valid_until": T0 + 30 * DAY}) for q in (quote("acme", 4.1), quote("bolt", 5.1))],
        ]
    )
    placements = iter(["approval_expired", "placed"])
    base = results()

    def request(s: State, args: Any) -> ApprovalRequested:
        assert s.po is not None
        asked.append((s.now, next(q.valid_until for q in s.quotes if q.quote_id == s.po.quote_id)))
        return base["request_approval"](s, args)

    def approve_late(s: State, args: Any) -> Any:
        s.now = max(s.now, EXPIRY + DAY)  # the manager answers after both first quotes expired
        return base["wait_for_approval"](s, args)

    def place(s: State, _: Any) -> PlaceOrderResult:
        if next(placements) == "approval_expired":
            return PlaceOrderResult(status="approval_expired", at=s.now)
        return PlaceOrderResult(status="placed", ack=ack(s), at=s.now)

    state, used = drive(
        results(
            get_quotes=lambda s, _: QuotesResult(quotes=next(rounds)),
            request_approval=request,
            wait_for_approval=approve_late,
            place_order=place,
        )
    )
    assert used.count("get_quotes") == 2 and used.count("request_approval") == 2
    assert all(when < valid_until for when, valid_until in asked), asked
    assert state.order is not None and state.order.unit_price == 4.1 and state.closed


# --- 1. an open order is followed up, never given up ------------------------------------------


def partly_delivered(received: int = 40) -> State:
    state = ordered()
    state.now = T0 + 2 * DAY
    ReadSupplierReply().apply(state, NO, extract_reply_facts("Confirmed, delivery in 4 days. 5% off next order.", T0))
    state.now = T0 + 3 * DAY
    WaitForGoods().apply(state, goods(state, received, "r1"))
    return state


@pytest.mark.parametrize("why", ["turns used up", "run stopped: cancelled by an operator"])
def test_a_run_ending_with_its_order_open_ends_unknown_with_what_it_saw(why: str) -> None:
    state = partly_delivered()
    state.last_failure = why if why.startswith("run stopped") else None
    result = result_of(state, T0 + 9 * DAY)
    assert result.outcome == "unknown" and "still open at the supplier (40 of 95 received)" in result.detail
    assert result.progress is not None and result.progress.received_quantity == 40
    assert result.progress.receipts == ["r1"] and result.progress.ordered_at == state.ordered_at


def test_the_policy_keeps_following_an_order_delivered_in_many_parts_until_its_turns_run_out() -> None:
    parts = iter(range(1, 100))
    state, used = drive(
        results(wait_for_goods=lambda s, _: goods(s, 1, f"r{next(parts)}")),
    )
    assert len(used) == MAX_TURNS and "done" not in used and not state.closed
    assert result_of(state, T0).outcome == "unknown"


def test_an_open_order_blocks_new_buying_and_its_follow_up_carries_on_where_the_run_left_it() -> None:
    record = SkuRecord(sku="SKU-1")
    first = record.consider(stock(), T0)
    assert first is not None
    state = partly_delivered()
    state.run_id = first.run_id
    open_result = result_of(state, T0 + 9 * DAY)
    assert record.finish(open_result)
    assert record.unresolved is not None and record.unresolved.run_id == first.run_id
    assert record.consider(stock(on_hand=0), T0 + 20 * DAY) is None  # never buys the stock twice

    run, _ = record.follow_up(T0 + 10 * DAY)
    assert state.order is not None and state.po is not None and open_result.progress is not None
    follow = new_state()
    follow.run_id = run.run_id
    follow.adopt(state.po, state.order, first.run_id, open_result.progress)
    assert (follow.received_quantity, follow.receipts, follow.ordered_at) == (40, ["r1"], state.ordered_at)
    assert follow.reply is not None and follow.reply == state.reply and "wait_for_goods" in allowed(follow)
    assert "wait_for_supplier_reply" not in allowed(follow)
    follow.now = T0 + 11 * DAY
    WaitForGoods().apply(follow, goods(follow, 55, "r2"))
    assert follow.all_goods_in and "close_purchase_order" in allowed(follow)
    follow.closed = True
    done = result_of(follow, T0 + 12 * DAY)
    assert done.received_before == 40 and done.quantity_received == 95
    # The memory judges the order once, from our clock: sent at T0 + 1 day, last receipt at T0 + 11.
    assert done.observations is not None and done.observations.order is not None
    assert done.observations.order.lead_days_actual == 10.0 and done.observations.promises == []

    assert record.finish(done)
    assert record.unresolved is None and record.stats.total_received == 95
    assert [(o.run_id, o.outcome) for o in record.outcomes] == [(first.run_id, "received"), (run.run_id, "received")]
    assert record.stats.by_outcome == {"received": 2}
    assert record.memory.suppliers["acme"].orders == 1


def test_a_follow_up_that_leaves_the_order_open_again_hands_it_on_and_both_settle_together() -> None:
    record = SkuRecord(sku="SKU-1")
    first = record.consider(stock(), T0)
    assert first is not None
    state = partly_delivered()
    state.run_id = first.run_id
    record.finish(result_of(state, T0 + 9 * DAY))
    second, _ = record.follow_up(T0 + 10 * DAY)
    state.run_id, state.adopted_from = second.run_id, first.run_id
    record.finish(result_of(state, T0 + 19 * DAY))
    assert record.unresolved is not None and record.unresolved.run_id == second.run_id
    assert record.stats.by_outcome == {"unknown": 2}
    record.settle_unresolved("gave_up", "reconciled: no order")
    assert [o.outcome for o in record.outcomes] == ["gave_up", "gave_up"]
    assert record.stats.by_outcome == {"gave_up": 2} and record.reconciling is None


# --- 6. reconciliation on the SKU's own timer -------------------------------------------------


def test_reconciliation_looks_at_once_then_backs_off_and_never_stops() -> None:
    assert [reconcile_delay_days(n, 1.0) for n in range(8)] == [0, 1, 2, 4, 8, 16, 16, 16]
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    state = ordered()
    state.run_id, state.order_status = run.run_id, "unknown"
    record.finish(result_of(state, T0 + DAY))
    delays = [record.next_reconcile(T0, 1.0, DAY) for _ in range(4)]
    assert delays == [0.0, DAY, 2 * DAY, 4 * DAY]
    assert record.reconciling is not None and record.reconciling.attempts == 3
    assert record.reconciling.due_at == T0 + 4 * DAY
    # A follow-up in flight settles it itself; a settled SKU has nothing left to look up.
    record.follow_up(T0 + 2 * DAY)
    assert record.next_reconcile(T0, 1.0, DAY) is None and record.reconciling is None


# --- 8. what a persuaded model cannot do -------------------------------------------------------


def test_done_is_refused_before_the_run_has_tried_to_buy() -> None:
    state = new_state()
    assert "done" not in allowed(state)
    assert allowed(approved()) >= {"place_order"} and "done" not in allowed(ordered())
    # After the place_order step's answer was lost the run may end only once it gave up checking.
    lost = approved()
    PlaceOrder().apply_failure(lost, NO, "no answer")
    assert "done" not in allowed(lost) and lost.ordered_at == lost.now
