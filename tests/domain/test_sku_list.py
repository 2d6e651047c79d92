"""The SKU list kept by key (`domain.sku_list`): where an entry is kept, what a put keeps, and that a
page merged from the shards' answers is the page of the whole list."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import ValidationError

from replenisher.domain.documents import StockLevel
from replenisher.domain.outcomes import ReplenishmentResult
from replenisher.domain.sku import SkuRecord, run_id_of
from replenisher.domain.sku_list import (
    BUCKETS,
    DETAIL,
    FAR,
    SHARDS,
    Kept,
    ListEntry,
    Row,
    ShardCache,
    ShardQuery,
    Versions,
    WaitEntry,
    answer,
    bucket_of,
    counts_of,
    decode,
    encode,
    kept_of,
    listing,
    merge,
    put_row,
    shard_of,
)

NOW = 1_800_000_000.0
# Each with a word the buckets have no code for, kept as it is.
TOOLS = (None, "wait_for_approval", "wait_for_supplier_reply", "wait_for_goods", "wait_for_pigs")
OUTCOMES = (None, "received", "rejected", "gave_up", "cancelled", "unknown", "odd")


def entry(i: int, rng: random.Random) -> ListEntry:
    tool = rng.choice(TOOLS)
    active = f"replenish-SKU-{i:05d}-1" if tool or rng.random() < 0.2 else None
    on_hand = rng.choice([None, *range(0, 40)])
    return ListEntry(
        sku=f"SKU-{i:05d}",
        revision=1,
        watched=rng.random() < 0.8,
        runs=rng.randrange(5),
        active_run=active,
        waiting_tool=tool,
        waiting_since=NOW - rng.randrange(1, 10_000) if tool else None,
        asked_price=rng.choice([None, 9.5, 10.0, 12.25]),
        outcome=rng.choice(OUTCOMES),
        ended_at=NOW - rng.randrange(0, 5) * 100.0,  # ties, so the SKU must break them
        on_hand=on_hand,
        safety_stock=rng.choice([0, 10, 20]) if on_hand is not None else None,
        cover_days=rng.choice([None, 0.5, 3.0, 3.0]),
        problem="stopped: paused" if rng.random() < 0.05 else None,
        # Mostly the active run's own wait; some an earlier or a later run's (not shown), some none.
        wait_run=(1 if rng.random() < 0.85 else 2) if active else rng.choice([None, 3]),
        wait_seq=rng.randrange(4),
        detail=rng.choice([None, "received 95 of 95", "é" * 80]),
        waiting_until=NOW + rng.randrange(1, 10_000) if tool else None,
        supplier=rng.choice([None, "acme", "bolt-co"]),
    )


def shown(e: ListEntry) -> Row:
    """The entry as a page shows it, written plainly: its wait only while the wait's run is the active one."""
    current = e.wait_run is not None and e.active_run == run_id_of(e.sku, e.wait_run)
    blank = {"waiting_tool": None, "waiting_since": None, "asked_price": None, "waiting_until": None, "supplier": None}
    return e.row() if current else e.model_copy(update=blank).row()


def reference(rows: list[Row], query: ShardQuery) -> list[Row]:
    """The query over the whole list, written plainly: filter, then one sort."""
    needle = query.q.strip().lower()
    on = {"wait_for_approval": "manager", "wait_for_supplier_reply": "supplier", "wait_for_goods": "supplier"}

    def waits(r: Row) -> bool:
        if query.waiting == "nobody":
            return r.waiting_tool is None
        if query.waiting == "someone":
            return r.waiting_tool is not None
        return query.waiting == "any" or on.get(r.waiting_tool or "") == query.waiting

    def flagged(r: Row) -> bool:
        if query.flag == "below-safety":
            return r.on_hand is not None and r.safety_stock is not None and r.on_hand < r.safety_stock
        if query.flag == "over-budget":
            return query.budget is not None and r.asked_price is not None and r.asked_price > query.budget
        if query.flag == "failing":
            return r.problem is not None or (r.active_run is None and r.outcome in ("gave_up", "cancelled", "unknown"))
        return True

    def key(r: Row) -> tuple[Any, ...]:
        if query.sort == "stock":
            return (FAR if r.on_hand is None else r.on_hand / max(r.safety_stock or 0, 1), r.sku)
        if query.sort == "cover":
            return (FAR if r.cover_days is None else r.cover_days, r.sku)
        if query.sort == "waiting":
            return (r.waiting_since - NOW if r.waiting_since is not None else FAR, r.sku)
        if query.sort == "outcome":
            return (r.outcome or "~", -(r.ended_at or 0.0), r.sku)
        return (r.sku,)

    chosen = [r for r in rows if (not needle or needle in r.sku.lower()) and waits(r) and flagged(r)]
    return sorted(chosen, key=key, reverse=query.order == "desc")


