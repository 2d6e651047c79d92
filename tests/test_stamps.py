"""The code stamps a run journals (`replenisher.loop.patches`), as bytes: what runs journaled before
stamps existed (the upgrade corpus among them) must serialize exactly as it did, or a replay of them
is refused; and a stamp read back is the one written, whatever code reads it."""

from __future__ import annotations

import json

import pytest

from replenisher.domain.documents import StockLevel
from replenisher.durable.clock import Timed
from replenisher.loop.patches import PATCHES, Stamp, UnknownPatch, here
from replenisher.loop.request import RunRequest

STOCK = StockLevel(sku="SKU-1", on_hand=5, safety_stock=20, target_stock=100, suppliers=["acme"])


def test_a_result_without_a_stamp_keeps_the_bytes_it_had() -> None:
    assert Timed[int](value=3, at=1.5).model_dump_json() == '{"value":3,"at":1.5}'


def test_a_stamped_result_carries_its_code_and_only_patches_it_knew() -> None:
    plain = Timed[int](value=3, at=1.5).stamped(Stamp(code="v2"))
    assert json.loads(plain.model_dump_json()) == {"value": 3, "at": 1.5, "code": "v2"}
    patched = Timed[int](value=3, at=1.5).stamped(Stamp(code="v3", patches=("a", "b")))
    back = Timed[int].model_validate_json(patched.model_dump_json())
    assert back.stamp("v9") == Stamp(code="v3", patches=("a", "b"))


def test_a_result_journaled_before_stamps_reads_as_the_replaying_code_without_patches() -> None:
    old = Timed[int].model_validate_json('{"value":3,"at":1.5}')
    assert old.stamp("v1") == Stamp(code="v1", patches=())


def test_a_request_without_a_stamp_keeps_its_bytes_and_one_with_it_names_the_code() -> None:
    before = RunRequest(stock=STOCK, day_seconds=1.0)
    assert not {"code", "patches"} & set(json.loads(before.model_dump_json()))
    assert before.stamp is None
    stamped = RunRequest(stock=STOCK, day_seconds=1.0, code="v2")
    assert json.loads(stamped.model_dump_json())["code"] == "v2" and "patches" not in stamped.model_dump()
    assert RunRequest.model_validate_json(stamped.model_dump_json()).stamp == Stamp(code="v2")


def test_patched_answers_from_the_stamp_and_refuses_a_name_no_code_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PATCHES, "p", "what p changes")
    assert here("v2").knows("p") and not Stamp(code="v1").knows("p")
    with pytest.raises(UnknownPatch, match="'q'"):
        here("v2").knows("q")
