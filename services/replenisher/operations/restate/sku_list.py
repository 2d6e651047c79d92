"""Reading the SKU list kept by key (`durable.sku_list`): a page from every shard at once, through the ingress.

Each shard answers with its first `offset + limit` rows in the page's order and its counts, read by
key from its own state: no scan of Restate's partition (`domain.sku_list` says why), so the cost
follows the number of SKUs in a shard, not everything Restate stores.
"""

from __future__ import annotations

import asyncio

from replenisher.domain.sku_list import (
    SHARDS,
    SKU_LIST,
    ListEntry,
    ListPage,
    ShardAnswer,
    ShardQuery,
    merge,
    shard_key,
    shard_key_of,
)
from replenisher.operations.restate.errors import Refused
from replenisher.operations.restate.http import RestateHttp, message


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
    answers = await asyncio.gather(*(_ask(http, shard, asked) for shard in range(SHARDS)))
    return merge(answers, asked, offset, limit)


async def put_entries(http: RestateHttp, entries: list[ListEntry]) -> int:
    """Entries put straight in, one call per shard (to fill the list); how many changed."""
    by_shard: dict[str, list[ListEntry]] = {}
    for entry in entries:
        by_shard.setdefault(shard_key_of(entry.sku), []).append(entry)

    async def put(key: str, some: list[ListEntry]) -> int:
        body = {"entries": [e.model_dump(mode="json") for e in some]}
        response = await http.request("POST", f"{http.ingress_url}/{SKU_LIST}/{key}/put_many", "ingress", json=body)
        if response.is_error:
            raise Refused(response.status_code, f"the SKU list's shard {key} refused: {message(response)}")
        return int(response.json())

    return sum(await asyncio.gather(*(put(key, some) for key, some in by_shard.items())))