def rows_of(bucket: dict[str, list[Any]]) -> list[Row]:
    return [decode(sku, kept) for sku, kept in kept_of(bucket)]


def kept_by_shard(entries: list[ListEntry]) -> list[list[Kept]]:
    """The entries as the shards keep them: put into their buckets, read back from the buckets."""
    buckets: dict[tuple[int, int], dict[str, list[Any]]] = {}
    for e in entries:
        place = (shard_of(e.sku), bucket_of(e.sku))
        kept = put_row(buckets.get(place), e)
        assert kept is not None
        buckets[place] = kept
    shards: dict[int, list[Kept]] = {}
    for (shard, _), bucket in sorted(buckets.items()):
        shards.setdefault(shard, []).extend(kept_of(bucket))
    return list(shards.values())


QUERIES = [
    {},
    {"order": "desc"},
    {"sort": "stock"},
    {"sort": "cover", "order": "desc"},
    {"sort": "waiting", "waiting": "someone"},
    {"sort": "outcome", "order": "desc"},
    {"waiting": "manager"},
    {"waiting": "nobody", "sort": "outcome"},
    {"flag": "failing"},
    {"flag": "below-safety", "sort": "stock"},
    {"flag": "over-budget", "budget": 10.0},
    {"q": "12"},
    {"q": " sku-0009 ", "order": "desc"},
]


@pytest.mark.parametrize("params", QUERIES, ids=[str(q) or "default" for q in QUERIES])
@pytest.mark.parametrize(("offset", "limit"), [(0, 10), (37, 25), (590, 100)])
def test_a_page_merged_from_the_shards_is_the_page_of_the_whole_list(
    params: dict[str, Any], offset: int, limit: int
) -> None:
    rng = random.Random(7)
    entries = [entry(i, rng) for i in range(600)]
    query = ShardQuery(now=NOW, upto=offset + limit, **params)

    page = merge([answer(rows, query) for rows in kept_by_shard(entries)], query, offset, limit)

    whole = reference([shown(e) for e in entries], query)
    assert [e.sku for e in page.entries] == [r.sku for r in whole[offset : offset + limit]]
    assert page.matching == len(whole)
    assert page.total == len(entries)
    assert page.counts == counts_of([(e.sku, encode(e)) for e in entries], query.budget)


@pytest.mark.parametrize("params", QUERIES, ids=[str(q) or "default" for q in QUERIES])
def test_following_each_pages_cursor_walks_the_whole_list_in_order_once(params: dict[str, Any]) -> None:
    rng = random.Random(11)
    entries = [entry(i, rng) for i in range(400)]
    shards = kept_by_shard(entries)
    whole = reference([shown(e) for e in entries], ShardQuery(now=NOW, upto=0, **params))
    seen: list[str] = []
    after = None
    for _ in range(100):
        query = ShardQuery(now=NOW, upto=30, after=after, **params)
        page = merge([answer(rows, query) for rows in shards], query, 0, 30)
        seen += [e.sku for e in page.entries]
        assert page.matching == len(whole)
        after = page.next_after
        if after is None:
            break
        # The cursor travels as JSON, as a page link or the CLI's --after would carry it.
        after = ShardQuery.model_validate_json(query.model_copy(update={"after": after}).model_dump_json()).after
    assert seen == [r.sku for r in whole]


def test_a_bucket_keeps_the_common_words_short_and_gives_back_the_entry() -> None:
    rng = random.Random(5)
    entries = [entry(i, rng) for i in range(300)]
    odd = ListEntry(sku="X-1", revision=2, active_run="someone-else's-run", waiting_tool="wait_for_pigs", outcome="odd")
    for e in [*entries, odd]:
        bucket = put_row(None, e)
        assert bucket is not None
        assert rows_of(bucket) == [shown(e)]
    kept = put_row(None, entries[0].model_copy(update={"active_run": "replenish-SKU-00000-12", "outcome": "gave_up"}))
    assert kept is not None and kept["SKU-00000"][3] == 12 and kept["SKU-00000"][7] == 3


