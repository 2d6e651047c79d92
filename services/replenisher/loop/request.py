"""What a run is started with, what its messages hold, and the wait it shows: the loop's own models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from replenisher.domain.arrival import Arrival
from replenisher.domain.authority import Standing
from replenisher.domain.calendar import BusinessCalendar, CalendarClock, ClockOrigin
from replenisher.domain.decisions import DeciderTerms
from replenisher.domain.documents import (
    OPERATOR,
    EventKind,
    OrderAck,
    PurchaseOrder,
    Sender,
    StockLevel,
    without_unset,
)
from replenisher.domain.escalation import ApprovalPolicy
from replenisher.domain.memory import MemoryBrief
from replenisher.domain.state import OrderProgress
from replenisher.domain.waits import WaitDays
from replenisher.loop.patches import Stamp


class AdoptedOrder(BaseModel):
    """An order an earlier run placed and did not see through, found since by its PO number."""

    po: PurchaseOrder
    ack: OrderAck
    from_run: str
    progress: OrderProgress | None = Field(default=None, description="what the earlier run saw of it")


class RunRequest(BaseModel):
    stock: StockLevel
    day_seconds: float = Field(gt=0)
    waits: WaitDays = Field(default_factory=WaitDays)
    # The site calendar and the wall-to-calendar origin, fixed into the run here so later
    # settings changes never move a deadline it waits for. Absent (requests from before
    # calendars): every day counts whole from the run's start.
    calendar: BusinessCalendar = Field(default_factory=BusinessCalendar.every_day)
    origin: ClockOrigin | None = None
    approval_policy: ApprovalPolicy = Field(default_factory=ApprovalPolicy.none)
    memory: MemoryBrief | None = Field(default=None, description="what the SKU remembers, for the decider")
    decider_terms: DeciderTerms = Field(default_factory=DeciderTerms)
    adopt: AdoptedOrder | None = Field(default=None, description="follow up this order instead of buying anew")
    started_at: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="the SKU's journaled clock when it started the run: the run's first reading, without a "
        "`timestamp` entry of its own; absent (requests from before it), the run reads the clock itself",
    )
    people_matrix: bool | None = Field(
        default=None,
        description="an authority matrix was in force when the run started: its approvals must name a person "
        "whose limit covers the order (REPLENISHER_PEOPLE_FILE); absent: approvals are checked as before",
    )

    code: str | None = Field(
        default=None,
        max_length=64,
        description="the code version of the SKU that started the run (`replenisher.loop.patches`); absent: "
        "a request from before stamps",
    )
    patches: tuple[str, ...] | None = Field(default=None, description="the patches that code knew; absent: none")

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Sent as before without a matrix or a stamp: a replayed start compares equal with the journal's.
        return without_unset(handler(self), "people_matrix", "code", "patches")

    @property
    def stamp(self) -> Stamp | None:
        """The code that started the run, as far as its request says."""
        return None if self.code is None else Stamp(code=self.code, patches=self.patches or ())


class Envelope(BaseModel):
    """What a message promise holds: the payload and who sent it, when.

    Runs read it as untrusted (a bare payload, as older code resolved it, counts as from an
    operator): anything that does not parse is a security event, never a failed run.
    """

    payload: dict[str, Any]
    sender: Sender | None = None
    arrived_at: float | None = None
    standing: Standing | None = Field(default=None, description="the deciding person's standing, read as it arrived")

    @model_serializer(mode="wrap")
    def _without_standing(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_unset(handler(self), "standing")

    @classmethod
    def read(cls, raw: Any) -> Envelope:
        if isinstance(raw, dict) and "payload" in raw and set(raw) <= {"payload", "sender", "arrived_at", "standing"}:
            return cls.model_validate(raw)
        return cls.model_validate({"payload": raw})

    @property
    def arrival(self) -> Arrival:
        return Arrival(sender=self.sender or OPERATOR, at=self.arrived_at, standing=self.standing)


class CurrentWait(BaseModel):
    tool: str
    event: EventKind
    seq: int
    deadline: float
    clock: CalendarClock | None = Field(default=None, description="the run's calendar, to show the deadline as a date")


def describe(error: ValidationError) -> str:
    """What did not parse, field by field, without echoing the input back."""
    parts = []
    for err in error.errors():
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
