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

from replenisher.domain.sku import Listed, SkuRecord, run_id_of

SKU_LIST = "SkuList"  # the virtual object that keeps the shards
SHARDS = 8
BUCKETS = 128  # per shard: 1,024 buckets, about 100 entries each at 100,000 SKUs
FAILED_OUTCOMES = ("gave_up", "cancelled", "unknown")  # a last run that ended so is failing, without a new one
CHIPS = ("manager", "supplier", "below-safety", "over-budget", "failing")
DETAIL = 80  # characters of the last outcome's detail an entry keeps: what a list's line shows
MAX_SKUS = 1_000_000  # the most SKUs a query may name: more than one node is measured to hold
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


SHARD_KEYS = tuple(shard_key(shard) for shard in range(SHARDS))


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
    wait_run: int | None
    wait_seq: int
    detail: str | None
    waiting_until: float | None
    supplier: str | None


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
    wait_run: int | None = Field(
        default=None,
        ge=1,
        description="the number of the run whose wait, asked price and since these are; None: the entry says "
        "nothing of a wait (an agent's put keeps the wait the list holds)",
    )
    wait_seq: int = Field(default=0, ge=0, description="that run's count of what it said of its waits: a newer wins")
    detail: str | None = Field(default=None, max_length=DETAIL, description="the last run's outcome, shortened")
    waiting_until: float | None = Field(default=None, description="the wait's deadline")
    supplier: str | None = Field(
        default=None, max_length=64, description="the supplier of the asked price: the PO's, else the best quote's"
    )

    def row(self) -> Row:
        return Row(*(getattr(self, name) for name in Row._fields))

    @classmethod
    def of(cls, row: Sequence[Any]) -> ListEntry:
        return cls.model_validate(dict(zip(Row._fields, row, strict=True)))


def entry_of(record: SkuRecord, revision: int) -> ListEntry:
    """The agent's part of its SKU's entry: what its record says now. The wait is its run's to say."""
    last, check = record.last_outcome, record.last_check
    if check is not None and last is not None and last.outcome == "received" and last.ended_at >= check.at:
        check = None  # goods came in since the agent last read its stock: it does not know the level now
    return ListEntry(
        sku=record.sku,
        revision=revision,
        watched=record.watch.watching,
        runs=record.runs_started,
        active_run=record.active.run_id if record.active else None,
        outcome=last.outcome if last else None,
        ended_at=last.ended_at if last else None,
        on_hand=check.on_hand if check else None,
        safety_stock=check.safety_stock if check else None,
        # A last run that failed with none after it counts as failing by its outcome (`_scan`), not a problem.
        detail=_short(last.detail, DETAIL) if last is not None and last.detail else None,
    )


def refilled(record: SkuRecord, wait: WaitEntry | None) -> ListEntry:
    """The SKU's entry as a fill of the list writes it from the agent's record and its active run's wait
    (read from Restate's storage): under the revision the agent last put, so any put the agent makes
    after wins, and with the wait counted 0, so any the run tells after wins."""
    entry = entry_of(record, record.listed.revision)
    if wait is None:
        return entry
    return entry.model_copy(update=wait.told() | {"wait_seq": 0})


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def listing(record: SkuRecord) -> ListEntry | None:
    """The entry for the agent to put on the list, its revision counted up, when it differs from the last
    one it put (recorded in `record.listed`); None when the list already says this."""
    entry = entry_of(record, record.listed.revision + 1)
    digest = hashlib.blake2b(entry.model_dump_json(exclude={"revision"}).encode(), digest_size=8).hexdigest()
    if digest == record.listed.digest:
        return None
    record.listed = Listed(revision=entry.revision, digest=digest)
    return entry


# How a bucket keeps an entry: `{sku: [revision, watched, runs, run, tool, since, price, outcome, ended,
# on hand, safety stock, cover, problem, wait's run, wait's seq, detail, until, supplier]}`, the common words as small
# numbers, times in whole seconds and the run by its number, so a shard's page read ships and parses
# half the bytes. Two writers share an entry: the agent (revision to problem, but the wait) and its
# active run (the wait: tool, since, price, until, supplier, with the run's number and its own count).
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
        entry.wait_run,
        entry.wait_seq,
        entry.detail,
        _seconds(entry.waiting_until),
        entry.supplier,
    ]


