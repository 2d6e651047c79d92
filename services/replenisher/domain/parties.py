"""What each outside party may send to a SKU's address. Pure; the inbound endpoint enforces it.

A supplier may only write about its own orders, the warehouse only book goods, the manager
only decide approvals. Operators are not here: they use the internal ingress.
"""

from __future__ import annotations

from typing import Any

from replenisher.domain.documents import EventKind, Sender

MAY_SEND: dict[str, EventKind] = {"manager": "approval", "warehouse": "goods", "supplier": "supplier-reply"}


def refusal(sender: Sender, event: EventKind, payload: dict[str, Any]) -> str | None:
    """Why `sender` may not send this message, or None."""
    kind = "supplier" if sender.supplier is not None else sender.party
    allowed = MAY_SEND.get(kind)
    if allowed != event:
        may = f"only {allowed!r}" if allowed else "nothing"
        return f"{sender.party!r} may not send {event!r} messages (it may send {may})"
    if sender.supplier is not None and payload.get("supplier") != sender.supplier:
        return f"{sender.party!r} may only write about its own orders, not as {payload.get('supplier')!r}"
    return None
