"""One SKU as the manager asks about it: its agent's record, its active run, the pending
approval's token, and the calls of it Restate paused (which wait for a person)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from replenisher.domain.sku import SkuRecord, SkuView
from replenisher.operations.inbox import ManagerInbox, NoPendingApproval, pending_for
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError, Unreachable
from replenisher.operations.restate.paused import PausedCall
from replenisher.operations.restate.read_models import RunView


class SkuStatus(BaseModel):
    record: SkuView
    run: RunView | None = Field(description="the active run's state and wait, if a run is active")
    approval_token: str | None = Field(description="the pending approval's token, from the manager's inbox")
    paused: list[PausedCall]
    token_note: str = Field(default="", exclude=True, description="why the token is not shown, when it is not")
    paused_note: str = Field(default="", exclude=True, description="why paused calls were not checked")


async def paused_calls(client: RestateClient, record: SkuRecord) -> tuple[list[PausedCall], str]:
    """Calls of the SKU and its active run that Restate paused (they wait for a person), and a
    note when Restate could not be asked."""
    try:
        return await client.paused_of(record), ""
    except OperatorError as e:
        return [], f"(paused calls not checked: {e})"


async def sku_status(client: RestateClient, inbox: ManagerInbox, sku: str) -> SkuStatus:
    record = await client.sku_status(sku)
    view = await client.run_view(record.active.run_id) if record.active else None
    token: str | None = None
    token_note = ""
    approval = view.state.approval if view and view.state else None
    if approval is not None and approval.status == "pending":
        try:
            token = (await pending_for(client, inbox, record.sku)).token
        except (Unreachable, NoPendingApproval) as e:
            token_note = f"(not shown: {e})"
    paused, paused_note = await paused_calls(client, record)
    return SkuStatus(
        record=record, run=view, approval_token=token, paused=paused, token_note=token_note, paused_note=paused_note
    )
