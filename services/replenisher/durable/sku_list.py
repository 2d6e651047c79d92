"""`SkuList`: the SKU list kept by key, one virtual object per shard (keyed `00` to `07`).

Each shard keeps its SKUs' entries in buckets (state keys `b000`...), compressed, as
`domain.sku_list` lays them out, and beside them each bucket's version. A put reads and writes its
buckets and the versions, with lazy state: Restate does not send it the rest of the shard. A page's
read is shared and lazy too: it reads the versions and then, all at once, only the buckets this
process has not read at their current version. Puts are exclusive per shard; an entry with an
older revision than the one kept changes nothing, so puts that arrive out of order are harmless.
"""

from __future__ import annotations

from datetime import timedelta

import restate
from pydantic import BaseModel, Field
from restate import ObjectContext, ObjectSharedContext
from restate.serde import BytesSerde

from replenisher.domain.sku_list import (
    SKU_LIST,
    VERSIONS,
    ListEntry,
    ShardAnswer,
    ShardCache,
    ShardQuery,
    Versions,
    answer,
    bucket_key,
    bucket_of,
    kept_of,
    pack,
    put_row,
    shard_key_of,
    unpack,
)
from replenisher.durable import retention
from replenisher.durable.validation import bad_request, validated

sku_list = restate.VirtualObject(SKU_LIST, **retention.OBJECT)
# A page is read often and a put made often: neither's journal nor its result says anything a timeline
# shows, and each finished call Restate keeps adds to every SQL scan over `sys_invocation`. Nothing is kept.
KEEP_NOTHING = {"journal_retention": timedelta(0), "idempotency_retention": timedelta(0)}
# This process's copy of each shard's rows, read again bucket by bucket as they change: bounded by the
# list itself, about 31 MB at 100,000 SKUs.
_held: dict[str, ShardCache] = {}


class Entries(BaseModel):
    entries: list[ListEntry] = Field(max_length=5_000)


def _check_shard(ctx: ObjectContext, entries: list[ListEntry]) -> None:
    for entry in entries:
        if shard_key_of(entry.sku) != ctx.key():
            raise bad_request(f"{entry.sku} belongs to shard {shard_key_of(entry.sku)}, not {ctx.key()}")


async def _put(ctx: ObjectContext, entries: list[ListEntry]) -> int:
    """Each entry into its bucket, one read and at most one write per bucket, and the bucket's version
    counted up for every write; how many entries changed."""
    by_bucket: dict[int, list[ListEntry]] = {}
    for entry in entries:
        by_bucket.setdefault(bucket_of(entry.sku), []).append(entry)
    versions = await ctx.get(VERSIONS, type_hint=Versions) or Versions(epoch=str(ctx.uuid()))
    changed = 0
    for bucket, some in sorted(by_bucket.items()):
        key = bucket_key(bucket)
        held = unpack(await ctx.get(key, serde=BytesSerde()))
        dirty = False
        for entry in some:
            updated = put_row(held, entry)
            if updated is not None:
                held, dirty, changed = updated, True, changed + 1
        if dirty and held is not None:
            ctx.set(key, pack(held), serde=BytesSerde())
            versions = versions.bumped(bucket)
    if changed:
        ctx.set(VERSIONS, versions)
    return changed


@validated(sku_list.handler, enable_lazy_state=True, **KEEP_NOTHING)
async def put(ctx: ObjectContext, entry: ListEntry) -> int:
    _check_shard(ctx, [entry])
    return await _put(ctx, [entry])


@validated(sku_list.handler, enable_lazy_state=True, **KEEP_NOTHING)
async def put_many(ctx: ObjectContext, batch: Entries) -> int:
    """Entries of this shard in one call: for filling the list from the agents' records."""
    _check_shard(ctx, batch.entries)
    return await _put(ctx, batch.entries)


@validated(sku_list.handler, kind="shared", enable_lazy_state=True, **KEEP_NOTHING)
async def page(ctx: ObjectSharedContext, query: ShardQuery) -> ShardAnswer:
    """This shard's part of a page: its first `upto` rows in the query's order, and its counts.

    Lazy state: the call reads the versions, then only the buckets written since this process last
    read them, so a page ships what changed, not the whole shard."""
    versions = await ctx.get(VERSIONS, type_hint=Versions)
    if versions is None:
        return answer([], query)
    cache = _held.setdefault(ctx.key(), ShardCache())
    stale = cache.stale(versions)
    # Asked for all at once, answered together: not one round trip to Restate after another.
    reads = [ctx.get(bucket_key(bucket), serde=BytesSerde()) for bucket in stale]
    await restate.gather(*reads)  # type: ignore[arg-type]
    for bucket, read in zip(stale, reads, strict=True):
        cache.keep(bucket, versions.of[bucket], kept_of(unpack(await read)))
    return answer(cache.entries(), query)
