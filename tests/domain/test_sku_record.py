"""The SKU agent's record: one run at a time, every message accounted for, bounded history."""

from __future__ import annotations

from tests.domain.factories import T0, stock

from replenisher.domain.documents import Sender
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import (
    KEPT_BYTES,
    KEPT_MESSAGES,
    RECENT_OUTCOMES,
    ROUTED_BYTES_PER_SENDER,
    ROUTED_PER_SENDER,
    KeptMessage,
    SkuRecord,
    parse_run_id,
    payload_bytes,
    run_id_of,
)


def result(run_id: str, outcome: str = "received", consumed: dict[str, int] | None = None) -> ReplenishmentResult:
    return ReplenishmentResult(
        run_id=run_id,
        sku="SKU-1",
        outcome=outcome,
        started_at=T0,
        ended_at=T0 + 100,
        consumed=consumed or {},
        quantity_received=10,
        unit_price=4.0,
    )  # type: ignore[arg-type]


def test_low_stock_starts_one_run_and_a_second_check_starts_none() -> None:
    record = SkuRecord(sku="SKU-1")
    first = record.consider(stock(on_hand=5), T0)
    again = record.consider(stock(on_hand=5), T0 + 1)
    assert first is not None and first.run_id == "replenish-SKU-1-1"
    assert again is None and record.runs_started == 1


def test_enough_stock_starts_nothing() -> None:
    record = SkuRecord(sku="SKU-1")
    assert record.consider(stock(on_hand=50), T0) is None
    assert record.active is None and record.last_check is not None and record.last_check.on_hand == 50


def test_messages_are_numbered_per_kind_in_arrival_order() -> None:
    record = SkuRecord(sku="SKU-1")
    record.consider(stock(), T0)
    seqs = [record.route(e, {"n": i}, T0) for i, e in enumerate(["goods", "approval", "goods", "goods"])]
    assert [(m.event, m.seq) for m in seqs if m] == [("goods", 0), ("approval", 0), ("goods", 1), ("goods", 2)]


def test_one_senders_flood_does_not_push_another_senders_messages_off_the_run() -> None:
    record = SkuRecord(sku="SKU-1")
    record.consider(stock(), T0)
    evil = Sender(party="supplier:evil")
    for i in range(ROUTED_PER_SENDER + 5):
        record.route("supplier-reply", {"po_number": f"PO-JUNK-{i}"}, T0, evil)
    assert record.active is not None and len(record.active.routed) == ROUTED_PER_SENDER
    assert len(record.kept) == 5 and "supplier:evil" in record.kept[0].reason
    approval = record.route("approval", {"po_number": "PO-1"}, T0, Sender(party="manager"))
    goods = record.route("goods", {"po_number": "PO-1"}, T0, Sender(party="warehouse"))
    relayed = record.route("goods", {"po_number": "PO-1"}, T0)
    assert approval is not None and approval.seq == 0
    assert goods is not None and goods.seq == 0 and relayed is not None and relayed.seq == 1


def test_a_message_with_no_active_run_is_kept() -> None:
    record = SkuRecord(sku="SKU-1")
    assert record.route("approval", {"x": 1}, T0) is None
    assert len(record.kept) == 1 and record.kept[0].reason == "no active replenishment"


def test_messages_the_run_never_read_are_kept_when_it_ends() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    record.route("goods", {"n": 0}, T0)
    record.route("goods", {"n": 1}, T0)
    assert record.finish(result(run.run_id, consumed={"goods": 1}))
    assert [m.payload for m in record.kept] == [{"n": 1}]
    assert record.active is None


def test_a_stale_or_repeated_completion_changes_nothing() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    assert not record.finish(result("replenish-SKU-1-99"))
    assert record.finish(result(run.run_id))
    assert not record.finish(result(run.run_id))
    assert record.stats.runs == 1


def test_history_stays_bounded_over_many_runs() -> None:
    record = SkuRecord(sku="SKU-1")
    for _ in range(1_000):
        run = record.consider(stock(), T0)
        assert run is not None
        record.route("approval", {"late": True}, T0)
        record.finish(result(run.run_id))
    assert len(record.outcomes) == RECENT_OUTCOMES
    assert len(record.kept) == KEPT_MESSAGES and record.kept_overflow == 1_000 - KEPT_MESSAGES
    assert record.stats.runs == 1_000 and record.stats.by_outcome == {"received": 1_000}
    assert len(record.model_dump_json()) < 40_000