def test_a_reader_reads_again_only_the_buckets_written_since_and_all_of_them_after_a_fresh_start() -> None:
    kept = {b: [(f"S-{b}", encode(ListEntry(sku=f"S-{b}", revision=1)))] for b in (0, 5, 9)}
    versions = Versions(epoch="first")
    for b in kept:
        versions = versions.bumped(b)
    cache = ShardCache()
    assert cache.stale(versions) == [0, 5, 9], "never read: every bucket that was ever written"
    for b in kept:
        cache.keep(b, versions.of[b], kept[b])
    assert cache.stale(versions) == []
    assert sorted(sku for sku, _ in cache.entries()) == ["S-0", "S-5", "S-9"]

    versions = versions.bumped(5)
    assert versions.of[5] == 2 and cache.stale(versions) == [5]

    # The shard started afresh (its state cleared): same counts, but none of the rows held count.
    fresh = Versions(epoch="second").bumped(5)
    assert cache.stale(fresh) == [5]
    assert cache.entries() == []


def test_every_shard_and_bucket_is_used_and_a_skus_place_never_moves() -> None:
    skus = [f"SKU-{i:05d}" for i in range(20_000)]  # about 1,250 a shard: none of 64 buckets left empty
    assert {shard_of(s) for s in skus} == set(range(SHARDS))
    per_shard: dict[int, set[int]] = {}
    for s in skus:
        per_shard.setdefault(shard_of(s), set()).add(bucket_of(s))
    # The bucket is independent of the shard: every shard spreads its SKUs over all its buckets.
    assert all(len(buckets) == BUCKETS for buckets in per_shard.values())
    # Pinned: a change here would leave every stored entry in a shard its reader no longer asks.
    assert [(shard_of(s), bucket_of(s)) for s in ("SKU-00001", "BOLT-M8", "a")] == [(7, 78), (1, 50), (7, 57)]


def test_a_put_keeps_the_newest_revision_and_a_retry_of_the_same_one() -> None:
    rng = random.Random(1)
    first = entry(1, rng).model_copy(update={"revision": 4, "runs": 1})
    bucket = put_row(None, first)
    assert bucket is not None and rows_of(bucket)[0].runs == 1

    older = first.model_copy(update={"revision": 3, "runs": 9})
    assert put_row(bucket, older) is None  # an older revision arriving late changes nothing

    again = first.model_copy(update={"runs": 2})  # the same revision again: a retried put
    retried = put_row(bucket, again)
    assert retried is not None and rows_of(retried)[0].runs == 2
    assert rows_of(bucket)[0].runs == 1, "the bucket handed in is not changed in place"


def test_an_entry_goes_into_a_row_and_back_unchanged() -> None:
    rng = random.Random(3)
    for i in range(50):
        e = entry(i, rng)
        assert ListEntry.of(list(e.row())) == e


def test_chips_count_whom_a_run_waits_on_and_what_is_wrong() -> None:
    base: dict[str, Any] = dict(revision=1, on_hand=None, safety_stock=None)
    waits = {**base, "wait_run": 1}
    entries = [
        ListEntry(sku="A", active_run="replenish-A-1", waiting_tool="wait_for_approval", asked_price=12.0, **waits),
        ListEntry(sku="B", active_run="replenish-B-1", waiting_tool="wait_for_goods", **waits),
        # A wait of the run before, told after the agent moved on: neither counted nor its price.
        ListEntry(sku="G", active_run="replenish-G-2", waiting_tool="wait_for_approval", asked_price=99.0, **waits),
        ListEntry(sku="C", outcome="gave_up", **{**base, "on_hand": 1, "safety_stock": 5}),
        ListEntry(sku="D", active_run="r", outcome="gave_up", problem=None, **base),  # a new run is on
        ListEntry(sku="E", problem="stopped: paused", **base),
        ListEntry(sku="F", outcome="rejected", **{**base, "on_hand": 5, "safety_stock": 5}),
    ]
    rows = [(e.sku, encode(e)) for e in entries]
    assert counts_of(rows, budget=10.0) == {
        "manager": 1,
        "supplier": 1,
        "below-safety": 1,
        "over-budget": 1,
        "failing": 2,
    }
    assert counts_of(rows, budget=None)["over-budget"] == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"sku": "", "revision": 1},
        {"sku": "A", "revision": -1},
        {"sku": "A", "revision": 1, "colour": "red"},
        {"sku": "A", "revision": 1, "asked_price": -3},
    ],
)
def test_a_bad_entry_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ListEntry.model_validate(bad)


