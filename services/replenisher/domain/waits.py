"""How long each wait lasts, in business days: the company's policy, fixed per run at its start."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WaitDays(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    approval: float = Field(default=3.0, gt=0, description="for the manager's decision")
    supplier_reply: float = Field(default=7.0, gt=0, description="for the supplier to confirm an order")
    reply_after_chase: float = Field(default=2.0, gt=0, description="for a reply after a chase")
    goods_grace: float = Field(default=3.0, ge=0, description="past the promised delivery, per overdue wait")
    status_recheck: float = Field(default=1.0, ge=0, description="before re-checking an unknown order")

    def overridden(self, overrides: WaitOverrides) -> WaitDays:
        return self.model_copy(update=overrides.model_dump(exclude_none=True))


class WaitOverrides(BaseModel):
    """One SKU's own wait lengths where they differ from the company's defaults.

    As a change (`SkuAgent/<sku>/configure`): a field given sets that wait, a field given as
    `null` sets it back to the default, and a field left out keeps what the SKU had.
    """

    model_config = ConfigDict(extra="forbid")

    approval: float | None = Field(default=None, gt=0, le=365)
    supplier_reply: float | None = Field(default=None, gt=0, le=365)
    reply_after_chase: float | None = Field(default=None, gt=0, le=365)
    goods_grace: float | None = Field(default=None, ge=0, le=365)

    def merged(self, change: WaitOverrides) -> WaitOverrides:
        """These overrides after `change`: only the fields the change names move."""
        return self.model_copy(update={name: getattr(change, name) for name in change.model_fields_set})
