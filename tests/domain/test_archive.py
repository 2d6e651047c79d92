"""The run archive: bounded whatever a run throws at it, tokens never kept, turns kept once and in order."""

from __future__ import annotations

from replenisher.domain.archive import (
    ARCHIVE_SCHEMA_VERSION,
    MAX_ARCHIVE_BYTES,
    MAX_WAIT_EVENTS,
    RunArchive,
    TurnBuilder,
)
from replenisher.domain.decisions import Decision
from replenisher.domain.documents import ApprovalDecision, Sender, SupplierReply
from replenisher.domain.tools.limits import MAX_TURNS


def archive() -> RunArchive:
    return RunArchive(run_id="replenish-SKU-1-1", sku="SKU-1", started_at=0.0, request={"stock": {}})


def worst_turn(turn: int) -> TurnBuilder:
    """A turn as large as a hostile run can make one: long reasons, the longest reply, a flood of refusals."""
    decision = Decision(tool="wait_for_supplier_reply", reason="r" * 50_000, decider="claude", model="m" * 500)
    built = TurnBuilder(turn, float(turn), ["wait_for_supplier_reply"] * 12, decision)
    for seq in range(MAX_WAIT_EVENTS * 5):
        built.refused("supplier-reply", seq, "x" * 5_000)
    reply = SupplierReply(po_number="PO-1", supplier="s", text="y" * 20_000)
    built.message("supplier-reply", 999, reply, Sender(party="supplier:s"), 1.0)
    built.step("read_supplier_reply 1", failure="f" * 10_000)
    return built


def test_an_archive_of_the_largest_turns_stays_within_its_bound_and_says_where_it_was_cut() -> None:
    kept = archive()
    for turn in range(MAX_TURNS):
        kept.add_turn(worst_turn(turn).done("s" * 10_000))
    kept.finish("ordered" * 100, 5.0)
    assert kept.size() <= MAX_ARCHIVE_BYTES
    assert kept.cut_at_turn is not None and kept.cut_at_turn == len(kept.turns)
    assert [t.turn for t in kept.turns] == list(range(len(kept.turns)))
    wait = kept.turns[0].wait
    assert wait is not None and len(wait.events) == MAX_WAIT_EVENTS + 1 and wait.dropped == 4 * MAX_WAIT_EVENTS
    assert wait.events[-1].kind == "message" and wait.ended == "message"
    assert len(kept.turns[0].decision.reason) <= 400


def test_a_turn_sent_twice_is_kept_once_and_turns_are_kept_in_order() -> None:
    kept = archive()
    for turn in (1, 0, 1):
        kept.add_turn(TurnBuilder(turn, 0.0, ["done"], Decision(tool="done")).done(None))
    assert [t.turn for t in kept.turns] == [0, 1]
    assert kept.schema_version == ARCHIVE_SCHEMA_VERSION


def test_approval_tokens_are_withheld_from_the_archive() -> None:
    built = TurnBuilder(0, 0.0, ["wait_for_approval"], Decision(tool="wait_for_approval"))
    decision = ApprovalDecision(po_number="PO-1", token="secret-token-123", approved=True, up_to=4.0, by="manager")
    built.message("approval", 0, decision, Sender(party="manager"), 1.0)
    text = built.done(None).model_dump_json()
    assert "secret-token-123" not in text and "withheld" in text
