"""A SKU's own wait lengths, changed a field at a time (`SkuAgent/<sku>/configure`)."""

from __future__ import annotations

from replenisher.domain.waits import WaitDays, WaitOverrides


def change(body: str) -> WaitOverrides:
    return WaitOverrides.model_validate_json(body)  # as the handler gets it from Restate


def test_a_second_change_keeps_the_waits_it_does_not_name() -> None:
    waits = WaitOverrides().merged(change('{"approval": 1}')).merged(change('{"supplier_reply": 3}'))
    assert (waits.approval, waits.supplier_reply, waits.goods_grace) == (1, 3, None)


def test_null_sets_a_wait_back_to_the_default_and_an_empty_change_changes_nothing() -> None:
    waits = WaitOverrides(approval=1, supplier_reply=3)
    assert waits.merged(change("{}")) == waits
    reset = waits.merged(change('{"approval": null}'))
    assert (reset.approval, reset.supplier_reply) == (None, 3)
    assert WaitDays().overridden(reset).approval == WaitDays().approval
