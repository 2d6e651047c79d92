"""What a supplier promised in an email, as typed claims: a kind, a number and a date.

A claim never carries the supplier's words, so recalling it months later cannot smuggle
instructions back in. Claims are unverified: they steer nothing by themselves (a discount
is asked for, and counts only if the supplier's quote shows it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PromiseKind = Literal["discount", "lead_time"]

MAX_DISCOUNT_PCT = 50.0
MAX_LEAD_DAYS = 365.0


class PromiseClaim(BaseModel):
    """`discount`: percent off the next order; `lead_time`: business days from `effective_from`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: PromiseKind
    value: float = Field(gt=0)
    effective_from: float | None = Field(default=None, description="epoch seconds; None: straight away")

    @model_validator(mode="after")
    def _within_bounds(self) -> PromiseClaim:
        limit = MAX_DISCOUNT_PCT if self.kind == "discount" else MAX_LEAD_DAYS
        if self.value > limit:
            raise ValueError(f"{self.kind} of {self.value:g} is beyond {limit:g}")
        return self
