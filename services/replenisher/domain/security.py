"""Security events kept on the SKU's record, and what never leaves the harness (approval tokens).

A run records an event when the rules refuse something (a model's choice, a forged or
mismatched approval, a message about another order, a claim in an email) in its bounded log
(`security_log`), and tells its SKU what it recorded since it last did, counts included; the
SKU keeps its own log of them, so they stay visible after the run and its journal are gone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from replenisher.domain.documents import GoodsReceipt
from replenisher.domain.security_log import SECURITY_LOG_BOUND, SecurityNote
from replenisher.domain.state import State


class SecurityNotes(BaseModel):
    """What a run recorded since it last told its SKU, with counts (see `SecurityLog.news_since`)."""

    run_id: str
    events: list[SecurityNote] = Field(max_length=2 * SECURITY_LOG_BOUND + 2)


WITHHELD = "<withheld>"


def redacted_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A message's payload as it may be kept and shown: an approval's token withheld.

    The run gets the token once, to check it; the copies the SKU keeps (routed and kept
    messages, shown by `status`) never hold it, or reading status would be enough to answer
    for the manager.
    """
    if "token" not in payload and "credential" not in payload:
        return payload
    # A person's token is withheld as well: it proves who they are for as long as it lasts.
    return {**payload, **{k: WITHHELD for k in ("token", "credential") if k in payload}}


def without_secrets(state: State) -> State:
    """The state as it may be shown outside the harness: approval tokens blanked.

    Whoever holds a token can answer for the manager, so it goes to the manager's inbox and
    nowhere else: not into a model's prompt, not into a public view of the run.
    """
    shown = state.model_copy(deep=True)
    shown.approval_token = WITHHELD if shown.approval_token else None
    if shown.approval is not None:
        request = shown.approval.request.model_copy(update={"token": WITHHELD})
        shown.approval = shown.approval.model_copy(update={"request": request})
    return shown


def receipt_refusal(claimed: GoodsReceipt, booked: GoodsReceipt | None, sku: str) -> str | None:
    """Why a goods message does not match what the ERP booked, or None. The ERP is the fact."""
    if booked is None:
        return "the ERP holds no such receipt"
    if booked.sku != sku:
        return f"the ERP booked it for {booked.sku!r}"
    if booked.po_number != claimed.po_number:
        return f"the ERP booked it against {booked.po_number!r}, not {claimed.po_number!r}"
    if booked.quantity != claimed.quantity:
        return f"the ERP booked {booked.quantity}, not {claimed.quantity}"
    return None
