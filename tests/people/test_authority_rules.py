"""How a run checks an approval under the authority matrix, as pure rules (no Restate, no world).

The matrix: a buyer up to 1,000, a plant manager up to 20,000 (who stands in for the director
while she is away), a director up to 100,000, a finance head up to 50,000,
a viewer; orders above 20,000 need two people.
A PO waits on the run's approval; each decision comes with the standing the SKU's address read
for its person (`AuthorityMatrix.standing`), as the service journals it.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from domain.factories import stock
from people.matrices import people_toml
from replenisher.domain.arrival import Arrival
from replenisher.domain.authority import AuthorityMatrix, Standing, parse_authority
from replenisher.domain.documents import ApprovalDecision, ApprovalRequest, Sender
from replenisher.domain.state import Approval, State
from replenisher.domain.tools.approval import WaitForApproval, approval_digest
from replenisher.loop.request import Envelope, RunRequest

T0 = 1_000_000.0
DAY = date(2026, 12, 7)
TOKEN = "t" * 40
wait = WaitForApproval()

MATRIX: AuthorityMatrix = parse_authority(
    people_toml(
        {"bo": 1000, "pia": 20000, "dee": 100000, "cy": 50000},
        threshold=20000,
        viewers=("vic",),
        extra='[[delegations]]\nfrom = "dee"\nto = "pia"\nstarts = 2026-12-07\nends = 2026-12-11\n',
    )
)


def waiting(quantity: int, unit_price: float, matrix: bool = True) -> State:
    state = State.start(
        "replenish-SKU-1-1",
        stock(),
        day_seconds=10.0,
        started_at=T0,
    )
    state.people_matrix = matrix
    state.po_revision = 1
    request = ApprovalRequest(
        po_number="PO-1", sku="SKU-1", supplier="acme", quantity=quantity, unit_price=unit_price, quote_id="q-1",
        expires_at=T0 + 1000, token=TOKEN, run_id=state.run_id,
    )  # fmt: skip
    state.approval = Approval(request=request, requested_at=T0)
    state.approval_token = TOKEN
    return state


def decide(
    state: State, person: str | None, *, approved: bool = True, digest: str | None = None, day: date = DAY
) -> tuple[str, Arrival]:
    """`person`'s decision on the waiting PO, with their standing as the SKU's address read it."""
    decision = ApprovalDecision(
        po_number="PO-1",
        token=TOKEN,
        approved=approved,
        person=person,
        digest=digest if digest is not None else approval_digest(state),
    )
    standing = MATRIX.standing(person, day) if person is not None else None
    arrival = Arrival(sender=Sender(party="manager"), at=T0 + 5, standing=standing)
    assert wait.refusal(state, decision, arrival) is None, "the token and channel are right"
    return wait.apply(state, decision, arrival), arrival


def test_a_buyer_whose_limit_is_below_the_total_is_refused_and_the_run_keeps_waiting() -> None:
    state = waiting(quantity=100, unit_price=50.0)  # 5,000
    summary, _ = decide(state, "bo")
    assert summary == "approval by bo refused for PO-1: the order's total 5,000.00 is above bo's limit of 1,000.00"
    assert state.approval is not None and state.approval.status == "pending" and wait.still_waiting(state)
    assert state.approval.signatures == []
    assert state.security.recent[-1].what == summary and state.security.recent[-1].source == "manager"


def test_the_plant_managers_approval_then_approves_with_her_signature_and_limit() -> None:
    state = waiting(quantity=100, unit_price=50.0)
    decide(state, "bo")
    summary, _ = decide(state, "pia")
    assert state.approval is not None and state.approval.status == "approved" and not wait.still_waiting(state)
    assert summary == "approved up to 50.00"
    [signature] = state.approval.signatures
    assert (signature.person, signature.limit, signature.acting_for, signature.digest) == (
        "pia",
        20000,
        None,
        approval_digest(state),
    )
    assert signature.at == T0 + 5 and state.approval.decided_by == "pia"


def test_above_the_threshold_one_signature_waits_for_a_second_different_person() -> None:
    state = waiting(quantity=500, unit_price=50.0)  # 25,000
    later = date(2026, 12, 14)  # the director is back: nobody acts for her
    first, _ = decide(state, "dee", day=later)
    assert first == "dee signed PO-1 (1 of 2): needs a second approver above 20,000"
    assert state.approval is not None and state.approval.status == "pending"
    again, _ = decide(state, "dee", day=later)
    assert again == (
        "approval by dee refused for PO-1: dee has already approved this PO; a second signature must be someone else"
    )
    assert [s.person for s in state.approval.signatures] == ["dee"]
    decide(state, "pia", day=later)  # her own 20,000 falls short
    assert state.approval.status == "pending"
    decide(state, "cy", day=later)
    assert state.approval.status == "approved" and state.approval.decided_by == "dee, cy"
    assert [(s.person, s.acting_for, s.limit) for s in state.approval.signatures] == [
        ("dee", None, 100000),
        ("cy", None, 50000),
    ]


def test_inside_a_delegation_the_delegate_signs_on_the_absent_persons_limit() -> None:
    state = waiting(quantity=500, unit_price=50.0)  # 25,000
    first, _ = decide(state, "pia")
    assert first == "pia signed PO-1 (1 of 2): needs a second approver above 20,000"
    decide(state, "cy")
    assert state.approval is not None and state.approval.status == "approved"
    assert [(s.person, s.acting_for, s.limit) for s in state.approval.signatures] == [
        ("pia", "dee", 100000),
        ("cy", None, 50000),
    ]


def test_an_approval_with_the_digest_of_an_earlier_revision_is_refused() -> None:
    state = waiting(quantity=10, unit_price=5.0)
    earlier = state.model_copy(update={"po_revision": 0})
    summary, _ = decide(state, "pia", digest=approval_digest(earlier))
    assert summary.endswith("the approval is for other terms than the PO waiting (re-quoted or changed)")
    assert state.approval is not None and state.approval.status == "pending"


@pytest.mark.parametrize(
    ("person", "reason"),
    [
        (None, "it names no person of the authority matrix (replenisher approve --as PERSON)"),
        ("zed", "'zed' is not one of the people in the authority matrix"),
        ("vic", "vic does not have the approver role"),
    ],
)
def test_no_approval_counts_without_a_person_of_the_matrix_with_the_approver_role(
    person: str | None, reason: str
) -> None:
    state = waiting(quantity=10, unit_price=5.0)
    summary, _ = decide(state, person)
    assert summary == f"approval by {person or 'manager'} refused for PO-1: {reason}"
    assert state.approval is not None and state.approval.status == "pending"
    assert state.security.total == 1


def test_a_standing_read_for_someone_else_does_not_count() -> None:
    state = waiting(quantity=10, unit_price=5.0)
    decision = ApprovalDecision(
        po_number="PO-1", token=TOKEN, approved=True, person="bo", digest=approval_digest(state)
    )
    arrival = Arrival(sender=Sender(party="manager"), standing=MATRIX.standing("dee", DAY))
    assert wait.apply(state, decision, arrival).endswith("no standing was read for bo from the authority matrix")
    assert state.approval is not None and state.approval.status == "pending"


def test_a_rejection_from_an_approver_ends_it_and_a_viewers_does_not() -> None:
    state = waiting(quantity=100, unit_price=50.0)
    summary, _ = decide(state, "vic", approved=False)
    assert summary == "rejection by vic refused for PO-1: vic does not have the approver role"
    assert state.approval is not None and state.approval.status == "pending" and not state.rejected
    summary, _ = decide(state, "bo", approved=False)  # below the total, but any approver may say no
    assert state.approval.status == "rejected" and state.rejected and state.approval.decided_by == "bo"


def test_without_a_matrix_in_force_a_person_and_digest_change_nothing() -> None:
    state = waiting(quantity=100, unit_price=50.0, matrix=False)
    summary, _ = decide(state, "bo", digest="0" * 32)
    assert state.approval is not None and state.approval.status == "approved" and summary == "approved up to 50.00"
    assert state.approval.signatures == [] and state.approval.decided_by == "manager"


def test_a_standing_is_what_the_matrix_says_that_day_and_judges_as_the_matrix_does() -> None:
    away = MATRIX.standing("pia", DAY)
    assert [a.acting_for for a in away.acting_for] == ["dee"] and away.two_person_threshold == 20000
    assert MATRIX.standing("pia", date(2026, 12, 14)).acting_for == ()
    assert not MATRIX.standing("zed", DAY).known and not MATRIX.standing("vic", DAY).approver
    for person in ("bo", "pia", "dee", "cy", "vic", "zed"):
        for total in (500, 5000, 50000):
            assert MATRIX.standing(person, DAY).authority(total, "acme") == MATRIX.authority(person, total, "acme", DAY)
    # Journaled as JSON and read back on a replay, it judges the same.
    assert Standing.model_validate_json(away.model_dump_json()) == away


def test_decisions_messages_and_requests_without_the_new_fields_keep_their_bytes() -> None:
    decision = ApprovalDecision(po_number="PO-1", token=TOKEN, approved=True)
    assert set(json.loads(decision.model_dump_json())) == {"po_number", "token", "approved", "up_to", "by", "note"}
    envelope = Envelope(payload={"a": 1})
    assert envelope.model_dump(mode="json") == {"payload": {"a": 1}, "sender": None, "arrived_at": None}
    assert Envelope.read(envelope.model_dump(mode="json")).arrival.standing is None
    standing = MATRIX.standing("pia", DAY)
    with_standing = Envelope(payload={"a": 1}, standing=standing).model_dump(mode="json")
    assert Envelope.read(with_standing).arrival.standing == standing
    level = stock()
    assert "people_matrix" not in RunRequest(stock=level, day_seconds=1.0).model_dump(mode="json")
    assert RunRequest(stock=level, day_seconds=1.0, people_matrix=True).model_dump(mode="json")["people_matrix"]


# --- whom a request asks (`AuthorityMatrix.to_ask`) ---------------------------------------------


def test_a_request_asks_the_lowest_limit_that_covers_it_and_as_many_people_as_it_needs() -> None:
    assert MATRIX.to_ask(500, "acme", date(2026, 12, 6)) == ("bo",)
    assert MATRIX.to_ask(5000, "acme", date(2026, 12, 6)) == ("pia",), "bo's 1,000 does not cover it"
    assert MATRIX.to_ask(30000, "acme", date(2026, 12, 6)) == ("cy", "dee"), "above 20,000: two people"
    assert MATRIX.to_ask(500_000, "acme", date(2026, 12, 6)) == (), "no one's limit covers it"


def test_a_request_goes_to_the_delegate_only_inside_the_delegations_dates() -> None:
    # dee is away 2026-12-07..2026-12-11 (inclusive), pia acting for her.
    days = {d: MATRIX.to_ask(30000, "acme", date(2026, 12, d)) for d in (6, 7, 11, 12)}
    assert days == {6: ("cy", "dee"), 7: ("cy", "pia"), 11: ("cy", "pia"), 12: ("cy", "dee")}


def test_the_next_people_asked_leave_out_those_already_asked_or_signed() -> None:
    assert MATRIX.to_ask(5000, "acme", date(2026, 12, 6), skip=frozenset({"pia"})) == ("cy",)
    assert MATRIX.to_ask(30000, "acme", date(2026, 12, 6), skip=frozenset({"cy"}), wanted=1) == ("dee",)
    assert MATRIX.to_ask(30000, "acme", date(2026, 12, 6), skip=frozenset({"cy", "dee"})) == ()


def test_tokens_not_before_takes_an_instant_with_its_zone_and_check_says_what_it_voids() -> None:
    from replenisher.domain.authority import AuthorityFileError
    from replenisher.people_command import describe

    ana = people_toml({"ana": 1000})
    revoked = parse_authority(ana + "tokens_not_before = 2026-12-05T14:00:00Z\n")
    assert revoked.tokens_not_before("ana") == 1796479200.0 and revoked.tokens_not_before("bo") is None
    assert "ana (Ana, ana@plant.example): approver, up to 1,000.00; signs in with company account; personal " in (
        describe(revoked)
    )
    assert "tokens made before 2026-12-05T14:00:00+00:00 void" in describe(revoked)
    with pytest.raises(AuthorityFileError, match="person 'ana': tokens_not_before: needs a time zone"):
        parse_authority(ana + "tokens_not_before = 2026-12-05T14:00:00\n")
