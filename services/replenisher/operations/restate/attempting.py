"""The invocations Restate is attempting now, found without reading every invocation it keeps.

Any query over `sys_invocation` reads every invocation Restate keeps, whatever it filters on: a
SKU's daily check is kept for the journal retention, so at 100,000 SKUs such a query reads over a
million rows and takes seconds (`make bench-state-scan`, docs/benchmarks.md). Two of Restate's own
tables are small:

- `sys_invocation_state` holds only the invocations its invoker is attempting: running, or backing
  off after a failed attempt. Their failure, retry count and next attempt are there.
- `sys_invocation` read by invocation id (`id IN (...)`) is a read by key.

So what is attempted now (a refused service, a run retrying a step) is found in the first and its
targets read from the second by id. When more are attempted than a few reads by key cover (a long
outage at many SKUs), one scan is cheaper than many reads, and the scan is made as before.
"""

from __future__ import annotations

import asyncio

from replenisher.operations.restate.http import RestateHttp, among
from replenisher.timeline.journal import Row

# Restate 1.7.12 reads `id IN (...)` by key: ten ids in about 5 ms however many invocations it keeps,
# a hundred in about 50 (`make bench-state-scan`: few_by_id, many_by_id). Either sometimes takes some
# 40 ms more, which does not grow with the store: a delay of the HTTP exchange, not of the read. So
# reads of ten, a few at once:
IDS_PER_READ = 10
READS_AT_ONCE = 4
# Past this many ids (a long outage at many SKUs) the reads add up to more than one scan of a small
# store: the caller scans instead, as every read did before.
MOST_IDS = 80

# What the invoker holds, as `sys_invocation`'s status names it (Restate's own view definition):
# `backing-off` is an invoked call not in flight after a failed attempt; `running` one in flight.
BACKING_OFF = "NOT in_flight AND retry_count > 0"
RETRYING_IN_FLIGHT = "in_flight AND retry_count > 1 AND last_failure IS NOT NULL"


async def attempted(
    http: RestateHttp, where: str, columns: str = "id, last_failure, last_failure_error_code"
) -> list[Row]:
    """The invoker's own rows that match `where` (over `sys_invocation_state`'s columns)."""
    return await http.sql(f"SELECT {columns} FROM sys_invocation_state WHERE {where}")


async def by_ids(http: RestateHttp, columns: str, ids: list[str]) -> list[Row] | None:
    """`sys_invocation`'s rows of these invocations, read by key; None when there are more than
    `MOST_IDS` (one scan is cheaper then: the caller makes it)."""
    unique = list(dict.fromkeys(ids))
    if len(unique) > MOST_IDS:
        return None
    gate = asyncio.Semaphore(READS_AT_ONCE)

    async def read(group: list[str]) -> list[Row]:
        async with gate:
            return await http.sql(f"SELECT {columns} FROM sys_invocation WHERE id IN {among(group)}")

    groups = [unique[i : i + IDS_PER_READ] for i in range(0, len(unique), IDS_PER_READ)]
    found = await asyncio.gather(*(read(group) for group in groups))
    return [row for rows in found for row in rows]
