"""State written by older code is brought up to date when it is read, by whichever reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from replenisher.domain.sku import SKU_SCHEMA_VERSION, SkuRecord
from replenisher.domain.state import STATE_SCHEMA_VERSION, State
from replenisher.domain.tools.ordering import CheckOrderStatus

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_a_sku_record_written_by_version_1_reads_as_the_current_version() -> None:
    raw = json.loads((FIXTURES / "sku_record_v1.json").read_text())
    assert raw["schema_version"] == 1 and "po_number" not in raw["kept"][0]
    record = SkuRecord.model_validate(raw)
    assert record.schema_version == SKU_SCHEMA_VERSION == 4
    assert record.reconciling is None and record.memory.suppliers == {}
    assert [m.po_number for m in record.kept] == ["PO-SKU-OLD-1-1", "PO-SKU-OLD-1-1"]
    assert record.outcomes[0].outcome == "cancelled" and record.stats.runs == 1
    # Written back, it is the new version, and reading that changes nothing.
    again = SkuRecord.model_validate_json(record.model_dump_json())
    assert again == record


def test_a_run_state_written_by_version_1_reads_as_the_current_version() -> None:
    raw = (FIXTURES / "replenish_state_v1.json").read_text()
    state = State.model_validate_json(raw)
    assert state.schema_version == STATE_SCHEMA_VERSION == 8
    assert state.failed_status_checks == 1 and state.order_status == "unknown"
    # v3's clock starts at the latest time v1 recorded, so quotes are judged as of then.
    assert state.now == max(t for t in (state.started_at, state.ordered_at, state.last_chase_at) if t is not None)
    # It started before calendars: every day still counts whole, so no deadline of it moves.
    assert state.after(state.started_at + 5.0, 3) == state.started_at + 5.0 + 3 * state.day_seconds
    assert CheckOrderStatus().delay_days(state) == state.waits.status_recheck
    # It started before deciders were pinned: its state says so rather than inventing one.
    assert state.decider is None
    # It started before approvals were bound to people: no matrix, as it ran.
    assert state.people_matrix is False


def test_a_version_7_approval_reads_without_a_matrix_or_signatures() -> None:
    """v8 binds approvals to people; a v7 state waiting on an approval reads as it was: no matrix in force."""
    raw = json.loads((FIXTURES / "replenish_state_v1.json").read_text())
    current = json.loads(State.model_validate(raw).model_dump_json())
    request = {
        "po_number": "PO-1",
        "sku": current["sku"],
        "supplier": "acme",
        "quantity": 10,
        "unit_price": 2.5,
        "quote_id": "Q-1",
        "expires_at": 1.0,
        "token": "t",
        "run_id": current["run_id"],
    }
    v7 = {k: v for k, v in current.items() if k != "people_matrix"}
    v7 |= {"schema_version": 7, "approval": {"request": request, "requested_at": 0.0, "status": "pending"}}
    state = State.model_validate(v7)
    assert state.schema_version == 8 and state.people_matrix is False
    assert state.approval is not None and state.approval.signatures == []


def test_a_record_from_newer_code_is_refused_rather_than_misread() -> None:
    raw = json.loads((FIXTURES / "sku_record_v1.json").read_text())
    with pytest.raises(ValidationError, match="newer than this code"):
        SkuRecord.model_validate({**raw, "schema_version": SKU_SCHEMA_VERSION + 1})


def test_a_version_2_memory_starts_its_reliability_recovery_from_when_the_supplier_was_last_seen() -> None:
    raw = json.loads((FIXTURES / "sku_record_v1.json").read_text())
    judged = {"supplier": "bolt", "first_seen": 10.0, "last_seen": 500.0, "judged_orders": 2, "reliability": 0.3}
    quoted = {"supplier": "acme", "first_seen": 10.0, "last_seen": 400.0}
    raw = {**raw, "schema_version": 2, "memory": {"suppliers": {"bolt": judged, "acme": quoted}}}
    record = SkuRecord.model_validate(raw)
    assert record.memory.suppliers["bolt"].judged_at == 500.0
    assert record.memory.suppliers["acme"].judged_at is None
    assert record.memory.suppliers["bolt"].reliability_at(500.0, 1.0) == 0.3
