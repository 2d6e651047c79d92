"""The offline policy drives whole replenishments on the pure rules, without Restate or HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.domain.factories import DAY, T0, ack, approval, goods, new_state, quote, reply

from replenisher.domain.documents import ApprovalRequest, PurchaseOrder
from replenisher.domain.extraction import extract_reply_facts
from replenisher.domain.outcomes import outcome_of
from replenisher.domain.policy import choose
from replenisher.domain.state import State
from replenisher.domain.tools import TOOLS, TOOLS_BY_NAME, Call, Done, Wait
from replenisher.domain.tools.approval import ApprovalRequested
from replenisher.domain.tools.goods import CloseResult
from replenisher.domain.tools.limits import MAX_TURNS
from replenisher.domain.tools.ordering import CancelResult, OrderStatusResult, PlaceOrderResult
from replenisher.domain.tools.quoting import DraftResult, QuotesResult
from replenisher.domain.tools.supplier import ChaseResult
from support import HAPPY_PATH

Script = dict[str, Callable[[State, Any], Any]]


def results(**overrides: Callable[[State, Any], Any]) -> Script:
    """What the world answers each tool with; a wait's answer None means its deadline passed."""

    def draft(s: State, args: Any) -> DraftResult:
        q = next(q for q in s.quotes if q.quote_id == args.quote_id)
        po = PurchaseOrder(
            po_number=f"PO-1-{s.po_revision + 1}",
            sku=s.sku,
            supplier=q.supplier,
            quantity=q.quantity,
            unit_price=q.unit_price,
            quote_id=q.quote_id,
        )
        return DraftResult(po=po, approval_token="t")

    def request(s: State, _: Any) -> ApprovalRequested:
        assert s.po is not None
        req = ApprovalRequest(
            po_number=s.po.po_number,
            sku=s.sku,
            supplier=s.po.supplier,
            quantity=s.po.quantity,
            unit_price=s.po.unit_price,
            quote_id=s.po.quote_id,
            expires_at=T0 + 9 * DAY,
            token="t",
            run_id=s.run_id,
        )
        return ApprovalRequested(request=req, requested_at=T0)

    script: Script = {
        "get_quotes": lambda s, _: QuotesResult(quotes=[quote("bolt", 5.0), quote("acme", 4.0)]),
        "draft_purchase_order": draft,
        "request_approval": request,
        "wait_for_approval": lambda s, _: approval(s),
        "place_order": lambda s, _: PlaceOrderResult(status="placed", ack=ack(s), at=T0 + DAY),
        "wait_for_supplier_reply": lambda s, _: reply(s),
        "read_supplier_reply": lambda s, _: extract_reply_facts(s.unread_reply.text if s.unread_reply else "", T0),
        "chase_supplier": lambda s, _: ChaseResult(at=T0 + 2 * DAY),
        "check_order_status": lambda s, _: OrderStatusResult(found=True, ack=ack(s), at=T0),
        "wait_for_goods": lambda s, _: goods(s, s.ordered_quantity - s.received_quantity, f"r{len(s.receipts)}"),
        "close_purchase_order": lambda s, _: CloseResult(),
        "cancel_purchase_order": lambda s, _: CancelResult(told_supplier=s.order_may_exist),
    }
    script.update(overrides)
    return script


def drive(script: Script, state: State | None = None) -> tuple[State, list[str]]:
    state = state or new_state()
    tools_used: list[str] = []
    for _ in range(MAX_TURNS):
        allowed = [t.name for t in TOOLS if t.allowed(state)]
        decision = choose(state, allowed)
        assert decision.tool in allowed, f"policy picked {decision.tool} outside {allowed}"
        tool = TOOLS_BY_NAME[decision.tool]
        args = tool.parse_args(decision.args)
        assert tool.check_args(state, args) is None
        tools_used.append(tool.name)
        if isinstance(tool, Done):
            break
        answer = script[tool.name](state, args)
        if isinstance(tool, Wait):
            tool.apply(state, answer)
        elif isinstance(answer, Exception):
            assert isinstance(tool, Call)
            tool.apply_failure(state, args, str(answer))
        else:
            assert isinstance(tool, Call)
            tool.apply(state, args, answer)
    return state, tools_used


def test_happy_path_reads_as_the_purchasing_process() -> None:
    state, used = drive(results())
    assert used == HAPPY_PATH
    assert outcome_of(state)[0] == "received"
    assert state.po is not None and state.po.supplier == "acme"  # the cheapest quote


def test_the_manager_rejects() -> None:
    state, used = drive(results(wait_for_approval=lambda s, _: approval(s, approved=False)))
    assert "place_order" not in used
    assert outcome_of(state)[0] == "rejected"


def test_approval_timeout_cancels_without_ordering() -> None:
    state, used = drive(results(wait_for_approval=lambda s, _: None))
    assert "place_order" not in used
    assert used[-2:] == ["cancel_purchase_order", "done"]
    assert outcome_of(state)[0] == "cancelled"


def test_silent_supplier_is_chased_then_replies() -> None:
    replies = iter([None, reply])

    def answer(s: State, _: Any) -> Any:
        nxt = next(replies)
        return nxt(s) if nxt else None

    state, used = drive(results(wait_for_supplier_reply=answer))
    assert used.count("chase_supplier") == 1
    assert outcome_of(state)[0] == "received"


def test_lost_order_reply_is_reconciled_by_po_number() -> None:
    state, used = drive(results(place_order=lambda s, _: RuntimeError("no answer")))
    assert used.count("place_order") == 1
    assert "check_order_status" in used
    assert outcome_of(state)[0] == "received"


def test_price_rise_during_approval_leads_to_a_new_approval_on_another_quote() -> None:
    calls = iter(["refuse", "ok"])

    def place(s: State, _: Any) -> PlaceOrderResult:
        if next(calls) == "refuse":
            return PlaceOrderResult(status="price_above_approval", live_price=4.8, at=T0)
        return PlaceOrderResult(status="placed", ack=ack(s), at=T0 + DAY)

    state, used = drive(results(place_order=place))
    assert used.count("request_approval") == 2
    assert state.po is not None and state.po.supplier == "bolt"
    assert outcome_of(state)[0] == "received"


def test_no_quotes_gives_up_without_ordering() -> None:
    state, used = drive(results(get_quotes=lambda s, _: QuotesResult(quotes=[], failures=["acme: no"])))
    assert "draft_purchase_order" not in used
    assert outcome_of(state)[0] == "gave_up"
