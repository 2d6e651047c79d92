"""A message's fields have strict types: a string or a number is no approval, a boolean no quantity."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from replenisher.domain.documents import EVENT_PAYLOADS

GOOD: dict[str, dict[str, Any]] = {
    "approval": {"po_number": "PO-1", "token": "t", "approved": True, "up_to": 4},
    "supplier-reply": {"po_number": "PO-1", "supplier": "acme", "text": "ok"},
    "goods": {"receipt_id": "r1", "po_number": "PO-1", "sku": "SKU-1", "quantity": 40},
}


def test_well_typed_messages_are_accepted() -> None:
    for event, payload in GOOD.items():
        EVENT_PAYLOADS[event].model_validate(payload)


@pytest.mark.parametrize(
    ("event", "field", "value"),
    [
        ("approval", "approved", "yes"),
        ("approval", "approved", 1),
        ("approval", "up_to", "4.5"),
        ("goods", "quantity", "40"),
        ("goods", "quantity", True),
        ("goods", "quantity", 40.0),
        ("supplier-reply", "text", 5),
        ("supplier-reply", "po_number", 12),
    ],
)
def test_a_wrong_type_is_refused_not_coerced(event: str, field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        EVENT_PAYLOADS[event].model_validate({**GOOD[event], field: value})
