"""The SKU list kept by key: each SKU's entry, where it is kept, and how a page is read. Pure, no Restate.

Restate 1.7.12's SQL scans a whole partition for any query over `state`, so no query pages a
100,000-SKU list in half a second (`make bench-state-scan`). The list is therefore kept apart,
in a fixed number of shards (a virtual object each), every shard in a fixed number of buckets
(one state key each, about 100 entries at 100,000 SKUs, compressed), with each bucket's version
beside them. A page asks every shard, in parallel, for its first `offset + limit` entries in the
page's order past an optional cursor, and for its counts per filter chip; `merge` takes the page
from those answers. A reader keeps the rows it read (`ShardCache`) and reads again only the
buckets whose version moved. Each entry is a short positional row, not a model per SKU.

The sort keys and filters are those of the SKUs page (`operations.overview`), on what the agent
knows: stock and cover are its last check's reading, not the ERP's figures now.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from replenisher.domain.sku import run_id_of

SKU_LIST = "SkuList"  # the virtual object that keeps the shards
SHARDS = 8
BUCKETS = 128  # per shard: 1,024 buckets, about 100 entries each at 100,000 SKUs
FAILED_OUTCOMES = ("gave_up", "cancelled", "unknown")
WAITING_ON = {"wait_for_approval": "manager", "wait_for_supplier_reply": "supplier", "wait_for_goods": "supplier"}
CHIPS = ("manager", "supplier", "below-safety", "over-budget", "failing")
FAR = 1e300  # last in an ascending order; finite, so a cursor holding it is JSON

SortKey = Literal["sku", "stock", "cover", "waiting", "outcome"]
Waits = Literal["any", "manager", "supplier", "someone", "nobody"]
Flag = Literal["all", "below-safety", "over-budget", "failing"]


def _digest(sku: str) -> int:
    # Not Python's hash(): that differs per process, and every worker must put a SKU in one place.
    return int.from_bytes(hashlib.blake2b(sku.encode(), digest_size=8).digest(), "big")


def shard_of(sku: str, shards: int = SHARDS) -> int:
    return _digest(sku) % shards


def shard_key(shard: int) -> str:
    """The shard's object key: `00` to `07`."""
    return f"{shard:02d}"


def shard_key_of(sku: str) -> str:
    return shard_key(shard_of(sku))


def bucket_of(sku: str, buckets: int = BUCKETS) -> int:
    # The digest's high half: independent of the shard, so a shard's SKUs spread over its buckets.
    return (_digest(sku) >> 32) % buckets


def bucket_key(bucket: int) -> str:
    return f"b{bucket:03d}"


class Row(NamedTuple):
    """An entry as a bucket keeps it (a JSON array, in this order)."""

    sku: str
    revision: int
    watched: bool
    runs: int
    active_run: str | None
    waiting_tool: str | None
    waiting_since: float | None
    asked_price: float | None
    outcome: str | None
    ended_at: float | None
    on_hand: int | None
    safety_stock: int | None
    cover_days: float | None
    problem: str | None


class ListEntry(BaseModel):
    """A SKU's line on the list, as its agent and its active run last told it. The boundary's form:
    checked when it is put, kept as a `Row`."""

    model_config = ConfigDict(extra="forbid")

    sku: str = Field(min_length=1, max_length=64)
    revision: int = Field(ge=0, description="the agent's count of changes: an older one never replaces a newer")
    watched: bool = False
    runs: int = Field(default=0, ge=0)
    active_run: str | None = Field(default=None, max_length=100)
    waiting_tool: str | None = Field(default=None, max_length=40)
    waiting_since: float | None = None
    asked_price: float | None = Field(default=None, ge=0)
    outcome: str | None = Field(default=None, max_length=20, description="the last run's outcome")
    ended_at: float | None = None
    on_hand: int | None = Field(default=None, description="stock at the last check")
    safety_stock: int | None = None
    cover_days: float | None = Field(default=None, ge=0)
    problem: str | None = Field(default=None, max_length=300, description="why someone should look, if anything")

    def row(self) -> Row:
        return Row(*(getattr(self, name) for name in Row._fields))

    @classmethod
    def of(cls, row: Sequence[Any]) -> ListEntry:
        return cls.model_validate(dict(zip(Row._fields, row, strict=True)))


