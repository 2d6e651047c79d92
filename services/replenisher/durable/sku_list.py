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
    SHARD_KEYS,
    SKU_LIST,
    VERSIONS,
    ListEntry,
    ShardAnswer,
    ShardCache,
    ShardQuery,
    Versions,
    WaitEntry,
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
from replenisher.durable.clock import journaled_time
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


def _check_shard(ctx: ObjectContext, entries: list[ListEntry] | list[WaitEntry]) -> None:
    for entry in entries:
        if shard_key_of(entry.sku) != ctx.key():
            raise bad_request(f"{entry.sku} belongs to shard {shard_key_of(entry.sku)}, not {ctx.key()}")


async def _put(ctx: ObjectContext, entries: list[ListEntry] | list[WaitEntry]) -> int:
    """Each entry into its bucket, one read and at most one write per bucket, and the bucket's version
    counted up for every write; how many entries changed. A run's wait joins the entry held."""
    by_bucket: dict[int, list[ListEntry | WaitEntry]] = {}
    for entry in entries:
        by_bucket.setdefault(bucket_of(entry.sku), []).append(entry)
    versions = await ctx.get(VERSIONS, type_hint=Versions) or Versions(epoch=str(ctx.uuid()))
    changed = 0
    for bucket, some in sorted(by_bucket.items()):
        key = bucket_key(bucket)
        held = unpack(await ctx.get(key, serde=BytesSerde()))
        dirty = False
        for item in some:
            entry = item.entry((held or {}).get(item.sku)) if isinstance(item, WaitEntry) else item
            updated = put_row(held, entry)
            if updated is not None:
                held, dirty, changed = updated, True, changed + 1
        if dirty and held is not None:
            ctx.set(key, pack(held), serde=BytesSerde())
            versions = versions.bumped(bucket)
    if changed:
        ctx.set(VERSIONS, versions)
    return changed


# `put` and `put_wait` are the agents' and runs' (private: not through the ingress); `put_many` and
# `mark_filled` an operator's fill of the list (`replenisher skus --refill`), `page` every reader's.
@validated(sku_list.handler, enable_lazy_state=True, ingress_private=True, **KEEP_NOTHING)
async def put(ctx: ObjectContext, entry: ListEntry) -> int:
    _check_shard(ctx, [entry])
    return await _put(ctx, [entry])


@validated(sku_list.handler, enable_lazy_state=True, **KEEP_NOTHING)
async def put_many(ctx: ObjectContext, batch: Entries) -> int:
    """Entries of this shard in one call: for filling the list from the agents' records."""
    _check_shard(ctx, batch.entries)
    return await _put(ctx, batch.entries)


@sku_list.handler(enable_lazy_state=True, **KEEP_NOTHING)
async def mark_filled(ctx: ObjectContext) -> None:
    """The shard holds every agent's entry now: a fill from the agents' records (`fill_list`) has put them."""
    if ctx.key() not in SHARD_KEYS:
        known = f"{SHARD_KEYS[0]} to {SHARD_KEYS[-1]}"
        raise bad_request(f"no shard {ctx.key()[:20]!r} of the SKU list (its shards: {known})")
    versions = await ctx.get(VERSIONS, type_hint=Versions) or Versions(epoch=str(ctx.uuid()))
    if not versions.filled:
        ctx.set(VERSIONS, versions.model_copy(update={"filled": True}))


@validated(sku_list.handler, enable_lazy_state=True, ingress_private=True, **KEEP_NOTHING)
async def put_wait(ctx: ObjectContext, wait: WaitEntry) -> int:
    """What a run says of its wait, into its SKU's entry (shown while the run is the agent's active one)."""
    _check_shard(ctx, [wait])
    if wait.tool is not None and wait.since is None:
        wait = wait.model_copy(update={"since": await journaled_time(ctx)})
    return await _put(ctx, [wait])


@validated(sku_list.handler, kind="shared", enable_lazy_state=True, **KEEP_NOTHING)
async def page(ctx: ObjectSharedContext, query: ShardQuery) -> ShardAnswer:
    """This shard's part of a page: its first `upto` rows in the query's order, and its counts.

    Lazy state: the call reads the versions, then only the buckets written since this process last
    read them, so a page ships what changed, not the whole shard."""
    versions = await ctx.get(VERSIONS, type_hint=Versions)
    if versions is None:
        return answer([], query)  # never written nor filled
    cache = _held.setdefault(ctx.key(), ShardCache())
    stale = cache.stale(versions)
    # Asked for all at once, answered together: not one round trip to Restate after another.
    reads = [ctx.get(bucket_key(bucket), serde=BytesSerde()) for bucket in stale]
    await restate.gather(*reads)  # type: ignore[arg-type]
    for bucket, read in zip(stale, reads, strict=True):
        cache.keep(bucket, versions.of[bucket], kept_of(unpack(await read)))
    return answer(cache.entries(), query, filled=versions.filled)
