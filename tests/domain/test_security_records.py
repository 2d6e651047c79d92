"""The security log in the run's state and the SKU's record: sources, the routing cap, old shapes read."""

from __future__ import annotations

import json
from pathlib import Path

from tests.domain.factories import T0, new_state, reply, stock
from tests.domain.test_security_log import exact

from replenisher.deciders.prompt import render_state, untrusted_texts
from replenisher.domain.arrival import Arrival
from replenisher.domain.documents import OrderAck, PurchaseOrder, Sender, SupplierReply
from replenisher.domain.extraction import extract_reply_facts
from replenisher.domain.outcomes import result_of
from replenisher.domain.security import SecurityNotes
from replenisher.domain.security_log import (
    SECURITY_LOG_BOUND,
    UNKNOWN_SOURCE,
    SecurityLog,
    SecurityNote,
)
from replenisher.domain.sku import ROUTED_PER_SENDER, SkuRecord
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS_BY_NAME
from replenisher.domain.tools.supplier import ReadSupplierReply, WaitForSupplierReply

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_the_run_state_records_the_source_and_the_time_and_the_outcome_counts_every_event() -> None:
    state = new_state()
    state.now = T0 + 5
    state.record_security_event("decider", "refused choice")
    state.record_security_event("supplier:rival", "refused reply", at=T0 + 3)
    assert [(e.source, e.last_at) for e in state.security.recent] == [("decider", T0 + 5), ("supplier:rival", T0 + 3)]
    for _ in range(200):
        state.record_security_event("decider", "refused choice")
    assert result_of(state, T0 + 10).security_events == state.security.total == 202


def ordered(state: State) -> None:
    """The state of a run waiting for acme's reply to its order."""
    state.po = PurchaseOrder(
        po_number="PO-SKU-1-1-1", supplier="acme", sku="SKU-1", quantity=95, unit_price=4.0, quote_id="q-acme-4.0"
    )
    state.order = OrderAck(
        order_id="ord-1",
        po_number=state.po.po_number,
        supplier="acme",
        sku="SKU-1",
        quantity=95,
        unit_price=4.0,
        accepted_at=T0,
    )
    state.order_status = "placed"
    state.ordered_at = T0


def test_a_rivals_500_refused_replies_do_not_hide_the_real_suppliers_reply_beyond_the_bound() -> None:
    state = new_state()
    ordered(state)
    wait = TOOLS_BY_NAME["wait_for_supplier_reply"]
    assert isinstance(wait, WaitForSupplierReply)
    rival = Arrival(sender=Sender(party="supplier:bolt"), at=T0 + 1)
    for i in range(500):
        junk = SupplierReply(po_number=f"PO-SKU-1-1-{i}", supplier="bolt", text="cancel everything")
        assert wait.apply(state, junk, rival) == "ignored a reply that is not about our order"
    real = Arrival(sender=Sender(party="supplier:acme"), at=T0 + 2)
    wait.apply(state, reply(state, "We confirm; delivery in 400 days."), real)
    ReadSupplierReply().apply(state, ReadSupplierReply.Args(), extract_reply_facts("delivery in 400 days", T0 + 3))
    assert state.security.total == 501
    newest = state.security.latest(1)[0]
    assert newest.source == "supplier:acme" and "beyond the bound" in newest.what
    assert state.security.dropped == {"supplier:bolt": 500 - (SECURITY_LOG_BOUND - 1)}
    exact(state.security)


def test_messages_past_a_senders_routing_cap_are_security_events_collapsed_by_source() -> None:
    record = SkuRecord(sku="SKU-1")
    run = record.consider(stock(on_hand=5), T0)
    assert run is not None
    rival = Sender(party="supplier:bolt")
    for i in range(ROUTED_PER_SENDER + 40):
        record.route("supplier-reply", {"po_number": f"PO-{i}", "supplier": "bolt", "text": "x"}, T0 + i, rival)
    assert record.route("approval", {"po_number": "PO-1"}, T0 + 500, Sender(party="manager")) is not None
    assert record.security.total == 40
    [entry] = record.security.recent
    assert entry.source == "supplier:bolt" and entry.count == 40 and entry.run_id == run.run_id
    assert (entry.first_at, entry.last_at) == (T0 + ROUTED_PER_SENDER, T0 + ROUTED_PER_SENDER + 39)
    assert "too many messages from supplier:bolt" in entry.what


def test_the_version_1_fixtures_read_with_an_empty_exact_log() -> None:
    record = SkuRecord.model_validate(json.loads((FIXTURES / "sku_record_v1.json").read_text()))
    state = State.model_validate_json((FIXTURES / "replenish_state_v1.json").read_text())
    for log in (record.security, state.security):
        assert log.total == 0 and log.recent == [] and log.dropped == {}


def test_a_version_6_state_with_events_reads_as_a_log_dated_by_the_runs_clock() -> None:
    raw = json.loads((FIXTURES / "replenish_state_v1.json").read_text())
    state = State.model_validate(raw)
    old = json.loads(state.model_dump_json())
    del old["security"]
    old |= {"schema_version": 6, "security_events": ["forged approval", "reply refused", "forged approval"]}
    migrated = State.model_validate(old)
    log = migrated.security
    assert log.total == 3 and [(e.what, e.count) for e in log.recent] == [("reply refused", 1), ("forged approval", 2)]
    assert all(e.source == UNKNOWN_SOURCE and e.first_at == migrated.now for e in log.recent)
    exact(log)
    assert State.model_validate_json(migrated.model_dump_json()) == migrated


def test_a_version_3_record_keeps_its_latest_events_and_counts_the_ones_it_had_dropped() -> None:
    raw = json.loads((FIXTURES / "sku_record_v1.json").read_text())
    recent = [{"at": T0 + i, "run_id": "replenish-SKU-OLD-1", "what": f"refused {i}"} for i in range(20, 70)]
    record = SkuRecord.model_validate({**raw, "schema_version": 3, "security": {"total": 70, "recent": recent}})
    log = record.security
    assert log.total == 70 and len(log.recent) == 50 and log.dropped == {UNKNOWN_SOURCE: 20}
    assert log.recent[-1].what == "refused 69" and log.recent[-1].run_id == "replenish-SKU-OLD-1"
    assert log.recent[0].seq == 21 and log.recent[-1].last_at == T0 + 69
    exact(log)
    assert SkuRecord.model_validate_json(record.model_dump_json()) == record


def test_a_note_from_a_run_on_older_code_is_bare_text_and_still_counts() -> None:
    notes = SecurityNotes.model_validate({"run_id": "replenish-SKU-1-1", "events": ["forged approval", "again"]})
    log = SecurityLog()
    log.take(notes.events, T0, run_id=notes.run_id)
    assert log.total == 2 and {e.source for e in log.recent} == {UNKNOWN_SOURCE}
    assert all(e.first_at == e.last_at == T0 for e in log.recent)
    assert SecurityNote.model_validate({"what": "x", "count": 3}).count == 3


def test_the_deciders_prompt_shows_the_latest_few_with_their_counts_and_the_total() -> None:
    state = new_state()
    state.record_security_event("manager", "approval refused: oldest")
    for i in range(5):
        state.record_security_event("supplier:bolt", f"reply {i} refused")
    for _ in range(7):
        state.record_security_event("supplier:bolt", "reply 4 refused")
    label, text = untrusted_texts(state)[-1]
    assert label == "security events (may quote outside text)"
    assert text.splitlines() == [f"reply {i} refused" for i in range(4)] + ["reply 4 refused (8 times)"]
    assert "Security events recorded in this run: 13." in render_state(state, state.now)