# How a bucket keeps an entry: `{sku: [revision, watched, runs, run, tool, since, price, outcome,
# ended, on hand, safety stock, cover, problem]}`, the common words as small numbers, times in whole
# seconds and the run by its number, so a shard's page read ships and parses half the bytes.
TOOL_CODES = {"wait_for_approval": 1, "wait_for_supplier_reply": 2, "wait_for_goods": 3}
OUTCOME_CODES = {"received": 1, "rejected": 2, "gave_up": 3, "cancelled": 4, "unknown": 5}
_TOOLS = {code: word for word, code in TOOL_CODES.items()}
_OUTCOMES = {code: word for word, code in OUTCOME_CODES.items()}


def _seconds(at: float | None) -> int | None:
    return None if at is None else round(at)


def encode(entry: ListEntry) -> list[Any]:
    """The entry as its bucket keeps it (its SKU is the bucket's key for it)."""
    run: int | str | None = entry.active_run
    if run is not None:
        prefix = run_id_of(entry.sku, 0)[:-1]
        number = run[len(prefix) :] if run.startswith(prefix) else ""
        if number.isdigit() and run_id_of(entry.sku, int(number)) == run:
            run = int(number)
    return [
        entry.revision,
        int(entry.watched),
        entry.runs,
        run,
        TOOL_CODES.get(entry.waiting_tool or "", entry.waiting_tool),
        _seconds(entry.waiting_since),
        entry.asked_price,
        OUTCOME_CODES.get(entry.outcome or "", entry.outcome),
        _seconds(entry.ended_at),
        entry.on_hand,
        entry.safety_stock,
        None if entry.cover_days is None else round(entry.cover_days, 2),
        entry.problem,
    ]


def decode(sku: str, kept: list[Any]) -> Row:
    rev, watched, runs, run, tool, since, price, outcome, ended, on_hand, safety, cover, problem = kept
    return Row(
        sku,
        rev,
        bool(watched),
        runs,
        run_id_of(sku, run) if isinstance(run, int) else run,
        _TOOLS.get(tool, tool) if tool is not None else None,
        since,
        price,
        _OUTCOMES.get(outcome, outcome) if outcome is not None else None,
        ended,
        on_hand,
        safety,
        cover,
        problem,
    )


def pack(bucket: dict[str, list[Any]]) -> bytes:
    """A bucket as its state key holds it: compact JSON, compressed. A reader reads a bucket again each
    time it changed, and Restate's cost for that follows the bytes (`make bench-list`)."""
    return zlib.compress(json.dumps(bucket, separators=(",", ":")).encode(), 1)


def unpack(kept: bytes | None) -> dict[str, list[Any]] | None:
    return None if kept is None else json.loads(zlib.decompress(kept))


def rows_of(bucket: dict[str, list[Any]] | None) -> list[Row]:
    """A bucket's rows, as `json.loads` gave it."""
    return [decode(sku, kept) for sku, kept in (bucket or {}).items()]


def put_row(bucket: dict[str, list[Any]] | None, entry: ListEntry) -> dict[str, list[Any]] | None:
    """The bucket with the entry in it, or None if the bucket holds a newer revision (nothing to write)."""
    bucket = dict(bucket or {})
    held = bucket.get(entry.sku)
    if held is not None and held[0] > entry.revision:
        return None
    bucket[entry.sku] = encode(entry)
    return bucket


Cursor = list[str | float | int]