def test_after_a_run_without_goods_the_sku_rests_before_asking_again() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    record.finish(result(run.run_id, outcome="rejected"), rest_seconds=50)  # ended at T0 + 100
    assert record.consider(stock(), T0 + 120) is None
    assert record.last_check is not None and record.last_check.held_until == T0 + 150
    again = record.consider(stock(), T0 + 150)
    assert again is not None and again.run_id == "replenish-SKU-1-2"


def test_a_received_run_does_not_hold_the_next_one() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    record.finish(result(run.run_id), rest_seconds=50)
    assert record.consider(stock(), T0 + 101) is not None


def unknown_result(run_id: str) -> ReplenishmentResult:
    from replenisher.domain.documents import PurchaseOrder

    po = PurchaseOrder(po_number="PO-1", sku="SKU-1", supplier="acme", quantity=95, unit_price=4.0, quote_id="q")
    return result(run_id, outcome="unknown").model_copy(update={"po": po, "quantity_received": 0})


def test_an_unknown_order_blocks_new_runs_until_reconciled() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    record.finish(unknown_result(run.run_id))
    assert record.unresolved is not None
    assert record.consider(stock(), T0 + 10_000) is None  # however long: it could buy the stock twice


def test_a_missing_order_settles_the_unknown_run_as_gave_up_and_frees_the_sku() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    record.finish(unknown_result(run.run_id))
    record.settle_unresolved("gave_up", "no order at the supplier")
    assert [o.outcome for o in record.outcomes] == ["gave_up"]
    assert record.stats.by_outcome == {"gave_up": 1}
    assert record.consider(stock(), T0 + 10_000) is not None


def test_a_found_order_is_followed_up_with_its_kept_messages_and_the_unknown_entry_amended() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(), T0)
    assert run is not None
    record.route("supplier-reply", {"po_number": "PO-1", "text": "confirmed"}, T0)
    record.route("goods", {"po_number": "PO-1", "quantity": 95}, T0)
    record.finish(unknown_result(run.run_id))
    record.keep(KeptMessage(event="goods", payload={"po_number": "PO-OTHER"}, at=T0, reason="x"))
    assert len(record.kept) == 3

    follow, routed = record.follow_up(T0 + 50)
    assert follow.run_id == "replenish-SKU-1-2" and record.active is follow
    assert [(m.event, m.seq) for m in routed] == [("supplier-reply", 0), ("goods", 0)]
    assert [m.payload["po_number"] for m in record.kept] == ["PO-OTHER"]

    done = result(follow.run_id).model_copy(update={"adopted_from": run.run_id})
    assert record.finish(done)
    assert record.unresolved is None
    assert [o.outcome for o in record.outcomes] == ["received", "received"]
    assert record.outcomes[0].detail.startswith("reconciled")
    assert record.stats.by_outcome == {"received": 2}


def test_a_run_id_names_its_sku_and_number_and_nothing_else_parses() -> None:
    assert parse_run_id(run_id_of("SKU-101", 3)) == ("SKU-101", 3)
    assert parse_run_id("replenish-a.b_c-12") == ("a.b_c", 12)
    assert parse_run_id("replenish-SKU-101") == ("SKU", 101), "the number is what follows the last dash"
    not_ids = [
        "replenish-SKU-101-x",
        "SKU-101-1",
        "replenish-SKU-101-0",
        "replenish-SKU-101-01",
        "replenish--1",
        "replenish-SKU-101-\u0661",
        "replenish-SKU 1-1",
        "replenish-SKU-101-+1",
        "replenish-SKU-1-" + "9" * 13,
    ]
    for text in not_ids:
        assert parse_run_id(text) is None, text


