"""What a tool is: a name and description for the model, an input schema, a rule, an effect.

- `Call` tools act on the world: `execute` runs as one journaled step, `apply` folds its
  result (or its failure, once retries are spent) into the state.
- `Wait` tools wait for a message at the SKU's address, or until a deadline.
- `Done` ends the run.

`allowed` and `apply` are pure: they read and write the state and nothing else.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from replenisher.domain.arrival import Arrival
from replenisher.domain.documents import Document, EventKind
from replenisher.domain.escalation import Reminder, ReminderSent
from replenisher.domain.ports import World
from replenisher.domain.state import State
from replenisher.domain.tools.limits import MAX_STATUS_CHECKS


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


A = TypeVar("A", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)
P = TypeVar("P", bound=Document)


class Tool(Generic[A]):
    name: ClassVar[str]
    description: ClassVar[str]
    Args: type[A]

    def allowed(self, state: State) -> bool:
        raise NotImplementedError

    def parse_args(self, raw: dict[str, Any]) -> A:
        return self.Args.model_validate(raw)

    def check_args(self, state: State, args: A) -> str | None:
        """A business-rule objection to these arguments in this state, or None."""
        return None


class Call(Tool[A], Generic[A, R]):
    Result: type[R]

    async def execute(self, state: State, args: A, world: World) -> R:
        raise NotImplementedError

    def apply(self, state: State, args: A, result: R) -> str:
        """Fold the result into the state; returns a one-line summary for the history."""
        raise NotImplementedError

    def apply_failure(self, state: State, args: A, error: str) -> str:
        """The step failed for good (retries spent, or refused): the model sees it and decides."""
        state.last_failure = f"{self.name} failed: {error}"
        return state.last_failure

    def delay_days(self, state: State) -> float:
        """Business days to wait durably before the step runs (e.g. before re-checking)."""
        return 0.0


class Wait(Tool[NoArgs], Generic[P]):
    """Waits for the next message of `event` for this run, or until `deadline`."""

    event: ClassVar[EventKind]
    Payload: type[P]
    Args = NoArgs

    def deadline(self, state: State) -> float:
        raise NotImplementedError

    def reminders(self, state: State) -> list[Reminder]:
        """Reminders still to send during this wait, earliest first (each one once, from a durable timer)."""
        return []

    async def remind(self, state: State, reminder: Reminder, world: World) -> ReminderSent:
        raise NotImplementedError

    def apply_reminder(self, state: State, sent: ReminderSent) -> None:
        """Record a reminder as done (sent, or given up after retries), so it is never sent again."""

    Escalation: type[BaseModel] = NoArgs

    def escalation_due(self, state: State) -> bool:
        """At the deadline: hand the wait to someone else (a fresh deadline) instead of timing out."""
        return False

    async def escalate(self, state: State, world: World) -> Any:
        raise NotImplementedError

    def apply_escalation(self, state: State, result: Any) -> None:
        raise NotImplementedError

    def refusal(self, state: State, payload: P, arrival: Arrival) -> str | None:
        """Why this message does not count (recorded as a security event), or None.

        Pure. The harness keeps waiting after a refused message, so a flood of them costs
        the run no turns.
        """
        return None

    def apply(self, state: State, payload: P | None, arrival: Arrival | None = None) -> str:
        """`payload` is None when the deadline passed first; `arrival` says who sent it
        (an operator on the internal ingress when not given)."""
        raise NotImplementedError

    def still_waiting(self, state: State) -> bool:
        """After `apply` took a message in: the wait goes on for the next (e.g. a second signature)."""
        return False


class Done(Tool[NoArgs]):
    name = "done"
    description = (
        "End this replenishment. Only offered once nothing is left open: the purchase order "
        "is closed, cancelled or rejected, no order can exist at the supplier (and quotes were "
        "asked for, if stock is needed), or the supplier could not be reached to find out (the "
        "run then ends as 'unknown' for reconciliation)."
    )
    Args = NoArgs

    def allowed(self, state: State) -> bool:
        if state.is_finished or state.order_status == "cancelled":
            return True
        if state.order_status in ("none", "not_found"):
            # Stock is short: giving up without even asking for a price is not an outcome anyone
            # (or any email persuading the model) may choose.
            return asked_for_quotes(state) or not state.needs_stock
        return state.order_status == "unknown" and state.status_checks >= MAX_STATUS_CHECKS


def asked_for_quotes(state: State) -> bool:
    """The run has tried to buy: a round of quotes came back, or asking failed for good."""
    return state.quote_rounds > 0 or any(t.tool == "get_quotes" for t in state.history)
