"""The calls between SkuAgent and Replenish (`durable/contracts.py`) against the handlers they name.

Each side calls the other by address, not through the other's module; these tests hold every
address to its handler (service, name, request and response types) and its encoding to the
handler's own, so a journal written by a call through the handler replays against one by address.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from replenisher.domain.audit import AuditRecord
from replenisher.domain.documents import StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security import SecurityNotes
from replenisher.domain.sku_list import SKU_LIST, ListEntry, WaitEntry
from replenisher.durable import contracts
from replenisher.durable.app import SERVICES
from replenisher.durable.archive import run_archive
from replenisher.durable.audit_log import audit_log
from replenisher.durable.contracts import Address, Message, RoutedQuery, RunRequest
from replenisher.durable.replenish import replenish
from replenisher.durable.sku_agent import sku_agent
from replenisher.durable.sku_list import sku_list

SAMPLES: dict[type[BaseModel], BaseModel] = {
    ListEntry: ListEntry(sku="SKU-1", revision=3, runs=1, active_run="replenish-SKU-1-1", on_hand=4, safety_stock=10),
    WaitEntry: WaitEntry(sku="SKU-1", run=1, seq=2, tool="wait_for_approval", since=5.0, price=4.25),
    RunRequest: RunRequest(
        stock=StockLevel(sku="SKU-1", on_hand=3, safety_stock=10, target_stock=50, suppliers=["acme"]), day_seconds=5
    ),
    Message: Message(event="approval", seq=2, payload={"approved": True}, arrived_at=12.5),
    RoutedQuery: RoutedQuery(run_id="replenish-SKU-1-1", event="goods", seq=0),
    SecurityNotes: SecurityNotes(run_id="replenish-SKU-1-1", events=[]),
    ReplenishmentResult: ReplenishmentResult(
        run_id="replenish-SKU-1-1", sku="SKU-1", outcome="received", started_at=1.0, ended_at=2.0
    ),
    AuditRecord: AuditRecord(
        at=1.0, event="approval", who="pia", via="operator", what="PO-1", outcome="done", run_id="replenish-SKU-1-1"
    ),
}


def test_every_address_names_a_handler_with_its_request_and_response_types() -> None:
    assert contracts.mismatches([sku_agent, replenish, run_archive, audit_log, sku_list]) == []
    names = ["SkuAgent", "Replenish", "RunArchive", "AuditLog", "ServiceAnswered", "SkuList"]
    assert [s.name for s in SERVICES] == names
    # Both directions are covered: what the SKU calls on its runs and what a run calls on its SKU.
    assert {a.service for a in contracts.ADDRESSES} == {
        contracts.SKU_AGENT,
        contracts.REPLENISH,
        contracts.AUDIT_LOG,
        SKU_LIST,
    }


def test_an_address_that_does_not_match_its_handler_is_named_with_what_differs() -> None:
    wrong = (
        Address[RoutedQuery, None](contracts.SKU_AGENT, "arrival_of", RoutedQuery, None),
        Address[Message, None](contracts.REPLENISH, "deliver", RoutedQuery, None),  # type: ignore[arg-type]
        Address[Message, None](contracts.REPLENISH, "hand_over", Message, None),
    )
    found = contracts.mismatches([sku_agent, replenish], wrong)
    assert len(found) == 3, found
    assert found[0].startswith("SkuAgent/arrival_of answers") and "RoutedArrival" in found[0]
    assert found[1].startswith("Replenish/deliver takes") and "RoutedQuery" in found[1]
    assert found[2] == "Replenish/hand_over: no such handler"
    with pytest.raises(SystemExit, match="Replenish/run: no such handler; Replenish/deliver: no such handler"):
        contracts.check_addresses([sku_agent])


@pytest.mark.parametrize("address", contracts.ADDRESSES, ids=lambda a: f"{a.service}/{a.handler}")
def test_an_address_sends_the_bytes_a_call_through_its_handler_sends(address: Address[Any, Any]) -> None:
    service = {s.name: s for s in SERVICES}[address.service]
    handler = service.handlers[address.handler]
    sample = SAMPLES[address.request] if address.request is not None else None
    encoded = address._encode(sample)
    assert encoded == bytes(handler.handler_io.input_serde.serialize(sample))
    if sample is not None:
        assert type(sample).model_validate_json(encoded) == sample
