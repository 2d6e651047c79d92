"""Every call received on the ERP, supplier and manager endpoints, failed ones included.

Tests read this log to prove that no step of the agent ran twice, so it records what
the caller sent, not what the world did about it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Service = Literal["erp", "supplier", "manager"]

MAX_CALLS = 200_000
"""A long demo keeps running for hours; the oldest calls are forgotten first."""


class CallRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: float
    service: Service
    op: str
    supplier: str | None = None
    sku: str | None = None
    po_number: str | None = None
    status: int


class CallFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: str | None = None
    supplier: str | None = None
    po_number: str | None = None
    op: str | None = None


class CallList(BaseModel):
    calls: list[CallRecord]


class FirstCallQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: str = Field(min_length=1, max_length=200)
    op: str = Field(min_length=1, max_length=100)
    wait: float = Field(default=0.0, ge=0.0, le=60.0)
    """Seconds to hold the request open until that first call arrives."""


class FirstCall(BaseModel):
    sku: str
    op: str
    at: float | None
    """When the world first got this operation about this SKU; None if it has not (yet)."""
    waiting: int = 0
    """How many other questions about this first call the world holds open now: a test sees that
    its own is held before it makes the call, rather than guess with a sleep."""


Key = tuple[str, str]


class CallLog:
    def __init__(self, capacity: int = MAX_CALLS) -> None:
        self._calls: deque[CallRecord] = deque(maxlen=capacity)
        # The first call per (SKU, operation), kept apart from the log: a look-up whose cost does
        # not grow with the calls piled up, which a benchmark can time a wake by.
        self._first: OrderedDict[Key, float] = OrderedDict()
        self._capacity = capacity
        # Who is waiting for a first call: the event they wait on, and how many wait on it.
        self._waiters: dict[Key, tuple[asyncio.Event, int]] = {}

    def record(self, call: CallRecord) -> None:
        self._calls.append(call)
        if call.sku is not None:
            key = (call.sku, call.op)
            if key not in self._first:
                self._first[key] = call.at
                if len(self._first) > self._capacity:
                    self._first.popitem(last=False)
                waiting = self._waiters.pop(key, None)
                if waiting is not None:
                    waiting[0].set()

    async def first(self, query: FirstCallQuery) -> FirstCall:
        """The first call of `op` about `sku`, waiting up to `query.wait` seconds for it."""
        key = (query.sku, query.op)
        if key not in self._first and query.wait > 0:
            event, count = self._waiters.get(key, (asyncio.Event(), 0))
            self._waiters[key] = (event, count + 1)
            try:
                await asyncio.wait_for(event.wait(), query.wait)
            except TimeoutError:
                pass
            finally:
                # The last one to give up takes the event away: no waiter outlives its waits.
                current = self._waiters.get(key)
                if current is not None and current[0] is event:
                    if current[1] <= 1:
                        del self._waiters[key]
                    else:
                        self._waiters[key] = (event, current[1] - 1)
        return FirstCall(sku=query.sku, op=query.op, at=self._first.get(key), waiting=self.waiting_on(key))

    def waiting_on(self, key: Key) -> int:
        """How many wait for the first call of `key` now."""
        waiting = self._waiters.get(key)
        return 0 if waiting is None else waiting[1]

    @property
    def waiting_keys(self) -> int:
        """How many (SKU, operation) pairs someone waits on a first call for now."""
        return len(self._waiters)

    def find(self, where: CallFilter) -> list[CallRecord]:
        wanted = where.model_dump(exclude_none=True)
        return [c for c in self._calls if all(getattr(c, key) == value for key, value in wanted.items())]
