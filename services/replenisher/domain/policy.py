"""The offline decider: a deterministic rules policy over the allowed tools.

It is the default (no model, no key) and the fallback when a model's choice is refused.
It only ever picks among the tools the rules allow, so it cannot break a business rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from replenisher.domain.decisions import Decision, Refusal
from replenisher.domain.documents import Quote
from replenisher.domain.memory import COMPARABLE_PRICE
from replenisher.domain.state import State
from replenisher.domain.tools import Tool
from replenisher.domain.tools.quoting import usable_quotes


def pick(tool: str, why: str, **args: object) -> Decision:
    return Decision(tool=tool, args=dict(args), reason=why)


def choose(state: State, allowed: Sequence[str]) -> Decision:
    def can(tool: str) -> bool:
        return tool in allowed

    if state.is_finished and can("done"):
        return pick("done", "nothing left open")
    if can("read_supplier_reply"):
        return pick("read_supplier_reply", "a supplier reply is unread")
    if can("check_order_status"):
        return pick("check_order_status", "the order's fate is unknown: reconcile by PO number")
    if state.order_status == "unknown" and can("done"):
        return pick("done", "the supplier cannot be reached; leave the order for reconciliation")
    if state.order_status == "placed":
        return _follow_up(allowed)
    if can("place_order"):
        return pick("place_order", "the price is approved")
    if state.approval is not None and state.approval.status == "pending" and can("wait_for_approval"):
        return pick("wait_for_approval", "the manager has not decided yet")
    if state.approval is not None and state.approval.status == "timed_out" and can("cancel_purchase_order"):
        return pick("cancel_purchase_order", "fail closed", reason="no approval in time")
    if can("request_approval"):
        return pick("request_approval", "money needs the manager's approval")
    if can("draft_purchase_order") and usable_quotes(state):
        quote, why = choose_quote(state)
        return pick("draft_purchase_order", why, quote_id=quote.quote_id)
    if can("get_quotes"):
        stale = state.quote_rounds and not usable_quotes(state) and state.quotes
        return pick(
            "get_quotes",
            "need prices" if not state.quote_rounds else "quotes expired: re-quote" if stale else "re-quote",
        )
    if can("cancel_purchase_order"):
        return pick("cancel_purchase_order", "cannot get an approved price", reason="no approvable price")
    return pick("done", "nothing more can be done") if can("done") else pick(allowed[0], "only option")


def choose_quote(state: State) -> tuple[Quote, str]:
    """The cheapest valid quote, unless its supplier has let this SKU down before and a comparable
    quote from one that has not is on the table (the SKU's memory says which)."""
    ranked = sorted(usable_quotes(state), key=lambda q: (q.unit_price, q.lead_days, q.supplier))
    cheapest = ranked[0]
    memory = state.memory
    if memory is None or not memory.unreliable(cheapest.supplier):
        return cheapest, f"cheapest quote from {cheapest.supplier}"
    limit = cheapest.unit_price * (1 + COMPARABLE_PRICE)
    alternative = next((q for q in ranked if not memory.unreliable(q.supplier) and q.unit_price <= limit), None)
    record = memory.of(cheapest.supplier)
    if alternative is None or record is None:
        return cheapest, f"cheapest quote from {cheapest.supplier}, though it has been unreliable"
    return alternative, (
        f"quote from {alternative.supplier}: {cheapest.supplier} is {cheapest.unit_price:.2f} but unreliable "
        f"({record.record()})"
    )


def _follow_up(allowed: Sequence[str]) -> Decision:
    if "close_purchase_order" in allowed:
        return pick("close_purchase_order", "goods are in")
    if "chase_supplier" in allowed:
        return pick("chase_supplier", "the supplier went quiet")
    if "wait_for_supplier_reply" in allowed:
        return pick("wait_for_supplier_reply", "waiting for the order confirmation")
    if "wait_for_goods" in allowed:
        return pick("wait_for_goods", "waiting for delivery")
    if "cancel_purchase_order" in allowed:
        return pick("cancel_purchase_order", "goods never came", reason="goods not delivered in time")
    return pick("done", "nothing more can be done") if "done" in allowed else pick(allowed[0], "only option")


class OfflinePolicy:
    name = "offline"

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision:
        return choose(state, [t.name for t in allowed])
