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
    assert record.schema_version == SKU_SCHEMA_VERSION == 2
    assert [m.po_number for m in record.kept] == ["PO-SKU-OLD-1-1", "PO-SKU-OLD-1-1"]
    assert record.outcomes[0].outcome == "cancelled" and record.stats.runs == 1
    # Written back, it is the new version, and reading that changes nothing.
    again = SkuRecord.model_validate_json(record.model_dump_json())
    assert again == record


def test_a_run_state_written_by_version_1_reads_as_the_current_version() -> None:
    raw = (FIXTURES / "replenish_state_v1.json").read_text()
    state = State.model_validate_json(raw)
    assert state.schema_version == STATE_SCHEMA_VERSION == 2
    assert state.failed_status_checks == 1 and state.order_status == "unknown"
    assert CheckOrderStatus().delay_days(state) == state.waits.status_recheck


def test_a_record_from_newer_code_is_refused_rather_than_misread() -> None:
    raw = json.loads((FIXTURES / "sku_record_v1.json").read_text())
    with pytest.raises(ValidationError, match="newer than this code"):
        SkuRecord.model_validate({**raw, "schema_version": SKU_SCHEMA_VERSION + 1})
