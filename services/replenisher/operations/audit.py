"""The audit log as operators use it: add an entry (the console's sign-ins, refusals), read days back.

An entry goes to its day's `AuditLog` object as a one-way send through ingress, with an
idempotency key made of the entry itself: Restate keeps it even while the service is down (it
runs the append when the service is back), and a retried send adds it once.
"""

from __future__ import annotations

import hashlib
from datetime import date, timedelta

import httpx
from pydantic import BaseModel, Field

from replenisher.domain.audit import AuditDay, AuditEntry, AuditPage, AuditRecord, check_chain, day_of
from replenisher.operations.restate.errors import OperatorError

TIMEOUT = httpx.Timeout(10.0, connect=3.0)


def _url(ingress_url: str, day: str, handler: str) -> str:
    return f"{ingress_url.rstrip('/')}/AuditLog/{day}/{handler}"


async def append_audit(ingress_url: str, record: AuditRecord, *, client: httpx.AsyncClient) -> None:
    body = record.model_dump_json()
    key = "audit-" + hashlib.sha256(body.encode()).hexdigest()[:40]
    try:
        answer = await client.post(
            _url(ingress_url, day_of(record.at), "append/send"),
            content=body,
            headers={"content-type": "application/json", "idempotency-key": key},
            timeout=TIMEOUT,
        )
    except httpx.HTTPError as e:
        raise OperatorError(f"Restate's ingress at {ingress_url} cannot be reached: {e}") from e
    if answer.status_code >= 300:
        raise OperatorError(f"Restate refused the audit entry: {answer.status_code} {answer.text[:300]}")


class AuditDayRead(BaseModel):
    day: str
    total: int
    entries: list[AuditEntry]
    breaks: list[str] = Field(default_factory=list, description="where the chain does not hold, in words")


async def _call(client: httpx.AsyncClient, url: str, body: str | None = None) -> httpx.Response:
    headers = {"content-type": "application/json"} if body is not None else {}
    try:
        answer = await client.post(url, content=body or b"", headers=headers, timeout=TIMEOUT)
    except httpx.HTTPError as e:
        raise OperatorError(f"Restate's ingress cannot be reached: {e}") from e
    if answer.status_code >= 300:
        raise OperatorError(f"reading the audit log failed: {answer.status_code} {answer.text[:300]}")
    return answer


async def read_day(ingress_url: str, day: str, *, client: httpx.AsyncClient) -> AuditDayRead:
    index = AuditDay.model_validate_json((await _call(client, _url(ingress_url, day, "index"))).content)
    entries: list[AuditEntry] = []
    for number in range(index.pages):
        raw = (await _call(client, _url(ingress_url, day, "page"), str(number))).content
        entries.extend(AuditPage.model_validate_json(raw).entries)
    breaks = [f"entry {b.seq} {b.problem}" for b in check_chain(entries)]
    if len(entries) != index.total:
        breaks.append(f"the index counts {index.total} entries, the pages hold {len(entries)}")
    return AuditDayRead(day=day, total=index.total, entries=entries, breaks=breaks)


class BadRange(OperatorError):
    """The days asked for are no range the log can be read over: the caller's mistake, not Restate's."""


def days_between(since: date, until: date) -> list[str]:
    if until < since:
        raise BadRange(f"--since {since} is after --until {until}")
    if (until - since).days > 366:
        raise BadRange("at most a year of audit log at a time: narrow --since/--until")
    return [(since + timedelta(days=n)).isoformat() for n in range((until - since).days + 1)]
