"""What of a run's approval goes to the audit log, judged on the approval wait's own rules: each
signature once, the decision once, each refused decision with its reason; nothing twice however
often the run checkpoints."""

from __future__ import annotations

from people.test_authority_rules import decide, waiting
from replenisher.domain.run_audit import ApprovalTold, approval_news
from replenisher.domain.security_log import SecurityLog
from replenisher.domain.state import State


def checkpoint(
    state: State, told: ApprovalTold, security: SecurityLog
) -> tuple[list[tuple[str, str, str]], ApprovalTold, SecurityLog]:
    records, told = approval_news(told, state, state.security.news_since(security, state.now))
    return [(r.event, r.who, r.outcome) for r in records], told, state.security.model_copy(deep=True)


def test_a_refusal_two_signatures_and_the_approval_each_go_to_the_log_once() -> None:
    state = waiting(quantity=1000, unit_price=45.0)  # 45,000: above the threshold, two people
    told, security = ApprovalTold(), SecurityLog()
    said, told, security = checkpoint(state, told, security)
    assert said == [], "a request waiting is nothing to record"

    decide(state, "bo")
    said, told, security = checkpoint(state, told, security)
    assert said == [("approval_refused", "manager", "refused")]

    decide(state, "dee")
    said, told, security = checkpoint(state, told, security)
    assert said == [("approval", "dee", "done")]
    again, told, security = checkpoint(state, told, security)
    assert again == [], "a checkpoint with nothing new records nothing"

    decide(state, "cy")
    records, _ = approval_news(told, state, [])
    assert [(r.event, r.who, r.acting_for, r.limit) for r in records] == [
        ("approval", "cy", None, 50000),
        ("approval", "dee, cy", None, None),
    ]
    assert records[-1].reason == "approved up to 45.00 (2 signatures)"
    assert all(r.run_id == state.run_id and r.what.startswith("PO-1: 1000 x SKU-1 at 45.00") for r in records)


def test_without_the_matrix_the_decision_is_recorded_by_who_made_it() -> None:
    state = waiting(quantity=10, unit_price=4.0, matrix=False)
    decide(state, None, approved=False)
    records, _ = approval_news(ApprovalTold(), state, [])
    assert [(r.event, r.outcome, r.reason) for r in records] == [("rejection", "done", "rejected")]
