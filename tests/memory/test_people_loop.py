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
from replenisher.domain.escalation import ApprovalPolicy
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


async def replenish(
    *approvals: Callable[[State], Envelope],
    matrix: bool = True,
    people: AuthorityMatrix | None = None,
    policy: ApprovalPolicy | None = None,
) -> tuple[MemoryWorld, State]:
    """A run whose approvals are `approvals`; `people`: the matrix the service has, read for whom to ask."""
    world = MemoryWorld(Clock(), {"acme": SupplierSpec(price=4.0)}, people=people)
    inbox = Inbox(world, forged_approvals=list(approvals))
    run = await run_in_memory(
        OfflinePolicy(), world, inbox, suppliers=["acme"], people_matrix=matrix or None, approval_policy=policy
    )
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


# --- whom a request asks ---------------------------------------------------------------------

ALWAYS = "2000-01-01"
"""A delegation over every date a run here can have (its site date follows the simulated clock)."""


def away(person: str, to: str, starts: str, ends: str) -> str:
    return f'[[delegations]]\nfrom = "{person}"\nto = "{to}"\nstarts = {starts}\nends = {ends}\n'


async def test_the_request_asks_the_lowest_limit_that_covers_the_order_and_the_inbox_gets_it() -> None:
    world, state = await replenish(by(ONE, "pia"), people=ONE)
    assert [r.approver for r in world.approval_requests] == ["pia"], "bo's 100 does not cover 380; pia's 1,000 does"
    assert state.approval is not None and state.approval.approver == "pia"
    asked = next(r for r in state.history if r.tool == "request_approval")
    assert asked.summary.startswith("asked pia to approve ")
    assert [o.quantity for o in world.orders] == [95]


async def test_above_the_threshold_the_request_asks_two_people() -> None:
    world, _ = await replenish(by(TWO, "pia"), by(TWO, "cy"), people=TWO)
    assert [r.approver for r in world.approval_requests] == ["pia, cy"], "the two lowest limits above 380 (by id)"
    assert [o.quantity for o in world.orders] == [95]


async def test_a_delegation_routes_the_request_to_the_delegate_only_inside_its_dates() -> None:
    inside = parse_authority(people_toml(LIMITS, extra=away("pia", "cy", ALWAYS, "2100-12-31")))
    world, _ = await replenish(by(inside, "cy"), people=inside)
    assert [r.approver for r in world.approval_requests] == ["cy"], "pia is away: cy is asked in her place"
    assert [o.quantity for o in world.orders] == [95]
    before = parse_authority(people_toml(LIMITS, extra=away("pia", "cy", ALWAYS, "2000-12-31")))
    world, _ = await replenish(by(before, "pia"), people=before)
    assert [r.approver for r in world.approval_requests] == ["pia"], "the leave is over: pia is asked again"


async def test_a_lapsed_request_goes_to_the_next_approver_not_yet_asked() -> None:
    lapses = ApprovalPolicy(reminders=(), backup_approver="backup-approver")
    # No one decides: the world's own approval names no person, so it is refused each time.
    world, state = await replenish(people=ONE, policy=lapses)
    assert [r.approver for r in world.approval_requests] == ["pia", "cy"], "the next covering limit, not the backup"
    assert state.approval is not None and state.approval.escalated_at is not None
    assert world.orders == []


async def test_when_no_one_may_approve_the_total_the_run_says_so_and_orders_nothing() -> None:
    small = parse_authority(people_toml({"bo": 100.0}))
    world, state = await replenish(by(small, "bo"), people=small)
    assert [r.approver for r in world.approval_requests][:1] == ["manager"]
    asked = next(r for r in state.history if r.tool == "request_approval")
    assert "no one in the authority matrix may approve a total of 380.00 from acme" in asked.summary
    assert world.orders == []