@pytest.mark.parametrize(
    "bad", [{"q": "a;drop"}, {"sort": "price"}, {"upto": -1}, {"page": 2}, {"after": [1, 2, 3, 4]}, {"after": [{}]}]
)
def test_a_bad_query_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ShardQuery.model_validate({"now": NOW, "upto": 10, **bad})


def test_the_agents_put_keeps_the_runs_wait_and_a_wait_told_late_changes_nothing() -> None:
    agent = ListEntry(sku="A", revision=3, active_run="replenish-A-2", runs=2)
    bucket = put_row(None, agent)
    assert bucket is not None

    def wait(run: int, seq: int, tool: str | None, price: float | None = None) -> dict[str, list[Any]] | None:
        told = WaitEntry(sku="A", run=run, seq=seq, tool=tool, since=NOW, price=price, until=NOW + 50, supplier="acme")
        return put_row(bucket, told.entry(bucket["A"]))

    waiting = wait(2, 1, "wait_for_approval", 12.5)
    assert waiting is not None
    [row] = rows_of(waiting)
    assert (row.waiting_tool, row.waiting_since, row.asked_price, row.revision) == ("wait_for_approval", NOW, 12.5, 3)
    assert (row.waiting_until, row.supplier) == (NOW + 50, "acme")
    bucket = waiting

    # The agent's next put says nothing of the wait: the wait stays.
    moved = put_row(bucket, agent.model_copy(update={"revision": 4, "on_hand": 7}))
    assert moved is not None
    [row] = rows_of(moved)
    assert (row.on_hand, row.waiting_tool, row.asked_price) == (7, "wait_for_approval", 12.5)
    bucket = moved

    # The same run's earlier word, arriving after, and the run before's: nothing changes.
    assert wait(2, 0, None) is None
    assert wait(1, 9, "wait_for_goods") is None
    # Its next word wins: it waits for nothing now.
    done = wait(2, 2, None)
    assert done is not None and rows_of(done)[0].waiting_tool is None

    # A wait of a run the agent has not started yet (its put not here yet) is kept, not shown.
    ahead = wait(3, 1, "wait_for_goods")
    assert ahead is not None and rows_of(ahead)[0].waiting_tool is None
    started = put_row(ahead, agent.model_copy(update={"revision": 5, "active_run": "replenish-A-3", "runs": 3}))
    assert started is not None and rows_of(started)[0].waiting_tool == "wait_for_goods"


def test_a_wait_told_before_the_agents_first_put_makes_a_row_the_agent_then_fills() -> None:
    told = WaitEntry(sku="B", run=1, seq=1, tool="wait_for_approval", since=NOW, price=3.0)
    bucket = put_row(None, told.entry(None))
    assert bucket is not None
    [row] = rows_of(bucket)
    assert row.revision == 0 and row.waiting_tool is None, "no active run known yet: not shown"
    first = put_row(bucket, ListEntry(sku="B", revision=1, runs=1, active_run="replenish-B-1"))
    assert first is not None
    assert rows_of(first)[0].waiting_tool == "wait_for_approval"


def record_of(**fields: Any) -> SkuRecord:
    return SkuRecord(sku="A", **fields)


def test_the_agent_puts_an_entry_only_when_what_it_says_changed() -> None:
    record = record_of()
    first = listing(record)
    assert first is not None and first.revision == 1 and record.listed.revision == 1
    assert listing(record) is None, "nothing changed: nothing to put"

    record.watch.watching = True
    watched = listing(record)
    assert watched is not None and watched.revision == 2 and watched.watched

    # A check that read the same stock again changes nothing the list shows (the check's time is not on it).
    stock = StockLevel(sku="A", on_hand=5, safety_stock=10, target_stock=50, suppliers=["s1"])
    record.consider(stock, NOW)
    started = listing(record)
    assert started is not None
    assert (started.on_hand, started.safety_stock, started.active_run, started.runs) == (5, 10, "replenish-A-1", 1)
    assert started.wait_run is None, "the wait is the run's to say"
    record.consider(stock, NOW + 60)
    assert listing(record) is None