class Versions(BaseModel):
    """A shard's count of writes to each bucket, kept beside them (`VERSIONS`), so a reader that holds
    a bucket's rows knows whether they are still current without reading the bucket again. `epoch` is
    new whenever the shard starts afresh, so counts that restart from zero never match rows held from before."""

    epoch: str
    of: list[int] = Field(default_factory=lambda: [0] * BUCKETS)

    def bumped(self, bucket: int) -> Versions:
        of = list(self.of)
        of[bucket] += 1
        return Versions(epoch=self.epoch, of=of)


VERSIONS = "versions"


class ShardCache:
    """The rows of one shard's buckets as a reader last read them, each with the version it read.
    Bounded by the shard itself: one entry per bucket."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.held: dict[int, tuple[int, list[Row]]] = {}

    def stale(self, versions: Versions) -> list[int]:
        """The buckets to read again: written since they were read, or never read."""
        if versions.epoch != self.epoch:
            self.epoch, self.held = versions.epoch, {}
        return [b for b, v in enumerate(versions.of) if v and self.held.get(b, (-1, []))[0] != v]

    def keep(self, bucket: int, version: int, rows: list[Row]) -> None:
        self.held[bucket] = (version, rows)

    def rows(self) -> list[Row]:
        return [row for _, rows in self.held.values() for row in rows]


class ShardQuery(BaseModel):
    """What a page asks every shard: the search, filters and order, and how many rows it needs from each."""

    model_config = ConfigDict(extra="forbid")

    q: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9._ -]*$")
    sort: SortKey = "sku"
    order: Literal["asc", "desc"] = "asc"
    waiting: Waits = "any"
    flag: Flag = "all"
    budget: float | None = None
    now: float
    upto: int = Field(ge=0, le=1_000_000, description="the page's offset plus its limit, past `after`")
    after: Cursor | None = Field(
        default=None,
        max_length=3,
        description="the sort key of the last row already shown (`ListPage.next_after`): rows past it only",
    )


class ShardAnswer(BaseModel):
    rows: list[list[Any]] = Field(description="the shard's first `upto` rows past `after`, in the query's order")
    matching: int = Field(description="the rows the search and filters chose, past the cursor or not")
    beyond: int = Field(description="of those, the rows past the cursor")
    total: int
    counts: dict[str, int]


def waits_on(row: Row) -> str | None:
    return WAITING_ON.get(row.waiting_tool, "someone") if row.waiting_tool else None


def below_safety(row: Row) -> bool:
    return row.on_hand is not None and row.safety_stock is not None and row.on_hand < row.safety_stock


def over_budget(row: Row, budget: float | None) -> bool:
    return budget is not None and row.asked_price is not None and row.asked_price > budget


def failing(row: Row) -> bool:
    return row.problem is not None or (row.active_run is None and row.outcome in FAILED_OUTCOMES)


def sort_key(key: SortKey, now: float) -> Callable[[Row], tuple[Any, ...]]:
    """The SKUs page's orders: the emptiest shelf against its safety stock, the least cover, the longest
    wait, the last outcome (newest first within one) or the SKU; ties by SKU, so every shard agrees.
    Every part is JSON (no infinity), so a key can come back as a page's cursor."""

    def of(row: Row) -> tuple[Any, ...]:
        if key == "stock":
            if row.on_hand is None:
                return (FAR, row.sku)
            return (row.on_hand / max(row.safety_stock or 0, 1), row.sku)
        if key == "cover":
            return (FAR if row.cover_days is None else row.cover_days, row.sku)
        if key == "waiting":
            return (-(now - row.waiting_since) if row.waiting_since is not None else FAR, row.sku)
        if key == "outcome":
            return (row.outcome or "~", -(row.ended_at or 0.0), row.sku)
        return (row.sku,)

    return of


def counts_of(rows: Iterable[Row], budget: float | None) -> dict[str, int]:
    return _scan(rows, ShardQuery(now=0.0, upto=0, budget=budget))[1]


