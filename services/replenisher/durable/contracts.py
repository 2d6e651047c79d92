"""What `SkuAgent` and `Replenish` say to each other: every call between the two, with its request and response.

A SKU starts its runs and hands them their messages; a run asks its SKU when a message
arrived, tells it what its security log recorded, and hands it the outcome. Restate's
templates keep a service's models beside its handlers; with two services that call each
other, that made each handler module import the other. So the calls between them live
here: each handler module imports this one, never the other, and calls the other service
through these addresses.

An address is the service's and the handler's name with the request and response types;
its call is sent with the same bytes as one through the handler itself (the SDK's encoding
of a pydantic model), so a journal written by either kind of call replays against the other.
`check_addresses` holds every address to the handler it names (same service, handler,
request and response): the app runs it when it is built, and so does a unit test.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer
from restate import Context, SendHandle
from restate.serde import PydanticJsonSerde

from replenisher.domain.audit import AuditEntry, AuditRecord
from replenisher.domain.authority import Standing
from replenisher.domain.documents import EventKind, Sender, without_unset
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.security import SecurityNotes
from replenisher.domain.sku import SkuView
from replenisher.domain.sku_list import SKU_LIST, ListEntry, WaitEntry
from replenisher.loop.request import AdoptedOrder, RunRequest

__all__ = [
    "ARRIVAL_OF",
    "AUDIT_APPEND",
    "DELIVER_TO_RUN",
    "FINISH",
    "LIST_PUT",
    "LIST_PUT_WAIT",
    "NOTE_SECURITY",
    "REPLENISH",
    "SKU_AGENT",
    "SKU_STATUS",
    "START_RUN",
    "AdoptedOrder",
    "Message",
    "ReplenishmentResult",
    "RoutedArrival",
    "RoutedQuery",
    "RunRequest",
    "SecurityNotes",
    "check_addresses",
]

SKU_AGENT = "SkuAgent"
REPLENISH = "Replenish"
AUDIT_LOG = "AuditLog"

Req = TypeVar("Req", bound=BaseModel | None)
Resp = TypeVar("Resp", bound=BaseModel | None)


class Message(BaseModel):
    """A message the SKU agent numbered for this run: the `seq`-th of its kind."""

    event: EventKind
    seq: int
    payload: dict[str, Any]
    sender: Sender | None = Field(default=None, description="None: an operator on the internal ingress")
    arrived_at: float | None = Field(default=None, description="when it reached the SKU's address")
    standing: Standing | None = Field(
        default=None, description="the deciding person's standing in the authority matrix, read as it arrived"
    )

    @model_serializer(mode="wrap")
    def _without_standing(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Sent as before when no standing was read: journals of messages without one keep their bytes.
        return without_unset(handler(self), "standing")


class RoutedQuery(BaseModel):
    run_id: str
    event: EventKind
    seq: int = Field(ge=0)


class RoutedArrival(BaseModel):
    arrived_at: float | None = Field(description="when the message reached the SKU's address; None: it has not")


@dataclass(frozen=True)
class Address(Generic[Req, Resp]):
    """One handler of the other service, called by name."""

    service: str
    handler: str
    request: type[Req] | None
    response: type[Resp] | None

    def _encode(self, arg: Req) -> bytes:
        return b"" if arg is None else PydanticJsonSerde(type(arg)).serialize(arg)

    def send(self, ctx: Context, key: str, arg: Req, delay: timedelta | None = None) -> SendHandle:
        """A one-way call, journaled: the caller never waits for the handler."""
        return ctx.generic_send(self.service, self.handler, self._encode(arg), key=key, send_delay=delay)

    async def call(self, ctx: Context, key: str, arg: Req) -> Resp:
        """A call whose answer the caller waits for, journaled with it."""
        raw = await ctx.generic_call(self.service, self.handler, self._encode(arg), key=key)
        if self.response is None:
            return None  # type: ignore[return-value]
        return PydanticJsonSerde(self.response).deserialize(raw)  # type: ignore[no-any-return]


# The SKU starts its runs (one-way: it stays free for messages while a run takes weeks) and
# hands each the messages routed to it.
START_RUN = Address[RunRequest, ReplenishmentResult](REPLENISH, "run", RunRequest, ReplenishmentResult)
DELIVER_TO_RUN = Address[Message, None](REPLENISH, "deliver", Message, None)

# A run asks its SKU whether one is started (its views' 404), and when a message reached the
# SKU's address; it tells the SKU its security events as they happen and its outcome at the end.
SKU_STATUS = Address[None, SkuView](SKU_AGENT, "status", None, SkuView)
ARRIVAL_OF = Address[RoutedQuery, RoutedArrival](SKU_AGENT, "arrival_of", RoutedQuery, RoutedArrival)
NOTE_SECURITY = Address[SecurityNotes, None](SKU_AGENT, "note_security", SecurityNotes, None)
FINISH = Address[ReplenishmentResult, None](SKU_AGENT, "finish", ReplenishmentResult, None)

# A run records the decisions on its approval in the day's audit log (one-way, from its journal).
AUDIT_APPEND = Address[AuditRecord, AuditEntry](AUDIT_LOG, "append", AuditRecord, AuditEntry)

# The agent puts its part of its SKU's entry on the list, and a run its wait (one-way: `durable.sku_list`),
# to the shard that keeps the SKU (`domain.sku_list.shard_key_of`). Both answer how many entries changed.
LIST_PUT = Address[ListEntry, Any](SKU_LIST, "put", ListEntry, int)
LIST_PUT_WAIT = Address[WaitEntry, Any](SKU_LIST, "put_wait", WaitEntry, int)

ADDRESSES: tuple[Address[Any, Any], ...] = (
    START_RUN,
    DELIVER_TO_RUN,
    SKU_STATUS,
    ARRIVAL_OF,
    NOTE_SECURITY,
    FINISH,
    AUDIT_APPEND,
    LIST_PUT,
    LIST_PUT_WAIT,
)


def mismatches(services: list[Any], addresses: tuple[Address[Any, Any], ...] = ADDRESSES) -> list[str]:
    """How each address differs from the handler it names among `services` (restate service objects)."""
    by_name = {service.name: service for service in services}
    wrong: list[str] = []
    for address in addresses:
        where = f"{address.service}/{address.handler}"
        service = by_name.get(address.service)
        handler = service.handlers.get(address.handler) if service is not None else None
        if handler is None:
            wrong.append(f"{where}: no such handler")
            continue
        io = handler.handler_io
        takes = None if io.input_type is None or io.input_type.is_void else io.input_type.annotation
        gives = None if io.output_type is None or io.output_type.is_void else io.output_type.annotation
        if takes is not address.request:
            wrong.append(f"{where} takes {takes!r}, the address sends {address.request!r}")
        if gives is not address.response:
            wrong.append(f"{where} answers {gives!r}, the address reads {address.response!r}")
    return wrong


def check_addresses(services: list[Any]) -> None:
    """Refuse to serve when a call between the services names a handler that is not there as addressed."""
    wrong = mismatches(services)
    if wrong:
        raise SystemExit("calls between the services do not match their handlers: " + "; ".join(wrong))
