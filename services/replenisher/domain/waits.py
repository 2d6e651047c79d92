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
