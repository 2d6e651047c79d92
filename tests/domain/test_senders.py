"""Who may send what: the sender rules of the waits, the ERP check of goods, what status keeps."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from tests.domain.factories import T0, approval, goods, reply
from tests.domain.test_tools import ordered, requested

from replenisher.domain.arrival import Arrival
from replenisher.domain.documents import GoodsReceipt, Sender
from replenisher.domain.security import WITHHELD, receipt_refusal, redacted_payload
from replenisher.domain.sku import SkuRecord
from replenisher.domain.tools.approval import WaitForApproval, same_token
from replenisher.domain.tools.goods import WaitForGoods
from replenisher.domain.tools.supplier import WaitForSupplierReply


def came_from(party: str) -> Arrival:
    return Arrival(sender=Sender(party=party), at=T0 + 5)


def test_a_party_is_one_of_the_known_kinds() -> None:
    assert Sender(party="supplier:acme").supplier == "acme"
    assert Sender(party="manager").supplier is None and Sender(party="operator").is_operator
    for bad in ("supplier:", "supplier:a/b", "root", "Manager", "supplier:acme:x", ""):
        with pytest.raises(ValidationError):
            Sender(party=bad)


@pytest.mark.parametrize("party", ["manager", "operator"])
def test_an_approval_counts_from_the_manager_or_an_operator_and_records_when_and_how(party: str) -> None:
    state = requested()
    WaitForApproval().apply(state, approval(state), came_from(party))
    assert state.approval is not None and state.approval.status == "approved"
    assert (state.approval.channel, state.approval.decided_at) == (party, T0 + 5)


@pytest.mark.parametrize("party", ["supplier:acme", "warehouse"])
def test_an_approval_from_another_party_is_refused_even_with_the_token(party: str) -> None:
    state = requested()
    tool = WaitForApproval()
    assert tool.refusal(state, approval(state), came_from(party)) is not None
    tool.apply(state, approval(state), came_from(party))
    assert state.approval is not None and state.approval.status == "pending" and state.approval.channel is None
    assert any("not through the manager's channel" in e for e in state.security.texts())
    [event] = state.security.recent
    assert (event.source, event.last_at) == (party, T0 + 5), "about the sender, when it arrived"


def test_tokens_compare_as_bytes_whatever_they_hold() -> None:
    assert same_token("tök€n", "tök€n") and not same_token("tök€n", "token") and not same_token("\ud800", "x")
    state = requested()
    WaitForApproval().apply(state, approval(state, token="tökén"), came_from("manager"))
    assert state.approval is not None and state.approval.status == "pending"


def test_a_supplier_reply_counts_only_from_the_orders_supplier() -> None:
    state = ordered()
    assert state.order is not None and state.order.supplier == "acme"
    tool = WaitForSupplierReply()
    assert tool.refusal(state, reply(state), came_from("supplier:acme")) is None
    assert tool.refusal(state, reply(state), came_from("operator")) is None
    spoofed = tool.refusal(state, reply(state), came_from("supplier:bolt"))
    assert spoofed is not None and "not by the order's supplier 'acme'" in spoofed
    tool.apply(state, reply(state), came_from("supplier:bolt"))
    assert state.unread_reply is None and state.security.total == 1
    assert state.security.recent[0].source == "supplier:bolt"
    tool.apply(state, reply(state), came_from("supplier:acme"))
    assert state.unread_reply is not None


def test_goods_count_only_from_the_warehouse_or_an_operator() -> None:
    state = ordered()
    tool = WaitForGoods()
    assert tool.refusal(state, goods(state, 10), came_from("warehouse")) is None
    assert tool.refusal(state, goods(state, 10), came_from("supplier:acme")) is not None
    tool.apply(state, goods(state, 10), came_from("supplier:acme"))
    assert state.received_quantity == 0


def test_a_receipt_is_what_the_erp_booked() -> None:
    claimed = GoodsReceipt(receipt_id="r1", po_number="PO-1", sku="SKU-1", quantity=10)
    assert receipt_refusal(claimed, claimed, "SKU-1") is None
    assert receipt_refusal(claimed, None, "SKU-1") == "the ERP holds no such receipt"
    assert "booked 5" in str(receipt_refusal(claimed, claimed.model_copy(update={"quantity": 5}), "SKU-1"))
    assert "PO-2" in str(receipt_refusal(claimed, claimed.model_copy(update={"po_number": "PO-2"}), "SKU-1"))
    assert "SKU-2" in str(receipt_refusal(claimed, claimed.model_copy(update={"sku": "SKU-2"}), "SKU-1"))


def test_kept_and_routed_messages_hold_no_token() -> None:
    payload = {"po_number": "PO-1", "token": "secret", "approved": True}
    assert redacted_payload(payload)["token"] == WITHHELD and payload["token"] == "secret"
    assert redacted_payload({"po_number": "PO-1", "text": "hi"}) == {"po_number": "PO-1", "text": "hi"}
    record = SkuRecord(sku="SKU-1")
    record.route("approval", redacted_payload(payload), T0, Sender(party="manager"))
    assert record.kept[0].payload["token"] == WITHHELD and record.kept[0].sender == Sender(party="manager")
