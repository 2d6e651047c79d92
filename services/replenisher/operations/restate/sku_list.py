"""Reading the SKU list kept by key (`durable.sku_list`): a page from every shard at once, through the ingress.

Each shard answers with its first `offset + limit` rows in the page's order and its counts, read by
key from its own state: no scan of Restate's partition (`domain.sku_list` says why), so the cost
follows the number of SKUs in a shard, not everything Restate stores.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel, Field

from replenisher.domain.sku import parse_run_id
from replenisher.domain.sku_list import (
    SHARD_KEYS,
    SHARDS,
    SKU_LIST,
    ListEntry,
    ListPage,
    ShardAnswer,
    ShardQuery,
    WaitEntry,
    merge,
    refilled,
    shard_key,
    shard_key_of,
)
from replenisher.operations.restate.errors import Refused
from replenisher.operations.restate.http import RestateHttp, message

if TYPE_CHECKING:
    from replenisher.operations.restate.client import RestateClient

PUT_BATCH = 2_000  # entries per `put_many` (its limit is 5,000): a batch's journal entry stays a few hundred KB


async def _ask(http: RestateHttp, shard: int, query: ShardQuery) -> ShardAnswer:
    url = f"{http.ingress_url}/{SKU_LIST}/{shard_key(shard)}/page"
    headers = {"content-type": "application/json"}
    response = await http.request("POST", url, "ingress", content=query.model_dump_json(), headers=headers)
    if response.is_error:
        raise Refused(response.status_code, f"the SKU list's shard {shard_key(shard)} refused: {message(response)}")
    return ShardAnswer.model_validate_json(response.content)


async def list_page(http: RestateHttp, query: ShardQuery, offset: int, limit: int) -> ListPage:
    """The page `offset` to `offset + limit` of the SKUs `query` chooses, and the counts per chip."""
    asked = query.model_copy(update={"upto": offset + limit})
    answers = await asyncio.gather(*(_ask(http, shard, asked.for_shard(shard)) for shard in range(SHARDS)))
    return merge(answers, asked, offset, limit)


async def read_list(client: RestateClient, query: ShardQuery, offset: int, limit: int) -> ListPage:
    """`list_page` for a command that must not hang on a dead service: the first shard alone, through
    the client's ingress (which finds the service down after its patience, raises `ServiceDown`, and
    drops its read), then the rest at once. One round trip more than `list_page`; none left waiting."""
    asked = query.model_copy(update={"upto": offset + limit})

    async def ask(shard: int) -> ShardAnswer:
        body = asked.for_shard(shard).model_dump(mode="json")
        return ShardAnswer.model_validate(await client.ingress("POST", f"/{SKU_LIST}/{shard_key(shard)}/page", body))

    first = await ask(0)
    rest = await asyncio.gather(*(ask(shard) for shard in range(1, SHARDS)))
    return merge([first, *rest], asked, offset, limit)


async def filled_page(
    client: RestateClient, query: ShardQuery, offset: int, limit: int, refill: bool = False
) -> tuple[ListPage, Filled | None]:
    """`read_list`, the list filled from the agents' records first when a shard says it is not (or when
    `refill`), and read again: the page, and what the fill did if one was made."""
    page = await read_list(client, query, offset, limit)
    if page.filled and not refill:
        return page, None
    filled = await fill_list(client)
    return await read_list(client, query, offset, limit), filled


async def put_entries(http: RestateHttp, entries: list[ListEntry]) -> int:
    """Entries put straight in, the shards at once, each in batches (to fill the list); how many changed."""
    by_shard: dict[str, list[ListEntry]] = {}
    for entry in entries:
        by_shard.setdefault(shard_key_of(entry.sku), []).append(entry)

    async def put(key: str, some: list[ListEntry]) -> int:
        changed = 0
        for start in range(0, len(some), PUT_BATCH):
            body = {"entries": [e.model_dump(mode="json") for e in some[start : start + PUT_BATCH]]}
            url = f"{http.ingress_url}/{SKU_LIST}/{key}/put_many"
            changed += int((await _asked(http, url, key, json=body)).json())
        return changed

    return sum(await asyncio.gather(*(put(key, some) for key, some in by_shard.items())))


async def _asked(http: RestateHttp, url: str, key: str, **kwargs: Any) -> httpx.Response:
    response = await http.request("POST", url, "ingress", **kwargs)
    if response.is_error:
        raise Refused(response.status_code, f"the SKU list's shard {key} refused: {message(response)}")
    return response


class Filled(BaseModel):
    agents: int = Field(description="the agents whose entries were put")
    changed: int = Field(description="of those, the entries the list did not hold as they are")
    waits: int = Field(description="the active runs' waits put with them")


async def fill_list(client: RestateClient) -> Filled:
    """Every agent's entry put on the list from its record and its active run's wait, as Restate's storage
    holds them now, then every shard marked filled: what a list needs once, when agents exist that code
    without the list made (an upgrade), or to mend one. Safe while agents and runs work: what they put
    after wins (`domain.sku_list.refilled`). Reads every agent's record: slow at 100,000 SKUs, but once."""
    records = await client.sku_records()
    active = [r.active.run_id for r in records if r.active is not None]
    waiting = {run: wait for run, wait in (await client.waiting_runs()).items() if run in set(active)}
    invocations = await client.run_invocations([run for run in active if run in waiting])
    since = await client.waiting_since({run: invocations[run].id for run in waiting if run in invocations})
    states = await client.run_states(list(waiting))
    entries = []
    for record in records:
        run = record.active.run_id if record.active is not None else None
        wait = waiting.get(run) if run is not None else None
        parsed = parse_run_id(run) if run is not None else None
        told = None
        if run is not None and wait is not None and parsed is not None:
            state = states.get(run)
            price, supplier = state.asked if state is not None else (None, None)
            told = WaitEntry(
                sku=record.sku,
                run=parsed[1],
                seq=0,
                tool=wait.tool,
                since=since.get(run),
                price=price,
                until=wait.deadline,
                supplier=supplier,
            )
        entries.append(refilled(record, told))
    changed = await put_entries(client.http, entries)
    http = client.http
    await asyncio.gather(*(_asked(http, f"{http.ingress_url}/{SKU_LIST}/{key}/mark_filled", key) for key in SHARD_KEYS))
    return Filled(agents=len(entries), changed=changed, waits=sum(e.wait_run is not None for e in entries))
