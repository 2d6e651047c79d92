"""Approvals under the authority matrix through the real loop (in memory): who signs what, and what is ordered.

The world quotes 95 units at 4.00 (a 380.00 order); a buyer may approve up to 100, the plant
manager up to 1,000, two others up to 5,000; above 300 two people must sign. Each decision
comes as the SKU's address would send it: through the manager's channel, with the person's
standing read from the matrix, the run's token and the digest of the PO it waits on.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from people.matrices import people_toml
from replenisher.domain.authority import AuthorityMatrix, parse_authority
from replenisher.domain.documents import ApprovalDecision, Sender
from replenisher.domain.policy import OfflinePolicy
from replenisher.domain.state import State
from replenisher.domain.tools.approval import approval_digest
from replenisher.in_memory.engine import run_in_memory
from replenisher.in_memory.world import Clock, Inbox, MemoryWorld, SupplierSpec
from replenisher.loop.request import Envelope

LIMITS = {"bo": 100.0, "pia": 1000.0, "dee": 5000.0, "cy": 5000.0}
ONE = parse_authority(people_toml(LIMITS))
TWO = parse_authority(people_toml(LIMITS, threshold=300))
DAY = date(2026, 12, 7)


def by(matrix: AuthorityMatrix, person: str, *, stale: bool = False) -> Callable[[State], Envelope]:
    """`person`'s approval of the PO the run waits on (with `stale`, of its revision before)."""

    def send(state: State) -> Envelope:
        assert state.approval is not None
        terms = state.model_copy(update={"po_revision": state.po_revision - 1}) if stale else state
        decision = ApprovalDecision(
            po_number=state.approval.request.po_number,
            token=state.approval.request.token,
            approved=True,
            person=person,
            digest=approval_digest(terms),
        )
        return Envelope(
            payload=decision.model_dump(mode="json"),
            sender=Sender(party="manager"),
            arrived_at=state.now,
            standing=matrix.standing(person, DAY),
        )

    return send


async def replenish(*approvals: Callable[[State], Envelope], matrix: bool = True) -> tuple[MemoryWorld, State]:
    world = MemoryWorld(Clock(), {"acme": SupplierSpec(price=4.0)})
    inbox = Inbox(world, forged_approvals=list(approvals))
    run = await run_in_memory(OfflinePolicy(), world, inbox, suppliers=["acme"], people_matrix=matrix or None)
    return world, run.state


async def test_a_buyer_below_the_total_orders_nothing_and_the_plant_manager_then_orders() -> None:
    world, state = await replenish(by(ONE, "bo"), by(ONE, "pia"))
    assert [o.quantity for o in world.orders] == [95]
    assert state.approval is not None and [s.person for s in state.approval.signatures] == ["pia"]
    wait = next(r for r in state.history if r.tool == "wait_for_approval")
    assert wait.summary.startswith("approval by bo refused for ")
    assert "the order's total 380.00 is above bo's limit of 100.00" in wait.summary
    assert any("bo's limit" in e.what for e in state.security.recent)


async def test_a_buyer_alone_orders_nothing() -> None:
    world, state = await replenish(by(ONE, "bo"))
    assert world.orders == []
    assert state.approval is not None and state.approval.status != "approved"


async def test_above_the_threshold_one_signature_orders_nothing_and_a_second_persons_does() -> None:
    world, state = await replenish(by(TWO, "dee"))
    assert world.orders == [], "one signature of two"
    world, state = await replenish(by(TWO, "dee"), by(TWO, "dee"), by(TWO, "cy"))
    assert [o.quantity for o in world.orders] == [95]
    assert state.approval is not None and [s.person for s in state.approval.signatures] == ["dee", "cy"]
    wait = next(r for r in state.history if r.tool == "wait_for_approval")
    assert "(1 of 2): needs a second approver above 300" in wait.summary
    assert "dee has already approved this PO" in wait.summary


async def test_the_same_person_twice_orders_nothing() -> None:
    world, _ = await replenish(by(TWO, "dee"), by(TWO, "dee"))
    assert world.orders == []


async def test_an_approval_of_an_earlier_revision_orders_nothing() -> None:
    world, state = await replenish(by(ONE, "pia", stale=True))
    assert world.orders == []
    assert any("other terms than the PO waiting" in e.what for e in state.security.recent)


async def test_without_a_matrix_the_worlds_own_approval_orders_as_before() -> None:
    world, state = await replenish(matrix=False)
    assert [o.quantity for o in world.orders] == [95]
    assert state.people_matrix is False and state.approval is not None and state.approval.signatures == []
