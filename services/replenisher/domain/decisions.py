"""The decider's interface: given the goal, the state and the allowed tools, pick one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

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


class Decider(Protocol):
    name: str

    async def decide(self, goal: str, state: State, allowed: Sequence[Tool]) -> Decision: ...