def decode(sku: str, kept: list[Any]) -> Row:
    """An entry as kept, its wait shown only while its run is the agent's active one."""
    rev, watched, runs, run, tool, since, price, outcome, ended, on_hand, safety, cover, problem, *rest = kept
    wrun, wseq, detail, until, supplier = rest
    if wrun is None or wrun != run:
        tool = since = price = until = supplier = None
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
        wrun,
        wseq,
        detail,
        until,
        supplier,
    )


Kept = tuple[str, list[Any]]  # a SKU and its entry as its bucket keeps it: what a shard scans


def pack(bucket: dict[str, list[Any]]) -> bytes:
    """A bucket as its state key holds it: compact JSON, compressed. A reader reads a bucket again each
    time it changed, and Restate's cost for that follows the bytes (`make bench-list`)."""
    return zlib.compress(json.dumps(bucket, separators=(",", ":")).encode(), 1)


def unpack(kept: bytes | None) -> dict[str, list[Any]] | None:
    return None if kept is None else json.loads(zlib.decompress(kept))


_AGENT = slice(0, 4)  # revision, watched, runs, run
_AGENT_TOO = (7, 8, 9, 10, 11, 12, 15)  # outcome, ended, on hand, safety stock, cover, problem, detail
_WAIT = (4, 5, 6, 13, 14, 16, 17)  # tool, since, price, the wait's run and seq, until, supplier


def _newer_wait(new: list[Any], held: list[Any]) -> bool:
    """Whether `new`'s wait replaces `held`'s: a later run's, or the same run's with a count not lower."""
    if new[13] is None:
        return False
    return held[13] is None or (new[13], new[14]) >= (held[13], held[14])


def put_row(bucket: dict[str, list[Any]] | None, entry: ListEntry) -> dict[str, list[Any]] | None:
    """The bucket with the entry in it, or None if it changes nothing there. The agent's part replaces
    the held one unless that has a newer revision; the wait replaces the held wait when newer, and an
    entry that says nothing of a wait (`wait_run` None) keeps the held one."""
    bucket = dict(bucket or {})
    new = encode(entry)
    held = bucket.get(entry.sku)
    if held is None:
        bucket[entry.sku] = new
        return bucket
    merged = list(held)
    if new[0] >= held[0]:
        merged[_AGENT] = new[_AGENT]
        for i in _AGENT_TOO:
            merged[i] = new[i]
    if _newer_wait(new, held):
        for i in _WAIT:
            merged[i] = new[i]
    if merged == held:
        return None
    bucket[entry.sku] = merged
    return bucket


class WaitEntry(BaseModel):
    """What a run says of its wait (`SkuList/put_wait`): the wait it is in now, or none."""

    model_config = ConfigDict(extra="forbid")

    sku: str = Field(min_length=1, max_length=64)
    run: int = Field(ge=1, description="the run's number among its SKU's runs")
    seq: int = Field(ge=0, description="the run's count of what it said of its waits: a newer wins")
    tool: str | None = Field(default=None, max_length=40, description="the wait; None: it waits for nothing now")
    since: float | None = Field(default=None, description="when it began; None: when the list hears of it")
    price: float | None = Field(default=None, ge=0, description="the price it asks approval of, or its best quote")
    until: float | None = Field(default=None, description="the wait's deadline")
    supplier: str | None = Field(default=None, max_length=64, description="whose price that is")

    def told(self) -> dict[str, Any]:
        """What it says, as an entry's fields."""
        return {
            "waiting_tool": self.tool,
            "waiting_since": self.since,
            "asked_price": self.price,
            "waiting_until": self.until,
            "supplier": self.supplier,
            "wait_run": self.run,
            "wait_seq": self.seq,
        }

    def entry(self, held: list[Any] | None) -> ListEntry:
        """As an entry for `put_row`: the held agent's part unchanged (revision 0 when none is held yet)."""
        agent = ListEntry.of(decode(self.sku, held)) if held is not None else ListEntry(sku=self.sku, revision=0)
        return agent.model_copy(update=self.told())


Cursor = list[str | float | int]


class Versions(BaseModel):
    """A shard's count of writes to each bucket, kept beside them (`VERSIONS`), so a reader that holds
    a bucket's rows knows whether they are still current without reading the bucket again. `epoch` is
    new whenever the shard starts afresh, so counts that restart from zero never match rows held from before."""

    epoch: str
    of: list[int] = Field(default_factory=lambda: [0] * BUCKETS)
    filled: bool = Field(
        default=False,
        description="the shard was filled from the agents' records (`SkuList/mark_filled`): it has every "
        "agent's entry, not only those of agents that changed since this code ran",
    )

    def bumped(self, bucket: int) -> Versions:
        of = list(self.of)
        of[bucket] += 1
        return self.model_copy(update={"of": of})