def test_a_flood_of_kept_messages_evicts_the_flooders_own_not_the_warehouses_goods() -> None:
    """Found by probing the inbound endpoint: 100 signed replies from a supplier that does not
    even supply the SKU pushed the warehouse's kept goods message out of the record."""
    record = SkuRecord(sku="SKU-1")

    def kept(party: str, event: str, text: str) -> KeptMessage:
        payload = {"po_number": "PO-SKU-1-9-9", "text": text}
        return KeptMessage(
            event=event, payload=payload, at=T0, reason="no active replenishment", sender=Sender(party=party)
        )

    record.keep(kept("supplier:cogs", "supplier-reply", "shipped"))
    record.keep(kept("warehouse", "goods", "GR-1"))
    record.keep(kept("supplier:cogs", "supplier-reply", "invoice"))
    for i in range(KEPT_MESSAGES + 50):
        record.keep(kept("supplier:acme", "supplier-reply", f"junk {i}"))
    assert len(record.kept) == KEPT_MESSAGES and record.kept_overflow == 53
    parties = [m.sender.party for m in record.kept if m.sender is not None]
    assert parties[:3] == ["supplier:cogs", "warehouse", "supplier:cogs"], "the others' messages stay"
    assert [m.payload["text"] for m in record.kept[3:5]] == ["junk 53", "junk 54"], "the flood's oldest went"
    # With one sender only, the oldest goes first, as before.
    single = SkuRecord(sku="SKU-1")
    for i in range(KEPT_MESSAGES + 1):
        single.keep(kept("warehouse", "goods", f"GR-{i}"))
    assert single.kept[0].payload["text"] == "GR-1" and single.kept_overflow == 1


def test_one_senders_big_messages_are_bounded_in_bytes_routed_and_kept() -> None:
    """Found probing a running stack: 100 replies of 64 KiB routed and 100 kept grew the record
    to 13 MB, which Restate reads and writes whole on each of the SKU's handlers."""
    record = SkuRecord(sku="SKU-1")
    record.consider(stock(), T0)
    evil = Sender(party="supplier:evil")
    big = "x" * 60_000
    for i in range(ROUTED_PER_SENDER):
        record.route("supplier-reply", {"po_number": f"PO-JUNK-{i}", "text": big}, T0, evil)
    assert record.active is not None
    routed = [m for m in record.active.routed if m.sender == evil]
    assert 0 < len(routed) < ROUTED_PER_SENDER
    assert sum(payload_bytes(m.payload) for m in routed) <= ROUTED_BYTES_PER_SENDER
    assert "over 256 KiB" in record.kept[0].reason and "supplier:evil" in record.kept[0].reason
    # Others still reach the run, and small messages of the same sender still fit under the count.
    approval = record.route("approval", {"po_number": "PO-1"}, T0, Sender(party="manager"))
    assert approval is not None and approval.seq == 0
    assert sum(payload_bytes(m.payload) for m in record.kept) <= KEPT_BYTES
    assert record.kept_overflow > 0 and len(record.kept) < KEPT_MESSAGES, "bytes, not the count, evicted"
    size = len(record.model_dump_json())
    assert size < ROUTED_BYTES_PER_SENDER + KEPT_BYTES + 50_000, size


def test_past_the_kept_bytes_the_biggest_senders_oldest_goes_not_the_warehouses_goods() -> None:
    record = SkuRecord(sku="SKU-1")

    def kept(party: str, text: str) -> KeptMessage:
        return KeptMessage(
            event="goods" if party == "warehouse" else "supplier-reply",
            payload={"po_number": "PO-SKU-1-9-9", "text": text},
            at=T0,
            reason="no active replenishment",
            sender=Sender(party=party),
        )

    record.keep(kept("warehouse", "GR-1"))
    record.keep(kept("supplier:cogs", "a short reply"))
    for i in range(20):
        record.keep(kept("supplier:acme", f"{i} " + "x" * 60_000))
    assert sum(payload_bytes(m.payload) for m in record.kept) <= KEPT_BYTES
    assert [m.payload["text"] for m in record.kept[:2]] == ["GR-1", "a short reply"]
    texts = [m.payload["text"].split()[0] for m in record.kept[2:]]
    assert texts == [str(i) for i in range(20 - len(texts), 20)], "the flood's oldest went first"
    assert record.kept_overflow == 20 - len(texts) > 0


def test_an_operators_message_names_the_operator_and_an_old_records_null_sender_reads_as_one() -> None:
    record = SkuRecord(sku="SKU-1")
    record.route("supplier-reply", {"po_number": "PO-1"}, T0)
    assert record.kept[0].sender == Sender(party="operator")
    old = record.model_dump(mode="json")
    old["kept"][0]["sender"] = None  # as records kept them before the operator was named
    assert SkuRecord.model_validate(old).kept[0].sender == Sender(party="operator")
