"""What Restate did for a set of replenishments, read from its own tables (`sys_invocation`,
`sys_journal`): the invocations made, those it kept, and their journal entries.

Restate keeps a finished invocation only when something asks it to (a workflow's result, an
idempotency key): here the SKU agent's checks and deliveries, the workflow, its deliveries and its
archive, all keyed by a SKU or a run. The SKU list's puts and the day's audit log keep nothing, so
the invocations made are counted as those from outside (through the ingress) and every call and send
the kept journals hold; what keeps nothing makes no calls of its own.
"""

from __future__ import annotations

from typing import Any, Protocol

# The journal entries that make an invocation: a call awaited, and a send.
CALL_ENTRIES = "('Command: Call', 'Command: OneWayCall')"


class Sql(Protocol):
    async def asql(self, query: str) -> list[dict[str, Any]]: ...


def keyed_by(key_prefix: str) -> str:
    """The SQL condition on `sys_invocation` for invocations keyed by a SKU whose name starts with
    `key_prefix` or by one of its runs (`replenish-<SKU>-<n>`)."""
    return f"(target_service_key LIKE '{key_prefix}%' OR target_service_key LIKE 'replenish-{key_prefix}%')"


async def engine_work(admin: Sql, key_prefix: str, count: int) -> dict[str, float]:
    """Per replenishment, for the `count` replenishments whose SKUs' names start with `key_prefix`."""
    where = keyed_by(key_prefix)
    joined = "FROM sys_journal j JOIN sys_invocation i ON j.id = i.id WHERE " + where.replace(
        "target_service_key", "i.target_service_key"
    )

    async def count_of(query: str) -> int:
        return int((await admin.asql(query))[0]["n"])

    kept = await count_of(f"SELECT count(*) AS n FROM sys_invocation WHERE {where}")
    outside = await count_of(f"SELECT count(*) AS n FROM sys_invocation WHERE {where} AND invoked_by = 'ingress'")
    calls = await count_of(f"SELECT count(*) AS n {joined} AND j.entry_type IN {CALL_ENTRIES}")
    entries = await count_of(f"SELECT count(*) AS n {joined}")
    return {
        "invocations_made_per_replenishment": round((outside + calls) / count, 2),
        # The name results from before the count of all of them have: what Restate kept.
        "invocations_per_replenishment": round(kept / count, 2),
        "journal_entries_per_replenishment": round(entries / count, 2),
    }