def _scan(rows: Iterable[Row], query: ShardQuery) -> tuple[list[Row], dict[str, int]]:
    """One pass: the rows the search and filters choose, and the counts per chip over every row.
    Written out in one loop, not as the predicates above: it runs once per SKU per page."""
    needle = query.q.strip().lower()
    budget = query.budget
    waiting, flag = query.waiting, query.flag
    on_of = WAITING_ON
    failed = FAILED_OUTCOMES
    manager = supplier = below = over = bad = 0
    chosen: list[Row] = []
    for row in rows:
        tool = row.waiting_tool
        on = (on_of.get(tool) or "someone") if tool else None
        if on == "manager":
            manager += 1
        elif on == "supplier":
            supplier += 1
        on_hand, safety = row.on_hand, row.safety_stock
        is_below = on_hand is not None and safety is not None and on_hand < safety
        below += is_below
        price = row.asked_price
        is_over = budget is not None and price is not None and price > budget
        over += is_over
        is_failing = row.problem is not None or (row.active_run is None and row.outcome in failed)
        bad += is_failing
        if needle and needle not in row.sku.lower():
            continue
        if waiting != "any" and (
            (on is not None) if waiting == "nobody" else (on is None) if waiting == "someone" else on != waiting
        ):
            continue
        if flag != "all" and not (
            is_below if flag == "below-safety" else is_over if flag == "over-budget" else is_failing
        ):
            continue
        chosen.append(row)
    counts = {"manager": manager, "supplier": supplier, "below-safety": below, "over-budget": over, "failing": bad}
    return chosen, counts


def answer(rows: list[Row], query: ShardQuery) -> ShardAnswer:
    """One shard's part of a page: its first `upto` chosen rows past the cursor in order, how many it
    chose, how many lie past the cursor, and its counts per chip."""
    chosen, counts = _scan(rows, query)
    key = sort_key(query.sort, query.now)
    descending = query.order == "desc"
    past = chosen
    if query.after is not None:
        after = tuple(query.after)
        past = [r for r in chosen if (key(r) < after if descending else key(r) > after)]
    first = heapq.nlargest(query.upto, past, key) if descending else heapq.nsmallest(query.upto, past, key)
    return ShardAnswer(
        rows=[list(r) for r in first],
        matching=len(chosen),
        beyond=len(past),
        total=len(rows),
        counts=counts,
    )


class ListPage(BaseModel):
    entries: list[ListEntry]
    matching: int = Field(description="the SKUs the query chose, on every page")
    total: int = Field(description="every SKU on the list")
    counts: dict[str, int] = Field(description="SKUs per filter chip, whatever the query")
    next_after: Cursor | None = Field(default=None, description="the cursor of the page after this one, if any")


def merge(answers: Iterable[ShardAnswer], query: ShardQuery, offset: int, limit: int) -> ListPage:
    """The page `offset` to `offset + limit` past the query's cursor, from every shard's answer to
    `query` (its `upto` at least `offset + limit`)."""
    answers = list(answers)
    key = sort_key(query.sort, query.now)
    streams = [[Row(*r) for r in a.rows] for a in answers]
    ordered = heapq.merge(*streams, key=key, reverse=query.order == "desc")
    page: list[Row] = []
    for i, row in enumerate(ordered):
        if i >= offset + limit:
            break
        if i >= offset:
            page.append(row)
    counts = dict.fromkeys(CHIPS, 0)
    for a in answers:
        for chip, n in a.counts.items():
            counts[chip] = counts.get(chip, 0) + n
    more = page and offset + len(page) < sum(a.beyond for a in answers)
    return ListPage(
        entries=[ListEntry.of(r) for r in page],
        matching=sum(a.matching for a in answers),
        total=sum(a.total for a in answers),
        counts=counts,
        next_after=list(key(page[-1])) if more else None,
    )