VERSIONS = "versions"


class ShardCache:
    """The rows of one shard's buckets as a reader last read them, each with the version it read.
    Bounded by the shard itself: one entry per bucket."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.held: dict[int, tuple[int, list[Kept]]] = {}

    def stale(self, versions: Versions) -> list[int]:
        """The buckets to read again: written since they were read, or never read."""
        if versions.epoch != self.epoch:
            self.epoch, self.held = versions.epoch, {}
        return [b for b, v in enumerate(versions.of) if v and self.held.get(b, (-1, []))[0] != v]

    def keep(self, bucket: int, version: int, entries: list[Kept]) -> None:
        self.held[bucket] = (version, entries)

    def entries(self) -> list[Kept]:
        return [kept for _, entries in self.held.values() for kept in entries]


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
    failing_too: list[str] = Field(
        default_factory=list,
        max_length=MAX_SKUS,
        description="SKUs that count as failing whatever their entries say: a call Restate paused, a run "
        "retrying a step (each shard is sent its own, `for_shard`)",
    )
    after: Cursor | None = Field(
        default=None,
        max_length=3,
        description="the sort key of the last row already shown (`ListPage.next_after`): rows past it only",
    )

    def for_shard(self, shard: int) -> ShardQuery:
        """The query as `shard` is asked it: with only its own SKUs of `failing_too`."""
        if not self.failing_too:
            return self
        return self.model_copy(update={"failing_too": [s for s in self.failing_too if shard_of(s) == shard]})


class ShardAnswer(BaseModel):
    rows: list[list[Any]] = Field(
        description="the shard's first `upto` entries past `after`, in the query's order, each `[sku, *kept]`"
    )
    matching: int = Field(description="the rows the search and filters chose, past the cursor or not")
    beyond: int = Field(description="of those, the rows past the cursor")
    total: int
    counts: dict[str, int]
    filled: bool = Field(default=False, description="the shard holds every agent's entry (`Versions.filled`)")


_MANAGER = {TOOL_CODES["wait_for_approval"]}
_SUPPLIER = {TOOL_CODES["wait_for_supplier_reply"], TOOL_CODES["wait_for_goods"]}
_FAILED = {OUTCOME_CODES[o] for o in FAILED_OUTCOMES}
# Positions in a kept entry (`encode`).
_RUN, _TOOL, _SINCE, _PRICE, _OUTCOME, _ENDED, _ON_HAND, _SAFETY, _COVER, _PROBLEM, _WRUN = range(3, 14)


def kept_of(bucket: dict[str, list[Any]] | None) -> list[Kept]:
    """A bucket's entries as a shard scans them: not decoded, so a page pays only for the rows it sends."""
    return list((bucket or {}).items())


def sort_key(key: SortKey, now: float) -> Callable[[Kept], tuple[Any, ...]]:
    """The SKUs page's orders: the emptiest shelf against its safety stock, the least cover, the longest
    wait, the last outcome (newest first within one) or the SKU; ties by SKU, so every shard agrees.
    Every part is JSON (no infinity), so a key can come back as a page's cursor."""

    def of(kept: Kept) -> tuple[Any, ...]:
        sku, k = kept
        if key == "stock":
            if k[_ON_HAND] is None:
                return (FAR, sku)
            return (k[_ON_HAND] / max(k[_SAFETY] or 0, 1), sku)
        if key == "cover":
            return (FAR if k[_COVER] is None else k[_COVER], sku)
        if key == "waiting":
            shown = k[_SINCE] is not None and k[_WRUN] is not None and k[_WRUN] == k[_RUN]
            return (-(now - k[_SINCE]) if shown else FAR, sku)
        if key == "outcome":
            outcome = k[_OUTCOME]
            return (_OUTCOMES.get(outcome, outcome) or "~", -(k[_ENDED] or 0), sku)
        return (sku,)

    return of


def counts_of(entries: Iterable[Kept], budget: float | None) -> dict[str, int]:
    return _scan(entries, ShardQuery(now=0.0, upto=0, budget=budget))[1]


