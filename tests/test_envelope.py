"""What a run reads from a message promise: the payload with its sender, or an older bare payload."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from replenisher.domain.documents import OPERATOR, Sender
from replenisher.durable.replenish import Envelope
from replenisher.durable.sku_agent import Delivery


def test_an_envelope_carries_sender_and_arrival_and_a_bare_payload_is_an_operators() -> None:
    payload = {"po_number": "PO-1", "token": "t", "approved": True}
    wrapped = Envelope.read({"payload": payload, "sender": {"party": "manager"}, "arrived_at": 5.0})
    assert wrapped.payload == payload and wrapped.arrival.sender == Sender(party="manager")
    assert wrapped.arrival.at == 5.0
    bare = Envelope.read(payload)
    assert bare.payload == payload and bare.arrival.sender == OPERATOR and bare.arrival.at is None


@pytest.mark.parametrize("raw", [None, 7, "text", [1], {"payload": 1}, {"payload": {}, "sender": {"party": "root"}}])
def test_anything_else_is_a_validation_error_the_run_records(raw: object) -> None:
    with pytest.raises(ValidationError):
        Envelope.read(raw)


def test_the_agent_refuses_a_received_at_that_is_no_time() -> None:
    for bad in ('"NaN"', "-1", '"Infinity"'):
        with pytest.raises(ValidationError):
            Delivery.model_validate_json(f'{{"event": "goods", "payload": {{}}, "received_at": {bad}}}')
    assert Delivery.model_validate_json('{"event": "goods", "payload": {}, "received_at": 12.5}').received_at == 12.5
