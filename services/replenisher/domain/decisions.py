"""The decider's interface: given the goal, the state and the allowed tools, pick one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from replenisher.domain.costs import TokenUsage
from replenisher.domain.state import DeciderTerms as DeciderTerms  # re-exported: where callers look for it
from replenisher.domain.state import State
from replenisher.domain.tools import Tool

GOAL = (
    "Bring stock of this SKU back above its safety stock: buy from a suitable supplier at a "
    "price the manager has approved before any money is committed, and see the order "
    "through until the goods are in and the purchase order is closed."
)


class LostCall(BaseModel):
    """A model call made for an ask whose answer never reached the journal (the process died first).

    Found on the service's spool when the ask ran again: with its usage when the answer was
    written down before the crash, without (`usage` None) when the process died in the call.
    """

    usage: TokenUsage | None = None
    usd: float = 0.0


class Refusal(BaseModel):
    """A choice the rules turned down this turn; the model is told, and asked again."""

    tool: str
    arg_names: list[str] = Field(default_factory=list)
    reason: str


class Decider(Protocol):
    name: str

    async def decide(
        self, goal: str, state: State, allowed: Sequence[Tool], refusals: Sequence[Refusal] = ()
    ) -> Decision: ...


ONLY_ALLOWED = "only-allowed"


class Decision(BaseModel):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    decider: str = "offline"
    model: str | None = None
    usage: TokenUsage | None = Field(default=None, description="tokens the model call used; None without a model")
    usd: float = 0.0
    stop_reason: str | None = None
    lost: list[LostCall] = Field(
        default_factory=list, description="earlier calls for this ask that a crash kept out of the journal"
    )

    @property
    def decided_by(self) -> str:
        return f"{self.decider} {self.model}" if self.model else self.decider
