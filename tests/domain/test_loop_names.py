"""The journal's names are built and parsed in one module: what the loop writes, the timeline reads."""

from __future__ import annotations

from replenisher.loop import names


def test_a_turns_step_and_decision_parse_back_to_tool_and_turn() -> None:
    assert names.parse_step(names.step("request_quotes", 3)) == ("request_quotes", 3)
    assert names.parse_step(names.decide(7)) == (names.DECIDE, 7)
    assert names.decision_turn(names.decide(7, attempt=2)) == 7


def test_a_re_ask_a_delay_and_the_steps_a_wait_takes_are_not_turn_steps() -> None:
    assert names.decide(4, attempt=1) == "decide 4 again 1"
    assert names.parse_step(names.decide(4, attempt=1)) is None
    assert names.parse_step(names.delay("check_order_status", 2)) is None
    assert names.parse_delay(names.delay("check_order_status", 2)) == ("check_order_status", 2)
    assert names.parse_delay(names.step("check_order_status", 2)) is None
    assert names.is_during_wait(names.remind("manager", "50%"))
    assert names.is_during_wait(names.escalate("wait_for_approval"))
    assert not names.is_during_wait(names.step("place_order", 5))


def test_a_message_promise_names_its_kind_and_number() -> None:
    key = names.message_promise("supplier-reply", 12)
    assert key == "supplier-reply-12"
    assert names.parse_promise(key) == ("supplier-reply", 12)
    assert names.promise_event(key) == "supplier-reply"
    assert names.parse_promise("state") is None
    assert names.parse_promise("approval-x") is None


def test_the_skus_journal_names_keep_the_formats_recorded_runs_replay_against() -> None:
    # Written once here as text: every other test takes them from the namer, and a change here
    # is a change to what SKU handlers journaled by earlier code replay against.
    assert (names.READ_STOCK, names.RUN_REQUEST, names.TIMESTAMP) == ("read stock", "run request", "timestamp")
    assert names.reconcile("PO-SKU-1-1-1") == "reconcile PO-SKU-1-1-1"
    assert names.reconcile("PO-9").split(" ")[0] == names.RECONCILE  # the crash matrix arms it by its first word
    assert names.receipt_lookup("GR-7") == "look up receipt GR-7"
    assert (names.SKU_RECORD, names.LAST_CHECK_ERROR) == ("record", "last_check_error")
    assert (names.ADOPT, names.NEXT_CHECK) == ("adopt", "next check")


def test_a_target_and_a_promise_prefix_are_what_restate_records_and_the_promises_start_with() -> None:
    assert names.target(names.REPLENISH, "replenish-SKU-1-3", names.RUN) == "Replenish/replenish-SKU-1-3/run"
    assert names.target(names.SKU_AGENT, "SKU-1", "status") == "SkuAgent/SKU-1/status"
    assert names.message_promise("approval", 2).startswith(names.promise_prefix("approval"))
    assert not names.message_promise("approval-late", 2).startswith(names.promise_prefix("approval") + "2")