def _scan(entries: Iterable[Kept], query: ShardQuery) -> tuple[list[Kept], dict[str, int]]:
    """One pass: the entries the search and filters choose, and the counts per chip over every entry.
    Written out in one loop over the kept form: it runs once per SKU per page."""
    needle = query.q.strip().lower()
    budget = query.budget
    waiting, flag = query.waiting, query.flag
    stopped = frozenset(query.failing_too)
    manager_codes, supplier_codes, failed = _MANAGER, _SUPPLIER, _FAILED
    manager = supplier = below = over = bad = 0
    chosen: list[Kept] = []
    for kept in entries:
        sku, k = kept
        current = k[_WRUN] is not None and k[_WRUN] == k[_RUN]  # a wait shows while its run is active
        tool = k[_TOOL] if current else None
        if tool is None:
            on = None
        elif tool in manager_codes:
            on = "manager"
            manager += 1
        elif tool in supplier_codes:
            on = "supplier"
            supplier += 1
        else:
            on = "someone"
        on_hand, safety = k[_ON_HAND], k[_SAFETY]
        is_below = on_hand is not None and safety is not None and on_hand < safety
        below += is_below
        price = k[_PRICE] if current else None
        is_over = budget is not None and price is not None and price > budget
        over += is_over
        is_failing = k[_PROBLEM] is not None or (k[_RUN] is None and k[_OUTCOME] in failed) or sku in stopped
        bad += is_failing
        if needle and needle not in sku.lower():
            continue
        if waiting != "any" and (
            (on is not None) if waiting == "nobody" else (on is None) if waiting == "someone" else on != waiting
        ):
            continue
        if flag != "all" and not (
            is_below if flag == "below-safety" else is_over if flag == "over-budget" else is_failing
        ):
            continue
        chosen.append(kept)
    counts = {"manager": manager, "supplier": supplier, "below-safety": below, "over-budget": over, "failing": bad}
    return chosen, counts


def answer(entries: list[Kept], query: ShardQuery, filled: bool = False) -> ShardAnswer:
    """One shard's part of a page: its first `upto` chosen entries past the cursor in order (as kept,
    each `[sku, *entry]`), how many it chose, how many lie past the cursor, and its counts per chip."""
    chosen, counts = _scan(entries, query)
    key = sort_key(query.sort, query.now)
    descending = query.order == "desc"
    past = chosen
    if query.after is not None:
        after = tuple(query.after)
        past = [e for e in chosen if (key(e) < after if descending else key(e) > after)]
    first = heapq.nlargest(query.upto, past, key) if descending else heapq.nsmallest(query.upto, past, key)
    return ShardAnswer(
        rows=[[sku, *k] for sku, k in first],
        matching=len(chosen),
        beyond=len(past),
        total=len(entries),
        counts=counts,
        filled=filled,
    )


class ListPage(BaseModel):
    entries: list[ListEntry]
    matching: int = Field(description="the SKUs the query chose, on every page")
    total: int = Field(description="every SKU on the list")
    counts: dict[str, int] = Field(description="SKUs per filter chip, whatever the query")
    next_after: Cursor | None = Field(default=None, description="the cursor of the page after this one, if any")
    filled: bool = Field(
        default=False, description="every shard holds every agent's entry; else fill it first (`fill_list`)"
    )


def merge(answers: Iterable[ShardAnswer], query: ShardQuery, offset: int, limit: int) -> ListPage:
    """The page `offset` to `offset + limit` past the query's cursor, from every shard's answer to
    `query` (its `upto` at least `offset + limit`)."""
    answers = list(answers)
    key = sort_key(query.sort, query.now)
    streams = [[(r[0], r[1:]) for r in a.rows] for a in answers]
    ordered = heapq.merge(*streams, key=key, reverse=query.order == "desc")
    page: list[Kept] = []
    for i, kept in enumerate(ordered):
        if i >= offset + limit:
            break
        if i >= offset:
            page.append(kept)
    counts = dict.fromkeys(CHIPS, 0)
    for a in answers:
        for chip, n in a.counts.items():
            counts[chip] = counts.get(chip, 0) + n
    more = page and offset + len(page) < sum(a.beyond for a in answers)
    return ListPage(
        entries=[ListEntry.of(decode(sku, k)) for sku, k in page],
        matching=sum(a.matching for a in answers),
        total=sum(a.total for a in answers),
        counts=counts,
        next_after=list(key(page[-1])) if more else None,
        filled=bool(answers) and all(a.filled for a in answers),
    )