def test_a_last_run_that_failed_with_none_after_it_counts_as_failing_and_says_why() -> None:
    stock = StockLevel(sku="A", on_hand=5, safety_stock=10, target_stock=50, suppliers=["s1"])
    record = record_of()
    record.consider(stock, NOW)
    result = ReplenishmentResult(
        run_id="replenish-A-1",
        sku="A",
        outcome="gave_up",
        detail="no supplier quoted" + " x" * 300,
        started_at=NOW,
        ended_at=NOW + 10,
    )
    assert record.finish(result)
    entry = listing(record)
    assert entry is not None and entry.active_run is None and entry.outcome == "gave_up"
    assert entry.detail is not None and entry.detail.startswith("no supplier quoted") and len(entry.detail) == DETAIL
    assert entry.problem is None, "the outcome says it: the agent has no problem of its own to add"
    # Its kept form counts it as failing, as the SKUs page does.
    assert counts_of([(entry.sku, encode(entry))], None)["failing"] == 1


def test_a_sku_with_a_paused_call_counts_as_failing_and_is_chosen_by_the_filter() -> None:
    entries = [ListEntry(sku=s, revision=1) for s in ("A", "B", "C")]
    kept = [(e.sku, encode(e)) for e in entries]
    plain = answer(kept, ShardQuery(now=NOW, upto=10, flag="failing"))
    assert (plain.rows, plain.counts["failing"]) == ([], 0), "nothing wrong with any of them on the list"
    stopped = answer(kept, ShardQuery(now=NOW, upto=10, flag="failing", failing_too=["B", "Z"]))
    assert [row[0] for row in stopped.rows] == ["B"] and stopped.counts["failing"] == 1


def test_after_goods_came_in_the_entry_does_not_claim_the_stock_it_read_before() -> None:
    stock = StockLevel(sku="A", on_hand=5, safety_stock=10, target_stock=50, suppliers=["s1"])
    record = record_of()
    record.consider(stock, NOW)
    low = listing(record)
    assert low is not None and (low.on_hand, low.safety_stock) == (5, 10)
    result = ReplenishmentResult(
        run_id="replenish-A-1", sku="A", outcome="received", started_at=NOW, ended_at=NOW + 10, quantity_received=45
    )
    assert record.finish(result)
    restocked = listing(record)
    assert restocked is not None and (restocked.on_hand, restocked.safety_stock) == (None, None)
    assert counts_of([("A", encode(restocked))], None)["below-safety"] == 0, "not below safety on a reading from before"
    record.consider(stock.model_copy(update={"on_hand": 50}), NOW + 20)  # the next check reads it again
    checked = listing(record)
    assert checked is not None and (checked.on_hand, checked.safety_stock) == (50, 10)


def test_each_shard_is_sent_only_its_own_troubled_skus_and_the_merged_page_counts_them_all() -> None:
    rng = random.Random(13)
    entries = [entry(i, rng) for i in range(400)]
    troubled = [*sorted(rng.sample([e.sku for e in entries], 40)), "NO-SUCH-SKU"]
    query = ShardQuery(now=NOW, upto=1_000, flag="failing", failing_too=troubled)
    by_shard: dict[int, list[Kept]] = {}
    for e in entries:
        by_shard.setdefault(shard_of(e.sku), []).append((e.sku, encode(e)))
    asked = [query.for_shard(shard) for shard in range(SHARDS)]
    assert sum(len(q.failing_too) for q in asked) == len(troubled), "every SKU named goes to one shard"
    assert all(shard_of(s) == shard for shard, q in enumerate(asked) for s in q.failing_too)
    page = merge([answer(by_shard.get(i, []), q) for i, q in enumerate(asked)], query, 0, 1_000)
    whole = answer([kept for rows in by_shard.values() for kept in rows], query)
    assert page.counts["failing"] == whole.counts["failing"] and page.matching == whole.matching
    assert {e.sku for e in page.entries} >= set(troubled) - {"NO-SUCH-SKU"}
