"""`AuditLog`: one virtual object per UTC day (keyed `2026-12-05`) holding that day's audit log.

An object's state stays until it is cleared, so the log outlives Restate's retention of journals
and finished runs. The index (`index`: total, last digest) and the pages (`page-0`, `page-1`, ...,
`PAGE_SIZE` entries each) are separate state keys, so an append reads and writes one page, never
the whole day. Appends are exclusive per day: the chain of digests has one order.

Who appends: a run, for each approval decision it accepts or refuses (one one-way send from its
journal: exactly once), and the console for sign-ins and matrix changes (through ingress, with an
idempotency key). Reading is shared: `index`, and `page` by number.
"""

from __future__ import annotations

import restate
from restate import ObjectContext, ObjectSharedContext

from replenisher.domain.audit import AuditDay, AuditEntry, AuditPage, AuditRecord, day_of
from replenisher.durable import retention
from replenisher.durable.stored import load_stored
from replenisher.durable.validation import bad_request, validated

audit_log = restate.VirtualObject("AuditLog", **retention.OBJECT)
INDEX = "index"


def page_key(number: int) -> str:
    return f"page-{number}"


@validated(audit_log.handler)
async def append(ctx: ObjectContext, record: AuditRecord) -> AuditEntry:
    if day_of(record.at) != ctx.key():
        raise bad_request(f"an entry at {record.at} belongs to the log of {day_of(record.at)}, not {ctx.key()}")
    day = await load_stored(ctx, INDEX, AuditDay) or AuditDay(day=ctx.key())
    key = page_key(day.current_page)
    page = await load_stored(ctx, key, AuditPage) or AuditPage()
    entry = day.append(page, record)
    ctx.set(key, page)
    ctx.set(INDEX, day)
    return entry


@audit_log.handler(kind="shared")
async def index(ctx: ObjectSharedContext) -> AuditDay:
    return await load_stored(ctx, INDEX, AuditDay) or AuditDay(day=ctx.key())


@audit_log.handler(kind="shared")
async def page(ctx: ObjectSharedContext, number: int) -> AuditPage:
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise bad_request(f"a page is a number from 0, not {number!r}")
    return await load_stored(ctx, page_key(number), AuditPage) or AuditPage()
