"""Every call received on the ERP, supplier and manager endpoints, failed ones included.

Tests read this log to prove that no step of the agent ran twice, so it records what
the caller sent, not what the world did about it.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from pydantic import BaseModel, ConfigDict

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


class CallLog:
    def __init__(self, capacity: int = MAX_CALLS) -> None:
        self._calls: deque[CallRecord] = deque(maxlen=capacity)

    def record(self, call: CallRecord) -> None:
        self._calls.append(call)

    def find(self, where: CallFilter) -> list[CallRecord]:
        wanted = where.model_dump(exclude_none=True)
        return [c for c in self._calls if all(getattr(c, key) == value for key, value in wanted.items())]
