"""The decider's interface: given the goal, the state and the allowed tools, pick one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from replenisher.domain.costs import TokenUsage
from replenisher.domain.state import State
from replenisher.domain.tools import Tool

GOAL = (
    "Bring stock of this SKU back above its safety stock: buy from a suitable supplier at a "
    "price the manager has approved before any money is committed, and see the order "
    "through until the goods are in and the purchase order is closed."
)


class Decision(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    decider: str = "offline"
    model: str | None = None
    usage: TokenUsage | None = Field(default=None, description="tokens the model call used; None without a model")
    usd: float = 0.0
    stop_reason: str | None = None


class Refusal(BaseModel):
    """A choice the rules turned down this turn; the model is told, and asked again."""

    tool: str
    arg_names: list[str] = Field(default_factory=list)
    reason: str


class DeciderTerms(BaseModel):
    """How a run uses its decider, fixed when the run starts (a replay must ask the same way)."""

    asks_per_turn: int = Field(default=1, ge=1, le=5, description="first ask plus re-asks after a refusal")
    budget_usd: float | None = Field(default=None, ge=0, description="model spend per run; None: no limit")


class Decider(Protocol):
    name: str

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision: ...
